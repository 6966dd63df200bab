"""Fast evaluation of DAG scheduling plans by list scheduling (the DAG model of WORL-RTGS).

A *plan* is a task -> GPU ``assignment`` (N,) int and a task ``priority`` (N,) float. It is turned into a schedule by
non-insertion list scheduling:

1. the *dispatch order* is built greedily: among the tasks whose parents have all been dispatched, the one with the
   highest priority goes next (ties: lowest task index). Any finite priority vector therefore gives a
   precedence-respecting order; when sorting by priority is already topological, the order is that sort;
2. tasks are dispatched in that order; task ``i`` on GPU ``g = assignment[i]`` starts at
   ``max(free[g], max over parents p of finish[p] + bytes(p, i) / bandwidth[gpu(p), g])`` (the transfer is 0 on
   the same GPU) and runs ``work[i] / speed[g]`` seconds (times the DAG's ``hetero`` factor if any); it is appended
   after the GPU's previous task (a GPU runs one task at a time, no back-filling into earlier gaps);
3. the makespan is the last finish time.

Transfers do not contend for links (each edge sees the full pairwise bandwidth) and have no latency term.
Tasks whose GPU-type affinity forbids their assigned GPU get an infinite runtime, so such plans score ``inf``.

The evaluator is vectorised over a population of P plans: it loops over the N dispatch steps, and each step is a
handful of numpy operations on (P,)- and (P, max-out-degree)-shaped arrays. This module knows nothing about the
cluster classes: callers pass per-GPU ``speed`` (G,) and a (G, G) ``bandwidth`` matrix in bytes/s (the diagonal is
ignored and treated as infinite). Nor does it import the workload layer: any object with the :class:`DAGLike`
attributes works.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol

import numpy as np


class DAGLike(Protocol):
    work: np.ndarray  # (N,) reference GPU-seconds
    edges: np.ndarray  # (E, 2) int (src, dst)
    edge_bytes: np.ndarray  # (E,) bytes
    affinity: tuple[str | None, ...] | None
    hetero: np.ndarray | None  # (N, H)
    name: str


def runtime_matrix(dag: DAGLike, speed: np.ndarray, gpu_types=None) -> np.ndarray:
    """(N, G) float64 seconds task ``i`` takes on GPU ``g``; ``inf`` where the task's affinity forbids the GPU."""
    speed = np.asarray(speed, dtype=np.float64).reshape(-1)
    if len(speed) == 0 or np.any(speed <= 0) or not np.all(np.isfinite(speed)):
        raise ValueError("speed must be a non-empty (G,) array, finite and > 0 for every GPU")
    work = np.asarray(dag.work, dtype=np.float64)
    rt = work[:, None] / speed[None, :]
    hetero = getattr(dag, "hetero", None)
    if hetero is not None:
        rt = rt * hetero[:, np.arange(len(speed)) % hetero.shape[1]]
    affinity = getattr(dag, "affinity", None)
    if affinity is not None and any(a is not None for a in affinity):
        if gpu_types is None:
            raise ValueError(f"DAG {dag.name!r} has GPU-type affinities: pass gpu_types (one per GPU)")
        gt = np.asarray([str(t) for t in gpu_types], dtype=object)
        if len(gt) != len(speed):
            raise ValueError(f"gpu_types has {len(gt)} entries for {len(speed)} GPUs")
        for i, a in enumerate(affinity):
            if a is not None:
                bad = gt != a
                if bad.all():
                    raise ValueError(f"DAG {dag.name!r}: task {i} needs GPU type {a!r}, which no GPU has")
                rt[i, bad] = np.inf
    return rt


