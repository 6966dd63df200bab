"""Turn grid results into the leaderboard: per-scenario and overall tables (Markdown), CSV, JSON and PNG plots.
The schema of every file is in ``evaluate/SCHEMA.md``. Nothing here depends on timings or the backend, so the same
cells give byte-identical tables."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np
from gpusched_lab.evaluate.agents import code_version
from gpusched_lab.evaluate.cache import slug
from gpusched_lab.evaluate.runner import GridResult
from gpusched_lab.evaluate.stats import (
    mean_ci,
    normalised_score,
    performance_profile,
    stratified_bootstrap_ci,
)

from gpusched_envs.io import atomic_write_bytes, atomic_write_text

REPORT_SCHEMA = "gpusched.leaderboard/1"
# (metric key, column title, unit): the table columns, all "lower is better" except utilisation
TABLE_METRICS = (
    ("avg_jct", "avg JCT (h)", "h"),
    ("p95_jct", "p95 JCT (h)", "h"),
    ("makespan", "makespan (h)", "h"),
    ("gpu_utilisation", "GPU util.", "%"),
    ("communication_overhead", "comm. overhead", "%"),
)
NORMALISATION = (
    "score = lower-bound average JCT ÷ average JCT, per scenario and seed (1 = the bound, higher is better); "
    "the bound is the mean ideal runtime of the same jobs"
)


def _clean(x):
    """JSON-safe: NaN and infinities become null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_clean(v) for v in x]
    if isinstance(x, np.floating | np.integer):
        return _clean(x.item())
    return x


def _ci(values) -> dict:
    m, lo, hi = mean_ci(values)
    return {"mean": m, "low": lo, "high": hi}


def _scale(unit: str, x: float) -> float:
    return x / 3600.0 if unit == "h" else (100.0 * x if unit == "%" else x)


def _num(x: float | None, unit: str = "") -> str:
    """``unit``: ``"%"`` (one decimal and a sign), ``"pct"`` (one decimal), ``"score"`` (three decimals), or
    ``""`` (precision by magnitude)."""
    if x is None or not math.isfinite(x):
        return "—"
    if unit in ("%", "pct"):
        return f"{x:.1f}" + ("%" if unit == "%" else "")
    if unit == "score":
        return f"{x:.3f}"
    ax = abs(x)
    return f"{x:,.0f}" if ax >= 1000 else (f"{x:.1f}" if ax >= 10 else f"{x:.2f}")


