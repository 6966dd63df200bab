"""WORL-RTGS (Du, Wu et al., BDCC 2025): the Whale Optimization Algorithm (:mod:`agents.methods.worl_rtgs.woa`) whose population hook

1. **injects DDQN plans**: the plans of the DDQN plan generator (:class:`agents.methods.worl_rtgs.planner.PolicyPlanner`) seed
   the initial population, and every iteration the worst ``injection_rate × population`` whales are replaced by a
   DDQN plan (cycling through the pool, keys jittered by ``jitter`` so re-injections explore around it);
2. applies the **running-time-gap strategy**: each whale whose finish-time gap to the best, ``FTG_i``, exceeds
   ``gap_threshold`` is moved towards the best whale. The SPD–FTG relation is fitted on the current population
   (least-squares slope ``s`` of FTG on SPD to the best, through the origin); closing the gap needs an SPD
   reduction of about ``FTG_i / s``, so the whale moves the share ``λ_i = min(1, FTG_i / (s · SPD_i))`` of the
   way to the best in key space (times ``U[0.5, 1]``, so not all land on the same point), and the move is kept
   only if it shortens the whale's makespan.

The initial population holds the DDQN plans and, by default in ``gpusched dag-bench``, the list-scheduling
plans of HEFT and CPOP (``list_plans``, :func:`agents.methods.worl_rtgs.metaheuristics.list_scheduling_plans`): since the best
whale is kept, WORL-RTGS is then never worse than HEFT or CPOP, and the question is how much better it gets.

Everything is seeded; ``population``, ``iterations``, ``injection_rate``, ``gap_threshold`` are configurable.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from gpusched_lab.agents.methods.worl_rtgs.metaheuristics import KEY_HIGH, PlanSpace, SearchResult
from gpusched_lab.agents.methods.worl_rtgs.plan_metrics import spd_matrix_to
from gpusched_lab.agents.methods.worl_rtgs.woa import WOAState, whale_optimization


@dataclass
class WORLHook:
    """The WORL-RTGS population hook (see the module docstring)."""

    pool: np.ndarray  # (K, 2N) key vectors of DDQN plans
    injection_rate: float = 0.1
    gap_threshold: float = 0.05
    jitter: float = 0.02
    stats: dict = field(default_factory=lambda: {"injected": 0, "steered": 0, "steer_kept": 0, "slope": []})
    _next: int = 0

    def __call__(self, state: WOAState) -> None:
        if state.iteration > 0 and len(self.pool) and self.injection_rate > 0:
            self._inject(state)
        if self.gap_threshold is not None:
            self._steer(state)

    def _inject(self, state: WOAState) -> None:
        k = max(1, int(round(self.injection_rate * len(state.x))))
        worst = np.argsort(state.f, kind="stable")[::-1][:k]
        idx = (self._next + np.arange(k)) % len(self.pool)
        self._next = int((self._next + k) % len(self.pool))
        x = self.pool[idx] + state.rng.normal(0.0, self.jitter, (k, self.pool.shape[1]))
        state.replace(worst, np.clip(x, 0.0, KEY_HIGH))
        self.stats["injected"] += k

    def _steer(self, state: WOAState) -> None:
        space = state.space
        ftg = (state.f - state.best_f) / state.best_f
        far = np.flatnonzero(ftg > self.gap_threshold)
        if not len(far):
            return
        n = space.num_tasks
        a, p = space.decode(state.x)
        ab, pb = space.decode(state.best_x)
        orders = space.evaluator.dispatch_order(a, p)
        ref_order = space.evaluator.dispatch_order(ab, pb)[0]
        spd = spd_matrix_to(a, orders, ab[0], ref_order, max_pairs=max(2000, 4 * n))
        ok = np.isfinite(ftg) & (spd > 0)
        slope = float((spd[ok] * ftg[ok]).sum() / max((spd[ok] ** 2).sum(), 1e-12)) if ok.any() else 0.0
        self.stats["slope"].append(slope)
        far = far[spd[far] > 0]
        if slope <= 0 or not len(far):
            return
        lam = np.minimum(1.0, ftg[far] / (slope * spd[far])) * state.rng.uniform(0.5, 1.0, len(far))
        moved = state.x[far] + lam[:, None] * (state.best_x[None, :] - state.x[far])
        f_new = space.evaluate(moved)
        better = f_new < state.f[far]
        self.stats["steered"] += len(far)
        self.stats["steer_kept"] += int(better.sum())
        if better.any():
            state.replace(far[better], moved[better], f_new[better])


def worl_rtgs(
    space: PlanSpace,
    planner_plans: list[tuple[np.ndarray, np.ndarray]],
    *,
    population: int = 50,
    iterations: int = 100,
    injection_rate: float = 0.1,
    gap_threshold: float | None = 0.05,
    jitter: float = 0.02,
    seed: int = 0,
    list_plans: list[tuple[np.ndarray, np.ndarray]] | None = None,
    refine: float = 0.0,
) -> SearchResult:
    """WORL-RTGS on ``space``, with ``planner_plans`` (DDQN plans ``(assignment, priority)``) as the injection pool
    and the initial population's first whales; ``list_plans`` (e.g. HEFT's and CPOP's) are seeded before them
    (initial population only, not injected). ``gap_threshold=None`` turns the running-time-gap strategy off,
    ``injection_rate=0`` the per-iteration injection (the ablations).

    ``refine`` (0 to 1): the share of the ``population × iterations`` evaluation budget spent on the refinement
    step, a critical-path local search of the best whale (:func:`agents.methods.worl_rtgs.local_search.local_search`): WOA
    runs ``round((1 - refine) × iterations)`` iterations and the search gets whatever of the budget is left
    (the hook's evaluations count too), so the total stays the budget other searchers get."""
    if not 0.0 <= refine <= 1.0:
        raise ValueError(f"refine must lie in [0, 1], got {refine}")
    pool = (
        np.concatenate([space.encode(a, p) for a, p in planner_plans])
        if planner_plans
        else np.zeros((0, space.dim))
    )
    hook = WORLHook(pool, injection_rate, gap_threshold, jitter)
    seeds = [*(list_plans or []), *planner_plans]
    woa_iterations = max(1, round((1.0 - refine) * iterations)) if refine < 1.0 else 1
    start = space.evaluations
    res = whale_optimization(
        space, population=population, iterations=woa_iterations, seed=seed, seeds=seeds, hook=hook
    )
    res.stats = hook.stats
    left = population * iterations - (space.evaluations - start)
    if refine > 0 and left > 0:
        from gpusched_lab.agents.methods.worl_rtgs.local_search import local_search

        ls = local_search(space, [res.plan], budget=left, seed=seed)
        res.stats["refined_from"] = res.makespan
        if ls.makespan < res.makespan:
            res.assignment, res.priority, res.makespan = ls.assignment, ls.priority, ls.makespan
        res.curve = [*res.curve, *ls.curve[1:]]
        res.evaluations = space.evaluations
        res.seconds += ls.seconds
    return res
