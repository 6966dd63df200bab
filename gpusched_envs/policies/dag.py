"""Classical DAG list schedulers: HEFT, CPOP (Topcuoglu, Hariri & Wu, IEEE TPDS 13(3), 2002) and a
random plan. Each returns a plan ``(assignment (N,) int64, priority (N,) float64)`` that
:func:`gpusched_envs.sim.dag_eval.evaluate_plan` turns back into exactly the schedule the algorithm built.

What is implemented
-------------------
- Costs follow the paper: mean computation cost ``w̄_i`` = mean of task ``i``'s runtime over the GPUs it may use;
  mean communication cost of an edge = ``bytes`` × mean over ordered pairs of distinct GPUs of ``1 / bandwidth``
  (0 with one GPU). ``rank_u(i) = w̄_i + max_children (c̄_ij + rank_u(j))``, ``rank_d(i) = max_parents
  (rank_d(p) + w̄_p + c̄_pi)``.
- Task selection: a ready list (tasks whose parents are all scheduled), highest priority first, ties to the lowest
  task index. HEFT's priority is ``rank_u`` (so this is the paper's decreasing-``rank_u`` order), CPOP's is
  ``rank_u + rank_d``.
- GPU selection: earliest finish time. ``insertion=True`` (default, the paper's policy) may place a task in an idle
  gap between two tasks already on a GPU; ``insertion=False`` appends it after the GPU's last task. CPOP puts every
  critical-path task on the single GPU minimising the critical path's total runtime (if the task's affinity allows
  it; else EFT).
- The returned priority: with ``insertion=False`` the algorithm's own priority (its dispatch order then *is* the
  evaluator's list-scheduling order); with ``insertion=True`` the rank of each task in start-time order, because the
  non-insertion evaluator reproduces an insertion schedule exactly when tasks are dispatched in start-time order.
  Either way ``evaluate_plan(dag, speed, bandwidth, assignment, priority)`` equals the algorithm's own makespan.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpusched_envs.sim.dag_eval import DAGLike, inverse_bandwidth, runtime_matrix

__all__ = [
    "DagSchedule",
    "cpop",
    "cpop_schedule",
    "heft",
    "heft_schedule",
    "random_plan",
    "random_plans",
    "upward_rank",
    "downward_rank",
]


@dataclass(frozen=True)
class DagSchedule:
    """A plan plus the schedule the algorithm computed for it."""

    assignment: np.ndarray  # (N,) int64 GPU per task
    priority: np.ndarray  # (N,) float64, see the module docstring
    start: np.ndarray  # (N,) float64 seconds
    finish: np.ndarray  # (N,) float64 seconds
    makespan: float

    @property
    def plan(self) -> tuple[np.ndarray, np.ndarray]:
        return self.assignment, self.priority


def _structure(dag: DAGLike):
    edges = np.asarray(dag.edges, dtype=np.int64).reshape(-1, 2)
    n = len(dag.work)
    parents: list[list[int]] = [[] for _ in range(n)]  # edge indices into i
    children: list[list[int]] = [[] for _ in range(n)]  # edge indices out of i
    for e, (s, d) in enumerate(edges.tolist()):
        parents[d].append(e)
        children[s].append(e)
    return edges, parents, children


def topological_order(n: int, edges: np.ndarray, parents) -> list[int]:
    """Task indices parents first, from an (E, 2) edge list and each task's parent list."""
    indeg = [len(p) for p in parents]
    out: list[list[int]] = [[] for _ in range(n)]
    for s, d in edges.tolist() if isinstance(edges, np.ndarray) else edges:
        out[s].append(d)
    stack = [i for i in range(n) if indeg[i] == 0]
    order = []
    while stack:
        i = stack.pop()
        order.append(i)
        for d in out[i]:
            indeg[d] -= 1
            if indeg[d] == 0:
                stack.append(d)
    if len(order) != n:
        raise ValueError("DAG has a cycle")
    return order


def _order(dag: DAGLike, edges: np.ndarray, parents) -> list[int]:
    """A topological order of ``dag``: its own (a :class:`~gpusched_envs.workloads.dag.DAG` has one) or Kahn's."""
    own = getattr(dag, "topological_order", None)
    if own is not None:
        return own.tolist()
    return topological_order(len(dag.work), edges, parents)


def _mean_costs(dag: DAGLike, speed, bandwidth, gpu_types):
    rt = runtime_matrix(dag, speed, gpu_types)  # (N, G)
    inv = inverse_bandwidth(bandwidth, rt.shape[1])
    return (rt, inv, *_mean_costs_of(dag, rt, inv))


