"""Statistics of the leaderboard: means with percentile-bootstrap 95% intervals over seeds, and the aggregate of
rliable (Agarwal et al., NeurIPS 2021) — interquartile mean (IQM) of scenario-normalised scores with
stratified-bootstrap intervals, and performance profiles.

IQM and its stratified-bootstrap interval come from ``rliable`` (imported lazily: it pulls in ``arch`` and
``statsmodels``). rliable needs the same number of runs in every scenario; a grid with unequal seed counts per
scenario falls back to the same stratified resampling written out below. Every bootstrap uses a fixed seed, so the
same results give the same tables.

Normalised score (higher is better, 1 = the bound): lower-bound average JCT ÷ average JCT, per scenario and seed
(the bound is the mean ideal runtime of the same workload, :mod:`gpusched_envs.sim.metrics`).
"""

from __future__ import annotations

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 2000
BOOTSTRAP_SEED = 0


def bootstrap_ci(
    values, confidence: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> tuple[float, float, float]:
    """Mean and percentile-bootstrap confidence interval of the mean.

    ``None`` and non-finite values are dropped; no values give ``(nan, nan, nan)``; one value, or all values equal,
    give a zero-width interval at the mean.
    """
    items = values.ravel().tolist() if isinstance(values, np.ndarray) else list(values)
    x = np.asarray([v for v in items if v is not None], dtype=np.float64)
    x = x[np.isfinite(x)]
    if not len(x):
        return (float("nan"),) * 3
    m = float(x.mean())
    if len(x) == 1 or np.all(x == x[0]):
        return m, m, m
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(resamples, len(x)))].mean(axis=1)
    a = (1.0 - confidence) / 2.0
    return m, float(np.quantile(means, a)), float(np.quantile(means, 1.0 - a))


def mean_ci(values, confidence: float = CONFIDENCE, resamples: int = RESAMPLES) -> tuple[float, float, float]:
    """Mean and percentile-bootstrap interval of the mean (:func:`bootstrap_ci` with the leaderboard's
    resample count and seed: None/NaN dropped; one value, or all equal, give a zero-width interval)."""

    return bootstrap_ci(values, confidence=confidence, resamples=resamples, seed=BOOTSTRAP_SEED)


def interval(values, confidence: float = CONFIDENCE, resamples: int = RESAMPLES) -> dict:
    """:func:`mean_ci` as the ``{"mean", "low", "high"}`` mapping the result files store."""
    m, lo, hi = mean_ci(values, confidence=confidence, resamples=resamples)
    return {"mean": m, "low": lo, "high": hi}


def iqm(scores: np.ndarray) -> float:
    """Interquartile mean of all scores (rliable's ``aggregate_iqm``: 25% trimmed mean of the flattened array)."""
    from rliable import metrics

    return float(metrics.aggregate_iqm(np.asarray(scores, dtype=np.float64).reshape(1, -1)))


def stratified_bootstrap_ci(
    per_scenario: list[np.ndarray],
    statistic=iqm,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
) -> tuple[float, float, float]:
    """Point estimate and stratified-bootstrap interval of ``statistic`` over scores grouped by scenario: each
    resample draws runs (seeds) with replacement within every scenario separately (rliable's
    ``get_interval_estimates`` on the runs × scenarios matrix)."""
    groups = [np.asarray(g, dtype=np.float64) for g in per_scenario if len(g)]
    if not groups:
        return (float("nan"),) * 3
    point = statistic(np.concatenate(groups))
    if len({len(g) for g in groups}) == 1:
        from rliable import library as rly

        matrix = np.stack(groups, axis=1)  # (runs, scenarios)
        # rliable's StratifiedBootstrap draws its indices from numpy's global generator (np.random.choice), not from
        # random_state: seed that generator for the call and put its state back afterwards.
        state = np.random.get_state()  # noqa: NPY002
        np.random.seed(BOOTSTRAP_SEED)  # noqa: NPY002
        try:
            _, intervals = rly.get_interval_estimates(
                {"agent": matrix},
                lambda x: np.array([statistic(x)]),
                reps=resamples,
                confidence_interval_size=confidence,
                random_state=np.random.RandomState(BOOTSTRAP_SEED),
            )
        finally:
            np.random.set_state(state)  # noqa: NPY002
        low, high = intervals["agent"][:, 0]
        return point, float(low), float(high)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    draws = np.empty(resamples)
    idx = [rng.integers(0, len(g), size=(resamples, len(g))) for g in groups]
    for r in range(resamples):
        draws[r] = statistic(np.concatenate([g[i[r]] for g, i in zip(groups, idx, strict=True)]))
    a = (1.0 - confidence) / 2.0
    return point, float(np.quantile(draws, a)), float(np.quantile(draws, 1.0 - a))


def paired_relative_change(
    x: np.ndarray, base: np.ndarray, resamples: int = 10_000, seed: int = 0
) -> tuple[float, float, float]:
    """Relative change of mean(x) against mean(base) over paired seeds (``x[i]`` and ``base[i]`` from the same
    seed), with a percentile-bootstrap 95% interval (the seeds resampled together); NaNs when there is nothing to
    compare or the base mean is 0."""
    x, base = np.asarray(x, dtype=np.float64), np.asarray(base, dtype=np.float64)
    if not len(x) or base.mean() == 0:
        return (float("nan"),) * 3
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(x), size=(resamples, len(x)))
    ratios = x[idx].mean(1) / np.maximum(base[idx].mean(1), 1e-300) - 1.0
    lo, hi = np.quantile(ratios, [0.025, 0.975])
    return float(x.mean() / base.mean() - 1.0), float(lo), float(hi)


def performance_profile(scores: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """Fraction of (scenario, seed) scores above each threshold τ (rliable's run-score distribution)."""
    s = np.asarray(scores, dtype=np.float64).ravel()
    if not len(s):
        return np.full(len(taus), np.nan)
    return (s[None, :] > np.asarray(taus)[:, None]).mean(axis=1)


def normalised_score(metrics: dict) -> float:
    """Lower-bound average JCT ÷ average JCT (1 = the bound; higher is better); NaN if either is missing."""
    bound, jct = metrics.get("lower_bound_avg_jct"), metrics.get("avg_jct")
    if bound is None or jct is None or not np.isfinite(bound) or not np.isfinite(jct) or jct <= 0:
        return float("nan")
    return float(bound / jct)
