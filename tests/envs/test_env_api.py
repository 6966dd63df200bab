"""Every registered id × every obs mode it offers: Gymnasium and SB3 checkers, same-seed determinism, pickling,
async vector envs, masks, rendering, and graph observations through to_pyg."""

from __future__ import annotations

import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest

import gpusched_envs.envs  # noqa: F401  (registers the ids)
from gpusched_envs.envs import CURRENT_IDS as ENTRY_POINTS
from gpusched_envs.envs import list_env_specs

# small instances so the whole file runs in seconds
FAST_KWARGS = {
    "gpusched/JobSelect-v1": {"cluster": "tiny", "num_jobs": 12},
    "gpusched/WorkerPlacement-v1": {"cluster": "tiny", "num_jobs": 12},
    "gpusched/DelayTuning-v1": {"cluster": "tiny", "num_jobs": 12},
    "gpusched/DAGSchedule-v1": {"cluster": "tiny", "dag": "dag:random:n=8"},
}
IDS = [i for i in ENTRY_POINTS if i in gym.registry]


def _modes(env_id):
    cls = gym.spec(env_id).entry_point
    if isinstance(cls, str):
        import importlib

        module, name = cls.split(":")
        cls = getattr(importlib.import_module(module), name)
    return list(cls.obs_modes_offered)


CASES = [(i, m) for i in IDS for m in _modes(i)]


def make(env_id, mode, **kw):
    return gym.make(env_id, obs_mode=mode, **{**FAST_KWARGS[env_id], **kw})


def random_episode(env, seed, steps=60):
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    trace = [obs]
    rewards = []
    for _ in range(steps):
        action = int(rng.choice(np.flatnonzero(obs["action_mask"])))
        obs, reward, terminated, truncated, _ = env.step(action)
        trace.append(obs)
        rewards.append(reward)
        if terminated or truncated:
            break
    return trace, rewards


def same_obs(a, b):
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_all_four_ids_registered():
    assert set(IDS) == set(ENTRY_POINTS)


@pytest.mark.parametrize(("env_id", "mode"), CASES)
def test_gymnasium_checker(env_id, mode):
    from gymnasium.utils.env_checker import check_env

    env = make(env_id, mode)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(env.unwrapped, skip_render_check=True)


@pytest.mark.parametrize(("env_id", "mode"), CASES)
def test_sb3_checker(env_id, mode):
    from stable_baselines3.common.env_checker import check_env

    env = make(env_id, mode)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(env.unwrapped, warn=False)


@pytest.mark.parametrize(("env_id", "mode"), CASES)
def test_same_seed_same_episode_and_spaces_fixed(env_id, mode):
    env = make(env_id, mode)
    t1, r1 = random_episode(env, seed=3)
    t2, r2 = random_episode(env, seed=3)
    assert r1 == r2
    assert len(t1) == len(t2) and all(same_obs(a, b) for a, b in zip(t1, t2, strict=True))
    for obs in t1:
        assert env.observation_space.contains(obs)
        assert obs["action_mask"].dtype == np.int8 and obs["action_mask"].any()
    assert np.array_equal(env.unwrapped.action_masks(), t1[-1]["action_mask"].astype(bool))


@pytest.mark.parametrize(("env_id", "mode"), CASES)
def test_pickle_round_trip_continues_identically(env_id, mode):
    env = make(env_id, mode).unwrapped
    obs, _ = env.reset(seed=5)
    rng = np.random.default_rng(0)
    for _ in range(3):
        obs, *_ = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
    clone = pickle.loads(pickle.dumps(env))
    for _ in range(10):
        a = int(rng.choice(np.flatnonzero(obs["action_mask"])))
        out1, out2 = env.step(a), clone.step(a)
        assert same_obs(out1[0], out2[0]) and out1[1:4] == out2[1:4]
        obs = out1[0]
        if out1[2] or out1[3]:
            break


@pytest.mark.parametrize("env_id", IDS)
def test_invalid_action_penalize_and_raise(env_id):
    env = make(env_id, "flat")
    obs, _ = env.reset(seed=0)
    bad = np.flatnonzero(obs["action_mask"] == 0)
    if len(bad):
        obs2, reward, terminated, truncated, info = env.step(int(bad[0]))
        assert info["invalid_action"] and reward == -env.unwrapped.invalid_penalty
        assert same_obs(obs, obs2)
        strict = make(env_id, "flat", invalid_action="raise")
        strict.reset(seed=0)
        with pytest.raises(ValueError, match="invalid action"):
            strict.step(int(bad[0]))


@pytest.mark.parametrize("env_id", IDS)
def test_async_vector_env(env_id):
    envs = gym.make_vec(env_id, num_envs=2, vectorization_mode="async", **FAST_KWARGS[env_id])
    try:
        obs, _ = envs.reset(seed=1)
        assert obs["action_mask"].shape[0] == 2
        masks = obs["action_mask"]
        actions = np.array([int(np.flatnonzero(m)[0]) for m in masks])
        obs, reward, terminated, truncated, _ = envs.step(actions)
        assert reward.shape == (2,)
    finally:
        envs.close()


@pytest.mark.parametrize("env_id", IDS)
def test_render_modes(env_id):
    text = make(env_id, "flat", render_mode="ansi")
    text.reset(seed=0)
    frame_text = text.render()
    assert isinstance(frame_text, str) and frame_text.count("\n") >= 2
    rgb = make(env_id, "flat", render_mode="rgb_array")
    rgb.reset(seed=0)
    frame = rgb.render()
    assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3


def test_image_mode_refused_with_a_clear_error_where_not_offered():
    for env_id in IDS:
        if "image" not in _modes(env_id):
            with pytest.raises(ValueError, match="image"):
                make(env_id, "image")


@pytest.mark.parametrize("env_id", IDS)
def test_to_pyg_single_and_batch(env_id):
    import torch

    from gpusched_envs.graph import to_pyg

    env = make(env_id, "graph")
    trace, _ = random_episode(env, seed=0, steps=4)
    one = to_pyg(trace[0])
    n_nodes = int(trace[0]["node_mask"].sum())
    assert one.num_graphs == 1 and one.x.shape[0] == n_nodes
    assert one.edge_index.shape[1] == int(trace[0]["edge_mask"].sum())
    stacked = {k: np.stack([o[k] for o in trace]) for k in trace[0]}
    batch = to_pyg(stacked)
    assert batch.num_graphs == len(trace)
    assert batch.x.shape[0] == sum(int(o["node_mask"].sum()) for o in trace)
    # sample 1's nodes and edges are sample 0's structure shifted by its offset
    ptr = batch.ptr.tolist()
    e0, second = one.edge_index.shape[1], to_pyg(trace[1])
    shifted = batch.edge_index[:, e0 : e0 + second.edge_index.shape[1]] - ptr[1]
    assert shifted.tolist() == second.edge_index.tolist()
    assert torch.equal(batch.x[ptr[1] : ptr[2]], second.x)
    assert batch.edge_index.max() < batch.x.shape[0]


def test_list_env_specs():
    specs = list_env_specs()
    assert [s[0] for s in specs] == IDS
    assert all(isinstance(s[1], gym.Space) and isinstance(s[2], gym.spaces.Dict) for s in specs)


@pytest.mark.parametrize("env_id", IDS)
def test_bench_kwargs(env_id):
    env = gym.make(env_id, cluster="hetero64", obs_mode="flat")
    obs, _ = env.reset(seed=0)
    obs, *_ = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
    assert env.observation_space.contains(obs)
