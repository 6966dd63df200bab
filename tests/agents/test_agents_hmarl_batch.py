"""HMARL's rollout scores the interference model's candidates of every env copy in one forward: the same features as
scoring each copy on its own."""

from __future__ import annotations

import numpy as np
from gpusched_lab.agents.methods.hmarl.agent import HMARLArgs, Trainer, stack_agents
from gpusched_lab.agents.methods.hmarl.interference import (
    InterferenceArgs,
    InterferenceModel,
    collect_samples,
)

KW = dict(num_agents=2, cluster="tiny", num_jobs=30, load=2.0)


def test_interference_scores_of_all_copies_in_one_forward_equal_each_copy_scored_alone(tmp_path):
    X, y = collect_samples(KW, range(1))
    model = InterferenceModel.fit(X, y, InterferenceArgs(epochs=5))
    model.save(tmp_path / "inter")
    args = HMARLArgs(
        num_envs=3, n_steps=4, hidden=8, layers=1, device="cpu", interference_model=str(tmp_path / "inter")
    )
    trainer = Trainer(KW, args)
    trainer._reset_all()
    rng = np.random.default_rng(0)
    stepped = []
    for env, obs in zip(trainer.envs, trainer._obs, strict=True):  # the copies in different states
        for _ in range(int(rng.integers(1, 5))):
            obs, *_ = env.step({a: int(rng.choice(np.flatnonzero(o["action_mask"]))) for a, o in obs.items()})
        stepped.append(obs)
    trainer._obs = stepped
    calls = []
    predict = model.predict
    trainer.interference.predict = lambda rows: calls.append(len(rows)) or predict(rows)
    batched = trainer._batches()
    assert len(calls) == 1 and calls[0] > 0
    alone = [
        stack_agents(o, list(o), model.candidate_scores(env, list(o)))
        for env, o in zip(trainer.envs, trainer._obs, strict=True)
    ]
    for key, value in batched.items():
        np.testing.assert_allclose(value, np.concatenate([p[key] for p in alone]), rtol=1e-6, atol=1e-7)
    assert batched["candidate_interference"].any()
    roll = trainer.collect()  # a rollout with the model: (T, N·K) rows
    assert roll["action"].shape == (4, 3 * 2)
