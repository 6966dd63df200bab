"""The Stable-Baselines3 adapter of the native vector env (gpusched_envs.integrations.sb3): sb3-contrib's
MaskablePPO learns on it, and its rollouts and learnt weights equal those on DummyVecEnv over gym.make copies with
the same seed (flat observations with MlpPolicy, graph observations with MultiInputPolicy); the VecEnv API
(terminal observations, masks through env_method, attributes) follows DummyVecEnv's."""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

import gpusched_envs  # noqa: F401  (registers the ids)
from gpusched_envs.envs.vector import GpuschedVectorEnv
from gpusched_envs.wrappers import FlattenFeatures

pytest.importorskip("sb3_contrib")
torch = pytest.importorskip("torch")

from sb3_contrib import MaskablePPO  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv  # noqa: E402

from gpusched_envs.integrations.sb3 import SB3VecEnv, make_sb3_vec_env  # noqa: E402

TINY = {"cluster": "tiny", "num_jobs": 6}
BUFFER = ("observations", "actions", "rewards", "episode_starts", "values", "log_probs", "action_masks")


def learn(venv, policy: str, steps: int = 128):
    model = MaskablePPO(policy, venv, n_steps=16, batch_size=32, n_epochs=2, seed=0, device="cpu")
    model.learn(steps)
    assert model.num_timesteps >= steps
    return model


def assert_same_training(a, b) -> None:
    ra, rb = a.rollout_buffer, b.rollout_buffer
    for name in BUFFER:
        got, want = getattr(ra, name), getattr(rb, name)
        if isinstance(want, dict):
            assert all(np.array_equal(got[k], want[k]) for k in want), name
        else:
            assert np.array_equal(got, want), name
    sa, sb = a.policy.state_dict(), b.policy.state_dict()
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_maskable_ppo_mlp_on_flat_obs_equals_dummy_vec_env():
    kw = {**TINY, "obs_mode": "flat"}
    native = learn(make_sb3_vec_env("gpusched/JobSelect-v1", 4, flatten=True, **kw), "MlpPolicy")
    dummy = learn(
        DummyVecEnv([lambda: FlattenFeatures(gym.make("gpusched/JobSelect-v1", **kw), with_mask=False)] * 4),
        "MlpPolicy",
    )
    assert_same_training(native, dummy)
    assert native.rollout_buffer.episode_starts[1:].any()  # episodes ended inside the rollouts


def test_maskable_ppo_multi_input_on_graph_obs_equals_dummy_vec_env():
    kw = {"dag": "dag:random:n=6", "gpus": 4, "obs_mode": "graph"}
    native = learn(make_sb3_vec_env("gpusched/DAGSchedule-v1", 2, **kw), "MultiInputPolicy", steps=64)
    dummy = learn(
        DummyVecEnv([lambda: gym.make("gpusched/DAGSchedule-v1", **kw)] * 2), "MultiInputPolicy", steps=64
    )
    assert_same_training(native, dummy)


def test_vec_env_api_follows_dummy_vec_env():
    kw = {**TINY, "obs_mode": "flat"}
    venv = make_sb3_vec_env("gpusched/WorkerPlacement-v1", 3, **kw)
    dummy = DummyVecEnv([lambda: gym.make("gpusched/WorkerPlacement-v1", **kw)] * 3)
    venv.seed(7)
    dummy.seed(7)
    a, b = venv.reset(), dummy.reset()
    assert all(np.array_equal(a[k], b[k]) for k in b)
    assert venv.has_attr("action_masks") and venv.has_attr("render_mode") and not venv.has_attr("no_such")
    assert venv.get_attr("window") == [env.unwrapped.window for env in dummy.envs]
    ended = 0
    for _ in range(60):
        masks = np.stack(venv.env_method("action_masks"))
        np.testing.assert_array_equal(masks, np.stack(dummy.env_method("action_masks")))
        np.testing.assert_array_equal(masks, venv.action_masks())
        assert [m.tolist() for m in venv.env_method("action_masks", indices=[2])] == [masks[2].tolist()]
        actions = np.array([np.flatnonzero(m)[-1] for m in masks])
        (oa, ra, da, ia), (ob, rb, db, ib) = venv.step(actions), dummy.step(actions)
        assert all(np.array_equal(oa[k], ob[k]) for k in ob)
        np.testing.assert_array_equal(ra, rb)
        np.testing.assert_array_equal(da, db)
        assert ra.dtype == rb.dtype and da.dtype == db.dtype
        for x, y in zip(ia, ib, strict=True):
            assert x.keys() == y.keys()
            assert x["TimeLimit.truncated"] == y["TimeLimit.truncated"]
            if "terminal_observation" in y:
                ended += 1
                np.testing.assert_equal(x["terminal_observation"], y["terminal_observation"])
                np.testing.assert_equal(x["metrics"], y["metrics"])
    assert ended >= 3
    assert venv.env_is_wrapped(gym.Wrapper) == [False] * 3
    venv.close()


def test_adapter_refuses_other_vector_envs():
    with pytest.raises(ValueError, match="SAME_STEP"):
        SB3VecEnv(GpuschedVectorEnv("gpusched/JobSelect-v1", 2, **TINY))
    with pytest.raises(TypeError, match="GpuschedVectorEnv"):
        SB3VecEnv(gym.make_vec("gpusched/JobSelect-v1", 2, vectorization_mode="sync", **TINY))


def test_importing_the_module_does_not_import_sb3():
    code = (
        "import sys, gpusched_envs, gpusched_envs.integrations.sb3, gpusched_envs.envs.vector; "
        "assert 'stable_baselines3' not in sys.modules and 'torch' not in sys.modules, sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
