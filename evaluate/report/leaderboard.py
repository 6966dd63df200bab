"""Turn grid results into the leaderboard: per-scenario and overall tables (Markdown), CSV, JSON, PNG plots and the
HTML page. The schema of every file is in ``evaluate/SCHEMA.md``. Nothing in the tables depends on timings or the
backend, so the same cells give byte-identical tables."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from gpusched_lab.evaluate.agents import code_version
from gpusched_lab.evaluate.report.document import NORMALISATION, REPORT_SCHEMA, TABLE_METRICS
from gpusched_lab.evaluate.report.files import clean, csv_text, json_text, write_text
from gpusched_lab.evaluate.report.tables import cell_text, md_row, md_rule, num, seed_text
from gpusched_lab.evaluate.runner import GridResult
from gpusched_lab.evaluate.stats import interval, mean_score, normalised_score, stratified_bootstrap_ci

# the names this module had before the shared writers (kept for importers)
_clean = clean
_cell_text = cell_text
_num = num
_seed_text = seed_text
_ci = interval


# ---------------------------------------------------------------------------------------------- summaries
def summarise(result: GridResult) -> dict:
    """Everything the tables, files and plots show, as one JSON-able document."""
    by: dict[tuple[str, str], list[dict]] = {}
    for cell in result.cells:
        by.setdefault((cell["scenario"], cell["agent"]), []).append(cell)
    scenarios, summary = [], []
    for sc in result.scenarios:
        rows = []
        for agent in result.agents:
            cells = sorted(by.get((sc.name, agent.name), []), key=lambda c: c["seed"])
            if not cells:
                continue
            row = {
                "scenario": sc.name,
                "agent": agent.name,
                "agent_kind": agent.kind,
                "seeds": [c["seed"] for c in cells],
                "score": interval([normalised_score(c["metrics"]) for c in cells]),
            }
            for key, _, _ in TABLE_METRICS:
                row[key] = interval([c["metrics"].get(key) for c in cells])
            rows.append(row)
        # ranked by average JCT; scenarios without jobs (DAGSchedule: one DAG) by makespan
        rows.sort(
            key=lambda r: (_sort_value(r["avg_jct"]["mean"]), _sort_value(r["makespan"]["mean"]), r["agent"])
        )
        for i, row in enumerate(rows, 1):
            row["rank"] = i
        summary.extend(rows)
        cells = [c for (s, _), cs in by.items() if s == sc.name for c in cs]
        # the bound and the offered load depend on the workload only: take them from one agent's cells
        first = min(cells, key=lambda c: (c["agent"], c["seed"])) if cells else None
        bound_cells = [c for c in cells if first is not None and c["agent"] == first["agent"]]
        scenarios.append(
            {
                **sc.to_dict(),
                "measured_offered_load": interval([c["metrics"].get("offered_load") for c in bound_cells]),
                "jobs": interval([c["metrics"].get("jobs") for c in bound_cells]),
                "lower_bound_avg_jct": interval(
                    [c["metrics"].get("lower_bound_avg_jct") for c in bound_cells]
                ),
                "lower_bound_makespan": interval(
                    [c["metrics"].get("lower_bound_makespan") for c in bound_cells]
                ),
            }
        )
    return {
        "scenarios": scenarios,
        "summary": summary,
        "aggregate": aggregate(result, summary),
    }


def _sort_value(x) -> float:
    return math.inf if x is None or not math.isfinite(x) else x


def aggregate(result: GridResult, summary: list[dict]) -> list[dict]:
    """IQM and mean of normalised scores with stratified-bootstrap intervals, mean rank, coverage; agents that ran
    on every scenario are ranked by IQM, the others listed after them unranked."""
    n_scen = len(result.scenarios)
    out = []
    for agent in result.agents:
        groups = []
        for sc in result.scenarios:
            cells = [c for c in result.cells if c["scenario"] == sc.name and c["agent"] == agent.name]
            scores = np.array([normalised_score(c["metrics"]) for c in cells])
            scores = scores[np.isfinite(scores)]
            if len(scores):
                groups.append(scores)
        if not groups:
            continue
        iqm, iqm_lo, iqm_hi = stratified_bootstrap_ci(groups)
        mean, mean_lo, mean_hi = stratified_bootstrap_ci(groups, statistic=mean_score)
        rows = [r for r in summary if r["agent"] == agent.name]
        out.append(
            {
                "agent": agent.name,
                "agent_kind": agent.kind,
                "agent_spec": agent.spec,
                "scenarios": len(groups),
                "complete": len(groups) == n_scen,
                "iqm_score": {"mean": iqm, "low": iqm_lo, "high": iqm_hi},
                "mean_score": {"mean": mean, "low": mean_lo, "high": mean_hi},
                "mean_rank": float(np.mean([r["rank"] for r in rows])),
                "gpu_utilisation": float(np.mean([r["gpu_utilisation"]["mean"] for r in rows])),
                "communication_overhead": float(np.mean([r["communication_overhead"]["mean"] for r in rows])),
                "scores": [float(x) for g in groups for x in g],
            }
        )
    out.sort(key=lambda r: (not r["complete"], -_nan_low(r["iqm_score"]["mean"]), r["agent"]))
    rank = 0
    for row in out:
        if row["complete"]:
            rank += 1
            row["rank"] = rank
        else:
            row["rank"] = None
    return out


def _nan_low(x: float) -> float:
    return -math.inf if x is None or not math.isfinite(x) else x


# ---------------------------------------------------------------------------------------------- Markdown
OVERALL_COLUMNS = (
    "rank",
    "agent",
    "scenarios",
    "IQM score",
    "mean score",
    "mean rank",
    "GPU util.",
    "comm. overhead",
)


def overall_cells(r: dict, n: int) -> list[str]:
    """One agent's row of the overall table (``n``: scenarios of the suite)."""
    return [
        str(r["rank"]) if r["rank"] is not None else "—",
        r["agent"],
        f"{r['scenarios']}/{n}",
        cell_text(r["iqm_score"], "score"),
        cell_text(r["mean_score"], "score"),
        f"{r['mean_rank']:.1f}",
        num(100 * r["gpu_utilisation"], "%"),
        num(100 * r["communication_overhead"], "%"),
    ]


