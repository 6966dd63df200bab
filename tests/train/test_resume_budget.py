"""``--resume`` without a step budget continues to the run's own budget (OUT/config.json), not to the CLI's default;
``--steps``, ``--set steps=N`` or a config file's ``steps`` still set a new one."""

from __future__ import annotations

import json

import yaml
from gpusched_lab.train.cli import app, steps_given
from typer.testing import CliRunner

runner_cli = CliRunner()


def _invoke(*args):
    result = runner_cli.invoke(app, [*args, "--no-progress"])
    assert result.exit_code == 0, result.output
    return result.output


def _steps(out) -> int:
    return json.loads((out / "checkpoint" / "meta.json").read_text())["steps"]


def test_resume_keeps_the_runs_own_budget_unless_a_new_one_is_given(tmp_path):
    config = tmp_path / "tiny.yaml"
    doc = {"env": "gpusched/JobSelect-v1", "env_kwargs": {"cluster": "tiny", "num_jobs": 12}, "steps": 48}
    doc |= {
        "num_envs": 1,
        "eval_every": 0,
        "checkpoint_every": 16,
        "args": {"encoder": "mlp", "learning_starts": 8},
    }
    config.write_text(yaml.safe_dump(doc))
    out = tmp_path / "run"
    _invoke("ddqn", "--config", str(config), "--out", str(out))
    assert _steps(out) == 48
    # no budget on the command line: the run is already at its own budget of 48 (the default would be 10,000)
    assert "48 steps" in _invoke("ddqn", "--out", str(out), "--resume")
    assert _steps(out) == 48
    # a new budget continues to it
    assert "80 steps" in _invoke("ddqn", "--out", str(out), "--resume", "--steps", "80")
    assert _steps(out) == 80
    assert "96 steps" in _invoke("ddqn", "--out", str(out), "--resume", "--set", "steps=96")
    assert _steps(out) == 96


def test_steps_given_reads_every_place_a_budget_can_come_from(tmp_path):
    with_steps = tmp_path / "a.yaml"
    with_steps.write_text("steps: 5\n")
    without = tmp_path / "b.yaml"
    without.write_text("seed: 1\n")
    assert steps_given(10, None, None)
    assert steps_given(None, None, ["seed=1", " steps =7"])
    assert steps_given(None, str(with_steps), None)
    assert not steps_given(None, str(without), ["seed=1", "stepsize=3"])
    assert not steps_given(None, None, None)
