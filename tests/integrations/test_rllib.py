"""RLlib: the masking layout and the multi-agent wrapper (fast, no Ray cluster), and one short PPO iteration
single-agent (with a remote env runner: the ids must exist in the worker) and multi-agent, shared and per-agent
policies (slow)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ray.rllib", reason="ray[rllib] (extra [integrations]) is not installed")

from gpusched_envs.integrations.rllib import (  # noqa: E402
    AgentMaskLayout,
    EnvFactory,
    masking_layout,
    rllib_env_name,
)
from gpusched_envs.multi_agent import multi_scheduler_v1  # noqa: E402

SMALL = {"cluster": "tiny", "num_jobs": 10}


def test_masking_layout_single_agent():
    env = EnvFactory("gpusched/JobSelect-v1", SMALL, (masking_layout,))()
    assert set(env.observation_space.spaces) == {"observations", "action_mask"}
    obs, _ = env.reset(seed=0)
    assert obs["observations"].dtype == np.float32 and obs["action_mask"].dtype == np.float32
    assert obs in env.observation_space
    np.testing.assert_array_equal(obs["action_mask"].astype(bool), env.get_wrapper_attr("action_masks")())
    assert rllib_env_name("gpusched/JobSelect-v1") == "gpusched-rllib/JobSelect-v1"


def test_agent_mask_layout_per_agent_masks():
    raw = multi_scheduler_v1.parallel_env(num_agents=2, **SMALL)
    env = AgentMaskLayout(multi_scheduler_v1.parallel_env(num_agents=2, **SMALL))
    obs, infos = env.reset(seed=1)
    raw_obs, _ = raw.reset(seed=1)
    assert set(obs) == {"scheduler_0", "scheduler_1"}
    for a in obs:
        assert obs[a] in env.observation_space(a)
        np.testing.assert_array_equal(obs[a]["action_mask"], raw_obs[a]["action_mask"].astype(np.float32))
    rng = np.random.default_rng(0)
    for _ in range(200):
        actions = {a: int(rng.choice(np.flatnonzero(o["action_mask"]))) for a, o in obs.items()}
        obs, rewards, terms, truncs, infos = env.step(actions)
        assert all(not i.get("invalid_action", False) for i in infos.values())
        if all(terms.values()) or all(truncs.values()):
            break
    assert all(np.isfinite(i["avg_jct"]) for i in infos.values())  # the episode's metrics at its end


@pytest.fixture(scope="module")
def ray_session():
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    yield
    ray.shutdown()


def one_iteration(config) -> dict:
    algo = config.build_algo() if hasattr(config, "build_algo") else config.build()
    try:
        return algo.train()
    finally:
        algo.stop()


@pytest.mark.slow
def test_ppo_single_agent_remote_env_runner(ray_session):
    from gpusched_envs.integrations.rllib import ppo_config

    config = ppo_config(
        env_kwargs={**SMALL, "invalid_action": "raise"},
        num_env_runners=1,
        train_batch_size=128,
        minibatch_size=64,
        num_epochs=1,
    )
    result = one_iteration(config)
    assert result["env_runners"]["num_env_steps_sampled"] >= 128
    assert result["env_runners"]["num_episodes"] >= 1  # episodes of 10 jobs ended, no invalid action raised


@pytest.mark.slow
@pytest.mark.parametrize("shared", [True, False])
def test_ppo_multi_agent(ray_session, shared):
    from gpusched_envs.integrations.rllib import ppo_config

    config = ppo_config(
        env_kwargs={**SMALL, "num_agents": 2, "invalid_action": "raise"},
        multi_agent=True,
        shared_policy=shared,
        train_batch_size=128,
        minibatch_size=64,
        num_epochs=1,
    )
    expected = {"shared"} if shared else {"scheduler_0", "scheduler_1"}
    assert set(config.policies) == expected
    result = one_iteration(config)
    assert result["env_runners"]["num_episodes"] >= 1
    assert expected <= set(result["learners"])
