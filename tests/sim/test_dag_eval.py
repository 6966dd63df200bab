"""Plan evaluation by list scheduling (the DAG model) and the HEFT / CPOP / random DAG policies."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpusched_envs.policies.dag import (
    cpop_schedule,
    heft,
    heft_schedule,
    random_plan,
    random_plans,
    upward_rank,
)
from gpusched_envs.sim.dag_eval import (
    PlanEvaluator,
    evaluate_plan,
    evaluate_plans,
    schedule_plan,
    uniform_bandwidth,
)
from gpusched_envs.workloads.dag import DAG, random_layered_dag
from tests.toy import tiny_dag

SPEED = np.array([1.0, 2.0])
BW = uniform_bandwidth(2, 100.0)  # 100 B/s between the two GPUs


def test_hand_computed_two_gpus():
    # assignment [0, 0, 1, 1], priority gives order 0, 1, 2, 3:
    # t0 gpu0: 0 -> 2
    # t1 gpu0: parent on same GPU, arrives 2; gpu free 2 -> 2 .. 5
    # t2 gpu1: 200 B / 100 B/s = 2 s after 2 -> arrives 4; runtime 4 / 2 = 2 -> 4 .. 6
    # t3 gpu1: from t1 (gpu0) 5 + 50/100 = 5.5; from t2 (same GPU) 6 -> 6 .. 6.5   => makespan 6.5
    s = schedule_plan(tiny_dag(), SPEED, BW, [0, 0, 1, 1], [4, 3, 2, 1])
    assert s.makespan == pytest.approx(6.5)
    np.testing.assert_allclose(s.start, [0, 2, 4, 6])
    np.testing.assert_allclose(s.finish, [2, 5, 6, 6.5])
    assert s.order.tolist() == [0, 1, 2, 3]


def test_priority_sets_order_on_a_shared_gpu():
    # all on gpu0, priority [4, 1, 3, 2]: order 0, 2, 1, 3 -> 0..2, 2..6, 6..9, 9..10 => 10
    assert evaluate_plan(tiny_dag(), SPEED, BW, [0, 0, 0, 0], [4, 1, 3, 2]) == pytest.approx(10.0)
    # non-topological priority: the sink has the highest priority but waits until it is ready;
    # ties (t1, t2 at 5) go to the lowest index. All on gpu1 (speed 2): 0..1, 1..2.5, 2.5..4.5, 4.5..5 => 5
    s = schedule_plan(tiny_dag(), SPEED, BW, [1, 1, 1, 1], [0, 5, 5, 9])
    assert s.makespan == pytest.approx(5.0)
    assert s.order.tolist() == [0, 1, 2, 3]


def test_population_matches_single_and_times():
    dag = tiny_dag()
    a = np.array([[0, 0, 1, 1], [0, 0, 0, 0], [1, 1, 1, 1]])
    p = np.array([[4, 3, 2, 1], [4, 1, 3, 2], [0, 5, 5, 9]], dtype=float)
    np.testing.assert_allclose(evaluate_plans(dag, SPEED, BW, a, p), [6.5, 10.0, 5.0])
    ms, start, fin = PlanEvaluator(dag, SPEED, BW).evaluate_with_times(a, p)
    np.testing.assert_allclose(fin.max(axis=1), ms)
    np.testing.assert_allclose(start[0], [0, 2, 4, 6])


def test_bad_inputs():
    dag = tiny_dag()
    with pytest.raises(ValueError, match="GPU indices"):
        evaluate_plan(dag, SPEED, BW, [0, 0, 2, 0], [1, 1, 1, 1])
    with pytest.raises(ValueError, match=r"\(P, N=4\)"):
        evaluate_plan(dag, SPEED, BW, [0, 0, 0], [1, 1, 1])
    with pytest.raises(ValueError, match="finite"):
        evaluate_plan(dag, SPEED, BW, [0, 0, 0, 0], [1, np.nan, 1, 1])
    with pytest.raises(ValueError, match="bandwidth"):
        evaluate_plan(dag, SPEED, np.zeros((2, 2)), [0, 0, 0, 0], [1, 1, 1, 1])


def test_affinity_forbidden_gpu_scores_inf():
    dag = tiny_dag().replace(affinity=(None, "A100", None, None))
    types = ["V100", "A100"]
    assert evaluate_plan(dag, SPEED, BW, [0, 0, 0, 0], [4, 3, 2, 1], gpu_types=types) == np.inf
    assert np.isfinite(evaluate_plan(dag, SPEED, BW, [0, 1, 0, 0], [4, 3, 2, 1], gpu_types=types))
    a, _ = heft(dag, SPEED, BW, gpu_types=types)
    assert a[1] == 1
    a, _ = random_plans(dag, 2, 50, seed=1, gpu_types=types)
    assert (a[:, 1] == 1).all()


# ---------------------------------------------------------------- scalar reference implementation
def reference_makespan(work, edges, eb, speed, bw, assign, prio, runtime=None):
    """``runtime`` (N, G), if given, replaces ``work / speed`` (DAGs with a per-task ``hetero`` factor)."""
    n = len(work)
    parents = {i: [] for i in range(n)}
    for (s, d), b in zip(edges, eb, strict=True):
        parents[d].append((s, b))
    done, finish, free = set(), {}, {}
    while len(done) < n:
        ready = [i for i in range(n) if i not in done and all(p in done for p, _ in parents[i])]
        i = max(ready, key=lambda k: (prio[k], -k))
        g = assign[i]
        t = free.get(g, 0.0)
        for p, b in parents[i]:
            comm = 0.0 if assign[p] == g else b * (1.0 / bw[assign[p]][g])  # the evaluator's arithmetic
            t = max(t, finish[p] + comm)
        finish[i] = t + (work[i] / speed[g] if runtime is None else runtime[i][g])
        free[g] = finish[i]
        done.add(i)
    return max(finish.values())


@st.composite
def instances(draw):
    n = draw(st.integers(1, 12))
    g = draw(st.integers(1, 4))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=20)) if pairs else []
    work = draw(st.lists(st.floats(0, 10), min_size=n, max_size=n))
    eb = draw(st.lists(st.floats(0, 1000), min_size=len(chosen), max_size=len(chosen)))
    speed = draw(st.lists(st.floats(0.25, 4), min_size=g, max_size=g))
    bw = draw(st.lists(st.floats(10, 1000), min_size=g * g, max_size=g * g))
    p = draw(st.integers(1, 5))
    assign = draw(st.lists(st.integers(0, g - 1), min_size=n * p, max_size=n * p))
    prio = draw(st.lists(st.integers(0, 5), min_size=n * p, max_size=n * p))  # small range: many ties
    return n, g, chosen, work, eb, speed, np.array(bw).reshape(g, g), p, assign, prio


@settings(max_examples=150, deadline=None)
@given(instances())
def test_vectorised_matches_scalar_reference(inst):
    n, g, chosen, work, eb, speed, bw, p, assign, prio = inst
    perm = np.random.default_rng(n).permutation(n)  # task indices not in topological order
    edges = np.array([(perm[s], perm[d]) for s, d in chosen], dtype=np.int64).reshape(-1, 2)
    dag = DAG(work=np.array(work), edges=edges, edge_bytes=np.array(eb))
    a = np.array(assign).reshape(p, n)
    pr = np.array(prio, dtype=float).reshape(p, n)
    got = evaluate_plans(dag, np.array(speed), bw, a, pr)
    want = [reference_makespan(work, edges.tolist(), eb, speed, bw, a[k], pr[k]) for k in range(p)]
    np.testing.assert_array_equal(got, want)  # bit for bit: same operations in the same order


@pytest.mark.parametrize("n", [60, 200])  # int16 dispatch keys at 60 tasks, int32 at 200
def test_vectorised_matches_reference_bit_for_bit_on_layered_dags(n):
    dag = random_layered_dag(n, seed=n).replace(hetero=None)  # the reference knows work / speed only
    rng = np.random.default_rng(n)
    g = 5
    speed, bw = rng.uniform(0.5, 2.0, g), rng.uniform(1e9, 2e10, (g, g))
    a, p = random_plans(dag, g, 6, seed=n)
    p[:3] = np.round(p[:3] * 4)  # plans with many tied priorities take the stable-sort path
    ev = PlanEvaluator(dag, speed, bw)
    assert ev._key_dtype == (np.int16 if n == 60 else np.int32)
    want = [
        reference_makespan(
            dag.work.tolist(), dag.edges.tolist(), dag.edge_bytes.tolist(), speed, bw, a[k], p[k]
        )
        for k in range(len(a))
    ]
    np.testing.assert_array_equal(ev.evaluate(a, p), want)


def bench_setup():
    """``gpusched bench``'s DAG and GPUs (gpusched_envs.bench.bench_dag_plans)."""
    from gpusched_envs.sim import load_cluster
    from gpusched_envs.workloads.dag import load_dag

    dag = load_dag("dag:random:n=50,ccr=1.0", seed=0)
    cluster = load_cluster("hetero64")
    gpus = np.arange(8)
    speed = 1.0 / cluster.catalog.iteration_time[0, cluster.gpu_type[gpus]]
    return dag, speed / speed.max(), cluster.bandwidth_matrix()[np.ix_(gpus, gpus)]


