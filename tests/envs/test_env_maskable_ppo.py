"""sb3-contrib MaskablePPO runs on every env: a fast smoke run each, and 2,048 steps with flat and with graph
observations (about 3 s each on an idle 2-core machine)."""

from __future__ import annotations

import gymnasium as gym
import pytest

import gpusched_envs.envs  # noqa: F401
from gpusched_envs.envs import CURRENT_IDS as ENTRY_POINTS

SMALL = {
    "gpusched/JobSelect-v1": {"cluster": "tiny", "num_jobs": 20},
    "gpusched/WorkerPlacement-v1": {"cluster": "tiny", "num_jobs": 20},
    "gpusched/DelayTuning-v1": {"cluster": "tiny", "num_jobs": 20, "interval": 300.0},
    "gpusched/DAGSchedule-v1": {"cluster": "tiny", "dag": "dag:random:n=10"},
}


def learn(env_id, steps, n_steps, batch_size, obs_mode="flat", n_epochs=10):
    from sb3_contrib import MaskablePPO

    env = gym.make(env_id, obs_mode=obs_mode, **SMALL[env_id])
    model = MaskablePPO(
        "MultiInputPolicy",
        env,
        n_steps=n_steps,
        batch_size=batch_size,
        n_epochs=n_epochs,
        seed=0,
        device="cpu",
    )
    model.learn(steps)
    assert model.num_timesteps >= steps
    return model


@pytest.mark.parametrize("env_id", list(ENTRY_POINTS))
def test_maskable_ppo_smoke(env_id):
    learn(env_id, 64, n_steps=32, batch_size=16)


@pytest.mark.parametrize("env_id", list(ENTRY_POINTS))
def test_maskable_ppo_2048_steps_flat(env_id):
    learn(env_id, 2048, n_steps=256, batch_size=64, obs_mode="flat", n_epochs=2)


@pytest.mark.parametrize("env_id", list(ENTRY_POINTS))
def test_maskable_ppo_2048_steps_graph(env_id):
    learn(env_id, 2048, n_steps=256, batch_size=64, obs_mode="graph")
