"""The MetaPlace task distribution over ``WorkerPlacement-v1`` (Yang, Bao et al., IEEE TCC 2023).

A task fixes the workload and the cluster an episode runs on: the **model mix** (which catalogue models the jobs
train, with weights), the **arrival rate** (offered load, Poisson or diurnal arrivals), the **job-size mix** (the
largest job size; sizes are drawn from the Philly fit restricted to it), the **interference strength** (a factor
on the catalogue's co-location slowdowns) and the **cluster preset**. :class:`TaskDistribution` draws tasks from a
seeded generator; :func:`train_tasks` and :func:`heldout_tasks` are two disjoint sets fixed by their seeds (the
held-out set is drawn from its own seed stream and any task equal to a training task is redrawn).

**Drift mode** (:class:`DriftTask`): the task changes mid-episode. The first ``drift_at`` share of the jobs come
from one task's workload, the rest from another's (model mix, load and size mix change; the second part's arrivals
start where the first part's end). The cluster and its interference strength are the first task's: the simulator's
cluster is fixed for an episode.

    env = gym.make("gpusched/WorkerPlacement-v1", cluster="topdrl", num_jobs=30)
    tasks = train_tasks(8, seed=0, num_jobs=30)
    env.unwrapped.set_task(tasks[0]); obs, info = env.reset(seed=1)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from gpusched_envs.envs.worker_placement import PlacementTask
from gpusched_envs.sim.workload import Workload

# model mixes of the distribution: compute-bound vision, communication-heavy language / recommendation models, and
# mixes of both (catalogue names, gpusched_envs/data/catalog.yaml); the last two are only in the held-out pool
TRAIN_MODEL_MIXES: tuple[str, ...] = (
    "resnet50+vgg16",
    "bert+transformer",
    "resnet50+bert@2",
    "vgg16+lm+recommendation",
    "resnet18+cifar10+ncf",
    "imagenet+deepspeech2",
)
HELDOUT_MODEL_MIXES: tuple[str, ...] = ("vgg16+bert+yolov3", "transformer+lm@2+a3c")


@dataclass(frozen=True)
class SizedTask(PlacementTask):
    """A :class:`PlacementTask` with a job-size mix: job sizes drawn from the Philly fit restricted to
    ``<= max_gpus`` (None: the cluster's size)."""

    max_gpus: int | None = None

    def workload_spec(self, num_gpus: int) -> str:
        cap = num_gpus if self.max_gpus is None else min(int(self.max_gpus), num_gpus)
        spec = (
            f"synthetic:jobs={self.num_jobs},load={self.load},gpus={num_gpus},max_gpus={cap},"
            f"arrival={self.arrival}"
        )
        return spec + (f",models={self.models}" if self.models else "")


class DriftWorkload:
    """``f(cluster, rng) -> Workload``: ``first``'s workload for the first ``drift_at`` share of the jobs, then
    ``second``'s (arrivals continue from the last arrival of the first part)."""

    def __init__(self, first: PlacementTask, second: PlacementTask, drift_at: float):
        self.first, self.second, self.drift_at = first, second, float(drift_at)

    def __call__(self, cluster, rng: np.random.Generator) -> Workload:
        from gpusched_envs.workloads import load_workload

        n = self.first.num_jobs
        n1 = min(n - 1, max(1, int(round(n * self.drift_at))))
        seeds = rng.integers(2**31, size=2)
        g = cluster.num_gpus
        a = load_workload(dataclasses.replace(self.first, num_jobs=n1).workload_spec(g), seed=int(seeds[0]))
        b = load_workload(
            dataclasses.replace(self.second, num_jobs=n - n1).workload_spec(g), seed=int(seeds[1])
        )
        names = tuple(dict.fromkeys(a.model_names + b.model_names))

        def remap(w: Workload) -> np.ndarray:
            lut = np.array([names.index(m) for m in w.model_names] + [-1], dtype=np.int16)
            return lut[np.where(w.model >= 0, w.model, len(w.model_names))]

        shift = float(a.submit_time[-1]) - float(b.submit_time[0])
        return Workload.from_columns(
            f"drift({a.name}->{b.name})",
            np.concatenate([a.submit_time, b.submit_time + shift]),
            np.concatenate([a.duration, b.duration]),
            np.concatenate([a.num_gpus, b.num_gpus]),
            model=np.concatenate([remap(a), remap(b)]),
            model_names=names,
            source=f"drift at job {n1}: {a.source} then {b.source}",
            meta={"generator": "drift", "drift_job": n1},
        )


@dataclass(frozen=True)
class DriftTask(SizedTask):
    """A task whose workload switches to ``then`` after the first ``drift_at`` share of the jobs (same cluster and
    interference as this task). ``workload_spec`` returns a :class:`DriftWorkload` callable (the env accepts one
    wherever it accepts a spec string)."""

    then: SizedTask | None = None
    drift_at: float = 0.5

    def workload_spec(self, num_gpus: int):  # type: ignore[override]
        if self.then is None:
            return super().workload_spec(num_gpus)
        first = SizedTask(**{f.name: getattr(self, f.name) for f in dataclasses.fields(SizedTask)})
        return DriftWorkload(first, dataclasses.replace(self.then, num_jobs=self.num_jobs), self.drift_at)


@dataclass(frozen=True)
class TaskDistribution:
    """Ranges of every task dimension; :meth:`sample` draws tasks from a seeded generator."""

    clusters: tuple[str, ...] = ("topdrl",)
    model_mixes: tuple[str, ...] = TRAIN_MODEL_MIXES
    loads: tuple[float, float] = (0.6, 1.2)
    arrivals: tuple[str, ...] = ("poisson", "diurnal")
    max_gpus: tuple[int, ...] = (2, 4, 8)
    interference: tuple[float, float] = (1.0, 2.0)
    num_jobs: int = 30
    extra: dict = field(default_factory=dict)  # reserved for callers' notes; not used in sampling

    def sample(self, n: int, rng: np.random.Generator) -> list[SizedTask]:
        out = []
        for _ in range(int(n)):
            out.append(
                SizedTask(
                    cluster=str(self.clusters[int(rng.integers(len(self.clusters)))]),
                    load=round(float(rng.uniform(*self.loads)), 3),
                    num_jobs=self.num_jobs,
                    arrival=str(self.arrivals[int(rng.integers(len(self.arrivals)))]),
                    interference=round(float(rng.uniform(*self.interference)), 3),
                    models=str(self.model_mixes[int(rng.integers(len(self.model_mixes)))]),
                    max_gpus=int(self.max_gpus[int(rng.integers(len(self.max_gpus)))]),
                )
            )
        return out


def default_distribution(num_jobs: int = 30, clusters: tuple[str, ...] = ("topdrl",)) -> TaskDistribution:
    return TaskDistribution(clusters=tuple(clusters), num_jobs=int(num_jobs))


def heldout_distribution(num_jobs: int = 30, clusters: tuple[str, ...] = ("topdrl",)) -> TaskDistribution:
    """The held-out side: the training model mixes plus two mixes never trained on."""
    return dataclasses.replace(
        default_distribution(num_jobs, clusters), model_mixes=TRAIN_MODEL_MIXES + HELDOUT_MODEL_MIXES
    )


def train_tasks(n: int, seed: int = 0, num_jobs: int = 30, clusters: tuple[str, ...] = ("topdrl",)) -> list:
    """``n`` training tasks fixed by ``seed``."""
    return default_distribution(num_jobs, clusters).sample(n, np.random.default_rng([seed, 0]))


def heldout_tasks(
    n: int,
    seed: int = 0,
    num_jobs: int = 30,
    clusters: tuple[str, ...] = ("topdrl",),
    exclude: list | None = None,
) -> list:
    """``n`` held-out tasks fixed by ``seed`` (own seed stream; none equal to a task of ``exclude``, by default the
    first 64 training tasks of the same seed)."""
    banned = set(exclude if exclude is not None else train_tasks(64, seed, num_jobs, clusters))
    rng = np.random.default_rng([seed, 1])
    dist = heldout_distribution(num_jobs, clusters)
    out: list = []
    while len(out) < n:
        (t,) = dist.sample(1, rng)
        if t not in banned:
            out.append(t)
    return out


def drift_tasks(n: int, seed: int = 0, num_jobs: int = 30, clusters: tuple[str, ...] = ("topdrl",)) -> list:
    """``n`` held-out drift tasks: two held-out tasks (different model mixes) joined at the middle of the jobs."""
    rng = np.random.default_rng([seed, 2])
    dist = heldout_distribution(num_jobs, clusters)
    out = []
    while len(out) < n:
        a, b = dist.sample(2, rng)
        if a.models == b.models:
            continue
        out.append(DriftTask(**dataclasses.asdict(a), then=b, drift_at=0.5))
    return out
