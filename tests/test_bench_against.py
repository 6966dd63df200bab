"""``gpusched bench --against REV``: the pinned commit's code and this code timed in one run, printed as ratios."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpusched_envs.bench import AB_FIGURES

ROOT = Path(__file__).resolve().parent.parent


def gpusched(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpusched_envs.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )


def test_figure_list_names_every_figure():
    proc = gpusched("bench", "--figure", "list")
    assert proc.returncode == 0, proc.stderr
    listed = [line.rsplit("  (", 1)[0] for line in proc.stdout.splitlines() if line.strip()]
    assert listed == list(AB_FIGURES)


@pytest.mark.parametrize(
    "args, message",
    [
        (("--against", "no-such-commit-here"), "--against 'no-such-commit-here': no such commit"),
        (("--against", "HEAD", "--figure", "Warp drive"), "--figure 'Warp drive': not a figure"),
        (("--figure", "JobSelect flat"), "--figure and --repeats go with --against REV"),
        (("--against", "HEAD", "--repeats", "0"), "--repeats"),
    ],
)
def test_bad_input_is_one_line(args, message):
    proc = gpusched("bench", *args)
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_same_commit_on_both_sides_gives_a_ratio(tmp_path):
    """HEAD against the working tree: both sides run, the JSON keeps each side's figure and their ratio."""
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    out = tmp_path / "ab.json"
    proc = gpusched(
        "bench",
        "--against",
        "HEAD",
        "--figure",
        "JobSelect flat",
        "--repeats",
        "1",
        "--quick",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(out.read_text())
    assert rec["against"] == "HEAD"
    (row,) = rec["figures"]
    assert row["name"] == "JobSelect flat"
    assert row["old"]["unit"] == row["new"]["unit"] == "steps/s"
    assert row["ratio"] == pytest.approx(row["new"]["value"] / row["old"]["value"])
    assert "JobSelect flat" in proc.stdout and "x" in proc.stdout
