"""Discrete-event engine: arrivals, completions, restarts and timers on a heap keyed by (time, seq).

A scheduler acts only at decision points, through three calls: :meth:`Simulator.start` (job on GPUs),
:meth:`Simulator.preempt` and doing nothing (wait). Heuristic policies and the Gymnasium envs drive the same API::

    sim = Simulator(cluster, workload, SimConfig(seed=0))
    while sim.next_decision():
        policy.schedule(sim)
    metrics = sim.metrics()

Progress of a running job is integrated lazily: on every change of its rate (its placement, its server neighbours,
or the jobs sharing its NICs or rack uplinks) the work done so far is banked, the completion time recomputed and the job's
version bumped, so that completion events pushed earlier are recognised as stale and dropped.

:meth:`Simulator.run` with a built-in heuristic (FIFO, FIFO with backfill, SJF, Gandiva, SRTF, Tiresias, LAS,
Gittins; ``closest``, ``consolidate`` or ``pack`` placement) on a fresh simulator runs the whole replay in the
compiled loop of :mod:`gpusched_envs.sim.loop_kernels`, with the same results and end state as the calls above.
"""

from __future__ import annotations

import heapq
import itertools
import math
import warnings
from dataclasses import dataclass
from typing import Literal

import numpy as np

from gpusched_envs.sim import engine_kernels as _ek
from gpusched_envs.sim import loop_kernels as _lk
from gpusched_envs.sim import stepper as _stepper
from gpusched_envs.sim import throughput as tp
from gpusched_envs.sim.defaults import sim_defaults
from gpusched_envs.sim.metrics import compute_metrics
from gpusched_envs.sim.status import (  # noqa: F401  (re-exported: policies and envs import them from here)
    COMPLETION,
    DONE,
    DROPPED,
    FULL_GPU,
    FUTURE,
    QUEUED,
    RESTART_DONE,
    RESTARTING,
    RUNNING,
    STATUS_NAMES,
    TIMER,
)
from gpusched_envs.sim.topology import Cluster
from gpusched_envs.sim.workload import Workload


def default_restart_delay() -> float:
    return float(sim_defaults()["restart_delay_s"]["value"])


class SimulationError(RuntimeError):
    """A scheduler asked for something impossible, or the run cannot make progress; the message says what."""


@dataclass(frozen=True)
class SimConfig:
    """Simulator settings.

    Attributes:
        speed_model: ``"throughput"`` (default: iteration times from the catalogue on the actual placement) or
            ``"duration"`` (a job runs exactly its traced duration wherever it is placed, as classical trace
            simulators do; used to cross-validate the engine).
        interference: co-located jobs on one server slow each other (catalogue pairwise factors).
        trace_speed: how a traced duration becomes an amount of work (throughput model only). ``"typical"``
            (default): the duration was measured at the speed the job plausibly had where it ran, i.e. the mean
            iteration time over the GPU types of its pool weighted by their share of the pool's GPUs, each with a
            typical placement for its size (packed on the fewest servers of that type, network to itself, no
            interference; see :func:`typical_iteration_time`), so a trace replayed on its own cluster takes about
            its traced time. ``"ideal"``: the duration was measured at the ideal speed (fastest GPU type,
            consolidated), the earlier rule, which makes a replay on a mixed cluster run slower than traced.
        restart_delay: seconds a preempted or migrated job waits on its new GPUs before it runs again
            (``None``: the default in ``data/sim_defaults.yaml``, with its source).
        seed: seeds the model assignment of duration-only traces and any random placement.
        oversize: what to do with a job that can never fit its cluster or pool: ``"error"`` or ``"drop"`` (warn).
        max_time: stop the clock here (jobs still in the system count as unfinished).
    """

    speed_model: Literal["throughput", "duration"] = "throughput"
    interference: bool = True
    trace_speed: Literal["typical", "ideal"] = "typical"
    restart_delay: float | None = None
    seed: int = 0
    oversize: Literal["error", "drop"] = "error"
    max_time: float = math.inf

    def __post_init__(self) -> None:
        if self.speed_model not in ("throughput", "duration"):
            raise ValueError(f"speed_model must be 'throughput' or 'duration', got {self.speed_model!r}")
        if self.trace_speed not in ("typical", "ideal"):
            raise ValueError(f"trace_speed must be 'typical' or 'ideal', got {self.trace_speed!r}")
        if self.oversize not in ("error", "drop"):
            raise ValueError(f"oversize must be 'error' or 'drop', got {self.oversize!r}")
        if self.restart_delay is not None and not self.restart_delay >= 0:
            raise ValueError(f"restart_delay must be >= 0, got {self.restart_delay!r}")


def _typical_servers(cluster: Cluster, num_gpus: int, mask: np.ndarray | None) -> np.ndarray:
    """(S,) bool: the servers a best-fit, locality-aware scheduler puts a job of this size on: among the servers the
    job may use wholly, those of the smallest size that still holds it on one server; all of them if none does."""
    ok = np.ones(cluster.num_servers, dtype=bool)
    if mask is not None:
        ok = np.add.reduceat(mask.astype(np.int64), cluster.server_first_gpu) == cluster.server_num_gpus
    fits = ok & (cluster.server_num_gpus >= num_gpus)
    if fits.any():
        return fits & (cluster.server_num_gpus == cluster.server_num_gpus[fits].min())
    return ok


def typical_placement(
    cluster: Cluster, servers: np.ndarray, gpu_type: int, num_gpus: int
) -> np.ndarray | None:
    """GPU ids of ``num_gpus`` GPUs of one type packed on the fewest of the given servers (largest first, lowest
    index on ties, so consecutive servers of one rack), or None if those servers have too few GPUs of that type."""
    ids = np.flatnonzero(servers & (cluster.server_gpu_type == gpu_type))
    if cluster.server_num_gpus[ids].sum() < num_gpus:
        return None
    ids = ids[np.argsort(-cluster.server_num_gpus[ids], kind="stable")]
    take = int(np.searchsorted(np.cumsum(cluster.server_num_gpus[ids]), num_gpus)) + 1
    gpus = np.concatenate(
        [cluster.server_first_gpu[s] + np.arange(cluster.server_num_gpus[s]) for s in ids[:take]]
    )
    return gpus[:num_gpus]


def portable_dot(a, b) -> float:
    """The sum of ``a * b`` as a float, with the same bits on every CPU: elementwise products and numpy's pairwise
    sum. ``np.dot`` hands the sum to the BLAS library, whose kernel (chosen for the CPU at run time) orders the
    additions differently from one CPU to another, so a result would change in its last bits across machines."""
    return float(np.multiply(a, b, dtype=np.float64).sum())


def typical_iteration_time(
    cluster: Cluster, model: int, num_gpus: int, mask: np.ndarray | None = None
) -> float:
    """Seconds per iteration a traced job plausibly had where it ran (the ``trace_speed="typical"`` rule).

    Where it ran: the servers a best-fit, locality-aware scheduler gives a job of its size
    (:func:`_typical_servers`: the smallest servers of its pool that hold it whole, else the whole pool; Philly's
    scheduler placed jobs for locality, Jeon et al. ATC'19 §2, and ``closest`` / ``consolidate`` do the same).
    The rule is the mean over those servers' GPU types, weighted by their GPU counts, of the iteration time on a
    packed placement of that type (:func:`typical_placement`; network to itself, no interference). Types with
    too few GPUs for the job are left out; a job no one type can hold gets its slowest allowed type's compute."""
    servers = _typical_servers(cluster, num_gpus, mask)
    times, weights = [], []
    for t in np.unique(cluster.server_gpu_type[servers]).tolist():
        gpus = typical_placement(cluster, servers, t, num_gpus)
        if gpus is None:
            continue
        shape = tp.placement_shape(cluster, model, gpus)
        times.append(tp.iteration_time_of_shape(cluster, model, shape).total)
        weights.append(int(cluster.server_num_gpus[servers & (cluster.server_gpu_type == t)].sum()))
    if not times:
        gpus = np.arange(cluster.num_gpus) if mask is None else np.flatnonzero(mask)
        return float(cluster.compute_time(model, gpus).max())  # slowest allowed GPU (and its host overhead)
    return portable_dot(times, weights) / float(np.sum(weights))


_SPEED_CACHES: dict[int, tuple[Cluster, dict]] = {}  # id(cluster) -> (the cluster, its iteration-time cache)


