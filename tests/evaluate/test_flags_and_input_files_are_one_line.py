"""Bad input to the evaluation commands is one line ``error: ...`` naming the flag, or the file and field, with exit
code 2, before anything is allocated or started: sizes under :data:`gpusched_envs.validation.CAPS`, suite files
(encoding, shape, unknown fields, seed ranges), refused checkpoints; values holding rich markup print as text; a
leaderboard whose every cell failed still prints its summary."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import typer
from gpusched_lab.evaluate import adapt, cli, compare, dag_bench, marl, netsens_compare
from gpusched_lab.evaluate.scenarios import SuiteError, load_suite

from gpusched_envs.cli import run_command

ROOT = Path(__file__).resolve().parents[2]

ONE = """\
name: one
defaults:
  env_id: gpusched/JobSelect-v1
  seeds: 0-1
scenarios:
  - name: s
    env_kwargs: {cluster: tiny, workload: "synthetic:jobs=20,load=0.9,gpus=4"}
"""


def _command(function):
    app = typer.Typer()
    app.command(name="cmd")(function)
    app.command(name="other")(lambda: None)
    return typer.main.get_command(app), ["cmd"]


def run(function, argv, capsys) -> tuple[int, str, list[str]]:
    """``function``'s command with ``argv`` under the CLI's error contract: (exit code, stdout, stderr lines)."""
    if isinstance(function, typer.Typer):
        command, head = typer.main.get_command(function), []
    else:
        command, head = _command(function)
    with pytest.raises(SystemExit) as exc:
        run_command(command, [*head, *argv], prog_name="gpusched")
    out, err = capsys.readouterr()
    return exc.value.code, out, [line for line in err.splitlines() if line.strip()]


def assert_refused(result, *needles: str) -> None:
    code, out, lines = result
    assert code == 2, (code, out, lines)
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


# ------------------------------------------------------------------------------------------- flags and caps


@pytest.mark.parametrize(
    ("function", "argv", "needles"),
    [
        (
            adapt.adapt_cmd,
            ["--num-seeds", "10", "--first-seed", "100000"],
            ["--first-seed + --num-seeds", "100,010"],
        ),
        (adapt.adapt_cmd, ["--caution", "inf"], ["--caution", "finite"]),
        (adapt.adapt_cmd, ["--adapt-episodes", "0,1000000"], ["--adapt-episodes", "1,000,000 episodes"]),
        (
            adapt.adapt_cmd,
            ["--num-seeds", "1000", "--eval-episodes", "10000"],
            ["--num-seeds × --adapt-episodes × --eval-episodes"],
        ),
        (dag_bench.dag_bench, ["--dag", "nope.yaml", "--num-seeds", "0"], ["--num-seeds must be >= 1"]),
        (dag_bench.dag_bench, ["--dag", "nope.yaml", "--time-limit", "nan"], ["--time-limit", "finite"]),
        (
            dag_bench.dag_bench,
            ["--dag", "nope.yaml", "--population", "10000", "--iterations", "10000"],
            ["--population × --iterations", "100,000,000 evaluations"],
        ),
        (
            dag_bench.dag_bench,
            ["--dag", "nope.yaml", "--population", "1000", "--iterations", "1000", "--num-seeds", "20"],
            ["--population × --iterations × runs"],
        ),
        (dag_bench.dag_bench, ["--dag", "nope.yaml", "--refine", "2"], ["--refine must lie in [0, 1]"]),
        (dag_bench.dag_bench, ["--dag", "nope.yaml", "--cpsat-max-tasks", "-1"], ["--cpsat-max-tasks"]),
        (netsens_compare.netsens_compare, ["--load", "inf"], ["--load", "finite"]),
        (netsens_compare.netsens_compare, ["--seeds", "0-99999999"], ["--seeds: ", "more than the limit"]),
        (cli.evaluate, ["--agent", "fifo", "--env", "x", "--seeds", "5-3"], ["--seeds: empty range '5-3'"]),
        (netsens_compare.netsens_compare, ["--jobs", "0"], ["--jobs must be >= 1"]),
        (marl.app, ["--heads", "65"], ["--heads", "65 heads", "GPUSCHED_MAX_HEADS"]),
        (marl.app, ["--load", "0"], ["--load", "> 0"]),
        (marl.app, ["--jobs", "-1"], ["--jobs"]),
        (compare.compare_cmd, ["x", "--num-seeds", "0"], ["--num-seeds must be >= 1"]),
        (
            compare.compare_cmd,
            ["x", "--first-seed", str(2**63 - 1), "--num-seeds", "2"],
            ["--first-seed + --num-seeds - 1", "2**63"],
        ),
        (cli.evaluate, ["--agent", "fifo", "--env", "x", "--workers", "0"], ["--workers must be >= 1"]),
    ],
)
def test_flag_out_of_range_or_over_its_cap_is_one_line(
    function, argv, needles, capsys, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    for name in ("SEEDS", "EPISODES", "EVALUATIONS", "HEADS"):
        monkeypatch.delenv(f"GPUSCHED_MAX_{name}", raising=False)
    code, out, lines = run(function, argv, capsys)
    assert_refused((code, out, lines), *needles)
    assert not any(tmp_path.iterdir())  # refused before anything was written


@pytest.mark.parametrize(
    ("function", "argv"),
    [
        (cli.evaluate, ["--agent", "fifo", "--env", "x"]),
        (cli.leaderboard, []),
        (adapt.adapt_cmd, []),
    ],
)
def test_workers_are_capped_at_the_processes_limit(function, argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPUSCHED_MAX_PROCESSES", "2")
    result = run(function, [*argv, "--workers", "3"], capsys)
    assert_refused(result, "--workers", "3 processes", "limit of 2", "GPUSCHED_MAX_PROCESSES=3")


def test_python_m_evaluate_keeps_the_one_line_contract(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["evaluate", "--agent", "fifo", "--env", "x", "--workers", "1" + "0" * 30])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert exc.value.code == 2 and len(lines) == 1 and lines[0].startswith("error: --workers"), lines


# ------------------------------------------------------------------------------------------------ suite files


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b'name: x\nscenarios: [{name: a, env_id: e, description: "\xff"}]\n', r"s\.yaml: not UTF-8 text"),
        (b"- 1\n", r"s\.yaml: a suite is a mapping \(name, description, defaults, scenarios\), got list"),
        (b"name: x\nscenarios: []\n", r"s\.yaml: scenarios: expected a non-empty list"),
        (
            b"name: x\nscenario: []\nscenarios: [{name: a, env_id: e}]\n",
            r"s\.yaml: unknown field 'scenario'; did you mean scenarios\?",
        ),
        (
            b"name: x\ndefaults: {seedz: 3}\nscenarios: [{name: a, env_id: e}]\n",
            r"s\.yaml: defaults: unknown field 'seedz'; did you mean seeds\?",
        ),
        (
            b"name: x\nscenarios: [{name: a, env_id: e, env_kwrgs: {}}]\n",
            r"s\.yaml: scenarios\[0\]: unknown field 'env_kwrgs'; did you mean env_kwargs\?",
        ),
        (
            b"name: x\nscenarios: [{name: a, env_id: e, seeds: 5-3}]\n",
            r"s\.yaml: scenarios\[0\]: seeds: empty range '5-3'",
        ),
        (
            b"name: x\nscenarios: [{name: a, env_id: e, seeds: [-1]}]\n",
            r"s\.yaml: scenarios\[0\]: seeds: -1 is negative",
        ),
        (
            b"name: x\nscenarios: [{name: a, env_id: e, offered_load: .nan}]\n",
            r"s\.yaml: scenarios\[0\]: offered_load must be a finite number > 0",
        ),
        (
            b"name: x\nscenarios: [{name: a, env_id: e, env_kwargs: [1]}]\n",
            r"s\.yaml: scenarios\[0\]: env_kwargs must be a mapping, got list",
        ),
        (b"name: x\nscenarios: [{name: a, env_id: e, description: 3}]\n", r"description must be text"),
    ],
)
def test_bad_suite_file_names_the_file_and_field(text, message, tmp_path, capsys):
    suite = tmp_path / "s.yaml"
    suite.write_bytes(text)
    with pytest.raises(SuiteError, match=message):
        load_suite(suite)
    result = run(
        cli.leaderboard, ["--suite", str(suite), "--agents", "fifo", "--out", str(tmp_path / "o")], capsys
    )
    assert_refused(result, "s.yaml")
    assert not (tmp_path / "o").exists()


def test_every_bundled_suite_passes_the_field_checks():
    from gpusched_lab.evaluate.scenarios import list_suites

    assert all(load_suite(name).scenarios for name in list_suites())


# ---------------------------------------------------------------------------------------------- checkpoints


def test_evaluate_with_a_corrupt_checkpoint_is_one_line_before_any_seed(tmp_path, capsys):
    folder = tmp_path / "ckpt"
    shutil.copytree(ROOT / "checkpoints" / "ppo_jobselect_gnn", folder)
    with (folder / "model.pt").open("ab") as f:
        f.write(b"garbage")
    suite = tmp_path / "one.yaml"
    suite.write_text(ONE)
    code, out, lines = run(
        cli.evaluate, ["--agent", str(folder), "--scenario", f"{suite}/s", "--seeds", "0-2"], capsys
    )
    assert_refused((code, out, lines), "model.pt does not match meta.json")
    assert out == ""  # no table


# ------------------------------------------------------------------------------------- markup and failures


def _write_agent(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(body)
    return f"{path}:make"


def test_markup_in_agent_names_and_paths_prints_as_text(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "one.yaml").write_text(ONE)
    spec = _write_agent(
        tmp_path,
        "marked",
        "from gpusched_envs.policies.schedulers import FIFO\n\n\nclass A(FIFO):\n    name = 'x[/]y'\n\n\n"
        "def make():\n    return A()\n",
    )
    out_dir = "o[/]x"
    code, out, lines = run(
        cli.leaderboard,
        ["--suite", "one.yaml", "--agents", spec, "--out", out_dir, "--no-plots", "--no-progress"],
        capsys,
    )
    assert code == 0, lines
    assert "x[/]y" in out and "Wrote o[/]x/leaderboard.html" in " ".join(out.split())
    assert (
        json.loads((tmp_path / out_dir / "leaderboard.json").read_text())["aggregate"][0]["agent"] == "x[/]y"
    )
    code, out, lines = run(cli.report, [out_dir, "--no-plots"], capsys)
    assert code == 0 and "wrote o[/]x/leaderboard.html" in out, (out, lines)


def test_a_leaderboard_whose_every_cell_failed_prints_its_summary_and_one_error(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "one.yaml").write_text(ONE)
    spec = _write_agent(
        tmp_path,
        "boom",
        "class Boom:\n    name = 'boom'\n\n    def act(self, obs):\n        raise RuntimeError('broken [/]')\n\n\n"
        "def make():\n    return Boom()\n",
    )
    code, out, lines = run(
        cli.leaderboard,
        ["--suite", "one.yaml", "--agents", spec, "--out", "o", "--no-plots", "--no-progress"],
        capsys,
    )
    assert code == 1
    flat = " ".join(out.split())
    assert "2 cells: 0 computed, 0 cached, 0 recomputed" in flat and "2 failed" in flat
    assert "boom" in out and "failed" in out  # its row says failed, not "not applicable"
    assert "not applicable to any scenario" not in flat
    errors = [line for line in lines if line.startswith("error: ")]
    assert errors == ["error: all 2 cells failed (the warnings above say why); no agent was ranked"], lines
    assert [line for line in lines if line.startswith("warning: ")] == [
        "warning: boom on s failed: RuntimeError: broken [/]"
    ]
