"""``gpusched marl`` (evaluate/marl.py): a tiny paired evaluation and its one-line errors."""

from __future__ import annotations

import json

from gpusched_lab.evaluate.marl import app, scenario_kwargs
from typer.testing import CliRunner


def test_marl_evaluates_heuristics_on_paired_seeds(tmp_path):
    out = tmp_path / "marl"
    res = CliRunner().invoke(
        app,
        [
            "--scenarios",
            "dc4",
            "--seeds",
            "1,2",
            "--jobs",
            "12",
            "--out",
            str(out),
            "--schedulers",
            "fifo-closest,fifo-closest+backfill,tiresias-consolidate,sjf-consolidate+backfill,srtf-consolidate",
        ],
    )
    assert res.exit_code == 0, res.output
    report = json.loads((out / "marl.json").read_text())
    r = report["scenarios"]["dc4"]["results"]
    assert set(r) == {
        "fifo-closest",
        "fifo-closest+backfill",
        "tiresias-consolidate",
        "sjf-consolidate+backfill",
        "srtf-consolidate",
    }
    # which rows read the traced durations (the fair bar for a clairvoyant learner)
    assert [k for k, v in r.items() if v["clairvoyant"]] == ["sjf-consolidate+backfill", "srtf-consolidate"]
    for v in r.values():
        assert len(v["per_seed"]) == 2 and v["ci95"][0] <= v["avg_jct"] <= v["ci95"][1]
    assert r["fifo-closest"]["latency_ms_median"] is not None  # decisions timed in the env
    md = (out / "marl.md").read_text()
    assert "| fifo-closest | 4 | no |" in md
    # the lower bound (mean ideal runtime): no scheduler is below it on any seed
    bound = report["scenarios"]["dc4"]["lower_bound"]["per_seed"]
    assert len(bound) == 2 and all(b > 0 for b in bound)
    for v in r.values():
        assert all(j >= b - 1e-6 for j, b in zip(v["per_seed"], bound, strict=True))
        assert v["over_bound"] >= 1.0
    assert "| *lower bound* |" in md
    assert scenario_kwargs("dc16-8")["num_agents"] == 8
    assert scenario_kwargs("dc4", load=2.0)["workload"].endswith("jobs=120,load=2.0")


def test_marl_bad_arguments_are_one_line():
    runner = CliRunner()
    for args, text in (
        (["--scenarios", "mars"], "unknown scenario 'mars'"),
        (["--seeds", "x-y"], "--seeds"),
        (["--schedulers", "oracle"], "unknown ['oracle']"),
        (["--checkpoint", "nofolder"], "NAME=FOLDER"),
    ):
        res = runner.invoke(app, args)
        assert res.exit_code == 2 and text in res.output
        assert "Traceback" not in res.output
