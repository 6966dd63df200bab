"""``scripts/studies/jobselect_headroom.py``: the rollout is never worse than its base and finds the better schedule
on a hand-built instance, sharing copies changes nothing, runs repeat exactly, and the best heuristic is the one
chosen on the held-in windows."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from gpusched_envs.sim import SimConfig, Simulator
from tests.toy import make_workload

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "studies" / "jobselect_headroom.py"
DURATION = SimConfig(speed_model="duration", restart_delay=30.0)


@pytest.fixture(scope="module")
def hr():
    spec = importlib.util.spec_from_file_location("jobselect_headroom", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def two_jobs(toy_cluster):
    # a long 16-GPU job at t=0, a short 16-GPU job at t=10: the toy cluster holds one of them at a time
    return Simulator(toy_cluster, make_workload([(0, 1000, 16), (10, 100, 16)]), DURATION)


def test_rollout_over_las_finds_the_preemption_las_makes_late(hr, toy_cluster):
    # LAS alone: the long job A is demoted at 900 GPU-seconds (t = 56.25) and the short job B preempts it; at
    # t = 112.5 both are at level 1 and A (earlier) preempts B; A's demotion at 3600 GPU-seconds (t = 281.25) lets B
    # finish at 281.25 + 30 + 43.75 = 355, and A at 385 + 805 = 1190: (1190 + 345) / 2 = 767.5.
    # Preempting A for B at t = 10 (SRSF in the portfolio) and nothing else: B ends at 110, A at 110 + 30 + 990:
    # (1130 + 100) / 2 = 615.
    sim = two_jobs(toy_cluster)
    r = hr.rollout(sim, "las")
    assert r["base_jct"] == pytest.approx(767.5)
    assert r["avg_jct"] == pytest.approx(615.0)
    assert list(sim.finish_time) == pytest.approx([1130.0, 110.0])
    names = hr.rule_names("las")
    assert names == ["las", "las-nopreempt", "srsf", "srtf"]
    assert r["rule_choices"] == [2, 0, 1, 0]  # LAS at t = 0 and t = 110, SRSF at t = 10 (SRTF ties with it)


@pytest.mark.parametrize("base", ["srtf", "las", "gittins", "tiresias", "fifo", "sjf"])
def test_rollout_never_worse_than_its_base(hr, toy_cluster, base):
    rows = [(0, 500, 8), (5, 50, 4), (5, 400, 16), (20, 30, 2), (25, 900, 4), (30, 10, 8), (40, 200, 1)]
    sim = Simulator(toy_cluster, make_workload(rows), DURATION)
    alone = Simulator(toy_cluster, make_workload(rows), DURATION).run(hr.heuristic(base))["avg_jct"]
    r = hr.rollout(sim, base)
    assert r["base_jct"] == pytest.approx(alone)
    assert r["avg_jct"] <= alone + 1e-9
    assert r["decisions"] == r["searched"] == sum(r["rule_choices"]) > 0
    assert r["metrics"]["lower_bound_avg_jct"] <= r["avg_jct"]


def test_sharing_copies_and_stride_keep_the_guarantee_and_repeat_exactly(hr, toy_cluster):
    rows = [(0, 500, 8), (5, 50, 4), (5, 400, 16), (20, 30, 2), (25, 900, 4), (30, 10, 8), (40, 200, 1)]

    def sim():
        return Simulator(toy_cluster, make_workload(rows), DURATION)

    shared, full = hr.rollout(sim(), "las"), hr.rollout(sim(), "las", share=False)
    assert shared["avg_jct"] == full["avg_jct"] and shared["rule_choices"] == full["rule_choices"]
    assert shared["simulated"] < full["simulated"]
    again = hr.rollout(sim(), "las")
    assert {k: again[k] for k in ("avg_jct", "rule_choices", "simulated")} == {
        k: shared[k] for k in ("avg_jct", "rule_choices", "simulated")
    }
    strided = hr.rollout(sim(), "las", stride=3)
    assert strided["searched"] == -(-strided["decisions"] // 3)
    assert strided["avg_jct"] <= strided["base_jct"] + 1e-9
    with pytest.raises(ValueError, match="stride"):
        hr.rollout(sim(), "las", stride=0)


def test_best_heuristic_is_chosen_by_geometric_mean(hr):
    # the arithmetic mean prefers "a" (1,100 against 1,555: window 2 decides), the geometric mean prefers "b"
    # (sqrt(110 * 3000) = 574 against sqrt(200 * 2000) = 632)
    rows = [{"a": 200.0, "b": 110.0}, {"a": 2000.0, "b": 3000.0}]
    assert hr.choose_best(rows, ["a", "b"]) == "b"
    assert hr.choose_best([{"a": 2.0, "b": 2.0}], ["b", "a"]) == "b"  # ties: the earlier
    with pytest.raises(ValueError, match="no rows"):
        hr.choose_best([], ["a"])


def test_the_held_in_choice_is_fixed_for_the_held_out_windows(hr, tmp_path, monkeypatch):
    monkeypatch.setattr(hr, "HELD_IN", {300: ("2017-10-06",), 1000: ("2017-10-20",)})
    out = tmp_path / "h.json"
    args = ["--families", "300", "--windows", "1", "--seeds", "0", "--heldin-seeds", "0"]
    report = hr.main([*args, "--rollout", "300=0", "--stride", "300=1000", "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(report))
    assert not out.with_suffix(".partial.json").exists() and report["complete"]
    fam = report["families"]["300"]
    for cls, names in hr.CLASSES.items():
        assert fam["best"][cls] == hr.choose_best(fam["heldin_rows"], names)
        assert fam["summary"][cls]["best_heuristic"] == fam["best"][cls]
    (row,) = fam["rows"]
    best_c = fam["best"]["clairvoyant"]
    assert row["rollout"][best_c]["avg_jct"] <= row[best_c] + 1e-6
    assert row["bound"] <= row["rollout"][best_c]["avg_jct"]
    assert fam["summary"]["clairvoyant"]["room"]["mean"] >= 0.0
    # a rerun with one more seed reuses what the first run did: one rollout more, none of the first run's again
    calls = []
    rollout = hr.rollout
    monkeypatch.setattr(hr, "rollout", lambda *a, **k: calls.append(1) or rollout(*a, **k))
    more = hr.main(
        [
            *args[:4],
            "--seeds",
            "0-1",
            "--heldin-seeds",
            "0",
            "--rollout",
            "300=0-1",
            "--stride",
            "300=1000",
            "--out",
            str(out),
        ]
    )
    assert len(calls) == 1
    rows = more["families"]["300"]["rows"]
    assert [r["seed"] for r in rows] == [0, 1] and rows[0] == row
    assert more["families"]["300"]["summary"]["clairvoyant"]["pairs"] == 2


def test_bad_arguments_are_one_line(hr):
    for args, what in (
        (["--families", "500"], "--families"),
        (["--rollout", "300"], "--rollout"),
        (["--stride", "300=0"], "--stride"),
        (["--seeds", "0-1", "--rollout", "300=5"], "--rollout"),
        (["--windows", "0"], "--windows"),
    ):
        with pytest.raises(SystemExit, match=what):
            hr.main(args)
