"""Critical-path local search over DAG scheduling plans: the refinement step WORL-RTGS may spend part of its budget
on (and, alone from HEFT's / CPOP's plans, the ``ls`` baseline of ``gpusched dag-bench``).

A plan ``(assignment, priority)`` is first put in *order form*: priority ``N - k`` for the task dispatched ``k``-th,
which decodes to the same dispatch order and so the same schedule. Its neighbours, all scored in one batch by the
plan evaluator, are

- **moves**: one task to another GPU it may run on, with the order kept and (when that differs) with the task
  dispatched as early as the order allows (just after its last-dispatched parent);
- **swaps** (critical-path tasks only): one task and another on a different GPU exchange GPUs (load balance
  that no single move improves), up to ``swaps`` random partners per task;
- **shifts**: one task ``d`` places earlier or later in the dispatch order (priority set just above / below the
  task now at the target place; the evaluator keeps the order precedence-feasible), for ``d`` in ``shifts``,

for the tasks (swaps: with any task) on the schedule's critical path (:func:`critical_path`: the chain of binding GPU-free or
input-arrival times that ends at the last finish). Best improvement: the best neighbour replaces the plan when it
is shorter, or as short and finishing its tasks earlier in sum (so the search moves along plateaus of equal
makespan, :meth:`~gpusched_envs.sim.dag_eval.PlanEvaluator.evaluate_with_total`). When none is, the neighbours of every task are tried before the plan counts as a local optimum, and
then (iterated local search) a random kick -- ``kick`` tasks moved to random allowed GPUs -- restarts the descent
from the best plan found. The search stops when ``budget`` plan evaluations are spent (the last batch is cut to
fit) and returns the best plan it scored, so it is never worse than its start.

Why it is here: the list-scheduling decoder can express CP-SAT's optimum (CP-SAT's own plan is its start order and
GPUs, scored by the same evaluator), so where WORL-RTGS stayed 5-30% above CP-SAT on small random DAGs the gap is
the search's, and the critical path is where a makespan can shrink.
"""

from __future__ import annotations

import time

import numpy as np
from gpusched_lab.agents.methods.worl_rtgs.metaheuristics import PlanSpace, SearchResult


def order_form(space: PlanSpace, assignment, priority) -> np.ndarray:
    """(N,) priorities ``N - k`` for the task the plan dispatches ``k``-th (the same dispatch order)."""
    order = space.evaluator.dispatch_order(assignment, priority)[0]
    n = space.num_tasks
    prio = np.empty(n)
    prio[order] = n - np.arange(n, dtype=np.float64)
    return prio


def critical_path(space: PlanSpace, assignment, priority) -> np.ndarray:
    """Tasks of the plan's critical path, last first: from the task that finishes last, repeatedly the predecessor
    whose time bound the start -- the task before it on its GPU (its finish) or a parent (its finish plus the
    transfer) -- until a task starts at time 0."""
    ev = space.evaluator
    a = np.asarray(assignment, dtype=np.int64)
    sched = ev.schedule(a, priority)
    start, finish, order = sched.start, sched.finish, sched.order
    prev_on_gpu = np.full(space.num_tasks, -1, dtype=np.int64)
    last = {}
    for t in order:
        prev_on_gpu[t] = last.get(int(a[t]), -1)
        last[int(a[t])] = int(t)
    cur = int(np.argmax(finish))
    path = [cur]
    seen = {cur}
    while start[cur] > 0:
        cands, times = [], []
        if prev_on_gpu[cur] >= 0:
            cands.append(int(prev_on_gpu[cur]))
            times.append(finish[prev_on_gpu[cur]])
        into = np.flatnonzero(ev.edge_dst == cur)
        for e in into:
            p = int(ev.edge_src[e])
            cands.append(p)
            times.append(finish[p] + ev.edge_bytes[e] * ev.inv_bw[a[p], a[cur]])
        if not cands:
            break
        cur = cands[int(np.argmax(times))]  # ties: the GPU predecessor (listed first)
        if cur in seen:  # cannot happen with positive runtimes; guards zero-length tasks
            break
        seen.add(cur)
        path.append(cur)
    return np.asarray(path, dtype=np.int64)