def _cell_text(stat: dict, unit: str) -> str:
    """``mean (low–high)`` in the column's unit."""
    m, lo, hi = (float("nan") if stat[k] is None else _scale(unit, stat[k]) for k in ("mean", "low", "high"))
    shown = "score" if unit == "score" else ("%" if unit == "%" else "")
    if not math.isfinite(m):
        return "—"
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo == hi:
        return _num(m, shown)
    bare = "pct" if unit == "%" else shown
    return f"{_num(m, shown)} ({_num(lo, bare)}–{_num(hi, bare)})"


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
                "score": _ci([normalised_score(c["metrics"]) for c in cells]),
            }
            for key, _, _ in TABLE_METRICS:
                row[key] = _ci([c["metrics"].get(key) for c in cells])
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
                "measured_offered_load": _ci([c["metrics"].get("offered_load") for c in bound_cells]),
                "jobs": _ci([c["metrics"].get("jobs") for c in bound_cells]),
                "lower_bound_avg_jct": _ci([c["metrics"].get("lower_bound_avg_jct") for c in bound_cells]),
                "lower_bound_makespan": _ci([c["metrics"].get("lower_bound_makespan") for c in bound_cells]),
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
        mean, mean_lo, mean_hi = stratified_bootstrap_ci(groups, statistic=lambda s: float(np.mean(s)))
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
        "| rank | agent | scenarios | IQM score | mean score | mean rank | GPU util. | comm. overhead |",
        "|---:|---|---:|---|---|---:|---:|---:|",
    ]
    n = len(doc["scenarios"])
    for r in doc["aggregate"]:
        rank = str(r["rank"]) if r["rank"] is not None else "—"
        lines.append(
            f"| {rank} | {r['agent']} | {r['scenarios']}/{n} | {_cell_text(r['iqm_score'], 'score')} | "
            f"{_cell_text(r['mean_score'], 'score')} | {r['mean_rank']:.1f} | "
            f"{_num(100 * r['gpu_utilisation'], '%')} | {_num(100 * r['communication_overhead'], '%')} |"
        )
    lines.append(f"| — | *lower bound* | {n}/{n} | 1.000 | 1.000 | — | — | — |")
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
            f"`{sc['env_id']}` ({kwargs}); seeds {_seed_text(sc['seeds'])}; "
            f"offered load {_num(stated, 'score') if stated is not None else '—'} stated, "
            f"{_num(load, 'score') if load is not None else '—'} measured.",
        ]
        if sc.get("description"):
            lines += ["", sc["description"]]
        head = " | ".join(title for _, title, _ in TABLE_METRICS)
        lines += [
            "",
            f"| rank | agent | {head} | score |",
            "|---:|---|" + "---|" * len(TABLE_METRICS) + "---|",
        ]
        for r in rows:
            vals = " | ".join(_cell_text(r[k], unit) for k, _, unit in TABLE_METRICS)
            lines.append(f"| {r['rank']} | {r['agent']} | {vals} | {_cell_text(r['score'], 'score')} |")
        lb_jct = _cell_text(sc["lower_bound_avg_jct"], "h")
        lb_mk = _cell_text(sc["lower_bound_makespan"], "h")
        lines.append(f"| — | *lower bound* | {lb_jct} | — | {lb_mk} | — | — | 1.000 |")
        skipped = [f"{a} ({why})" for s, a, why in doc["skipped"] if s == sc["name"]]
        if skipped:
            lines += ["", "Not applicable: " + "; ".join(skipped) + "."]
    if doc["failed"]:
        lines += ["", "## Failed cells", ""]
        groups: dict[tuple[str, str, str], list[int]] = {}
        for f in doc["failed"]:
            groups.setdefault((f["agent"], f["scenario"], f["error"]), []).append(f["seed"])
        lines += [
            f"- {a} on {s}, seeds {_seed_text(sorted(seeds))}: {e}" for (a, s, e), seeds in groups.items()
        ]
    return "\n".join(lines) + "\n"


def _seed_text(seeds: list[int]) -> str:
    if seeds and seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2:
        return f"{seeds[0]}–{seeds[-1]}"
    return ", ".join(map(str, seeds))


# ---------------------------------------------------------------------------------------------- CSV
def _csv(rows: list[dict], columns: list[str]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, columns, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for row in rows:
        w.writerow({k: ("" if v is None else v) for k, v in _clean(row).items()})
    return buf.getvalue()


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
        "cells.csv": _csv(cells, ["scenario", "agent", "agent_kind", "seed", "score", *metric_keys]),
        "summary.csv": _csv(summary, summary_cols + stat_cols),
        "aggregate.csv": _csv(aggregate, agg_cols),
    }


# ---------------------------------------------------------------------------------------------- plots
def _figure(width: float, height: float):
    from matplotlib.figure import Figure  # no pyplot: no global backend state, renders with Agg

    return Figure(figsize=(width, height), dpi=110, layout="constrained")


def _save(fig, path: Path) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    atomic_write_bytes(path, buf.getvalue())


