"""Training commands refuse bad flags, --set keys and config values in one line naming the flag or the file and
field (exit 2), before anything is built; the help of each trainer lists its own --set keys and flags only."""

from __future__ import annotations

import dataclasses

import pytest
import typer

from gpusched_envs import cli


@pytest.fixture
def train(capsys):
    from gpusched_lab.train.cli import app

    command = typer.main.get_command(app)

    def run(*args: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as exc:
            cli.run_command(command, list(args), prog_name="gpusched train")
        out, err = capsys.readouterr()
        return exc.value.code, out, err

    return run


def one_line(code, out, err, needle):
    assert code == 2, (code, out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in out + err, err
    assert needle in lines[0], lines[0]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["ppo", "--steps", "0"], "--steps must be >= 1 (an integer)"),
        (["ppo", "--steps", "1" + "0" * 30], "set GPUSCHED_MAX_STEPS="),
        (["ppo", "--seed", "-1"], "--seed must be >= 0"),
        (["ppo", "--num-envs", "100000"], "set GPUSCHED_MAX_ENVS="),
        (["ppo", "--bc-steps", "3"], "options of the ddqn trainer"),
        (["ppo", "--set", "gama=0.9"], "unknown key 'gama'; did you mean gamma?"),
        (["ppo", "--set", "__class__=1"], "unknown key '__class__'"),
        (["ppo", "--set", "args.__class__=1"], "unknown ppo argument '__class__'"),
        (["ppo", "--set", "env_kwargs.__class__=1"], "'__class__' is not a valid name"),
        (["ppo", "--set", "gamma=.nan"], "--set gamma must be a finite number in (0, 1]"),
        (["ppo", "--set", "gamma=0"], "--set gamma must be a finite number in (0, 1]"),
        (["ppo", "--set", "learning_rate=-1e-3"], "--set learning_rate must be a finite number > 0"),
        (["ddqn", "--set", "end_epsilon=2"], "--set end_epsilon must be a finite number in [0, 1]"),
        (["ddqn", "--bc-steps", "-1"], "--bc-steps must be >= 0"),
        (["hmarl", "--set", "gama=1"], "did you mean gamma?"),
        (["hmarl", "--set", "imitation.roundz=1"], "unknown imitation key 'roundz'; did you mean rounds?"),
        (["hmarl", "--set", "ent_coef=-1"], "--set ent_coef must be a finite number >= 0"),
        (["hmarl", "--imitation-steps", "-1"], "--imitation-steps must be >= 0"),
    ],
)
def test_bad_flags_and_set_keys_are_one_line_naming_them(train, tmp_path, args, needle):
    one_line(*train(*args, "--out", str(tmp_path / "run")), needle)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("steps: !!python/object/apply:os.system [ls]\n", "invalid YAML"),
        (
            "a: &a [1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
            "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
            "g: [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n",
            "YAML expands past the limit",
        ),
        ("- 1\n", "a config is a mapping"),
        ("stpes: 3\n", "did you mean steps?"),
        ("steps: -3\n", "steps must be >= 1"),
        ("args: [1]\n", "args must be a mapping"),
    ],
)
@pytest.mark.parametrize("trainer", ["ppo", "hmarl"])
def test_bad_config_files_are_one_line_naming_the_file(train, tmp_path, trainer, text, needle):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    code, out, err = train(trainer, "--config", str(path), "--out", str(tmp_path / "run"))
    one_line(code, out, err, needle)
    assert str(path) in err


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("iterations: !!python/object:os.system ls\n", "invalid YAML"),
        ("inner_lr: .nan\n", "inner_lr must be a finite number > 0, got nan"),
        ("iteratons: 3\n", "unknown key 'iteratons'; did you mean iterations?"),
        ("__class__: 3\n", "unknown key '__class__'"),
        ("meta_batch: 100000\niterations: 100000\n", "GPUSCHED_MAX_EVALUATIONS"),
    ],
)
def test_meta_train_config_errors_are_one_line(tmp_path, capsys, monkeypatch, text, needle):
    monkeypatch.setattr(cli, "_add_plugin_commands", lambda: None)
    from gpusched_lab.train.meta_train import meta_train_cmd

    app = typer.Typer()
    app.command()(meta_train_cmd)
    path = tmp_path / "m.yaml"
    path.write_text(text)
    with pytest.raises(SystemExit) as exc:
        cli.run_command(typer.main.get_command(app), ["--config", str(path), "--out", str(tmp_path / "o")])
    out, err = capsys.readouterr()
    one_line(exc.value.code, out, err, needle)


def test_help_lists_each_trainers_own_set_keys_and_flags():
    from gpusched_lab.agents.algos.ddqn import DDQNArgs
    from gpusched_lab.agents.algos.ppo import PPOArgs
    from gpusched_lab.agents.methods.hmarl.config import HMARLArgs
    from gpusched_lab.train import cli as train_cli
    from gpusched_lab.train.config import TOP_KEYS

    for algo, args in (("ppo", PPOArgs), ("ddqn", DDQNArgs)):
        listed = {k.strip() for k in train_cli.SET_KEYS[algo].split(",")}
        assert listed == {f.name for f in dataclasses.fields(args)}, algo
    run_keys = {k.strip() for k in train_cli.RUN_KEYS.split(",")}
    assert run_keys == TOP_KEYS - {"env_kwargs", "args", "bc", "progress"}
    group = typer.main.get_command(train_cli.app)
    ppo = {o for p in group.commands["ppo"].params if not p.hidden for o in p.opts}
    ddqn = {o for p in group.commands["ddqn"].params for o in p.opts}
    assert "--bc-from" not in ppo and "--bc-steps" not in ppo and {"--bc-from", "--bc-steps"} <= ddqn
    hmarl_help = next(p.help for p in group.commands["hmarl"].params if "--set" in p.opts)
    assert all(f.name in hmarl_help for f in dataclasses.fields(HMARLArgs))


def test_imitation_budget_bounds_the_warm_start():
    from gpusched_lab.train.cli import imitation_budget

    assert imitation_budget({"rounds": 3, "episodes": 4, "max_steps": 5000}, 0) == ["imitation=null"]
    assert imitation_budget(None, 10) == []
    items = dict(i.split("=") for i in imitation_budget({"rounds": 3, "episodes": 4, "max_steps": 5000}, 100))
    assert items == {"imitation.rounds": "3", "imitation.episodes": "4", "imitation.max_steps": "8"}
    items = dict(i.split("=") for i in imitation_budget({"rounds": 3, "episodes": 4, "max_steps": 5000}, 2))
    assert (
        int(items["imitation.rounds"]) * int(items["imitation.episodes"]) * int(items["imitation.max_steps"])
        <= 2
    )
