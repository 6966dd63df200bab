"""``python -m gpusched_lab.train compare``: heuristics of the agent's information class, paired differences, ``--env-kwargs``
(a GNN checkpoint on a cluster it was not trained on) and ``--suite``."""

from __future__ import annotations

import json

import pytest
import torch
from gpusched_lab.agents import checkpoint as ckpt
from gpusched_lab.agents.common import make_env
from gpusched_lab.agents.nets.networks import build_network, config_for_env
from gpusched_lab.evaluate.compare import (
    compare,
    heuristics_for,
    information_of,
    markdown_table,
    scenario_kwargs,
    summarize_by_scenario,
    summarize_pairs,
)
from gpusched_lab.train.cli import app
from typer.testing import CliRunner

TINY = {"cluster": "tiny", "num_jobs": 10, "load": 0.9, "information": "non-clairvoyant", "preemption": True}


def test_summarize_pairs_exact_paired_differences():
    rows = [{"agent": 10.0, "fifo": 20.0}, {"agent": 30.0, "fifo": 20.0}, {"agent": 5.0, "fifo": 35.0}]
    s = summarize_pairs(rows, ("fifo",))
    assert s["agent"]["mean"] == 15.0 and s["fifo"]["mean"] == 25.0
    d = s["agent_minus_fifo"]
    assert d["mean"] == -10.0 and d["relative"] == -0.4 and d["pairs"] == 3 and d["agent_better_in"] == 2
    assert d["ci95"][0] <= -10.0 <= d["ci95"][1]


def test_summarize_by_scenario_averages_seeds_before_resampling_windows():
    rows = [
        {"scenario": "a", "agent": 10.0, "las": 20.0},
        {"scenario": "a", "agent": 30.0, "las": 40.0},  # window a: -10 on average, las 30
        {"scenario": "b", "agent": 50.0, "las": 40.0},  # window b: +10, las 40
        {"scenario": "c", "agent": 0.0, "las": 30.0},  # window c: -30, las 30
    ]
    d = summarize_by_scenario(rows, ("las",))["agent_minus_las"]
    assert d["mean"] == pytest.approx(-10.0) and d["scenarios"] == 3 and d["agent_better_in"] == 2
    assert d["relative"] == pytest.approx(-10.0 / (100.0 / 3))
    assert d["ci95"][0] <= -10.0 <= d["ci95"][1]
    result = {
        "information": "non-clairvoyant",
        "rows": rows,
        "scenarios": [{"name": n} for n in "abc"],
        "summary": summarize_pairs(rows, ("las",)),
        "summary_by_scenario": {"agent_minus_las": d},
    }
    assert "| las | -10 [" in markdown_table(result) and "2/3 |" in markdown_table(result)


def test_heuristics_follow_the_information_class():
    assert set(heuristics_for("non-clairvoyant")) == {"fifo", "gandiva", "tiresias", "las"}
    assert set(heuristics_for("clairvoyant")) == {"fifo", "gandiva", "tiresias", "las", "sjf", "srtf"}
    assert information_of({"information": "non-clairvoyant", "env_kwargs": {}}) == "non-clairvoyant"
    assert (
        information_of({"env_kwargs": {}}) == "clairvoyant"
    )  # saved before the setting existed: saw durations


def test_scenario_kwargs_keep_what_defines_the_policy():
    meta = {
        "env_kwargs": {"cluster": "topdrl", "window": 16, "placement": "closest", "preemption": True},
        "information": "non-clairvoyant",
        "network": {"encoder": "cnn"},
    }
    out = scenario_kwargs(
        meta, {"cluster": "hetero64", "window": 8, "placement": "pack", "preemption": False}
    )
    assert out == {
        "cluster": "hetero64",
        "window": 16,
        "placement": "closest",
        "preemption": True,
        "information": "non-clairvoyant",
    }
    meta["network"]["encoder"] = "gnn"  # the GNN reads any window
    assert scenario_kwargs(meta, {"window": 8})["window"] == 8


