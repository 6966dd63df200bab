"""WORL-RTGS pieces: SPD / FTG, the WORL hook, the DAG GNN with DDQN and PPO, the plan generator, and
``gpusched dag-bench``."""

from __future__ import annotations

import json

import numpy as np
import pytest
from gpusched_lab.agents.methods.worl_rtgs.agent import worl_rtgs
from gpusched_lab.agents.methods.worl_rtgs.metaheuristics import PlanSpace
from gpusched_lab.agents.methods.worl_rtgs.plan_metrics import (
    finish_time_gap,
    kendall_distance_to,
    scheduling_plan_distance,
    spd_matrix_to,
)
from gpusched_lab.agents.methods.worl_rtgs.woa import whale_optimization

from gpusched_envs.envs.dag_schedule import DAGScheduleEnv, ccr_at_gpus
from gpusched_envs.policies.dag import heft
from gpusched_envs.sim.dag_eval import PlanEvaluator, evaluate_plan, uniform_bandwidth
from gpusched_envs.workloads.dag import DAG, load_dag, random_layered_dag


def test_spd_and_ftg_hand_values():
    # GPUs differ on 1 of 3 tasks; orders 0,1,2 vs 0,2,1 disagree on 1 of 3 pairs -> SPD = (1/3 + 1/3) / 2
    assert spd_matrix_to([[0, 0, 1]], [[0, 1, 2]], [0, 1, 1], [0, 2, 1])[0] == pytest.approx(1 / 3)
    assert kendall_distance_to([[2, 1, 0]], [0, 1, 2])[0] == pytest.approx(1.0)
    assert spd_matrix_to([[1, 1, 0]], [[2, 1, 0]], [0, 0, 1], [0, 1, 2])[0] == pytest.approx(1.0)
    assert finish_time_gap(10.0, 12.0) == pytest.approx(0.2)
    np.testing.assert_allclose(finish_time_gap([12.0, 10.0], [10.0, 10.0]), [0.2, 0.0])
    dag = DAG(work=np.ones(3), edges=np.zeros((0, 2), dtype=np.int64), edge_bytes=np.zeros(0))
    ev = PlanEvaluator(dag, np.ones(2), uniform_bandwidth(2, 1.0))
    x = (np.array([0, 0, 1]), np.array([3.0, 2.0, 1.0]))  # order 0, 1, 2
    y = (np.array([0, 1, 1]), np.array([3.0, 1.0, 2.0]))  # order 0, 2, 1
    assert scheduling_plan_distance(ev, x, y) == pytest.approx(1 / 3)
    assert scheduling_plan_distance(ev, x, x) == 0.0


def _space(n=40, ccr=10.0, seed=0):
    env = DAGScheduleEnv("hetero64", "dag:random:n=4", gpus=8)
    dag = ccr_at_gpus(random_layered_dag(n, ccr=ccr, seed=seed), env.bandwidth)
    return dag, env, (lambda: PlanSpace(dag, env.speed, env.bandwidth, gpu_types=env.gpu_types))


def test_worl_rtgs_never_worse_than_its_seeds_and_strategy_acts():
    dag, env, space = _space()
    h = heft(dag, env.speed, env.bandwidth, gpu_types=env.gpu_types)
    h_ms = evaluate_plan(dag, env.speed, env.bandwidth, *h)
    res = worl_rtgs(space(), [h], population=20, iterations=15, injection_rate=0.1, seed=0)
    assert res.makespan <= h_ms + 1e-9  # the seed plan is in the population and the best is kept
    assert res.makespan == pytest.approx(evaluate_plan(dag, env.speed, env.bandwidth, *res.plan))
    assert res.stats["injected"] == 14 * 2  # round(0.1 * 20) whales per iteration after the first
    assert res.stats["steered"] > 0 and 0 <= res.stats["steer_kept"] <= res.stats["steered"]
    again = worl_rtgs(space(), [h], population=20, iterations=15, injection_rate=0.1, seed=0)
    assert again.makespan == res.makespan  # seeded
    plain = whale_optimization(space(), population=20, iterations=15, seed=0)
    assert res.makespan < plain.makespan  # seeded by a good plan, it beats WOA from random whales here


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_list_seeds_encode_exactly_and_make_searchers_never_worse_than_heft_or_cpop(seed):
    from gpusched_lab.agents.methods.worl_rtgs.metaheuristics import (
        genetic_algorithm,
        list_scheduling_plans,
        particle_swarm,
    )

    dag, env, space = _space(n=30, ccr=1.0, seed=seed)
    plans = list_scheduling_plans(dag, env.speed, env.bandwidth, gpu_types=env.gpu_types)
    direct = [evaluate_plan(dag, env.speed, env.bandwidth, *p) for p in plans]  # HEFT's, CPOP's makespans
    sp = space()
    keys = np.concatenate([sp.encode(*p) for p in plans])
    np.testing.assert_array_equal(sp.evaluate(keys), direct)  # random keys decode to the very same plans
    budget = {"population": 8, "iterations": 4, "seed": seed}
    res = worl_rtgs(space(), [], list_plans=plans, **budget)
    assert res.curve[0] == min(direct) and res.makespan <= min(direct)
    for search in (whale_optimization, genetic_algorithm, particle_swarm):
        assert search(space(), seeds=plans, **budget).curve[0] == min(direct)
    # the list plans come first: a full pool of planner plans cannot push them out of the initial population
    pool = [(np.zeros(dag.num_tasks, dtype=np.int64), np.arange(dag.num_tasks, dtype=float))] * 8
    assert worl_rtgs(space(), pool, list_plans=plans, **budget).curve[0] <= min(direct)


