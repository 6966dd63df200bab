"""MaskablePPO with the project's features extractors: smoke training per encoder, checkpoint policy = SB3 policy."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gpusched_lab.agents.algos.ppo import EXTRACTORS, PPOArgs, make_ppo
from gpusched_lab.agents.checkpoint import PPOPolicy
from gpusched_lab.agents.common import make_env
from gpusched_lab.agents.nets.networks import ENCODERS, OBS_MODE_OF_ENCODER, config_for_env, obs_to_tensors

TINY = {"cluster": "tiny", "num_jobs": 10, "load": 0.9}


@pytest.mark.parametrize("env_id", ["gpusched/JobSelect-v1", "gpusched/WorkerPlacement-v1"])
@pytest.mark.parametrize("encoder", ENCODERS)
def test_maskable_ppo_trains_with_each_extractor(env_id, encoder):
    env = make_env(env_id, TINY, OBS_MODE_OF_ENCODER[encoder])
    cfg = config_for_env(env, encoder, hidden=16)
    model = make_ppo(
        env, cfg, PPOArgs(encoder=encoder, hidden=16, n_steps=64, batch_size=32, n_epochs=1, device="cpu")
    )
    assert isinstance(model.policy.features_extractor, EXTRACTORS[encoder])
    assert model.policy.features_extractor.features_dim == cfg.num_actions + cfg.hidden
    model.learn(256)
    assert model.num_timesteps >= 256
    obs, _ = env.reset(seed=5)
    action, _ = model.predict(obs, action_masks=env.unwrapped.action_masks(), deterministic=True)
    assert obs["action_mask"][int(action)]


def test_exported_policy_matches_sb3_deterministic_actions():
    env = make_env("gpusched/JobSelect-v1", {**TINY, "num_jobs": 30}, "graph")
    cfg = config_for_env(env, "gnn", hidden=16)
    model = make_ppo(
        env, cfg, PPOArgs(encoder="gnn", hidden=16, n_steps=64, batch_size=32, n_epochs=1, device="cpu")
    )
    model.learn(64)
    policy = PPOPolicy.from_sb3(model, cfg).eval()
    obs, _ = env.reset(seed=2)
    for _ in range(30):
        mask = env.unwrapped.action_masks()
        sb3_action, _ = model.predict(obs, action_masks=mask, deterministic=True)
        with torch.no_grad():
            logits = policy(obs_to_tensors(obs))[0].numpy()
        mine = int(np.argmax(np.where(mask, logits, -np.inf)))
        assert mine == int(sb3_action)
        obs, _, terminated, truncated, _ = env.step(mine)
        if terminated or truncated:
            break


def test_wait_logit_starts_low():
    env = make_env("gpusched/JobSelect-v1", TINY, "image")
    cfg = config_for_env(env, "cnn", hidden=16)
    model = make_ppo(env, cfg, PPOArgs(encoder="cnn", hidden=16, device="cpu"))
    assert model.policy.action_net.bias[-1].item() == -3.0