def inverse_bandwidth(bandwidth: np.ndarray, num_gpus: int | None = None) -> np.ndarray:
    """(G, G) seconds per byte between GPUs, 0 on the diagonal. ``bandwidth`` must be > 0 off the diagonal."""
    bw = np.asarray(bandwidth, dtype=np.float64)
    if bw.ndim != 2 or bw.shape[0] != bw.shape[1]:
        raise ValueError(f"bandwidth must be a (G, G) matrix, got shape {bw.shape}")
    if num_gpus is not None and bw.shape[0] != num_gpus:
        raise ValueError(f"bandwidth is {bw.shape[0]}x{bw.shape[0]} but speed has {num_gpus} GPUs")
    off = ~np.eye(bw.shape[0], dtype=bool)
    if np.any(np.isnan(bw)) or np.any(bw[off] <= 0):
        raise ValueError("bandwidth must be > 0 (bytes/s) between every pair of distinct GPUs")
    with np.errstate(divide="ignore"):
        inv = 1.0 / bw
    inv[~off] = 0.0
    return inv


@dataclass(frozen=True)
class PlanSchedule:
    """The schedule one plan produces (for Gantt charts and checks)."""

    makespan: float
    start: np.ndarray  # (N,) float64 seconds
    finish: np.ndarray  # (N,) float64 seconds
    gpu: np.ndarray  # (N,) int64 GPU of each task (= the assignment)
    order: np.ndarray  # (N,) int64 dispatch order (task indices)


def _padded(ptr: np.ndarray, vals: np.ndarray, n: int, fill: int) -> np.ndarray:
    """Rows ``vals[ptr[i]:ptr[i+1]]`` padded with ``fill`` into an (n, max_len) array."""
    lens = np.diff(ptr)
    k = int(lens.max()) if n else 0
    out = np.full((n, k), fill, dtype=vals.dtype)
    if k:
        col = np.arange(len(vals)) - np.repeat(ptr[:-1], lens)
        out[np.repeat(np.arange(n), lens), col] = vals
    return out


_local = threading.local()  # per-thread work buffers of the evaluator, see _workspace
_WORKSPACE_MAX_BYTES = 256 * 2**20


def _workspace(pop: int, n: int, g: int, e: int, c: int, kdt) -> dict:
    """Work buffers for one evaluation of ``pop`` plans of an (N tasks, G GPUs, E edges, C max children) DAG.

    A population's work arrays are several MB, and a fresh numpy array that large is fresh memory from the OS on
    every call (glibc returns blocks above its mmap threshold on free), so each call paid a page fault per 4 KiB it
    touched: measured at ~30% of an evaluation of 1,000 plans of 50 tasks. So the buffers are kept and reused:
    per thread (a thread runs one evaluation at a time; the next call overwrites them), for the two most recent
    shapes, and only up to 256 MiB (larger populations allocate per call). Each step writes into them with
    ``out=`` (and ``np.take(..., mode="clip")``: ``mode="raise"`` buffers its output; indices are in range).
    """
    shape = (pop, n, g, e, c, np.dtype(kdt).str)
    cache = _local.__dict__.setdefault("workspaces", {})
    tab = cache.pop(shape, None)
    if tab is None:
        n1 = n + 1
        plan = np.arange(pop, dtype=np.int64)
        tab = {
            "plan": plan,
            "plan_col": plan[:, None],
            "rows_n": plan * n,
            "rows_n_col": (plan * n)[:, None],
            "rows_g": plan * g,
            "rank_vals": np.tile(np.arange(n, dtype=kdt), pop),
            # per population
            "idx": np.empty((pop, n), dtype=np.int64),
            "sorted": np.empty((pop, n)),
            "tie": np.empty((pop, max(n - 1, 0)), dtype=bool),
            "rank": np.empty((pop, n), dtype=kdt),
            "key": np.empty((n1, pop), dtype=kdt),
            "run": np.empty(pop * n),
            "gpu": np.empty((n, pop), dtype=np.int64),
            "a_t": np.empty((n, pop), dtype=np.int64),
            "pair": np.empty((e, pop), dtype=np.int64),
            "pair2": np.empty((e, pop), dtype=np.int64),
            "delay": np.zeros((e + 1, pop)),  # row E stays 0: the padding edge
            "ready": np.empty(n1 * pop),
            "free": np.empty(pop * g),
            # per step
            "best": np.empty(pop, dtype=kdt),
            "pos": np.empty(pop, dtype=np.int64),
            "t": np.empty(pop, dtype=np.int64),
            "ft": np.empty(pop, dtype=np.int64),
            "fg": np.empty(pop, dtype=np.int64),
            "st": np.empty(pop),
            "tmp": np.empty(pop),
            "fin": np.empty(pop),
            "cidx": np.empty((pop, c), dtype=np.int64),
            "eidx": np.empty((pop, c), dtype=np.int64),
            "ckey": np.empty((pop, c), dtype=kdt),
            "arrive": np.empty((pop, c)),
            "cready": np.empty((pop, c)),
        }
    if sum(v.nbytes for v in tab.values()) <= _WORKSPACE_MAX_BYTES:
        while len(cache) >= 2:
            cache.pop(next(iter(cache)))  # the least recently used shape
        cache[shape] = tab
    return tab


