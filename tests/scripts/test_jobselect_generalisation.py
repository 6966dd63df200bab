"""``scripts/studies/jobselect_generalisation.py``: the grid, the workload specs it builds, the per-cell summary on
hand-built rows, a cell the checkpoint cannot read reported as a finding, and one cell end to end."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "studies" / "jobselect_generalisation.py"


@pytest.fixture(scope="module")
def mod():
    spec = importlib.util.spec_from_file_location("jobselect_generalisation", SCRIPT)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def test_grid_and_workload_specs(mod):
    grid = mod.cells()
    assert [n for n in grid if n.startswith("load-")] == [f"load-{x}" for x in (0.7, 0.8, 0.9, 1.0, 1.1, 1.2)]
    assert mod.cell_kwargs(grid["load-1.1"], "2017-11-05") == {
        "cluster": "topdrl",
        "workload": "philly:start=2017-11-05,jobs=300,load=1.1,gpus=32",
    }
    assert (
        mod.cell_kwargs(grid["cluster-philly-vc"], "2017-11-17")["workload"]
        == "philly:start=2017-11-17,jobs=3000"
    )
    assert all(s > "2017-11-01" for s in mod.STARTS)  # held-out windows only
    from gpusched_envs.sim import load_cluster

    c = load_cluster(grid["cluster-rack16"]["cluster"])
    assert (c.num_racks, c.num_gpus) == (16, 256)


def test_cell_summary_exact(mod):
    rows = [
        {"agent": 90.0, "fifo": 300.0, "tiresias": 120.0, "las": 100.0, "gittins": 110.0},
        {"agent": 130.0, "fifo": 300.0, "tiresias": 120.0, "las": 100.0, "gittins": 90.0},
    ]
    s = mod.summarize_cell(rows, ("fifo", "tiresias", "las", "gittins"), breaks=0.10)
    assert s["best"] == "las"  # mean 100 vs Gittins 100: the first of the tie in class order
    assert s["vs_best"]["ratio"] == pytest.approx(220 / 200) and s["vs_las"]["ratio"] == pytest.approx(1.1)
    assert s["breaks"] is False  # 1.1 is not above 1 + 0.10 (up to rounding: 1.1000000000000003 would be)
    assert mod.summarize_cell(rows, ("fifo", "tiresias", "las", "gittins"), breaks=0.05)["breaks"] is True


def test_a_cell_the_checkpoint_cannot_read_is_a_finding(mod, monkeypatch):
    import gpusched_lab.evaluate.compare as cmp

    def refuse(*args, **kwargs):
        raise ValueError("checkpoint x was trained on y: 40 job columns, the env has 15")

    monkeypatch.setattr(cmp, "compare", refuse)
    out = mod._one("ck", mod.cells()["load-0.9"], ["2017-11-05"], [0], ("las",))
    assert out == {"error": "checkpoint x was trained on y: 40 job columns, the env has 15", "rows": []}


def test_bad_input(mod, tmp_path):
    ck = str(ROOT / "checkpoints" / "ppo_jobselect_gnn_nc")
    for argv in (["--cells", "nope"], ["--windows", "9"], ["--workers", "0"], ["--seeds", "x"]):
        with pytest.raises(SystemExit):
            mod.main([ck, *argv, "--out", str(tmp_path / "g.json")])


@pytest.mark.slow
def test_an_entry_of_another_checkpoint_is_renewed_and_says_what_it_drops(mod):
    current = {"digest": "d1", "seeds": [0], "windows": ["w"], "information": "x", "done": {"a": {}}}
    entry = dict(current)
    assert mod.renew_entry(entry, "d1", [0], ["w"], "x") == [] and entry == current
    stale = {**current, "done": {"b": {}, "a": {}}}
    assert mod.renew_entry(stale, "d2", [0], ["w"], "x") == ["a", "b"]
    assert stale == {"digest": "d2", "seeds": [0], "windows": ["w"], "information": "x", "done": {}}
    assert mod.renew_entry({}, "d1", [0, 1], ["w"], "x") == []  # a new checkpoint: nothing to drop


def test_one_cell_end_to_end(mod, tmp_path):
    ck = ROOT / "checkpoints" / "ppo_jobselect_gnn_nc"
    out = tmp_path / "g.json"
    r = mod.main(
        [str(ck), "--cells", "cluster-hetero64", "--windows", "1", "--seeds", "0", "--out", str(out)]
    )
    cell = r["checkpoints"][str(ck)]["done"]["cluster-hetero64"]
    assert cell["summary"]["pairs"] == 1 and cell["rows"][0]["scenario"] == "2017-11-05"
    assert "jobselect_learned" in sys.modules  # the shared helpers come from the sibling study
