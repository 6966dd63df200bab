"""Network model: the slowest hop crossed sets the latency, NICs and uplinks are shared in
proportion to the traffic of the jobs sending through them, and a job waiting out its restart delay sends nothing.

Toy numbers (tests/toy.py): 1 GB gradients, bus 100 GB/s, NIC 10 GB/s, rack uplink 5 GB/s, compute 0.1 s, γ = 1.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpusched_envs.sim import SimConfig, Simulator
from gpusched_envs.sim.engine import RESTARTING
from gpusched_envs.sim.throughput import all_reduce_time, overlap, predict_iteration_time
from gpusched_envs.sim.topology import PRESETS, load_cluster
from tests.toy import make_workload


def _iteration(sim: Simulator, job: int) -> float:
    return 1.0 / sim.rate[job]


# ---------------------------------------------------------------- exact hand cases on the toy cluster
def test_two_jobs_on_the_same_two_nics_halve_each_other(toy_cluster):
    # 4 GPUs 2+2 on servers 0 and 1: alone 2·3/4 · 1e9 / 10e9 = 0.15 s of all-reduce -> 0.25 s; sharing both NICs
    # with an identical job halves the bandwidth -> 0.3 s -> 0.4 s
    sim = Simulator(toy_cluster, make_workload([(0, 100, 4), (0, 100, 4)]), SimConfig(interference=False))
    sim.next_decision()
    sim.start(0, [0, 1, 4, 5])
    assert _iteration(sim, 0) == pytest.approx(0.25)
    sim.start(1, [2, 3, 6, 7])
    assert _iteration(sim, 0) == pytest.approx(0.4)
    assert _iteration(sim, 1) == pytest.approx(0.4)


def test_nic_shares_are_proportional_to_offered_traffic(toy_cluster):
    # job 0: 4 GPUs 2+2, alone 0.25 s/it sending 1.5e9 B per iteration -> offers 6e9 B/s
    # job 1: 2 GPUs 1+1, alone 1e9/10e9 = 0.1 s + 0.1 s compute = 0.2 s/it sending 1e9 B -> offers 5e9 B/s
    # each NIC splits 10 GB/s 6:5 -> job 0: 1.5e9 / (10e9·6/11) = 0.275 s -> 0.375 s;
    #                                  job 1: 1e9 / (10e9·5/11) = 0.22 s -> 0.32 s
    sim = Simulator(toy_cluster, make_workload([(0, 100, 4), (0, 100, 2)]), SimConfig(interference=False))
    sim.next_decision()
    sim.start(0, [0, 1, 4, 5])
    sim.start(1, [2, 6])
    assert _iteration(sim, 0) == pytest.approx(0.375)
    assert _iteration(sim, 1) == pytest.approx(0.32)


def test_jobs_on_one_server_use_no_nic(toy_cluster):
    sim = Simulator(toy_cluster, make_workload([(0, 100, 4), (0, 100, 4)]), SimConfig(interference=False))
    sim.next_decision()
    sim.start(0, [0, 1, 4, 5])
    sim.start(1, [8, 9, 10, 11])  # consolidated on server 2: its all-reduce stays on the bus
    assert _iteration(sim, 0) == pytest.approx(0.25)
    assert _iteration(sim, 1) == pytest.approx(0.1 + 1.5e9 / 100e9)
    assert sim.nic_load[2] == 0.0


def test_a_restarting_neighbour_frees_the_uplink(toy_cluster):
    # two 1+1 jobs across racks 0 and 1 on different servers share only the 5 GB/s uplinks: 1e9/2.5e9 = 0.4 s of
    # all-reduce -> 0.5 s each; while job 1 waits out its 30 s restart delay, job 0 is alone: 1e9/5e9 -> 0.3 s
    w = make_workload([(0, 1000, 2), (0, 1000, 2), (40, 10, 16)])  # job 2 only makes a decision point at t=40
    sim = Simulator(toy_cluster, w, SimConfig(interference=False, restart_delay=30.0))
    sim.next_decision()
    sim.start(0, [0, 8])
    sim.start(1, [4, 12])
    assert _iteration(sim, 0) == pytest.approx(0.5)
    sim.preempt(1)
    assert _iteration(sim, 0) == pytest.approx(0.3)
    sim.start(1, [4, 12])
    assert sim.status[1] == RESTARTING
    assert _iteration(sim, 0) == pytest.approx(0.3)  # the restarting job sends nothing
    assert sim.rack_crossing.tolist() == [1, 1]
    assert sim.next_decision() and sim.now == 40.0  # restart done at t=30
    assert _iteration(sim, 0) == pytest.approx(0.5)
    assert _iteration(sim, 1) == pytest.approx(0.5)


def test_latency_is_the_slowest_hop_crossed(toy_catalog):
    from gpusched_envs.sim.topology import build_cluster

    # the intra-server link is the laggy one (1 ms), the NIC has no latency: across servers the ring still crosses
    # the intra-server link, so every one of its 2(n-1) steps pays 1 ms
    doc = {
        "name": "laggy-bus",
        "racks": [
            {"servers": [{"count": 2, "gpus": 2, "gpu_type": "fast", "intra_link": "laggy", "nic": "bus"}]}
        ],
    }
    c = build_cluster(doc, toy_catalog)
    packed = predict_iteration_time(c, "additive", [0, 1]).communication
    spread = predict_iteration_time(c, "additive", [0, 2]).communication
    assert packed == pytest.approx(1e9 / 10e9 + 2 * 0.001)
    assert spread == pytest.approx(1e9 / 10e9 + 2 * 0.001)


# ---------------------------------------------------------------- the audit's cases on the bundled presets
def _formula(cluster, model: str, gpu_type: str, n: int, bandwidth: float, latency: float) -> float:
    cat = cluster.catalog
    m = cat.model_index(model)
    compute = cat.iteration_time[m, cat.gpu_index(gpu_type)]
    return overlap(
        compute, all_reduce_time(n, cat.gradient_bytes[m], bandwidth, latency), cat.overlap_gamma[m]
    )


@pytest.mark.parametrize("model", ["resnet50", "ncf"])
def test_philly_spread_over_two_servers_is_not_faster_than_packed(model):
    # audit: 8 GPUs 4+4 came out faster than packed (NIC latency 1 us taken instead of PCIe's 197 us). Both now
    # cross the PCIe 3.0 link (the slower one, bandwidth and latency): equal, and equal to the hand formula.
    c = load_cluster("philly")
    big = np.flatnonzero(c.server_num_gpus == 8)
    first = c.server_first_gpu
    packed = list(range(first[big[0]], first[big[0]] + 8))
    spread = list(range(first[big[0]], first[big[0]] + 4)) + list(range(first[big[1]], first[big[1]] + 4))
    pcie = c.catalog.links["pcie3"]
    expected = _formula(c, model, "P100", 8, pcie.bandwidth, pcie.latency)
    assert predict_iteration_time(c, model, packed).total == pytest.approx(expected, rel=1e-12)
    assert predict_iteration_time(c, model, spread).total == pytest.approx(expected, rel=1e-12)


def test_tiny_two_jobs_two_plus_two_share_the_nics():
    # audit: two 4-GPU jobs 2+2 on the same two `tiny` servers each kept their solo time; the 25 GbE NIC (slower
    # than NVLink) is now split between them
    c = load_cluster("tiny")
    eth = c.catalog.links["eth25"]
    alone = _formula(
        c, "resnet50", "V100", 4, eth.bandwidth, max(eth.latency, c.catalog.links["nvlink"].latency)
    )
    shared = _formula(
        c, "resnet50", "V100", 4, eth.bandwidth / 2, max(eth.latency, c.catalog.links["nvlink"].latency)
    )
    w = make_workload([(0, 100, 4, 0), (0, 100, 4, 0)], model_names=("resnet50",))
    sim = Simulator(c, w, SimConfig(interference=False))
    sim.next_decision()
    sim.start(0, [0, 1, 4, 5])
    assert _iteration(sim, 0) == pytest.approx(alone, rel=1e-12)
    sim.start(1, [2, 3, 6, 7])
    assert _iteration(sim, 0) == pytest.approx(shared, rel=1e-12)
    assert _iteration(sim, 1) == pytest.approx(shared, rel=1e-12)
    assert shared > 1.8 * alone


# ---------------------------------------------------------------- properties over every preset x model
@st.composite
def spread_cases(draw):
    cluster = load_cluster(draw(st.sampled_from(PRESETS)))
    model = draw(st.integers(0, len(cluster.catalog.model_names) - 1))
    gpu_type = draw(st.sampled_from(sorted(set(cluster.server_gpu_type.tolist()))))
    servers = np.flatnonzero((cluster.server_gpu_type == gpu_type) & (cluster.server_num_gpus >= 2))
    if len(servers) < 2:
        servers = np.flatnonzero(cluster.server_gpu_type == gpu_type)
    home = int(draw(st.sampled_from(servers.tolist())))
    size = int(cluster.server_num_gpus[home])
    n = draw(st.integers(min(2, size), size))
    others = [int(s) for s in servers if s != home]
    k = draw(st.integers(1, max(1, min(len(others), n - 1)))) if others and n >= 2 else 0
    chosen = draw(st.permutations(others))[:k] if k else []
    return cluster, model, home, n, chosen


def _gpus_over(cluster, servers: list[int], n: int) -> list[int]:
    """n GPUs dealt round-robin over the given servers (each server at least one when n allows)."""
    slots = [
        list(range(cluster.server_first_gpu[s], cluster.server_first_gpu[s] + cluster.server_num_gpus[s]))
        for s in servers
    ]
    out: list[int] = []
    i = 0
    while len(out) < n:
        if slots[i % len(slots)]:
            out.append(slots[i % len(slots)].pop(0))
        i += 1
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spread_cases())
def test_spreading_is_never_faster_than_packing(case):
    cluster, model, home, n, others = case
    packed = predict_iteration_time(cluster, model, _gpus_over(cluster, [home], n)).total
    if others and n >= 2:
        spread_gpus = _gpus_over(cluster, [home, *others], n)
        assert len(set(cluster.gpu_server[spread_gpus].tolist())) >= 2
        spread = predict_iteration_time(cluster, model, spread_gpus).total
        assert spread >= packed * (1 - 1e-12)
    # and nothing at all beats the ideal time that normalises slowdowns
    from gpusched_envs.sim.throughput import ideal_iteration_time

    assert packed >= ideal_iteration_time(cluster, model, n) * (1 - 1e-12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spread_cases())
def test_two_jobs_on_one_nic_slow_each_other(case):
    cluster, model, home, n, others = case
    if not others or n < 2:
        return
    gpus = _gpus_over(cluster, [home, *others], n)
    alone = predict_iteration_time(cluster, model, gpus)
    shared = predict_iteration_time(cluster, model, gpus, other_jobs_on_nics=1)
    assert shared.total >= alone.total
    # strictly slower exactly when half a NIC is narrower than every other link the ring crosses
    servers = sorted(set(cluster.gpu_server[gpus].tolist()))
    nic = cluster.server_nic_bandwidth[servers].min()
    others_bw = cluster.server_intra_bandwidth[servers].min()
    racks = np.unique(cluster.server_rack[servers])
    if len(racks) > 1:
        others_bw = min(others_bw, cluster.rack_uplink_bandwidth[racks].min())
    if nic / 2 < min(nic, others_bw) * (1 - 1e-9):
        assert shared.communication > alone.communication
        assert shared.total > alone.total
