"""``python -m gpusched_lab.train``: each algorithm's smoke run through the CLI, configuration precedence, TensorBoard scalars,
checkpoints, and resume (DDQN bit-for-bit; PPO continues its step counter)."""

from __future__ import annotations

import json

import pytest
import torch
from gpusched_lab.train import runner
from gpusched_lab.train.cli import app, build_config
from gpusched_lab.train.config import RunConfig
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from typer.testing import CliRunner

runner_cli = CliRunner()


def invoke(*args):
    result = runner_cli.invoke(app, [*args, "--no-progress"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result


def scalars(run_dir):
    ea = EventAccumulator(str(run_dir / "tb"))
    ea.Reload()
    return set(ea.Tags()["scalars"])


def test_ddqn_cli_smoke_writes_checkpoint_and_scalars(tmp_path):
    out = tmp_path / "ddqn"
    invoke("ddqn", "--config", "smoke_ddqn", "--set", "encoder=mlp", "--out", str(out), "--seed", "2")
    meta = json.loads((out / "checkpoint" / "meta.json").read_text())
    assert (
        meta["algorithm"] == "ddqn"
        and meta["env_id"] == "gpusched/JobSelect-v1"
        and meta["obs_mode"] == "flat"
    )
    assert meta["seed"] == 2 and meta["steps"] == 300 and meta["evaluation"]["avg_jct"] > 0
    # the recorded command is the one a user runs to reproduce it
    assert meta["command"].startswith("gpusched train ddqn --config smoke_ddqn")
    torch.load(out / "checkpoint" / "model.pt", weights_only=True)
    tags = scalars(out)
    for tag in (
        "episode/return",
        "episode/avg_jct",
        "train/loss",
        "train/epsilon",
        "train/steps_per_second",
        "eval/avg_jct",
    ):
        assert tag in tags, tag


def test_ppo_cli_smoke_and_resume_continues(tmp_path):
    out = tmp_path / "ppo"
    invoke("ppo", "--config", "smoke_ppo", "--set", "encoder=cnn", "--steps", "128", "--out", str(out))
    tags = scalars(out)
    for tag in ("episode/return", "episode/avg_jct", "train/loss", "train/steps_per_second", "eval/avg_jct"):
        assert tag in tags, tag
    assert json.loads((out / "checkpoint" / "meta.json").read_text())["steps"] == 128
    invoke("ppo", "--steps", "256", "--out", str(out), "--resume")
    meta = json.loads((out / "checkpoint" / "meta.json").read_text())
    assert meta["steps"] == 256 and meta["obs_mode"] == "image" and meta["network"]["encoder"] == "cnn"


def test_topdrl_cli_uses_cnn_images_and_closest_placement(tmp_path):
    out = tmp_path / "topdrl"
    invoke("topdrl", "--config", "smoke_ddqn", "--steps", "120", "--out", str(out))
    meta = json.loads((out / "checkpoint" / "meta.json").read_text())
    assert meta["algorithm"] == "topdrl" and meta["obs_mode"] == "image"
    assert meta["env_kwargs"]["placement"] == "closest" and meta["network"]["encoder"] == "cnn"


def test_bad_override_is_one_clear_line(tmp_path):
    result = runner_cli.invoke(app, ["ddqn", "--set", "no_such_key=1", "--out", str(tmp_path / "x")])
    assert result.exit_code == 2
    assert "no_such_key" in result.output


def test_precedence_config_then_options_then_set():
    cfg = build_config(
        "ddqn",
        None,
        '{"load": 1.1}',
        50,
        None,
        "cpu",
        None,
        "smoke_ddqn",
        ["steps=70", "env_kwargs.num_jobs=5", "learning_rate=0.01"],
        False,
    )
    assert cfg.steps == 70  # --set beats --steps
    assert cfg.env_kwargs == {"cluster": "tiny", "reward": "jct", "num_jobs": 5, "load": 1.1}
    assert cfg.args["learning_rate"] == 0.01 and cfg.args["device"] == "cpu" and cfg.args["hidden"] == 16


class Interrupt(Exception):
    pass


def test_ddqn_resume_matches_uninterrupted_run_exactly(tmp_path, monkeypatch):
    def cfg():
        return RunConfig(
            algorithm="ddqn",
            env="gpusched/JobSelect-v1",
            env_kwargs={"cluster": "tiny", "reward": "jct", "num_jobs": 12, "load": 0.9},
            steps=240,
            seed=4,
            num_envs=2,
            eval_every=0,
            eval_seeds=[10_000],
            checkpoint_every=100,
            progress=False,
            args={
                "encoder": "mlp",
                "hidden": 16,
                "buffer_size": 300,
                "batch_size": 16,
                "learning_starts": 40,
                "target_update_interval": 30,
                "n_step": 2,
                "train_frequency": 2,
                "device": "cpu",
            },
        )

    runner.run_ddqn(cfg(), tmp_path / "straight", "test")
    from gpusched_lab.agents.algos.ddqn import DDQN

    original = DDQN.train_step

    def crashing(self):
        if self.global_step >= 150:  # after the checkpoint at step 100
            raise Interrupt
        original(self)

    monkeypatch.setattr(DDQN, "train_step", crashing)
    with pytest.raises(Interrupt):
        runner.run_ddqn(cfg(), tmp_path / "resumed", "test")
    monkeypatch.setattr(DDQN, "train_step", original)
    assert json.loads((tmp_path / "resumed/checkpoint/meta.json").read_text())["steps"] == 100
    runner.run_ddqn(cfg(), tmp_path / "resumed", "test", resume=True)
    a = torch.load(tmp_path / "straight/checkpoint/model.pt", weights_only=True)
    b = torch.load(tmp_path / "resumed/checkpoint/model.pt", weights_only=True)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_mounts_under_the_gpusched_command():
    """What the ``gpusched.commands`` entry point ``train = "train.cli:app"`` does."""
    import typer

    from gpusched_envs import cli

    root = typer.Typer()
    root.add_typer(app, name="train")
    root.command(name="simulate")(cli.simulate)
    result = runner_cli.invoke(root, ["train", "--help"])
    assert result.exit_code == 0 and "ddqn" in result.output and "topdrl" in result.output


@pytest.mark.slow
def test_ppo_with_subprocess_envs(tmp_path):
    out = tmp_path / "ppo2"
    invoke(
        "ppo",
        "--config",
        "smoke_ppo",
        "--set",
        "encoder=mlp",
        "--num-envs",
        "2",
        "--steps",
        "256",
        "--out",
        str(out),
    )
    assert json.loads((out / "checkpoint" / "meta.json").read_text())["steps"] >= 256


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["ppo", "--env", "nope"], "error: unknown env id 'nope'; registered: gpusched/"),
        (["ppo", "--set", "encoder=bogus"], "error: encoder: 'bogus' is not one of gnn, cnn, mlp"),
        (["ddqn", "--set", "args.encoder=bogus"], "error: encoder: 'bogus' is not one of gnn, cnn, mlp"),
        (["topdrl", "--set", "encoder=gnn"], "is not one of cnn"),
        (["ppo", "--set", "device=bogus"], "error: device: 'bogus' is not one of auto, cpu, cuda"),
        (["ddqn", "--set", "steps=abc"], "error: steps: expected an integer, got 'abc'"),
    ],
)
def test_bad_env_id_or_choice_is_one_line_with_the_valid_values(tmp_path, args, expected):
    result = runner_cli.invoke(app, [*args, "--out", str(tmp_path / "x"), "--no-progress"])
    assert result.exit_code == 2, result.output
    assert expected in result.output
    assert "gpusched/JobSelect-v1" in result.output or "--env" not in args
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert not (tmp_path / "x").exists()


