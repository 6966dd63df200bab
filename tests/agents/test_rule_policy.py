"""A PPO network for the rule-choice env (``JobSelect-v1(rules=[...])``, ``slots="rules"``): it starts as the first
rule with ``rule_logit_init``, saves and loads with its rules, and the evaluation builds its env with them."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from gpusched_lab.agents.algos.ppo import PPOArgs, make_ppo
from gpusched_lab.agents.checkpoint import PPOPolicy, load
from gpusched_lab.agents.common import fresh_simulator, make_env
from gpusched_lab.agents.nets.networks import ActionScorer, config_for_env, obs_to_tensors
from gpusched_lab.evaluate.agents import resolve_agent

from gpusched_envs.policies import make_policy
from tests.envs.test_rules import KW as ENV_KW
from tests.envs.test_rules import RULE_SET

RULES = list(RULE_SET)
KW = {
    **ENV_KW,
    "rules": RULES,
}  # the rule-choice env of the env tests (rules as a list, as meta.json stores them)


def greedy(policy, env, seed: int) -> tuple[float, list[int]]:
    obs, _ = env.reset(seed=seed)
    actions = []
    while True:
        with torch.no_grad():
            logits = policy(obs_to_tensors(obs))[0].numpy()
        a = int(np.argmax(np.where(obs["action_mask"].astype(bool), logits, -np.inf)))
        actions.append(a)
        obs, _, terminated, truncated, info = env.step(a)
        if terminated or truncated:
            return info["metrics"]["avg_jct"], actions


@pytest.mark.parametrize("obs_mode,encoder,slots", [("graph", "gnn", "rules"), ("image", "cnn", "rules")])
def test_the_network_scores_one_action_per_rule_from_the_job_rows(obs_mode, encoder, slots):
    env = make_env("gpusched/JobSelect-v1", KW, obs_mode)
    cfg = config_for_env(env, encoder, hidden=16)
    assert cfg.slots == slots and cfg.num_actions == len(RULES)
    net = ActionScorer(cfg, env.observation_space)
    obs, _ = env.reset(seed=1)
    for _ in range(5):
        obs, *_ = env.step(0)
    x = obs_to_tensors(obs)
    with torch.no_grad():
        base = net(x)
        assert base.shape == (1, len(RULES)) and torch.isfinite(base).all()
        # the scores read the job rows: changing one filled row's features changes them
        x2 = {k: v.clone() for k, v in x.items()}
        key = "job_features" if obs_mode == "graph" else "queue"
        row = int(torch.nonzero(x["job_mask"][0])[0])
        x2[key][0, row] += 1.0
        assert not torch.allclose(net(x2), base)


def test_the_mlp_encoder_keeps_a_generic_head_and_refuses_rule_slots():
    env = make_env("gpusched/JobSelect-v1", KW, "flat")
    assert config_for_env(env, "mlp", hidden=16).slots == "none"
    cfg = config_for_env(make_env("gpusched/JobSelect-v1", KW, "graph"), "gnn", hidden=16)
    from dataclasses import replace

    with pytest.raises(ValueError, match="slots='rules' reads the job rows"):
        ActionScorer(replace(cfg, encoder="mlp"), env.observation_space)


def test_a_large_rule_logit_starts_the_policy_as_the_first_rule():
    env = make_env("gpusched/JobSelect-v1", KW, "graph")
    cfg = config_for_env(env, "gnn", hidden=16)
    model = make_ppo(env, cfg, PPOArgs(encoder="gnn", hidden=16, rule_logit_init=40.0, device="cpu"))
    assert model.policy.action_net.bias[0].item() == 40.0
    assert model.policy.action_net.bias[1:].abs().max().item() == 0.0
    policy = PPOPolicy.from_sb3(model, cfg).eval()
    for seed in (0, 1):
        jct, actions = greedy(policy, env, seed)
        assert set(actions) == {0}
        assert jct == fresh_simulator(env, seed).run(make_policy("srtf", "closest"))["avg_jct"]


def test_a_trained_rule_checkpoint_loads_and_the_leaderboard_gives_it_its_rules(tmp_path):
    from gpusched_lab.train.cli import app
    from typer.testing import CliRunner

    config = tmp_path / "rules.yaml"
    config.write_text(
        "env: gpusched/JobSelect-v1\n"
        f"env_kwargs: {json.dumps(KW)}\n"
        "steps: 128\nseed: 0\nnum_envs: 2\neval_every: 0\neval_seeds: [5]\ncheckpoint_every: 64\n"
        "args: {hidden: 16, n_steps: 32, batch_size: 32, n_epochs: 1, rule_logit_init: 40.0}\n"
    )
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["ppo", "--config", str(config), "--out", str(out)])
    assert result.exit_code == 0, result.output
    agent = resolve_agent(str(out / "checkpoint"))
    assert agent.env_overrides()["rules"] == RULES
    meta = json.loads((out / "checkpoint" / "meta.json").read_text())
    assert meta["network"]["slots"] == "rules" and meta["args"]["rule_logit_init"] == 40.0
    loaded = load(out / "checkpoint")
    env = loaded.make_env()
    assert env.unwrapped.rules == tuple(RULES)
    env.reset(seed=0)
    actions = []
    while True:
        actions.append(loaded(env))
        *_, terminated, truncated, info = env.step(actions[-1])
        if terminated or truncated:
            break
    assert set(actions) == {0}  # 128 steps do not move a 40-logit prior
    assert (
        info["metrics"]["avg_jct"] == fresh_simulator(env, 0).run(make_policy("srtf", "closest"))["avg_jct"]
    )
