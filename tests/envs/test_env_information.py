"""The information setting: a non-clairvoyant observation carries nothing derived from traced durations, remaining
work or future arrivals (property test over envs, presets, modes and states); the clairvoyant one does (so the test
can fail); both settings have the same spaces, and the clairvoyant layout is v0's."""

from __future__ import annotations

import dataclasses
import functools

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpusched_envs.envs  # noqa: F401  (registers the ids)
from gpusched_envs.envs.encoding import INFORMATION, JOB_FEATURES

CASES = [
    ("gpusched/JobSelect-v1", {}),
    ("gpusched/JobSelect-v1", {"preemption": True}),
    ("gpusched/WorkerPlacement-v1", {}),
    ("gpusched/DelayTuning-v1", {"interval": 600.0}),
]
PRESETS = ("tiny", "topdrl", "hetero64")


@functools.cache
def _env(case: int, preset: str, mode: str, information: str):
    env_id, kw = CASES[case]
    if mode == "image" and env_id == "gpusched/DelayTuning-v1":
        mode = "flat"
    return gym.make(
        env_id, cluster=preset, num_jobs=40, load=2.0, obs_mode=mode, information=information, **kw
    )


def _change_durations(sim, rng) -> None:
    """Scale every job's traced duration (queued, running, finished and still to arrive) by a random factor in
    [0.2, 5], keeping each job's work above what it has already done, and delay the jobs still to arrive."""
    w = sim.workload
    duration = w.duration * rng.uniform(0.2, 5.0, len(w.duration))
    submit = w.submit_time.copy()
    submit[sim.next_arrival :] += rng.uniform(1.0, 1e4)  # the future arrivals, later (still sorted)
    sim.workload = dataclasses.replace(w, duration=duration, submit_time=submit)
    done = sim.done_work + sim.rate * (sim.now - sim.last_update)
    sim.job_work = np.maximum(duration / sim.job_ideal_iter, done + 1.0)


def _walk(env, seed: int, steps: int):
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        obs, _, terminated, truncated, _ = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
        if terminated or truncated:
            obs, _ = env.reset(seed=seed + 1)
    return obs


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


@settings(max_examples=24, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.integers(0, len(CASES) - 1),
    preset=st.sampled_from(PRESETS),
    mode=st.sampled_from(["graph", "image", "flat"]),
    seed=st.integers(0, 10_000),
    steps=st.integers(0, 40),
)
def test_non_clairvoyant_observation_ignores_durations(case, preset, mode, seed, steps):
    env = _env(case, preset, mode, "non-clairvoyant")
    obs = _walk(env, seed, steps)
    assert env.observation_space.contains(obs)  # the finite bounds hold on every preset and mode
    u = env.unwrapped
    _change_durations(u.sim, np.random.default_rng(seed))
    assert _same(obs, u._observe()), "a non-clairvoyant observation changed with the traced durations"


@pytest.mark.parametrize("case", range(len(CASES)))
def test_clairvoyant_observation_shows_durations(case):
    """The control: the same change does show in the clairvoyant observation once jobs are in the system."""
    env = _env(case, "tiny", "graph", "clairvoyant")
    obs = _walk(env, 3, 6)
    u = env.unwrapped
    assert u.sim.queue or u.sim.running
    _change_durations(u.sim, np.random.default_rng(0))
    assert not _same(obs, u._observe())


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("mode", ["graph", "image", "flat"])
def test_both_settings_have_the_same_spaces(case, mode):
    spaces = [_env(case, "topdrl", mode, info).observation_space for info in INFORMATION]
    assert spaces[0] == spaces[1]


def test_clairvoyant_layout_is_v0():
    env = gym.make("gpusched/JobSelect-v1", cluster="tiny", information="clairvoyant")
    assert env.unwrapped.encoder.job_feature_names == JOB_FEATURES
    assert env.unwrapped.encoder.context_names == ("finished_share", "to_arrive")
    with pytest.raises(ValueError, match="information"):
        gym.make("gpusched/JobSelect-v1", cluster="tiny", information="oracle")


def test_multi_scheduler_information_setting():
    from gpusched_envs.multi_agent import multi_scheduler_v1

    env = multi_scheduler_v1.parallel_env(cluster="tiny", num_jobs=30, load=2.0)
    assert env.information == "non-clairvoyant"
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(5):
        actions = {a: int(rng.choice(np.flatnonzero(o["action_mask"]))) for a, o in obs.items()}
        obs, *_ = env.step(actions)
    before = {a: {k: v.copy() for k, v in o.items()} for a, o in obs.items()}
    state = env.state().copy()
    _change_durations(env.sim, np.random.default_rng(1))
    after = env._observations()
    assert all(_same(before[a], after[a]) for a in before)
    assert np.array_equal(state, env.state())
    clair = multi_scheduler_v1.parallel_env(cluster="tiny", num_jobs=30, information="clairvoyant")
    assert clair.observation_space(clair.possible_agents[0]) == env.observation_space(env.possible_agents[0])
