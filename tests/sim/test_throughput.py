"""Hand-computed iteration times on the toy catalogue: 1 GB gradients, bus 100 GB/s, NIC 10 GB/s,
rack uplink 5 GB/s, compute 0.1 s on 'fast' and 0.3 s on 'slow'."""

from __future__ import annotations

import numpy as np
import pytest

from gpusched_envs.sim.throughput import (
    all_reduce_time,
    ideal_iteration_time,
    overlap,
    predict_iteration_time,
)
from gpusched_envs.sim.topology import build_cluster


def test_single_gpu_has_no_communication(toy_cluster):
    it = predict_iteration_time(toy_cluster, "additive", [0])
    assert (it.compute, it.communication, it.total, it.communication_fraction) == (0.1, 0.0, 0.1, 0.0)


def test_consolidated_on_one_server(toy_cluster):
    # ring all-reduce over the bus: 2*3/4 * 1e9 / 100e9 = 0.015 s; gamma=1 adds it to compute
    it = predict_iteration_time(toy_cluster, "additive", [0, 1, 2, 3])
    assert it.communication == pytest.approx(0.015)
    assert it.total == pytest.approx(0.115)


def test_cross_server_same_rack_uses_the_nic(toy_cluster):
    # GPUs 0 and 4 sit on servers 0 and 1 of rack 0: 2*1/2 * 1e9 / 10e9 = 0.1 s
    it = predict_iteration_time(toy_cluster, "additive", [0, 4])
    assert it.communication == pytest.approx(0.1)
    assert it.total == pytest.approx(0.2)


def test_cross_rack_is_bounded_by_the_uplink(toy_cluster):
    # GPU 8 is in rack 1: bottleneck min(10, 5) GB/s -> 0.2 s
    it = predict_iteration_time(toy_cluster, "additive", [0, 8])
    assert it.communication == pytest.approx(0.2)
    assert it.total == pytest.approx(0.3)


def test_uplink_shared_by_crossing_jobs(toy_cluster):
    # one more job on the uplink halves its bandwidth: 1e9 / 2.5e9 = 0.4 s
    it = predict_iteration_time(toy_cluster, "additive", [0, 8], other_jobs_crossing_uplinks=1)
    assert it.communication == pytest.approx(0.4)
    assert it.total == pytest.approx(0.5)


def test_overlap_gamma_two(toy_cluster):
    it = predict_iteration_time(toy_cluster, "overlapped", [0, 4])
    assert it.total == pytest.approx(np.hypot(0.1, 0.1))


def test_slowest_gpu_sets_compute(toy_catalog):
    doc = {
        "name": "mixed",
        "racks": [
            {
                "servers": [
                    {"count": 1, "gpus": 2, "gpu_type": "fast", "intra_link": "bus", "nic": "nic"},
                    {"count": 1, "gpus": 2, "gpu_type": "slow", "intra_link": "bus", "nic": "nic"},
                ]
            }
        ],
    }
    c = build_cluster(doc, toy_catalog)
    it = predict_iteration_time(c, "additive", [0, 2])
    assert it.compute == pytest.approx(0.3)
    assert it.total == pytest.approx(0.3 + 0.1)


def test_hop_latency_is_added_per_ring_step(toy_catalog):
    doc = {
        "name": "lat",
        "racks": [
            {"servers": [{"count": 2, "gpus": 2, "gpu_type": "fast", "intra_link": "bus", "nic": "laggy"}]}
        ],
    }
    c = build_cluster(doc, toy_catalog)
    # 3 GPUs over 2 servers: 2*2/3 * 1e9/10e9 + 4 * 1 ms
    it = predict_iteration_time(c, "additive", [0, 1, 2])
    assert it.communication == pytest.approx(4 / 3 * 0.1 + 0.004)


def test_colocation_and_gpu_sharing_factors(toy_cluster):
    it = predict_iteration_time(toy_cluster, "additive", [0], colocated_models=("overlapped",))
    assert it.total == pytest.approx(0.15)
    it = predict_iteration_time(toy_cluster, "additive", [0], gpu_sharing_model="overlapped")
    assert it.total == pytest.approx(0.1 / 0.6)


def test_network_sensitivity_spread_over_consolidated(toy_cluster):
    """Network sensitivity = iteration time across racks / consolidated on one server."""
    consolidated = predict_iteration_time(toy_cluster, "additive", [0, 1]).total  # 0.1 + 1e9/100e9 = 0.11
    spread = predict_iteration_time(toy_cluster, "additive", [0, 8]).total  # 0.3
    assert spread / consolidated == pytest.approx(0.3 / 0.11)


def test_ideal_time_is_a_lower_bound(toy_cluster):
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(1, 9))
        gpus = rng.choice(16, size=n, replace=False)
        actual = predict_iteration_time(toy_cluster, "overlapped", gpus).total
        assert actual >= ideal_iteration_time(toy_cluster, 1, n) - 1e-12


def test_formula_helpers():
    assert all_reduce_time(1, 1e9, 1e9, 1.0) == 0.0
    assert all_reduce_time(4, 4e9, 1e9, 0.0) == pytest.approx(6.0)
    assert overlap(3.0, 4.0, 2.0) == pytest.approx(5.0)
    assert overlap(3.0, 0.0, 2.0) == 3.0


def test_bad_gpu_ids_are_rejected(toy_cluster):
    with pytest.raises(ValueError, match="in 0..15"):
        predict_iteration_time(toy_cluster, "additive", [99])
    with pytest.raises(ValueError, match="distinct"):
        predict_iteration_time(toy_cluster, "additive", [1, 1])
    with pytest.raises(KeyError, match="unknown model"):
        predict_iteration_time(toy_cluster, "nope", [1])