def test_dag_bench_seeded_agents_and_shared_greedy_plan():
    from gpusched_lab.evaluate.dag_bench import Instance, run_agent, run_bench

    res = run_bench(
        ["dag:random:n=10,ccr=1.0"],
        agents=["heft", "cpop", "woa", "woa+list", "ga+list", "pso+list"],
        seeds=2,
        population=6,
        iterations=3,
    )
    by = {s["agent"]: s for s in res["summary"]}
    best_list = min(by["heft"]["makespan_mean"], by["cpop"]["makespan_mean"])
    for a in ("woa+list", "ga+list", "pso+list"):
        assert by[a]["makespan_mean"] <= best_list + 1e-9
    env = DAGScheduleEnv("hetero64", "dag:random:n=4", gpus=8)
    inst = Instance("x", 0, random_layered_dag(6, seed=0), env, {"cluster": "hetero64", "gpus": 8})
    calls = []
    inst._planner_plans.clear()
    import gpusched_lab.evaluate.dag_bench as db

    class Fake:
        def plans(self, dag, *, seed, count, **kw):
            calls.append((seed, count))
            return [(np.zeros(dag.num_tasks, dtype=np.int64), np.arange(dag.num_tasks, dtype=float))] * count

    db._PLANNERS["ddqn"] = Fake()
    try:
        inst.args.update(checkpoints=None, temperature=0.5, planner_plans=1, population=4, iterations=2)
        for s in range(3):
            run_agent("ddqn", inst, s)
        inst.args["planner_plans"] = 2
        for s in range(2):
            run_agent("ddqn", inst, s)
    finally:
        db._PLANNERS.pop("ddqn")
    assert calls == [(0, 1), (0, 2), (1, 2)]  # one greedy rollout for all seeds; samples per seed


def _tiny_env(**kw):
    from gpusched_lab.agents.common import make_env

    kwargs = {
        "cluster": "hetero64",
        "gpus": 4,
        "dag": ["dag:random:n=8", "dag:tpch:q=9"],
        "max_tasks": 14,
        **kw,
    }
    return make_env("gpusched/DAGSchedule-v1", kwargs, "graph")


def test_dag_gnn_handles_any_dag_size_and_ddqn_ppo_train(tmp_path):
    import torch
    from gpusched_lab.agents.algos.ddqn import DDQN, DDQNArgs
    from gpusched_lab.agents.checkpoint import save
    from gpusched_lab.agents.methods.worl_rtgs.planner import PolicyPlanner
    from gpusched_lab.agents.nets.networks import build_network, config_for_env, obs_to_tensors

    env = _tiny_env()
    cfg = config_for_env(env, "gnn", hidden=16)
    assert cfg.slots == "dag"
    net = build_network(cfg, env.observation_space)
    obs, _ = env.reset(seed=0)
    assert net(obs_to_tensors(obs)).shape == (1, 4)
    big = DAGScheduleEnv("hetero64", "dag:random:n=30", gpus=6, obs_mode="graph")  # other DAG size, GPU count
    net_big = build_network(config_for_env(big, "gnn", hidden=16), big.observation_space)
    net_big.load_state_dict(net.state_dict())  # the same weights fit
    assert net_big(obs_to_tensors(big.reset(seed=0)[0])).shape == (1, 6)

    algo = DDQN(DDQNArgs(encoder="gnn", hidden=16, buffer_size=200, learning_starts=20, batch_size=8), [env])
    algo.learn(60)
    assert algo.updates > 0 and np.isfinite(algo.last_loss)
    save(
        tmp_path / "ddqn",
        algo.q,
        algorithm="ddqn",
        policy="q",
        env_id="gpusched/DAGSchedule-v1",
        env_kwargs={"cluster": "hetero64", "gpus": 4, "dag": "dag:random:n=8"},
        obs_mode="graph",
        network=algo.net_config,
        steps=60,
        seed=0,
    )
    planner = PolicyPlanner(tmp_path / "ddqn")
    dag = load_dag("dag:random:n=25", seed=3)
    plans = planner.plans(dag, gpus=6, count=3, seed=1)  # another size and GPU count than trained on
    assert len(plans) == 3
    env6 = DAGScheduleEnv("hetero64", dag, gpus=6)
    for a, p in plans:
        assert a.min() >= 0 and a.max() < 6
        assert np.isfinite(evaluate_plan(dag, env6.speed, env6.bandwidth, a, p))
    again = planner.plans(dag, gpus=6, count=3, seed=1)
    assert all(np.array_equal(x[0], y[0]) for x, y in zip(plans, again, strict=True))

    from gpusched_lab.agents.algos.ppo import PPOArgs, make_ppo

    torch.manual_seed(0)
    model = make_ppo(env, cfg, PPOArgs(encoder="gnn", hidden=16, n_steps=32, batch_size=16, n_epochs=1))
    model.learn(32)


