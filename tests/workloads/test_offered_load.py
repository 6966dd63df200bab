"""Offered load has one definition (traced GPU-time = GPU-time at the typical-placement speed, ÷ GPUs × arrival span),
used by ``load=`` (:func:`scale_to_load`, :meth:`Workload.offered_load`) and by the simulator's ``offered_load``
metric, so a stated load is the measured one, heterogeneous clusters included.

Toy numbers (tests/toy.py): model 'additive' computes 0.1 s per iteration on 'fast' GPUs, 0.3 s on 'slow' ones.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpusched_envs.policies import make_policy
from gpusched_envs.sim import SimConfig, Simulator, load_cluster
from gpusched_envs.sim.topology import PRESETS
from gpusched_envs.workloads import load_workload, scale_to_load
from tests.toy import make_workload, one_rack


def _mixed(toy_catalog):
    # two 2-GPU servers, one of each type: a 1-GPU job's best-fit servers are both, so its typical iteration time
    # is the GPU-count-weighted mean (2·0.3 + 2·0.1) / 4 = 0.2 s, while the ideal one is the fast GPU's 0.1 s
    return one_rack(toy_catalog, (2, "slow"), (2, "fast"), name="mixed")


def _drain(sim):
    return sim.run(make_policy("fifo", "closest"))


def test_stated_load_is_measured_on_a_two_type_cluster(toy_catalog):
    c = _mixed(toy_catalog)
    # 400 s and 200 s of 1-GPU work arriving 3,000 s apart; scaled to 0.5 on 4 GPUs: (400 + 200) / (4 · 300) = 0.5
    w = scale_to_load(make_workload([(0, 400, 1), (3000, 200, 1)]), 0.5, c.num_gpus)
    assert w.submit_time[1] == pytest.approx(300.0)
    assert w.offered_load(4) == pytest.approx(0.5)
    sim = Simulator(c, w, SimConfig())
    assert sim.job_typical_iter == pytest.approx([0.2, 0.2])
    assert sim.job_work == pytest.approx([2000.0, 1000.0])  # duration / typical iteration time
    m = _drain(sim)
    assert m["jobs"] == 2 and m["offered_load"] == pytest.approx(0.5, rel=1e-12)
    # the old rule (ideal GPU-time: 2000 · 0.1 + 1000 · 0.1 = 300 s) measured half the stated load
    ideal_gpu_time = float(np.sum(sim.job_work * sim.job_ideal_iter))
    assert ideal_gpu_time / (4 * 300) == pytest.approx(0.25)
    # the lower bound on average JCT stays the ideal runtime (fast GPU): (200 + 100) / 2
    assert m["lower_bound_avg_jct"] == pytest.approx(150.0)


def test_ideal_trace_speed_measures_the_documented_factor(toy_catalog):
    # under trace_speed="ideal" durations are ideal runtimes: work 4000 + 2000 iterations, at the typical 0.2 s
    # that is 1,200 GPU-seconds, so the measured load is the stated 0.5 × typical / ideal = 1.0
    c = _mixed(toy_catalog)
    w = scale_to_load(make_workload([(0, 400, 1), (3000, 200, 1)]), 0.5, c.num_gpus)
    m = _drain(Simulator(c, w, SimConfig(trace_speed="ideal")))
    assert m["offered_load"] == pytest.approx(1.0, rel=1e-12)


def test_duration_speed_model_measures_the_stated_load(toy_catalog):
    c = _mixed(toy_catalog)
    w = scale_to_load(make_workload([(0, 400, 1), (10, 300, 2), (3000, 200, 1)]), 0.7, c.num_gpus)
    m = _drain(Simulator(c, w, SimConfig(speed_model="duration")))
    assert m["jobs"] == 3 and m["offered_load"] == pytest.approx(0.7, rel=1e-12)


def _typical_load(sim, num_gpus):
    """The metric's quantity over every job of the workload (dropped or unfinished ones included): what the run
    measures once every job has finished."""
    w = sim.workload
    share = sim.job_gpus_n * np.minimum(sim.job_milli, 1000) / 1000.0
    span = float(w.submit_time[-1] - w.submit_time[0])
    return float(np.sum(sim.job_work * sim.job_typical_iter * share)) / (num_gpus * span)


_CLUSTERS = {name: load_cluster(name) for name in PRESETS}


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("kind", ["synthetic", "philly"])
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(load=st.floats(0.3, 2.0), seed=st.integers(0, 2**16))
def test_every_preset_states_the_load_the_simulator_reads(preset, kind, load, seed):
    # exact by construction (work × typical iteration time = traced duration), so the tolerance is float rounding
    c = _CLUSTERS[preset]
    g = c.num_gpus
    spec = (
        f"synthetic:jobs=60,load={load},gpus={g},max_gpus={g}"
        if kind == "synthetic"
        else f"philly:jobs=60,load={load},gpus={g}"
    )
    w = load_workload(spec, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # jobs of VCs without a quota / larger than the cluster are dropped
        sim = Simulator(c, w, SimConfig(seed=seed, oversize="drop"))
    assert w.offered_load(g) == pytest.approx(load, rel=1e-9)
    assert _typical_load(sim, g) == pytest.approx(load, rel=1e-9)


@pytest.mark.parametrize(("preset", "ideal_share"), [("hetero64", 0.5), ("topdrl", 1.0)])
def test_a_drained_run_measures_the_stated_load(preset, ideal_share):
    # 40 synthetic jobs of up to 4 GPUs run to the end (nothing dropped): the metric, over finished jobs, is the
    # stated load. The old ideal-GPU-time rule reads well under it on hetero64, where such jobs' best-fit servers
    # are the 2- and 4-GPU K80/P100 ones (typical speed) while the ideal is a V100 on NVLink; on TopDRL (one type,
    # jobs within a server) both rules agree
    c = _CLUSTERS[preset]
    w = load_workload(f"synthetic:jobs=40,load=0.9,gpus={c.num_gpus},max_gpus=4", seed=1)
    sim = Simulator(c, w, SimConfig(seed=1))
    m = _drain(sim)
    assert m["jobs"] == 40 and m["dropped"] == 0
    assert m["offered_load"] == pytest.approx(0.9, rel=1e-9)
    share = sim.job_gpus_n * np.minimum(sim.job_milli, 1000) / 1000.0
    span = float(w.submit_time[-1] - w.submit_time[0])
    old = float(np.sum(sim.job_work * sim.job_ideal_iter * share)) / (c.num_gpus * span)
    if ideal_share < 1.0:
        assert old < ideal_share * 0.9
    else:
        assert old == pytest.approx(0.9, rel=1e-9)
