"""``scripts/studies/workerplacement_headroom.py``: the rollout finds the placement that avoids co-location on a
hand-built instance, is never worse than its base rule, shares copies without changing its result and repeats
exactly; the best rule is the held-in geometric-mean choice; the run resumes from its file; bad input fails."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from gpusched_envs.sim import SimConfig, Simulator
from tests.toy import make_workload, one_rack, toy_catalog

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "studies" / "workerplacement_headroom.py"
CONFIG = SimConfig(
    restart_delay=0.0
)  # throughput model, co-location interference on (1.5x in the toy catalogue)
ROWS = [
    (0, 500, 2),
    (5, 50, 1),
    (5, 400, 4),
    (20, 30, 2),
    (25, 900, 1),
    (30, 10, 2),
    (40, 200, 1),
    (41, 300, 3),
]


@pytest.fixture(scope="module")
def hr():
    spec = importlib.util.spec_from_file_location("workerplacement_headroom", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def two_servers():
    # one rack: server 0 with 2 GPUs, server 1 with 1 GPU; a 100 s and a 300 s one-GPU job at t = 0
    cluster = one_rack(toy_catalog(), (2, "fast"), (1, "fast"))
    return Simulator(cluster, make_workload([(0, 100, 1), (0, 300, 1)]), CONFIG)


def test_rollout_over_first_fit_moves_a_job_off_the_shared_server(hr):
    # first-fit puts both jobs on server 0 (GPUs 0, 1): co-located, each runs 1.5x slower; the short one ends at
    # 150 having done its 100 s, the long one has done 100 s of its 300 by then and ends at 150 + 200 = 350:
    # (150 + 350) / 2 = 250. consolidate (best fit: the server with the fewest free GPUs) puts the first job alone
    # on server 1 and the second on server 0: no co-location, (100 + 300) / 2 = 200, the lower bound.
    row = hr.heuristic_row(two_servers())
    assert row["first-fit"] == pytest.approx(250.0)
    assert row["consolidate"] == row["closest"] == row["bound"] == pytest.approx(200.0)
    sim = two_servers()
    r = hr.rollout(sim, "first-fit", rules=["first-fit", "consolidate"])
    assert r["base_jct"] == pytest.approx(250.0)
    assert r["avg_jct"] == pytest.approx(200.0)
    assert list(sim.finish_time) == pytest.approx([100.0, 300.0])
    # one decision point; the first job is a choice (GPU 0 or GPU 2), consolidate's taken; for the second job both
    # rules propose GPU 0 (no choice); the base alone and consolidate's copy were run
    assert (r["decisions"], r["choices"], r["searched"], r["simulated"]) == (1, 1, 1, 2)
    assert r["rule_choices"] == [0, 1]


def test_portfolio_is_the_base_then_the_other_placement_rules(hr):
    assert hr.portfolio("consolidate") == ["consolidate", "closest", "pack", "first-fit", "spread", "random"]
    assert hr.portfolio("spread") == ["spread", "consolidate", "closest", "pack", "first-fit", "random"]
    with pytest.raises(ValueError, match="unknown placement rule 'fifo'"):
        hr.portfolio("fifo")
    with pytest.raises(ValueError, match="base 'first-fit' first"):
        hr.rollout(two_servers(), "first-fit", rules=["consolidate", "first-fit"])
    with pytest.raises(ValueError, match="stride"):
        hr.rollout(two_servers(), "first-fit", stride=0)


@pytest.mark.parametrize("base", ["consolidate", "closest", "pack", "first-fit", "spread", "random"])
def test_rollout_never_worse_than_its_base(hr, toy_cluster, base):
    def sim():
        return Simulator(toy_cluster, make_workload(ROWS), CONFIG)

    alone = sim().run(hr.fifo(base))["avg_jct"]
    r = hr.rollout(sim(), base)
    assert r["base_jct"] == pytest.approx(alone, rel=1e-12)
    assert r["avg_jct"] <= alone + 1e-9
    assert r["choices"] == r["searched"] == sum(r["rule_choices"]) > 0
    assert r["metrics"]["lower_bound_avg_jct"] <= r["avg_jct"]


def test_sharing_copies_and_stride_keep_the_result_and_repeat_exactly(hr, toy_cluster):
    def sim():
        return Simulator(toy_cluster, make_workload(ROWS), CONFIG)

    shared, full = hr.rollout(sim(), "consolidate"), hr.rollout(sim(), "consolidate", share=False)
    assert shared["avg_jct"] == full["avg_jct"] and shared["rule_choices"] == full["rule_choices"]
    assert shared["avg_jct"] < shared["base_jct"]  # here the search finds a better placement
    assert shared["simulated"] < full["simulated"]
    again = hr.rollout(sim(), "consolidate")
    keys = ("avg_jct", "rule_choices", "choices", "simulated")
    assert {k: again[k] for k in keys} == {k: shared[k] for k in keys}
    strided = hr.rollout(sim(), "consolidate", stride=3)
    assert strided["searched"] == -(-strided["choices"] // 3)
    assert strided["avg_jct"] <= strided["base_jct"] + 1e-9


def test_choose_best_takes_the_geometric_mean_and_the_earlier_rule_on_ties(hr):
    # arithmetic means: a 505, b 475 (b lower); geometric means: a 100, b ~212 (a lower)
    rows = [{"a": 10.0, "b": 50.0}, {"a": 1000.0, "b": 900.0}]
    assert hr.choose_best(rows, ["b", "a"]) == "a"
    assert hr.choose_best([{"a": 5.0, "b": 5.0}], ["b", "a"]) == "b"
    with pytest.raises(ValueError, match="no rows"):
        hr.choose_best([], ["a"])


def untimed(doc):
    """``doc`` without the time the rollouts took."""
    if isinstance(doc, dict):
        return {k: untimed(v) for k, v in doc.items() if k not in ("seconds", "cpu_seconds")}
    if isinstance(doc, list):
        return [untimed(v) for v in doc]
    return doc


def test_quick_run_is_deterministic_and_resumes_from_its_file(hr, tmp_path, monkeypatch):
    out = tmp_path / "r.json"
    first = hr.main(["--quick", "--out", str(out)])
    doc = json.loads(out.read_text())
    assert doc["complete"] and not out.with_suffix(".partial.json").exists()
    s = doc["settings_results"]["drift-20"]
    assert s["best"] in hr.PLACEMENTS and len(s["heldout_rows"]) == 2 and len(s["heldin_rows"]) == 1
    m = s["summary"]
    assert m["pairs"] == 2 and m["search_mean"] <= min(m["rollout_mean"], m["hindsight_mean"], m["best_mean"])
    assert (
        m["bound_mean"] <= m["search_mean"]
        and m["room"]["ci95"][0] <= m["room"]["mean"] <= m["room"]["ci95"][1]
    )
    for r in s["heldout_rows"]:
        assert r["rollout"]["avg_jct"] <= r[s["best"]] + 1e-6 * r[s["best"]]
    second = hr.main(["--quick"])  # from scratch, no file: the same, but for the time the rollouts took
    assert untimed(second["settings_results"]) == untimed(first["settings_results"])

    def no_rollout(*args, **kwargs):
        raise AssertionError("a resumed run must not roll out again")

    monkeypatch.setattr(hr, "rollout", no_rollout)
    monkeypatch.setattr(hr, "heuristic_row", no_rollout)
    third = hr.main(["--quick", "--out", str(out)])
    assert third["settings_results"] == first["settings_results"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--settings", "nowhere"], "unknown setting 'nowhere'"),
        (["--settings", "drift-1"], "unknown setting 'drift-1'"),
        (["--settings", "drift-20", "--seeds", "x"], "seeds"),
        (["--settings", "drift-20", "--stride", "drift-20=0"], "--stride: expected an integer >= 1"),
        (["--settings", "drift-20", "--stride", "drift-20"], "not SETTING=VALUE"),
        (["--settings", "drift-20", "--seeds", "0", "--rollout", "drift-20=3"], "not all in --seeds"),
        (["--settings", "drift-20", "--tasks", "0"], "--tasks must be >= 1"),
        (
            ["--settings", "topdrl-placement", "--seeds", "0-4", "--heldin-seeds", "4-5", "--rollout", ""],
            "overlap",
        ),
    ],
)
def test_bad_input_gets_one_clear_error(hr, argv, message):
    with pytest.raises(SystemExit, match=message):
        hr.main(argv)
