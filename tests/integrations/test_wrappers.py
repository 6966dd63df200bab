"""gpusched_envs.wrappers: the mask stays apart from the features, float32 throughout, exact values and the
running statistics checked against hand computations; SB3's MaskablePPO trains on the wrapped env."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

import gpusched_envs  # noqa: F401  (registers the ids)
from gpusched_envs.wrappers import FlattenFeatures, NormalizeFeatures, RunningMeanStd

SMALL = {"cluster": "tiny", "num_jobs": 12}


def make(env_id="gpusched/JobSelect-v1", **kw):
    return gym.make(env_id, **{**SMALL, **kw})


def masked_rollout(env, seed: int, steps: int):
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    out = [obs]
    for _ in range(steps):
        a = int(rng.choice(np.flatnonzero(env.get_wrapper_attr("action_masks")())))
        obs, _, term, trunc, _ = env.step(a)
        out.append(obs)
        if term or trunc:
            obs, _ = env.reset()
            out.append(obs)
    return out


@pytest.mark.parametrize("obs_mode", ["graph", "flat", "image"])
def test_flatten_features_keeps_mask_apart_in_float32(obs_mode):
    raw = make(obs_mode=obs_mode)
    env = FlattenFeatures(make(obs_mode=obs_mode))
    space = raw.observation_space
    n_features = sum(int(np.prod(s.shape)) for k, s in space.spaces.items() if k != "action_mask")
    assert env.observation_space["obs"].shape == (n_features,)
    assert env.observation_space["obs"].dtype == np.float32
    assert env.observation_space["action_mask"] == space["action_mask"]
    o_raw, _ = raw.reset(seed=3)
    o, _ = env.reset(seed=3)
    assert o["obs"].dtype == np.float32 and o["obs"] in env.observation_space["obs"]
    np.testing.assert_array_equal(o["action_mask"], o_raw["action_mask"])
    for key, sl in env.feature_slices().items():  # each entry lies where feature_slices says, unchanged
        np.testing.assert_array_equal(o["obs"][sl], np.asarray(o_raw[key], dtype=np.float32).ravel())
    np.testing.assert_array_equal(env.action_masks(), o_raw["action_mask"].astype(bool))


def test_flatten_features_graph_size_and_layouts():
    # JobSelect's default cluster: 1,998 values with the 17-action mask, 1,981 features
    env = FlattenFeatures(gym.make("gpusched/JobSelect-v1", obs_mode="graph"))
    assert env.observation_space["obs"].shape == (1981,)
    # on "tiny": context 2 + edge features 176 + edge index 88 + edge mask 44 + jobs 128 + job mask 16 + nodes 644
    # + node mask 23
    assert FlattenFeatures(make(obs_mode="graph")).observation_space["obs"].shape == (1121,)
    box = FlattenFeatures(make(obs_mode="flat"), with_mask=False)  # context 2 + obs 244
    assert isinstance(box.observation_space, spaces.Box) and box.observation_space.shape == (246,)
    o, _ = box.reset(seed=0)
    assert o.shape == (246,) and box.action_masks().dtype == bool
    rl = FlattenFeatures(make(obs_mode="flat"), features_key="observations", mask_dtype=np.float32)
    assert set(rl.observation_space.spaces) == {"observations", "action_mask"}
    o, _ = rl.reset(seed=0)
    assert o["action_mask"].dtype == np.float32 and o in rl.observation_space
    only = FlattenFeatures(make(obs_mode="flat"), keys=["context"], with_mask=False)
    assert only.observation_space.shape == (2,)


def test_flatten_features_bad_arguments():
    with pytest.raises(ValueError, match="unknown: \\['nope'\\]"):
        FlattenFeatures(make(obs_mode="flat"), keys=["nope"])
    with pytest.raises(ValueError, match="must differ"):
        FlattenFeatures(make(obs_mode="flat"), features_key="action_mask")
    with pytest.raises(TypeError, match="action_mask"):
        FlattenFeatures(gym.make("CartPole-v1"))
    with pytest.raises(gym.error.ResetNeeded):
        FlattenFeatures(make(obs_mode="flat")).action_masks()


def test_running_mean_std_matches_numpy():
    rng = np.random.default_rng(0)
    xs = rng.normal(3.0, 2.0, size=(50, 4))
    rms = RunningMeanStd((4,), epsilon=1e-12)
    for x in xs:
        rms.update(x)
    np.testing.assert_allclose(rms.mean, xs.mean(axis=0), rtol=1e-9)
    np.testing.assert_allclose(rms.var, xs.var(axis=0), rtol=1e-6)


def test_normalize_features_dict_leaves_integer_entries():
    env = NormalizeFeatures(make(obs_mode="graph"))
    assert "edge_index" not in env.keys and "action_mask" not in env.keys and "node_mask" not in env.keys
    assert set(env.keys) == {"context", "edge_features", "job_features", "node_features"}
    raw_obs = masked_rollout(make(obs_mode="graph"), seed=1, steps=20)
    obs = masked_rollout(env, seed=1, steps=20)
    assert len(raw_obs) == len(obs)
    for o, r in zip(obs, raw_obs, strict=True):
        for k in ("action_mask", "edge_index", "node_mask", "job_mask", "edge_mask"):
            np.testing.assert_array_equal(o[k], r[k])
        assert o["node_features"].dtype == np.float32 and np.abs(o["node_features"]).max() <= 10.0
    # the statistics are those of the raw features seen
    stacked = np.stack([r["context"] for r in raw_obs]).astype(np.float64)
    np.testing.assert_allclose(env.rms["context"].mean, stacked.mean(axis=0), rtol=1e-3, atol=1e-6)


def test_normalize_features_box_exact_and_frozen():
    env = NormalizeFeatures(FlattenFeatures(make(obs_mode="flat"), with_mask=False), clip=5.0)
    o0, _ = env.reset(seed=0)
    x = FlattenFeatures(make(obs_mode="flat"), with_mask=False).reset(seed=0)[0].astype(np.float64)
    # one sample after the prior (mean 0, var 1, count 1e-4): by hand
    c = 1e-4
    mean = x / (1 + c)
    var = (c + x**2 * c / (1 + c)) / (1 + c)
    np.testing.assert_allclose(o0, np.clip((x - mean) / np.sqrt(var + 1e-8), -5, 5), rtol=1e-5, atol=1e-7)
    assert np.abs(o0).max() > 0  # not all zero: the prior count moves the mean off the sample
    assert env.action_masks().dtype == bool  # through FlattenFeatures
    env.step(int(np.flatnonzero(env.action_masks())[0]))
    env.update_running_mean = False
    mean = env.rms[None].mean.copy()
    env.step(int(np.flatnonzero(env.action_masks())[0]))
    np.testing.assert_array_equal(env.rms[None].mean, mean)
    with pytest.raises(ValueError, match="clip"):
        NormalizeFeatures(make(obs_mode="flat"), clip=0)


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped version")
@pytest.mark.parametrize("obs_mode", ["graph", "flat"])
def test_wrapped_envs_pass_gymnasium_checker(obs_mode):
    check_env(FlattenFeatures(make(obs_mode=obs_mode).unwrapped), skip_render_check=True)
    check_env(FlattenFeatures(make(obs_mode=obs_mode).unwrapped, with_mask=False), skip_render_check=True)
    # running statistics change between resets (the checker's same-seed check does not apply): in-space only
    env = NormalizeFeatures(FlattenFeatures(make(obs_mode=obs_mode)))
    for obs in masked_rollout(env, seed=2, steps=20):
        assert obs in env.observation_space


def test_same_seed_same_wrapped_observations():
    a = masked_rollout(FlattenFeatures(make(obs_mode="flat"), with_mask=False), seed=5, steps=15)
    b = masked_rollout(FlattenFeatures(make(obs_mode="flat"), with_mask=False), seed=5, steps=15)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)


def test_maskable_ppo_trains_on_wrapped_env():
    pytest.importorskip("sb3_contrib", reason="sb3-contrib (extra [agents]) is not installed")
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    def factory():
        return NormalizeFeatures(FlattenFeatures(make(obs_mode="flat"), with_mask=False))

    venv = DummyVecEnv([factory, factory])
    model = MaskablePPO("MlpPolicy", venv, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
    model.learn(256)
    assert model.num_timesteps >= 256
    env = factory()
    obs, _ = env.reset(seed=7)
    for _ in range(30):
        action, _ = model.predict(obs, action_masks=env.action_masks(), deterministic=True)
        assert env.action_masks()[int(action)]
        obs, _, term, trunc, _ = env.step(int(action))
        if term or trunc:
            break
