"""Every numeric and name flag of ``gpusched`` refuses bad values in one line naming the flag (exit 2) within 5 s
and without the process's peak memory growing by 1 GiB.

The cases come from the CLI's own listing: the typer/click command tree of ``gpusched`` with every subcommand the
installed extras provide, each option's type read from the command (its :mod:`gpusched_envs.validation` parser,
else its annotation). A value is tried with the command's body replaced by a sentinel, so a value accepted while
the command line is parsed is seen without running anything; for the commands this package's training and library
side owns, an accepted value is then run for real (under a 5 s alarm), since a check in the body counts too.

``PENDING`` lists the cases of the evaluation commands that still fail, each with how it fails (it is empty);
it is checked exactly, so it can only shrink.
"""

from __future__ import annotations

import math
import resource
import signal
import time
from pathlib import Path

import pytest
import typer

from gpusched_envs import cli
from gpusched_envs.validation import parser_of

# commands of the evaluation package (another side of the project); everything else must pass every case
NOT_OWNED = {
    "evaluate",
    "leaderboard",
    "marl",
    "dag-bench",
    "adapt",
    "netsens-compare",
    "report",
    "train compare",
}


def owned(path: tuple[str, ...]) -> bool:
    return path[0] not in NOT_OWNED and " ".join(path[:2]) not in NOT_OWNED


HUGE = "1" + "0" * 30

# cases of the evaluation commands known to fail: (command, flag, value) -> how it fails ("accepted": the value
# passes the command line, so the command would run with it); none is left
PENDING: dict[tuple[str, str, str], str] = {}


class _Accepted(Exception):
    """The command body was reached: the value passed the command-line checks."""


def _walk(command, path=()):
    if hasattr(command, "commands"):
        for name, sub in sorted(command.commands.items()):
            yield from _walk(sub, (*path, name))
    else:
        yield path, command


def _kind(param) -> tuple[str, object]:
    parser = parser_of(param)
    if parser is not None:
        return parser.kind, parser
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    name = getattr(annotation, "__name__", str(annotation))
    return {"int": "int", "float": "float"}.get(name, "other"), None


def _bad_values(kind: str, parser) -> list[str]:
    if kind in ("int", "seed"):
        values = ["-1", "nan", HUGE]
        if getattr(parser, "min", None) is not None and parser.min >= 1:
            values.append("0")
        return values
    if kind == "float":
        lo = getattr(parser, "min", None)
        return ["nan", "inf", "-inf"] + (["-1"] if lo is not None and lo >= 0 else [])
    if kind == "name":
        return ["a/b", "[/]", "../x"]
    return []


def _group():
    saved = (list(cli.app.registered_commands), list(cli.app.registered_groups))
    cli._add_plugin_commands()
    try:
        return typer.main.get_command(cli.app)
    finally:
        cli.app.registered_commands[:], cli.app.registered_groups[:] = saved


GROUP = _group()


def _cases():
    for path, command in _walk(GROUP):
        required = [p for p in command.params if p.required]
        for param in command.params:
            if param.param_type_name != "option" or getattr(param, "hidden", False) or param.is_flag:
                continue
            kind, parser = _kind(param)
            flag = max(param.opts, key=len)
            for value in _bad_values(kind, parser):
                yield pytest.param(
                    path, command, flag, value, required, id=f"{' '.join(path)} {flag} {value}"
                )


CASES = list(_cases())


def _filler(param) -> list[str]:
    """A placeholder for a required parameter other than the one under test."""
    if param.param_type_name == "argument":
        return ["x"] * max(1, param.nargs)
    return [max(param.opts, key=len), "x"]


