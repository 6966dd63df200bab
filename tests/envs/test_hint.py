"""``JobSelect-v1(hint=<heuristic>)``: ``obs["hint"]`` is the rule's action through the env, and reading it changes
nothing in the simulation."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import gpusched_envs  # noqa: F401
from gpusched_envs.envs.adapters import HeuristicAgent
from gpusched_envs.policies import make_policy

CLAIRVOYANT = {
    "cluster": "tiny",
    "num_jobs": 30,
    "load": 1.0,
    "window": 8,
    "information": "clairvoyant",
    "preemption": True,
}
NON_CLAIRVOYANT = {**CLAIRVOYANT, "information": "non-clairvoyant", "decision_interval": 900.0}


def rule_episode(kwargs: dict, rule: str, seed: int) -> tuple[float, int]:
    """(avg JCT, steps) of ``rule`` acting through the env without a hint."""
    env = gym.make("gpusched/JobSelect-v1", **kwargs)
    agent = HeuristicAgent(make_policy(rule, "closest"))
    env.reset(seed=seed)
    steps = 0
    while True:
        _, _, terminated, truncated, info = env.step(agent(env))
        steps += 1
        if terminated or truncated:
            return info["metrics"]["avg_jct"], steps


@pytest.mark.parametrize(
    "kwargs,rule",
    [(CLAIRVOYANT, "srtf"), (CLAIRVOYANT, "sjf"), (NON_CLAIRVOYANT, "las"), (NON_CLAIRVOYANT, "gittins")],
)
@pytest.mark.parametrize("obs_mode", ["graph", "flat"])
def test_following_the_hint_is_the_rule_through_the_env(kwargs, rule, obs_mode):
    env = gym.make("gpusched/JobSelect-v1", hint=rule, obs_mode=obs_mode, **kwargs)
    assert env.observation_space["hint"].shape == (env.action_space.n,)
    for seed in (0, 3):
        obs, _ = env.reset(seed=seed)
        steps = 0
        while True:
            hint = obs["hint"]
            assert hint.dtype == np.float32 and hint.sum() == 1.0  # one action, and a valid one
            a = int(np.argmax(hint))
            assert obs["action_mask"][a]
            obs, _, terminated, truncated, info = env.step(a)
            steps += 1
            if terminated or truncated:
                break
        assert not obs["hint"].any()  # nothing to hint once every job finished
        assert (info["metrics"]["avg_jct"], steps) == rule_episode(kwargs, rule, seed)


def test_the_hint_changes_nothing_in_the_simulation():
    # Tiresias asks for a timer when it waits: the hint reads its action only, so the same actions give the same
    # episode with and without the hint (another policy acts: a seeded random valid action)
    kw = {**NON_CLAIRVOYANT, "num_jobs": 40}
    runs = []
    for hint in (None, "tiresias"):
        env = gym.make("gpusched/JobSelect-v1", hint=hint, **kw)
        rng = np.random.default_rng(7)
        obs, _ = env.reset(seed=1)
        trace = []
        while True:
            a = int(rng.choice(np.flatnonzero(obs["action_mask"])))
            obs, reward, terminated, truncated, info = env.step(a)
            trace.append((a, reward, info["time"], obs["job_features"].tobytes()))
            if terminated or truncated:
                break
        runs.append((trace, info["metrics"]))
    assert runs[0] == runs[1]


def test_env_checker_passes_with_a_hint():
    check_env(gym.make("gpusched/JobSelect-v1", hint="srtf", **CLAIRVOYANT).unwrapped, skip_render_check=True)


@pytest.mark.parametrize(
    "extra,words",
    [
        ({"hint": "srtf", "information": "non-clairvoyant"}, "reads traced durations"),
        ({"hint": "magic"}, "hint must be None or one of"),
        ({"hint": 3}, "hint must be None or one of"),
        ({"hint": "las", "preemption": False}, "preempts jobs"),
    ],
)
def test_bad_hints_are_refused_by_name(extra, words):
    with pytest.raises(ValueError, match=words):
        gym.make("gpusched/JobSelect-v1", **{**CLAIRVOYANT, **extra})


def test_an_invalid_action_keeps_the_hint():
    env = gym.make("gpusched/JobSelect-v1", hint="srtf", **CLAIRVOYANT)
    obs, _ = env.reset(seed=2)
    bad = int(np.flatnonzero(~obs["action_mask"].astype(bool))[0])
    again, reward, *_ = env.step(bad)
    assert reward < 0 and np.array_equal(again["hint"], obs["hint"]) and again["hint"].sum() == 1.0
