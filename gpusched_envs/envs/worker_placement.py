"""``gpusched/WorkerPlacement-v1``: MetaPlace's setting, workers of the head job placed one server at a time, with
co-location interference, over a family of tasks (workload, arrival rate, cluster, interference) for meta-RL."""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from gpusched_envs.envs.base import (
    DEFAULT_MAX_INVALID_REPEATS,
    ClusterEnv,
    WorkloadArg,
    check_number,
    resolve_cluster,
)
from gpusched_envs.envs.encoding import NON_CLAIRVOYANT
from gpusched_envs.sim import kernels as _kernels
from gpusched_envs.sim.engine import FULL_GPU, RUNNING
from gpusched_envs.sim.topology import Cluster, load_cluster

_ANY_GPU = np.zeros(0, dtype=bool)  # no pool / type constraint


@dataclass(frozen=True)
class PlacementTask:
    """One variation of the setting (a meta-RL task)."""

    cluster: str = "topdrl"  # preset name or YAML path
    load: float = 0.9  # offered load of the synthetic workload
    num_jobs: int = 100
    arrival: str = "poisson"  # poisson | diurnal
    interference: float = 1.0  # multiplies the catalogue's co-location slowdown factors
    models: str | None = None  # model mix, e.g. "resnet50+bert@2" (None: the engine's seeded rule)

    def workload_spec(self, num_gpus: int) -> str:
        spec = (
            f"synthetic:jobs={self.num_jobs},load={self.load},gpus={num_gpus},max_gpus={num_gpus},"
            f"arrival={self.arrival}"
        )
        return spec + (f",models={self.models}" if self.models else "")

    def env_kwargs(self, num_gpus: int) -> dict:
        """The ``WorkerPlacement-v1`` kwargs that run this task as :meth:`WorkerPlacementEnv.set_task` does (its
        cluster, offered load, interference factor and synthetic workload on ``num_gpus`` GPUs, arrival process
        included), e.g. for a leaderboard scenario or a study's case."""
        return {
            "cluster": self.cluster,
            "num_jobs": self.num_jobs,
            "load": self.load,
            "interference_scale": self.interference,
            "workload": self.workload_spec(num_gpus),
        }


def scaled_interference_cluster(name: str, factor: float) -> Cluster:
    """A preset whose catalogue's co-location slowdowns are multiplied by ``factor`` (never below 1)."""
    base = load_cluster(name)
    if factor == 1.0:
        return base
    cat = base.catalog
    slow = np.maximum(1.0, cat.colocation_slowdown * factor)
    return load_cluster(name, catalog=dataclasses.replace(cat, colocation_slowdown=slow))