@pytest.fixture(scope="module")
def gnn_checkpoint(tmp_path_factory):
    """An untrained GNN policy on tiny (non-clairvoyant, with preemption), saved like a trained one."""
    path = tmp_path_factory.mktemp("ckpt") / "gnn"
    env = make_env("gpusched/JobSelect-v1", TINY, "graph")
    cfg = config_for_env(env, "gnn", hidden=8)
    torch.manual_seed(0)
    net = build_network(cfg, env.observation_space)
    ckpt.save(
        path,
        net,
        algorithm="ddqn",
        policy="q",
        env_id="gpusched/JobSelect-v1",
        env_kwargs={**TINY, "obs_mode": "graph"},
        obs_mode="graph",
        network=cfg,
        steps=0,
        seed=0,
    )
    return path


def test_compare_a_gnn_checkpoint_on_another_cluster(gnn_checkpoint):
    assert json.loads((gnn_checkpoint / "meta.json").read_text())["information"] == "non-clairvoyant"
    result = compare(gnn_checkpoint, [0, 1], env_kwargs={"cluster": "topdrl", "num_jobs": 12})
    assert result["information"] == "non-clairvoyant"
    assert result["scenarios"][0]["env_kwargs"]["cluster"] == "topdrl"
    assert [r["seed"] for r in result["rows"]] == [0, 1]
    assert set(result["rows"][0]) == {
        "scenario",
        "seed",
        "agent",
        "fifo",
        "gandiva",
        "tiresias",
        "las",
        "fifo+backfill",
        "random-masked",
        "tiresias@env",
        "las@env",
    }
    # Tiresias through the agent's env (its window holds every job, no lease, no rounds) is Simulator.run's
    assert all(r["tiresias@env"] == pytest.approx(r["tiresias"], rel=1e-9) for r in result["rows"])
    assert all(r["las@env"] == pytest.approx(r["las"], rel=1e-9) for r in result["rows"])
    assert "agent_minus_tiresias@env" in result["summary"]
    assert compare(
        gnn_checkpoint, [0], env_kwargs={"cluster": "topdrl", "num_jobs": 12}, in_env_references=False
    )["rows"][0].keys() == {
        "scenario",
        "seed",
        "agent",
        "fifo",
        "gandiva",
        "tiresias",
        "las",
        "fifo+backfill",
        "random-masked",
    }
    # the masked random policy acts through the env: a real episode
    assert all(r["random-masked"] > 0 for r in result["rows"])
    assert all(r["agent"] > 0 and r["tiresias"] > 0 for r in result["rows"])
    # the heuristic figures are those of the same workload replayed by the simulator
    from gpusched_lab.agents.common import fresh_simulator

    from gpusched_envs.policies import make_policy

    env = make_env("gpusched/JobSelect-v1", result["scenarios"][0]["env_kwargs"], "graph")
    expected = fresh_simulator(env, 1).run(make_policy("tiresias", "closest"))["avg_jct"]
    assert result["rows"][1]["tiresias"] == pytest.approx(expected)
    from gpusched_envs.policies.schedulers import FIFO

    expected = fresh_simulator(env, 1).run(FIFO("closest", backfill=True))["avg_jct"]
    assert result["rows"][1]["fifo+backfill"] == pytest.approx(expected)


