"""The native vector env (gpusched_envs.envs.vector) against N independent single envs: every env id and
observation mode, the same seeds and the same random valid actions give bit-identical observations, rewards,
terminations, truncations, masks, infos and episode metrics, across autoresets, in NEXT_STEP and SAME_STEP modes;
malformed actions are refused before any env steps, naming the env; ``gymnasium.make_vec`` routes to it."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import gpusched_envs  # noqa: F401  (registers the ids)
from gpusched_envs.envs import CURRENT_IDS, VECTOR_ENTRY_POINTS
from gpusched_envs.envs.base import EpisodeEndedError, InvalidActionError
from gpusched_envs.envs.vector import GpuschedVectorEnv, autoreset_mode_of

TINY = {"cluster": "tiny", "num_jobs": 6}
DAG = {"dag": "dag:random:n=6", "gpus": 4}
CASES = [
    ("gpusched/JobSelect-v1", ("graph", "image", "flat"), TINY),
    ("gpusched/JobSelect-v1", ("flat",), {**TINY, "preemption": True}),
    ("gpusched/WorkerPlacement-v1", ("graph", "image", "flat"), TINY),
    ("gpusched/DelayTuning-v1", ("graph", "flat"), {**TINY, "interval": 300.0}),
    ("gpusched/DAGSchedule-v1", ("graph", "flat"), DAG),
    ("gpusched/DAGSchedule-v1", ("flat",), {**DAG, "mode": "improve"}),
]
PARAMS = [(env_id, mode, kw) for env_id, modes, kw in CASES for mode in modes]
N = 3
STEPS = 45


def assert_same_obs(batch: dict, i: int, single: dict) -> None:
    assert batch.keys() == single.keys()
    for k, v in single.items():
        assert batch[k].dtype == v.dtype, k
        np.testing.assert_array_equal(batch[k][i], v, err_msg=k)


def assert_same_info(batch: dict, i: int, single: dict) -> None:
    """Row ``i`` of a batched info equals one env's info (every key; metrics where its episode ended)."""
    for k, v in single.items():
        if k == "metrics":
            done = bool(single["episode_done"])
            if "metrics" not in batch:  # only in the steps where some episode ended
                assert not done
                continue
            assert batch["_metrics"][i] == done
            for name, value in v.items():
                # 0.0 placeholders before the end, as in the single env
                np.testing.assert_array_equal(batch["metrics"][name][i], value, err_msg=name)
                assert batch["metrics"]["_" + name][i] == done
        else:
            assert batch["_" + k][i], k
            assert batch[k][i] == v, k
            assert batch[k].dtype == np.asarray(v).dtype, k


