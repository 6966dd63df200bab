"""Every env has a -v1 id; the -v0 ids are refused with an error naming the -v1 id (with V0_REFUSED off they would
make the same envs); the module:id form and a picklable factory let spawned workers find the ids."""

from __future__ import annotations

import pickle

import gymnasium as gym
import numpy as np
import pytest

import gpusched_envs
from gpusched_envs import envs as registration
from gpusched_envs import make_env_fn

V1 = sorted(registration.CURRENT_IDS)
SMALL = {
    "gpusched/JobSelect-v1": {"cluster": "tiny", "num_jobs": 6},
    "gpusched/WorkerPlacement-v1": {"cluster": "tiny", "num_jobs": 6},
    "gpusched/DelayTuning-v1": {"cluster": "tiny", "num_jobs": 6},
    "gpusched/DAGSchedule-v1": {"dag": "dag:random:n=6", "gpus": 4},
}


def test_every_env_has_a_v1_id_and_its_v0():
    assert V1 == [
        "gpusched/DAGSchedule-v1",
        "gpusched/DelayTuning-v1",
        "gpusched/JobSelect-v1",
        "gpusched/WorkerPlacement-v1",
    ]
    for env_id in V1:
        assert env_id in gym.registry and env_id.replace("-v1", "-v0") in gym.registry


@pytest.mark.parametrize("env_id", V1)
def test_v0_without_refusal_makes_the_same_env_as_v1(env_id, monkeypatch):
    monkeypatch.setattr(registration, "V0_REFUSED", False)
    a = gym.make(env_id, **SMALL[env_id])
    b = gym.make(env_id.replace("-v1", "-v0"), **SMALL[env_id])
    assert type(a.unwrapped) is type(b.unwrapped)
    (oa, _), (ob, _) = a.reset(seed=2), b.reset(seed=2)
    assert all(np.array_equal(oa[k], ob[k]) for k in oa)


@pytest.mark.parametrize("env_id", V1)
def test_every_v0_id_is_refused_naming_its_v1_id(env_id):
    old = env_id.replace("-v1", "-v0")
    with pytest.raises(gym.error.DeprecatedEnv, match=f"{old} is no longer offered: use {env_id}"):
        gym.make(old)


def test_v0_refused_names_the_v1_id(monkeypatch):
    monkeypatch.setattr(registration, "V0_REFUSED", True)
    with pytest.raises(
        gym.error.DeprecatedEnv, match="gpusched/JobSelect-v0 is no longer offered: use gpusched/JobSelect-v1"
    ):
        gym.make("gpusched/JobSelect-v0")
    gym.make("gpusched/JobSelect-v1", **SMALL["gpusched/JobSelect-v1"])  # v1 unaffected


def test_module_id_form_imports_the_package():
    env = gym.make("gpusched_envs:gpusched/DAGSchedule-v1", **SMALL["gpusched/DAGSchedule-v1"])
    assert env.spec.id == "gpusched/DAGSchedule-v1"


def test_make_env_fn_is_picklable_and_makes_the_env():
    fn = make_env_fn("gpusched/JobSelect-v1", cluster="tiny", num_jobs=6)
    clone = pickle.loads(pickle.dumps(fn))
    assert repr(clone) == "make_env_fn('gpusched/JobSelect-v1', cluster='tiny', num_jobs=6)"
    assert clone().unwrapped.cluster.name == "tiny"
    with pytest.raises(TypeError, match="env_id must be a string"):
        make_env_fn(lambda: None)


def test_spawned_async_workers_find_the_ids():
    # the factory is pickled by reference to gpusched_envs, so the spawned worker imports the package
    fns = [
        make_env_fn("gpusched/JobSelect-v1", cluster="tiny", num_jobs=6, obs_mode="flat") for _ in range(2)
    ]
    envs = gym.vector.AsyncVectorEnv(fns, context="spawn")
    try:
        obs, infos = envs.reset(seed=0)
        assert obs["action_mask"].shape[0] == 2 and infos["time"].dtype == np.float64
        actions = np.array([int(np.flatnonzero(m)[0]) for m in obs["action_mask"]])
        envs.step(actions)
    finally:
        envs.close()


@pytest.mark.slow
def test_sb3_subproc_vec_env_spawn():
    vec_env = pytest.importorskip("stable_baselines3.common.vec_env")
    fns = [make_env_fn("gpusched/DAGSchedule-v1", obs_mode="flat", **SMALL["gpusched/DAGSchedule-v1"])] * 2
    venv = vec_env.SubprocVecEnv(fns, start_method="spawn")
    try:
        obs = venv.reset()
        assert obs["action_mask"].shape == (2, 4)
    finally:
        venv.close()
    assert gpusched_envs.__version__


def test_checkpoints_may_name_the_current_ids_only():
    assert set(registration.ENTRY_POINTS) == set(V1)
