"""Bundled DAG data: TPC-H, PipeDream, GPT-2 (exact task counts)."""

from __future__ import annotations

import numpy as np
import pytest

from gpusched_envs.workloads.dag import gpt2_dag, layer_graph, pipedream_dag, pipedream_models, tpch_dag
from gpusched_envs.workloads.dag.tpch import QUERIES, SIZES

LAYERS = {  # node / edge counts from the PipeDream graphs (pipedream_models.csv)
    "alexnet": (23, 23),
    "densenet121": (429, 487),
    "inception_v3": (326, 362),
    "nasnetalarge": (1251, 1468),
    "nasnetamobile": (921, 1078),
    "resnet101": (347, 380),
    "resnet18": (71, 79),
    "resnet50": (177, 193),
    "resnext101": (347, 380),
    "resnext50": (177, 193),
    "squeezenet1_0": (68, 76),
    "vgg16": (41, 41),
    "gnmt": (48, 58),
    "gnmt_large": (96, 122),
}


def test_tpch_all_queries():
    total_stages = total_edges = 0
    for size in SIZES:
        for q in QUERIES:
            d = tpch_dag(q, size)
            total_stages += d.num_tasks
            total_edges += d.num_edges
            assert (d.work > 0).all()
    assert (total_stages, total_edges) == (1414, 1309)
    d = tpch_dag(9, "10g")
    assert (d.num_tasks, d.num_edges, d.depth) == (14, 13, 8)
    assert d.meta["num_tasks"][0] > 0


def test_pipedream_layer_graphs():
    assert sorted(pipedream_models()) == sorted(LAYERS)
    for m, (n, e) in LAYERS.items():
        g = layer_graph(m)
        assert (g.num_tasks, g.num_edges) == (n, e), m


def test_pipedream_training_steps():
    # vgg16: 41 layers, 16 with parameters (13 conv + 3 linear)
    d1 = pipedream_dag("vgg16", mode="data", gpus=1)
    assert (d1.num_tasks, d1.num_edges) == (82, 2 * 41 + 41)
    d4 = pipedream_dag("vgg16", mode="data", gpus=4)
    assert d4.num_tasks == 4 * 82 + 16 + 4
    assert d4.num_edges == 4 * (2 * 41 + 41) + 2 * 4 * 16
    assert d4.critical_path_length() == pytest.approx(d1.critical_path_length())
    # fwd + bwd without data loading: 233.902 + 438.633 ms per replica
    assert d1.total_work == pytest.approx((233.902 + 438.633) / 1000, rel=1e-4)
    p = pipedream_dag("resnet50", mode="pipeline", gpus=4, microbatches=8)
    assert p.num_tasks == 2 * 4 * 8 + 4
    assert np.bincount(p.meta["layer_stage"]).min() >= 1
    assert p.total_work == pytest.approx((182.488 + 260.931) / 1000, rel=1e-3)
    with pytest.raises(ValueError, match="mode"):
        pipedream_dag("vgg16", mode="tensor")


def test_gpt2():
    for phase, ms in (("prefill", 1423.7), ("decode", 75.8)):
        d = gpt2_dag(phase)
        assert (d.num_tasks, d.num_edges) == (327, 614)
        assert d.total_work * 1000 == pytest.approx(ms, abs=0.1)
        assert d.task_names[0] == "embed"
