"""Trace-speed calibration: a traced duration becomes work at the speed the job plausibly had
where it ran (best-fit servers for its size, their GPU-type mix, packed placement), not at the cluster's ideal speed.

Toy numbers (tests/toy.py): compute 0.1 s on 'fast', 0.3 s on 'slow'; 1 GB gradients; bus 100 GB/s; γ = 1.
"""

from __future__ import annotations

import numpy as np
import pytest

from gpusched_envs.policies import make_policy
from gpusched_envs.sim import SimConfig, Simulator, load_cluster
from gpusched_envs.sim.engine import typical_iteration_time
from gpusched_envs.sim.topology import build_cluster
from gpusched_envs.workloads import load_workload
from tests.toy import make_workload, one_rack


def _two_sizes(toy_catalog):
    # server 0: 2 slow GPUs; server 1: 4 fast GPUs
    return one_rack(toy_catalog, (2, "slow"), (4, "fast"), name="two-sizes")


def test_small_jobs_are_traced_on_the_smallest_servers_that_hold_them(toy_catalog):
    c = _two_sizes(toy_catalog)
    # 1 GPU: best fit is the 2-GPU slow server -> traced at 0.3 s per iteration
    assert typical_iteration_time(c, 0, 1) == pytest.approx(0.3)
    # 3 GPUs: only the 4-GPU fast server holds it: 0.1 s + 2·2/3 · 1e9/100e9 on the bus
    assert typical_iteration_time(c, 0, 3) == pytest.approx(0.1 + 4 / 3 * 0.01)


def test_the_gpu_type_mix_weights_by_gpu_count(toy_catalog):
    doc = {
        "name": "mix",
        "racks": [
            {
                "servers": [
                    {"count": 1, "gpus": 2, "gpu_type": "slow", "intra_link": "bus", "nic": "nic"},
                    {"count": 3, "gpus": 2, "gpu_type": "fast", "intra_link": "bus", "nic": "nic"},
                ]
            }
        ],
    }
    c = build_cluster(doc, toy_catalog)
    assert typical_iteration_time(c, 0, 1) == pytest.approx(0.25 * 0.3 + 0.75 * 0.1)


def test_work_and_ideal_runtime_under_both_rules(toy_catalog):
    c = _two_sizes(toy_catalog)
    w = make_workload([(0, 300, 1)])
    typical = Simulator(c, w, SimConfig())
    assert typical.job_work[0] == pytest.approx(1000)  # 300 s at 0.3 s per iteration
    assert typical.job_ideal_iter[0] == pytest.approx(0.1)  # the lower bound stays the fast GPU
    ideal = Simulator(c, w, SimConfig(trace_speed="ideal"))
    assert ideal.job_work[0] == pytest.approx(3000)
    # on the slow GPU the job takes exactly its traced time; on a fast one a third of it
    typical.next_decision()
    typical.start(0, [0])
    while typical.next_decision():
        pass
    m = typical.metrics()
    assert m["avg_jct"] == pytest.approx(300)
    assert m["avg_trace_slowdown"] == pytest.approx(1.0)
    assert m["avg_slowdown"] == pytest.approx(3.0)
    fast = Simulator(c, w, SimConfig())
    fast.next_decision()
    fast.start(0, [2])
    while fast.next_decision():
        pass
    assert fast.metrics()["avg_trace_slowdown"] == pytest.approx(1 / 3)


def test_bad_trace_speed_is_rejected():
    with pytest.raises(ValueError, match="trace_speed"):
        SimConfig(trace_speed="fast")


def test_philly_replayed_on_its_cluster_takes_about_its_traced_time():
    # the first 3,000 Philly jobs on the `philly` preset with FIFO + closest (the CLI default): 1.005 now; with the
    # old rule (trace_speed="ideal": work normalised to the P100s while small jobs run on the K80 servers) 3.35
    w = load_workload("philly:jobs=3000", seed=0)
    sim = Simulator(load_cluster("philly"), w, SimConfig(seed=0))
    m = sim.run(make_policy("fifo", "closest"))
    assert m["jobs"] == 3000
    assert 0.9 <= m["avg_trace_slowdown"] <= 1.2
    done = ~np.isnan(sim.finish_time)
    assert np.all(sim.job_work[done] * sim.job_ideal_iter[done] <= w.duration[done] * (1 + 1e-12))
    old = Simulator(load_cluster("philly"), w, SimConfig(seed=0, trace_speed="ideal"))
    assert old.run(make_policy("fifo", "closest"))["avg_trace_slowdown"] > 2.0