def test_bench_dag_matches_reference_bit_for_bit():
    dag, speed, bw = bench_setup()
    assert dag.hetero is not None  # per-task factors: the reference takes the evaluator's runtimes
    ev = PlanEvaluator(dag, speed, bw)
    a, p = random_plans(dag, len(speed), 8, seed=3)
    p[:2] = np.round(p[:2] * 3)  # tied priorities: the stable-sort path
    want = [
        reference_makespan(
            dag.work.tolist(), dag.edges.tolist(), dag.edge_bytes.tolist(), speed, bw, a[k], p[k], ev.runtime
        )
        for k in range(len(a))
    ]
    np.testing.assert_array_equal(ev.evaluate(a, p), want)
    np.testing.assert_array_equal(ev.evaluate_with_times(a, p)[0], want)


def test_reused_work_buffers_do_not_leak_between_calls():
    # evaluators of the same shapes share one set of work buffers per thread; populations of other sizes get their
    # own (two kept); results are fresh arrays, never views of the buffers
    dag, speed, bw = bench_setup()
    ev1, ev2 = (
        PlanEvaluator(dag, speed, bw),
        PlanEvaluator(dag, speed * np.linspace(0.5, 1.5, len(speed)), bw),
    )
    a, p = random_plans(dag, len(speed), 40, seed=5)
    first = ev1.evaluate(a, p)
    kept = first.copy()
    single = [ev1.evaluate(a[k], p[k])[0] for k in range(len(a))]
    np.testing.assert_array_equal(first, single)
    other = ev2.evaluate(a, p)
    assert not np.array_equal(other, first)  # another speed vector: other makespans
    for size in (7, 40, 13, 40):  # more sizes than are kept
        np.testing.assert_array_equal(ev1.evaluate(a[:size], p[:size]), kept[:size])
        np.testing.assert_array_equal(ev2.evaluate(a[:size], p[:size]), other[:size])
    np.testing.assert_array_equal(first, kept)


