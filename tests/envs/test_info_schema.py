"""A fixed info schema per env: the same keys, types and dtypes at ``reset`` and at every step (valid, invalid and
forced steps, the last one included); ``info["metrics"]`` always present (0.0 until ``info["episode_done"]``); a
hand-added ``TimeLimit`` still yields the metrics through :class:`EpisodeMetrics` or ``episode_metrics()``."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.wrappers import TimeLimit

import gpusched_envs  # noqa: F401  (registers the ids)
from gpusched_envs.envs.base import EpisodeMetrics
from gpusched_envs.envs.dag_schedule import DAG_METRIC_KEYS
from gpusched_envs.sim.metrics import METRIC_KEYS

SMALL = {"cluster": "tiny", "num_jobs": 8}
CASES = [
    ("gpusched/JobSelect-v1", ("graph", "image", "flat"), SMALL),
    ("gpusched/JobSelect-v1", ("flat",), {**SMALL, "preemption": True}),
    ("gpusched/WorkerPlacement-v1", ("graph", "image", "flat"), SMALL),
    ("gpusched/DelayTuning-v1", ("graph", "flat"), SMALL),
    ("gpusched/DAGSchedule-v1", ("graph", "flat"), {"dag": "dag:random:n=8", "gpus": 4}),
    ("gpusched/DAGSchedule-v1", ("flat",), {"dag": "dag:random:n=8", "gpus": 4, "mode": "improve"}),
]
PARAMS = [(env_id, mode, kw) for env_id, modes, kw in CASES for mode in modes]
CLUSTER_SCALARS = {
    "time": np.float64,
    "queued": np.int64,
    "running": np.int64,
    "invalid_action": np.bool_,
    "forced_action": np.int64,
    "episode_done": np.bool_,
}
DAG_SCALARS = {
    "makespan": np.float64,
    "invalid_action": np.bool_,
    "forced_action": np.int64,
    "episode_done": np.bool_,
}


def schema(info: dict) -> dict:
    """Each key's type (a nested dict's own schema)."""
    return {k: schema(v) if isinstance(v, dict) else type(v) for k, v in info.items()}


def expected_schema(env_id: str) -> dict:
    if env_id.startswith("gpusched/DAGSchedule"):
        return {**DAG_SCALARS, "metrics": dict.fromkeys(DAG_METRIC_KEYS, np.float64)}
    return {**CLUSTER_SCALARS, "metrics": dict.fromkeys(METRIC_KEYS, np.float64)}


@pytest.mark.parametrize("param", PARAMS, ids=[f"{p[0].split('/')[1]}-{p[1]}-{len(p[2])}" for p in PARAMS])
def test_same_keys_and_dtypes_at_reset_and_every_step(param):
    env_id, mode, kw = param
    env = gym.make(env_id, obs_mode=mode, max_invalid_repeats=2, **kw)
    want = expected_schema(env_id)
    _, info = env.reset(seed=3)
    assert schema(info) == want and not info["episode_done"]
    assert all(v == 0.0 for v in info["metrics"].values())  # placeholders until the end
    rng = np.random.default_rng(3)
    n = env.action_space.n
    kinds = set()
    for _ in range(5000):
        a = int(rng.integers(n))  # unmasked: valid, invalid and forced steps
        _, _, terminated, truncated, info = env.step(a)
        assert schema(info) == want
        kinds.add((bool(info["invalid_action"]), int(info["forced_action"]) >= 0))
        if terminated or truncated:
            break
    assert terminated and info["episode_done"]
    assert info["metrics"] == env.unwrapped.episode_metrics() or env_id.endswith("DAGSchedule-v1")
    if env_id.startswith("gpusched/DAGSchedule"):
        assert info["metrics"]["makespan"] == info["makespan"] > 0
    else:
        assert info["metrics"]["jobs"] == kw["num_jobs"]
    assert (False, False) in kinds
    if env_id.startswith("gpusched/JobSelect"):  # the steps that were checked include forced ones
        assert (True, True) in kinds


@pytest.mark.parametrize("env_id", sorted({p[0] for p in PARAMS}))
def test_check_env_with_the_fixed_schema(env_id):
    kw = next(p[2] for p in PARAMS if p[0] == env_id)
    check_env(gym.make(env_id, obs_mode="flat", **kw).unwrapped, skip_render_check=True)


@pytest.mark.parametrize("env_id", ["gpusched/JobSelect-v1", "gpusched/DAGSchedule-v1"])
def test_hand_added_time_limit_keeps_the_metrics(env_id):
    kw = next(p[2] for p in PARAMS if p[0] == env_id)
    base = gym.make(env_id, obs_mode="flat", **kw).unwrapped
    env = EpisodeMetrics(TimeLimit(base, max_episode_steps=2))
    obs, _ = env.reset(seed=0)
    for _ in range(2):
        obs, _, terminated, truncated, info = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
    assert truncated and not terminated and info["episode_done"]
    assert schema(info) == expected_schema(env_id)
    metrics = base.episode_metrics()
    assert info["metrics"].keys() == metrics.keys()
    assert all(
        info["metrics"][k] == v or (np.isnan(v) and np.isnan(info["metrics"][k])) for k, v in metrics.items()
    )
    if env_id == "gpusched/DAGSchedule-v1":
        assert info["metrics"]["makespan"] == base.makespan > 0
    # without the wrapper the truncation leaves the placeholders: episode_metrics() has the numbers
    plain = TimeLimit(gym.make(env_id, obs_mode="flat", **kw).unwrapped, max_episode_steps=1)
    obs, _ = plain.reset(seed=0)
    *_, truncated, info = plain.step(int(np.flatnonzero(obs["action_mask"])[0]))
    assert truncated and not info["episode_done"]


def test_worker_placement_iteration_times_have_fixed_dtypes():
    env = gym.make("gpusched/WorkerPlacement-v1", obs_mode="flat", **SMALL).unwrapped
    obs, _ = env.reset(seed=0)
    for _ in range(30):
        jobs, secs, ideal = env.iteration_times()
        assert (jobs.dtype, secs.dtype, ideal.dtype) == (np.int64, np.float64, np.float64)
        assert jobs.shape == secs.shape == ideal.shape and jobs.ndim == 1
        obs, _, terminated, *_ = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
        if terminated:
            break
