"""The checkpoints shipped in checkpoints/ load (weights only), stay small and act validly on their own env."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from gpusched_lab import agents
from gpusched_lab.agents.checkpoint import CheckpointMismatchError, scorer_of

ROOT = Path(__file__).resolve().parents[2] / "checkpoints"
# single-agent policies (agents.load); the multi-agent HMARL actors and the interference model load through
# agents.methods.hmarl.agent / agents.methods.hmarl.interference (tested below)
# checkpoints with loaders and tests of their own: the DAG plan generators (agents.methods.worl_rtgs.planner) and
# MetaPlace's (agents.methods.metaplace.agent)
OWN_LOADER = ("ddqn_dagschedule_gnn", "ppo_dagschedule_gnn", "workerplacement_gnn", "multitask_gnn")
ALL_META = {
    p.parent: json.loads(p.read_text()) for p in ROOT.glob("*/meta.json") if p.parent.name not in OWN_LOADER
}
SHIPPED = sorted(p for p, m in ALL_META.items() if str(m.get("env_id", "")).startswith("gpusched/"))
HMARL_SHIPPED = sorted(p for p, m in ALL_META.items() if m.get("algorithm") in ("hmarl", "hmarl-independent"))


def test_the_three_checkpoints_are_shipped():
    names = {p.name for p in SHIPPED}
    assert {"topdrl_jobselect_cnn", "ppo_jobselect_gnn", "ddqn_workerplacement_gnn"} <= names


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_checkpoint_loads_and_acts(path):
    assert (path / "model.pt").stat().st_size <= 5 * 2**20
    torch.load(path / "model.pt", weights_only=True)
    meta = json.loads((path / "meta.json").read_text())
    assert meta["command"].startswith("gpusched train ") and meta["evaluation"]["avg_jct"] > 0
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


def _is_cluster_gnn(path) -> bool:
    """A single-agent GNN policy of JobSelect or WorkerPlacement (other folders have formats of their own)."""
    meta = ALL_META[path]
    return (meta.get("network") or {}).get("encoder") == "gnn" and meta.get("env_id") in (
        "gpusched/JobSelect-v1",
        "gpusched/WorkerPlacement-v1",
    )


GNN_SHIPPED = [p for p in SHIPPED if _is_cluster_gnn(p)]
RACKS16 = """name: racks16
description: 16 racks x 2 servers x 4 GPUs
racks:
  - count: 16
    oversubscription: 2.0
    servers:
      - {count: 2, gpus: 4, gpu_type: V100, intra_link: pcie3, nic: eth25}
"""


@pytest.mark.parametrize("path", GNN_SHIPPED, ids=lambda p: p.name)
def test_shipped_gnn_checkpoint_runs_on_presets_it_was_not_trained_on(path, tmp_path):
    """The GNN is size-agnostic: each shipped GNN checkpoint loads with the default (dense) encoder for hetero64 and
    for a 16-rack cluster (both unlike its training cluster) and acts validly there."""
    meta = json.loads((path / "meta.json").read_text())
    (tmp_path / "racks16.yaml").write_text(RACKS16)
    for cluster in ("hetero64", str(tmp_path / "racks16.yaml")):
        assert cluster != meta["env_kwargs"]["cluster"]
        env = agents.load(path).make_env(cluster=cluster, num_jobs=10)
        agent = agents.load(path, env=env)
        assert scorer_of(agent.module).encoder.impl == "dense"
        obs, _ = env.reset(seed=0)
        for _ in range(12):
            a = agent.act(obs)
            assert obs["action_mask"][a]
            obs, _, terminated, truncated, _ = env.step(a)
            if terminated or truncated:
                break


@pytest.mark.parametrize("path", HMARL_SHIPPED, ids=lambda p: p.name)
def test_shipped_hmarl_checkpoint_loads_and_acts(path):
    from gpusched_lab.agents.methods.hmarl import agent as hmarl

    policy = hmarl.load(path)
    env = hmarl.make_env({**policy.meta["env_kwargs"], "num_jobs": 8})
    result = hmarl.run_episode(env, policy, seed=0)
    assert result["steps"] > 0 and result["metrics"]["avg_jct"] > 0


def test_hmarl_interference_path_must_stay_inside_the_repository(tmp_path):
    import shutil

    from gpusched_lab.agents.methods.hmarl import agent as hmarl

    src = next(iter(HMARL_SHIPPED))
    bad = tmp_path / "ckpt"
    shutil.copytree(src, bad)
    meta = json.loads((bad / "meta.json").read_text())
    meta.setdefault("args", {})["interference_model"] = "/etc"
    (bad / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="interference_model"):
        hmarl.load(bad)
