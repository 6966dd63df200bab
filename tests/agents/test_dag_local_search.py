"""The critical-path local search (WORL-RTGS's refinement step), its use in WORL-RTGS and ``dag-bench``'s ``ls``."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from gpusched_lab.agents.methods.worl_rtgs.agent import worl_rtgs
from gpusched_lab.agents.methods.worl_rtgs.local_search import (
    critical_path,
    local_search,
    neighbours,
    order_form,
)
from gpusched_lab.agents.methods.worl_rtgs.metaheuristics import (
    PlanSpace,
    cpsat_schedule,
    list_scheduling_plans,
)

from gpusched_envs.sim.dag_eval import PlanEvaluator, uniform_bandwidth
from gpusched_envs.workloads.dag import random_layered_dag
from tests.toy import tiny_dag

SPEED = np.array([1.0, 2.0])
BW = uniform_bandwidth(2, 100.0)  # 100 B/s between the two GPUs


# the hand-computed plan: GPUs 0, 0, 1, 1, dispatch order 0, 1, 2, 3. Task 0 on GPU 0: [0, 2]; task 1 on GPU 0:
# [2, 5]; task 2 on GPU 1: inputs at 2 + 200 / 100 = 4, runs 4 / 2: [4, 6]; task 3 on GPU 1: inputs at
# max(5 + 50 / 100, 6 + 0) = 6, GPU free at 6, runs 1 / 2: [6, 6.5]. Makespan 6.5, finish times sum to 19.5.
A = np.array([0, 0, 1, 1])
P = np.array([0.9, 0.7, 0.5, 0.1])


def test_evaluate_with_total_hand_values():
    ev = PlanEvaluator(tiny_dag(), SPEED, BW)
    ms, total = ev.evaluate_with_total(A, P)
    assert ms.tolist() == [6.5] and total.tolist() == [19.5]
    a2 = np.array([A, [0, 0, 0, 0]])  # all on GPU 0: 2 + 3 + 4 + 1 in sequence -> finishes 2, 5, 9, 10
    ms, total = ev.evaluate_with_total(a2, np.array([P, P]))
    assert ms.tolist() == [6.5, 10.0] and total.tolist() == [19.5, 26.0]
    np.testing.assert_array_equal(ms, ev.evaluate(a2, np.array([P, P])))


def test_order_form_and_critical_path_hand_values():
    space = PlanSpace(tiny_dag(), SPEED, BW)
    assert order_form(space, A, P).tolist() == [4.0, 3.0, 2.0, 1.0]
    # dispatch order 0, 2, 1, 3 (task 2 before 1) gives priorities 4, 2, 3, 1
    assert order_form(space, A, np.array([0.9, 0.5, 0.7, 0.1])).tolist() == [4.0, 2.0, 3.0, 1.0]
    # task 3 starts at 6, bound by task 2 (its GPU predecessor, finish 6; also its parent at 6 + 0) rather than
    # task 1 (5 + 0.5); task 2 starts at 4 = task 0's finish 2 + the 2 s transfer; task 0 starts at 0
    assert critical_path(space, A, P).tolist() == [3, 2, 0]


def test_neighbours_hand_values():
    space = PlanSpace(tiny_dag(), SPEED, BW)
    prio = np.array([4.0, 3.0, 2.0, 1.0])
    na, npr = neighbours(space, A, prio, [3], shifts=(1,))
    # task 3 (position 3, right after its last parent 2): to GPU 0, and one place earlier (just before task 2:
    # priority 2.5); one place later is past the end
    assert na.tolist() == [[0, 0, 1, 0], [0, 0, 1, 1]]
    assert npr.tolist() == [[4, 3, 2, 1], [4, 3, 2, 2.5]]
    na, npr = neighbours(space, A, prio, [2], shifts=())
    # task 2 (position 2; its parent 0 at 0): to GPU 0 with the order kept, and dispatched just after task 0
    assert na.tolist() == [[0, 0, 0, 1], [0, 0, 0, 1]]
    assert npr.tolist() == [[4, 3, 2, 1], [4, 3, 3.5, 1]]
    na, npr = neighbours(space, A, prio, [1], shifts=(1, 2))
    # task 1 (position 1): to GPU 1 (already as early as it may be: no second variant); positions 0 and 2;
    # position 3 (after task 3)
    assert na.tolist() == [[0, 1, 1, 1], A.tolist(), A.tolist(), A.tolist()]
    assert npr.tolist() == [[4, 3, 2, 1], [4, 4.5, 2, 1], [4, 1.5, 2, 1], [4, 0.5, 2, 1]]


def brute_force_optimum(dag, speed, bw) -> float:
    """Shortest makespan over every GPU assignment and every priority permutation (all dispatch orders)."""
    ev = PlanEvaluator(dag, speed, bw)
    n, g = dag.num_tasks, len(speed)
    assign = np.array(list(itertools.product(range(g), repeat=n)))
    perms = np.array(list(itertools.permutations(range(n))), dtype=float)
    a = np.repeat(assign, len(perms), axis=0)
    p = np.tile(perms, (len(assign), 1))
    return float(ev.evaluate(a, p).min())


def test_local_search_reaches_the_brute_force_optimum_and_respects_its_budget():
    dag = tiny_dag()
    opt = brute_force_optimum(dag, SPEED, BW)
    space = PlanSpace(dag, SPEED, BW)
    worst = (np.array([0, 0, 0, 0]), P)  # all on the slow GPU: 10 s
    res = local_search(space, [worst], budget=300, seed=0)
    assert res.makespan == opt < 6.5
    assert res.evaluations == space.evaluations == 300 == res.stats["used"]
    assert float(PlanEvaluator(dag, SPEED, BW).evaluate(res.assignment, res.priority)[0]) == res.makespan
    assert res.curve[0] == 10.0 and all(x >= y for x, y in zip(res.curve, res.curve[1:], strict=False))
    short = local_search(PlanSpace(dag, SPEED, BW), [worst], budget=1, seed=0)  # only the start scored
    assert short.makespan == 10.0 and short.stats["used"] == 1


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_local_search_never_worse_than_its_start_and_never_below_cpsat(seed):
    rng = np.random.default_rng(seed)
    dag = random_layered_dag(10, ccr=2.0, seed=seed).replace(hetero=None)
    speed, bw = rng.uniform(0.5, 2.0, 3), uniform_bandwidth(3, 2e9)
    starts = list_scheduling_plans(dag, speed, bw)
    ev = PlanEvaluator(dag, speed, bw)
    start_ms = min(float(ev.evaluate(*s)[0]) for s in starts)
    res = local_search(PlanSpace(dag, speed, bw), starts, budget=2000, seed=seed)
    exact = cpsat_schedule(dag, speed, bw, time_limit=10)
    assert res.makespan <= start_ms
    if exact.optimal:
        assert res.makespan >= exact.makespan - 1e-9
    # the same seed gives the same search
    again = local_search(PlanSpace(dag, speed, bw), starts, budget=2000, seed=seed)
    assert again.makespan == res.makespan and np.array_equal(again.assignment, res.assignment)


def test_cpsat_plan_is_expressed_by_the_decoder_and_is_a_local_optimum():
    # the list-scheduling decoder reproduces CP-SAT's schedule from its plan (start order + GPUs): a local search
    # started there finds nothing shorter when CP-SAT proved it optimal
    rng = np.random.default_rng(4)
    dag = random_layered_dag(9, ccr=1.0, seed=4).replace(hetero=None)
    speed, bw = rng.uniform(0.5, 2.0, 3), uniform_bandwidth(3, 1e9)
    exact = cpsat_schedule(dag, speed, bw, time_limit=10)
    assert exact.optimal
    space = PlanSpace(dag, speed, bw)
    x = space.encode(*exact.plan)
    assert float(space.evaluate(x)[0]) == exact.makespan
    res = local_search(space, [exact.plan], budget=500, seed=0)
    assert res.makespan == pytest.approx(exact.makespan, rel=1e-12)  # other orders: other float rounding


def test_worl_rtgs_refinement_keeps_the_budget_and_never_hurts():
    rng = np.random.default_rng(0)
    dag = random_layered_dag(16, ccr=5.0, seed=0).replace(hetero=None)
    speed, bw = rng.uniform(0.5, 2.0, 4), uniform_bandwidth(4, 1e9)
    lp = list_scheduling_plans(dag, speed, bw)
    space = PlanSpace(dag, speed, bw)
    res = worl_rtgs(space, [], list_plans=lp, population=10, iterations=20, seed=0, refine=0.5)
    assert res.evaluations == space.evaluations == 10 * 20
    assert res.makespan <= res.stats["refined_from"]
    plain = worl_rtgs(PlanSpace(dag, speed, bw), [], list_plans=lp, population=10, iterations=10, seed=0)
    assert res.stats["refined_from"] == plain.makespan  # the WOA part is WORL-RTGS with half the iterations
    with pytest.raises(ValueError, match="refine must lie in"):
        worl_rtgs(space, [], population=4, iterations=2, refine=1.5)


def test_dag_bench_ls_agent_and_refine_option():
    import typer
    from gpusched_lab.evaluate.dag_bench import dag_bench, run_bench
    from typer.testing import CliRunner

    res = run_bench(["dag:random:n=10,ccr=5.0"], agents=["heft", "ls"], seeds=2, population=8, iterations=10)
    by = {s["agent"]: s for s in res["summary"]}
    assert by["ls"]["makespan_mean"] <= by["heft"]["makespan_mean"]
    assert res["meta"]["refine"] == 0.8
    app = typer.Typer()
    app.command(name="dag-bench")(dag_bench)
    app.command(name="other")(lambda: None)
    bad = CliRunner().invoke(
        app, ["dag-bench", "--dag", "dag:random:n=8", "--agents", "heft", "--refine", "2"]
    )
    assert bad.exit_code == 2 and "--refine must lie in [0, 1], got 2.0" in bad.output


def test_swap_neighbours_hand_values():
    space = PlanSpace(tiny_dag(), SPEED, BW)
    prio = np.array([4.0, 3.0, 2.0, 1.0])
    na, npr = neighbours(space, A, prio, [0], shifts=(), swaps=5)
    # task 0 (GPU 0): to GPU 1, then GPU swaps with tasks 2 and 3 (the ones on GPU 1), in index order
    assert na.tolist() == [[1, 0, 1, 1], [1, 0, 0, 1], [1, 0, 1, 0]]
    assert (npr == prio).all()
    rng = np.random.default_rng(0)
    na, _ = neighbours(space, A, prio, [0], shifts=(), swaps=1, rng=rng)
    assert len(na) == 2 and na[1].tolist() in ([1, 0, 0, 1], [1, 0, 1, 0])  # one partner drawn of the two
