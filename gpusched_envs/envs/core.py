"""What every cluster env shares, the single-agent Gymnasium envs (:class:`~gpusched_envs.envs.base.ClusterEnv`) and
the multi-agent ``multi_scheduler_v1`` alike: the argument checks, the one-integer action parser and its errors, the
observation / render / invalid-action choices, the episode spec (cluster, workload and simulator settings: what a new
episode's :class:`~gpusched_envs.sim.Simulator` is built from) and the reward integral between two marks."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from gpusched_envs.envs.encoding import INFORMATION, OBS_MODES
from gpusched_envs.envs.features import RunningTotals
from gpusched_envs.sim import SimConfig, Simulator
from gpusched_envs.sim.topology import Cluster, load_cluster
from gpusched_envs.sim.workload import Workload

# every observation mode of the encoder; the envs without an image encoding offer the other two
NON_IMAGE_OBS_MODES = ("graph", "flat")
RENDER_MODES = ("ansi", "rgb_array")
INVALID_ACTIONS = ("penalize", "raise")
# invalid actions in a row (the state does not move between them) after which the env takes its safe action itself
DEFAULT_MAX_INVALID_REPEATS = 8
SPEED_MODELS = ("throughput", "duration")

WorkloadArg = str | Workload | Callable[[Cluster, np.random.Generator], Workload] | None


def metrics_info(metrics: dict | None, keys: tuple[str, ...]) -> dict[str, np.float64]:
    """The ``info["metrics"]`` dict of the fixed ``keys``, each a float64 numpy scalar: 0.0 while ``metrics`` is
    None (the episode has not ended: ``info["episode_done"]`` is False; not NaN, so that two equal infos compare
    equal, as Gymnasium's ``check_env`` asks), else the value (NaN where the metric is undefined or missing)."""
    if metrics is None:
        zeros = _ZERO_METRICS.get(keys)
        if zeros is None:
            zeros = _ZERO_METRICS[keys] = dict.fromkeys(keys, np.float64(0.0))
        return zeros.copy()  # a new dict each time (numpy scalars are immutable: one zero serves every entry)
    return {k: np.float64(metrics.get(k, np.nan)) for k in keys}


_ZERO_METRICS: dict[tuple[str, ...], dict[str, np.float64]] = {}


class InvalidActionError(ValueError):
    """An action that is malformed (not one integer of the action space) or, with ``invalid_action="raise"``, one
    the mask forbids."""


class EpisodeEndedError(gym.error.ResetNeeded, InvalidActionError, RuntimeError):
    """``step`` when there is no episode to step: after it terminated (every job finished) or, multi-agent, before
    ``reset()``. A ``ValueError`` (misuse) as well as Gymnasium's ``ResetNeeded``."""


# ---------------------------------------------------------------------------------------------------- argument checks
def check_int(name: str, value, low: int | None = None) -> int:
    """``value`` as an int (Python or numpy integer, not a bool / float / string), ``>= low``; else a ValueError
    naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    if low is not None and value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return int(value)


def check_number(name: str, value, low: float | None = None, positive: bool = False) -> float:
    """``value`` as a finite float (``> 0`` with ``positive``, ``>= low``); else a ValueError naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if positive and v <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    if low is not None and v < low:
        raise ValueError(f"{name} must be >= {low}, got {value!r}")
    return v


def check_bool(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")
    return bool(value)


def check_choice(name: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")


def check_action_value(action, n: int | None = None, where: str = "action") -> int:
    """One action: an integer (or an integral float, or a one-element array of one), in ``0..n-1`` when ``n`` is
    given; anything else (NaN, inf, 0.7, a vector, a string) raises :class:`InvalidActionError` naming ``where``
    (``"action"``, or ``"actions['scheduler_0']"`` for one agent's)."""
    if type(action) is int or type(action) is np.int64:  # the usual case, without the array round trip
        if n is None or 0 <= action < n:
            return int(action)
        raise InvalidActionError(f"{where} {action} outside 0..{n - 1}")
    span = "" if n is None else f" in 0..{n - 1}"
    try:
        arr = np.asarray(action)
    except Exception as exc:  # an object numpy cannot read
        raise InvalidActionError(f"{where}: expected one integer{span}, got {action!r}") from exc
    if arr.size != 1:
        raise InvalidActionError(f"{where}: expected one integer{span}, got shape {arr.shape}")
    value = arr.reshape(()).item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidActionError(f"{where}: expected one integer{span}, got {action!r}")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise InvalidActionError(f"{where}: expected an integer{span}, got {value!r}")
    a = int(value)
    if n is not None and not 0 <= a < n:
        raise InvalidActionError(f"{where} {a} outside 0..{n - 1}")
    return a


# ---------------------------------------------------------------------------------------------------- episodes
def resolve_cluster(cluster: str | Cluster, catalog=None) -> Cluster:
    """A preset name, a YAML path or a built :class:`Cluster`."""
    if isinstance(cluster, Cluster):
        return cluster
    return load_cluster(cluster, catalog=catalog)


def default_workload_spec(cluster: Cluster, num_jobs: int, load: float) -> str:
    """Philly-fitted synthetic arrivals at the given offered load on this cluster, job sizes capped at its size."""
    return f"synthetic:jobs={num_jobs},load={load},gpus={cluster.num_gpus},max_gpus={cluster.num_gpus}"


def make_workload(workload: WorkloadArg, cluster: Cluster, seed: int, num_jobs: int, load: float) -> Workload:
    """The workload of one episode: a fixed :class:`Workload`, a spec string sized to the cluster
    (:func:`~gpusched_envs.workloads.sizing.fit_workload_to_cluster`, as ``gpusched simulate`` does) and loaded with
    ``seed``, or a generator ``f(cluster, rng)``; ``None`` is :func:`default_workload_spec`."""
    from gpusched_envs.workloads import load_workload
    from gpusched_envs.workloads.sizing import fit_workload_to_cluster

    if isinstance(workload, Workload):
        return workload
    if workload is None:
        return load_workload(default_workload_spec(cluster, num_jobs, load), seed=seed)
    if isinstance(workload, str):
        return load_workload(fit_workload_to_cluster(workload, cluster), seed=seed)
    if callable(workload):
        return workload(cluster, np.random.default_rng(seed))
    raise TypeError(
        f"workload must be a spec string, a Workload or a callable, got {type(workload).__name__}"
    )


@dataclass(frozen=True)
class EpisodeSpec:
    """What a new episode is built from: the cluster, the workload argument (a spec string, a :class:`Workload`, a
    generator ``f(cluster, rng)`` or None for :func:`default_workload_spec` of ``num_jobs`` jobs at offered load
    ``load``), the workload seed (None: drawn per episode), and the simulator's interference and speed model.
    :meth:`checked` builds one from an env's arguments; :meth:`simulator` builds an episode's simulator."""

    cluster: Cluster
    workload_arg: WorkloadArg
    workload_seed: int | None
    num_jobs: int
    load: float
    interference: bool
    speed_model: str

    @classmethod
    def checked(
        cls,
        cluster: Cluster,
        workload_arg: WorkloadArg,
        workload_seed,
        num_jobs,
        load,
        interference,
        speed_model: str,
    ) -> EpisodeSpec:
        """A spec from an env's arguments, each checked (a ValueError names the bad one)."""
        check_choice("speed_model", speed_model, SPEED_MODELS)
        return cls(
            cluster=cluster,
            workload_arg=workload_arg,
            workload_seed=None if workload_seed is None else check_int("workload_seed", workload_seed, 0),
            num_jobs=check_int("num_jobs", num_jobs, 1),
            load=check_number("load", load, positive=True),
            interference=check_bool("interference", interference),
            speed_model=speed_model,
        )

    def workload(self, seed: int) -> Workload:
        """The workload of an episode whose workload seed is ``seed``."""
        return make_workload(self.workload_arg, self.cluster, seed, self.num_jobs, self.load)

    def simulator(self, rng: np.random.Generator) -> Simulator:
        """The simulator of a new episode: workload and simulator seeds drawn from ``rng`` in that order (the
        workload seed unless ``workload_seed`` fixes it). On a cluster of VC pools a job larger than its VC's quota
        is dropped with a warning, as in ``gpusched simulate``."""
        wl_seed = int(rng.integers(2**31)) if self.workload_seed is None else int(self.workload_seed)
        sim_seed = int(rng.integers(2**31))
        config = SimConfig(
            seed=sim_seed,
            interference=self.interference,
            speed_model=self.speed_model,
            oversize="drop" if self.cluster.pool_names else "error",
        )
        return Simulator(self.cluster, self.workload(wl_seed), config)


class SpecField:
    """An env attribute that reads one field of the env's :class:`EpisodeSpec` (``env.episode``); setting it
    replaces the spec by a copy with that field changed (e.g. a new task's cluster from the next ``reset`` on)."""

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, env, owner=None):
        if env is None:
            return self
        return getattr(env.episode, self.name)

    def __set__(self, env, value) -> None:
        env.episode = dataclasses.replace(env.episode, **{self.name: value})


class EnvCore:
    """Mixin of every cluster env, single- or multi-agent: the fields of its :class:`EpisodeSpec` (``self.episode``)
    read as env attributes (``env.cluster``, ``env.num_jobs``, ...), and :meth:`_set_common_args` checks and sets the
    arguments every cluster env takes. A subclass names the observation modes it offers (``obs_modes_offered``) and
    its render modes (``metadata["render_modes"]``)."""

    metadata: dict
    obs_modes_offered: tuple[str, ...] = OBS_MODES
    episode: EpisodeSpec
    cluster = SpecField()
    workload_arg = SpecField()
    workload_seed = SpecField()
    num_jobs = SpecField()
    load = SpecField()
    interference = SpecField()
    speed_model = SpecField()

    def _set_common_args(
        self, obs_mode, render_mode, invalid_action, information, window, time_scale, invalid_penalty
    ) -> None:
        """Check (a ValueError names the bad one) and set ``obs_mode``, ``render_mode``, ``invalid_action``,
        ``information``, ``window``, ``time_scale`` and ``invalid_penalty``."""
        check_choice("obs_mode", obs_mode, OBS_MODES)
        check_choice("invalid_action", invalid_action, INVALID_ACTIONS)
        check_choice("render_mode", render_mode, (None, *self.metadata["render_modes"]))
        check_choice("information", information, INFORMATION)
        if obs_mode not in self.obs_modes_offered:
            raise ValueError(
                f"{type(self).__name__} offers obs_mode 'graph' or 'flat'; 'image' observations are offered by "
                "JobSelect-v1 and WorkerPlacement-v1"
            )
        self.obs_mode, self.render_mode, self.invalid_action, self.information = (
            obs_mode,
            render_mode,
            invalid_action,
            information,
        )
        self.window = check_int("window", window, 1)
        self.time_scale = check_number("time_scale", time_scale, positive=True)
        self.invalid_penalty = check_number("invalid_penalty", invalid_penalty)


# ---------------------------------------------------------------------------------------------------- rewards
REWARDS = ("throughput", "jct", "slowdown")
Mark = tuple[float, float, float]


class RewardIntegral:
    """The reward accrued by one :class:`RunningTotals` between two marks: ``"jct"`` ``−Δ(jobs in system × time) /
    time_scale`` (weight 1: the return of a full episode is ``−Σ JCT / time_scale``), ``"slowdown"`` ``−Δ`` of the
    weighted integral (weights 1 / ideal runtime), ``"throughput"`` the goodput made minus the GPU-seconds that
    passed, over the cluster's GPUs × ``time_scale``."""

    def __init__(self, totals: RunningTotals, kind: str, time_scale: float):
        check_choice("reward", kind, REWARDS)
        self.totals, self.kind, self.time_scale = totals, kind, time_scale

    def mark(self) -> Mark:
        """(time, accrued weighted time, goodput) now (goodput only for ``"throughput"``)."""
        t = self.totals
        return (t.sim.now, t.weighted_time(), t.goodput() if self.kind == "throughput" else 0.0)

    def between(self, then: Mark, now: Mark) -> float:
        """The reward from mark ``then`` to mark ``now``."""
        if self.kind == "throughput":
            g = self.totals.sim.cluster.num_gpus
            return (now[2] - then[2] - g * (now[0] - then[0])) / (g * self.time_scale)
        if self.kind == "jct":
            return -(now[1] - then[1]) / self.time_scale
        return -(now[1] - then[1])

    def since(self, then: Mark) -> float:
        """The reward from mark ``then`` to now."""
        return self.between(then, self.mark())
