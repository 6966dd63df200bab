"""TopDRL on the native vector env: it trains there (a curriculum's copies included) exactly as DDQN with the CNN
does, deterministically per seed, and refuses a vector env of another id, observation mode or placer, naming the
copy; on a list of envs it is DDQN with the CNN, step for step."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gpusched_lab.agents.algos.ddqn import DDQN, DDQNArgs
from gpusched_lab.agents.common import make_env, make_vector_env
from gpusched_lab.agents.methods.topdrl.agent import TopDRL
from gpusched_lab.train.runner import make_train_vector_env

ENV = "gpusched/JobSelect-v1"
TINY = {"cluster": "tiny", "num_jobs": 8, "load": 0.9, "placement": "closest"}
ARGS = dict(
    encoder="cnn",
    hidden=16,
    buffer_size=300,
    batch_size=8,
    learning_starts=24,
    target_update_interval=32,
    train_frequency=2,
    n_step=3,
    device="cpu",
)
CURRICULUM = [
    {"until": 48, "choices": [{"load": 0.7}, {"load": 1.1}]},
    {"until": 96, "choices": [{"num_jobs": 6}, {"num_jobs": 12, "load": 1.0}]},
]


def _params(algo) -> dict:
    return {k: v.clone() for k, v in algo.q.state_dict().items()}


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _vector(cls, seed: int, steps: int = 160):
    venv = make_train_vector_env(ENV, TINY, "image", 4, CURRICULUM)
    return cls(DDQNArgs(seed=seed, **ARGS), venv, total_steps=steps).learn(steps)


def test_topdrl_trains_on_the_vector_env_through_a_curriculum_as_ddqn_does():
    a, b, c = _vector(TopDRL, 4), _vector(TopDRL, 4), _vector(TopDRL, 5)
    assert a.venv is not None and a.global_step == 160
    # one gradient step per train_frequency env steps past learning_starts
    assert a.updates == (160 - 24) // 2
    assert a.buffer.size > 0 and a.finished_episodes
    assert _same(_params(a), _params(b)) and not _same(_params(a), _params(c))
    assert np.array_equal(a.buffer.actions, b.buffer.actions)
    assert [e["metrics"]["avg_jct"] for e in a.finished_episodes] == [
        e["metrics"]["avg_jct"] for e in b.finished_episodes
    ]
    plain = _vector(DDQN, 4)  # TopDRL only checks its setting: the same run as DDQN with the CNN
    assert _same(_params(a), _params(plain)) and a.updates == plain.updates
    # every copy is past the curriculum's last stage at 160 steps of the run
    assert all(env.stage() == len(CURRICULUM) for env in a.venv.envs)


def test_topdrl_on_a_list_of_envs_is_ddqn_with_the_cnn_step_for_step():
    def run(cls):
        env = make_env(ENV, TINY, "image")
        return cls(DDQNArgs(seed=2, **ARGS), [env], total_steps=90).learn(90)

    t, d = run(TopDRL), run(DDQN)
    assert t.venv is None and t.global_step == 90 and t.updates == (90 - 24) // 2
    assert _same(_params(t), _params(d)) and np.array_equal(t.buffer.returns, d.buffer.returns)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: make_vector_env(ENV, TINY, "graph", 2), r"obs_mode='image'.*copy 0 of the vector env"),
        (
            lambda: make_vector_env(ENV, {**TINY, "placement": "pack"}, "image", 2),
            r"placement='closest'.*copy 0 of the vector env",
        ),
        (
            lambda: make_vector_env("gpusched/WorkerPlacement-v1", {"cluster": "tiny"}, "image", 2),
            r"the vector env is 'gpusched/WorkerPlacement-v1'",
        ),
        (lambda: [make_env(ENV, {**TINY, "placement": "pack"}, "image")], r"placement='closest'.*env 0"),
        (lambda: [], "non-empty list of envs or a native vector env"),
    ],
    ids=["graph-copies", "pack-copies", "other-id", "pack-list", "empty-list"],
)
def test_topdrl_refuses_envs_outside_its_setting(build, message):
    with pytest.raises(ValueError, match=message):
        TopDRL(DDQNArgs(**ARGS), build())


def test_topdrl_names_the_one_vector_env_copy_outside_its_setting():
    venv = make_vector_env(ENV, TINY, "image", 3)
    # same spaces, another placer
    venv.envs[2] = make_env(ENV, {**TINY, "placement": "pack"}, "image").unwrapped
    with pytest.raises(ValueError, match="copy 2 of the vector env"):
        TopDRL(DDQNArgs(**ARGS), venv)


def test_topdrl_refuses_another_encoder_on_the_vector_env():
    with pytest.raises(ValueError, match="selector is the CNN, got encoder='mlp'"):
        TopDRL(DDQNArgs(**{**ARGS, "encoder": "mlp"}), make_vector_env(ENV, TINY, "image", 2))
