"""Cluster presets, custom YAML clusters and their validation errors."""

from __future__ import annotations

import numpy as np
import pytest

from gpusched_envs.sim.topology import (
    CROSS_RACK,
    SAME_GPU,
    SAME_RACK,
    SAME_SERVER,
    ClusterConfigError,
    list_presets,
    load_cluster,
)


@pytest.mark.parametrize(
    ("name", "racks", "servers", "gpus"),
    [
        ("tiny", 2, 4, 16),
        ("topdrl", 2, 8, 32),
        ("hetero64", 4, 18, 64),
        ("philly", 50, 552, 2 * 321 + 8 * 231),
        ("philly-vc", 11, 352, 8 * 352),
        ("openb", 122, 1213, 6212),
        ("pai2020", 147, 1814, 6742),
    ],
)
def test_preset_sizes(name, racks, servers, gpus):
    c = load_cluster(name)
    assert (c.num_racks, c.num_servers, c.num_gpus) == (racks, servers, gpus)
    assert c.server_first_gpu[-1] + c.server_num_gpus[-1] == c.num_gpus
    assert (c.rack_uplink_bandwidth > 0).all()


def test_hetero64_has_three_gpu_types_on_mixed_servers():
    c = load_cluster("hetero64")
    assert len(np.unique(c.gpu_type)) == 3
    assert set(c.server_num_gpus.tolist()) == {2, 4, 8}


def test_philly_vc_pools_have_their_quotas():
    c = load_cluster("philly-vc")
    sizes = {name: int(np.sum(c.server_pool == i)) for i, name in enumerate(c.pool_names)}
    assert sizes["6214e9"] == 64 and sizes["ed69ec"] == 8 and len(sizes) == 11


def test_distance_classes_and_bandwidth(toy_cluster):
    c = toy_cluster
    assert [c.distance(0, 0), c.distance(0, 3), c.distance(0, 4), c.distance(0, 8)] == [
        SAME_GPU,
        SAME_SERVER,
        SAME_RACK,
        CROSS_RACK,
    ]
    d = c.distance_matrix()
    assert d[0, 8] == CROSS_RACK and d[5, 6] == SAME_SERVER
    bw = c.bandwidth_matrix()
    assert bw[0, 1] == 100e9 and bw[0, 4] == 10e9 and bw[0, 8] == 5e9 and np.isinf(bw[2, 2])


def test_custom_cluster_from_a_path(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(
        "name: mine\nracks:\n  - count: 3\n    oversubscription: 4\n    servers:\n"
        "      - {count: 2, gpus: 8, gpu_type: A100, intra_link: nvlink, nic: ib100}\n"
    )
    c = load_cluster(path)
    assert (c.name, c.num_gpus, c.num_racks) == ("mine", 48, 3)
    assert c.rack_uplink_bandwidth[0] == pytest.approx(2 * c.catalog.link("ib100").bandwidth / 4)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("name: x\n", "racks: must be a non-empty list"),
        (
            "racks:\n  - servers: [{gpus: -2, gpu_type: V100}]\n",
            r"racks\[0\].servers\[0\].gpus: must be an integer >= 1",
        ),
        (
            "racks:\n  - servers: [{gpus: 2, gpu_type: H900}]\n",
            r"servers\[0\].gpu_type: unknown GPU type 'H900'",
        ),
        (
            "racks:\n  - servers: [{gpus: 2, gpu_type: V100, nic: carrier-pigeon}]\n",
            r"servers\[0\].nic: unknown link",
        ),
        (
            "racks:\n  - oversubscription: 0\n    servers: [{gpus: 2, gpu_type: V100}]\n",
            "oversubscription: must be",
        ),
        ("racks: [\n", "invalid YAML"),
    ],
)
def test_bad_cluster_files_name_the_field(tmp_path, body, message):
    path = tmp_path / "bad.yaml"
    path.write_text(body)
    with pytest.raises(ClusterConfigError, match=message) as info:
        load_cluster(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_unknown_preset():
    with pytest.raises(ClusterConfigError, match="not a preset"):
        load_cluster("moon-base")
    assert "philly" in list_presets()
