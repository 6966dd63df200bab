"""The shared report writers: Markdown rows and rules, CSV and JSON files, one distinct style per agent in every
plot, and ``gpusched report`` rebuilding the page from a results folder (with one clear error for a folder that is
not one)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from gpusched_lab.evaluate.cli import app
from gpusched_lab.evaluate.report.files import csv_text, write_json
from gpusched_lab.evaluate.report.html import ReportError, load_results, rebuild, render
from gpusched_lab.evaluate.report.plots import PALETTE, agent_styles, leaderboard_figures
from gpusched_lab.evaluate.report.tables import bracket_text, cell_text, md_row, md_rule, md_table
from typer.testing import CliRunner


def test_markdown_rows_rules_and_numbers():
    assert md_row(["a", 1, ""]) == "| a | 1 |  |"
    assert md_rule("rll") == "|---:|---|---|"
    assert md_table(["x", "y"], [["1", "2"]], "lr") == ["| x | y |", "|---|---:|", "| 1 | 2 |"]
    with pytest.raises(ValueError, match="alignment letters"):
        md_rule("lc")
    with pytest.raises(ValueError, match="2 columns but 1"):
        md_table(["x", "y"], [], "l")
    assert bracket_text(1234.4, -5.6, 7.0, "+,.0f") == "+1,234 [-6, +7]"
    assert cell_text({"mean": 7200.0, "low": 3600.0, "high": 10800.0}, "h") == "2.00 (1.00–3.00)"
    assert cell_text({"mean": 0.25, "low": 0.25, "high": 0.25}, "%") == "25.0%"
    assert cell_text({"mean": None, "low": None, "high": None}, "score") == "—"


def test_csv_and_json_files(tmp_path):
    rows = [{"a": 1, "b": float("nan"), "c": "x"}, {"a": 2, "b": 0.5, "c": None}]
    assert csv_text(rows, ["a", "b"]) == "a,b\n1,\n2,0.5\n"
    assert csv_text(rows, ["a"], line_end="\r\n") == "a\r\n1\r\n2\r\n"
    path = write_json(tmp_path / "d" / "x.json", {"b": 1, "a": [1, 2]}, indent=1, sort_keys=True)
    assert path.read_text() == '{\n "a": [\n  1,\n  2\n ],\n "b": 1\n}\n'


def test_every_agent_has_its_own_style():
    names = [f"agent-{i}" for i in range(40)]
    styles = agent_styles(names)
    assert len(set(PALETTE)) == len(PALETTE) == 20
    assert len({s.color for s in styles.values()}) == 20  # the first 20 differ by colour
    assert len({styles[n].color for n in names[:20]}) == 20
    assert len({(s.color, s.linestyle) for s in styles.values()}) == 40  # with line styles: 40
    assert len({(s.color, s.hatch) for s in styles.values()}) == 40
    assert styles["agent-0"].linestyle == "-" and styles["agent-10"].linestyle == "--"


def _doc(n_agents: int) -> tuple[dict, dict]:
    agents = [f"a{i}" for i in range(n_agents)]
    stat = {"mean": 3600.0, "low": 3000.0, "high": 4000.0}
    scen = {
        "name": "s",
        "measured_offered_load": {"mean": 0.9},
        "lower_bound_avg_jct": {"mean": 1800.0},
    }
    summary = [{"scenario": "s", "agent": a, "avg_jct": stat} for a in agents]
    aggregate = [
        {
            "agent": a,
            "complete": True,
            "iqm_score": {"mean": 0.5, "low": 0.4, "high": 0.6},
            "scores": [0.5, 0.6],
        }
        for a in agents
    ]
    doc = {
        "agents": [{"name": a} for a in agents],
        "scenarios": [scen],
        "summary": summary,
        "aggregate": aggregate,
    }
    quantiles = {("s", a): [list(np.linspace(60.0, 7200.0 + i, 11))] for i, a in enumerate(agents)}
    return doc, quantiles


def test_no_two_curves_of_a_plot_look_alike():
    doc, quantiles = _doc(24)
    figs = leaderboard_figures(doc, quantiles)
    assert sorted(figs) == [
        "aggregate_iqm.png",
        "avg_jct_bars.png",
        "jct_cdf_s.png",
        "performance_profile.png",
    ]
    for name in ("jct_cdf_s.png", "performance_profile.png"):
        lines = figs[name].axes[0].get_lines()
        assert len(lines) == 24
        assert len({(line.get_color(), line.get_linestyle()) for line in lines}) == 24
        assert len({line.get_color() for line in lines}) == 20
    bars = figs["aggregate_iqm.png"].axes[0].patches
    assert len({(tuple(b.get_facecolor()), b.get_hatch()) for b in bars}) == 24


def test_page_escapes_names_and_lists_what_ran():
    doc, _ = _doc(2)
    doc["agents"][0]["name"] = doc["summary"][0]["agent"] = "<b>x</b>"
    doc.update(suite={"name": "s&s", "description": ""}, skipped=[], failed=[], cells=[])
    for r in doc["aggregate"]:
        r.update(
            agent_kind="heuristic",
            rank=1,
            scenarios=1,
            mean_score=r["iqm_score"],
            mean_rank=1.0,
            gpu_utilisation=0.5,
            communication_overhead=0.0,
        )
    doc["aggregate"][0]["agent"] = "<b>x</b>"
    for r in doc["summary"]:
        r.update(rank=1, score={"mean": 0.5, "low": 0.5, "high": 0.5})
        for k in ("p95_jct", "makespan", "gpu_utilisation", "communication_overhead"):
            r[k] = {"mean": None, "low": None, "high": None}
    doc["scenarios"][0].update(
        env_id="gpusched/JobSelect-v1",
        env_kwargs={"cluster": "tiny"},
        seeds=[0, 1, 2],
        offered_load=0.9,
        jobs={"mean": 30.0},
        lower_bound_makespan={"mean": None, "low": None, "high": None},
    )
    doc["scenarios"][0]["measured_offered_load"].update(low=0.9, high=0.9)
    doc["scenarios"][0]["lower_bound_avg_jct"].update(low=1800.0, high=1800.0)
    page = render(doc, None, {"command": "gpusched leaderboard --suite s", "date": "D", "machine": "M"})
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page
    assert "Leaderboard: suite s&amp;s" in page and "gpusched leaderboard --suite s" in page
    assert "Plots were not made for this run" in page
    assert '<table id="sc-s" class="sortable">' in page


def test_report_rebuilds_the_page_and_names_a_bad_folder(tmp_path):
    runner = CliRunner()
    r = runner.invoke(app, ["report", str(tmp_path / "missing")])
    assert r.exit_code == 2 and "not a folder" in r.output and "Traceback" not in r.output
    with pytest.raises(ReportError, match="leaderboard.json: missing"):
        load_results(tmp_path)
    (tmp_path / "leaderboard.json").write_text(json.dumps({"schema": "other/1"}))
    with pytest.raises(ReportError, match="schema 'other/1', expected 'gpusched.leaderboard/1'"):
        rebuild(tmp_path)
    (tmp_path / "leaderboard.json").write_text("{")
    r = runner.invoke(app, ["report", str(tmp_path)])
    assert r.exit_code == 2 and "not readable JSON" in r.output


def test_a_run_writes_the_page_and_report_rebuilds_it_from_the_folder(tmp_path):
    from gpusched_lab.evaluate import run_leaderboard
    from gpusched_lab.evaluate.scenarios import suite_from_dict

    suite = {
        "name": "one",
        "defaults": {"env_id": "gpusched/JobSelect-v1", "seeds": "0-1", "env_kwargs": {"obs_mode": "flat"}},
        "scenarios": [
            {
                "name": "tiny-a",
                "offered_load": 0.9,
                "env_kwargs": {
                    "cluster": "tiny",
                    "workload": "synthetic:jobs=20,load=0.9,gpus=16,max_gpus=16",
                },
            }
        ],
    }
    doc = run_leaderboard(suite_from_dict(suite, "one.yaml"), ["fifo", "sjf"], tmp_path, plots=False)
    first = (tmp_path / "leaderboard.html").read_text()
    prov = json.loads((tmp_path / "provenance.json").read_text())
    assert set(prov) == {"package", "version", "command", "date", "machine", "python"}
    assert prov["date"] in first and "page rebuilt" not in first
    _, quantiles, _ = load_results(tmp_path)
    assert sorted(quantiles) == [("tiny-a", "fifo+closest"), ("tiny-a", "sjf+closest")]
    assert all(len(q) == 2 and all(len(x) > 10 for x in q) for q in quantiles.values())
    r = CliRunner().invoke(
        app, ["report", str(tmp_path), "--no-plots", "--out", str(tmp_path / "again.html")]
    )
    assert r.exit_code == 0, r.output
    again = (tmp_path / "again.html").read_text()
    table = first[first.index('<table id="overall"') : first.index("</table>")]
    assert table in again and "page rebuilt" in again and prov["date"] in again
    assert [a["agent"] for a in doc["aggregate"]] == ["sjf+closest", "fifo+closest"] or len(
        doc["aggregate"]
    ) == 2


def test_figures_rendered_in_two_processes_are_the_figures_rendered_in_one(monkeypatch):
    """render_all: the forked child's share and this process's share are byte for byte what rendering every
    figure here gives; a child that fails leaves its figures to this process."""
    import os
    import sys

    from gpusched_lab.evaluate.report import plots

    doc, quantiles = _doc(3)
    alone = {name: plots.rendered(fig) for name, fig in leaderboard_figures(doc, quantiles).items()}
    forks = []
    real_fork = os.fork

    def fork():
        forks.append(1)
        return real_fork()

    monkeypatch.setattr(os, "fork", fork)
    assert plots.render_all(leaderboard_figures(doc, quantiles)) == alone
    assert len(forks) == (1 if sys.platform.startswith("linux") else 0)

    def failed(pid, r):  # the child's pipe closed unread: it fails writing
        os.close(r)
        os.waitpid(pid, 0)
        return {}

    monkeypatch.setattr(plots, "_collect", failed)
    assert plots.render_all(leaderboard_figures(doc, quantiles)) == alone