def test_threads_evaluate_concurrently():
    from concurrent.futures import ThreadPoolExecutor

    dag, speed, bw = bench_setup()
    ev = PlanEvaluator(dag, speed, bw)
    pops = [random_plans(dag, len(speed), 30, seed=s) for s in range(6)]
    want = [ev.evaluate(a, p) for a, p in pops]
    with ThreadPoolExecutor(3) as pool:
        got = list(pool.map(lambda ap: ev.evaluate(*ap), pops * 3))
    for k, g in enumerate(got):
        np.testing.assert_array_equal(g, want[k % len(pops)])


def test_ranks_break_ties_towards_the_lower_index():
    # ascending rank: 0.2 (task 1), then the tie at 0.5 where task 2 ranks below task 0, then 0.9 (task 3);
    # -0.0 and 0.0 are the same priority (row 2: task 0 ranks above task 1)
    by = PlanEvaluator._by_rank(
        np.array([[0.5, 0.2, 0.5, 0.9], [0.1, 0.2, 0.3, 0.4], [-0.0, 0.0, -1.0, 1.0]])
    )
    assert by.tolist() == [[1, 2, 0, 3], [0, 1, 2, 3], [2, 1, 0, 3]]


# ---------------------------------------------------------------- HEFT / CPOP
def test_heft_hand_computed():
    # mean costs: w̄ = 1.5, 2.25, 3, 0.75; c̄ = bytes / 100 -> 1, 2, 0.5, 0
    # rank_u: t3 0.75; t1 2.25 + 0.5 + 0.75 = 3.5; t2 3 + 0 + 0.75 = 3.75; t0 1.5 + max(1 + 3.5, 2 + 3.75) = 7.25
    # order 0, 2, 1, 3; EFT: t0 gpu1 [0,1]; t2 gpu1 [1,3] (gpu0: 1 + 2 + 4 = 7); t1 gpu1 [3,4.5] (gpu0: 2 + 3 = 5);
    # t3 gpu1 [4.5,5] (gpu0: 4.5 + 0.5 + 1 = 6)  => makespan 5, everything on the fast GPU
    dag = tiny_dag()
    np.testing.assert_allclose(upward_rank(dag, SPEED, BW), [7.25, 3.5, 3.75, 0.75])
    for insertion in (True, False):
        s = heft_schedule(dag, SPEED, BW, insertion=insertion)
        assert s.makespan == pytest.approx(5.0)
        assert s.assignment.tolist() == [1, 1, 1, 1]
        assert evaluate_plan(dag, SPEED, BW, *s.plan) == pytest.approx(s.makespan, rel=1e-12)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("insertion", [True, False])
