"""Imitation warm start (train/bc.py): discounted returns exactly, argument checks, and DAgger moving a tiny PPO
policy towards the heuristic it imitates (the learner agrees with Tiresias more after than before)."""

from __future__ import annotations

import numpy as np
import pytest
from gpusched_lab.agents.common import make_env
from gpusched_lab.train.bc import BCArgs, Dataset, collect_episode, pretrain
from gpusched_lab.train.config import RunConfig, apply_set, validate

ENV_KWARGS = {
    "cluster": "tiny",
    "workload": "synthetic:jobs=12,load=2.0,gpus=16,max_gpus=4",
    "workload_seed": 3,
    "preemption": True,
    "window": 16,
    "preempt_window": 16,
    "information": "non-clairvoyant",
}


def test_dataset_returns_are_discounted_sums():
    data = Dataset()
    obs = [{"x": np.array([float(i)])} for i in range(3)]
    data.add_episode(obs, [0, 1, 2], [np.ones(3, bool)] * 3, [1.0, -2.0, 4.0], gamma=0.5)
    # G2 = 4, G1 = -2 + 0.5·4 = 0, G0 = 1 + 0.5·0 = 1
    assert data.returns == [1.0, 0.0, 4.0]
    assert len(data) == 3 and np.stack(data.obs["x"]).ravel().tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize(
    ("doc", "match"),
    [
        ({}, "policy"),
        ({"policy": "tiresias", "epoch": 3}, "unknown key"),
        ({"policy": "tiresias", "rounds": 0}, "bc.rounds"),
        ({"policy": "tiresias", "episodes": True}, "bc.episodes"),
        ({"policy": "tiresias", "beta_decay": 1.5}, "beta_decay"),
        ({"policy": "tiresias", "choices": [3]}, "bc.choices"),
    ],
)
def test_bad_bc_blocks_are_refused(doc, match):
    with pytest.raises(ValueError, match=match):
        BCArgs.from_dict(doc)


def test_bc_keys_from_set_and_only_for_ppo():
    cfg = RunConfig(algorithm="ppo", bc={"policy": "tiresias"})
    apply_set(cfg, ["bc.rounds=2", "bc.learning_rate=0.01"], set())
    assert cfg.bc == {"policy": "tiresias", "rounds": 2, "learning_rate": 0.01}
    validate(cfg)
    with pytest.raises(ValueError, match="bc.rounds"):
        apply_set(cfg, ["bc.rounds=0"], set())
        validate(cfg)
    with pytest.raises(ValueError, match="for ppo runs"):
        validate(RunConfig(algorithm="ddqn", bc={"policy": "tiresias"}))


def agreement(model, env_kwargs: dict, seed: int) -> float:
    """Fraction of the heuristic's own states where the deterministic policy picks the heuristic's action."""
    from gpusched_envs.envs.adapters import HeuristicAgent
    from gpusched_envs.policies import make_policy

    env = make_env("gpusched/JobSelect-v1", env_kwargs, "flat")

    def learner(obs, mask):
        return int(model.predict(obs, action_masks=mask, deterministic=True)[0])

    stats = collect_episode(
        env, HeuristicAgent(make_policy("tiresias")), learner, 0.99, 1.0, seed, 10_000, Dataset(), beta=1.0
    )
    return stats["agreement"]


def test_dagger_moves_the_policy_towards_the_heuristic():
    from gpusched_lab.agents.algos.ppo import PPOArgs, make_ppo
    from gpusched_lab.agents.nets.networks import config_for_env

    env = make_env("gpusched/JobSelect-v1", ENV_KWARGS, "flat")
    args = PPOArgs(encoder="mlp", hidden=32, n_steps=32, batch_size=32, seed=0)
    model = make_ppo(env, config_for_env(env, "mlp", 32, 1), args)
    before = agreement(model, ENV_KWARGS, seed=99)
    bc = BCArgs.from_dict({"policy": "tiresias", "episodes": 2, "rounds": 2, "epochs": 15, "batch_size": 64})
    history = pretrain(model, "gpusched/JobSelect-v1", ENV_KWARGS, "flat", bc, 0.99, 1.0, seed=0)
    after = agreement(model, ENV_KWARGS, seed=99)  # a seed it did not imitate on
    assert [h["round"] for h in history] == [0, 1]
    assert history[0]["agreement"] is None and history[1]["beta"] == 0.5
    assert history[1]["samples"] > history[0]["samples"]
    assert history[1]["loss"] < history[0]["loss"] or history[1]["p_expert_gt_half"] > 0.5
    assert after > before + 0.2 and after >= 0.7, (before, after)
