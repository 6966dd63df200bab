"""Each compiled kernel is compiled for one set of argument types: no literal-typed copies (a constant passed from
one kernel to another), one version of the observation writers for every obs mode; a pickled env continues as the
original does."""

from __future__ import annotations

import copy
import importlib
import pickle

import gymnasium as gym
import numpy as np
import pytest
from numba.core.registry import CPUDispatcher

import gpusched_envs.envs  # noqa: F401 - registers the ids
from gpusched_envs.policies import make_policy
from gpusched_envs.sim import SimConfig, Simulator, load_cluster
from gpusched_envs.sim import kernels as _kernels
from gpusched_envs.workloads import load_workload

KERNEL_MODULES = (
    "gpusched_envs.sim.engine_kernels",
    "gpusched_envs.sim.loop_kernels",
    "gpusched_envs.sim.stepper",
    "gpusched_envs.sim.encode_state",
    "gpusched_envs.sim.place_kernels",
    "gpusched_envs.sim.kernels",
    "gpusched_envs.workloads.dag.structure",
    "gpusched_envs.multi_agent.candidate_kernels",
)


def _dispatchers():
    for name in KERNEL_MODULES:
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if isinstance(value, CPUDispatcher) and value.__module__ == name:
                yield f"{name}.{attr}", value


def _step(env, steps: int = 20) -> None:
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        obs, _, terminated, truncated, _ = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
        if terminated or truncated:
            obs, _ = env.reset()


def test_no_kernel_is_compiled_for_a_literal_argument():
    cluster = load_cluster("hetero64")
    jobs = load_workload("synthetic:jobs=40,load=1.0,gpus=64,max_gpus=8", seed=0)
    for policy, placement in (("fifo", "closest"), ("tiresias", None), ("srtf", None), ("fifo", "pack")):
        Simulator(cluster, jobs, SimConfig(seed=0)).run(make_policy(policy, placement))
    literal = {
        name: [str(s) for s in d.signatures if "Literal" in str(s)]
        for name, d in _dispatchers()
        if d.signatures
    }
    assert {name: sigs for name, sigs in literal.items() if sigs} == {}


@pytest.mark.parametrize(
    ("env_id", "kernel", "modes"),
    [
        ("gpusched/JobSelect-v1", "encode_state.blocks", ("flat", "graph", "image")),
        ("gpusched/JobSelect-v1", "encode_state.new_state", ("flat", "graph", "image")),
        ("gpusched/JobSelect-v1", "stepper.new_state", ("flat", "graph", "image")),
        ("gpusched/DAGSchedule-v1", "kernels.dag_observe", ("flat", "graph")),
    ],
)
def test_one_version_of_the_observation_writer_serves_every_obs_mode(env_id, kernel, modes):
    """The first obs mode may compile the writer; the others reuse that version (signatures are process-wide, so
    other tests may have compiled versions for other argument types before: the count only must not grow)."""
    kwargs = {} if "DAG" in env_id else {"cluster": "hetero64"}
    module, name = kernel.split(".")
    dispatcher = getattr(importlib.import_module(f"gpusched_envs.sim.{module}"), name)
    _step(gym.make(env_id, obs_mode=modes[0], **kwargs))
    first = set(dispatcher.signatures)
    assert first
    for mode in modes[1:]:
        _step(gym.make(env_id, obs_mode=mode, **kwargs))
    assert set(dispatcher.signatures) == first


def test_transient_cache_starts_empty_when_pickled_or_copied():
    held = _kernels.TransientCache(jf=np.zeros(3))
    assert pickle.loads(pickle.dumps(held)) == {}
    assert copy.deepcopy(held) == {}
    assert type(pickle.loads(pickle.dumps(held))) is _kernels.TransientCache


def test_pickled_env_continues_identically():
    env = gym.make("gpusched/JobSelect-v1", cluster="hetero64", obs_mode="graph").unwrapped
    _step(env, 10)
    clone = pickle.loads(pickle.dumps(env))
    mask = env.action_masks()
    action = int(np.flatnonzero(mask)[0])
    a = env.step(action)
    b = clone.step(action)
    for key in a[0]:
        np.testing.assert_array_equal(a[0][key], b[0][key])
    assert a[1] == b[1]
