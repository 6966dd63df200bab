"""check_playable: a heuristic the env's setting cannot play is refused with one message naming the env arguments
that play it; HeuristicAgent applies it."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import gpusched_envs  # noqa: F401
from gpusched_envs.envs.adapters import HeuristicAgent
from gpusched_envs.policies import NotPlayableError, check_playable, comparable_policies, make_policy

SMALL = {"cluster": "tiny", "num_jobs": 6}


@pytest.mark.parametrize("name", ["tiresias", "las", "gittins"])
def test_preemptive_heuristics_need_preemption(name):
    env = gym.make("gpusched/JobSelect-v1", **SMALL)
    with pytest.raises(NotPlayableError, match=f"^{name} preempts: use JobSelect with preemption=True"):
        check_playable(name, env)
    check_playable(name, gym.make("gpusched/JobSelect-v1", preemption=True, **SMALL))
    check_playable(make_policy(name), gym.make("gpusched/JobSelect-v1", preemption=True, **SMALL))


def test_srtf_needs_both_and_says_so():
    env = gym.make("gpusched/JobSelect-v1", **SMALL)
    with pytest.raises(
        NotPlayableError,
        match="srtf preempts: .*; srtf reads traced durations: use JobSelect with information='clairvoyant'",
    ):
        check_playable("srtf", env)
    check_playable(
        "srtf", gym.make("gpusched/JobSelect-v1", preemption=True, information="clairvoyant", **SMALL)
    )


def test_every_comparable_policy_of_a_setting_is_playable_there():
    for information in ("non-clairvoyant", "clairvoyant"):
        for preemption in (False, True):
            env = gym.make("gpusched/JobSelect-v1", information=information, preemption=preemption, **SMALL)
            for name in comparable_policies(information, preemption=preemption):
                check_playable(name, env)


def test_other_envs_name_what_they_play():
    with pytest.raises(NotPlayableError, match="WorkerPlacement plays FIFO with backfill"):
        check_playable("fifo", gym.make("gpusched/WorkerPlacement-v1", **SMALL))
    check_playable("netsens", gym.make("gpusched/DelayTuning-v1", **SMALL))
    with pytest.raises(NotPlayableError, match="DelayTuning plays NetSens"):
        check_playable("fifo", gym.make("gpusched/DelayTuning-v1", **SMALL))
    with pytest.raises(ValueError, match="unknown policy 'nope'"):
        check_playable("nope", gym.make("gpusched/JobSelect-v1", **SMALL))


def test_heuristic_agent_refuses_tiresias_without_preemption():
    env = gym.make("gpusched/JobSelect-v1", **SMALL)
    env.reset(seed=0)
    with pytest.raises(NotPlayableError, match="tiresias preempts"):
        HeuristicAgent(make_policy("tiresias", "closest"))(env)
    env = gym.make("gpusched/JobSelect-v1", preemption=True, **SMALL)
    obs, _ = env.reset(seed=0)
    a = HeuristicAgent(make_policy("tiresias", "closest"))(env)
    assert obs["action_mask"][a]
    assert np.isfinite(env.step(a)[1])