def markdown(doc: dict) -> str:
    suite = doc["suite"]
    lines = [f"# Leaderboard: suite `{suite['name']}`", ""]
    if suite.get("description"):
        lines += [suite["description"], ""]
    lines += [
        f"Values are means over seeds with 95% percentile-bootstrap intervals in parentheses. {NORMALISATION}. "
        "Overall: interquartile mean (IQM) of the scores over all scenarios and seeds with 95% stratified-bootstrap "
        "intervals (rliable's estimators). Offered load: GPU-time the jobs need at their typical-placement speed "
        "(traced duration × GPUs) ÷ (cluster GPUs × arrival span), the quantity a workload's `load=` sets; "
        "measured over each cell's finished jobs.",
        "",
        "## Overall",
        "",
        md_row(OVERALL_COLUMNS),
        md_rule("rlrllrrr"),
    ]
    n = len(doc["scenarios"])
    for r in doc["aggregate"]:
        lines.append(md_row(overall_cells(r, n)))
    lines.append(md_row(["—", "*lower bound*", f"{n}/{n}", "1.000", "1.000", "—", "—", "—"]))
    if any(not r["complete"] for r in doc["aggregate"]):
        lines += [
            "",
            "Agents that ran on only some scenarios (e.g. checkpoints for one env) are listed unranked.",
        ]
    for sc in doc["scenarios"]:
        rows = [r for r in doc["summary"] if r["scenario"] == sc["name"]]
        load = sc["measured_offered_load"]["mean"]
        stated = sc.get("offered_load")
        kwargs = ", ".join(f"{k}={v}" for k, v in sorted(sc["env_kwargs"].items()))
        lines += [
            "",
            f"## {sc['name']}",
            "",
            f"`{sc['env_id']}` ({kwargs}); seeds {seed_text(sc['seeds'])}; "
            f"offered load {num(stated, 'score') if stated is not None else '—'} stated, "
            f"{num(load, 'score') if load is not None else '—'} measured.",
        ]
        if sc.get("description"):
            lines += ["", sc["description"]]
        lines += [
            "",
            md_row(["rank", "agent", *(title for _, title, _ in TABLE_METRICS), "score"]),
            md_rule("rl" + "l" * (len(TABLE_METRICS) + 1)),
        ]
        for r in rows:
            vals = [cell_text(r[k], unit) for k, _, unit in TABLE_METRICS]
            lines.append(md_row([r["rank"], r["agent"], *vals, cell_text(r["score"], "score")]))
        lb_jct = cell_text(sc["lower_bound_avg_jct"], "h")
        lb_mk = cell_text(sc["lower_bound_makespan"], "h")
        lines.append(md_row(["—", "*lower bound*", lb_jct, "—", lb_mk, "—", "—", "1.000"]))
        skipped = [f"{a} ({why})" for s, a, why in doc["skipped"] if s == sc["name"]]
        if skipped:
            lines += ["", "Not applicable: " + "; ".join(skipped) + "."]
    if doc["failed"]:
        lines += ["", "## Failed cells", ""]
        groups: dict[tuple[str, str, str], list[int]] = {}
        for f in doc["failed"]:
            groups.setdefault((f["agent"], f["scenario"], f["error"]), []).append(f["seed"])
        lines += [
            f"- {a} on {s}, seeds {seed_text(sorted(seeds))}: {e}" for (a, s, e), seeds in groups.items()
        ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------- CSV
_csv = csv_text


def csv_files(doc: dict) -> dict[str, str]:
    metric_keys = sorted(
        {k for c in doc["cells"] for k, v in c["metrics"].items() if not isinstance(v, list)}
    )
    cells = [
        {
            "scenario": c["scenario"],
            "agent": c["agent"],
            "agent_kind": c["agent_kind"],
            "seed": c["seed"],
            "score": c["score"],
            **c["metrics"],
        }
        for c in doc["cells"]
    ]
    summary_cols = ["scenario", "agent", "agent_kind", "rank", "seeds"]
    summary = []
    for r in doc["summary"]:
        flat = {k: r[k] for k in summary_cols}
        flat["seeds"] = len(r["seeds"])
        for key in [m for m, _, _ in TABLE_METRICS] + ["score"]:
            for part in ("mean", "low", "high"):
                flat[f"{key}_{part}"] = r[key][part]
        summary.append(flat)
    stat_cols = [
        f"{m}_{p}" for m in [m for m, _, _ in TABLE_METRICS] + ["score"] for p in ("mean", "low", "high")
    ]
    aggregate = []
    for r in doc["aggregate"]:
        flat = {
            k: r[k]
            for k in (
                "rank",
                "agent",
                "agent_kind",
                "scenarios",
                "mean_rank",
                "gpu_utilisation",
                "communication_overhead",
            )
        }
        for key in ("iqm_score", "mean_score"):
            for part in ("mean", "low", "high"):
                flat[f"{key}_{part}"] = r[key][part]
        aggregate.append(flat)
    agg_cols = [
        "rank",
        "agent",
        "agent_kind",
        "scenarios",
        "iqm_score_mean",
        "iqm_score_low",
        "iqm_score_high",
        "mean_score_mean",
        "mean_score_low",
        "mean_score_high",
        "mean_rank",
        "gpu_utilisation",
        "communication_overhead",
    ]
    return {
        "cells.csv": csv_text(cells, ["scenario", "agent", "agent_kind", "seed", "score", *metric_keys]),
        "summary.csv": csv_text(summary, summary_cols + stat_cols),
        "aggregate.csv": csv_text(aggregate, agg_cols),
    }


# ---------------------------------------------------------------------------------------------- all outputs
def build_document(result: GridResult, suite_name: str, suite_description: str = "") -> dict:
    """The ``leaderboard.json`` document (schema in ``evaluate/SCHEMA.md``)."""
    doc = {
        "schema": REPORT_SCHEMA,
        "suite": {"name": suite_name, "description": suite_description},
        "code_version": code_version(),
        "normalisation": NORMALISATION,
        "agents": [{"name": a.name, "spec": a.spec, "kind": a.kind} for a in result.agents],
        **summarise(result),
        "skipped": [{"scenario": s, "agent": a, "reason": r} for s, a, r in result.skipped],
        "failed": [{"scenario": s, "agent": a, "seed": seed, "error": e} for s, a, seed, e in result.failed],
        "cells": [
            {
                "scenario": c["scenario"],
                "agent": c["agent"],
                "agent_kind": c["agent_kind"],
                "seed": c["seed"],
                "score": normalised_score(c["metrics"]),
                "metrics": c["metrics"],
            }
            for c in result.cells
        ],
    }
    return clean(doc)


def write_outputs(
    result: GridResult,
    out: str | Path,
    suite_name: str,
    suite_description: str = "",
    make_plots: bool = True,
    argv: list[str] | None = None,
) -> dict:
    """Write ``leaderboard.md``, ``leaderboard.json``, ``cells.csv``, ``summary.csv``, ``aggregate.csv``,
    ``provenance.json``, ``leaderboard.html`` and ``plots/*.png`` under ``out`` (each atomically); return the JSON
    document. ``argv``: the command line the provenance records (default ``sys.argv``)."""
    from gpusched_lab.evaluate.report import html

    out = Path(out)
    doc = build_document(result, suite_name, suite_description)
    write_text(out / "leaderboard.md", markdown(doc))
    write_text(out / "leaderboard.json", json_text(doc, indent=1, sort_keys=True))
    for name, text in csv_files(doc).items():
        write_text(out / name, text)
    prov = html.provenance(argv)
    html.write_provenance(out, prov)
    svgs = None
    if make_plots:
        from gpusched_lab.evaluate.report.files import write_bytes
        from gpusched_lab.evaluate.report.plots import leaderboard_figures, render_all

        quantiles: dict[tuple[str, str], list[list[float]]] = {}
        for c in result.cells:
            quantiles.setdefault((c["scenario"], c["agent"]), []).append(c.get("jct_quantiles") or [])
        svgs = {}
        for name, (png, svg) in render_all(leaderboard_figures(doc, quantiles)).items():
            write_bytes(out / "plots" / name, png)
            svgs[name] = svg
    html.write_page(out / html.PAGE, doc, svgs, prov)
    return doc