def neighbours(
    space: PlanSpace,
    assignment: np.ndarray,
    prio: np.ndarray,
    tasks,
    shifts=(1, 2, 3),
    swaps: int = 0,
    rng: np.random.Generator | None = None,
    limit: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(assignments (K, N), priorities (K, N))``: the GPU moves, order shifts and GPU swaps of ``tasks`` (see the
    module docstring) of the plan ``assignment`` with order-form priorities ``prio``. ``swaps``: at most this many
    swap partners per task (drawn with ``rng`` when there are more; all of them without ``rng``). ``limit``: stop
    after this many (the first ones in the order above; large DAGs have far more neighbours than a budget)."""
    n = space.num_tasks
    tasks = np.asarray(tasks, dtype=np.int64)
    pos = n - prio  # dispatch position of each task (order form)
    task_at = np.empty(n, dtype=np.int64)
    task_at[pos.astype(np.int64)] = np.arange(n)
    a_rows, p_rows = [], []
    allowed = np.isfinite(space.runtime)
    ev = space.evaluator
    for t in tasks:
        if limit is not None and len(a_rows) >= limit:
            break
        parents = ev.edge_src[ev.edge_dst == t]
        k = int(pos[t])
        # as early as the order allows: just after its last-dispatched parent (or first of all), when that is
        # earlier than where it is
        lo = int(pos[parents].max()) + 1 if len(parents) else 0
        early = prio[task_at[lo]] + 0.5 if lo < k else None
        for q in np.flatnonzero(allowed[t]):
            if q != assignment[t]:
                a = assignment.copy()
                a[t] = q
                a_rows.append(a)
                p_rows.append(prio)
                if early is not None:  # the move with the task dispatched as early as it may be
                    p = prio.copy()
                    p[t] = early
                    a_rows.append(a)
                    p_rows.append(p)
        if swaps:  # exchange GPUs with tasks elsewhere that may run on this one (and this on theirs)
            other = np.flatnonzero(assignment != assignment[t])
            other = other[allowed[other, assignment[t]] & allowed[t, assignment[other]]]
            if rng is not None and len(other) > swaps:
                other = np.sort(rng.choice(other, size=swaps, replace=False))
            for u in other:
                a = assignment.copy()
                a[t], a[u] = assignment[u], assignment[t]
                a_rows.append(a)
                p_rows.append(prio)
        for d in shifts:
            for target, above in ((k - d, 0.5), (k + d, -0.5)):
                if 0 <= target < n:
                    p = prio.copy()
                    p[t] = prio[task_at[target]] + above
                    a_rows.append(assignment)
                    p_rows.append(p)
    if limit is not None:
        a_rows, p_rows = a_rows[:limit], p_rows[:limit]
    if not a_rows:
        return np.zeros((0, n), dtype=np.int64), np.zeros((0, n))
    return np.asarray(a_rows, dtype=np.int64), np.asarray(p_rows)


def local_search(
    space: PlanSpace,
    starts: list[tuple[np.ndarray, np.ndarray]],
    *,
    budget: int,
    seed: int = 0,
    shifts=(1, 2, 3),
    swaps: int = 8,
    kick: int = 3,
) -> SearchResult:
    """Iterated critical-path local search from the best of the plans ``starts``, within ``budget`` plan
    evaluations (the start plans' scoring included). See the module docstring."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    n = space.num_tasks
    ev = space.evaluator
    used = 0

    def score(a, p):
        nonlocal used
        used += len(a)
        space.evaluations += len(a)
        return ev.evaluate_with_total(a, p)

    a0 = np.asarray([s[0] for s in starts], dtype=np.int64)
    p0 = np.asarray([s[1] for s in starts], dtype=np.float64)
    f0, tot0 = score(a0, p0)
    i = int(np.lexsort((tot0, f0))[0])
    cur_a, cur_p, cur = a0[i].copy(), order_form(space, a0[i], p0[i]), (float(f0[i]), float(tot0[i]))
    best = (cur_a.copy(), cur_p.copy(), cur)
    curve = [cur[0]]
    allowed = [np.flatnonzero(row) for row in np.isfinite(space.runtime)]
    while used < budget and n:
        improved = False
        for tasks, k in ((critical_path(space, cur_a, cur_p), swaps), (np.arange(n), 0)):
            room = budget - used
            if room <= 0:
                break
            na, np_ = neighbours(space, cur_a, cur_p, tasks, shifts, k, rng, limit=room)
            if not len(na):
                break
            f, tot = score(na, np_)
            j = int(np.lexsort((tot, f))[0])  # shortest makespan; ties: the earliest finishes overall
            if (f[j], tot[j]) < cur:
                cur_a, cur_p, cur = (
                    na[j].copy(),
                    order_form(space, na[j], np_[j]),
                    (float(f[j]), float(tot[j])),
                )
                improved = True
                break
        if cur < best[2]:
            best = (cur_a.copy(), cur_p.copy(), cur)
        curve.append(best[2][0])
        if not improved and used < budget:  # local optimum: kick the best plan and descend again
            cur_a, cur_p = best[0].copy(), best[1].copy()
            for t in rng.choice(n, size=min(kick, n), replace=False):
                cur_a[t] = rng.choice(allowed[t])
            f, tot = score(cur_a[None], cur_p[None])
            cur = (float(f[0]), float(tot[0]))
            cur_p = order_form(space, cur_a, cur_p)
    a, p, (f, _) = best
    return SearchResult(a, p, float(f), curve, space.evaluations, time.perf_counter() - t0, {"used": used})