def random_actions(masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return np.array([rng.choice(np.flatnonzero(row)) for row in masks], dtype=np.int64)


def run_both(env_id, kw, mode, seed=11, steps=STEPS, **vector_kwargs):
    """Step the vector env and N single envs side by side; the number of episodes that ended."""
    vec = GpuschedVectorEnv(env_id, N, autoreset_mode=mode, **vector_kwargs, **kw)
    limit = vector_kwargs.get("max_episode_steps")
    singles = [gym.make(env_id, max_episode_steps=limit, **kw) for _ in range(N)]
    obs, info = vec.reset(seed=seed)
    pending = [False] * N
    for i, env in enumerate(singles):
        o, inf = env.reset(seed=seed + i)
        assert_same_obs(obs, i, o)
        assert_same_info(info, i, inf)
        np.testing.assert_array_equal(info["action_mask"][i], o["action_mask"].astype(bool))
    rng = np.random.default_rng(seed)
    ended = 0
    for _ in range(steps):
        masks = vec.action_masks()
        for i, env in enumerate(singles):
            expected = np.ones_like(masks[i]) if pending[i] else env.unwrapped.action_masks()
            np.testing.assert_array_equal(masks[i], expected)
        actions = random_actions(masks, rng)
        obs, rewards, terms, truncs, info = vec.step(actions)
        assert rewards.dtype == np.float64 and terms.dtype == truncs.dtype == np.bool_
        for i, env in enumerate(singles):
            if pending[i]:  # NEXT_STEP: this step resets the env, its action is ignored
                o, inf = env.reset()
                r, te, tr = 0.0, False, False
                pending[i] = False
            else:
                o, r, te, tr, inf = env.step(int(actions[i]))
            assert rewards[i] == r and terms[i] == te and truncs[i] == tr
            if te or tr:
                ended += 1
                assert inf["episode_done"]
                np.testing.assert_equal(inf["metrics"], env.unwrapped.episode_metrics())
                if mode == AutoresetMode.SAME_STEP:
                    assert info["_final_obs"][i] and info["_final_info"][i]
                    assert_same_obs({k: v[None] for k, v in info["final_obs"][i].items()}, 0, o)
                    assert_same_info(info["final_info"], i, inf)
                    o, inf = env.reset()
                else:
                    pending[i] = True
            elif mode == AutoresetMode.SAME_STEP and "_final_obs" in info:
                assert not info["_final_obs"][i]
            assert_same_obs(obs, i, o)
            assert_same_info(info, i, inf)
            np.testing.assert_array_equal(info["action_mask"][i], o["action_mask"].astype(bool))
    vec.close()
    return ended


@pytest.mark.parametrize(
    "autoreset", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP], ids=lambda m: m.name
)
@pytest.mark.parametrize(("env_id", "obs_mode", "kw"), PARAMS, ids=lambda p: str(p).split("/")[-1][:24])
def test_vector_env_equals_independent_single_envs(env_id, obs_mode, kw, autoreset):
    ended = run_both(env_id, {**kw, "obs_mode": obs_mode}, autoreset)
    assert ended >= N  # every copy went through at least one autoreset on average


@pytest.mark.parametrize(
    "autoreset", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP], ids=lambda m: m.name
)
def test_max_episode_steps_truncates_as_gym_make_does(autoreset):
    kw = {"cluster": "tiny", "num_jobs": 30, "load": 2.0, "obs_mode": "flat"}
    ended = run_both("gpusched/JobSelect-v1", kw, autoreset, steps=15, max_episode_steps=4)
    assert ended == 3 * N  # steps 4, 8, 12 (SAME_STEP) or 4, 9, 14 (NEXT_STEP: one step resets)


def test_seed_lists_and_offsets():
    kw = {**TINY, "obs_mode": "flat"}
    vec = GpuschedVectorEnv("gpusched/JobSelect-v1", N, **kw)
    single = gym.make("gpusched/JobSelect-v1", **kw)
    obs, _ = vec.reset(seed=[5, 0, 9])
    for i, s in enumerate([5, 0, 9]):
        assert_same_obs(obs, i, single.reset(seed=s)[0])
    obs, _ = vec.reset(seed=4)
    for i in range(N):
        assert_same_obs(obs, i, single.reset(seed=4 + i)[0])
    # different seeds give different workloads
    assert not np.array_equal(vec.envs[0].sim.job_work, vec.envs[1].sim.job_work)
    with pytest.raises(ValueError, match="one per env"):
        vec.reset(seed=[1, 2])
    with pytest.raises(ValueError, match="seed"):
        vec.reset(seed="1")


