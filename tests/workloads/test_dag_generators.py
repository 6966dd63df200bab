"""DAG generators: random layered (Topcuoglu) and the Alibaba-fitted generator; spec strings."""

from __future__ import annotations

import numpy as np
import pytest

from gpusched_envs.workloads.dag import alibaba_like_dag, load_dag, random_layered_dag
from gpusched_envs.workloads.dag.alibaba_like import load_fit


@pytest.mark.parametrize("seed", range(10))
def test_random_layered_shape(seed):
    n = [1, 2, 10, 50, 120][seed % 5]
    d = random_layered_dag(n, alpha=[0.5, 1.0, 2.0][seed % 3], out_degree=1 + seed % 4, seed=seed)
    assert d.num_tasks == n
    assert len(d.topological_order) == n  # acyclic (the constructor validates, this checks the order)
    assert (d.in_degree[d.level > 0] >= 1).all()
    assert (d.work > 0).all()
    assert d.hetero.shape == (n, 64)


def test_random_layered_seeded_and_knobs():
    assert random_layered_dag(50, seed=7) == random_layered_dag(50, seed=7)
    assert random_layered_dag(50, seed=7) != random_layered_dag(50, seed=8)
    wide = np.mean([random_layered_dag(100, alpha=2.0, seed=s).depth for s in range(5)])
    tall = np.mean([random_layered_dag(100, alpha=0.5, seed=s).depth for s in range(5)])
    assert tall > 2 * wide
    d = random_layered_dag(400, ccr=2.0, beta=0.0, seed=1)
    assert d.hetero is None
    assert d.ccr(1e10) == pytest.approx(2.0, rel=0.15)
    with pytest.raises(ValueError, match="alpha"):
        random_layered_dag(10, alpha=0)


def test_alibaba_like():
    fit = load_fit()
    assert "command" in fit and fit["tasks_per_job_pmf"]
    for s in range(30):
        d = alibaba_like_dag(seed=s)
        assert d.num_tasks >= 2
    d = alibaba_like_dag(40, seed=3)
    assert d.num_tasks == 40 and d == alibaba_like_dag(40, seed=3)
    assert alibaba_like_dag(1, seed=0).num_tasks == 1
    assert alibaba_like_dag(150, seed=0, ccr=1.0).ccr(1e10) == pytest.approx(1.0)


def test_specs():
    d = load_dag("dag:random:n=50,ccr=1.0,alpha=1.0,out_degree=3,beta=0.5", seed=4)
    assert d == random_layered_dag(50, ccr=1.0, alpha=1.0, out_degree=3, beta=0.5, seed=4)
    assert load_dag("dag:alibaba:n=25", seed=1).num_tasks == 25
    assert load_dag("dag:tpch:q=9,size=10g").num_tasks == 14
    assert load_dag("dag:pipedream:model=vgg16,mode=pipeline,gpus=4").num_tasks == 36
    assert load_dag("dag:gpt2:phase=prefill").num_tasks == 327


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("dag:nope", "valid: random, alibaba"),
        ("dag:random:size=3", "valid: n, alpha"),
        ("dag:random:n=x", "not a valid int"),
        ("random:n=3", "dag:<kind>"),
        ("dag:pipedream:model=lenet", "valid: alexnet"),
        ("dag:tpch:q=9,size=3g", "valid: 2g"),
        ("dag:gpt2:phase=train", "valid: prefill, decode"),
        ("dag:alibaba2018:job=j_1", "needs path"),
    ],
)
def test_spec_errors(spec, match):
    with pytest.raises(ValueError, match=match):
        load_dag(spec)