def test_heft_and_cpop_reproduced_by_evaluator(seed, insertion):
    rng = np.random.default_rng(seed)
    dag = random_layered_dag(int(rng.integers(5, 40)), ccr=[0.1, 1.0, 5.0][seed % 3], seed=seed)
    g = int(rng.integers(1, 6))
    speed = rng.uniform(0.5, 2.0, g)
    bw = rng.uniform(1e9, 2e10, (g, g))
    np.fill_diagonal(bw, np.inf)
    for algo in (heft_schedule, cpop_schedule):
        s = algo(dag, speed, bw, insertion=insertion)
        assert evaluate_plan(dag, speed, bw, *s.plan) == pytest.approx(s.makespan, rel=1e-9)
        np.testing.assert_allclose(schedule_plan(dag, speed, bw, *s.plan).finish, s.finish, rtol=1e-9)


def test_heft_beats_random_on_average():
    dag = random_layered_dag(40, seed=3)
    speed = np.array([1.0, 1.0, 2.0, 0.5])
    bw = uniform_bandwidth(4, 10e9)
    h = evaluate_plan(dag, speed, bw, *heft(dag, speed, bw))
    a, p = random_plans(dag, 4, 200, seed=0)
    assert h < np.median(evaluate_plans(dag, speed, bw, a, p))
    a1, p1 = random_plan(dag, 4, seed=5)
    a2, p2 = random_plan(dag, 4, seed=5)
    assert np.array_equal(a1, a2) and np.array_equal(p1, p2)