def test_compare_plays_the_agent_seeds_in_lockstep_with_the_figures_of_one_at_a_time(
    gnn_checkpoint, monkeypatch
):
    """Several seeds run in lockstep with one batched forward per step; the average JCTs equal those of each seed's
    episode played alone with ``act``, and a batch is what the agent is asked for."""
    from gpusched_lab import agents
    from gpusched_lab.agents.common import run_episode
    from gpusched_lab.evaluate import compare as compare_mod

    kwargs = {"cluster": "topdrl", "num_jobs": 12}
    agent = agents.load(gnn_checkpoint)
    batches = []
    real = type(agent).act_many

    def counting(self, observations):
        batches.append(len(observations))
        return real(self, observations)

    monkeypatch.setattr(type(agent), "act_many", counting)
    env = make_env("gpusched/JobSelect-v1", compare_mod.scenario_kwargs(agent.meta, kwargs), agent.obs_mode)
    lockstep = compare_mod.agent_avg_jcts(
        agent, env, compare_mod.scenario_kwargs(agent.meta, kwargs), [0, 1, 2]
    )
    assert batches and batches[0] == 3
    alone = [float(run_episode(agent.act, env, s)["metrics"]["avg_jct"]) for s in (0, 1, 2)]
    assert lockstep == alone
    assert len(set(alone)) > 1  # the seeds are different episodes
    rows = compare(gnn_checkpoint, [0, 1, 2], env_kwargs=kwargs, heuristics=["fifo"])["rows"]
    assert [r["agent"] for r in rows] == alone


def test_compare_cli_env_kwargs_and_errors(gnn_checkpoint, tmp_path):
    runner = CliRunner()
    out = tmp_path / "r.json"
    res = runner.invoke(
        app,
        [
            "compare",
            str(gnn_checkpoint),
            "--num-seeds",
            "1",
            "--env-kwargs",
            '{"num_jobs": 8}',
            "--out",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "tiresias" in res.output and "sjf" not in res.output
    assert json.loads(out.read_text())["rows"][0]["seed"] == 20_000
    bad = runner.invoke(app, ["compare", str(gnn_checkpoint), "--env-kwargs", "{not json"])
    assert bad.exit_code == 2 and "--env-kwargs is not valid JSON" in bad.output
    both = runner.invoke(app, ["compare", str(gnn_checkpoint), "--env-kwargs", "{}", "--suite", "quick"])
    assert both.exit_code == 2 and "not both" in both.output


def test_suite_scenarios_read_the_heldout_family_as_data():
    from gpusched_lab.evaluate.compare import suite_scenarios

    rows = suite_scenarios("philly_heldout")
    assert len(rows) == 14 and all(env_id == "gpusched/JobSelect-v1" for _, env_id, _ in rows)
    starts = [kw["workload"].split("start=")[1][:10] for _, _, kw in rows]
    assert all(s >= "2017-11-01" for s in starts)  # held out: nothing submitted before 2017-11-01
    assert sum("jobs=1000" in kw["workload"] for _, _, kw in rows) == 4
    with pytest.raises(ValueError, match="neither a file nor a suite"):
        suite_scenarios("no_such_suite")


def test_a_workerplacement_checkpoint_meets_the_placement_rules_of_its_class(tmp_path):
    """A WorkerPlacement agent is compared with FIFO-with-backfill under each placement rule (the env's head rule)
    and Tiresias; each rule's figure is what the env's heuristic_action scores playing that rule."""
    from gpusched_lab.evaluate.compare import PLACEMENT_HEURISTICS

    kwargs = {"cluster": "tiny", "num_jobs": 10, "load": 0.9, "obs_mode": "flat"}
    env = make_env("gpusched/WorkerPlacement-v1", kwargs, "flat")
    cfg = config_for_env(env, "mlp", hidden=8)
    torch.manual_seed(0)
    ckpt.save(
        tmp_path / "wp",
        build_network(cfg, env.observation_space),
        algorithm="ddqn",
        policy="q",
        env_id="gpusched/WorkerPlacement-v1",
        env_kwargs=kwargs,
        obs_mode="flat",
        network=cfg,
        steps=0,
        seed=0,
    )
    result = compare(tmp_path / "wp", [3])
    row = result["rows"][0]
    assert set(row) == {"scenario", "seed", "agent", *PLACEMENT_HEURISTICS, "tiresias"}
    obs, _ = env.reset(seed=3)
    while True:
        obs, _, terminated, truncated, info = env.step(env.unwrapped.heuristic_action("consolidate"))
        if terminated or truncated:
            break
    assert row["consolidate"] == info["metrics"]["avg_jct"]