def _mean_costs_of(dag: DAGLike, rt: np.ndarray, inv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean computation cost per task and mean communication cost per edge, from the (N, G) runtimes and the
    (G, G) inverse bandwidths."""
    g = rt.shape[1]
    finite = np.isfinite(rt)
    w_mean = np.where(finite, rt, 0.0).sum(axis=1) / finite.sum(axis=1)
    inv_mean = inv[~np.eye(g, dtype=bool)].mean() if g > 1 else 0.0
    c_mean = np.asarray(dag.edge_bytes, dtype=np.float64) * inv_mean
    return w_mean, c_mean


def upward_rank(dag: DAGLike, speed, bandwidth, *, gpu_types=None) -> np.ndarray:
    """(N,) HEFT upward rank: length of the longest mean-cost path from the task to an exit, the task included."""
    _, _, w, c = _mean_costs(dag, speed, bandwidth, gpu_types)
    return _rank_u(dag, w, c)


def _upward_rank_of(dag: DAGLike, runtime: np.ndarray, inv_bandwidth: np.ndarray) -> np.ndarray:
    """:func:`upward_rank` from the DAG's (N, G) runtime matrix and the GPUs' (G, G) inverse bandwidths (as
    :func:`~gpusched_envs.sim.dag_eval.runtime_matrix` and :func:`~gpusched_envs.sim.dag_eval.inverse_bandwidth`
    give them), for a caller that holds both."""
    return _rank_u(dag, *_mean_costs_of(dag, runtime, inv_bandwidth))


def downward_rank(dag: DAGLike, speed, bandwidth, *, gpu_types=None) -> np.ndarray:
    """(N,) CPOP downward rank: longest mean-cost path from an entry to the task, the task excluded."""
    _, _, w, c = _mean_costs(dag, speed, bandwidth, gpu_types)
    return _rank_d(dag, w, c)


def _rank_u(dag, w, c):
    edges, parents, children = _structure(dag)
    dst, w, c = edges[:, 1].tolist(), w.tolist(), c.tolist()
    rank = [0.0] * len(w)
    for i in reversed(_order(dag, edges, parents)):
        best = 0.0
        for e in children[i]:
            x = c[e] + rank[dst[e]]
            if x > best:  # max(best, x)
                best = x
        rank[i] = w[i] + best
    return np.array(rank, dtype=np.float64)


def _rank_d(dag, w, c):
    edges, parents, _ = _structure(dag)
    src, w, c = edges[:, 0].tolist(), w.tolist(), c.tolist()
    rank = [0.0] * len(w)
    for i in _order(dag, edges, parents):
        best = 0.0
        for e in parents[i]:
            p = src[e]
            x = rank[p] + w[p] + c[e]
            if x > best:  # max(best, x)
                best = x
        rank[i] = best
    return np.array(rank, dtype=np.float64)


def _list_schedule(
    dag, rt, inv, priority, insertion: bool, fixed_gpu: np.ndarray | None = None
) -> DagSchedule:
    """Ready-list scheduling by ``priority`` with earliest-finish-time GPU choice (``fixed_gpu[i] >= 0`` forces)."""
    edges, parents, children = _structure(dag)
    n, g = rt.shape
    eb = np.asarray(dag.edge_bytes, dtype=np.float64)
    remaining = np.array([len(p) for p in parents])
    ready = {i for i in range(n) if remaining[i] == 0}
    start = np.zeros(n)
    finish = np.zeros(n)
    assign = np.zeros(n, dtype=np.int64)
    step_of = np.zeros(n, dtype=np.int64)
    busy: list[list[tuple[float, float]]] = [[] for _ in range(g)]  # sorted (start, finish) per GPU
    free = np.zeros(g)
    for step in range(n):
        i = max(ready, key=lambda k: (priority[k], -k))
        ready.discard(i)
        arrive = np.zeros(g)
        for e in parents[i]:
            p = edges[e, 0]
            np.maximum(arrive, finish[p] + eb[e] * inv[assign[p]], out=arrive)
        gpus = range(g) if fixed_gpu is None or fixed_gpu[i] < 0 else [int(fixed_gpu[i])]
        best = (np.inf, np.inf, -1)
        for q in gpus:
            d = rt[i, q]
            if not np.isfinite(d):
                continue
            if insertion:
                est, prev_end = arrive[q], 0.0
                for s, f in busy[q]:
                    if max(est, prev_end) + d <= s:
                        break
                    prev_end = max(prev_end, f)
                est = max(est, prev_end)
            else:
                est = max(arrive[q], free[q])
            if est + d < best[0]:
                best = (est + d, est, q)
        fin, est, q = best
        if q < 0:
            raise ValueError(f"task {i} has no GPU it may run on")
        assign[i], start[i], finish[i], step_of[i] = q, est, fin, step
        free[q] = max(free[q], fin)
        busy[q].append((est, fin))
        busy[q].sort()
        for e in children[i]:
            d = edges[e, 1]
            remaining[d] -= 1
            if remaining[d] == 0:
                ready.add(int(d))
    if insertion:
        pos = np.empty(n, dtype=np.int64)
        pos[np.lexsort((step_of, finish, start))] = np.arange(n)
        prio = (n - pos).astype(np.float64)
    else:
        prio = np.asarray(priority, dtype=np.float64).copy()
    return DagSchedule(assign, prio, start, finish, float(finish.max()) if n else 0.0)


def heft_schedule(dag: DAGLike, speed, bandwidth, *, gpu_types=None, insertion: bool = True) -> DagSchedule:
    """HEFT (Topcuoglu et al. 2002): decreasing upward rank, earliest-finish-time GPU (see module docstring)."""
    rt, inv, w, c = _mean_costs(dag, speed, bandwidth, gpu_types)
    return _list_schedule(dag, rt, inv, _rank_u(dag, w, c), insertion)


def heft(
    dag: DAGLike, speed, bandwidth, *, gpu_types=None, insertion: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """HEFT plan ``(assignment, priority)``."""
    return heft_schedule(dag, speed, bandwidth, gpu_types=gpu_types, insertion=insertion).plan


def cpop_schedule(dag: DAGLike, speed, bandwidth, *, gpu_types=None, insertion: bool = True) -> DagSchedule:
    """CPOP (Topcuoglu et al. 2002): priority ``rank_u + rank_d``; critical-path tasks on one GPU."""
    rt, inv, w, c = _mean_costs(dag, speed, bandwidth, gpu_types)
    ru, rd = _rank_u(dag, w, c), _rank_d(dag, w, c)
    prio = ru + rd
    n = len(prio)
    fixed = np.full(n, -1, dtype=np.int64)
    if n:
        edges, parents, children = _structure(dag)
        cp_len = prio.max()
        tol = 1e-9 * max(1.0, abs(cp_len))
        roots = [i for i in range(n) if not parents[i]]
        k = max(roots, key=lambda r: (prio[r], -r))
        on_cp = [k]
        while children[k]:
            nxt = [int(edges[e, 1]) for e in children[k] if abs(prio[edges[e, 1]] - cp_len) <= tol]
            if not nxt:
                break
            k = min(nxt)
            on_cp.append(k)
        cp_cost = rt[on_cp].sum(axis=0)  # inf where some CP task may not run
        if np.isfinite(cp_cost).any():
            q = int(np.argmin(cp_cost))
            fixed[on_cp] = q
        else:  # no GPU can run the whole critical path: pin each CP task to its own fastest allowed GPU
            fixed[on_cp] = np.argmin(rt[on_cp], axis=1)
    return _list_schedule(dag, rt, inv, prio, insertion, fixed)


def cpop(
    dag: DAGLike, speed, bandwidth, *, gpu_types=None, insertion: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """CPOP plan ``(assignment, priority)``."""
    return cpop_schedule(dag, speed, bandwidth, gpu_types=gpu_types, insertion=insertion).plan


def _allowed(dag: DAGLike, num_gpus: int, gpu_types) -> np.ndarray:
    return np.isfinite(runtime_matrix(dag, np.ones(num_gpus), gpu_types))  # (N, G) bool


def random_plans(
    dag: DAGLike, num_gpus: int, num_plans: int, *, seed: int | np.random.Generator = 0, gpu_types=None
) -> tuple[np.ndarray, np.ndarray]:
    """``num_plans`` uniform random plans: ``(assignments (P, N) int64, priorities (P, N) float64)``; each task goes
    to a uniformly drawn GPU among those its affinity allows, priorities are U[0, 1)."""
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    ok = _allowed(dag, num_gpus, gpu_types)
    n = ok.shape[0]
    if ok.all():
        a = rng.integers(0, num_gpus, size=(num_plans, n))
    else:
        counts = ok.sum(axis=1)
        k = np.floor(rng.random((num_plans, n)) * counts).astype(np.int64)  # k-th allowed GPU
        cols = np.argsort(~ok, axis=1, kind="stable")  # allowed GPUs first, in index order
        a = cols[np.arange(n)[None, :], k]
    return a.astype(np.int64), rng.random((num_plans, n))


def random_plan(
    dag: DAGLike, num_gpus: int, *, seed: int | np.random.Generator = 0, gpu_types=None
) -> tuple[np.ndarray, np.ndarray]:
    """One random plan ``(assignment (N,), priority (N,))``."""
    a, p = random_plans(dag, num_gpus, 1, seed=seed, gpu_types=gpu_types)
    return a[0], p[0]