def plots(doc: dict, quantiles: dict[tuple[str, str], list[list[float]]], folder: Path) -> list[Path]:
    """JCT CDF per scenario, avg-JCT bars with intervals per scenario, aggregate IQM bars, performance profile."""
    written = []
    agents = [a["name"] for a in doc["agents"]]
    colours = {a: f"C{i % 10}" for i, a in enumerate(agents)}
    for sc in doc["scenarios"]:
        fig = _figure(6.4, 4.2)
        ax = fig.add_subplot()
        for agent in agents:
            qs = [q for q in quantiles.get((sc["name"], agent), []) if q]
            if not qs:
                continue
            x = np.mean(np.asarray(qs), axis=0) / 3600.0  # quantile averaging over seeds
            ax.plot(np.maximum(x, 1e-3), np.linspace(0, 1, len(x)), label=agent, color=colours[agent])
        ax.set_xscale("log")
        ax.set_xlabel("job completion time (h, log scale)")
        ax.set_ylabel("fraction of jobs")
        load = sc["measured_offered_load"]["mean"]
        ax.set_title(f"{sc['name']}: JCT CDF (offered load {_num(load, 'score')})", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        path = folder / f"jct_cdf_{_file_name(sc['name'])}.png"
        _save(fig, path)
        written.append(path)

    n = len(doc["scenarios"])
    fig = _figure(4.2 * n, 0.45 * len(agents) + 1.6)
    for i, sc in enumerate(doc["scenarios"]):
        ax = fig.add_subplot(1, n, i + 1)
        rows = [r for r in doc["summary"] if r["scenario"] == sc["name"]]
        names = [r["agent"] for r in rows]
        m = np.array([r["avg_jct"]["mean"] for r in rows]) / 3600.0
        lo = np.array([r["avg_jct"]["low"] for r in rows]) / 3600.0
        hi = np.array([r["avg_jct"]["high"] for r in rows]) / 3600.0
        ax.barh(names, m, xerr=[m - lo, hi - m], color=[colours[a] for a in names], capsize=3)
        bound = sc["lower_bound_avg_jct"]["mean"]
        if bound is not None:
            ax.axvline(bound / 3600.0, color="k", ls="--", lw=1, label="lower bound")
            ax.legend(fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("average JCT (h), 95% CI")
        ax.set_title(sc["name"], fontsize=10)
    path = folder / "avg_jct_bars.png"
    _save(fig, path)
    written.append(path)

    agg = [r for r in doc["aggregate"] if r["iqm_score"]["mean"] is not None]
    if agg:
        fig = _figure(6.4, 0.45 * len(agg) + 1.4)
        ax = fig.add_subplot()
        names = [r["agent"] + ("" if r["complete"] else " *") for r in agg]
        m = np.array([r["iqm_score"]["mean"] for r in agg])
        lo = np.array([r["iqm_score"]["low"] for r in agg])
        hi = np.array([r["iqm_score"]["high"] for r in agg])
        ax.barh(names, m, xerr=[m - lo, hi - m], color=[colours[r["agent"]] for r in agg], capsize=3)
        ax.invert_yaxis()
        ax.set_xlim(0, 1)
        ax.set_xlabel("IQM of normalised score (lower-bound avg JCT ÷ avg JCT), 95% stratified-bootstrap CI")
        ax.set_title("aggregate over scenarios (* = not on every scenario)", fontsize=10)
        _save(fig, folder / "aggregate_iqm.png")
        written.append(folder / "aggregate_iqm.png")

        fig = _figure(6.4, 4.2)
        ax = fig.add_subplot()
        taus = np.linspace(0.0, 1.0, 201)
        for r in agg:
            ax.plot(
                taus,
                performance_profile(np.array(r["scores"]), taus),
                label=r["agent"],
                color=colours[r["agent"]],
            )
        ax.set_xlabel("normalised score τ")
        ax.set_ylabel("fraction of runs with score > τ")
        ax.set_title("performance profile (all scenarios and seeds)", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        _save(fig, folder / "performance_profile.png")
        written.append(folder / "performance_profile.png")
    return written


def _file_name(name: str) -> str:

    return slug(name)


# ---------------------------------------------------------------------------------------------- all outputs
def build_document(result: GridResult, suite_name: str, suite_description: str = "") -> dict:

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
    return _clean(doc)


def write_outputs(
    result: GridResult, out: str | Path, suite_name: str, suite_description: str = "", make_plots: bool = True
) -> dict:
    """Write ``leaderboard.md``, ``leaderboard.json``, ``cells.csv``, ``summary.csv``, ``aggregate.csv`` and
    ``plots/*.png`` under ``out`` (each atomically); return the JSON document."""
    out = Path(out)
    doc = build_document(result, suite_name, suite_description)
    atomic_write_text(out / "leaderboard.md", markdown(doc))
    atomic_write_text(out / "leaderboard.json", json.dumps(doc, indent=1, sort_keys=True) + "\n")
    for name, text in csv_files(doc).items():
        atomic_write_text(out / name, text)
    if make_plots:
        quantiles: dict[tuple[str, str], list[list[float]]] = {}
        for c in result.cells:
            quantiles.setdefault((c["scenario"], c["agent"]), []).append(c.get("jct_quantiles") or [])
        plots(doc, quantiles, out / "plots")
    return doc
