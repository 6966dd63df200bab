"""The leaderboard's IQM and stratified-bootstrap intervals are rliable's numbers to the last bit: the vectorised
pass over all resamples gives exactly what rliable's get_interval_estimates gives (same draws, same order, same
statistic values), on hand-built score matrices and random ones with ties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from gpusched_lab.evaluate.stats import (
    BOOTSTRAP_SEED,
    RESAMPLES,
    iqm,
    iqm_rows,
    mean_rows,
    mean_score,
    stratified_bootstrap_ci,
    stratified_resample_indices,
)

pytestmark = pytest.mark.filterwarnings(
    "ignore:random_state is deprecated:FutureWarning"
)  # arch, inside rliable
rly = pytest.importorskip("rliable.library")
rl_metrics = pytest.importorskip("rliable.metrics")


def rliable_iqm(scores) -> float:
    return float(rl_metrics.aggregate_iqm(np.asarray(scores, dtype=np.float64).reshape(1, -1)))


def rliable_interval(matrix: np.ndarray, statistic, resamples: int = RESAMPLES) -> tuple[float, float]:
    """rliable's percentile interval of ``statistic`` on the (runs, scenarios) matrix, its indices drawn from the
    global generator seeded with the leaderboard's seed (as the leaderboard called it)."""
    state = np.random.get_state()  # noqa: NPY002
    np.random.seed(BOOTSTRAP_SEED)  # noqa: NPY002
    try:
        _, intervals = rly.get_interval_estimates(
            {"agent": matrix},
            lambda x: np.array([statistic(x)]),
            reps=resamples,
            confidence_interval_size=0.95,
            random_state=np.random.RandomState(BOOTSTRAP_SEED),  # noqa: NPY002
        )
    finally:
        np.random.set_state(state)  # noqa: NPY002
    low, high = intervals["agent"][:, 0]
    return float(low), float(high)


HAND_BUILT = [
    # 5 seeds x 4 scenarios, like the quick suite
    np.array(
        [
            [0.31, 0.52, 0.77, 0.12],
            [0.29, 0.55, 0.81, 0.10],
            [0.35, 0.49, 0.64, 0.15],
            [0.30, 0.60, 0.70, 0.11],
            [0.28, 0.51, 0.79, 0.13],
        ]
    ),
    np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]),  # 3 seeds x 2 scenarios
    np.array([[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]]),  # all equal
    np.array([[0.25], [0.75], [0.5], [1.0]]),  # one scenario
    np.array([[0.4, 0.9, 0.2]]),  # one seed
]


@pytest.mark.parametrize("matrix", HAND_BUILT, ids=lambda m: "x".join(map(str, m.shape)))
def test_intervals_equal_rliable_on_hand_built_matrices(matrix):
    groups = [matrix[:, j] for j in range(matrix.shape[1])]
    for ours, theirs in ((iqm, rliable_iqm), (mean_score, lambda s: float(np.mean(s)))):
        point, low, high = stratified_bootstrap_ci(groups, statistic=ours)
        assert point == theirs(matrix.T.ravel())
        assert (low, high) == rliable_interval(matrix, theirs)


def test_intervals_equal_rliable_on_random_matrices_with_ties():
    rng = np.random.default_rng(7)
    for trial in range(24):
        runs, scenarios = int(rng.integers(1, 11)), int(rng.integers(1, 6))
        matrix = rng.random((runs, scenarios)) * [1e-3, 1.0, 1e3][trial % 3]
        if trial % 2:
            matrix = np.round(matrix, 1)  # ties in the partition
        groups = [matrix[:, j] for j in range(scenarios)]
        assert stratified_bootstrap_ci(groups, resamples=300)[1:] == rliable_interval(
            matrix, rliable_iqm, 300
        )
        assert stratified_bootstrap_ci(groups, statistic=mean_score, resamples=300)[1:] == rliable_interval(
            matrix, lambda s: float(np.mean(s)), 300
        )


def test_a_statistic_without_a_row_form_is_called_per_resample_with_the_same_draws():
    matrix = HAND_BUILT[0]
    groups = [matrix[:, j] for j in range(matrix.shape[1])]
    calls = []

    def median(s):
        calls.append(np.shape(s))
        return float(np.median(s))

    point, low, high = stratified_bootstrap_ci(groups, statistic=median, resamples=200)
    assert calls[1:] == [matrix.shape] * 200  # the point estimate, then one call per resample
    assert point == float(np.median(matrix))
    assert (low, high) == rliable_interval(matrix, lambda s: float(np.median(s)), 200)


def test_resample_indices_are_rliables_draws_in_order():
    np.random.seed(BOOTSTRAP_SEED)  # noqa: NPY002
    one_by_one = np.stack([np.random.choice(4, (4, 3), replace=True) for _ in range(50)])  # noqa: NPY002
    assert np.array_equal(stratified_resample_indices(4, 3, 50), one_by_one)


@pytest.mark.parametrize(
    "scores",
    [
        [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0],
        [0.1, 0.7, 0.7, 0.2, 0.9],
        [2.5],
        [1.0, 2.0, math.inf, 4.0, 5.0, 6.0, 7.0, 8.0],
    ],
)
def test_iqm_is_rliables_aggregate_iqm(scores):
    assert iqm(scores) == rliable_iqm(scores)
    assert iqm_rows(np.array([scores, scores[::-1]])).tolist() == [rliable_iqm(scores)] * 2


def test_iqm_exact_values_and_missing_scores():
    assert iqm([1.0, 2.0, 3.0, 4.0, 100.0, -50.0, 5.0, 6.0]) == 3.5  # the middle four: 2, 3, 4, 5
    assert iqm([1.0, 2.0, 3.0]) == 2.0  # a quarter of 3 rounds down to 0 cut: the mean
    assert math.isnan(iqm([]))
    assert math.isnan(iqm([1.0, math.nan, 2.0, 3.0]))
    assert mean_rows(np.array([[1.0, 2.0], [3.0, 5.0]])).tolist() == [1.5, 4.0]


def test_unequal_seed_counts_resample_each_scenario_on_its_own():
    groups = [np.array([0.2, 0.4, 0.6]), np.array([0.9, 0.8])]
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    idx = [rng.integers(0, len(g), size=(100, len(g))) for g in groups]
    draws = [
        rliable_iqm(np.concatenate([g[i[r]] for g, i in zip(groups, idx, strict=True)])) for r in range(100)
    ]
    point, low, high = stratified_bootstrap_ci(groups, resamples=100)
    assert point == rliable_iqm(np.concatenate(groups))
    a = (1.0 - 0.95) / 2.0
    assert (low, high) == (float(np.quantile(draws, a)), float(np.quantile(draws, 1.0 - a)))
