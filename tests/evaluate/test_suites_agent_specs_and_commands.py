"""Suites, agent resolution, checkpoints, the two commands and the documented snippet."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from gpusched_lab.evaluate.agents import (
    AgentSpecError,
    CheckpointEvalAgent,
    HeuristicEvalAgent,
    expand_agent_specs,
    resolve_agent,
    scenario_simulator,
)
from gpusched_lab.evaluate.cli import app
from gpusched_lab.evaluate.scenarios import Scenario, SuiteError, list_suites, load_suite, parse_seeds
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
TINY_KWARGS = {
    "cluster": "tiny",
    "workload": "synthetic:jobs=30,load=0.9,gpus=16,max_gpus=16",
    "obs_mode": "flat",
}
TINY = Scenario("tiny", "gpusched/JobSelect-v1", TINY_KWARGS, (0, 1))


def test_seed_ranges():
    assert parse_seeds("0-3") == (0, 1, 2, 3)
    assert parse_seeds("0-2,7, 9") == (0, 1, 2, 7, 9)
    assert parse_seeds([1, "3-4"]) == (1, 3, 4)
    assert parse_seeds(5) == (5,)
    for bad in ("a", "3-1", True, ""):
        with pytest.raises(SuiteError):
            parse_seeds(bad)


def test_bundled_suites_state_contention_and_build():
    assert {"quick", "standard", "full"} <= set(list_suites())
    quick = load_suite("quick")
    assert 3 <= len(quick.scenarios) <= 4
    for sc in quick.scenarios:
        assert len(sc.seeds) <= 5 and sc.offered_load is not None and sc.offered_load >= 0.8
        spec = sc.env_kwargs.get("workload")
        jobs = int(re.search(r"jobs=(\d+)", spec).group(1)) if spec else sc.env_kwargs["num_jobs"]
        assert jobs <= 300
        sc.make_env().close()
    for sc in load_suite("standard").scenarios:
        env = sc.make_env()
        env.reset(seed=sc.seeds[0])  # builds the workload and the simulator: every job fits its cluster
        env.close()
    for sc in load_suite("full").scenarios:
        assert sc.env_id.startswith("gpusched/")


def test_bad_suite_names_the_field(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("scenarios:\n  - name: x\n    env_kwargs: {}\n")
    with pytest.raises(SuiteError, match=r"bad.yaml: scenarios\[0\]: field 'env_id'"):
        load_suite(path)
    with pytest.raises(SuiteError, match="unknown suite"):
        load_suite("nope")


def test_agent_specs():
    assert resolve_agent("sjf").name == "sjf+closest"
    assert resolve_agent("gandiva").name == "gandiva+pack"
    assert resolve_agent("fifo+consolidate").placement == "consolidate"
    assert expand_agent_specs("heuristics,fifo")[:5] == ["fifo", "sjf", "srtf", "tiresias", "gandiva"]
    for bad in ("nosuch", "fifo+nowhere", "os:nothing_here", "no_such_module_xyz:make"):
        with pytest.raises(AgentSpecError):
            resolve_agent(bad)


def test_scheduler_and_env_paths_agree_for_fifo():
    """A heuristic runs on a fresh simulator of the scenario's workload; FIFO through the env (same placer) gives
    exactly the same metrics, so heuristics and learned agents are compared on the same jobs."""
    from gpusched_lab.evaluate.agents import run_act_episode

    from gpusched_envs.envs.adapters import HeuristicAgent
    from gpusched_envs.policies import make_policy

    for seed in TINY.seeds:
        direct = HeuristicEvalAgent("fifo", "closest").run_episode(TINY, seed)
        env = TINY.make_env()
        adapter = HeuristicAgent(make_policy("fifo", "closest"))
        via_env = run_act_episode(lambda obs, env=env, a=adapter: a(env), env, seed)
        for key in ("avg_jct", "p95_jct", "makespan", "gpu_utilisation", "jobs"):
            assert via_env[key] == direct[key]
        assert direct["jct_quantiles"] == via_env["jct_quantiles"]
    assert scenario_simulator(TINY, 0).now <= 0.0  # fresh: nothing processed yet


@pytest.fixture
def checkpoint(tmp_path):
    pytest.importorskip("torch")
    try:
        from gpusched_lab.agents.checkpoint import policy_module, save
        from gpusched_lab.agents.common import make_env
        from gpusched_lab.agents.nets.networks import config_for_env
    except ImportError as exc:
        pytest.skip(f"agents checkpoint API not available: {exc}")
    kwargs = {"cluster": "tiny", "obs_mode": "flat"}
    env = make_env("gpusched/JobSelect-v1", kwargs)
    cfg = config_for_env(env, "mlp")
    module = policy_module("q", cfg, env.observation_space)
    return save(
        tmp_path / "ckpt-mlp",
        module,
        algorithm="ddqn",
        policy="q",
        env_id="gpusched/JobSelect-v1",
        env_kwargs=kwargs,
        obs_mode="flat",
        network=cfg,
        steps=0,
        seed=0,
    )


def test_checkpoint_agent_runs_only_where_it_fits(checkpoint, tmp_path):
    agent = resolve_agent(str(checkpoint))
    assert isinstance(agent, CheckpointEvalAgent) and agent.name == "ckpt:ckpt-mlp"
    graph = Scenario("tiny-graph", "gpusched/JobSelect-v1", {**TINY_KWARGS, "obs_mode": "graph"}, (0,))
    assert agent.applies_to(graph) is None  # the checkpoint's obs_mode replaces the scenario's
    other = Scenario("topdrl", "gpusched/JobSelect-v1", {"cluster": "topdrl"}, (0,))
    assert "layout" in agent.applies_to(other)
    wp = Scenario("wp", "gpusched/WorkerPlacement-v1", {"cluster": "tiny"}, (0,))
    assert "trained on" in agent.applies_to(wp)
    metrics = agent.run_episode(TINY, 0)
    assert metrics["jobs"] == 30 and metrics["invalid_actions"] == 0


def test_a_checkpoint_trained_with_history_features_reads_them_on_every_scenario():
    # the runtime-history columns are part of the observation layout: the leaderboard turns them on for the agent
    agent = resolve_agent("checkpoints/ppo_jobselect_gnn_nc_wide")
    assert agent.env_overrides()["history_features"] is True
    philly = next(s for s in load_suite("quick").scenarios if s.name == "topdrl-philly")
    assert agent.applies_to(philly) is None
    env = philly.make_env(**agent.env_overrides())
    assert env.unwrapped.history_features
    env.close()


def test_evaluate_command_json(tmp_path):
    out = tmp_path / "one.json"
    result = CliRunner().invoke(
        app,
        [
            "evaluate",
            "--agent",
            "srtf",
            "--env",
            "gpusched/JobSelect-v1",
            "--env-kwargs",
            json.dumps(TINY_KWARGS),
            "--seeds",
            "0-2",
            "--json",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "avg_jct" in result.output
    doc = json.loads(out.read_text())
    assert doc["schema"] == "gpusched.evaluate/1" and doc["seeds"] == [0, 1, 2]
    assert [r["seed"] for r in doc["per_seed"]] == [0, 1, 2]
    for key in (
        "avg_jct",
        "p95_jct",
        "makespan",
        "gpu_utilisation",
        "communication_overhead",
        "offered_load",
    ):
        lo, hi = doc["ci95"][key]
        assert lo <= doc["mean"][key] <= hi
    bad = CliRunner().invoke(app, ["evaluate", "--agent", "nosuch", "--scenario", "topdrl-synthetic"])
    assert bad.exit_code == 2 and "unknown agent" in bad.output


def test_leaderboard_command(tmp_path):
    suite = tmp_path / "s.yaml"
    suite.write_text(
        json.dumps(
            {
                "name": "s",
                "scenarios": [
                    {
                        "name": "tiny",
                        "env_id": "gpusched/JobSelect-v1",
                        "seeds": "0-1",
                        "env_kwargs": TINY_KWARGS,
                    }
                ],
            }
        )
    )
    args = [
        "leaderboard",
        "--suite",
        str(suite),
        "--agents",
        "fifo,sjf",
        "--out",
        str(tmp_path / "o"),
        "--no-progress",
        "--no-plots",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "4 computed" in result.output and "sjf+closest" in result.output
    again = CliRunner().invoke(app, args)
    assert "0 computed, 4 cached" in again.output


def test_documented_snippet_runs(tmp_path):
    """README.md: the "own scheduler" file, under 20 lines of code, runs and is ranked."""
    text = (ROOT / "README.md").read_text()
    code = re.search(r"```python\n# my_scheduler.py\n(.*?)```", text, re.S).group(1)
    lines = [ln for ln in code.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    assert len(lines) < 20
    (tmp_path / "my_scheduler.py").write_text(code)
    proc = subprocess.run(
        [sys.executable, "my_scheduler.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    table = (tmp_path / "results" / "mine" / "leaderboard.md").read_text()
    assert "| shortest-remaining |" in table


def test_leaderboard_printout_lists_agents_of_other_envs_once_not_as_rows(capsys):
    """An agent that applies to no scenario of the suite (a DAG or multi-agent one in the `all` group) gets no row of
    n/a cells in the per-scenario table, but one mention below it."""
    from gpusched_lab.evaluate import cli

    stat = {"mean": 0.5, "low": 0.4, "high": 0.6}
    doc = {
        "suite": {"name": "t"},
        "scenarios": [
            {"name": "s1", "measured_offered_load": {"mean": 0.9}, "lower_bound_avg_jct": {"mean": 3600.0}}
        ],
        "aggregate": [{"rank": 1, "agent": "fifo", "scenarios": 1, "iqm_score": stat, "mean_rank": 1.0}],
        "agents": [{"name": "fifo"}, {"name": "dag-heft"}],
        "summary": [{"scenario": "s1", "agent": "fifo", "avg_jct": {"mean": 7200.0}, "rank": 1}],
    }
    cli.print_summary(doc)
    out = capsys.readouterr().out
    assert "2.00 (#1)" in out and "n/a" not in out
    assert "not applicable to any scenario of this suite (1): dag-heft" in out
    assert out.count("dag-heft") == 1


def test_heuristics_group_has_the_references_beside_fifo():
    from gpusched_lab.evaluate.agents import expand_agent_specs

    group = expand_agent_specs("heuristics")
    assert "fifo-backfill" in group and "random" in group


def test_fifo_backfill_is_fifo_with_backfill_on_the_same_workload():
    from gpusched_envs.policies.schedulers import FIFO
    from gpusched_envs.sim import Simulator

    agent = resolve_agent("fifo-backfill")
    env = TINY.make_env()
    env.reset(seed=1)
    sim = env.unwrapped.sim
    expected = Simulator(sim.cluster, sim.workload, sim.config).run(FIFO("closest", backfill=True))["avg_jct"]
    assert agent.run_episode(TINY, 1)["avg_jct"] == pytest.approx(expected, rel=1e-12)


def test_random_agent_takes_valid_actions_and_repeats_with_its_seed():
    agent = resolve_agent("random")
    a, b = agent.run_episode(TINY, 3), agent.run_episode(TINY, 3)
    assert a["invalid_actions"] == 0 and a["avg_jct"] == b["avg_jct"] and a["steps"] > 0
    assert agent.applies_to(Scenario("dag", "gpusched/DAGSchedule-v1", {}, (0,))) is not None
