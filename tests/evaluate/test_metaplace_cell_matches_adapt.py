"""MetaPlace in the leaderboard: its checkpoint runs as `gpusched adapt` evaluates it at K = 0 (GNN logits
minus w × the performance model's cautious score), not as the GNN logits alone; the `checkpoints` group lists it."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest
import torch
from gpusched_lab.evaluate.agents import (
    _LOADED,
    AgentSpecError,
    CheckpointEvalAgent,
    MetaPlaceEvalAgent,
    expand_agent_specs,
    resolve_agent,
    shipped_checkpoints,
)
from gpusched_lab.evaluate.runner import run_cell
from gpusched_lab.evaluate.scenarios import Scenario

ROOT = Path(__file__).resolve().parents[2]
METAPLACE = ROOT / "checkpoints" / "workerplacement_gnn"
MULTITASK = ROOT / "checkpoints" / "multitask_gnn"


def _heldout(i: int):
    """Held-out task ``i`` of `gpusched adapt` (the checkpoint's task seed, 30 jobs), and a leaderboard scenario
    that builds the same env: the task's cluster scaled by its interference factor and its workload spec."""
    from gpusched_lab.agents.methods.metaplace.agent import MetaArgs, load_meta

    from gpusched_envs.envs.placement_tasks import heldout_tasks

    _, _, meta = load_meta(METAPLACE)
    args = MetaArgs(**{k: v for k, v in meta["args"].items() if k in MetaArgs.__dataclass_fields__})
    task = heldout_tasks(i + 1, args.task_seed, args.num_jobs, (args.cluster,))[i]
    kwargs = {
        "cluster": task.cluster,
        "interference_scale": task.interference,
        "workload": task.workload_spec(32),  # TopDRL: 32 GPUs
        "num_jobs": task.num_jobs,
    }
    return args, task, Scenario(f"heldout-{i}", "gpusched/WorkerPlacement-v1", kwargs, (0,))


@pytest.mark.parametrize("i,seed", [(0, 7), (2, 11)])
def test_leaderboard_cell_equals_adapt_k0_figure(i, seed):
    from gpusched_lab.agents.methods.metaplace.agent import load_meta, make_env
    from gpusched_lab.evaluate.adapt import _greedy_jct

    args, task, scenario = _heldout(i)
    policy, perf, _ = load_meta(METAPLACE)
    env = make_env(args)
    try:
        want = _greedy_jct(
            policy, env, task, [seed], perf, args.caution
        )  # adapt's K = 0 figure, one workload
    finally:
        env.close()
    cell = run_cell(scenario.to_dict(), str(METAPLACE), seed)
    assert "error" not in cell, cell
    assert cell["metrics"]["avg_jct"] == want
    assert cell["metrics"]["invalid_actions"] == 0 and cell["metrics"]["steps"] > 0
    assert len(cell["jct_quantiles"]) == 101


def test_without_the_model_score_it_is_the_plain_checkpoint(monkeypatch):
    """w = 0: every metric (return, steps, JCTs) equals `agents.load`'s greedy policy in `run_act_episode`; with
    the shipped w the model score changes the placements."""
    _, _, scenario = _heldout(0)
    agent = resolve_agent(str(METAPLACE))
    assert isinstance(agent, MetaPlaceEvalAgent) and agent.kind == "metaplace"
    plain = CheckpointEvalAgent(METAPLACE)
    policy, perf = agent.policy()
    assert float(policy.model_weight.detach()) != 0.0
    logits_only = plain.run_episode(scenario, 5)
    assert agent.run_episode(scenario, 5)["avg_jct"] != logits_only["avg_jct"]

    off = copy.deepcopy(policy)
    with torch.no_grad():
        off.model_weight.fill_(0.0)
    monkeypatch.setitem(_LOADED, f"metaplace:{agent.folder}", (off, perf))
    assert agent.run_episode(scenario, 5) == logits_only


def test_checkpoints_group_lists_metaplace_not_the_multitask_baseline():
    listed = shipped_checkpoints()
    assert str(METAPLACE) in listed and str(MULTITASK) not in listed
    assert str(METAPLACE) in expand_agent_specs("checkpoints") and str(METAPLACE) in expand_agent_specs(None)
    agent = resolve_agent(str(METAPLACE))
    assert agent.name == "metaplace:workerplacement_gnn" and agent.caution == 1.0
    assert agent.identity()["kind"] == "metaplace"
    assert agent.identity_hash() != CheckpointEvalAgent(METAPLACE).identity_hash()
    job_select = Scenario("js", "gpusched/JobSelect-v1", {"cluster": "topdrl"}, (0,))
    assert agent.applies_to(job_select) == "trained on gpusched/WorkerPlacement-v1"
    assert agent.applies_to(_heldout(0)[2]) is None


def test_missing_performance_model_is_one_clear_error(tmp_path):
    folder = tmp_path / "mp"
    shutil.copytree(METAPLACE, folder)
    (folder / "perf_model.pt").unlink()
    with pytest.raises(AgentSpecError, match=r"mp: a MetaPlace checkpoint without perf_model\.pt"):
        resolve_agent(str(folder))
