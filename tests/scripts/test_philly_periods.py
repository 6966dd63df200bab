"""The Philly period statistics: additive job counts, ordered quantiles, the table, and one clear error for a bad
period list."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "studies"))
import philly_periods as pp  # noqa: E402


def test_adjacent_periods_add_up_and_quantiles_are_ordered():
    a = pp.period_row("2017-11-01", "2017-11-15")
    b = pp.period_row("2017-11-16", "2017-11-30")
    whole = pp.period_row("2017-11-01", "2017-11-30")
    assert a["jobs"] + b["jobs"] == whole["jobs"] > 0
    # the mean of the whole is the job-weighted mean of its parts
    mean = (a["jobs"] * a["mean_duration_s"] + b["jobs"] * b["mean_duration_s"]) / whole["jobs"]
    assert whole["mean_duration_s"] == pytest.approx(mean, rel=1e-12)
    for r in (a, b, whole):
        assert 0 < r["median_duration_s"] <= r["p90_duration_s"]
        assert 0.0 <= r["multi_gpu_share"] <= 1.0 and 0.0 <= r["multi_gpu_time_share"] <= 1.0
        assert r["mean_gpus"] >= 1.0


def test_markdown_row():
    row = {
        "period": "a to b",
        "jobs": 1234,
        "median_duration_s": 99.6,
        "mean_duration_s": 1000.4,
        "p90_duration_s": 5000.0,
        "mean_gpus": 1.456,
        "multi_gpu_share": 0.104,
        "multi_gpu_time_share": 0.5,
    }
    assert (
        pp.markdown([row]).splitlines()[-1] == "| a to b | 1,234 | 100 | 1,000 | 5,000 | 1.46 | 10% | 50% |"
    )


@pytest.mark.parametrize("text", ["2017-10-01", "2017-10-01:", ":2017-10-02", " , "])
def test_bad_periods_say_what(text):
    with pytest.raises(SystemExit, match="--periods"):
        pp.parse_periods(text)
