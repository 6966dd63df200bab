"""``scripts/studies/jobselect_learned.py``: per-family ratios against the held-in choice and the held-out best, the
windows lost, and the share of the measured room, on hand-built compare rows; a one-window run end to end."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "studies" / "jobselect_learned.py"


@pytest.fixture(scope="module")
def mod():
    spec = importlib.util.spec_from_file_location("jobselect_learned", SCRIPT)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def rows():
    a, b = "topdrl-philly-heldout-300-1101", "topdrl-philly-heldout-300-1105"
    c = "topdrl-philly-heldout-1000-1102"
    return [
        {"scenario": a, "seed": 0, "agent": 80.0, "gittins": 100.0, "las": 90.0},
        {"scenario": a, "seed": 1, "agent": 90.0, "gittins": 100.0, "las": 95.0},
        {"scenario": b, "seed": 0, "agent": 60.0, "gittins": 50.0, "las": 55.0},
        {"scenario": c, "seed": 0, "agent": 300.0, "gittins": 400.0, "las": 350.0},
    ]


def test_summary_exact_values(mod):
    search = {("topdrl-philly-heldout-300-1101", 0): 60.0, ("topdrl-philly-heldout-300-1105", 0): 50.0}
    s = mod.summarize(rows(), ("gittins", "las"), {"300": "gittins", "1000": "las"}, search)
    f = s["300"]
    assert f["best_heldin"] == "gittins"
    assert f["vs_best_heldin"]["ratio"] == pytest.approx(230 / 250) and f["vs_best_heldin"]["pairs"] == 3
    # held-out best over the family's pairs: LAS (mean 80) beats Gittins (83.3)
    assert f["best_heldout"] == "las" and f["vs_best_heldout"]["ratio"] == pytest.approx(230 / 240)
    assert f["windows"]["topdrl-philly-heldout-300-1101"]["ratio"] == pytest.approx(85 / 100)
    assert f["windows"]["topdrl-philly-heldout-300-1105"]["ratio"] == pytest.approx(60 / 50)
    assert f["windows_lost"] == 1
    # room share: only the pair with room (1105 seed 0 has search == heuristic: no room, left out)
    assert f["room"] == {"share": pytest.approx((100 - 80) / (100 - 60)), "pairs": 1}
    lo, hi = f["vs_best_heldin"]["ci95"]
    assert lo <= 230 / 250 <= hi
    g = s["1000"]
    assert g["best_heldin"] == "las" and g["vs_best_heldin"]["ratio"] == pytest.approx(300 / 350)
    assert g["room"] is None and g["windows_lost"] == 0


def test_search_table_reads_the_headroom_data(mod):
    hr = json.loads((ROOT / "docs" / "data" / "jobselect_headroom.json").read_text())
    best, search = mod.search_table(hr, "non-clairvoyant")
    assert best == {"300": "gittins", "1000": "gittins"}
    key = ("topdrl-philly-heldout-300-1101", 0)
    row = next(r for r in hr["families"]["300"]["rows"] if (r["window"], r["seed"]) == key)
    assert search[key] == min(v["avg_jct"] for v in row["rollout"].values())
    assert all(seed in (0, 1) for _, seed in search)  # the seeds the search ran on


def test_parse_seeds_and_family(mod):
    assert mod.parse_seeds("0-3,7") == [0, 1, 2, 3, 7]
    with pytest.raises(ValueError, match="--seeds"):
        mod.parse_seeds("a-b")
    assert mod.family_of("topdrl-philly-heldout-1000-1202") == "1000"
    with pytest.raises(ValueError, match="JOBS-MMDD"):
        mod.family_of("topdrl")


def test_one_window_end_to_end_and_resume(mod, tmp_path, capsys):
    out = tmp_path / "learned.json"
    ck = ROOT / "checkpoints" / "ppo_jobselect_gnn_nc"
    argv = [str(ck), "--seeds", "0", "--scenarios", "topdrl-philly-heldout-300-1113", "--out", str(out)]
    first = mod.main(argv)
    entry = first["checkpoints"][str(ck)]
    row = entry["done"]["topdrl-philly-heldout-300-1113"]["rows"][0]
    assert {"agent", "fifo", "tiresias", "las", "gittins"} <= set(row)
    assert np.isfinite(row["agent"]) and entry["summary"]["300"]["vs_best_heldin"]["pairs"] == 1
    capsys.readouterr()
    again = mod.main(argv)  # resumed: nothing runs again, same rows
    assert "(checkpoint, window) runs" not in capsys.readouterr().out
    assert again["checkpoints"][str(ck)]["done"] == entry["done"]


def test_bad_input(mod, tmp_path):
    with pytest.raises(SystemExit):
        mod.main([str(tmp_path), "--out", str(tmp_path / "x.json")])  # not a checkpoint
    ck = str(ROOT / "checkpoints" / "ppo_jobselect_gnn_nc")
    with pytest.raises(SystemExit):
        mod.main([ck, "--scenarios", "nope", "--out", str(tmp_path / "x.json")])
