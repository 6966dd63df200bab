"""``gpusched bench --against REV``: the pinned commit's code and this code timed in one run, printed as ratios."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpusched_envs import bench
from gpusched_envs.bench import AB_FIGURES, median_run

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
        (("--figure", "JobSelect flat"), "--figure, --repeats and --no-warm-up go with --against REV"),
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


@pytest.mark.parametrize(
    "values, expected",
    [([3.0], 3.0), ([5.0, 1.0, 3.0], 3.0), ([4.0, 1.0], 2.5), ([9.0, 1.0, 2.0, 4.0], 3.0)],
)
def test_the_median_of_an_even_count_is_the_mean_of_the_two_middle_runs(values, expected):
    runs = [{"value": v, "unit": "s", "run": i} for i, v in enumerate(values)]
    got = median_run(runs)
    assert got["value"] == expected
    assert got["values"] == values  # every run's value, in the order they ran
    assert got["unit"] == "s"


@pytest.mark.parametrize("warm", [True, False])
def test_each_side_runs_the_figure_once_untimed_before_the_timed_runs(monkeypatch, warm):
    """The warm-up's value never reaches the median: a warm-up that reads 1000x slower leaves the ratio alone."""
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    calls = []

    def fake(code, tree, kind, args, steps):
        first = sum(1 for c in calls if c[0] == tree) == 0
        calls.append((tree, int(steps)))
        slow = warm and first  # a cold cache: the first process of each tree
        side = 1.0 if tree != str(ROOT) else 2.0
        return {"value": side / (1000.0 if slow else 1.0), "unit": "steps/s"}

    monkeypatch.setattr(bench, "_run_json", fake)
    out = bench.compare_with_commit(
        "HEAD", True, ["JobSelect flat"], repeats=3, say=lambda *_: None, warm=warm
    )
    (row,) = out["figures"]
    assert len(calls) == 2 * 3 + (2 if warm else 0)
    if warm:
        assert [c[1] for c in calls[:2]] == [200, 200]  # a short untimed run per side first
    assert row["ratio"] == pytest.approx(2.0)
    assert row["old"]["values"] == [1.0, 1.0, 1.0] and row["warm_up"] is warm
