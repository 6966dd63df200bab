"""Curricula: the training env follows the stages' kwargs by the run's step count, rejects stages that change the
layout, and a DDQN run trains through one (and its learning curves plot)."""

from __future__ import annotations

import numpy as np
import pytest
from gpusched_lab.train import runner
from gpusched_lab.train.config import RunConfig
from gpusched_lab.train.curriculum import CurriculumEnv, parse_stages

BASE = {"cluster": "tiny", "num_jobs": 4, "load": 0.9}
STAGES = [
    {"until": 8, "env_kwargs": {"load": 0.5}},
    {"until": 16, "choices": [{"load": 1.5}, {"load": 2.0}]},
]


def play(env, steps: int) -> list[float]:
    """Loads of the episodes started while taking ``steps`` steps."""
    env.reset(seed=3)
    loads = [env.unwrapped.load]
    for _ in range(steps):
        obs, _, terminated, truncated, _ = env.step(int(np.flatnonzero(env.action_masks())[0]))
        if terminated or truncated:
            env.reset()
            loads.append(env.unwrapped.load)
    return loads


def test_stages_follow_the_run_steps_and_end_on_the_base_kwargs():
    env = CurriculumEnv(
        "gpusched/JobSelect-v1", BASE, STAGES, "flat", num_envs=2
    )  # 2 envs: run steps = 2 × own
    loads = play(env, 30)
    assert loads[0] == 0.5
    stage1 = [x for x in loads if x in (1.5, 2.0)]
    assert stage1 and loads.index(stage1[0]) > 0
    assert loads[-1] == 0.9 and env.stage() == 2
    assert loads == sorted(loads, key=lambda x: {0.5: 0, 1.5: 1, 2.0: 1, 0.9: 2}[x])  # stages never go back


def test_bad_stages_are_named():
    with pytest.raises(ValueError, match=r"curriculum\[1\]\.until"):
        parse_stages([{"until": 10}, {"until": 5}], {})
    with pytest.raises(ValueError, match=r"curriculum\[0\]"):
        parse_stages([{"until": 10, "bogus": 1}], {})
    with pytest.raises(ValueError, match="keep the cluster layout"):
        CurriculumEnv("gpusched/JobSelect-v1", BASE, [{"until": 5, "env_kwargs": {"window": 3}}], "flat")


def test_ddqn_trains_through_a_curriculum(tmp_path):
    cfg = RunConfig(
        algorithm="ddqn",
        env="gpusched/JobSelect-v1",
        env_kwargs=dict(BASE),
        steps=60,
        eval_seeds=[10_000],
        progress=False,
        curriculum=STAGES,
        args={"encoder": "mlp", "hidden": 8, "buffer_size": 100, "batch_size": 8, "learning_starts": 10},
    )
    result = runner.run_ddqn(cfg, tmp_path / "run", "test")
    assert result["steps"] == 60 and result["evaluation"]["avg_jct"] > 0
    from gpusched_lab.train.curves import plot, read_scalars

    steps, values = read_scalars(tmp_path / "run", "eval/avg_jct")
    assert list(steps) == [60] and values[0] == pytest.approx(result["evaluation"]["avg_jct"], rel=1e-6)
    png = plot([tmp_path / "run"], tmp_path / "curves.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
