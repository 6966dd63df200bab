"""HMARL's imitation warm start (DAgger towards a per-agent heuristic), the clairvoyant per-agent SJF heuristic, and
multi-agent scenarios on the leaderboard."""

from __future__ import annotations

import json

import numpy as np
import pytest
from gpusched_lab.agents.methods.hmarl.agent import (
    HMARLArgs,
    HMARLConfig,
    ImitationArgs,
    Trainer,
    collect_dagger,
    imitate,
    load,
    make_env,
    train,
)

from gpusched_envs.multi_agent import multi_scheduler_v1
from gpusched_envs.multi_agent.multi_scheduler import HeuristicMultiAgent
from gpusched_envs.policies import make_policy
from gpusched_envs.sim import Simulator
from tests.toy import make_workload
from tests.toy import play_marl as play

SMALL = dict(num_agents=2, cluster="tiny", num_jobs=16, heads=2, information="clairvoyant")


def test_heuristic_names_round_trip_and_bad_names_fail():
    h = HeuristicMultiAgent.from_name("sjf-consolidate+backfill")
    assert (h.order, h.placement, h.backfill, h.name) == (
        "sjf",
        "consolidate",
        True,
        "sjf-consolidate+backfill",
    )
    assert HeuristicMultiAgent.from_name("fifo-closest").backfill is False
    h = HeuristicMultiAgent.from_name("srtf-consolidate+backfill+preempt")
    assert (h.order, h.backfill, h.preempt, h.clairvoyant) == ("srtf", True, True, True)
    assert HeuristicMultiAgent.from_name(h.name).name == h.name == "srtf-consolidate+backfill+preempt"
    assert HeuristicMultiAgent.from_name("tiresias-closest+preempt").clairvoyant is False
    for bad in (
        "lifo-closest",
        "sjf-teleport",
        "fifo-closest+migrate",
        "sjf",
        "fifo-closest+backfill+backfill",
    ):
        with pytest.raises(ValueError, match="ORDER-PLACEMENT"):
            HeuristicMultiAgent.from_name(bad)


def test_one_agent_sjf_with_all_jobs_as_heads_equals_the_sjf_scheduler():
    """With one agent whose heads cover its whole queue, per-agent SJF + backfill is the single SJF scheduler."""
    rows = [(0, 900, 8), (0, 300, 4), (0, 600, 8), (50, 100, 4), (60, 200, 16), (70, 400, 2)]
    workload = make_workload(rows, model_names=("resnet50",))
    env = multi_scheduler_v1.parallel_env(
        num_agents=1, cluster="tiny", workload=workload, heads=6, window=6, routing="round_robin"
    )
    multi = play(env, 0, HeuristicMultiAgent("consolidate", backfill=True, order="sjf"))
    single = Simulator(env.cluster, workload, env.sim.config).run(make_policy("sjf", "consolidate"))
    assert multi == single
    # three whole-cluster jobs at t=0, one at a time: SJF finishes them shortest first, FIFO in arrival order
    env = multi_scheduler_v1.parallel_env(
        num_agents=1,
        cluster="tiny",
        workload=make_workload([(0, 900, 16), (0, 300, 16), (0, 600, 16)], model_names=("resnet50",)),
        heads=3,
        routing="round_robin",
    )
    sjf = play(env, 0, HeuristicMultiAgent.from_name("sjf-consolidate+backfill"))
    assert np.argsort(env.sim.finish_time).tolist() == [1, 2, 0]
    fifo = play(env, 0, HeuristicMultiAgent.from_name("fifo-consolidate+backfill"))
    assert np.argsort(env.sim.finish_time).tolist() == [0, 1, 2]
    assert sjf["avg_jct"] < fifo["avg_jct"]


def test_dagger_labels_are_the_expert_actions():
    """Round 0 (beta = 1) follows the expert: the labels are exactly the actions the expert takes in its own
    episode, agent by agent, wherever an agent has more than one valid action."""
    expert = HeuristicMultiAgent.from_name("sjf-consolidate+backfill")
    trainer = Trainer(SMALL, HMARLArgs(hidden=8, num_envs=1, seed=0))
    data: dict = {}
    ep = collect_dagger(trainer, expert, seed=7, beta=1.0, max_steps=1000, data=data)
    env = make_env(SMALL)
    obs, _ = env.reset(seed=7)
    want, infos = [], {}
    while env.agents:
        acts = expert(env, obs)
        want += [acts[a] for a in env.possible_agents if obs[a]["action_mask"].sum() > 1]
        obs, _, _, _, infos = env.step(acts)
    assert data["action"] == want and len(want) > 5
    assert ep["avg_jct"] == infos["scheduler_0"]["metrics"]["avg_jct"]
    assert len(data["state"]) == len(data["return"]) == len(want)
    assert all(m[a] for m, a in zip(data["obs"]["action_mask"], data["action"], strict=True))