def test_improve_mode_terminates_when_budget_is_spent():
    env = DAGScheduleEnv("hetero64", "dag:random:n=6", gpus=3, mode="improve", improve_steps=4)
    env.reset(seed=0)
    flags = [env.step(int(np.flatnonzero(env.action_masks())[0]))[2:4] for _ in range(4)]
    assert flags[:3] == [(False, False)] * 3 and flags[3] == (True, False)


def test_dag_bench_grid_json_and_errors(tmp_path):
    import typer
    from gpusched_lab.evaluate.dag_bench import dag_bench, run_bench
    from typer.testing import CliRunner

    res = run_bench(
        ["dag:random:n=8,ccr=1.0"],
        agents=["heft", "woa", "cpsat", "lower-bound"],
        seeds=2,
        population=8,
        iterations=5,
        time_limit=5.0,
    )
    by = {s["agent"]: s for s in res["summary"]}
    assert by["cpsat"]["makespan_mean"] <= by["heft"]["makespan_mean"] + 1e-9
    assert by["lower-bound"]["makespan_mean"] <= by["cpsat"]["makespan_mean"] + 1e-9
    assert by["heft"]["makespan_std_over_seeds"] == 0.0 and by["heft"]["runs"] == 2
    app = typer.Typer()
    app.command(name="dag-bench")(dag_bench)
    app.command(name="other")(lambda: None)
    out = tmp_path / "bench.json"
    args = [
        "dag-bench",
        "--dag",
        "dag:tpch:q=9,ccr=1.0",
        "--agents",
        "heft,random",
        "--num-seeds",
        "2",
        "--quiet",
    ]
    r = CliRunner().invoke(app, [*args, "--json", str(out)])
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    assert {s["agent"] for s in data["summary"]} == {"heft", "random"}
    assert (tmp_path / "bench.md").read_text().startswith("Makespan")
    bad = CliRunner().invoke(app, ["dag-bench", "--dag", "dag:random:n=8", "--agents", "heft,nope"])
    assert bad.exit_code == 2 and "unknown agent(s) nope" in bad.output
    bad = CliRunner().invoke(app, ["dag-bench", "--dag", "no/such/file.csv", "--agents", "heft"])
    assert bad.exit_code == 2 and "neither a 'dag:' spec nor an existing file" in bad.output


@pytest.mark.parametrize("name", ["ddqn_dagschedule_gnn", "ppo_dagschedule_gnn"])
def test_shipped_dag_planners_load_and_plan(name):
    from gpusched_lab.agents.methods.worl_rtgs.planner import SHIPPED, shipped_planner

    meta = json.loads((SHIPPED / name / "meta.json").read_text())
    assert (SHIPPED / name / "model.pt").stat().st_size <= 2 * 2**20
    assert meta["env_id"] == "gpusched/DAGSchedule-v1" and meta["obs_mode"] == "graph"
    assert meta["command"].startswith("python scripts/data/train_dag_planner.py")
    assert len(meta["evaluation"]["ratio_to_heft_per_seed"]) == 20
    planner = shipped_planner(name)
    dag = load_dag("dag:tpch:q=2,ccr=1.0")
    env = DAGScheduleEnv("hetero64", dag, gpus=8)
    (a, p), *_ = planner.plans(dag, count=1)
    assert len(a) == dag.num_tasks and np.isfinite(evaluate_plan(dag, env.speed, env.bandwidth, a, p))
