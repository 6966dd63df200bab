"""One sizing rule for workload specs on a cluster (:func:`fit_workload_to_cluster`), used by ``gpusched simulate``
and by every env: synthetic jobs never larger than the cluster, and the offered load over the cluster's GPUs."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import gpusched_envs  # noqa: F401  (registers the ids)
from gpusched_envs.sim import load_cluster
from gpusched_envs.workloads import load_workload
from gpusched_envs.workloads.sizing import DEFAULT_SYNTHETIC_LOAD, fit_workload_to_cluster


@pytest.mark.parametrize(
    ("spec", "sized"),
    [
        ("synthetic", "synthetic:load=0.9,gpus=16,max_gpus=16"),
        ("synthetic:jobs=50", "synthetic:jobs=50,load=0.9,gpus=16,max_gpus=16"),
        ("synthetic:jobs=50,load=1.2", "synthetic:jobs=50,load=1.2,gpus=16,max_gpus=16"),
        ("synthetic:jobs=50,load=1.2,gpus=64", "synthetic:jobs=50,load=1.2,gpus=64,max_gpus=16"),
        ("synthetic:rate=30", "synthetic:rate=30,max_gpus=16"),
        ("synthetic:max_gpus=4,load=0.5,gpus=16", "synthetic:max_gpus=4,load=0.5,gpus=16"),
        ("philly", "philly"),
        ("philly:jobs=100,oversize=drop", "philly:jobs=100,oversize=drop,max_gpus=16"),
        ("philly:jobs=100,max_gpus=8,oversize=drop", "philly:jobs=100,max_gpus=8,oversize=drop"),
    ],
)
def test_fit_workload_to_cluster_exact_specs(spec, sized):
    assert fit_workload_to_cluster(spec, load_cluster("tiny")) == sized
    assert fit_workload_to_cluster(spec, 16) == sized


def test_fit_workload_to_cluster_bad_input():
    with pytest.raises(TypeError, match="workload spec must be a string"):
        fit_workload_to_cluster(3, 16)
    with pytest.raises(ValueError, match="GPU count >= 1"):
        fit_workload_to_cluster("synthetic", 0)


def test_plain_synthetic_on_tiny_is_at_the_default_load_not_the_traced_rate():
    tiny = load_cluster("tiny")
    wl = load_workload(fit_workload_to_cluster("synthetic:jobs=200", tiny), seed=0)
    assert wl.offered_load(tiny.num_gpus) == pytest.approx(DEFAULT_SYNTHETIC_LOAD, rel=1e-6)
    assert int(wl.num_gpus.max()) <= tiny.num_gpus
    # the fit's traced rate on 16 GPUs is an offered load of ~20: what the rule avoids
    assert load_workload("synthetic:jobs=200", seed=0).offered_load(tiny.num_gpus) > 10


def test_env_with_a_synthetic_spec_larger_than_the_cluster_resets_and_runs():
    # topdrl has 32 GPUs; the fit draws jobs of up to 128 GPUs (job 140 of this seed asks for 64)
    env = gym.make(
        "gpusched/JobSelect-v1", workload="synthetic:jobs=300,load=0.9,gpus=32", disable_env_checker=True
    )
    env.reset(seed=1)
    sim = env.unwrapped.sim
    assert int(sim.job_gpus_n.max()) <= 32 and sim.num_jobs == 300
    mask = env.unwrapped.action_masks()
    env.step(int(np.flatnonzero(mask)[0]))
    env.close()


def test_env_and_simulate_load_the_same_workload_for_one_spec():
    from gpusched_envs.envs.core import make_workload

    tiny = load_cluster("tiny")
    a = make_workload("synthetic:jobs=40", tiny, seed=5, num_jobs=1, load=1.0)
    b = load_workload(fit_workload_to_cluster("synthetic:jobs=40", tiny), seed=5)
    assert a.fingerprint() == b.fingerprint()
