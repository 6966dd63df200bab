"""Training on the native vector env: ``make_vec_env`` returns what SB3's ``DummyVecEnv`` over the training envs
returns (reward scaling and curricula included), DDQN steps the vector env deterministically per seed, resumes
bit-for-bit and learns a toy bandit, and MaskablePPO collects and learns on it."""

from __future__ import annotations

import io

import gymnasium as gym
import numpy as np
import pytest
import torch
from gpusched_lab.agents.algos.ddqn import DDQN, DDQNArgs, DictReplayBuffer
from gpusched_lab.agents.common import make_vec_env
from gpusched_lab.train.runner import make_train_env, make_train_vec_env, make_train_vector_env
from gymnasium import spaces
from gymnasium.vector import VectorEnv
from stable_baselines3.common.vec_env import DummyVecEnv

ENV = "gpusched/JobSelect-v1"
TINY = {"cluster": "tiny", "num_jobs": 8, "load": 0.9}
SMALL_ARGS = dict(
    hidden=16,
    buffer_size=400,
    batch_size=16,
    learning_starts=40,
    target_update_interval=30,
    train_frequency=2,
    device="cpu",
)
CURRICULUM = [
    {"until": 40, "env_kwargs": {"load": 0.6}},
    {"until": 120, "choices": [{"num_jobs": 6}, {"num_jobs": 10}]},
]


def _same_obs(a: dict, b: dict) -> bool:
    return set(a) == set(b) and all(np.array_equal(a[k], b[k]) and a[k].dtype == b[k].dtype for k in a)


@pytest.mark.parametrize(("mode", "curriculum"), [("graph", None), ("flat", CURRICULUM)])
def test_make_vec_env_returns_what_dummy_vec_env_over_the_training_envs_returns(mode, curriculum):
    n, scale = 3, 0.5
    ours = make_train_vec_env(ENV, TINY, mode, n, scale, curriculum)
    ours.seed(7)
    ref = DummyVecEnv([lambda: make_train_env(ENV, TINY, mode, scale, curriculum, n) for _ in range(n)])
    ref.seed(7)
    obs_a, obs_b = ours.reset(), ref.reset()
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(150):
        assert _same_obs(obs_a, obs_b)
        masks = np.stack(ours.env_method("action_masks"))
        assert masks.dtype == bool and np.array_equal(masks, np.stack(ref.env_method("action_masks")))
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        obs_a, rew_a, done_a, info_a = ours.step(actions)
        obs_b, rew_b, done_b, info_b = ref.step(actions)
        assert rew_a.dtype == rew_b.dtype and np.array_equal(rew_a, rew_b)
        assert np.array_equal(done_a, done_b)
        for x, y in zip(info_a, info_b, strict=True):
            assert set(x) == set(y)
            assert x["TimeLimit.truncated"] == y["TimeLimit.truncated"]
            if "terminal_observation" in y:
                ended += 1
                assert _same_obs(x["terminal_observation"], y["terminal_observation"])
                assert x["metrics"] == y["metrics"] and x["metrics"]["avg_jct"] > 0
    assert ended >= 6, "tiny episodes end within 150 steps"


def test_make_vec_env_seeds_each_copy_and_refuses_an_id_without_a_vector_env():
    a = make_vec_env(ENV, TINY, "flat", 2, seed=3).reset()
    b = make_vec_env(ENV, TINY, "flat", 2, seed=3).reset()
    assert _same_obs(a, b) and not np.array_equal(a["obs"][0], a["obs"][1])
    with pytest.raises(ValueError, match="not registered"):
        make_vec_env("gpusched/Nope-v1", TINY, "flat", 2)


