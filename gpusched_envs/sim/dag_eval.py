"""Fast evaluation of DAG scheduling plans by list scheduling (SPEC §3, DAG model / WORL-RTGS).

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
handful of numpy operations on (P,)- and (P, max-in/out-degree)-shaped arrays. This module knows nothing about the
cluster classes: callers pass per-GPU ``speed`` (G,) and a (G, G) ``bandwidth`` matrix in bytes/s (the diagonal is
ignored and treated as infinite). Nor does it import the workload layer: any object with the :class:`DAGLike`
attributes works.
"""

from __future__ import annotations

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
        by_dst = np.argsort(dst, kind="stable")
        in_ptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=n))])
        by_src = np.argsort(src, kind="stable")
        out_ptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n))])
        # padded parent / child tables; padding points at a dummy task N (finish 0, on GPU 0, 0 bytes)
        self.par = _padded(in_ptr, src[by_dst], n, n)  # (N, K) int64
        self.par_bytes = _padded(in_ptr, eb[by_dst], n, 0).astype(np.float64)  # (N, K)
        self.kids = _padded(out_ptr, dst[by_src], n, n)  # (N, C) int64
        self.indeg = np.bincount(dst, minlength=n).astype(np.int64)
        self.roots = np.flatnonzero(self.indeg == 0)
        self._rt_flat = self.runtime.ravel()
        self._inv_flat = self.inv_bw.ravel()

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
        a = a.astype(np.int64)
        if a.size and (a.min() < 0 or a.max() >= g):
            raise ValueError(f"assignments must be GPU indices in 0..{g - 1}")
        if not np.all(np.isfinite(p)):
            raise ValueError("priorities must be finite")
        return a, p

    # ------------------------------------------------------------------ core
    def _run(self, a: np.ndarray, prio: np.ndarray, keep: bool):
        pop, n = a.shape
        g = self.num_gpus
        n1 = n + 1
        rows_n = np.arange(pop, dtype=np.int64) * n1
        rows_g = np.arange(pop, dtype=np.int64) * g
        a_ext = np.zeros((pop, n1), dtype=np.int64)
        a_ext[:, :n] = a
        a_flat = a_ext.ravel()
        prio_ext = np.full((pop, n1), -np.inf)
        prio_ext[:, :n] = prio
        prio_flat = prio_ext.ravel()
        avail = np.full((pop, n1), -np.inf)  # priority of ready, undispatched tasks; -inf otherwise
        avail[:, self.roots] = prio[:, self.roots]
        avail_flat = avail.ravel()
        rem = np.empty((pop, n1), dtype=np.int64)
        rem[:, :n] = self.indeg
        rem[:, n] = np.iinfo(np.int64).max // 2
        rem_flat = rem.ravel()
        finish = np.zeros(pop * n1)
        free = np.zeros(pop * g)
        start = np.zeros((pop, n)) if keep else None
        order = np.zeros((pop, n), dtype=np.int64) if keep else None
        par, par_bytes, kids = self.par, self.par_bytes, self.kids
        has_par, has_kids = par.shape[1] > 0, kids.shape[1] > 0
        rt, inv = self._rt_flat, self._inv_flat
        neg_inf = -np.inf
        for step in range(n):
            t = avail.argmax(axis=1)  # (P,) next task of each plan
            ft = rows_n + t
            avail_flat[ft] = neg_inf
            gpu = a_flat[ft]
            fg = rows_g + gpu
            st = free[fg]
            if has_par:
                pidx = rows_n[:, None] + par[t]  # (P, K)
                arrive = finish[pidx] + par_bytes[t] * inv[a_flat[pidx] * g + gpu[:, None]]
                np.maximum(st, arrive.max(axis=1), out=st)
            fin = st + rt[t * g + gpu]
            finish[ft] = fin
            free[fg] = fin
            if keep:
                start[:, step] = st
                order[:, step] = t
            if has_kids:
                cidx = rows_n[:, None] + kids[t]  # (P, C)
                r = rem_flat[cidx] - 1
                rem_flat[cidx] = r
                avail_flat[cidx] = np.where(r == 0, prio_flat[cidx], neg_inf)
        makespan = free.reshape(pop, g).max(axis=1) if n else np.zeros(pop)
        if not keep:
            return makespan, None, None, None
        fin2 = finish.reshape(pop, n1)[:, :n]
        st2 = np.empty((pop, n))
        np.put_along_axis(st2, order, start, axis=1)
        return makespan, st2, fin2.copy(), order

    def evaluate(self, assignments, priorities) -> np.ndarray:
        """(P,) makespans of the plans ``assignments`` (P, N) int and ``priorities`` (P, N) float."""
        a, p = self._check(assignments, priorities)
        return self._run(a, p, keep=False)[0]

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
