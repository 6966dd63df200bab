"""The leaderboard's mean interval is evaluate.stats.bootstrap_ci with the leaderboard's resamples and seed; the
stratified-bootstrap (rliable) interval is reproducible; heuristics run on agents.common.fresh_simulator."""

from __future__ import annotations

import math

import numpy as np
import pytest
from gpusched_lab.agents.common import NoSimulatorError, fresh_simulator, make_env
from gpusched_lab.evaluate.agents import AgentSpecError, HeuristicEvalAgent, scenario_simulator
from gpusched_lab.evaluate.scenarios import Scenario
from gpusched_lab.evaluate.stats import (
    BOOTSTRAP_SEED,
    RESAMPLES,
    bootstrap_ci,
    mean_ci,
    stratified_bootstrap_ci,
)

TINY_KWARGS = {
    "cluster": "tiny",
    "workload": "synthetic:jobs=30,load=0.9,gpus=16,max_gpus=16",
    "obs_mode": "flat",
}
TINY = Scenario("tiny", "gpusched/JobSelect-v1", TINY_KWARGS, (0, 1))


def reference_mean_ci(values, confidence=0.95, resamples=RESAMPLES):
    """The leaderboard's mean interval written out: the percentile bootstrap of the mean with its seed."""
    x = np.asarray([v for v in values if v is not None], dtype=np.float64)
    x = x[np.isfinite(x)]
    if not len(x):
        return (float("nan"),) * 3
    m = float(x.mean())
    if len(x) == 1 or np.all(x == x[0]):
        return m, m, m
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    means = x[rng.integers(0, len(x), size=(resamples, len(x)))].mean(axis=1)
    a = (1.0 - confidence) / 2.0
    return m, float(np.quantile(means, a)), float(np.quantile(means, 1.0 - a))


@pytest.mark.parametrize(
    "values", [[3.0, 1.0, 4.0, 1.5, 9.0, 2.6], [1.0, None, float("nan"), 2.0, 7.5], np.arange(12.0), [5.0]]
)
def test_mean_ci_is_bootstrap_ci_with_the_leaderboard_settings(values):
    assert mean_ci(values) == reference_mean_ci(values)
    assert mean_ci(values) == bootstrap_ci(values, resamples=RESAMPLES, seed=BOOTSTRAP_SEED)


def test_bootstrap_ci_drops_missing_values_and_degenerate_cases():
    assert bootstrap_ci([2.0, None, float("nan"), float("inf")]) == (2.0, 2.0, 2.0)
    assert bootstrap_ci([4.0, 4.0, 4.0]) == (4.0, 4.0, 4.0)
    assert all(math.isnan(v) for v in bootstrap_ci([None, float("nan")]))
    assert all(math.isnan(v) for v in bootstrap_ci([]))
    m, lo, hi = bootstrap_ci([1.0, 2.0, None, 3.0])
    assert m == 2.0 and 1.0 <= lo < m < hi <= 3.0


def test_stratified_bootstrap_is_reproducible_and_leaves_the_global_rng_alone():
    rng = np.random.default_rng(1)
    groups = [rng.random(5) for _ in range(3)]
    np.random.seed(123)  # noqa: NPY002
    before = np.random.get_state()[1].copy()  # noqa: NPY002
    first = stratified_bootstrap_ci(groups)
    assert np.array_equal(np.random.get_state()[1], before)  # noqa: NPY002
    np.random.random()  # noqa: NPY002 - another global state: same interval
    assert stratified_bootstrap_ci(groups) == first


def test_fresh_simulator_is_shared_by_compare_and_evaluate():
    from gpusched_lab.evaluate.compare import heuristic_jct

    from gpusched_envs.policies import make_policy

    env = TINY.make_env()
    sim = fresh_simulator(env, 0)
    assert sim.now <= 0.0 and sim.workload is env.unwrapped.sim.workload
    jct = heuristic_jct(env, "fifo", "closest", 1)
    assert jct == HeuristicEvalAgent("fifo", "closest").run_episode(TINY, 1)["avg_jct"]
    assert jct == fresh_simulator(env, 1).run(make_policy("fifo", "closest"))["avg_jct"]
    assert scenario_simulator(TINY, 0).now <= 0.0


def test_envs_without_a_cluster_simulator_fail_clearly():
    with pytest.raises(NoSimulatorError, match="has no cluster simulator"):
        fresh_simulator(make_env("gpusched/DAGSchedule-v1"), 0)
    dag = Scenario("dag", "gpusched/DAGSchedule-v1", {}, (0,))
    with pytest.raises(
        AgentSpecError, match="scenario dag: gpusched/DAGSchedule-v1 has no cluster simulator"
    ):
        scenario_simulator(dag, 0)


def test_agents_do_not_carry_the_statistics_helper():
    """bootstrap_ci lives in evaluate.stats; the agents package (which may not import evaluate) has no copy."""
    import gpusched_lab.agents.common as common

    assert not hasattr(common, "bootstrap_ci")
