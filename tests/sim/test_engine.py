"""Exact outcomes of the event engine on hand-built instances (toy cluster: 16 GPUs, 4 per server)."""

from __future__ import annotations

import pytest

from gpusched_envs.policies import make_policy
from gpusched_envs.sim import SimConfig, SimulationError, Simulator
from gpusched_envs.sim.engine import DONE, QUEUED
from gpusched_envs.sim.throughput import predict_iteration_time
from tests.toy import make_workload

DURATION = SimConfig(speed_model="duration", restart_delay=30.0)


def run(cluster, rows, policy="fifo", placement="closest", config=DURATION, **kw):
    sim = Simulator(cluster, make_workload(rows, **kw), config)
    metrics = sim.run(make_policy(policy, placement))
    return sim, metrics


def test_fifo_head_of_line_blocking(toy_cluster):
    # job0 takes all 16 GPUs for 100 s; job1 (1 GPU, 50 s) arrives at 10 and waits until 100
    sim, m = run(toy_cluster, [(0, 100, 16), (10, 50, 1)])
    assert sim.finish_time.tolist() == [100.0, 150.0]
    assert m["avg_jct"] == pytest.approx((100 + 140) / 2)
    assert m["makespan"] == 150.0
    assert m["avg_queueing_delay"] == pytest.approx(45.0)
    # lower bounds: mean ideal runtime 75; makespan >= max(10 + 50, (1600 + 50) / 16)
    assert m["lower_bound_avg_jct"] == 75.0
    assert m["lower_bound_makespan"] == pytest.approx(103.125)


def test_strict_fifo_blocks_but_sjf_backfills(toy_cluster):
    rows = [(0, 100, 12), (1, 100, 8), (2, 10, 4)]
    fifo, _ = run(toy_cluster, rows, "fifo")
    sjf, _ = run(toy_cluster, rows, "sjf")
    # FIFO: job1 (8 GPUs) cannot start beside job0 (12), so job2 (4 GPUs, fits) waits behind it
    assert fifo.first_start.tolist() == [0.0, 100.0, 100.0]
    # SJF starts the 4-GPU job on the 4 free GPUs at once
    assert sjf.first_start.tolist() == [0.0, 100.0, 2.0]


def test_srtf_preempts_and_pays_restart_delay(toy_cluster):
    # job1 (100 s) preempts job0 (1000 s) at t=10; job0 resumes at 110 + 30 s restart, 990 s left -> 1130
    sim, m = run(toy_cluster, [(0, 1000, 16), (10, 100, 16)], policy="srtf")
    assert sim.finish_time.tolist() == [1130.0, 110.0]
    assert m["preemptions"] == 1
    assert sim.done_work.tolist() == sim.job_work.tolist()


def test_tiresias_demotes_at_the_threshold(toy_cluster):
    # both in queue 0, FIFO inside it; job0 crosses 3600 GPU-s at t = 3600/16 = 225 and is demoted
    sim, m = run(toy_cluster, [(0, 1000, 16), (10, 100, 16)], policy="tiresias")
    assert sim.first_start[1] == pytest.approx(225.0, abs=1e-3)
    assert sim.finish_time[1] == pytest.approx(325.0, abs=1e-3)
    assert m["preemptions"] == 1
    # job0 resumes after 30 s restart with 775 s left
    assert sim.finish_time[0] == pytest.approx(325.0 + 30.0 + 775.0, abs=1e-3)