def test_disabled_autoreset_resets_the_masked_envs_only():
    kw = {**TINY, "obs_mode": "flat"}
    vec = GpuschedVectorEnv("gpusched/JobSelect-v1", 2, autoreset_mode="disabled", **kw)
    assert vec.metadata["autoreset_mode"] is AutoresetMode.DISABLED
    obs, _ = vec.reset(seed=0)
    done = np.zeros(2, dtype=bool)
    for _ in range(200):
        masks = vec.action_masks()
        actions = np.array([np.flatnonzero(m)[0] for m in masks])
        if done[0]:
            with pytest.raises(EpisodeEndedError, match="call reset"):
                vec.step(actions)
            break
        obs, _, terms, truncs, info = vec.step(actions)
        done |= terms | truncs
        if done[1] and not done[0]:
            before = obs["obs"][0].copy()
            obs, info = vec.reset(seed=[None, 3], options={"reset_mask": np.array([False, True])})
            assert info["_time"].tolist() == [False, True]
            np.testing.assert_array_equal(obs["obs"][0], before)
            single = gym.make("gpusched/JobSelect-v1", **kw)
            assert_same_obs(obs, 1, single.reset(seed=3)[0])
            done[1] = False
    else:
        pytest.fail("env 0 never ended")


def test_autoreset_mode_names():
    assert autoreset_mode_of("next_step") is AutoresetMode.NEXT_STEP
    assert autoreset_mode_of("SameStep") is AutoresetMode.SAME_STEP
    with pytest.raises(ValueError, match="autoreset_mode must be one of"):
        autoreset_mode_of("sometimes")
    vec = GpuschedVectorEnv("gpusched/DAGSchedule-v1", 2, autoreset_mode="same_step", obs_mode="flat", **DAG)
    assert vec.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP


# ---------------------------------------------------------------------------------------------------- bad input
@pytest.fixture
def vec():
    v = GpuschedVectorEnv("gpusched/JobSelect-v1", N, obs_mode="flat", **TINY)
    v.reset(seed=0)
    return v


@pytest.mark.parametrize(
    ("actions", "match"),
    [
        ([0, 0], r"expected 3 integers in 0\.\.16 \(one per env\), got shape \(2,\)"),
        ([[0, 0, 0]], r"got shape \(1, 3\)"),
        (5, r"got shape \(\)"),
        ([0, 17, 0], r"actions\[1\] 17 outside 0\.\.16"),
        ([0, 0, -1], r"actions\[2\] -1 outside 0\.\.16"),
        ([0.0, np.nan, 0.0], r"actions\[1\]: expected an integer in 0\.\.16, got nan"),
        ([0.5, 0.0, 0.0], r"actions\[0\]: expected an integer in 0\.\.16, got 0\.5"),
        ([0.0, 0.0, np.inf], r"actions\[2\]: expected an integer in 0\.\.16, got inf"),
        ([True, False, True], r"actions\[0\]: expected one integer in 0\.\.16, got True"),
        (["a", "b", "c"], r"actions\[0\]: expected one integer"),
    ],
)
def test_malformed_actions_are_refused_before_any_env_steps(vec, actions, match):
    steps = [env.steps for env in vec.envs]
    obs = vec._obs["obs"].copy()
    with pytest.raises(InvalidActionError, match=match):
        vec.step(actions)
    assert [env.steps for env in vec.envs] == steps
    np.testing.assert_array_equal(vec._obs["obs"], obs)


def test_integral_float_actions_act_as_integers(vec):
    ref = GpuschedVectorEnv("gpusched/JobSelect-v1", N, obs_mode="flat", **TINY)
    ref.reset(seed=0)
    a = random_actions(vec.action_masks(), np.random.default_rng(0))
    o1, r1, *_ = vec.step(a.astype(np.float64))
    o2, r2, *_ = ref.step(a)
    np.testing.assert_array_equal(o1["obs"], o2["obs"])
    np.testing.assert_array_equal(r1, r2)


def test_masked_action_with_invalid_action_raise_names_the_env():
    v = GpuschedVectorEnv("gpusched/JobSelect-v1", N, obs_mode="flat", invalid_action="raise", **TINY)
    v.reset(seed=0)
    masks = v.action_masks()
    actions = np.array([np.flatnonzero(m)[0] for m in masks])
    actions[2] = np.flatnonzero(~masks[2])[0]
    with pytest.raises(InvalidActionError, match=rf"actions\[2\]: invalid action {actions[2]} in env 2"):
        v.step(actions)
    assert [env.steps for env in v.envs] == [0, 0, 0]


