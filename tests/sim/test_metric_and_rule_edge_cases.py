"""Exact cases for metrics and rules: communication overhead excludes interference,
GPU sharers are not double-penalised, fragmentation stays inside the head job's pool, preemption happens only when
it lets a job start, input ranges are validated, and the DAG bandwidth matrix matches the throughput model."""

from __future__ import annotations

import pytest

from gpusched_envs.policies import make_policy
from gpusched_envs.sim import SimConfig, Simulator
from gpusched_envs.sim.catalog import CatalogError, parse_catalog
from gpusched_envs.sim.topology import build_cluster
from gpusched_envs.sim.workload import Workload
from tests.toy import TOY_CATALOG, make_workload, one_rack


def test_single_gpu_jobs_have_no_communication_overhead_even_when_slowed(toy_cluster):
    # two 1-GPU jobs on one server: 1.5x co-location slowdown, but nothing is communicated
    sim = Simulator(toy_cluster, make_workload([(0, 100, 1), (0, 100, 1)]), SimConfig())
    m = sim.run(make_policy("fifo", "first-fit"))
    assert m["communication_overhead"] == 0.0
    assert sim.finish_time.tolist() == pytest.approx([150.0, 150.0])


def test_communication_overhead_of_a_spread_job(toy_cluster):
    # 1 job on GPUs 0 and 4 (two servers of rack 0): compute 0.1 s, all-reduce 0.1 s, gamma 1 -> 0.2 s/iteration;
    # communication adds half of every iteration
    sim = Simulator(toy_cluster, make_workload([(0, 100, 2)]), SimConfig(interference=False))
    sim.next_decision()
    sim.start(0, [0, 4])
    while sim.next_decision():
        pass
    assert sim.metrics()["communication_overhead"] == pytest.approx(0.5)


def test_gpu_sharers_slow_each_other_by_space_sharing_only(toy_cluster):
    sim = Simulator(toy_cluster, make_workload([(0, 100, 1, 0, 500), (0, 100, 1, 0, 500)]), SimConfig())
    sim.next_decision()
    sim.start(0, [3])
    sim.start(1, [3])
    # the toy catalogue's sharing fraction 0.6, without the 1.5x server co-location factor on top
    assert 1.0 / sim.rate[0] == pytest.approx(0.1 / 0.6)


def test_fragmentation_counts_only_the_head_jobs_pool(toy_catalog):
    doc = {
        "name": "pools",
        "racks": [
            {
                "pool": "a",
                "servers": [{"count": 2, "gpus": 2, "gpu_type": "fast", "intra_link": "bus", "nic": "nic"}],
            },
            {
                "pool": "b",
                "servers": [{"count": 1, "gpus": 4, "gpu_type": "fast", "intra_link": "bus", "nic": "nic"}],
            },
        ],
    }
    cluster = build_cluster(doc, toy_catalog)
    # VC a: job0 holds one GPU of each server for 100 s, job1 (2 GPUs) then waits although 2 GPUs are free in a;
    # VC b's 4 idle GPUs must not count. Fragmented: 2 of 8 GPUs from t=0 to t=100, then nothing waits.
    w = Workload.from_columns(
        "w", [0, 0], [100, 50], [2, 2], vc=[0, 0], vc_names=("a",), model=[0, 0], model_names=("additive",)
    )
    sim = Simulator(cluster, w, SimConfig(speed_model="duration"))
    sim.next_decision()
    sim.start(0, [0, 2])
    while sim.next_decision():
        make_policy("fifo", "consolidate").schedule(sim)
    m = sim.metrics()
    assert sim.first_start[1] == 100.0
    assert m["fragmentation"] == pytest.approx((2 / 8) * 100 / 150)


def test_preemption_only_when_it_lets_the_job_start(toy_catalog):
    cluster = one_rack(toy_catalog, (4, "fast"), (4, "slow"), name="two-types")
    # job0 (100 s) lands on the fast server, job2 (10,000 s) on the slow one; job1 arrives at 10, fast GPUs only.
    # SRTF chooses job0 and job1; preempting job2 would free slow GPUs that job1 cannot use, so nobody is preempted
    # and job1 starts when job0 ends.
    w = Workload.from_columns(
        "w",
        [0, 10, 0],
        [100, 500, 10_000],
        [4, 4, 4],
        gpu_type=[-1, 0, -1],
        gpu_type_names=("fast",),
        model=[0, 0, 0],
        model_names=("additive",),
    )
    sim = Simulator(cluster, w, SimConfig(speed_model="duration"))
    m = sim.run(make_policy("srtf", "closest"))
    # rows are sorted by submit time: (0 s, 100 s), (0 s, 10,000 s), (10 s, fast only)
    assert m["preemptions"] == 0
    assert sim.first_start.tolist() == [0.0, 0.0, 100.0]


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [("num_gpus", 0, "num_gpus"), ("gpu_milli", 0, "gpu_milli"), ("duration", -1.0, "duration")],
)
def test_workload_rejects_out_of_range_rows(column, value, message):
    cols = {"num_gpus": [1, 1], "gpu_milli": [1000, 1000], "duration": [10.0, 10.0]}
    cols[column][1] = value
    with pytest.raises(ValueError, match=rf"row 1, field '{message}'"):
        Workload.from_columns("w", [0, 1], cols["duration"], cols["num_gpus"], gpu_milli=cols["gpu_milli"])


def test_catalogue_rejects_factors_that_would_break_the_lower_bound():
    doc = {**TOY_CATALOG, "interference": {"default_server_slowdown": 0.9}}
    with pytest.raises(CatalogError, match="slowdowns must be >= 1"):
        parse_catalog(doc)
    doc = {**TOY_CATALOG, "interference": {"default_gpu_share_fraction": 1.5}}
    with pytest.raises(CatalogError, match=r"in \(0, 1\]"):
        parse_catalog(doc)


def test_bandwidth_matrix_uses_the_slower_of_nic_and_intra_link(toy_catalog):
    doc = {
        "name": "slow-bus",
        "racks": [
            {"servers": [{"count": 2, "gpus": 2, "gpu_type": "fast", "intra_link": "nic", "nic": "bus"}]}
        ],
    }
    c = build_cluster(doc, toy_catalog)
    bw = c.bandwidth_matrix()
    assert bw[0, 1] == 10e9  # same server: the 10 GB/s intra link
    assert bw[0, 2] == 10e9  # across servers: min(NIC 100 GB/s, intra 10 GB/s)