def test_placement_changes_jct_where_topology_matters(toy_cluster):
    """A 1-GPU job holds GPU 0; a 4-GPU job then arrives. first-fit gives it GPUs 1-4 (two servers, NIC),
    closest gives it server 1 (GPUs 4-7, bus). The JCT gap is exactly the iteration-time ratio."""
    rows = [(0, 10_000, 1), (1, 1000, 4)]
    config = SimConfig(interference=False)
    ff, _ = run(toy_cluster, rows, placement="first-fit", config=config)
    cl, _ = run(toy_cluster, rows, placement="closest", config=config)
    assert ff.job_gpus[1] is None and cl.job_gpus[1] is None  # both finished
    t_spread = predict_iteration_time(toy_cluster, "additive", [1, 2, 3, 4]).total  # 0.1 + 0.15
    t_close = predict_iteration_time(toy_cluster, "additive", [4, 5, 6, 7]).total  # 0.1 + 0.015
    work = cl.job_work[1]
    assert cl.finish_time[1] - 1 == pytest.approx(work * t_close)
    assert ff.finish_time[1] - 1 == pytest.approx(work * t_spread)
    assert ff.finish_time[1] > cl.finish_time[1]


def test_two_jobs_crossing_one_uplink_each_slow_down(toy_cluster):
    """Two 8-GPU jobs spread over both racks (first-fit after a 1-GPU job per server) share the uplinks."""
    sim = Simulator(toy_cluster, make_workload([(0, 1000, 8), (0, 1000, 8)]), SimConfig(interference=False))
    sim.next_decision()
    sim.start(0, [0, 1, 8, 9, 4, 5, 12, 13])
    alone = sim.rate[0]
    sim.start(1, [2, 3, 10, 11, 6, 7, 14, 15])
    both = sim.rate[0]
    assert both < alone
    assert sim.rate[1] == pytest.approx(both)
    # by hand: uplink 5 GB/s shared by 2 -> 2.5 GB/s; 2*7/8 * 1e9 / 2.5e9 = 0.7 s + 0.1 compute
    assert 1.0 / both == pytest.approx(0.8)
    assert 1.0 / alone == pytest.approx(0.1 + 2 * 7 / 8 * 1e9 / 5e9)


def test_interference_slows_jobs_sharing_a_server(toy_cluster):
    sim = Simulator(toy_cluster, make_workload([(0, 100, 1), (0, 100, 1)]), SimConfig())
    sim.next_decision()
    sim.start(0, [0])
    assert 1.0 / sim.rate[0] == pytest.approx(0.1)
    sim.start(1, [1])  # same server: the toy catalogue's 1.5x co-location slowdown
    assert 1.0 / sim.rate[0] == pytest.approx(0.15)
    assert 1.0 / sim.rate[1] == pytest.approx(0.15)


def test_fractional_jobs_share_one_gpu(toy_cluster):
    sim = Simulator(
        toy_cluster, make_workload([(0, 100, 1, 0, 500), (0, 100, 1, 0, 500)]), SimConfig(interference=False)
    )
    sim.next_decision()
    sim.start(0, [3])
    sim.start(1, [3])
    assert sim.gpu_free_milli[3] == 0
    assert 1.0 / sim.rate[0] == pytest.approx(0.1 / 0.6)
    with pytest.raises(SimulationError, match="not all free"):
        sim2 = Simulator(toy_cluster, make_workload([(0, 100, 1), (0, 100, 1, 0, 500)]), DURATION)
        sim2.next_decision()
        sim2.start(0, [3])
        sim2.start(1, [3])


def test_stale_completion_is_ignored_after_a_rate_change(toy_cluster):
    # job0 starts alone (0.1 s/iter), job1 joins its server at t=50 and slows it to 0.15 s/iter
    rows = [(0, 100, 1), (50, 1000, 1)]
    sim = Simulator(toy_cluster, make_workload(rows), SimConfig())
    sim.next_decision()
    sim.start(0, [0])
    sim.next_decision()
    assert sim.now == 50
    sim.start(1, [1])
    while sim.next_decision():
        pass
    # half the work done by t=50; the other half at 1.5x slower: 50 + 75
    assert sim.finish_time[0] == pytest.approx(125.0)
    assert sim.status.tolist() == [DONE, DONE]


