"""The baselines of the examples' comparison: heuristic figures equal Simulator.run on the same episode, the
random masked policy only takes valid actions, and a policy that always picks the oldest job equals strict
FIFO's figure."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import gpusched_envs  # noqa: F401
from gpusched_envs.integrations.baselines import compare, format_table, masked_random_policy, play
from gpusched_envs.policies import FIFO
from gpusched_envs.sim import Simulator

KW = {"cluster": "tiny", "num_jobs": 20, "load": 1.5, "preemption": True}


def make():
    return gym.make("gpusched/JobSelect-v1", invalid_action="raise", **KW)


def test_compare_rows_and_heuristic_figures():
    res = compare(make, None, seeds=[3, 4])
    assert list(res) == ["random", "fifo", "gandiva", "tiresias", "las", "fifo+backfill"]
    figures = []
    for s in (3, 4):
        env = make()
        env.reset(seed=s)
        sim = env.unwrapped.sim
        figures.append(Simulator(sim.cluster, sim.workload, sim.config).run(FIFO(backfill=True))["avg_jct"])
    assert res["fifo+backfill"] == pytest.approx(np.mean(figures), rel=1e-12)
    assert all(v > 0 for v in res.values())
    text = format_table(res, "t")
    assert text.splitlines()[0] == "t" and len(text.splitlines()) == 2 + len(res)


def test_without_preemption_the_preemptive_heuristics_are_left_out():
    """The comparison keeps to what the agent's setting plays: no Tiresias or LAS beside a non-preemptive agent."""

    def no_preemption():
        return gym.make("gpusched/JobSelect-v1", **{**KW, "preemption": False})

    assert list(compare(no_preemption, None, seeds=[3])) == ["random", "fifo", "gandiva", "fifo+backfill"]


def test_random_policy_is_masked_and_seeded():
    env = make()  # invalid_action="raise": an unmasked action would raise
    a = play(env, masked_random_policy(1), seed=5)
    b = play(make(), masked_random_policy(1), seed=5)
    assert a == b > 0


def test_clairvoyant_env_adds_sjf_srtf():
    res = compare(lambda: gym.make("gpusched/JobSelect-v1", information="clairvoyant", **KW), None, seeds=[1])
    assert {"sjf", "srtf"} <= set(res)


def test_compare_refuses_non_cluster_env():
    with pytest.raises(TypeError, match="cluster env"):
        compare(lambda: gym.make("CartPole-v1"), None, seeds=[0])