def _speed_cache(cluster: Cluster) -> dict:
    """The (ideal, typical) iteration times already computed on this immutable cluster object, by (model, GPUs,
    allowed-GPU mask): an env builds a new simulator at every reset on the same cluster, and the
    typical-placement search is most of a 100-job reset otherwise. The entry holds the cluster, so its id stays
    its own; at most 16 clusters are kept (the oldest goes first)."""
    entry = _SPEED_CACHES.get(id(cluster))
    if entry is None or entry[0] is not cluster:
        if len(_SPEED_CACHES) >= 16:
            _SPEED_CACHES.pop(next(iter(_SPEED_CACHES)))
        entry = _SPEED_CACHES[id(cluster)] = (cluster, {})
    return entry[1]


_ALL_GPUS = np.zeros(0, dtype=bool)  # "no mask" for the compiled loops


class _Shapes:
    """``sim._shape[job]``: the placement shape (:func:`throughput.placement_shape`) of a job holding GPUs, None
    otherwise; computed on access (the engine keeps the parts it needs in its arrays)."""

    def __init__(self, sim: Simulator):
        self._sim = sim

    def __len__(self) -> int:
        return self._sim.num_jobs

    def __getitem__(self, job: int) -> tp.PlacementShape | None:
        sim = self._sim
        gpus = sim.job_gpus[job]
        if gpus is None:
            return None
        return tp.placement_shape(sim.cluster, int(sim.job_model[job]), gpus)


# public arrays that are rows of the packed state the compiled loops update: name -> (packed array, row)
_ROW_VIEWS = {
    "done_work": ("_jf", _ek.DONE),
    "rate": ("_jf", _ek.RATE),
    "comm_fraction": ("_jf", _ek.COMM),
    "last_update": ("_jf", _ek.LAST),
    "first_start": ("_jf", _ek.FSTART),
    "run_start": ("_jf", _ek.RSTART),
    "attained": ("_jf", _ek.ATT),
    "allocated_time": ("_jf", _ek.ALLOC),
    "running_time": ("_jf", _ek.RUNT),
    "comm_time": ("_jf", _ek.COMMT),
    "version": ("_ji", _ek.VER),
    "gpu_free_milli": ("_gi", _ek.G_FREE),
    "gpu_job": ("_gi", _ek.G_JOB),
    "server_free": ("_si", _ek.S_FREE),
    "uplink_load": ("_rf", _ek.R_UPLOAD),
    "nic_load": ("_sf", _ek.S_NICLOAD),
}


def _handed_back(name: str, doc: str) -> property:
    """A read-only view of the Python-side container ``name``, rebuilt first from a compiled stepper's arrays while
    one holds the run (``Simulator.stop_stepping``)."""

    def get(self):
        if self.stepper is not None:
            self.stop_stepping()
        return getattr(self, name)

    return property(get, doc=doc)