def test_the_clock_is_a_python_float_at_every_kind_of_event(toy_cluster):
    """Arrivals, completions and policy timers (asked for as an int or a numpy float) move the clock to Python
    floats: exact times, and the same type whatever event set them."""
    import numpy as np

    rows = [(0, 100, 1), (50, 1000, 1)]
    sim = Simulator(toy_cluster, make_workload(rows), SimConfig())
    sim.next_decision()
    sim.start(0, [0])
    sim.set_timer(20)
    sim.next_decision()  # the timer at 20 (the queue is empty: no decision), then job1 arrives at 50
    assert sim.now == 50 and type(sim.now) is float
    sim.set_timer(np.float64(60.0))
    assert sim.next_decision()  # the timer fires with job1 waiting: a decision at 60
    assert sim.now == 60 and type(sim.now) is float
    sim.start(1, [1])  # beside job0 (0.6 of its work done), which runs 1.5x slower from now on
    assert all(type(event[0]) is float for event in sim._heap)
    while sim.next_decision():
        pass
    assert type(sim.now) is float and sim.status.tolist() == [DONE, DONE]
    assert sim.finish_time[0] == pytest.approx(120.0)


def test_scheduler_errors_are_clear(toy_cluster):
    sim = Simulator(toy_cluster, make_workload([(0, 100, 2), (5, 100, 1)]), DURATION)
    sim.next_decision()
    with pytest.raises(SimulationError, match="needs 2 GPUs"):
        sim.start(0, [0])
    with pytest.raises(SimulationError, match="not waiting"):
        sim.start(1, [0])
    with pytest.raises(SimulationError, match="not running"):
        sim.preempt(0)
    sim.start(0, [0, 1])
    with pytest.raises(SimulationError, match="in the past"):
        sim.set_timer(-1.0)
    assert sim.status[0] != QUEUED


def test_oversize_job_is_an_error_or_dropped(toy_cluster):
    w = make_workload([(0, 100, 32), (1, 10, 1)])
    with pytest.raises(SimulationError, match="asks for 32 GPUs but only 16"):
        Simulator(toy_cluster, w, DURATION)
    with pytest.warns(UserWarning, match="dropped"):
        sim = Simulator(toy_cluster, w, SimConfig(speed_model="duration", oversize="drop"))
    m = sim.run(make_policy("fifo"))
    assert (m["jobs"], m["dropped"]) == (1, 1)


def test_deadlock_is_reported(toy_cluster):
    class Idle:
        def schedule(self, sim):
            pass

    sim = Simulator(toy_cluster, make_workload([(0, 100, 1)]), DURATION)
    with pytest.raises(SimulationError, match="deadlock"):
        sim.run(Idle())


def test_a_job_alone_on_its_best_placement_runs_its_traced_duration(toy_cluster):
    # consolidated on one server of the fastest type, no neighbours: the ideal runtime, which is the traced duration
    sim = Simulator(toy_cluster, make_workload([(5, 500, 4)]), SimConfig())
    sim.run(make_policy("fifo", "closest"))
    assert sim.finish_time[0] - 5 == pytest.approx(500.0)
    # spread over two servers it takes longer, by the ratio of iteration times
    sim = Simulator(toy_cluster, make_workload([(5, 500, 4)]), SimConfig())
    sim.next_decision()
    sim.start(0, [0, 1, 4, 5])
    while sim.next_decision():
        pass
    ratio = predict_iteration_time(toy_cluster, "additive", [0, 1, 4, 5]).total / 0.115
    assert sim.finish_time[0] - 5 == pytest.approx(500.0 * ratio)


def test_unknown_names_fail_clearly():
    with pytest.raises(ValueError, match="unknown policy"):
        make_policy("lottery")
    with pytest.raises(ValueError, match="unknown placement"):
        make_policy("fifo", "anywhere")
    with pytest.raises(ValueError, match="speed_model"):
        SimConfig(speed_model="fast")