def _run(command, argv, capsys, real: bool) -> tuple[str, str]:
    """Run ``gpusched ARGV``; returns (outcome, stderr): ok-shaped exit or 'accepted' when the body was reached."""
    callback = command.callback

    def sentinel(*args, **kwargs):
        raise _Accepted

    if not real:
        command.callback = sentinel
    else:

        def alarm(signum, frame):
            raise TimeoutError("took longer than 5 s")

        signal.signal(signal.SIGALRM, alarm)
        signal.alarm(5)
    try:
        cli.run_command(GROUP, argv, prog_name="gpusched")
        outcome = "exit 0"
    except _Accepted:
        outcome = "accepted"
    except SystemExit as exc:
        outcome = f"exit {exc.code}"
    except TimeoutError:
        outcome = "slow"
    except Exception as exc:  # a traceback
        outcome = f"raised {type(exc).__name__}"
    finally:
        command.callback = callback
        if real:
            signal.alarm(0)
    _, err = capsys.readouterr()
    return outcome, err


def _verdict(outcome: str, err: str, flag: str) -> str:
    if outcome != "exit 2":
        return outcome
    lines = [line for line in err.splitlines() if line.strip()]
    if len(lines) != 1 or not lines[0].startswith("error: "):
        return "not one line"
    if flag not in lines[0]:
        return "flag not named"
    return "ok"


@pytest.mark.parametrize(("path", "command", "flag", "value", "required"), CASES)
def test_bad_value_is_one_line_naming_the_flag(
    path, command, flag, value, required, capsys, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # a command that runs writes nothing into the checkout
    fill = [a for p in required if flag not in p.opts for a in _filler(p)]
    argv = [*path, *fill, flag, value]
    start = time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux: the process's high-water mark
    outcome, err = _run(command, argv, capsys, real=False)
    if outcome == "accepted" and owned(path):
        outcome, err = _run(command, argv, capsys, real=True)
    verdict = _verdict(outcome, err, flag)
    assert time.perf_counter() - start < 5 + 1, "took longer than 5 s"
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak
    assert grown < 1024 * 1024, f"the peak memory grew by {grown / 1024:.0f} MiB (limit 1 GiB)"
    key = (" ".join(path), flag, value)
    if owned(path):
        assert verdict == "ok", (key, verdict, err)
    else:
        assert verdict == PENDING.get(key, "ok"), (key, verdict, err)


def test_pending_lists_only_cases_that_exist_and_commands_not_owned_here():
    keys = {(" ".join(c.values[0]), c.values[2], c.values[3]) for c in CASES}
    assert set(PENDING) <= keys
    assert not any(owned(tuple(k[0].split())) for k in PENDING)


def test_the_walk_sees_the_training_and_evaluation_commands():
    paths = {" ".join(p) for p, _ in _walk(GROUP)}
    assert {"simulate", "train ppo", "train ddqn", "train hmarl", "meta-train"} <= paths
    flags = {(c.values[0], c.values[2]) for c in CASES}
    assert (("train", "ppo"), "--num-envs") in flags and (("simulate",), "--seed") in flags


def test_caps_say_how_to_raise_them(monkeypatch):
    from gpusched_envs.validation import CAPS, ValidationError, check_cap

    monkeypatch.delenv("GPUSCHED_MAX_SEEDS", raising=False)
    with pytest.raises(ValidationError, match=r"--seeds: 100,001 seeds, .* \(set GPUSCHED_MAX_SEEDS=100001"):
        check_cap("seeds", 100_001, "--seeds")
    monkeypatch.setenv("GPUSCHED_MAX_SEEDS", "200000")
    check_cap("seeds", 100_001, "--seeds")
    assert CAPS["processes"].limit() >= 1
    assert not math.isnan(CAPS["action_space"].limit())
    assert Path(__file__).name == "test_cli_flags.py"


def test_seeds_means_one_thing_in_every_command():
    """``--seeds`` is a seed list or range wherever it appears (a count of seeds is ``--num-seeds``): every
    command's ``--seeds`` takes ``0-2``."""
    seen = []
    for path, command in _walk(GROUP):
        for param in getattr(command, "params", []):
            if "--seeds" not in getattr(param, "opts", ()):
                continue
            kind, _ = _kind(param)
            seen.append((" ".join(path), kind))
    assert seen, "no command has --seeds"
    counts = [p for p, kind in seen if kind in ("int", "float")]
    assert not counts, f"--seeds is a number in {counts}; a count of seeds is --num-seeds"