def test_replay_add_batch_writes_what_add_writes_in_order_across_the_wrap():
    space = spaces.Dict({"obs": spaces.Box(-9, 9, (2,), np.float32), "action_mask": spaces.MultiBinary(3)})
    one, many = DictReplayBuffer(space, 5), DictReplayBuffer(space, 5)
    rows = 8
    obs = {
        "obs": np.arange(rows * 2, dtype=np.float32).reshape(rows, 2),
        "action_mask": np.ones((rows, 3), np.int8),
    }
    nxt = {k: v + 1 for k, v in obs.items()}
    act, ret, disc = np.arange(rows) % 3, np.linspace(0, 1, rows), np.full(rows, 0.9)
    for i in range(rows):
        one.add({k: v[i] for k, v in obs.items()}, act[i], ret[i], disc[i], {k: v[i] for k, v in nxt.items()})
    many.add_batch(
        {k: v[:3] for k, v in obs.items()}, act[:3], ret[:3], disc[:3], {k: v[:3] for k, v in nxt.items()}
    )
    many.add_batch(
        {k: v[3:] for k, v in obs.items()}, act[3:], ret[3:], disc[3:], {k: v[3:] for k, v in nxt.items()}
    )
    assert (one.pos, one.size) == (many.pos, many.size) == (3, 5)
    for a, b in ((one.obs, many.obs), (one.next_obs, many.next_obs)):
        assert all(np.array_equal(a[k], b[k]) for k in a)
    assert np.array_equal(one.actions, many.actions) and np.array_equal(one.returns, many.returns)
    big = DictReplayBuffer(space, 5)  # more rows than capacity: the last five survive, as with add
    big.add_batch(obs, act, ret, disc, nxt)
    assert (big.pos, big.size) == (3, 5) and np.array_equal(big.actions, one.actions)
    assert np.array_equal(big.obs["obs"], one.obs["obs"])


def _vector_ddqn(seed: int, n_step: int = 1, total: int = 240, curriculum=None):
    venv = make_train_vector_env(ENV, TINY, "flat", 4, curriculum)
    return DDQN(DDQNArgs(encoder="mlp", seed=seed, n_step=n_step, **SMALL_ARGS), venv, total_steps=total)


def _params(algo):
    return {k: v.clone() for k, v in algo.q.state_dict().items()}


@pytest.mark.parametrize("n_step", [1, 2])
def test_ddqn_on_the_vector_env_is_deterministic_per_seed(n_step):
    a, b, c = (_vector_ddqn(s, n_step).learn(240) for s in (5, 5, 6))
    assert a.global_step == 240 and a.updates == (240 - 40) // 2
    pa, pb, pc = _params(a), _params(b), _params(c)
    assert all(torch.equal(pa[k], pb[k]) for k in pa)
    assert np.array_equal(a.buffer.actions, b.buffer.actions) and np.array_equal(
        a.buffer.returns, b.buffer.returns
    )
    assert not all(torch.equal(pa[k], pc[k]) for k in pa)
    assert len(a.finished_episodes) == len(b.finished_episodes) > 0
    assert [e["metrics"]["avg_jct"] for e in a.finished_episodes] == [
        e["metrics"]["avg_jct"] for e in b.finished_episodes
    ]


def test_ddqn_on_the_vector_env_resumes_bit_for_bit():
    straight = _vector_ddqn(3, n_step=2, curriculum=CURRICULUM).learn(240)
    first = _vector_ddqn(3, n_step=2, curriculum=CURRICULUM).learn(128)  # mid-episode, mid n-step window
    buf = io.BytesIO()
    torch.save(first.training_state(), buf)
    second = _vector_ddqn(3, n_step=2, curriculum=CURRICULUM)
    second.load_training_state(torch.load(io.BytesIO(buf.getvalue()), weights_only=False))
    second.learn(240)
    a, b = _params(straight), _params(second)
    assert all(torch.equal(a[k], b[k]) for k in a) and straight.updates == second.updates


class _Bandit(gym.Env):
    """One-step episodes: the observation names one of three arms (one-hot); pulling it pays 1, the others 0."""

    def __init__(self):
        self.observation_space = spaces.Dict(
            {
                "obs": spaces.Box(0.0, 1.0, (3,), np.float32),
                "context": spaces.Box(0.0, 1.0, (1,), np.float32),
                "action_mask": spaces.MultiBinary(3),
            }
        )
        self.action_space = spaces.Discrete(3)
        self.arm = 0

    def _obs(self):
        return {
            "obs": np.eye(3, dtype=np.float32)[self.arm],
            "context": np.zeros(1, np.float32),
            "action_mask": np.ones(3, np.int8),
        }

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.arm = int(self.np_random.integers(3))
        return self._obs(), {}

    def step(self, action):
        return (
            self._obs(),
            float(action == self.arm),
            True,
            False,
            {"metrics": {"hit": float(action == self.arm)}},
        )