class WorkerPlacementEnv(ClusterEnv):
    """Place the workers of the head job one at a time on servers, or defer the job (MetaPlace, Yang et al. 2023).

    At a decision point the head is the oldest waiting job that is not deferred and for which enough GPUs are free.
    Each action puts its next worker on a server (the server's lowest-numbered free GPU not already taken by this
    job; a fractional-GPU job goes to the server GPU with the least room that still fits); when every worker is
    placed the job starts. Deferring drops the partial placement and moves on to the next candidate; when no
    candidate is left, the simulator runs to the next decision point (the deferrals then expire). Co-location
    interference is on: a job slows the jobs sharing its servers by the catalogue's pairwise factors.

    ## Action Space
    ``Discrete(servers + 1)``: ``s < servers`` puts the next worker on server ``s``; ``servers`` defers the head.
    ``servers`` is the largest server count over ``task_clusters`` (smaller clusters mask the padding). Valid:
    servers with a free GPU for the head not yet taken by it; deferring unless it would deadlock.

    ## Observation Space
    As :class:`~gpusched_envs.envs.job_select.JobSelectEnv` (``graph`` / ``image`` / ``flat``), with the GPUs taken
    by the partial placement in the ``in_placement`` columns / image channel; the window's first job is the head.
    ``context (4,)`` = (workers left ÷ workers, workers placed ÷ workers, workers ÷ GPUs, log1p(deferred jobs)).
    ``information`` (``"non-clairvoyant"`` default | ``"clairvoyant"``) sets the time columns as JobSelect-v1's
    (table in :mod:`gpusched_envs.envs.encoding`); the context carries nothing clairvoyant in either setting.

    ## Rewards
    ``−(jobs in system × elapsed time) / time_scale`` between decisions, exact over every event, so the
    undiscounted return of a full episode is ``−Σ JCT / time_scale``. Placing a worker takes no time (reward 0)
    unless it starts the job and the simulator then advances. Invalid actions (``"penalize"``): ``−invalid_penalty``.

    ## Episode End
    Terminates when every job has finished (a further ``step`` raises); truncates after ``max_steps`` actions or
    ``max_episode_steps``. ``info["metrics"]`` at the end (section Info).

    ## Info
    The same keys and dtypes at ``reset`` and at every ``step`` (vector envs, TorchRL, Minari and PettingZoo
    wrappers need a fixed structure): ``time`` (float64, simulated seconds), ``queued`` / ``running`` (int64, jobs
    waiting / running), ``invalid_action`` (bool_, this step's action was invalid), ``forced_action`` (int64: the
    action the env took for it after ``max_invalid_repeats`` invalid ones in a row, else -1), ``episode_done``
    (bool_, the episode ended at this step: terminated or truncated), ``metrics`` (a dict of the simulator's
    :data:`~gpusched_envs.sim.metrics.METRIC_KEYS`, each float64: the episode's metrics once ``episode_done``, 0.0
    before). ``env.unwrapped.episode_metrics()`` gives them at any time, e.g. after a hand-added ``TimeLimit``
    (or wrap it: ``EpisodeMetrics(TimeLimit(env, n))``; ``gym.make``'s own ``max_episode_steps`` is covered).
    The iteration times of the running jobs whose speed changed (MetaPlace's performance model): the
    :meth:`iteration_times` method.
    Why the last invalid action was refused: ``env.unwrapped.last_invalid_reason``.

    ## Invalid Actions
    ``invalid_action="penalize"`` (default): an action the mask forbids changes nothing and gives
    ``−invalid_penalty``, until ``max_invalid_repeats`` (default 8) of them come in a row: that one is replaced by
    :meth:`safe_action` (wait / defer when valid, else the first valid action), taken with the penalty, so
    simulated time always moves on and every episode ends. ``"raise"``: an :class:`InvalidActionError`.

    ## Heuristics
    ``heuristic_action(rule)``: the action of FIFO with backfill (the head rule) and a placement rule of
    :mod:`gpusched_envs.policies.placement`; played to the end it reproduces the simulator's run of that policy.

    ## Meta-RL
    ``sample_tasks(n)`` draws :class:`PlacementTask` variations (cluster from ``task_clusters``, offered load in
    ``task_loads``, interference factor in ``task_interference``, arrival process from ``task_arrivals``) from
    the env's seeded generator; ``set_task(task)`` switches to one from the next ``reset`` on. Spaces never change.

    ## Arguments
    ``cluster`` (``"topdrl"``), ``workload`` (None: the current task's synthetic workload; or a spec string,
    ``Workload`` or callable, as JobSelect-v1), ``num_jobs`` (100), ``load`` (0.9), ``window`` (8),
    ``information``, ``obs_mode``, ``max_steps``, ``time_scale`` (3600 s), ``invalid_action``, ``invalid_penalty``,
    ``max_invalid_repeats`` (8), ``interference_scale`` (1.0), ``workload_seed``, ``render_mode``, ``task_clusters``, ``task_loads``,
    ``task_interference``, ``task_arrivals``.

    ## Version History
    - v1: invalid actions resolve to :meth:`safe_action` after ``max_invalid_repeats`` in a row (episodes always
      end); fixed info keys and dtypes (section Info); synthetic workload specs sized to the cluster. ``-v0``
      still makes the same env for now.
    - v0: initial version.
    """

    heuristic_setting = "placement"  # which heuristics act here (gpusched_envs.policies.playable)

    context_names = ("workers_left", "workers_placed", "workers_per_gpu", "deferred")

    def __init__(
        self,
        cluster: str = "topdrl",
        workload: WorkloadArg = None,
        *,
        num_jobs: int = 100,
        load: float = 0.9,
        window: int = 8,
        information: str = NON_CLAIRVOYANT,
        obs_mode: str = "graph",
        max_steps: int | None = None,
        time_scale: float = 3600.0,
        invalid_action: str = "penalize",
        invalid_penalty: float = 1.0,
        max_invalid_repeats: int = DEFAULT_MAX_INVALID_REPEATS,
        interference_scale: float = 1.0,
        workload_seed: int | None = None,
        render_mode: str | None = None,
        task_clusters: tuple[str, ...] | None = None,
        task_loads: tuple[float, float] = (0.6, 1.2),
        task_interference: tuple[float, float] = (1.0, 1.5),
        task_arrivals: tuple[str, ...] = ("poisson", "diurnal"),
    ):
        self.task_clusters = (
            tuple(task_clusters) if task_clusters else (cluster if isinstance(cluster, str) else "",)
        )
        interference_scale = check_number("interference_scale", interference_scale, low=0.0)
        layout = tuple(resolve_cluster(c) for c in self.task_clusters if c)
        num_servers = max([c.num_servers for c in layout] + [resolve_cluster(cluster).num_servers])
        if isinstance(cluster, str) and interference_scale != 1.0:
            cluster = scaled_interference_cluster(cluster, interference_scale)
        super().__init__(
            cluster=cluster,
            workload=workload,
            num_jobs=num_jobs,
            load=load,
            window=window,
            obs_mode=obs_mode,
            reward="jct",
            max_steps=max_steps,
            time_scale=time_scale,
            invalid_action=invalid_action,
            invalid_penalty=invalid_penalty,
            max_invalid_repeats=max_invalid_repeats,
            interference=True,
            speed_model="throughput",
            workload_seed=workload_seed,
            render_mode=render_mode,
            context_size=4,
            num_actions=num_servers + 1,
            layout_clusters=layout,
            information=information,
        )
        self.task_loads, self.task_interference = tuple(task_loads), tuple(task_interference)
        self.task_arrivals = tuple(task_arrivals)
        self.task: PlacementTask | None = None
        self.defer_action = num_servers
        self.action_space = spaces.Discrete(num_servers + 1)

    # ------------------------------------------------------------------ meta-RL tasks
    def sample_tasks(self, n: int) -> list[PlacementTask]:
        """``n`` task variations drawn from the env's seeded generator (call ``reset(seed=...)`` first to seed it)."""
        rng = self.np_random
        names = [c for c in self.task_clusters if c] or ["topdrl"]
        out = []
        for _ in range(n):
            out.append(
                PlacementTask(
                    cluster=str(names[int(rng.integers(len(names)))]),
                    load=round(float(rng.uniform(*self.task_loads)), 3),
                    num_jobs=self.num_jobs,
                    arrival=str(self.task_arrivals[int(rng.integers(len(self.task_arrivals)))]),
                    interference=round(float(rng.uniform(*self.task_interference)), 3),
                )
            )
        return out

    def set_task(self, task: PlacementTask) -> None:
        """Run ``task`` from the next ``reset`` on (the cluster must fit this env's layout)."""
        cluster = scaled_interference_cluster(task.cluster, task.interference)
        lo = self.layout
        if (
            cluster.num_gpus > lo.num_gpus
            or cluster.num_servers > lo.num_servers
            or cluster.num_racks > lo.num_racks
        ):
            raise ValueError(
                f"task cluster {task.cluster!r} is larger than this env's layout; list it in task_clusters"
            )
        self.task = task
        self.cluster = cluster
        self.workload_arg = task.workload_spec(cluster.num_gpus)

    def get_task(self) -> PlacementTask | None:
        return self.task

    # ------------------------------------------------------------------ decisions
    def _new_episode(self) -> None:
        super()._new_episode()
        self._head = -1
        self._chosen: list[int] = []
        self._taken = np.zeros(self.cluster.num_gpus)
        self._gpu_server = np.ascontiguousarray(self.cluster.gpu_server, dtype=np.int64)
        self._win_jobs = np.empty(self.window, dtype=np.int64)  # the observation's window and its fits
        self._win_fits = np.empty(self.window, dtype=bool)
        self._deferred: set[int] = set()
        self._reported_version = np.full(self.sim.num_jobs, -1, dtype=np.int64)
        self._pending_iter: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._epoch = 0  # bumped whenever the simulator runs or starts a job (the queue and free GPUs change)
        self._noted_epoch = -1  # the epoch of the last iteration-time note
        self._queue_fits: tuple[int, np.ndarray, np.ndarray] = (-1, np.zeros(0, np.int64), np.zeros(0, bool))
        # heuristic_action's plan for the head: (head, rule, the servers of its workers or None to defer)
        self._plan: tuple[int, str, np.ndarray | None] = (-1, "", None)

    def _first_candidate(self, exclude: int = -1) -> int:
        """Oldest waiting job, not deferred (nor ``exclude``), for which enough GPUs are free; -1 if none."""
        q = self.sim.queue
        jobs = np.fromiter(q, dtype=np.int64, count=len(q))
        fits = self._count_fits(jobs)
        self._queue_fits = (self._epoch, jobs, fits)  # the observation's window reads its fits from here
        for j in jobs[fits].tolist():
            if j != exclude and j not in self._deferred:
                return j
        return -1

    def _settle(self) -> None:
        while not self.drained:
            if self.sim.queue:
                head = self._first_candidate()
                if head >= 0:
                    self._head = head
                    return
            self._deferred.clear()
            self._epoch += 1
            self._advance()
        self._head = -1

    def _head_share(self) -> tuple[int, np.ndarray]:
        """The free share a GPU needs for the head job, and its pool / type mask (empty: every GPU)."""
        sim, head = self.sim, self._head
        milli = sim.job_milli[head]
        k = sim.job_allowed[head]
        return (FULL_GPU if milli >= FULL_GPU else int(milli)), (_ANY_GPU if k < 0 else sim.allowed_masks[k])

    def _server_mask(self) -> np.ndarray:
        mask = np.zeros(self.cluster.num_servers, dtype=bool)
        need, allowed = self._head_share()
        _kernels.server_mask(mask, self.sim.gpu_free_milli, need, allowed, self._taken, self._gpu_server)
        return mask

    def _observe(self) -> dict:
        enc, sim = self.encoder, self.sim
        mask = enc.action_mask
        mask[:] = 0
        head = self._head
        if head >= 0:
            need, allowed = self._head_share()
            _kernels.server_mask(mask, sim.gpu_free_milli, need, allowed, self._taken, self._gpu_server)
            mask[self.defer_action] = self._can_wait() or self._first_candidate(exclude=head) >= 0
            epoch, queued, queued_fits = self._queue_fits
            if epoch == self._epoch:  # the queue's fits, computed when the head was chosen, still hold
                # the head, then the others among the queue's first jobs; the head fits (that is why it is the head)
                n = _kernels.window_with_head(queued, queued_fits, head, self._win_jobs, self._win_fits)
                jobs, fits = self._win_jobs[:n], self._win_fits[:n]
            else:
                rest = [j for j in itertools.islice(sim.queue, self.window) if j != head][: self.window - 1]
                jobs = np.array([head, *rest], dtype=np.int64)
                fits = self._count_fits(jobs)
            need = int(sim.job_gpus_n[head])  # a fractional job asks for one GPU (workload validation)
            placed = len(self._chosen)
            enc.context[:] = ((need - placed) / need, placed / need, need / self.cluster.num_gpus, 0.0)
        else:
            mask[self.defer_action] = 1
            jobs = np.zeros(0, dtype=np.int64)
            fits = np.zeros(0, dtype=bool)
            enc.context[:3] = 0.0
        enc.context[3] = enc.log1p_count(len(self._deferred))
        return self._encode(jobs, fits, self._taken)

    def _worker_gpu(self, server: int) -> int:
        sim, c, head = self.sim, self.cluster, self._head
        lo, hi = int(c.server_first_gpu[server]), int(c.server_first_gpu[server] + c.server_num_gpus[server])
        need, allowed = self._head_share()
        # the first GPU the worker may take; a fractional job's best fit (the lowest index on ties)
        g = _kernels.worker_gpu(
            sim.gpu_free_milli, need, allowed, self._taken, lo, hi, bool(sim.job_milli[head] < FULL_GPU)
        )
        if g < 0:
            raise ValueError(f"server {server} has no free GPU for job {head}")
        return g

    # ------------------------------------------------------------------ for agents (MetaPlace's performance model)
    @property
    def head_job(self) -> int:
        """The job being placed now (-1 between decisions)."""
        return self._head

    def candidate_gpus(self, server: int) -> np.ndarray:
        """GPUs the head job would hold with its placed workers plus the next one on ``server`` (a valid action)."""
        return np.array([*self._chosen, self._worker_gpu(int(server))], dtype=np.int64)

    def heuristic_action(self, placement: str = "closest") -> int:
        """The action of FIFO with backfill and the placement rule ``placement`` (``consolidate``, ``closest``,
        ``pack``, ``first-fit``, ``spread``, ``random``; :mod:`gpusched_envs.policies.placement`): the next worker
        goes to a server of the rule's placement of the head job, and the head is deferred when the rule would not
        place it now (``consolidate`` waits rather than spread a job); if deferring is not allowed either, the
        ``closest`` placement. The expert of behaviour cloning, and the heuristics of this env's own class: with the
        head rule (the oldest job that fits) this is ``Simulator.run(FIFO(placement, backfill=True))`` played
        through the env's actions (equal for whole-GPU jobs, whose GPUs within a server are the lowest free ones)."""
        head = self._head
        if head < 0:
            return self.defer_action
        if self._plan[0] != head or self._plan[1] != placement:  # one plan per head (``random`` draws once)
            from gpusched_envs.policies.placement import closest, get_placement

            gpus = get_placement(placement)(self.sim, head)
            if gpus is None and not self.encoder.action_mask[self.defer_action]:
                gpus = closest(self.sim, head)
            servers = None if gpus is None else self.cluster.gpu_server[np.sort(gpus)]
            self._plan = (head, placement, servers)
        servers = self._plan[2]
        if servers is None:
            return self.defer_action
        k = len(self._chosen)
        mask = self.encoder.action_mask
        if k < len(servers) and mask[servers[k]]:
            return int(servers[k])
        return int(np.flatnonzero(mask)[0])  # other actions placed this job's first workers: any valid server

    def _collect_iteration_times(self) -> None:
        """Note the running jobs whose iteration time changed since the last note (reported by ``_info``)."""
        if (
            self._noted_epoch == self._epoch
        ):  # placing a worker or deferring without running the sim changes no rate
            return
        self._noted_epoch = self._epoch
        sim = self.sim
        run = np.fromiter(sim.running, dtype=np.int64, count=len(sim.running))
        run = _kernels.changed_iterations(run, sim.status, sim.version, self._reported_version, RUNNING)
        self._pending_iter.append((run, 1.0 / sim.rate[run], sim.job_ideal_iter[run]))

    def _info(self, terminated: bool, truncated: bool, invalid: bool = False, forced: int = -1) -> dict:
        self._collect_iteration_times()
        return super()._info(terminated, truncated, invalid, forced)

    def iteration_times(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(jobs (n,) int64, seconds (n,) float64, ideal seconds (n,) float64)``: the running jobs whose iteration
        time changed (a job started, a neighbour came or went) since the last call (or the episode's start), for
        learning a performance model online; call it after ``reset`` and after each ``step``. A job may appear
        more than once when it changed several times between two calls."""
        if self.sim is None:
            raise gym.error.ResetNeeded("call reset() before iteration_times()")
        self._collect_iteration_times()
        parts = self._pending_iter
        self._pending_iter = []
        if len(parts) == 1:  # the usual case: one note since the last call
            return parts[0]
        if parts:
            return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))
        return (np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0))

    # ------------------------------------------------------------------ gymnasium API
    def _first_decision(self) -> None:
        self._settle()

    def _why_invalid(self, action: int) -> str:
        if action == self.defer_action:
            return "deferring now would deadlock"
        return f"server {action} has no free GPU for the job"

    def _apply(self, a: int) -> None:
        sim, head = self.sim, self._head
        if a == self.defer_action:
            self._deferred.add(head)
            self._release_partial()
            self._settle()
            return
        g = self._worker_gpu(a)
        self._chosen.append(g)
        self._taken[g] = 1.0
        if len(self._chosen) == sim.job_gpus_n[head]:
            sim.start(head, np.sort(np.array(self._chosen, dtype=np.int64)))
            self._epoch += 1
            self._collect_iteration_times()  # before the simulator runs on (the job may finish meanwhile)
            self._release_partial()
            self._settle()

    def _release_partial(self) -> None:
        self._head = -1
        self._plan = (-1, "", None)
        self._chosen.clear()
        self._taken[:] = 0.0

    def _render_extra(self) -> str:
        if self._head < 0:
            return ""
        return f"placing job #{self._head}: workers on GPUs {self._chosen}"
