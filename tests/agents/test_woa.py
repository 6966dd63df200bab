"""WOA, GA, PSO, random search, the analytic lower bound and CP-SAT over random-key DAG plans."""

from __future__ import annotations

import numpy as np
import pytest
from gpusched_lab.agents.methods.worl_rtgs.metaheuristics import (
    PlanSpace,
    cpsat_schedule,
    genetic_algorithm,
    lower_bound,
    particle_swarm,
    random_search,
)
from gpusched_lab.agents.methods.worl_rtgs.woa import WOAState, whale_optimization, woa_update

from gpusched_envs.policies.dag import cpop, heft, random_plans
from gpusched_envs.sim.dag_eval import evaluate_plan, evaluate_plans, uniform_bandwidth
from gpusched_envs.workloads.dag import random_layered_dag


def test_woa_update_matches_hand_computation():
    best = np.array([0.5, 0.5])
    x = np.array([[0.2, 0.8], [0.6, 0.4], [0.9, 0.1]])
    r1 = np.array([0.75, 1.0, 0.0])
    r2 = np.array([0.5, 0.25, 0.0])
    p = np.array([0.3, 0.1, 0.9])
    l = np.array([0.0, 0.0, 0.5])  # noqa: E741
    partner = np.array([0, 2, 0])
    got = woa_update(x, best, 1.0, r1, r2, p, l, partner, b=1.0)
    # whale 0: A = 0.5, C = 1, encircling: D = |best - x| = (0.3, 0.3); X' = best - 0.5 D = (0.35, 0.35)
    # whale 1: A = 1, C = 0.5, search around whale 2 (0.9, 0.1): D = |0.5 (0.9, 0.1) - (0.6, 0.4)| = (0.15, 0.35);
    #          X' = (0.9, 0.1) - D = (0.75, -0.25)
    # whale 2: spiral, l = 0.5: |best - x| = (0.4, 0.4); X' = 0.4 e^0.5 cos(pi) + 0.5 = 0.5 - 0.4 * 1.6487212707
    s = 0.5 - 0.4 * np.exp(0.5)
    np.testing.assert_allclose(got, [[0.35, 0.35], [0.75, -0.25], [s, s]], rtol=1e-12, atol=1e-12)


def _instance(n=20, g=4, seed=0, ccr=1.0):
    dag = random_layered_dag(n, ccr=ccr, seed=seed)
    speed = np.random.default_rng(seed).uniform(0.5, 2.0, g)
    return dag, speed, uniform_bandwidth(g, 1e10)


def test_plan_space_encode_decode_round_trip():
    dag, speed, bw = _instance(15, 3, seed=2)
    space = PlanSpace(dag, speed, bw)
    a, p = random_plans(dag, 3, 20, seed=1)
    x = space.encode(a, p)
    a2, p2 = space.decode(x)
    assert np.array_equal(a2, a)
    np.testing.assert_allclose(space.evaluate(x), evaluate_plans(dag, speed, bw, a, p))
    h = heft(dag, speed, bw)
    assert space.evaluate(space.encode(*h))[0] == pytest.approx(evaluate_plan(dag, speed, bw, *h))


def test_hook_can_add_and_replace_whales_and_search_is_deterministic():
    dag, speed, bw = _instance(20, 4, seed=1)
    calls = []

    def hook(state: WOAState) -> None:
        calls.append(len(state.x))
        if state.iteration == 1:
            state.add(np.full((2, state.space.dim), 0.5))
            state.replace(np.array([0]), np.full((1, state.space.dim), 0.25))
            assert np.all(state.x[0] == 0.25) and len(state.x) == 12

    r1 = whale_optimization(PlanSpace(dag, speed, bw), population=10, iterations=5, seed=3, hook=hook)
    assert calls == [10, 10, 12, 12, 12]
    r2 = whale_optimization(PlanSpace(dag, speed, bw), population=10, iterations=5, seed=3, hook=hook)
    assert r1.makespan == r2.makespan and np.array_equal(r1.assignment, r2.assignment)
    assert r1.makespan == pytest.approx(evaluate_plan(dag, speed, bw, *r1.plan))
    assert all(b <= a for a, b in zip(r1.curve, r1.curve[1:], strict=False))  # best-so-far never worsens


@pytest.mark.parametrize("search", [whale_optimization, genetic_algorithm, particle_swarm])
def test_searchers_beat_random_plans_on_the_same_budget(search):
    dag, speed, bw = _instance(30, 4, seed=4)
    res = search(PlanSpace(dag, speed, bw), population=30, iterations=30, seed=0)
    rnd = random_search(PlanSpace(dag, speed, bw), population=30, iterations=1, seed=0)
    assert res.makespan < rnd.makespan
    assert res.evaluations >= 28 * 30  # GA does not re-score its 2 elites


def test_lower_bound_below_every_plan():
    for seed in range(5):
        dag, speed, bw = _instance(25, 3, seed=seed, ccr=[0.1, 1.0, 10.0][seed % 3])
        lb = lower_bound(dag, speed, bw)
        a, p = random_plans(dag, 3, 200, seed=seed)
        assert lb <= evaluate_plans(dag, speed, bw, a, p).min() + 1e-9
        assert lb <= evaluate_plan(dag, speed, bw, *heft(dag, speed, bw)) + 1e-9


@pytest.mark.parametrize("seed", range(4))
def test_cpsat_never_above_any_heuristic_on_small_instances(seed):
    rng = np.random.default_rng(seed)
    n, g = int(rng.integers(6, 13)), int(rng.integers(2, 5))
    dag = random_layered_dag(n, ccr=[0.5, 2.0][seed % 2], seed=seed + 10)
    speed = rng.uniform(0.5, 2.0, g)
    bw = rng.uniform(5e9, 2e10, (g, g))
    np.fill_diagonal(bw, np.inf)
    space = PlanSpace(dag, speed, bw)
    heuristics = {
        "heft": evaluate_plan(dag, speed, bw, *heft(dag, speed, bw)),
        "cpop": evaluate_plan(dag, speed, bw, *cpop(dag, speed, bw)),
        "woa": whale_optimization(space, population=20, iterations=20, seed=seed).makespan,
        "ga": genetic_algorithm(space, population=20, iterations=20, seed=seed).makespan,
        "pso": particle_swarm(space, population=20, iterations=20, seed=seed).makespan,
        "random": random_search(space, population=50, iterations=1, seed=seed).makespan,
    }
    res = cpsat_schedule(dag, speed, bw, time_limit=10.0)  # no hints: CP-SAT on its own
    assert res.makespan == pytest.approx(evaluate_plan(dag, speed, bw, *res.plan))
    for name, ms in heuristics.items():
        assert res.makespan <= ms * (1 + 1e-9), (name, ms, res.makespan)
    assert lower_bound(dag, speed, bw) <= res.lower_bound + 1e-12 <= res.makespan + 1e-9
    if (
        res.optimal
    ):  # proven: the bound is within the rounding (2N units of 1e-4 x the best hint) of the makespan
        unit = 1e-4 * min(heuristics["heft"], heuristics["cpop"])
        assert res.makespan - res.lower_bound <= 2 * n * unit * 1.001