class Simulator:
    """One replay of a workload on a cluster. All per-job state lives in arrays indexed by workload row."""

    @property
    def job_work(self) -> np.ndarray:
        """(N,) iterations of each job (its traced duration ÷ the iteration time it was traced at)."""
        return self._jf[_ek.WORK]

    @job_work.setter
    def job_work(self, value) -> None:
        # kept in the packed state the compiled loops read (and through a reset)
        self._work = np.array(value, dtype=np.float64)
        if "_jf" in self.__dict__:
            self._jf[_ek.WORK] = self._work

    def __getstate__(self) -> dict:
        # the row views are rebuilt on load: pickled on their own they would become copies, cut off from the
        # packed arrays the compiled loops update
        if self.stepper is not None:
            self.stop_stepping()
        state = self.__dict__.copy()
        if "_jf" in state:
            for name in _ROW_VIEWS:
                state.pop(name, None)
        return state

    def __setstate__(self, state: dict) -> None:
        state = {k: v for k, v in state.items() if k != "_shape"}  # a view made on access, not state
        self.__dict__.update(state)
        if isinstance(state.get("_overhead"), np.ndarray) and state["_overhead"].size == 0:
            self._overhead = _ek.NO_OVERHEAD  # read-only, as when built: the kernels' compiled type
        if "_jf" in state:
            for name, (packed, row) in _ROW_VIEWS.items():
                setattr(self, name, getattr(self, packed)[row])

    @property
    def _shape(self) -> _Shapes:
        """``sim._shape[job]``: the placement shape of a job holding GPUs (:class:`_Shapes`), a view made on each
        access, so the simulator holds no object that refers back to it: reference counting frees a finished
        episode's simulator (and its workload's arrays) as soon as its last reference goes."""
        return _Shapes(self)

    # ------------------------------------------------------------------ the Python-side containers
    # While a compiled stepper holds the run (``stepper``, see :meth:`step_compiled`), the queue, the running jobs,
    # the event heap and the per-job / GPU / server / link job dicts live in its arrays: reading any of the
    # containers below, or calling a method that acts, first rebuilds them (:meth:`stop_stepping`).
    stepper: _lk.Packed | None = None

    queue = _handed_back("_queue", "Waiting jobs, in the order they (re)entered the queue.")
    running = _handed_back(
        "_running", "Jobs holding GPUs (running or restarting), in the order they started."
    )
    job_gpus = _handed_back("_job_gpus", "The GPU ids each job holds (None while it holds none).")
    server_jobs = _handed_back("_server_jobs", "(S,) the jobs holding GPUs of each server, in start order.")
    gpu_sharers = _handed_back("_gpu_sharers", "GPU -> the jobs holding a fraction of it.")
    nic_users = _handed_back(
        "_nic_users", "(S,) the running multi-server jobs sending through each server's NIC."
    )
    rack_crossers = _handed_back(
        "_rack_crossers", "(R,) the running jobs whose ring crosses each rack's uplink."
    )

    def num_queued(self) -> int:
        """``len(sim.queue)``, without handing a compiled stepper's state back."""
        p = self.stepper
        return len(self._queue) if p is None else int(p.st_i[_lk.I_QN])

    def queued_jobs(self) -> np.ndarray:
        """The waiting jobs in queue order, without handing a compiled stepper's state back."""
        p = self.stepper
        if p is None:
            return np.fromiter(self._queue, dtype=np.int64, count=len(self._queue))
        n = int(p.st_i[_lk.I_QLEN])
        jobs = p.queue[0, :n]
        return jobs[(self.status[jobs] == QUEUED) & (p.queue[1, :n] == p.qstamp[jobs])]

    def jobs_in_system(self) -> np.ndarray:
        """The jobs waiting or holding GPUs, queue then running order. With a compiled stepper: as at its last
        advance, the same jobs (only an advance brings or takes one) in an order of that time."""
        p = self.stepper
        if p is None:
            return np.fromiter(
                itertools.chain(self._queue, self._running),
                dtype=np.int64,
                count=len(self._queue) + len(self._running),
            )
        return p.live[: p.live_len].copy()

    def num_running(self) -> int:
        """``len(sim.running)``, without handing a compiled stepper's state back."""
        p = self.stepper
        return len(self._running) if p is None else p.num_running

    def __init__(self, cluster: Cluster, workload: Workload, config: SimConfig | None = None):
        self.cluster = cluster
        self.workload = workload
        self.config = config or SimConfig()
        self.rng = np.random.default_rng(self.config.seed)
        self.restart_delay = (
            default_restart_delay() if self.config.restart_delay is None else float(self.config.restart_delay)
        )
        self._bind()
        self.reset()

    # ------------------------------------------------------------------ binding the workload to the cluster
    def _bind(self) -> None:
        c, w, cat = self.cluster, self.workload, self.cluster.catalog
        n = len(w)
        model_rng = np.random.default_rng([self.config.seed, 1])
        model = np.full(n, -1, dtype=np.int64)
        if n:
            known = w.model >= 0
            for k, name in enumerate(w.model_names):
                model[w.model == k] = cat.model_index(name) if name in cat.model_names else -1
            missing = model < 0
            if np.any(known & missing):
                unknown = sorted({w.model_names[k] for k in np.unique(w.model[known & missing])})
                raise SimulationError(
                    f"workload {w.name!r}: models not in the catalogue: {', '.join(unknown)}"
                )
            model[missing] = cat.assign_models(int(missing.sum()), model_rng)
        self.job_model = model
        self.job_gpus_n = w.num_gpus.astype(np.int64)
        self.job_milli = w.gpu_milli.astype(np.int64)
        if np.any((self.job_milli < FULL_GPU) & (self.job_gpus_n > 1)):
            bad = int(np.flatnonzero((self.job_milli < FULL_GPU) & (self.job_gpus_n > 1))[0])
            raise SimulationError(
                f"workload {w.name!r}: job {bad} asks for a fraction of each of several GPUs"
            )

        # which GPUs each job may use: pool (VC) and GPU-type constraints
        self.job_pool = np.full(n, -1, dtype=np.int64)
        dropped = np.zeros(n, dtype=bool)
        if c.pool_names:
            vc_to_pool = np.array([c.pool_index(v) for v in w.vc_names] + [-1], dtype=np.int64)
            self.job_pool = vc_to_pool[w.vc.astype(np.int64)]  # vc -1 maps to the sentinel -1
            no_quota = self.job_pool < 0
            if no_quota.any():
                vcs = sorted({w.vc_names[v] if v >= 0 else "<none>" for v in w.vc[no_quota]})
                warnings.warn(
                    f"{int(no_quota.sum())} jobs of VCs without a quota on cluster {c.name!r} dropped: {', '.join(vcs)}",
                    stacklevel=3,
                )
                dropped |= no_quota
        self._constraint_masks: dict[int, np.ndarray] = {}
        self.job_allowed = np.full(n, -1, dtype=np.int64)  # index into _allowed_masks, -1 = every GPU
        masks: list[np.ndarray] = []
        mask_key: dict[tuple, int] = {}
        for j in np.flatnonzero((w.gpu_type >= 0) | (self.job_pool >= 0)):
            key = (int(w.gpu_type[j]), int(self.job_pool[j]))
            if key not in mask_key:
                mask = np.ones(c.num_gpus, dtype=bool)
                if key[0] >= 0:
                    allowed = set(w.gpu_type_names[key[0]].split("|"))
                    mask &= np.isin(
                        c.gpu_model, [i for i, m in enumerate(c.gpu_model_names) if m in allowed]
                    ) | (np.isin(c.gpu_type, [i for i, t in enumerate(c.catalog.gpu_types) if t in allowed]))
                if key[1] >= 0:
                    mask &= c.server_pool[c.gpu_server] == key[1]
                mask_key[key] = len(masks)
                masks.append(mask)
            self.job_allowed[j] = mask_key[key]
        self.allowed_masks = masks
        # GPUs of the largest server each mask allows (the size up to which a job under it can be consolidated)
        self.allowed_largest_server = [int(np.bincount(c.gpu_server[m]).max(initial=0)) for m in masks]
        # (S,) the servers each mask allows, where it allows whole servers (None where it splits one)
        self.allowed_server_masks: list[np.ndarray | None] = []
        for m in masks:
            per = np.add.reduceat(m.astype(np.int64), c.server_first_gpu)
            whole = per == c.server_num_gpus
            self.allowed_server_masks.append(whole if np.array_equal(whole, per > 0) else None)

        # capacity check: a job larger than every GPU it may use can never run
        capacity = np.array([int(m.sum()) for m in masks] + [c.num_gpus], dtype=np.int64)
        too_big = self.job_gpus_n > capacity[self.job_allowed]
        too_big &= ~dropped
        if too_big.any():
            j = int(np.flatnonzero(too_big)[0])
            what = f"job {j} ({w.job(j).name}) asks for {self.job_gpus_n[j]} GPUs but only {capacity[self.job_allowed[j]]} may serve it"
            if self.config.oversize == "error":
                raise SimulationError(f"workload {w.name!r} on cluster {c.name!r}: {what}")
            warnings.warn(
                f"{int(too_big.sum())} jobs larger than their cluster/pool dropped (first: {what})",
                stacklevel=3,
            )
            dropped |= too_big
        self.initially_dropped = dropped

        # ideal iteration time (the lower bound that normalises slowdowns) and work (iterations): the traced
        # duration divided by the iteration time the job had where it ran (``trace_speed``). The typical iteration
        # time is kept under either rule: offered load is GPU-time at it (metrics.py, the one definition)
        if self.config.speed_model == "duration":
            self.job_ideal_iter = np.ones(n)
            self.job_typical_iter = np.ones(n)
            self.job_trace_iter = np.ones(n)
        else:
            cache: dict[tuple, tuple[float, float]] = {}
            shared = _speed_cache(c)  # the same values for every simulator on this cluster (an env's resets)
            keys = list(zip(model.tolist(), self.job_gpus_n.tolist(), self.job_allowed.tolist(), strict=True))
            for key in keys:
                if key not in cache:
                    mask = masks[key[2]] if key[2] >= 0 and masks[key[2]].any() else None
                    shared_key = (*key[:2], None if mask is None else mask.tobytes())
                    if shared_key not in shared:
                        allowed = None if mask is None else np.unique(c.gpu_type[mask])
                        best = tp.ideal_iteration_time(c, key[0], key[1], allowed)
                        typical_iter = max(best, typical_iteration_time(c, key[0], key[1], mask))
                        shared[shared_key] = (best, typical_iter)
                    cache[key] = shared[shared_key]
            times = [cache[key] for key in keys]
            ideal = np.array([t[0] for t in times], dtype=np.float64).reshape(n)
            typical = np.array([t[1] for t in times], dtype=np.float64).reshape(n)
            self.job_ideal_iter = ideal
            self.job_typical_iter = typical  # seconds per iteration in the job's typical placement
            # seconds per iteration at which the traced duration was measured
            self.job_trace_iter = typical if self.config.trace_speed == "typical" else ideal
        self._work = w.duration / self.job_trace_iter  # iterations of each job (``job_work``)
        slow = c.catalog.colocation_slowdown
        # one factor for every pair (no measured pairs): skip the per-neighbour lookup in the hot loop
        self._uniform_slowdown = float(slow.flat[0]) if slow.size and (slow == slow.flat[0]).all() else 0.0

    # ------------------------------------------------------------------ state
    def reset(self) -> None:
        self.stepper = None
        n, c = len(self.workload), self.cluster
        self._num_jobs = n
        self.now = 0.0 if n == 0 else min(0.0, float(self.workload.submit_time[0]))
        self.status = np.where(self.initially_dropped, DROPPED, FUTURE).astype(np.int8)
        # per-job state the compiled loops update (engine_kernels), one row each; the public names are the rows
        self._jf = jf = np.zeros((_ek.JF_ROWS, n))
        jf[_ek.WORK] = self._work
        self.done_work = jf[_ek.DONE]
        self.rate = jf[_ek.RATE]  # iterations per second while running
        self.comm_fraction = jf[_ek.COMM]  # share of the current iteration time spent communicating
        self.last_update = jf[_ek.LAST]
        jf[_ek.FSTART] = np.nan
        jf[_ek.RSTART] = np.nan
        self.first_start = jf[_ek.FSTART]
        self.finish_time = np.full(n, np.nan)
        self.run_start = jf[_ek.RSTART]  # start of the current allocation
        self.attained = jf[_ek.ATT]  # GPU-seconds of allocation so far (Tiresias' attained service)
        self.allocated_time = jf[_ek.ALLOC]  # seconds holding GPUs
        self.running_time = jf[_ek.RUNT]  # seconds making progress
        self.comm_time = jf[_ek.COMMT]  # seconds of running spent in communication
        self.preemptions = np.zeros(n, dtype=np.int64)
        self.needs_restart = np.zeros(n, dtype=bool)
        self._ji = ji = np.zeros((_ek.JI_ROWS, n), dtype=np.int64)
        ji[_ek.MODEL] = self.job_model
        ji[_ek.MILLI] = self.job_milli
        ji[_ek.SHNEXT] = -1
        self.version = ji[_ek.VER]
        self._job_gpus: list[np.ndarray | None] = [None] * n
        self._job_servers: list[list[int] | None] = [None] * n  # distinct servers of a job's GPUs, ascending
        self._job_racks: list[list[int] | None] = [None] * n  # and their racks, ascending
        self.demand_at_arrival = np.zeros(n)  # demand integral (GPU-seconds) when the job arrived
        self._demand_at_finish = np.zeros(n)

        # (G,) unallocated share of each GPU, and a job holding it (one of its sharers; -1 when free)
        self._gi = gi = np.empty((_ek.GI_ROWS, c.num_gpus), dtype=np.int64)
        gi[_ek.G_FREE] = FULL_GPU
        gi[_ek.G_JOB] = -1
        gi[_ek.G_SERVER] = c.gpu_server
        gi[_ek.G_TYPE] = c.gpu_type
        gi[_ek.G_SHHEAD] = -1  # a shared GPU's sharers: a list through _ji[SHNEXT]
        self.gpu_free_milli = gi[_ek.G_FREE]
        self.gpu_job = gi[_ek.G_JOB]
        self._si = si = np.zeros((_ek.SI_ROWS, c.num_servers), dtype=np.int64)
        si[_ek.S_FIRST] = c.server_first_gpu
        si[_ek.S_NUM] = c.server_num_gpus
        si[_ek.S_RACK] = c.server_rack
        si[_ek.S_FREE] = c.server_num_gpus
        self.server_free = si[_ek.S_FREE]  # (S,) wholly free GPUs per server
        self._sf = sf = np.zeros((_ek.SF_ROWS, c.num_servers))
        sf[_ek.S_NICBW] = c.server_nic_bandwidth
        sf[_ek.S_INTRABW] = c.server_intra_bandwidth
        sf[_ek.S_INTRALAT] = c.server_intra_latency
        sf[_ek.S_NICLAT] = c.server_nic_latency
        if c.server_intra_shared is not None:
            sf[_ek.S_SHARED] = c.server_intra_shared
        self._rf = rf = np.zeros((_ek.RF_ROWS, c.num_racks))
        rf[_ek.R_UPBW] = c.rack_uplink_bandwidth
        cat = c.catalog
        self._mf = np.stack(
            [np.asarray(cat.gradient_bytes, dtype=float), np.asarray(cat.overlap_gamma, dtype=float)]
        )
        self._overhead = (
            c.server_compute_overhead if c.server_compute_overhead is not None else _ek.NO_OVERHEAD
        )
        self._params = np.zeros(_ek.P_SIZE)
        self._params[_ek.P_SPINE] = c.spine_latency
        self._params[_ek.P_UNIFORM] = self._uniform_slowdown
        self._params[_ek.P_INTERFERENCE] = float(self.config.interference)
        self._params[_ek.P_DURATION] = float(self.config.speed_model == "duration")
        self._params[_ek.P_OVERHEAD] = float(c.server_compute_overhead is not None)
        self._gbuf = np.empty(max(64, 2 * c.num_gpus), dtype=np.int64)  # every start's GPU list, appended
        self._goff = 0
        self._places = np.empty((2, max(c.num_servers, c.num_racks)), dtype=np.int64)
        # the jobs a kernel refreshes and their new completion times (at most every job)
        self._kjobs = np.empty(max(1, n), dtype=np.int64)
        self._kout = np.empty(max(1, n))
        self._free_total = int(c.num_gpus)  # wholly free GPUs in all (the sum of server_free)
        self._submit = self.workload.submit_time.tolist()  # arrival times as Python floats (the event loop's)
        self._server_jobs: list[dict[int, None]] = [{} for _ in range(c.num_servers)]
        self._gpu_sharers: dict[int, dict[int, None]] = {}  # GPU -> jobs holding a fraction of it
        # network sharing (throughput.py): only jobs making progress send, so a job holds NIC / uplink shares from
        # the moment it runs (not while it waits out its restart delay) until it leaves its GPUs
        self.on_network = np.zeros(n, dtype=bool)  # job currently sends across servers
        self.rack_crossing = np.zeros(
            c.num_racks, dtype=np.int64
        )  # (R,) running jobs whose ring crosses the uplink
        self._rack_crossers: list[dict[int, None]] = [{} for _ in range(c.num_racks)]
        self.uplink_load = rf[_ek.R_UPLOAD]  # (R,) bytes/s offered to each uplink by its crossers
        self._nic_users: list[dict[int, None]] = [
            {} for _ in range(c.num_servers)
        ]  # running multi-server jobs
        self.nic_load = sf[_ek.S_NICLOAD]  # (S,) bytes/s offered to each NIC

        self._queue: dict[int, None] = {}  # waiting jobs, in the order they (re)entered the queue
        self._running: dict[int, None] = {}  # jobs holding GPUs (running or restarting)
        self.next_arrival = 0
        self._heap: list[tuple[float, int, int, int, int]] = []  # (time, seq, kind, job, version)
        self._seq = 0
        self._timer_version = 0
        self.timer_at = math.inf  # the pending policy timer's time (inf: none)
        self.events_processed = 0
        self.decisions = 0
        self.finished = 0
        self.to_finish = int(np.sum(~self.initially_dropped))
        self._demand = 0.0  # GPUs asked for by jobs in the system
        # per-job sizes as Python ints and settings as bools (the per-event code's look-ups)
        self._n_list = self.job_gpus_n.tolist()
        self._milli_list = self.job_milli.tolist()
        self._allowed_list = self.job_allowed.tolist()
        self._duration = self.config.speed_model == "duration"
        self._interference = bool(self.config.interference)
        # GPUs each job holds, a fraction for a shared GPU (np.float64 values, as the sums above had them)
        self._share = list(self.job_gpus_n * np.minimum(self.job_milli, FULL_GPU) / FULL_GPU)
        self._demand_integral = 0.0
        self._fragmentation_integral = 0.0
        self._fragmented_now = 0.0
        self._utilisation_integral = 0.0
        self._allocated_now = 0.0
        self._last_integral_time = self.now
        self.changed = True
        self.on_progress = None  # optional callable(sim) called every 4096 events

    # ------------------------------------------------------------------ properties used by policies and envs
    @property
    def num_jobs(self) -> int:
        return self._num_jobs

    @property
    def drained(self) -> bool:
        return self.finished >= self.to_finish

    def free_gpus(self) -> int:
        """GPUs with no job on them (kept as a count, updated where ``server_free`` is)."""
        return self._free_total

    def free_mask(self, job: int) -> np.ndarray:
        """(G,) GPUs where ``job`` may start now (its share free, and allowed by its pool / type constraint)."""
        free = self.gpu_free_milli >= (FULL_GPU if self.job_milli[job] >= FULL_GPU else self.job_milli[job])
        k = self.job_allowed[job]
        return free if k < 0 else free & self.allowed_masks[k]

    def remaining_work(self, job: int) -> float:
        done = self.done_work[job]
        if self.status[job] == RUNNING:
            done += self.rate[job] * (self.now - self.last_update[job])
        return max(0.0, self.job_work[job] - done)

    def remaining_ideal_time(self, job: int) -> float:
        """Clairvoyant remaining runtime at ideal speed (SRTF's key)."""
        return self.remaining_work(job) * self.job_ideal_iter[job]

    def attained_service(self, job: int) -> float:
        """GPU-seconds of allocation so far, the current allocation included (Tiresias' key)."""
        a = self.attained[job]
        if self.status[job] in (RUNNING, RESTARTING):
            a += self.job_gpus_n[job] * (self.now - self.run_start[job])
        return a

    # ------------------------------------------------------------------ the three scheduler calls
    def start(self, job: int, gpus) -> None:
        """Place a queued job on the given GPU ids and start it (after the restart delay if it was preempted)."""
        if self.stepper is not None:
            self.stop_stepping()
        job = int(job)
        if not 0 <= job < self._num_jobs or self.status[job] != QUEUED:
            state = STATUS_NAMES[self.status[job]] if 0 <= job < self._num_jobs else "unknown"
            raise SimulationError(f"start: job {job} is not waiting in the queue (it is {state})")
        gpus = np.asarray(gpus, dtype=np.int64)
        n = self._n_list[job]
        if gpus.ndim != 1 or len(gpus) != n:
            raise SimulationError(f"start: job {job} needs {n} GPUs, got {np.size(gpus)}")
        ids = gpus.tolist()
        num_gpus = self._gi.shape[1]
        if n == 1:
            bad = not 0 <= ids[0] < num_gpus
        else:
            bad = len(set(ids)) != n or min(ids) < 0 or max(ids) >= num_gpus
        if bad:
            raise SimulationError(
                f"start: job {job}: GPU ids must be distinct and in range, got {gpus.tolist()}"
            )
        milli = self._milli_list[job]
        need = FULL_GPU if milli >= FULL_GPU else milli
        k = self._allowed_list[job]
        if n == 1:
            g = ids[0]
            ok = self.gpu_free_milli[g] >= need and (k < 0 or self.allowed_masks[k][g])
        else:
            ok = _ek.check_gpus(
                gpus, need, self.gpu_free_milli, _ALL_GPUS if k < 0 else self.allowed_masks[k]
            )
        if not ok:
            raise SimulationError(
                f"start: job {job}: GPUs {gpus.tolist()} are not all free or allowed for it"
            )
        now = self.now
        dt = now - self._last_integral_time  # _integrate_to_now, inlined
        if dt > 0:
            self._demand_integral += self._demand * dt
            self._fragmentation_integral += self._fragmented_now * dt
            self._utilisation_integral += self._allocated_now * dt
            self._last_integral_time = now
        c = self.cluster
        gs = c.gpu_server_list
        if len(ids) == 1:
            servers = [gs[ids[0]]]
            racks = [c.server_rack_list[servers[0]]]
        else:
            servers = sorted({gs[g] for g in ids})
            rk = c.server_rack_list
            racks = sorted({rk[s] for s in servers})
        self._job_servers[job] = servers
        self._job_racks[job] = racks
        if milli < FULL_GPU:
            self._gpu_sharers.setdefault(ids[0], {})[job] = None
        del self._queue[job]
        self._running[job] = None
        self._job_gpus[job] = gpus
        self._allocated_now += self._share[job]
        server_jobs = self._server_jobs
        for s in servers:
            server_jobs[s][job] = None
        goff = self._goff
        if goff + len(ids) > len(self._gbuf):
            self._gbuf = np.concatenate([self._gbuf, np.empty(len(self._gbuf) + len(ids), dtype=np.int64)])
        self._goff = goff + len(ids)
        if self.needs_restart[job] and self.restart_delay > 0:
            self.status[job] = RESTARTING
            self.rate[job] = 0.0
            self.version[job] += 1
            self._push(now + self.restart_delay, RESTART_DONE, job, int(self.version[job]))
            jobs = self._neighbours(job)
        else:
            self.status[job] = RUNNING
            self.needs_restart[job] = False
            if len(servers) > 1 and not self._duration:
                # it joins the network: its traffic (the placement's shape) first, then the loads, then the rates
                self._free_total -= self._start_kernel(job, gpus, goff, ())
                self._join_network(job)
                self._refresh_rates(self._neighbours(job) | {job})
                self.changed = True
                return
            jobs = self._neighbours(job) | {job}
        self._free_total -= self._start_kernel(job, gpus, goff, jobs)
        self.changed = True

    def _start_kernel(self, job: int, gpus: np.ndarray, goff: int, jobs) -> int:
        """Allocate the job's GPUs, compute its placement's shape, note its start and refresh ``jobs`` (compiled);
        returns the GPUs that stopped being wholly free."""
        order = list(jobs)
        k = len(order)
        arr, out = self._kjobs[:k], self._kout[:k]
        arr[:] = order
        cat = self.cluster.catalog
        args = (
            job, np.ascontiguousarray(gpus), goff, arr, self.now, self.status, self._jf, self._ji, self._gi,
            self._si, self._sf, self._rf, self._mf, cat.iteration_time, self._overhead, cat.colocation_slowdown,
            cat.space_sharing_by_type, self._params, self._gbuf, self._places, out,
        )  # fmt: skip
        lost = _ek.start_job(*args)
        if k:
            self._push_completions(order, out)
        return lost

    def preempt(self, job: int) -> None:
        """Stop a running job; it keeps its progress, returns to the queue and pays the restart delay when restarted."""
        if self.stepper is not None:
            self.stop_stepping()
        job = int(job)
        if not 0 <= job < self.num_jobs or self.status[job] not in (RUNNING, RESTARTING):
            raise SimulationError(f"preempt: job {job} is not running")
        self._integrate_to_now()
        self._bank(job)
        self._release(job)
        self.status[job] = QUEUED
        self._queue[job] = None
        self.preemptions[job] += 1
        self.needs_restart[job] = True
        self.changed = True

    def set_timer(self, at: float) -> None:
        """Ask for a decision point at time ``at`` (one pending policy timer; a new call replaces the old one)."""
        if self.stepper is not None:
            self.stop_stepping()
        if at < self.now:
            raise SimulationError(f"set_timer: time {at} is in the past (now {self.now})")
        self._timer_version += 1
        self.timer_at = float(at)
        self._push(self.timer_at, TIMER, -1, self._timer_version)  # a Python float, as every event time

    # ------------------------------------------------------------------ the clock
    def next_decision(self) -> bool:
        """Process events until a decision point; return False once the run has drained (or hit ``max_time``).

        A decision point is a time at which events have been processed (or a policy timer fired) and the queue is
        not empty. All events at one time are processed before the decision.
        """
        if self.stepper is not None:
            self.stop_stepping()
        self._note_fragmentation()
        self.changed = False
        heap, submit, num_jobs, status = self._heap, self._submit, self._num_jobs, self.status
        max_time = self.config.max_time
        version, pop, inf = self.version, heapq.heappop, math.inf
        while True:
            if self.finished >= self.to_finish:
                self._integrate_to_now()
                return False
            t_event = heap[0][0] if heap else inf
            j = self.next_arrival
            t_arrival = submit[j] if j < num_jobs else inf
            t = t_arrival if t_arrival < t_event else t_event
            if t == inf:
                self._raise_deadlock()
            if t > max_time:
                self.now = max(self.now, max_time)
                self._integrate_to_now()
                return False
            self.now = t
            dt = t - self._last_integral_time  # _integrate_to_now, inlined
            if dt > 0:
                self._demand_integral += self._demand * dt
                self._fragmentation_integral += self._fragmented_now * dt
                self._utilisation_integral += self._allocated_now * dt
                self._last_integral_time = t
            timer_fired = False
            # every arrival and event at this instant, in (time, seq) order; arrivals first
            if j < num_jobs and submit[j] <= t:
                queue, share, at_arrival = self._queue, self._share, self.demand_at_arrival
                while j < num_jobs and submit[j] <= t:
                    if status[j] != DROPPED:
                        status[j] = QUEUED
                        queue[j] = None
                        self._demand += share[j]
                        at_arrival[j] = self._demand_integral
                        self.events_processed += 1
                        self.changed = True
                    j += 1
                self.next_arrival = j
            while heap and heap[0][0] <= t:
                _, _, kind, job, ver = pop(heap)
                self.events_processed += 1
                if kind == TIMER:
                    if ver == self._timer_version:
                        timer_fired = True
                        self.timer_at = inf
                    continue
                if ver != version[job]:
                    continue  # stale: the job's rate or placement changed after this was pushed
                if kind == COMPLETION:
                    self._complete(job)
                else:  # RESTART_DONE
                    status[job] = RUNNING
                    self.needs_restart[job] = False
                    self.last_update[job] = t
                    self._join_network(job)
                    self._refresh_rates(self._neighbours(job) | {job})
                self.changed = True
            if self.on_progress is not None and self.events_processed & 4095 == 0:
                self.on_progress(self)
            if self._queue and (self.changed or timer_fired):
                self.changed = False
                self.decisions += 1
                return True
            self.changed = False

    def run(self, policy) -> dict:
        """Drive the simulation to the end with a policy (anything with ``schedule(sim)``); return the metrics.

        A fresh simulator driven by a built-in non-preemptive queue policy (whose ``compiled_spec()`` says how) runs
        in the compiled loop of :mod:`gpusched_envs.sim.loop_kernels`, with the same results and the same state at
        the end as the calls below."""
        if self.stepper is not None:
            self.stop_stepping()
        if hasattr(policy, "reset"):
            policy.reset(self)
        if self._run_compiled(policy):
            return self.metrics()
        while self.next_decision():
            policy.schedule(self)
        return self.metrics()

    def _fresh(self) -> bool:
        """Nothing has happened since the reset (no event, decision or start)."""
        return (
            self.events_processed == 0
            and self.decisions == 0
            and self.next_arrival == 0
            and self.finished == 0
            and self._goff == 0
            and not self._heap
            and not self._queue
            and not self._running
            and self.timer_at == math.inf
            and not self.needs_restart.any()
            and not self.on_network.any()
        )

    def _run_compiled(self, policy) -> bool:
        """Run to the end in the compiled loop when the policy offers it (``compiled_spec()``: a dict with
        ``backfill``, ``spread``, ``affinity`` and ``order`` "submit" or "duration") and the simulator is fresh, of this very
        class and has no progress hook; returns whether it did."""
        spec_of = getattr(policy, "compiled_spec", None)
        spec = spec_of() if callable(spec_of) else None
        if spec is None or not self._packable():
            return False
        p = self._pack(spec)
        while True:
            code, p.heap, p.log, self._gbuf = _lk.run_queue(*p.loop_args(self))
            if p.st_i[_lk.I_BATCHES]:
                self._order_ties(p.heap, int(p.st_i[_lk.I_HLEN]), p.log, int(p.st_i[_lk.I_LOG]))
                p.st_i[_lk.I_BATCHES] = 0
                p.st_i[_lk.I_LOG] = 0
            if code != _lk.RUN_TIES:
                break
        self._adopt_compiled_state(p.st_f, p.st_i, p.heap, p.stamp, p.jstamp, p.qstamp)
        if code == _lk.RUN_DEADLOCK:
            self._raise_deadlock()
        return True

    # ------------------------------------------------------------------ the compiled stepper
    def start_stepping(
        self,
        spec: dict,
        window: int,
        weight: np.ndarray,
        per_unit: np.ndarray,
        goodput: bool,
        preempt_window: int = 0,
        min_run: float | None = None,
        decision_interval: float | None = None,
    ) -> bool:
        """Hand a fresh run to the compiled stepper of a job-choice env (:meth:`step_compiled`); ``spec``: the
        placement as a policy's ``compiled_spec()`` gives it (``closest``: spread, ``pack``: spread and affinity),
        ``window``: how many queued jobs a decision sees; ``weight``, ``per_unit`` (J,): the running totals' weights
        and ideal GPU-seconds per unit of work (``RunningTotals``), ``goodput``: whether a mark computes the goodput
        too (a step's totals come back as ``stepper.totals_now``, see :meth:`step_compiled`);
        ``preempt_window`` > 0: the env preempts (``ACT_PREEMPT - job``), sees that many running jobs and decides at
        every decision point with a queue, ``min_run`` the seconds a job runs before it may be preempted;
        ``decision_interval``: a wait asks for a decision point at most that long after it. Returns False (and changes nothing) where the compiled
        loops cannot take this simulator over (see ``_packable``). Any read of the Python-side containers, or
        a call of a method that acts, hands the state back (:meth:`stop_stepping`)."""
        if not self._packable():
            return False
        p = self._pack({"backfill": False, "order": "submit", **spec})
        n, c = self._num_jobs, self.cluster
        m = max(1, n)
        p.run_list = np.empty(m, dtype=np.int64)
        p.window = np.empty(window, dtype=np.int64)
        p.fits = np.empty(window, dtype=bool)
        p.live = np.empty(m, dtype=np.int64)
        p.sc = np.zeros(_lk.SC_SIZE, dtype=np.int64)
        p.totals = (
            np.ascontiguousarray(weight, dtype=np.float64),
            np.ascontiguousarray(per_unit, dtype=np.float64),
            np.zeros(_lk.T_SIZE),  # tot
            np.empty(m),  # prod: the products a sum adds
            bool(goodput),
        )
        js = np.zeros(_lk.J_SIZE)
        js[_lk.J_PREEMPT] = 1.0 if preempt_window > 0 else 0.0
        js[_lk.J_MIN_RUN] = np.nan if min_run is None else float(min_run)
        js[_lk.J_INTERVAL] = np.inf if decision_interval is None else float(decision_interval)
        p.preempting = (
            js,
            np.full(m, -1, dtype=np.int64),  # start_mark: the instant each job last started
            np.full(m, -1, dtype=np.int64),  # preempt_mark: the instant each job was last preempted
            np.empty(max(1, preempt_window), dtype=np.int64),  # running: the running window
            np.zeros(max(1, preempt_window), dtype=bool),  # preemptible
            np.zeros(window, dtype=bool),  # startable
        )
        p.running_window, p.preemptible, p.startable = p.preempting[3:]
        p.done = np.empty(n + 1, dtype=np.int64)
        p.scratch = (
            np.empty(n + 1, dtype=np.int64),  # buf
            np.empty(n + 1, dtype=np.int64),  # batch
            np.empty(n + 1),  # times
            np.empty(max(1, c.num_servers), dtype=np.int64),  # srv
            np.empty(max(1, c.num_racks), dtype=np.int64),  # rck
            np.empty(c.num_gpus, dtype=bool),  # free_buf
            np.empty(c.num_servers, dtype=np.int64),  # counts
        )
        p.num_running = 0
        p.live_len = 0
        p.state = _stepper.new_state(*[_stepper.writable(a) for a in self._step_args(p)])
        self.stepper = p
        return True

    def _step_args(self, p: _lk.Packed) -> tuple:
        c = self.cluster
        cat = c.catalog
        return (
            p.st_f, p.st_i, p.opts, p.heap, p.log, p.queue, self.status, self._jf, self._ji, self._gi, self._si,
            self._sf, self._rf, self._mf, cat.iteration_time, self._overhead, cat.colocation_slowdown,
            cat.space_sharing_by_type, self._params, self._gbuf, self._places, p.share, p.submit,
            self.demand_at_arrival, self.finish_time, self._demand_at_finish, p.stamp, p.jstamp, p.qstamp, p.jnr,
            self.on_network, self.rack_crossing, self.needs_restart, self.job_gpus_n, self.job_milli,
            self.job_allowed, p.allowed, p.server_ok, p.server_ok_valid, p.largest, c.server_rows_i64, c.num_racks,
            c.gpu_server_i64, p.rack_first, p.rack_servers, p.pool_first, p.pool_list, p.mark, p.mark_state,
            p.run_list, p.window, p.fits, p.live, p.sc, *p.totals, *p.scratch, p.done, self.preemptions,
            *p.preempting,
        )  # fmt: skip

    def step_compiled(self, action: int) -> int:
        """One step of the compiled stepper (:func:`gpusched_envs.sim.loop_kernels.step_jobs`): start queued job
        ``action`` (a row; ``ACT_WAIT``: wait; ``ACT_SETTLE``: neither), then run to the next point where one of the
        window's jobs fits, or to the end. Returns ``STEP_DECIDE`` or ``STEP_DRAINED``; the window and its fits are
        ``stepper.window[:k]`` / ``stepper.fits[:k]`` with ``k = stepper.window_len``; the running totals and the
        mark after the step are ``stepper.totals_now`` (banked weighted time and goodput, then the mark's), the
        jobs in the system at the last advance ``stepper.live[:stepper.live_len]`` (``stepper.syncs`` advances)."""
        p = self.stepper
        out = _stepper.step(p.state, action)
        while True:
            if out[1]:  # the kernel grew the heap, the tie log or the GPU-list buffer
                p.heap, p.log, self._gbuf = _stepper.grown(p.state)
            if out[0] != _lk.STEP_TIES:
                break
            self._order_pending_ties(p)
            out = _stepper.step(p.state, _lk.ACT_RESUME)
        code = out[0]
        (
            self.now, self.next_arrival, self.finished, self._free_total, self.events_processed, self.decisions,
            p.num_running, p.window_len, p.syncs, p.live_len,
        ) = out[2:12]  # fmt: skip
        p.totals_now = out[12:16]
        p.running_len = out[16]
        if code == _lk.STEP_DEADLOCK:
            self.stop_stepping()
            self._raise_deadlock()
        if code == _lk.STEP_UNPLACED:
            self.stop_stepping()
            raise SimulationError(
                f"start: job {action} cannot be placed now (it is not queued, or does not fit)"
            )
        return code

    def _order_pending_ties(self, p: _lk.Packed) -> None:
        if p.st_i[_lk.I_BATCHES]:
            self._order_ties(p.heap, int(p.st_i[_lk.I_HLEN]), p.log, int(p.st_i[_lk.I_LOG]))
            p.st_i[_lk.I_BATCHES] = 0
            p.st_i[_lk.I_LOG] = 0

    def stop_stepping(self) -> None:
        """Rebuild the Python-side state from the compiled stepper's arrays and drop the stepper."""
        p = self.stepper
        if p is None:
            return
        self.stepper = None
        self._order_pending_ties(p)
        self._adopt_compiled_state(p.st_f, p.st_i, p.heap, p.stamp, p.jstamp, p.qstamp)

    def _raise_deadlock(self) -> None:
        stuck = [int(j) for j in list(self._queue)[:5]]
        raise SimulationError(
            f"deadlock at t={self.now:.1f}: jobs {stuck} wait, nothing runs and no event is pending "
            "(the scheduler never starts them)"
        )

    def _packable(self) -> bool:
        """Whether the compiled loops may take this run over: a fresh simulator of this very class, no progress
        hook, every admitted job asking for at least one GPU."""
        if type(self) is not Simulator or self.on_progress is not None or not self._fresh():
            return False
        admitted = ~self.initially_dropped
        return not (self._num_jobs and np.any(self.job_gpus_n[admitted] < 1))

    def _pack(self, spec: dict) -> _lk.Packed:
        """The state of a fresh simulator as the compiled loops hold it, for a policy's ``compiled_spec()``."""
        c, n = self.cluster, self._num_jobs
        admitted = ~self.initially_dropped
        need = self._goff + int(self.job_gpus_n[admitted].sum()) + 1
        if len(self._gbuf) < need:
            self._gbuf = np.concatenate([self._gbuf, np.empty(need - len(self._gbuf), dtype=np.int64)])
        p = _lk.Packed()
        p.st_f = st_f = np.zeros(_lk.F_SIZE)
        st_f[_lk.F_NOW] = self.now
        st_f[_lk.F_DEMAND] = self._demand
        st_f[_lk.F_DINT] = self._demand_integral
        st_f[_lk.F_FINT] = self._fragmentation_integral
        st_f[_lk.F_UINT] = self._utilisation_integral
        st_f[_lk.F_ALLOC] = self._allocated_now
        st_f[_lk.F_LAST] = self._last_integral_time
        st_f[_lk.F_FRAG] = self._fragmented_now
        st_f[_lk.F_MAXT] = self.config.max_time
        st_f[_lk.F_RESTART] = self.restart_delay
        st_f[_lk.F_TIMER] = self.timer_at
        p.st_i = st_i = np.zeros(_lk.I_SIZE, dtype=np.int64)
        st_i[_lk.I_SEQ] = self._seq
        st_i[_lk.I_TOFINISH] = self.to_finish
        st_i[_lk.I_FREE] = self._free_total
        st_i[_lk.I_PHASE] = _lk.PH_DECIDE
        st_i[_lk.I_TVER] = self._timer_version
        p.opts = opts = np.zeros(_lk.O_SIZE, dtype=np.int64)
        opts[_lk.O_BACKFILL] = bool(spec["backfill"])
        opts[_lk.O_SPREAD] = bool(spec["spread"])
        opts[_lk.O_AFFINITY] = bool(spec.get("affinity", False))
        pools = int(self.job_pool.max()) + 2 if n else 2  # pool -1: the last entry
        p.capacity = np.zeros(pools)
        p.thresholds = np.zeros(0)
        p.gittins = np.zeros((1, 1))
        p.gittins_bounds = np.zeros(1, dtype=np.int64)
        if "priority" in spec:  # a preemptive policy
            opts[_lk.O_PREEMPT] = 1
            opts[_lk.O_PRIO] = {"srtf": _lk.PRIO_SRTF, "level": _lk.PRIO_LEVEL, "gittins": _lk.PRIO_GITTINS}[
                spec["priority"]
            ]
            for pool, cap in spec["capacity"].items():
                if -1 <= pool < pools - 1:
                    p.capacity[pool] = cap
            p.thresholds = np.asarray(spec.get("thresholds", p.thresholds), dtype=np.float64)
            if "index" in spec:
                p.gittins = np.ascontiguousarray(spec["index"], dtype=np.float64)
                p.gittins_bounds = np.asarray(spec["bounds"], dtype=np.int64)
        opts[_lk.O_FRACTIONAL] = bool((self.job_milli < FULL_GPU).any())
        opts[_lk.O_MAXSERVER] = c.max_server_gpus
        opts[_lk.O_NPOOLS] = len(np.unique(self.job_pool))
        p.rank = np.zeros(n, dtype=np.int64)
        if spec["order"] == "duration":  # SJF: (traced duration, job)
            opts[_lk.O_RANK] = 1
            p.rank[np.lexsort((np.arange(n), self.workload.duration))] = np.arange(n)
        masks = self.allowed_masks
        p.allowed = np.stack(masks) if masks else np.zeros((1, c.num_gpus), dtype=bool)
        p.server_ok = np.zeros((max(1, len(masks)), c.num_servers), dtype=bool)
        p.server_ok_valid = np.zeros(max(1, len(masks)), dtype=bool)
        pool_servers: list[np.ndarray] = []  # the servers of each whole-server mask, ascending
        for k, m in enumerate(self.allowed_server_masks):
            if m is not None:
                p.server_ok[k], p.server_ok_valid[k] = m, True
            pool_servers.append(np.flatnonzero(m) if m is not None else np.zeros(0, dtype=np.int64))
        p.pool_first = np.zeros(len(pool_servers) + 1, dtype=np.int64)
        p.pool_first[1:] = np.cumsum([len(s) for s in pool_servers])
        p.pool_list = np.concatenate(pool_servers).astype(np.int64) if pool_servers else np.zeros(0, np.int64)
        p.largest = np.array(list(self.allowed_largest_server) or [0], dtype=np.int64)
        p.rack_servers = np.argsort(c.server_rack, kind="stable").astype(np.int64)
        p.rack_first = np.zeros(c.num_racks + 1, dtype=np.int64)
        p.rack_first[1:] = np.cumsum(np.bincount(c.server_rack, minlength=c.num_racks))
        p.heap = np.empty((5, 64))
        p.log = np.empty(1024, dtype=np.int64)
        p.queue = np.empty((2, max(1, n)), dtype=np.int64)  # jobs and the stamps of their entries
        p.stamp = np.zeros(n, dtype=np.int64)  # start order
        p.jstamp = np.zeros(n, dtype=np.int64)  # order of joining the network
        p.qstamp = np.zeros(n, dtype=np.int64)  # order of entering the queue
        p.jnr = np.zeros(n, dtype=np.int64)
        p.mark = np.zeros(n, dtype=np.int64)
        p.mark_state = np.zeros(1, dtype=np.int64)
        p.submit = np.asarray(self.workload.submit_time, dtype=np.float64)
        p.share = np.array(self._share, dtype=np.float64)
        return p

    @staticmethod
    def _order_ties(heap: np.ndarray, size: int, log: np.ndarray, length: int) -> None:
        """Give the events of each logged batch (:mod:`gpusched_envs.sim.loop_kernels`) the sequence numbers of the
        order the engine pushes them in: the iteration order of the very Python set ``_neighbours`` builds."""
        vals = log[:length].tolist()
        pos = 0
        while pos < len(vals):
            op, job, segments = vals[pos : pos + 3]
            pos += 3
            out: set[int] = set()
            for _ in range(segments):
                m = vals[pos]
                out.update(dict.fromkeys(vals[pos + 1 : pos + 1 + m]))
                pos += 1 + m
            k = vals[pos]
            batch = vals[pos + 1 : pos + 1 + k]
            pushed = vals[pos + 1 + k : pos + 1 + 2 * k]
            seq0 = vals[pos + 1 + 2 * k]
            pos += 2 + 2 * k
            if op == _lk.OP_OR:
                out = out | {job}
            elif op == _lk.OP_DISCARD:
                out.discard(job)
            if out != set(batch):
                raise RuntimeError(f"compiled loop: the neighbours of job {job} differ from the engine's")
            sent = {j for j, p in zip(batch, pushed, strict=True) if p}
            rank = {j: r for r, j in enumerate(j for j in out if j in sent)}
            new_seq = np.array(
                [seq0 + 1 + rank[j] for j, p in zip(batch, pushed, strict=True) if p], dtype=np.int64
            )
            _lk.reseq(heap, size, seq0, new_seq)
        _lk.heapify(heap, size)

    def _adopt_compiled_state(
        self,
        st_f: np.ndarray,
        st_i: np.ndarray,
        heap: np.ndarray,
        stamp: np.ndarray,
        jstamp: np.ndarray,
        qstamp: np.ndarray,
    ) -> None:
        """The Python-side state after the compiled loop: scalars, event heap, queue, running jobs and the
        per-GPU / server / link job dicts (in the order the Python engine inserts into them: start order)."""
        self.now = float(st_f[_lk.F_NOW])
        self._demand = st_f[_lk.F_DEMAND]
        self._demand_integral = float(st_f[_lk.F_DINT])
        self._fragmentation_integral = float(st_f[_lk.F_FINT])
        self._utilisation_integral = float(st_f[_lk.F_UINT])
        self._allocated_now = st_f[_lk.F_ALLOC]
        self._last_integral_time = float(st_f[_lk.F_LAST])
        self._fragmented_now = float(st_f[_lk.F_FRAG])
        self._seq = int(st_i[_lk.I_SEQ])
        self.next_arrival = int(st_i[_lk.I_NEXT])
        self.events_processed = int(st_i[_lk.I_EVENTS])
        self.decisions = int(st_i[_lk.I_DECISIONS])
        self.finished = int(st_i[_lk.I_FINISHED])
        self._free_total = int(st_i[_lk.I_FREE])
        self._goff = int(st_i[_lk.I_GOFF])
        self.changed = False
        size = int(st_i[_lk.I_HLEN])
        self.timer_at = float(st_f[_lk.F_TIMER])
        self._timer_version = int(st_i[_lk.I_TVER])
        self._heap = [
            (float(t), int(s), int(k), int(j), int(v)) for t, s, j, v, k in heap[:, :size].T.tolist()
        ]
        heapq.heapify(self._heap)
        queued = np.flatnonzero(self.status == QUEUED)
        self._queue = dict.fromkeys(queued[np.argsort(qstamp[queued])].tolist())
        running = np.flatnonzero((self.status == RUNNING) | (self.status == RESTARTING))
        running = running[np.argsort(stamp[running])].tolist()
        self._running = dict.fromkeys(running)
        c = self.cluster
        gs, rk = c.gpu_server_list, c.server_rack_list
        for job in running:
            goff, glen = int(self._ji[_ek.GOFF, job]), int(self._ji[_ek.GLEN, job])
            gpus = self._gbuf[goff : goff + glen].copy()
            self._job_gpus[job] = gpus
            servers = sorted({gs[g] for g in gpus.tolist()})
            racks = sorted({rk[s] for s in servers})
            self._job_servers[job] = servers
            self._job_racks[job] = racks
            if self._milli_list[job] < FULL_GPU:
                self._gpu_sharers.setdefault(int(gpus[0]), {})[job] = None
            for s in servers:
                self._server_jobs[s][job] = None
        on_network = np.flatnonzero(self.on_network)
        for job in on_network[np.argsort(jstamp[on_network])].tolist():
            for s in self._job_servers[job]:
                self._nic_users[s][job] = None
            if len(self._job_racks[job]) > 1:
                for r in self._job_racks[job]:
                    self._rack_crossers[r][job] = None

    # ------------------------------------------------------------------ internals
    def _push(self, time: float, kind: int, job: int, version: int) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (time, self._seq, kind, job, version))

    def _integrate_to_now(self) -> None:
        dt = self.now - self._last_integral_time
        if dt > 0:
            self._demand_integral += self._demand * dt
            self._fragmentation_integral += self._fragmented_now * dt
            self._utilisation_integral += self._allocated_now * dt
            self._last_integral_time = self.now

    def _note_fragmentation(self) -> None:
        """Free GPUs unusable by the head job: counted while the oldest waiting job waits though enough GPUs are free."""
        dt = self.now - self._last_integral_time  # _integrate_to_now, inlined
        if dt > 0:
            self._demand_integral += self._demand * dt
            self._fragmentation_integral += self._fragmented_now * dt
            self._utilisation_integral += self._allocated_now * dt
            self._last_integral_time = self.now
        self._fragmented_now = 0.0
        if self._queue:
            head = min(self._queue)  # oldest arrival (rows are sorted by submit time)
            milli = self._milli_list[head]
            k = self._allowed_list[head]
            if milli >= FULL_GPU and k < 0:  # every wholly free GPU, the engine's count
                if self._free_total >= self._n_list[head]:
                    self._fragmented_now = float(self._free_total)
                return
            usable, whole = _ek.fragmentation(
                self.gpu_free_milli, FULL_GPU if milli >= FULL_GPU else milli,
                _ALL_GPUS if k < 0 else self.allowed_masks[k],
            )  # fmt: skip
            if usable >= self.job_gpus_n[head]:
                # the wholly free GPUs of the head's pool / type, all unusable by it since it still waits
                self._fragmented_now = float(whole)

    def _bank(self, job: int) -> None:
        """Credit progress at the current rate up to now."""
        dt = self.now - self.last_update[job]
        if dt > 0 and self.status[job] == RUNNING:
            self.done_work[job] = min(self.job_work[job], self.done_work[job] + self.rate[job] * dt)
            self.running_time[job] += dt
            self.comm_time[job] += dt * self.comm_fraction[job]
        self.last_update[job] = self.now

    def _release(self, job: int, complete: bool = False) -> None:
        """Take the job's GPUs back (after banking its progress and marking its work done if it ``complete``s)
        and refresh the jobs whose speed depended on it."""
        if self._milli_list[job] < FULL_GPU:
            g = int(self._job_gpus[job][0])
            sharers = self._gpu_sharers[g]
            del sharers[job]
            if not sharers:
                del self._gpu_sharers[g]
            self.gpu_job[g] = next(iter(sharers)) if sharers else -1
        self._allocated_now -= self._share[job]
        neighbours = self._neighbours(job)
        server_jobs = self._server_jobs
        for s in self._job_servers[job]:
            del server_jobs[s][job]
        if self.on_network[job]:
            self._leave_network(job)
        del self._running[job]
        self._job_gpus[job] = None
        neighbours.discard(job)
        if not neighbours:  # nothing to refresh: the release alone
            args = (job, complete, self.now, self.status, self._jf, self._ji, self._gi, self._si, self._gbuf)
            self._free_total += _ek.release(*args)
            return
        order = list(neighbours)
        k = len(order)
        jobs, out = self._kjobs[:k], self._kout[:k]
        jobs[:] = order
        c = self.cluster.catalog
        args = (
            job, complete, self.now, jobs, self.status, self._jf, self._ji, self._gi, self._si, self._sf,
            self._rf, self._mf, c.colocation_slowdown, c.space_sharing_by_type, self._params, self._gbuf, out,
        )  # fmt: skip
        self._free_total += _ek.release_job(*args)
        self._push_completions(order, out)

    def _complete(self, job: int) -> None:
        self._release(job, complete=True)
        self.status[job] = DONE
        self.finish_time[job] = self.now
        self._demand_at_finish[job] = self._demand_integral
        self.finished += 1
        self._demand -= self._share[job]

    def _join_network(self, job: int) -> None:
        """The job starts sending: it takes its traffic-weighted share of every NIC and uplink its ring crosses."""
        servers = self._job_servers[job]
        if self.config.speed_model == "duration" or len(servers) <= 1:
            return
        self.on_network[job] = True
        for s in servers:
            self._nic_users[s][job] = None
            self._sum_load(self._nic_users[s], self.nic_load, s)
        racks = self._job_racks[job]
        if len(racks) > 1:
            self.rack_crossing[racks] += 1
            for r in racks:
                self._rack_crossers[r][job] = None
                self._sum_load(self._rack_crossers[r], self.uplink_load, r)

    def _leave_network(self, job: int) -> None:
        if not self.on_network[job]:
            return
        self.on_network[job] = False
        for s in self._job_servers[job]:
            del self._nic_users[s][job]
            self._sum_load(self._nic_users[s], self.nic_load, s)
        racks = self._job_racks[job]
        if len(racks) > 1:
            self.rack_crossing[racks] -= 1
            for r in racks:
                del self._rack_crossers[r][job]
                self._sum_load(self._rack_crossers[r], self.uplink_load, r)

    def _sum_load(self, users: dict[int, None], load: np.ndarray, i: int) -> None:
        # summed afresh (not += / -=) so that a link's load is exactly its users' traffic, with no drift
        traffic = self._jf[_ek.TRAF]
        load[i] = sum(traffic[k] for k in users)

    def _neighbours(self, job: int) -> set[int]:
        """Jobs whose speed depends on this job's presence: same servers, same GPUs, same NICs and uplinks."""
        if self._duration:
            return set()
        out: set[int] = set()
        gpus = self._job_gpus[job]
        if gpus is None:
            return out
        servers = self._job_servers[job]
        if self._interference:
            server_jobs = self._server_jobs
            for s in servers:
                out.update(server_jobs[s])
        if self._milli_list[job] < FULL_GPU:
            out.update(self._gpu_sharers.get(int(gpus[0]), ()))
        if self.on_network[job]:
            for s in servers:
                out.update(self._nic_users[s])
            racks = self._job_racks[job]
            if len(racks) > 1:
                for r in racks:
                    out.update(self._rack_crossers[r])
        return out

    def _refresh_rates(self, jobs) -> None:
        """Bank progress and recompute rate and completion time of running jobs (after any change around them),
        in the iteration order of ``jobs`` (the order their completion events are pushed)."""
        if not jobs:
            return
        order = list(jobs)
        k = len(order)
        arr, out = self._kjobs[:k], self._kout[:k]
        arr[:] = order
        _ek.refresh(
            arr, self.now, self.status, self._jf, self._ji, self._gi, self._si, self._sf, self._rf, self._mf,
            self.cluster.catalog.colocation_slowdown, self.cluster.catalog.space_sharing_by_type, self._params,
            self._gbuf, out,
        )  # fmt: skip
        self._push_completions(order, out)

    def _push_completions(self, jobs: list[int], times: np.ndarray) -> None:
        """Push the completion events of the refreshed jobs in order (``times[i]`` nan: not running)."""
        version, heap, push, seq = self.version, self._heap, heapq.heappush, self._seq
        for job, t in zip(jobs, times.tolist(), strict=True):
            if t == t:
                seq += 1
                push(heap, (t, seq, COMPLETION, job, int(version[job])))
        self._seq = seq

    # ------------------------------------------------------------------ results
    def metrics(self) -> dict:
        if self.stepper is not None:
            self.stop_stepping()
        return compute_metrics(self)
