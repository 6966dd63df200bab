"""``scripts/studies/marl_headroom.py``: the rollout over SRTF is never worse than SRTF on its window, and nothing
goes below the lower bound."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "studies" / "marl_headroom.py"


def _module():
    spec = importlib.util.spec_from_file_location("marl_headroom", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_rollout_never_worse_than_srtf_and_bound_below_all(tmp_path):
    out = tmp_path / "h.json"
    report = _module().main(["--days", "80-85", "--seeds", "3,4", "--jobs", "24", "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(report))
    for r in report["rows"]:
        assert r["rollout"] <= r["srtf"] + 1e-6  # SRTF is in the portfolio; the simulator is deterministic
        assert r["bound"] <= r["rollout"] + 1e-6
        assert sum(r["rule_choices"]) > 0
    s = report["summary"]
    assert s["srtf_over_bound"] >= 1.0 and s["rollout_vs_srtf"]["mean"] <= 0.0


def test_bad_arguments_are_one_line():
    with pytest.raises(SystemExit, match="--days"):
        _module().main(["--days", "85"])
    with pytest.raises(SystemExit, match="--load"):
        _module().main(["--load", "0"])
    with pytest.raises(SystemExit, match="--seeds"):
        _module().main(["--seeds", "1-2,5"])