# ---------------------------------------------------------------- worked examples (WORL-RTGS DAGs)
def test_evaluator_hand_computed_five_task_schedule():
    # 0 -> 1 (20 B), 0 -> 2 (10 B), 1 -> 3 (30 B), 2 -> 3 (0 B), 2 -> 4 (40 B); work 2, 4, 3, 2, 1;
    # speeds 1 and 2, 10 B/s between the GPUs
    dag = DAG(
        work=np.array([2.0, 4.0, 3.0, 2.0, 1.0]),
        edges=np.array([[0, 1], [0, 2], [1, 3], [2, 3], [2, 4]]),
        edge_bytes=np.array([20.0, 10.0, 30.0, 0.0, 40.0]),
    )
    speed, bw = np.array([1.0, 2.0]), uniform_bandwidth(2, 10.0)
    # order 0, 1, 2, 3, 4 on GPUs 0, 1, 0, 1, 0:
    # t0 g0 0..2; t1 g1 arrives 2 + 20/10 = 4, runs 4/2 -> 4..6; t2 g0 (same GPU as t0) 2..5;
    # t3 g1: GPU free 6, t2's 0 B arrive at 5 -> 6..7; t4 g0 after t2 on the same GPU 5..6   => 7
    s = schedule_plan(dag, speed, bw, [0, 1, 0, 1, 0], [5, 4, 3, 2, 1])
    np.testing.assert_allclose(s.start, [0, 4, 2, 6, 5])
    np.testing.assert_allclose(s.finish, [2, 6, 5, 7, 6])
    assert s.makespan == pytest.approx(7.0)
    # t3 and t4 on GPU 0, t4 first: t4 5..6; t3 waits for t1's 30 B from GPU 1: 6 + 3 = 9 -> 9..11   => 11
    assert evaluate_plan(dag, speed, bw, [0, 1, 0, 0, 0], [5, 4, 3, 1, 2]) == pytest.approx(11.0)
    # t3 first: 9..11, then t4 11..12   => 12
    s = schedule_plan(dag, speed, bw, [0, 1, 0, 0, 0], [5, 4, 3, 2, 1])
    assert s.makespan == pytest.approx(12.0)
    assert s.order.tolist() == [0, 1, 2, 3, 4]


def topcuoglu_example() -> tuple[DAG, np.ndarray, np.ndarray]:
    """The 10-task, 3-processor example of Topcuoglu, Hariri & Wu (IEEE TPDS 2002, Fig. 2): computation costs
    W[i, p] as unrelated-machine factors on unit work, communication costs as bytes at 1 B/s."""
    w = np.array(
        [
            [14, 16, 9],
            [13, 19, 18],
            [11, 13, 19],
            [13, 8, 17],
            [12, 13, 10],
            [13, 16, 9],
            [7, 15, 11],
            [5, 11, 14],
            [18, 12, 20],
            [21, 7, 16],
        ],
        dtype=float,
    )
    comm = {
        (1, 2): 18, (1, 3): 12, (1, 4): 9, (1, 5): 11, (1, 6): 14, (2, 8): 19, (2, 9): 16, (3, 7): 23,
        (4, 8): 27, (4, 9): 23, (5, 9): 13, (6, 8): 15, (7, 10): 17, (8, 10): 11, (9, 10): 13,
    }  # fmt: skip
    edges = np.array([(s - 1, d - 1) for s, d in comm])
    dag = DAG(work=np.ones(10), edges=edges, edge_bytes=np.array(list(comm.values()), float), hetero=w)
    return dag, np.ones(3), uniform_bandwidth(3, 1.0)


def test_heft_reproduces_topcuoglu_worked_example():
    dag, speed, bw = topcuoglu_example()
    # the paper's upward ranks (Table 1 of the HEFT paper, rounded there to 3 digits)
    np.testing.assert_allclose(
        upward_rank(dag, speed, bw),
        [108.0, 77.0, 80.0, 80.0, 69.0, 63.333, 42.667, 35.667, 44.333, 14.667],
        atol=1e-3,
    )
    s = heft_schedule(dag, speed, bw)
    assert s.makespan == pytest.approx(80.0)  # the paper's HEFT schedule length
    assert evaluate_plan(dag, speed, bw, *s.plan) == pytest.approx(80.0)
    assert cpop_schedule(dag, speed, bw).makespan == pytest.approx(86.0)  # the paper's CPOP schedule length
