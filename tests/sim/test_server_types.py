"""Catalogue server types (Azure ND40rs_v2 host overhead): a host-staged intra-server link shared by the
job's GPUs on the server, and host seconds per sample added to the single-GPU time of models not measured there.

Toy numbers: 1 GB gradients, compute 0.1 s, γ = 1; a host path of 8 GB/s shared by the GPUs; 1 ms host work per
sample, batch 10 -> +0.01 s per iteration for the model not measured on the server type.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from gpusched_envs.sim.catalog import CatalogError, default_catalog, parse_catalog
from gpusched_envs.sim.throughput import ideal_iteration_time, predict_iteration_time
from gpusched_envs.sim.topology import PRESETS, ClusterConfigError, build_cluster, load_cluster
from tests.toy import TOY_CATALOG


def _catalog(**server_type):
    doc = copy.deepcopy(TOY_CATALOG)
    doc["links"]["host"] = {"bandwidth_gbytes_per_s": 8.0, "latency_s": 0.0, "shared_by_gpus": True}
    doc["models"]["additive"]["batch_size"] = 10
    doc["models"]["overlapped"]["batch_size"] = 10
    spec = {
        "gpu_type": "fast",
        "gpus": 4,
        "intra_link": "host",
        "nic": "nic",
        "host_s_per_sample": 0.001,
        "measured_models": ["overlapped"],
    }
    spec.update(server_type)
    doc["server_types"] = {"vm": spec}
    return parse_catalog(doc, "toy-vm")


def _cluster(catalog, servers=None):
    servers = servers or [{"count": 2, "server_type": "vm"}]
    return build_cluster({"name": "vm", "racks": [{"count": 1, "servers": servers}]}, catalog, where="vm")


def test_host_overhead_added_only_where_not_measured_on_the_type():
    c = _cluster(_catalog())
    assert predict_iteration_time(c, "additive", [0]).total == pytest.approx(0.1 + 10 * 0.001)
    assert predict_iteration_time(c, "overlapped", [0]).total == pytest.approx(
        0.1
    )  # measured there: included
    assert c.gpu_speed(0)[0] == pytest.approx(1 / 0.11)


def test_shared_host_path_divides_by_the_gpus_on_the_server():
    c = _cluster(_catalog(host_s_per_sample=0.0))
    # 2 GPUs on one VM: ring 2·1/2 · 1 GB over 8/2 GB/s = 0.25 s; 4 GPUs: 2·3/4 · 1 GB / (8/4 GB/s) = 0.75 s
    assert predict_iteration_time(c, "additive", [0, 1]).communication == pytest.approx(0.25)
    assert predict_iteration_time(c, "additive", [0, 1, 2, 3]).communication == pytest.approx(0.75)
    # 1+1 over two VMs: each VM's path carries one GPU (8 GB/s), the NIC (10 GB/s) does not bound it: 1 GB / 8 GB/s
    assert predict_iteration_time(c, "additive", [0, 4]).communication == pytest.approx(0.125)
    # 2+2: path 8/2 = 4 GB/s per VM bounds the ring: 2·3/4 · 1 GB / 4 GB/s
    assert predict_iteration_time(c, "additive", [0, 1, 4, 5]).communication == pytest.approx(0.375)


def test_ideal_time_stays_a_lower_bound_on_server_types():
    c = _cluster(_catalog())
    for m in (0, 1):
        for n in (1, 2, 4, 8):
            ideal = ideal_iteration_time(c, m, n)
            packed = predict_iteration_time(c, m, list(range(n))).total
            assert ideal <= packed + 1e-12


def test_explicit_fields_override_the_server_type():
    c = _cluster(_catalog(), [{"count": 1, "server_type": "vm", "gpus": 2}])
    assert c.num_gpus == 2
    assert c.server_intra_shared.tolist() == [True]


def test_plain_clusters_keep_the_plain_arithmetic():
    # no preset is a catalogue server type: their results stay bit-identical (no overhead array, no shared links)
    for name in PRESETS:
        c = load_cluster(name)
        assert c.server_compute_overhead is None and c.server_intra_shared is None, name


def test_bundled_nd40rs_v2_type():
    cat = default_catalog()
    st = cat.server_types["ND40rs_v2"]
    assert st.gpu_type == "V100" and cat.links[st.intra_link].shared_by_gpus
    overhead = st.compute_overhead(cat)
    measured = np.isin(np.array(cat.model_names), st.measured_models)
    assert (overhead[measured] == 0).all() and (overhead[~measured] > 0).all()
    c = build_cluster({"name": "az", "racks": [{"servers": [{"count": 2, "server_type": "ND40rs_v2"}]}]}, cat)
    # the Azure profiles' signature: 8 GPUs in one VM slower than 8 spread 4+4 over two VMs for a large model
    bert = cat.model_index("bert")
    one_vm = predict_iteration_time(c, bert, list(range(8))).total
    two_vms = predict_iteration_time(c, bert, [0, 1, 2, 3, 8, 9, 10, 11]).total
    assert two_vms < one_vm


def test_bad_server_types_name_the_field():
    with pytest.raises(CatalogError, match=r"server_types\.vm\.intra_link: unknown link 'nope'"):
        _catalog(intra_link="nope")
    with pytest.raises(CatalogError, match=r"server_types\.vm\.measured_models: unknown model"):
        _catalog(measured_models=["gpt"])
    with pytest.raises(CatalogError, match=r"server_types\.vm\.host_s_per_sample"):
        _catalog(host_s_per_sample=-1)
    with pytest.raises(ClusterConfigError, match=r"servers\[0\]\.server_type: unknown server type 'x'"):
        _cluster(_catalog(), [{"count": 1, "server_type": "x"}])
