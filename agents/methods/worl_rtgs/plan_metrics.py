"""Scheduling Plan Distance (SPD) and Finish Time Gap (FTG), the two quantities whose relation WORL-RTGS's
running-time-gap strategy rests on (Du, Wu et al., BDCC 2025): plans that are close (small SPD) finish close in
time (small FTG), so a plan far from the best in finish time is moved towards the best plan.

Our definitions (the paper's exact formulas are not public in machine-readable form; these follow its wording):

- ``SPD(x, y) = (H + K) / 2`` in ``[0, 1]``, with ``H`` the share of tasks the two plans put on different GPUs and
  ``K`` the normalised Kendall-tau distance between their dispatch orders (the share of task pairs the two plans
  dispatch in opposite order). 0: the same schedule; 1: every task elsewhere and the order reversed.
- ``FTG(x, y) = |makespan(x) - makespan(y)| / min(makespan(x), makespan(y))``: the finish-time gap relative to
  the better plan.

:func:`spd_matrix_to` computes SPD from many plans to one reference in one vectorised pass (the strategy needs it
every iteration); ``scripts/studies/spd_ftg_study.py`` reproduces the empirical SPD–FTG correlation study.
"""

from __future__ import annotations

import numpy as np


def _positions(order: np.ndarray) -> np.ndarray:
    """(P, N) position of each task in its plan's dispatch order."""
    order = np.atleast_2d(order)
    pos = np.empty_like(order)
    np.put_along_axis(pos, order, np.arange(order.shape[1])[None, :], axis=1)
    return pos


def kendall_distance_to(orders: np.ndarray, reference: np.ndarray, max_pairs: int = 20_000, seed: int = 0):
    """(P,) share of task pairs dispatched in opposite order by each of ``orders`` (P, N) and ``reference`` (N,).
    Exact when N(N-1)/2 <= ``max_pairs``; otherwise estimated on ``max_pairs`` random pairs (same pairs for all)."""
    pos = _positions(orders)
    ref = _positions(reference)[0]
    n = pos.shape[1]
    if n < 2:
        return np.zeros(len(pos))
    if n * (n - 1) // 2 <= max_pairs:
        i, j = np.triu_indices(n, 1)
    else:
        rng = np.random.default_rng(seed)
        i = rng.integers(0, n, max_pairs)
        j = (i + rng.integers(1, n, max_pairs)) % n
    return (np.sign(pos[:, i] - pos[:, j]) != np.sign(ref[i] - ref[j])[None, :]).mean(axis=1)


def spd_matrix_to(assignments, orders, ref_assignment, ref_order, **kw) -> np.ndarray:
    """(P,) Scheduling Plan Distance of P plans (``assignments`` (P, N), dispatch ``orders`` (P, N)) to one plan."""
    a = np.atleast_2d(assignments)
    h = (a != np.asarray(ref_assignment)[None, :]).mean(axis=1)
    k = kendall_distance_to(orders, ref_order, **kw)
    return 0.5 * (h + k)


def scheduling_plan_distance(evaluator, plan_x, plan_y) -> float:
    """SPD of two plans ``(assignment, priority)`` of the DAG an evaluator (:class:`PlanEvaluator`) scores."""
    ox = evaluator.dispatch_order(*plan_x)[0]
    oy = evaluator.dispatch_order(*plan_y)[0]
    return float(spd_matrix_to(plan_x[0], ox, plan_y[0], oy)[0])


def finish_time_gap(makespan_x, makespan_y):
    """FTG: ``|x - y| / min(x, y)`` (elementwise for arrays)."""
    x, y = np.asarray(makespan_x, dtype=np.float64), np.asarray(makespan_y, dtype=np.float64)
    return np.abs(x - y) / np.minimum(x, y)
