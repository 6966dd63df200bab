"""The checkpoints shipped in checkpoints/ load (weights only), stay small and act validly on their own env."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import agents
from agents.checkpoint import CheckpointMismatchError

ROOT = Path(__file__).resolve().parents[2] / "checkpoints"
SHIPPED = sorted(p.parent for p in ROOT.glob("*/meta.json"))


def test_the_three_checkpoints_are_shipped():
    names = {p.name for p in SHIPPED}
    assert {"topdrl_jobselect_cnn", "ppo_jobselect_gnn", "ddqn_workerplacement_gnn"} <= names


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_checkpoint_loads_and_acts(path):
    assert (path / "model.pt").stat().st_size <= 5 * 2**20
    torch.load(path / "model.pt", weights_only=True)
    meta = json.loads((path / "meta.json").read_text())
    assert meta["command"].startswith("python -m train") and meta["evaluation"]["avg_jct"] > 0
    agent = agents.load(path)
    env = agent.make_env(num_jobs=8)  # the same layout, a short episode
    obs, _ = env.reset(seed=0)
    for _ in range(10):
        a = agent.act(obs)
        assert obs["action_mask"][a]
        obs, _, terminated, truncated, _ = env.step(a)
        if terminated or truncated:
            break
    other = "image" if meta["obs_mode"] != "image" else "graph"
    with pytest.raises(CheckpointMismatchError):
        agents.load(path, obs_mode=other)
