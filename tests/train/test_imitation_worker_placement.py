"""Imitation warm start on WorkerPlacement-v1 (train/bc.py's :class:`PlacementExpert`): round 0 plays FIFO with
backfill + the placement rule exactly (its average JCT is the simulator's run of that policy), DAgger moves a tiny
PPO policy towards the rule, and an unknown rule is refused before any episode."""

from __future__ import annotations

import numpy as np
import pytest
from gpusched_lab.agents.common import fresh_simulator, make_env
from gpusched_lab.train.bc import BCArgs, Dataset, PlacementExpert, collect_episode, pretrain

from gpusched_envs.policies.schedulers import FIFO

ENV_ID = "gpusched/WorkerPlacement-v1"
KWARGS = {"cluster": "tiny", "num_jobs": 16, "load": 1.2, "interference_scale": 1.3}


def _tiny_ppo():
    from gpusched_lab.agents.algos.ppo import PPOArgs, make_ppo
    from gpusched_lab.agents.nets.networks import config_for_env

    env = make_env(ENV_ID, KWARGS, "flat")
    args = PPOArgs(encoder="mlp", hidden=32, n_steps=32, batch_size=32, seed=0)
    return make_ppo(env, config_for_env(env, "mlp", 32, 1), args)


@pytest.mark.parametrize("rule", ["consolidate", "first-fit"])
def test_the_placement_expert_plays_the_rule_under_fifo_with_backfill(rule):
    env = make_env(ENV_ID, KWARGS, "flat")
    want = fresh_simulator(env, 7).run(FIFO(rule, backfill=True))["avg_jct"]
    data = Dataset()
    stats = collect_episode(env, PlacementExpert(rule), None, 0.99, 1.0, 7, 10_000, data)
    assert stats["done"] and stats["avg_jct"] == pytest.approx(want, rel=1e-12)
    assert len(data) == stats["steps"] and all(m[a] for m, a in zip(data.masks, data.actions, strict=True))


def test_pretrain_round_zero_is_the_rule_and_dagger_moves_the_policy_towards_it():
    model = _tiny_ppo()
    env = make_env(ENV_ID, KWARGS, "flat")

    def agreement() -> float:
        def learner(obs, mask):
            return int(model.predict(obs, action_masks=mask, deterministic=True)[0])

        out = collect_episode(env, PlacementExpert("consolidate"), learner, 0.99, 1.0, 99, 10_000, Dataset())
        return out["agreement"]

    before = agreement()
    bc = BCArgs.from_dict(
        {"policy": "consolidate", "episodes": 2, "rounds": 2, "epochs": 15, "batch_size": 64}
    )
    history = pretrain(model, ENV_ID, KWARGS, "flat", bc, 0.99, 1.0, seed=0)
    # round 0 follows the rule on the episode seeds pretrain draws (seed * 100_003 + round * 1_009 + i)
    rule_jct = [fresh_simulator(env, s).run(FIFO("consolidate", backfill=True))["avg_jct"] for s in (0, 1)]
    assert history[0]["avg_jct"] == pytest.approx(float(np.mean(rule_jct)), rel=1e-12)
    assert [h["round"] for h in history] == [0, 1] and history[1]["samples"] > history[0]["samples"]
    after = agreement()  # a seed it did not imitate on
    assert after > before + 0.4 and after >= 0.6, (before, after)


def test_an_unknown_placement_rule_is_refused_before_any_episode():
    with pytest.raises(ValueError, match="unknown placement 'tiresias'"):
        pretrain(_tiny_ppo(), ENV_ID, KWARGS, "flat", BCArgs(policy="tiresias"), 0.99, 1.0, seed=0)
