"""Statistics of the leaderboard: means with percentile-bootstrap 95% intervals over seeds, and the aggregate of
rliable (Agarwal et al., NeurIPS 2021) — interquartile mean (IQM) of scenario-normalised scores with
stratified-bootstrap intervals, and performance profiles.

IQM and its stratified-bootstrap interval are rliable's numbers, computed without rliable: the IQM is its
``aggregate_iqm`` (scipy's 25% ``trim_mean``: a partition, then the mean of the middle), and the interval draws the
very resamples of its ``get_interval_estimates`` (numpy's legacy generator seeded with :data:`BOOTSTRAP_SEED`, one
``(runs, scenarios)`` index draw per resample, in order) but evaluates the IQM or the mean of all of them in one
vectorised pass instead of one call per resample (the tests compare both with rliable itself). That path needs the
same number of runs in every scenario; a grid with unequal seed counts per scenario falls back to the stratified
resampling written out below. Every bootstrap uses a fixed seed, so the same results give the same tables.

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
    """Interquartile mean of all scores (rliable's ``aggregate_iqm``: the 25% trimmed mean of the flattened array,
    as scipy's ``trim_mean`` computes it); NaN when there are no scores or one is NaN."""
    return float(iqm_rows(np.asarray(scores, dtype=np.float64).reshape(1, -1))[0])


def mean_score(scores: np.ndarray) -> float:
    """Mean of all scores (the flattened array)."""
    return float(np.mean(np.asarray(scores, dtype=np.float64)))


def iqm_rows(x: np.ndarray) -> np.ndarray:
    """:func:`iqm` of every row of ``x`` ``(R, n)`` at once, each the same float as that row alone gives: the row
    partitioned at the cuts of scipy's ``trim_mean`` (a quarter of ``n``, rounded down, off each end), the mean of
    its middle slice."""
    x = np.asarray(x, dtype=np.float64)
    rows, n = x.shape
    if n == 0:
        return np.full(rows, np.nan)
    cut = int(0.25 * n)
    middle = np.mean(np.partition(x, (cut, n - cut - 1), axis=1)[:, cut : n - cut], axis=1)
    return np.where(np.isnan(x).any(axis=1), np.nan, middle)


def mean_rows(x: np.ndarray) -> np.ndarray:
    """:func:`mean_score` of every row of ``x`` ``(R, n)`` at once."""
    return np.mean(np.asarray(x, dtype=np.float64), axis=1)


ROW_STATISTICS = {iqm: iqm_rows, mean_score: mean_rows}
"""The statistics :func:`stratified_bootstrap_ci` evaluates on all resamples at once (any other is called once per
resample)."""


def stratified_resample_indices(runs: int, scenarios: int, resamples: int = RESAMPLES) -> np.ndarray:
    """The run indices of rliable's ``StratifiedBootstrap`` resamples, ``(resamples, runs, scenarios)``: resample
    ``r`` takes run ``idx[r, i, j]`` of scenario ``j`` as its run ``i``. rliable draws them with
    ``np.random.choice(runs, (runs, scenarios))`` once per resample from numpy's global generator, which
    :func:`stratified_bootstrap_ci` seeds with :data:`BOOTSTRAP_SEED`; one draw of all of them from a generator
    seeded the same gives the same numbers in the same order (tested)."""
    state = np.random.RandomState(BOOTSTRAP_SEED)  # noqa: NPY002 - the legacy generator rliable draws from
    return state.choice(runs, size=(resamples, runs, scenarios), replace=True)


def stratified_bootstrap_ci(
    per_scenario: list[np.ndarray],
    statistic=iqm,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
) -> tuple[float, float, float]:
    """Point estimate and stratified-bootstrap interval of ``statistic`` over scores grouped by scenario: each
    resample draws runs (seeds) with replacement within every scenario separately (rliable's
    ``get_interval_estimates`` on the runs × scenarios matrix, percentile method: the same resamples and the same
    numbers). :func:`iqm` and :func:`mean_score` are evaluated on all resamples at once; another ``statistic`` is
    called once per resample with its ``(runs, scenarios)`` matrix."""
    groups = [np.asarray(g, dtype=np.float64) for g in per_scenario if len(g)]
    if not groups:
        return (float("nan"),) * 3
    point = statistic(np.concatenate(groups))
    a = (1.0 - confidence) / 2.0
    if len({len(g) for g in groups}) == 1:
        matrix = np.stack(groups, axis=1)  # (runs, scenarios)
        runs, scenarios = matrix.shape
        idx = stratified_resample_indices(runs, scenarios, resamples)
        samples = matrix[idx, np.arange(scenarios)]  # (resamples, runs, scenarios)
        rows = ROW_STATISTICS.get(statistic)
        if rows is not None:
            draws = rows(samples.reshape(resamples, -1))
        else:
            draws = np.array([statistic(s) for s in samples], dtype=np.float64)
        # arch's percentile interval (which rliable calls): np.percentile at 100·a and 100·(1 − a)
        low, high = np.percentile(draws, [100 * a, 100 * (1.0 - a)])
        return point, float(low), float(high)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    draws = np.empty(resamples)
    idx = [rng.integers(0, len(g), size=(resamples, len(g))) for g in groups]
    for r in range(resamples):
        draws[r] = statistic(np.concatenate([g[i[r]] for g, i in zip(groups, idx, strict=True)]))
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
