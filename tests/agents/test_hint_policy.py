"""A PPO network that adds the env's ``obs["hint"]`` to its logits (``hint_logit``): it starts as the rule, saves
and loads with the hint, and the evaluation builds its env with the hint."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from gpusched_lab.agents.algos.ppo import PPOArgs, make_ppo
from gpusched_lab.agents.checkpoint import PPOPolicy
from gpusched_lab.agents.common import make_env
from gpusched_lab.agents.meta import CheckpointError, validate_meta
from gpusched_lab.agents.nets.networks import config_for_env, for_env, obs_to_tensors
from gpusched_lab.evaluate.agents import resolve_agent
from gpusched_lab.evaluate.compare import heuristic_in_env_jct

KW = {
    "cluster": "tiny",
    "num_jobs": 25,
    "load": 1.0,
    "window": 8,
    "information": "clairvoyant",
    "preemption": True,
    "hint": "srtf",
}


def greedy_avg_jct(policy, env, seed: int) -> float:
    obs, _ = env.reset(seed=seed)
    while True:
        with torch.no_grad():
            logits = policy(obs_to_tensors(obs))[0].numpy()
        a = int(np.argmax(np.where(obs["action_mask"].astype(bool), logits, -np.inf)))
        obs, _, terminated, truncated, info = env.step(a)
        if terminated or truncated:
            return info["metrics"]["avg_jct"]


def test_a_large_hint_logit_starts_the_policy_as_the_rule():
    env = make_env("gpusched/JobSelect-v1", KW, "graph")
    cfg = config_for_env(env, "gnn", hidden=16, hint_logit=40.0)
    model = make_ppo(env, cfg, PPOArgs(encoder="gnn", hidden=16, hint_logit=40.0, device="cpu"))
    weight = model.policy.features_extractor.scorer.hint_weight
    assert weight.requires_grad and weight.item() == 40.0  # learned: PPO may lower or raise the rule's pull
    policy = PPOPolicy.from_sb3(model, cfg).eval()
    bare = make_env("gpusched/JobSelect-v1", {k: v for k, v in KW.items() if k != "hint"}, "graph")
    for seed in (0, 4):
        assert greedy_avg_jct(policy, env, seed) == heuristic_in_env_jct(bare, "srtf", "closest", seed)
    # without the hint term the same network is another policy: on the states of one of the rule's episodes, its
    # greedy actions leave the rule's
    obs, _ = env.reset(seed=0)
    states = []
    while True:
        states.append(obs)
        obs, _, terminated, truncated, _ = env.step(int(np.argmax(obs["hint"])))
        if terminated or truncated:
            break
    with torch.no_grad():
        weight.zero_()
    bare_policy = PPOPolicy.from_sb3(model, cfg).eval()
    with torch.no_grad():
        greedy = [
            int(
                np.argmax(
                    np.where(
                        o["action_mask"].astype(bool), bare_policy(obs_to_tensors(o))[0].numpy(), -np.inf
                    )
                )
            )
            for o in states
        ]
    assert sum(g != int(np.argmax(o["hint"])) for g, o in zip(greedy, states, strict=True)) > 0


def test_a_hint_logit_needs_an_env_with_a_hint():
    bare = make_env("gpusched/JobSelect-v1", {k: v for k, v in KW.items() if k != "hint"}, "graph")
    with pytest.raises(ValueError, match="this env has no hint"):
        config_for_env(bare, "gnn", hint_logit=4.0)
    cfg = config_for_env(make_env("gpusched/JobSelect-v1", KW, "graph"), "gnn", hint_logit=4.0)
    assert (
        for_env(cfg, make_env("gpusched/JobSelect-v1", {**KW, "cluster": "topdrl"}, "graph")).hint_logit
        == 4.0
    )


def test_meta_validation_reads_the_hint_logit_as_a_number():
    cfg = config_for_env(make_env("gpusched/JobSelect-v1", KW, "graph"), "gnn", hint_logit=4.0)
    meta = {
        "format": 1,
        "algorithm": "ppo",
        "policy": "logits",
        "obs_mode": "graph",
        "env_id": "gpusched/JobSelect-v1",
        "env_kwargs": KW,
        "network": cfg.to_dict(),
    }
    validate_meta(json.loads(json.dumps(meta)), "meta.json")
    for bad in (float("nan"), 1e9, True, "4"):
        with pytest.raises(CheckpointError, match="network.hint_logit"):
            validate_meta({**meta, "network": {**cfg.to_dict(), "hint_logit": bad}}, "meta.json")


def test_a_trained_hint_checkpoint_loads_and_the_leaderboard_gives_it_the_hint(tmp_path):
    from gpusched_lab.train.cli import app
    from typer.testing import CliRunner

    config = tmp_path / "hint.yaml"
    config.write_text(
        "env: gpusched/JobSelect-v1\n"
        f"env_kwargs: {json.dumps(KW)}\n"
        "steps: 128\nseed: 0\nnum_envs: 2\neval_every: 0\neval_seeds: [5]\ncheckpoint_every: 64\n"
        "args: {hidden: 16, n_steps: 32, batch_size: 32, n_epochs: 1, hint_logit: 40.0}\n"
    )
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["ppo", "--config", str(config), "--out", str(out)])
    assert result.exit_code == 0, result.output
    agent = resolve_agent(str(out / "checkpoint"))
    assert agent.env_overrides()["hint"] == "srtf"
    meta = json.loads((out / "checkpoint" / "meta.json").read_text())
    assert meta["network"]["hint_logit"] == 40.0
