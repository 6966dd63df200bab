"""Whale Optimization Algorithm (Mirjalili & Lewis, Advances in Engineering Software 95, 2016) over random-key DAG
scheduling plans (:class:`agents.methods.worl_rtgs.metaheuristics.PlanSpace`), as used by WORL-RTGS (Du, Wu et al., BDCC 2025).

Each iteration ``t`` of ``T`` sets ``a = 2 - 2 t / (T - 1)`` (2 → 0) and moves every whale ``X`` with its own
scalars ``r1, r2 ~ U[0, 1)``, ``A = 2 a r1 - a``, ``C = 2 r2``, ``p ~ U[0, 1)``, ``l ~ U[-1, 1)``:

- ``p < 0.5`` and ``|A| < 1`` — *encircling the best*: ``X' = X* - A |C X* - X|``;
- ``p < 0.5`` and ``|A| >= 1`` — *search for prey* around a random whale ``X_r``: ``X' = X_r - A |C X_r - X|``;
- ``p >= 0.5`` — *spiral update*: ``X' = |X* - X| e^{b l} cos(2 π l) + X*``;

then clips to the key box ``[0, 1)``, scores the population in one batch and keeps the best whale found so far as
``X*``. :func:`woa_update` is that move as a pure function (the tests check it against a hand computation).

A **population hook** ``hook(state: WOAState) -> None`` runs after each iteration's scoring and may replace or add
whales by calling :meth:`WOAState.replace` / :meth:`WOAState.add` (WORL-RTGS injects DDQN plans this way and steers
far whales towards the best).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from gpusched_lab.agents.methods.worl_rtgs.metaheuristics import (
    KEY_HIGH,
    PlanSpace,
    SearchResult,
    _result,
    initial_population,
)


def woa_update(
    x: np.ndarray,
    best: np.ndarray,
    a: float,
    r1: np.ndarray,
    r2: np.ndarray,
    p: np.ndarray,
    l: np.ndarray,  # noqa: E741 - the paper's symbol
    partner: np.ndarray,
    b: float = 1.0,
) -> np.ndarray:
    """One WOA move of population ``x`` (P, D) given the best whale ``best`` (D,), ``a`` and per-whale scalars
    ``r1, r2, p, l`` (P,) and ``partner`` (P,) (the random whale's index, used by the search phase). Unclipped."""
    A = (2.0 * a * r1 - a)[:, None]
    C = (2.0 * r2)[:, None]
    encircle = best[None, :] - A * np.abs(C * best[None, :] - x)
    xr = x[partner]
    search = xr - A * np.abs(C * xr - x)
    spiral = np.abs(best[None, :] - x) * (np.exp(b * l) * np.cos(2.0 * np.pi * l))[:, None] + best[None, :]
    shrink = (p < 0.5)[:, None]
    near = (np.abs(A[:, 0]) < 1.0)[:, None]
    return np.where(shrink, np.where(near, encircle, search), spiral)


@dataclass
class WOAState:
    """The population between iterations, as a hook sees it (``x`` (P, D) keys, ``f`` (P,) makespans)."""

    space: PlanSpace
    iteration: int
    iterations: int
    x: np.ndarray
    f: np.ndarray
    best_x: np.ndarray
    best_f: float
    rng: np.random.Generator

    def replace(self, rows: np.ndarray, x_new: np.ndarray, f_new: np.ndarray | None = None) -> None:
        """Overwrite whales ``rows`` with ``x_new`` (scored here unless ``f_new`` is given)."""
        x_new = np.clip(np.atleast_2d(x_new), 0.0, KEY_HIGH)
        f_new = self.space.evaluate(x_new) if f_new is None else np.asarray(f_new, dtype=np.float64)
        self.x[rows], self.f[rows] = x_new, f_new
        self._track()

    def add(self, x_new: np.ndarray, f_new: np.ndarray | None = None) -> None:
        """Append whales (the population grows; WOA keeps whatever size the hook leaves)."""
        x_new = np.clip(np.atleast_2d(x_new), 0.0, KEY_HIGH)
        f_new = self.space.evaluate(x_new) if f_new is None else np.asarray(f_new, dtype=np.float64)
        self.x = np.concatenate([self.x, x_new])
        self.f = np.concatenate([self.f, f_new])
        self._track()

    def _track(self) -> None:
        i = int(np.argmin(self.f))
        if self.f[i] < self.best_f:
            self.best_x, self.best_f = self.x[i].copy(), float(self.f[i])


PopulationHook = Callable[[WOAState], None]


def whale_optimization(
    space: PlanSpace,
    *,
    population: int = 50,
    iterations: int = 100,
    seed: int = 0,
    spiral_b: float = 1.0,
    seeds: list[tuple] | None = None,
    hook: PopulationHook | None = None,
) -> SearchResult:
    """WOA over ``space`` with ``population`` whales for ``iterations`` iterations (the first scores the initial
    population: random keys, the first rows replaced by the ``seeds`` plans). ``hook`` runs after every scoring."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    x = initial_population(space, population, rng, seeds)
    f = space.evaluate(x)
    b = int(np.argmin(f))
    state = WOAState(space, 0, iterations, x, f, x[b].copy(), float(f[b]), rng)
    if hook is not None:
        hook(state)
    curve = [state.best_f]
    for it in range(1, iterations):
        a = 2.0 - 2.0 * it / max(iterations - 1, 1)
        pop = len(state.x)
        r1, r2, p = rng.random(pop), rng.random(pop), rng.random(pop)
        l = rng.uniform(-1.0, 1.0, pop)  # noqa: E741
        partner = rng.integers(0, pop, pop)
        moved = woa_update(state.x, state.best_x, a, r1, r2, p, l, partner, spiral_b)
        state.x = np.clip(moved, 0.0, KEY_HIGH)
        state.f = space.evaluate(state.x)
        state.iteration = it
        state._track()
        if hook is not None:
            hook(state)
        curve.append(state.best_f)
    return _result(space, state.best_x, state.best_f, curve, t0)