def test_imitation_raises_agreement_with_the_expert():
    kw = dict(
        num_agents=2,
        cluster="datacenter:racks=2,servers=2,gpus=4",
        workload="philly-windows:first=20,last=80,jobs=30,load=1.0",
        heads=3,
        information="clairvoyant",
    )
    args = ImitationArgs(expert="sjf-consolidate+backfill", rounds=3, episodes=2, epochs=8, batch_size=64)
    trainer = Trainer(kw, HMARLArgs(hidden=16, num_envs=1, seed=0))
    expert = HeuristicMultiAgent.from_name(args.expert)

    def agreement():  # the actor's own episode (beta = 0), labelled by the expert
        return np.mean([collect_dagger(trainer, expert, s, 0.0, 1000, {})["agreement"] for s in (101, 102)])

    before = agreement()
    history = imitate(trainer, args, seed=0)
    after = agreement()
    assert [h["round"] for h in history] == [0, 1, 2]
    assert history[-1]["samples"] > history[0]["samples"]
    assert after > before + 0.1 and after > 0.75  # measured: 0.65 -> 0.85


def test_imitation_overrides():
    from gpusched_lab.agents.methods.hmarl.agent import apply_overrides, load_config

    cfg = load_config("hmarl")
    assert cfg.imitation["expert"] == "srtf-consolidate+backfill+preempt+coop"
    assert load_config("hmarl_nopreempt").imitation["expert"] == "sjf-consolidate+backfill"
    apply_overrides(cfg, ["imitation.rounds=2", "imitation.expert=fifo-closest+backfill"])
    assert ImitationArgs.from_dict(cfg.imitation).rounds == 2 and cfg.imitation["epochs"] == 6
    apply_overrides(cfg, ["imitation=null"])
    assert cfg.imitation is None


def test_imitation_args_fail_clearly():
    with pytest.raises(ValueError, match="imitation: unknown key"):
        ImitationArgs.from_dict({"expret": "x"})
    with pytest.raises(ValueError, match="imitation.rounds"):
        ImitationArgs.from_dict({"rounds": 0})
    with pytest.raises(ValueError, match="ORDER-PLACEMENT"):
        ImitationArgs.from_dict({"expert": "oracle"})


def test_train_with_imitation_saves_the_warm_start_and_resumes_past_it(tmp_path):
    cfg = HMARLConfig(
        env_kwargs=SMALL,
        steps=32,
        eval_seeds=[5],
        imitation=dict(rounds=1, episodes=1, epochs=1),
        args=dict(hidden=8, num_envs=2, n_steps=16, batch_size=32, n_epochs=1),
    )
    lines: list[str] = []
    result = train(cfg, tmp_path, log=lines.append)
    assert result["steps"] == 32
    assert len(json.loads((tmp_path / "imitation.json").read_text())) == 1
    assert load(tmp_path / "imitation").meta["evaluation"]["stage"] == "imitation"
    assert any(line.startswith("after imitation") for line in lines)
    cfg.steps = 64
    lines.clear()
    again = train(cfg, tmp_path, resume=True, log=lines.append)
    assert again["steps"] == 64
    assert not any(line.startswith("imitation") for line in lines)  # the warm start is not redone


def test_leaderboard_runs_a_tiny_multi_agent_cell(tmp_path):
    """A multi-agent scenario in a suite: per-agent heuristics and an HMARL checkpoint act in the PettingZoo env,
    the merged-queue heuristics on the same workload; single-agent checkpoints are skipped."""
    from gpusched_lab.evaluate.runner import run_grid
    from gpusched_lab.evaluate.scenarios import MARL_ENV_ID, Scenario, load_suite

    assert "dc4-multi-agent" in load_suite("standard").names()
    scenario = Scenario(
        name="tiny-marl",
        env_id=MARL_ENV_ID,
        env_kwargs=dict(num_agents=2, cluster="tiny", num_jobs=10, heads=2, obs_mode="graph"),
        seeds=(0,),
    )
    ckpt = tmp_path / "hm"
    train(
        HMARLConfig(env_kwargs=SMALL, steps=16, eval_seeds=[5], args=dict(hidden=8, num_envs=1, n_steps=16)),
        ckpt,
        log=lambda *_: None,
    )
    specs = ["marl-fifo-consolidate+backfill", "fifo", str(ckpt / "best"), "checkpoints/ppo_jobselect_gnn"]
    res = run_grid([scenario], specs, tmp_path / "lb", progress=False)
    assert not res.failed
    got = {c["agent"]: c["metrics"] for c in res.cells}
    assert set(got) == {"marl-fifo-consolidate+backfill", "fifo+closest", "ckpt:best"}
    assert all(m["jobs"] == 10 for m in got.values())
    assert [s[1] for s in res.skipped] == ["ckpt:ppo_jobselect_gnn"]
    # the per-agent FIFO cell equals the same heuristic run directly in the env
    env = make_env(dict(num_agents=2, cluster="tiny", num_jobs=10, heads=2))
    direct = play(env, 0, HeuristicMultiAgent("consolidate", backfill=True))
    assert got["marl-fifo-consolidate+backfill"]["avg_jct"] == direct["avg_jct"]
