"""A CleanRL-style loop: Gymnasium vector envs (sync and async, autoreset_mode=SAME_STEP) of the picklable env
factory, actions sampled among each sub-env's valid actions (the mask in the observation), episodes ending with
their metrics in the step's info."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from gpusched_envs.integrations.common import EnvFactory
from gpusched_envs.wrappers import FixedInfo, FlattenFeatures

SMALL = {"cluster": "tiny", "num_jobs": 10, "obs_mode": "flat", "invalid_action": "raise"}


def run_loop(vec_cls, steps: int = 60, seed: int = 0, **vec_kwargs):
    factory = EnvFactory("gpusched/JobSelect-v1", SMALL, (FlattenFeatures, FixedInfo))
    envs = vec_cls([factory] * 2, autoreset_mode=AutoresetMode.SAME_STEP, **vec_kwargs)
    rng = np.random.default_rng(seed)
    obs, _ = envs.reset(seed=seed)
    assert obs["obs"].dtype == np.float32 and obs["obs"].shape == (2, 246)
    actions_taken, finished = [], []
    for _ in range(steps):
        mask = obs["action_mask"].astype(bool)  # (2, A)
        logits = np.where(mask, rng.normal(size=mask.shape), -np.inf)  # masked sampling (Gumbel-max)
        action = np.argmax(logits + rng.gumbel(size=mask.shape), axis=1)
        assert mask[np.arange(2), action].all()
        actions_taken.append(action)
        obs, reward, term, trunc, info = envs.step(action)
        assert reward.shape == (2,) and np.isfinite(reward).all()
        for i in np.flatnonzero(term | trunc):
            # SAME_STEP: the returned obs is the next episode's first; the finished episode's info is final_info
            jct = info["final_info"]["avg_jct"][i]
            assert np.isfinite(jct) and jct > 0
            finished.append(float(jct))
    envs.close()
    return np.array(actions_taken), finished


def test_sync_vector_env_same_step_masked_loop():
    actions, finished = run_loop(gym.vector.SyncVectorEnv)
    assert len(finished) >= 4  # two sub-envs, episodes of about 10 decisions, 60 steps
    again, finished_again = run_loop(gym.vector.SyncVectorEnv)
    np.testing.assert_array_equal(actions, again)  # same seeds, same loop
    assert finished == finished_again


def test_async_vector_env_same_step_masked_loop():
    actions, finished = run_loop(gym.vector.AsyncVectorEnv, steps=30)
    sync_actions, sync_finished = run_loop(gym.vector.SyncVectorEnv, steps=30)
    np.testing.assert_array_equal(actions, sync_actions)  # worker processes play the same episodes
    assert finished == sync_finished


def test_async_vector_env_spawned_workers_register_ids():
    """Spawned workers import nothing of the parent: the factory registers the ids there."""
    actions, finished = run_loop(gym.vector.AsyncVectorEnv, steps=12, context="spawn")
    assert len(actions) == 12


def test_env_factory_rejects_bad_id():
    with pytest.raises(ValueError, match="registered id"):
        EnvFactory("")