class PlanEvaluator:
    """Evaluates many plans of one DAG on one GPU set. Build once, call :meth:`evaluate` per population.

    ``speed`` (G,) relative GPU speeds (1.0 = the reference GPU); ``bandwidth`` (G, G) bytes/s between GPUs;
    ``gpu_types`` (G,) type names, needed only when the DAG has affinities.
    """

    def __init__(self, dag: DAGLike, speed: np.ndarray, bandwidth: np.ndarray, *, gpu_types=None):
        self.dag = dag
        self.runtime = runtime_matrix(dag, speed, gpu_types)  # (N, G)
        n, g = self.runtime.shape
        self.num_tasks, self.num_gpus = n, g
        self.inv_bw = inverse_bandwidth(bandwidth, g)  # (G, G)
        edges = np.asarray(dag.edges, dtype=np.int64).reshape(-1, 2)
        eb = np.asarray(dag.edge_bytes, dtype=np.float64)
        src, dst = edges[:, 0], edges[:, 1]
        by_src = np.argsort(src, kind="stable")
        out_ptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n))])
        # padded child tables; padding points at a dummy task N and a dummy edge E (0 bytes)
        self.kid_edge = _padded(out_ptr, by_src, n, len(edges))  # (N, C) edge ids; padding: dummy edge E
        self.num_edges = len(edges)
        self.edge_src, self.edge_dst, self.edge_bytes = src, dst, eb
        self._scaled: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.kids = _padded(out_ptr, dst[by_src], n, n)  # (N, C) int64
        self.indeg = np.bincount(dst, minlength=n).astype(np.int64)
        self.roots = np.flatnonzero(self.indeg == 0)
        self._rt_flat = self.runtime.ravel()
        # dispatch keys (see _run) lie in [-(N + 1) * max in-degree, N - 1]; the padding row, which starts at the
        # dtype's minimum, gains N + 1 per step and must stay negative: the smallest integer type that fits
        span = (n + 1) * max(n, int(self.indeg.max(initial=0))) + n
        self._key_dtype = next(t for t in (np.int16, np.int32, np.int64) if span < np.iinfo(t).max // 2)
        self._inv_flat = self.inv_bw.ravel()
        self._rt_offset = np.arange(n, dtype=np.int64) * g  # task i's row in the flat (N, G) runtimes
        self._key_base = (-(n + 1) * self.indeg).astype(self._key_dtype)  # a task's key before its rank

    # ------------------------------------------------------------------ input checks
    def _check(self, assignments, priorities) -> tuple[np.ndarray, np.ndarray]:
        n, g = self.num_tasks, self.num_gpus
        a = np.asarray(assignments)
        p = np.asarray(priorities, dtype=np.float64)
        if a.ndim == 1:
            a = a[None, :]
        if p.ndim == 1:
            p = p[None, :]
        if a.shape != p.shape or a.ndim != 2 or a.shape[1] != n:
            raise ValueError(f"assignments {a.shape} and priorities {p.shape} must both be (P, N={n})")
        if not np.issubdtype(a.dtype, np.integer):
            if not np.all(a == np.round(a)):
                raise ValueError("assignments must be integer GPU indices")
        a = a.astype(np.int64, copy=False)
        if a.size and (a.min() < 0 or a.max() >= g):
            raise ValueError(f"assignments must be GPU indices in 0..{g - 1}")
        if not np.all(np.isfinite(p)):
            raise ValueError("priorities must be finite")
        return a, p

    # ------------------------------------------------------------------ core
    def _tables(self, pop: int) -> dict:
        """Index helpers and work buffers for a population of ``pop`` plans: the DAG's child tables scaled by
        ``P`` (cached per evaluator), the rest from :func:`_workspace` (shared by every evaluator of the same
        shapes in this thread). Per-task arrays are laid out task-major, ``(N + 1, P)`` (row N: padding), so
        position ``task * P + plan``; per-edge arrays ``(E + 1, P)`` (row E: padding, delay 0). The child tables
        scaled by ``P`` are small (N, C): gathering rows of them and adding the plan beats gathering rows of a
        (P * N, C) table."""
        scaled = self._scaled.get(pop)
        if scaled is None:
            if len(self._scaled) > 4:
                self._scaled.clear()
            scaled = self._scaled[pop] = (self.kids * pop, self.kid_edge * pop)
        tab = _workspace(
            pop, self.num_tasks, self.num_gpus, self.num_edges, self.kids.shape[1], self._key_dtype
        )
        tab["kids"], tab["kid_edge"] = scaled
        return tab

    @staticmethod
    def _by_rank(prio: np.ndarray, tab: dict | None = None) -> np.ndarray:
        """(P, N) each plan's tasks by ascending rank: priority ascending, ties by descending index (the lower
        index ranks higher). Rows without ties take the faster unstable sort, rows with ties the stable one. With
        ``tab`` (the work buffers), ``tab["idx"]`` is left holding the flat positions ``plan * N + (that array)``."""
        pop, n = prio.shape
        by = np.argsort(prio, axis=1)
        if tab is None:
            sp = np.take_along_axis(prio, by, axis=1)
            tied = (sp[:, 1:] == sp[:, :-1]).any(axis=1)
        else:  # the same test in the reused buffers
            idx, sp = tab["idx"], tab["sorted"]
            np.add(by, tab["rows_n_col"], out=idx)
            np.take(np.ascontiguousarray(prio).ravel(), idx, out=sp, mode="clip")
            tied = np.equal(sp[:, 1:], sp[:, :-1], out=tab["tie"]).any(axis=1)
        if tied.any():
            by[tied] = (n - 1) - np.argsort(prio[tied, ::-1], axis=1, kind="stable")
            if tab is not None:
                np.add(by, tab["rows_n_col"], out=tab["idx"])
        return by

    def _run(self, a: np.ndarray, prio: np.ndarray, keep: bool, total: np.ndarray | None = None):
        """One pass over the N dispatch steps for the whole population.

        The dispatch order: priorities are first turned into per-plan ranks (0 = lowest, distinct), so "ready"
        folds into one key per task, ``rank - (N + 1) * (undispatched parents)``: the ready tasks are exactly the
        keys >= 0, and the next task is the one whose rank is the column maximum (looked up by rank, which is
        cheaper than an argmax along a short axis). Keys are the smallest integer type that holds them (int16 up to
        ~180 tasks), so the per-step column maximum reads a quarter of the float64 bytes. Dispatching a task sets
        its key to the type's minimum and adds ``N + 1`` to its children's keys. Times are *pushed*: when a task
        finishes, each child's input-arrival time becomes ``max(itself, finish + transfer)``, using the same child
        positions as the key update; a task starts at ``max(GPU free, its arrival time)``. Per-plan runtimes and
        edge transfer delays are gathered once per population. What costs here is numpy's per-call overhead and
        memory traffic, so each step gathers from small (N, C) tables into reused buffers (see :meth:`_tables`)
        and the ranks come from the unstable sort wherever a plan has no tied priorities."""
        pop, n = a.shape
        g = self.num_gpus
        if n == 0:
            z = np.zeros((pop, 0))
            return np.zeros(pop), z, z, np.zeros((pop, 0), dtype=np.int64)
        tab = self._tables(pop)
        n1 = n + 1
        plan, rows_n, kids_p, kid_edge_p, plan_col = (
            tab["plan"],
            tab["rows_n"],
            tab["kids"],
            tab["kid_edge"],
            tab["plan_col"],
        )
        by_prio = self._by_rank(prio, tab)
        task_of_rank = by_prio.ravel()  # position plan * N + rank -> the task
        kdt = self._key_dtype
        gone = np.iinfo(kdt).min  # the key of a dispatched task (and of the padding row)
        # keys: rank + base, the rank of task by_prio[p, r] in plan p being r
        idx, rank, key = tab["idx"], tab["rank"], tab["key"]  # idx: by_prio's flat positions (_by_rank)
        rank.ravel()[idx.ravel()] = tab["rank_vals"]
        np.add(rank.T, self._key_base[:, None], out=key[:n])
        key[n] = gone
        key_flat = key.ravel()
        a_t, gpu = tab["a_t"], tab["gpu"]
        np.copyto(a_t, a.T)  # (N, P) task-major, like the keys: one position ``task * P + plan`` serves all
        np.add(a_t, self._rt_offset[:, None], out=gpu)
        run_flat = np.take(self._rt_flat, gpu.ravel(), out=tab["run"], mode="clip")  # runtime of each task
        gpu_flat = np.add(a_t, tab["rows_g"], out=gpu).ravel()  # position of each task's GPU in ``free``
        delay = tab["delay"]  # transfer time of each edge in each plan (+ a dummy 0 edge for padding)
        if self.num_edges:
            pair, pair2 = tab["pair"], tab["pair2"]
            np.take(
                a_t, self.edge_src, axis=0, out=pair, mode="clip"
            )  # each edge's GPUs: two contiguous rows
            pair *= g
            pair += np.take(a_t, self.edge_dst, axis=0, out=pair2, mode="clip")
            body = delay[:-1]
            np.take(self._inv_flat, pair, out=body, mode="clip")
            body *= self.edge_bytes[:, None]
        delay_flat = delay.ravel()
        ready_flat = tab["ready"]  # inputs-arrived time of each task (row N: the padding child)
        ready_flat.fill(0.0)
        free = tab["free"]
        free.fill(0.0)
        has_kids = kids_p.shape[1] > 0
        step_add = kdt(n1)
        best, pos, t, ft, fg = tab["best"], tab["pos"], tab["t"], tab["ft"], tab["fg"]
        st, tmp, fin = tab["st"], tab["tmp"], tab["fin"]
        cidx, eidx, ckey, arrive, cready = tab["cidx"], tab["eidx"], tab["ckey"], tab["arrive"], tab["cready"]
        fin_col = fin[:, None]
        if keep:
            order = np.empty((n, pop), dtype=np.int64)
            start = np.empty((n, pop))
            finish = np.empty((n, pop))
        for step in range(n):
            key.max(axis=0, out=best)  # (P,) rank of the next task
            np.add(rows_n, best, out=pos)
            np.take(task_of_rank, pos, out=t, mode="clip")
            np.multiply(t, pop, out=ft)
            ft += plan
            key_flat[ft] = gone
            np.take(gpu_flat, ft, out=fg, mode="clip")
            np.take(free, fg, out=st, mode="clip")
            np.maximum(st, np.take(ready_flat, ft, out=tmp, mode="clip"), out=st)
            np.add(st, np.take(run_flat, ft, out=fin, mode="clip"), out=fin)
            free[fg] = fin
            if keep:
                order[step], start[step], finish[step] = t, st, fin
            if total is not None:
                total += fin
            if has_kids:
                np.take(kids_p, t, axis=0, out=cidx, mode="clip")  # (P, C); one plan's children are distinct
                cidx += plan_col
                np.take(key_flat, cidx, out=ckey, mode="clip")
                ckey += step_add
                key_flat[cidx] = ckey
                np.take(kid_edge_p, t, axis=0, out=eidx, mode="clip")
                eidx += plan_col
                np.take(delay_flat, eidx, out=arrive, mode="clip")
                arrive += fin_col
                np.maximum(np.take(ready_flat, cidx, out=cready, mode="clip"), arrive, out=cready)
                ready_flat[cidx] = cready
        makespan = free.reshape(pop, g).max(axis=1)
        if not keep:
            return makespan, None, None, None
        order = np.ascontiguousarray(order.T)
        st2 = np.empty((pop, n))
        fin2 = np.empty((pop, n))
        np.put_along_axis(st2, order, start.T, axis=1)
        np.put_along_axis(fin2, order, finish.T, axis=1)
        return makespan, st2, fin2, order

    def dispatch_order(self, assignments, priorities) -> np.ndarray:
        """(P, N) int64 dispatch order of each plan (repeatedly the ready task of highest priority)."""
        a, p = self._check(assignments, priorities)
        return self._run(a, p, keep=True)[3]

    def evaluate(self, assignments, priorities) -> np.ndarray:
        """(P,) makespans of the plans ``assignments`` (P, N) int and ``priorities`` (P, N) float."""
        a, p = self._check(assignments, priorities)
        return self._run(a, p, keep=False)[0]

    def evaluate_with_total(self, assignments, priorities) -> tuple[np.ndarray, np.ndarray]:
        """``(makespan (P,), sum of the tasks' finish times (P,))``: the second breaks ties between plans of equal
        makespan (a local search moves along such plateaus towards schedules that finish their tasks earlier)."""
        a, p = self._check(assignments, priorities)
        total = np.zeros(len(a))
        return self._run(a, p, keep=False, total=total)[0], total

    def evaluate_with_times(self, assignments, priorities) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(makespan (P,), start (P, N), finish (P, N))`` for a population."""
        a, p = self._check(assignments, priorities)
        ms, st, fin, _ = self._run(a, p, keep=True)
        return ms, st, fin

    def schedule(self, assignment, priority) -> PlanSchedule:
        """The full schedule of one plan: per-task start/finish, GPU and dispatch order."""
        a, p = self._check(assignment, priority)
        if a.shape[0] != 1:
            raise ValueError("schedule() takes one plan; use evaluate_with_times() for a population")
        ms, st, fin, order = self._run(a, p, keep=True)
        return PlanSchedule(float(ms[0]), st[0], fin[0], a[0].copy(), order[0])


def evaluate_plans(dag: DAGLike, speed, bandwidth, assignments, priorities, *, gpu_types=None) -> np.ndarray:
    """(P,) makespans for a population of plans (``assignments`` (P, N) int, ``priorities`` (P, N) float).

    Builds a :class:`PlanEvaluator` per call; in a loop over generations build one evaluator and reuse it.
    """
    return PlanEvaluator(dag, speed, bandwidth, gpu_types=gpu_types).evaluate(assignments, priorities)


def evaluate_plan(dag: DAGLike, speed, bandwidth, assignment, priority, *, gpu_types=None) -> float:
    """Makespan (seconds) of one plan (``assignment`` (N,) int, ``priority`` (N,) float)."""
    return float(evaluate_plans(dag, speed, bandwidth, assignment, priority, gpu_types=gpu_types)[0])


def schedule_plan(dag: DAGLike, speed, bandwidth, assignment, priority, *, gpu_types=None) -> PlanSchedule:
    """Per-task start/finish times of one plan (for Gantt charts)."""
    return PlanEvaluator(dag, speed, bandwidth, gpu_types=gpu_types).schedule(assignment, priority)


def uniform_bandwidth(num_gpus: int, bytes_per_s: float) -> np.ndarray:
    """A (G, G) bandwidth matrix with every pair of distinct GPUs at ``bytes_per_s`` and ``inf`` on the diagonal."""
    bw = np.full((num_gpus, num_gpus), float(bytes_per_s))
    np.fill_diagonal(bw, np.inf)
    return bw