class _BanditVector(VectorEnv):
    """``n`` bandits as a vector env with the native vector env's reset-mask protocol (autoresets disabled)."""

    def __init__(self, n: int):
        self.envs = [_Bandit() for _ in range(n)]
        self.num_envs = n
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space
        self.env_infos = [{} for _ in range(n)]

    def _batch(self, obs):
        return {k: np.stack([o[k] for o in obs]) for k in obs[0]}

    def reset(self, *, seed=None, options=None):
        mask = (options or {}).get("reset_mask", np.ones(self.num_envs, bool))
        seeds = seed if isinstance(seed, list) else [None] * self.num_envs
        for i in np.flatnonzero(mask):
            self.envs[i].reset(seed=seeds[i])
        return self._batch([e._obs() for e in self.envs]), {}

    def step(self, actions):
        out = [e.step(int(a)) for e, a in zip(self.envs, actions, strict=True)]
        self.env_infos = [o[4] for o in out]
        rewards = np.array([o[1] for o in out])
        return (
            self._batch([o[0] for o in out]),
            rewards,
            np.ones(self.num_envs, bool),
            np.zeros(self.num_envs, bool),
            {},
        )


def test_ddqn_on_a_vector_env_learns_a_bandit():
    args = DDQNArgs(encoder="mlp", seed=0, learning_rate=1e-2, exploration_fraction=0.5, **SMALL_ARGS)
    algo = DDQN(args, _BanditVector(4), total_steps=600).learn(600)
    states = {
        "obs": np.eye(3, dtype=np.float32),
        "context": np.zeros((3, 1), np.float32),
        "action_mask": np.ones((3, 3), np.int8),
    }
    assert list(algo.greedy(states)) == [0, 1, 2]
    hits = [e["metrics"]["hit"] for e in algo.finished_episodes[-100:]]
    assert np.mean(hits) > 0.8, np.mean(hits)  # ε is 0.05 by then


def test_maskable_ppo_collects_and_learns_on_make_vec_env():
    from gpusched_lab.agents.algos.ppo import PPOArgs, make_ppo
    from gpusched_lab.agents.common import make_env
    from gpusched_lab.agents.nets.networks import config_for_env

    venv = make_vec_env(ENV, TINY, "graph", 4, seed=0)
    args = PPOArgs(encoder="gnn", hidden=16, device="cpu", seed=0, n_steps=16, batch_size=32, n_epochs=1)
    model = make_ppo(venv, config_for_env(make_env(ENV, TINY, "graph"), "gnn", 16, 1), args)
    model.learn(128)
    assert model.num_timesteps == 128
    buf = model.rollout_buffer  # every stored action was valid under the mask stored with it
    acts = buf.actions.reshape(-1).astype(int)
    masks = buf.action_masks.reshape(len(acts), -1)
    assert masks[np.arange(len(acts)), acts].all()
    assert np.array_equal(
        masks.astype(bool), buf.observations["action_mask"].reshape(len(acts), -1).astype(bool)
    )
    # what gpusched bench's rollout figure calls
    _, callback = model._setup_learn(10**9, None)
    callback.on_training_start(locals(), globals())
    assert model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=8)


def test_bench_figures_run_on_the_vector_env_and_split_ppo_time():
    from gpusched_lab.agents.bench import rollout_samples_per_second, training_samples_per_second

    kw = {"cluster": "tiny", "num_jobs": 8, "load": 0.9}
    r = rollout_samples_per_second("mlp", num_envs=4, steps=64, env_id=ENV, env_kwargs=kw)
    assert r["name"] == "rollout_ppo_mlp_4envs" and r["detail"]["samples"] == 64 and r["value"] > 0
    p = training_samples_per_second("ppo", "mlp", steps=64, env_id=ENV, env_kwargs=kw, num_envs=2)
    d = p["detail"]
    assert d["num_envs"] == 2 and d["steps"] >= 64
    assert 0 < d["rollout_cpu_seconds"] and 0 < d["update_cpu_seconds"]
    assert d["rollout_cpu_seconds"] + d["update_cpu_seconds"] <= d["cpu_seconds"] + 1e-6
    q = training_samples_per_second("ddqn", "mlp", steps=40, env_id=ENV, env_kwargs=kw, num_envs=4)
    assert (
        q["name"] == "train_ddqn_mlp_4envs"
        and q["detail"]["steps"] == 40
        and "update_cpu_seconds" not in q["detail"]
    )
