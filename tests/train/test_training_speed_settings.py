"""Settings a training run's speed depends on hold on every path into the training loop: a resumed PPO run runs
torch with the configured thread count, as a new run does (two threads fighting over a shared CPU made resumed runs
several times slower per sample)."""

from __future__ import annotations

import torch
from gpusched_lab.agents.algos.ppo import FlatMaskablePPO
from gpusched_lab.train import runner
from gpusched_lab.train.config import RunConfig


def _cfg(steps: int) -> RunConfig:
    return RunConfig(
        algorithm="ppo",
        env="gpusched/JobSelect-v1",
        env_kwargs={"cluster": "tiny", "reward": "jct", "num_jobs": 8, "load": 0.9},
        steps=steps,
        seed=3,
        eval_seeds=[10_000],
        progress=False,
        args={
            "encoder": "mlp",
            "hidden": 8,
            "n_steps": 32,
            "batch_size": 16,
            "n_epochs": 1,
            "torch_threads": 1,
        },
    )


def test_a_resumed_ppo_run_runs_torch_with_the_configured_threads(tmp_path, monkeypatch):
    threads_before = torch.get_num_threads()
    seen: list[int] = []
    learn = FlatMaskablePPO.learn

    def recording_learn(self, *args, **kwargs):
        seen.append(torch.get_num_threads())
        return learn(self, *args, **kwargs)

    monkeypatch.setattr(FlatMaskablePPO, "learn", recording_learn)
    out = tmp_path / "ppo"
    try:
        runner.run_ppo(_cfg(32), out, "test")
        torch.set_num_threads(2)  # a new process starts with torch's default (every core)
        runner.run_ppo(_cfg(64), out, "test", resume=True)
    finally:
        torch.set_num_threads(threads_before)
    assert seen == [1, 1]
