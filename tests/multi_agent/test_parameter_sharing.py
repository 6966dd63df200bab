"""The SB3 bridge: one shared MaskablePPO policy trains on all agents of multi_scheduler_v1."""

from __future__ import annotations

import numpy as np
from gpusched_lab.agents.algos.parameter_sharing import SharedPolicyVecEnv
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.utils import get_action_masks

from gpusched_envs.multi_agent import multi_scheduler_v1


def make(**kw):
    return multi_scheduler_v1.parallel_env(num_agents=3, cluster="tiny", num_jobs=20, **kw)


def test_vec_env_matches_the_parallel_env():
    vec = SharedPolicyVecEnv(make(), seed=5)
    ref = make()
    obs = vec.reset()
    ref_obs, _ = ref.reset(seed=5)
    assert obs["action_mask"].shape == (3, ref.num_candidates + 1)
    for i, a in enumerate(ref.possible_agents):
        assert np.array_equal(obs["node_features"][i], ref_obs[a]["node_features"])
    total = np.zeros(3)
    for _ in range(500):
        masks = get_action_masks(vec)
        actions = np.array([np.flatnonzero(m)[0] for m in masks])
        ref_obs, ref_rew, _, _, _ = ref.step({a: int(actions[i]) for i, a in enumerate(ref.possible_agents)})
        obs, rew, dones, infos = vec.step(actions)
        total += rew
        assert np.allclose(rew, [ref_rew[a] for a in ref.possible_agents])
        if dones.all():
            assert "terminal_observation" in infos[0] and "metrics" in infos[0]
            m = infos[0]["metrics"]
            assert np.allclose(total, -m["avg_jct"] * m["jobs"] / 3600)
            break
    else:
        raise AssertionError("episode did not end")


def test_maskable_ppo_trains_with_parameter_sharing():
    vec = SharedPolicyVecEnv(make(obs_mode="flat"), seed=0)
    model = MaskablePPO("MultiInputPolicy", vec, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
    model.learn(total_timesteps=384)
    assert model.num_timesteps >= 384