def test_python_m_train_unknown_env_is_one_line_exit_2(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpusched_lab.train",
            "ppo",
            "--env",
            "nope",
            "--out",
            str(tmp_path / "x"),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().startswith("error: unknown env id 'nope'; registered: ")
    assert "gpusched/JobSelect-v1" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_validation_is_in_build_config_and_runner():
    with pytest.raises(ValueError, match=r"encoder: 'bogus' is not one of gnn, cnn, mlp"):
        build_config("ppo", None, None, None, None, None, None, None, ["encoder=bogus"], False)
    with pytest.raises(ValueError, match=r"unknown env id 'nope'"):
        build_config("ddqn", "nope", None, None, None, None, None, None, [], False)
    cfg = RunConfig(algorithm="ppo", args={"encoder": "bogus"})  # e.g. a hand-edited config.json on --resume
    with pytest.raises(ValueError, match=r"encoder: 'bogus' is not one of gnn, cnn, mlp"):
        runner.obs_mode_for(cfg)


def test_a_bare_key_error_is_readable():
    from gpusched_lab.train.cli import user_error_message

    assert user_error_message(KeyError("bogus")) == "missing or unknown key 'bogus'"
    assert user_error_message(ValueError("plain")) == "plain"


def test_ddqn_bc_options_warm_start_from_the_expert(tmp_path):
    """``--bc-from RULE --bc-steps N``: demonstrations and pre-training before the first env step, the warm-started
    policy evaluated at step 0 (bc/* and eval scalars), the options recorded in the command and the args."""
    out, config = tmp_path / "bc", tmp_path / "wp.yaml"
    config.write_text(
        "env: gpusched/WorkerPlacement-v1\nenv_kwargs: {cluster: tiny, num_jobs: 10, load: 0.9}\nsteps: 200\n"
        "eval_every: 100\neval_seeds: [10000]\nargs: {encoder: mlp, hidden: 16, buffer_size: 300, batch_size: 16, "
        "learning_starts: 0, train_frequency: 2, bc_demo_steps: 60}\n"
    )
    invoke("ddqn", "--config", str(config), "--bc-from", "closest", "--bc-steps", "20", "--out", str(out))
    meta = json.loads((out / "checkpoint" / "meta.json").read_text())
    assert meta["args"]["bc_from"] == "closest" and meta["args"]["bc_steps"] == 20
    assert "--bc-from closest --bc-steps 20" in meta["command"]
    tags = scalars(out)
    assert {"bc/loss", "bc/demo_steps", "eval/avg_jct"} <= tags
    ea = EventAccumulator(str(out / "tb"))
    ea.Reload()
    assert ea.Scalars("eval/avg_jct")[0].step == 0  # the warm-started policy, before any RL step


def test_bc_options_belong_to_ddqn(tmp_path):
    result = runner_cli.invoke(
        app, ["ppo", "--bc-from", "closest", "--out", str(tmp_path / "x"), "--no-progress"]
    )
    assert result.exit_code == 2 and "ddqn trainer" in result.output
    result = runner_cli.invoke(
        app, ["ddqn", "--bc-steps", "-3", "--out", str(tmp_path / "y"), "--no-progress"]
    )
    assert result.exit_code == 2 and "--bc-steps must be >= 0" in result.output


def test_merge_summaries_averages_the_eval_envs():
    a = {
        "seeds": [0],
        "avg_jct": 10.0,
        "avg_jct_per_seed": [10.0],
        "objective_name": "avg_jct",
        "objective": 10.0,
    }
    b = {
        "seeds": [0],
        "avg_jct": 30.0,
        "avg_jct_per_seed": [30.0],
        "objective_name": "avg_jct",
        "objective": 30.0,
    }
    merged = runner.merge_summaries([a, b])
    assert merged == {
        "seeds": [0, 0],
        "avg_jct": 20.0,
        "avg_jct_per_seed": [10.0, 30.0],
        "objective_name": "avg_jct",
        "objective": 20.0,
    }


def test_ppo_eval_choices_select_on_several_workloads(tmp_path):
    """``eval_choices``: the deterministic policy is evaluated on every seed of each listed env-kwargs override (here
    two offered loads), and the checkpoint's evaluation holds one figure per (choice, seed)."""
    out = tmp_path / "ppo_choices"
    invoke(
        "ppo", "--config", "smoke_ppo", "--steps", "64", "--out", str(out),
        "--set", "eval_choices=[{load: 0.5}, {load: 2.0}]", "--set", "eval_seeds=[7]",
    )  # fmt: skip
    meta = json.loads((out / "checkpoint" / "meta.json").read_text())
    ev = meta["evaluation"]
    assert ev["seeds"] == [7, 7] and len(ev["avg_jct_per_seed"]) == 2
    assert ev["avg_jct"] == pytest.approx(sum(ev["avg_jct_per_seed"]) / 2)
    assert ev["avg_jct_per_seed"][0] != ev["avg_jct_per_seed"][1]  # two different workloads
    with pytest.raises(ValueError, match="eval_choices"):
        build_config("ppo", None, None, None, None, None, None, "smoke_ppo", ["eval_choices=[1, 2]"], False)


def test_ddqn_eval_choices_select_on_several_workloads(tmp_path):
    """The DDQN trainer reads ``eval_choices`` as the PPO one does (it used to evaluate on the run's env only)."""
    out = tmp_path / "ddqn_choices"
    invoke(
        "ddqn", "--config", "smoke_ddqn", "--steps", "64", "--out", str(out),
        "--set", "eval_choices=[{load: 0.5}, {load: 2.0}]", "--set", "eval_seeds=[7]",
    )  # fmt: skip
    ev = json.loads((out / "checkpoint" / "meta.json").read_text())["evaluation"]
    assert ev["seeds"] == [7, 7] and len(ev["avg_jct_per_seed"]) == 2
    assert ev["avg_jct_per_seed"][0] != ev["avg_jct_per_seed"][1]