def test_step_before_reset_and_after_close():
    v = GpuschedVectorEnv("gpusched/JobSelect-v1", 2, obs_mode="flat", **TINY)
    with pytest.raises(gym.error.ResetNeeded, match="reset"):
        v.step([0, 0])
    v.reset(seed=0)
    v.close()
    assert v.closed
    with pytest.raises(gym.error.ClosedEnvironmentError, match="closed"):
        v.step([0, 0])
    with pytest.raises(gym.error.ClosedEnvironmentError, match="closed"):
        v.reset()


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="num_envs must be >= 1"):
        GpuschedVectorEnv("gpusched/JobSelect-v1", 0, **TINY)
    with pytest.raises(ValueError, match="max_episode_steps must be an integer"):
        GpuschedVectorEnv("gpusched/JobSelect-v1", 2, max_episode_steps=2.5, **TINY)
    with pytest.raises(ValueError, match="window"):  # the single env's own check
        GpuschedVectorEnv("gpusched/JobSelect-v1", 2, window="5", **TINY)
    with pytest.raises(gym.error.DeprecatedEnv, match="use gpusched/JobSelect-v1"):
        GpuschedVectorEnv("gpusched/JobSelect-v0", 2, **TINY)


# ---------------------------------------------------------------------------------------------------- make_vec
SMALL = {
    "gpusched/JobSelect-v1": TINY,
    "gpusched/WorkerPlacement-v1": TINY,
    "gpusched/DelayTuning-v1": TINY,
    "gpusched/DAGSchedule-v1": DAG,
}


@pytest.mark.parametrize("env_id", list(CURRENT_IDS))
@pytest.mark.parametrize("mode", [None, "vector_entry_point"])
def test_make_vec_builds_the_native_vector_env(env_id, mode):
    assert env_id in VECTOR_ENTRY_POINTS
    vec = gym.make_vec(env_id, num_envs=2, vectorization_mode=mode, **SMALL[env_id])
    assert isinstance(vec, GpuschedVectorEnv) and vec.env_id == env_id and vec.num_envs == 2
    assert vec.spec.kwargs["vectorization_mode"] == "vector_entry_point"
    assert vec.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    obs, info = vec.reset(seed=0)
    assert obs["action_mask"].shape == (2, vec.single_action_space.n)
    assert vec.observation_space.contains(obs)


def test_make_vec_passes_vector_arguments_through():
    vec = gym.make_vec(
        "gpusched/JobSelect-v1",
        num_envs=2,
        autoreset_mode=AutoresetMode.SAME_STEP,
        max_episode_steps=3,
        **TINY,
    )
    assert vec.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP and vec.max_episode_steps == 3


def test_make_vec_sync_and_async_still_work():
    sync = gym.make_vec("gpusched/JobSelect-v1", num_envs=2, vectorization_mode="sync", **TINY)
    assert isinstance(sync, gym.vector.SyncVectorEnv)
    native = gym.make_vec("gpusched/JobSelect-v1", num_envs=2, **TINY)
    a, _ = sync.reset(seed=3)
    b, _ = native.reset(seed=3)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    # gym.make keeps its EpisodeMetrics wrapper outside the TimeLimit
    single = gym.make("gpusched/JobSelect-v1", max_episode_steps=2, **TINY)
    assert type(single).__name__ == "EpisodeMetrics"
    asyn = gym.make_vec("gpusched/JobSelect-v1", num_envs=2, vectorization_mode="async", **TINY)
    try:
        assert isinstance(asyn, gym.vector.AsyncVectorEnv)
        c, _ = asyn.reset(seed=3)
        assert all(np.array_equal(a[k], c[k]) for k in a)
    finally:
        asyn.close()
