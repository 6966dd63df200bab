"""Merge ``gpusched dag-bench --json`` files into one Markdown table (README's WORL-RTGS section), with the
stability comparison (seed-to-seed std, WORL-RTGS vs WOA) and the issue's two goals checked.

Usage::

    python scripts/studies/worl_table.py results/worl/*.json > results/worl/table.md
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gpusched_lab.evaluate.dag_bench import AGENTS, markdown_table, summarise  # noqa: E402
from gpusched_lab.evaluate.stats import mean_ci  # noqa: E402


def main(paths: list[str]) -> None:
    rows, seen, metas = [], set(), []
    for p in paths:
        data = json.loads(Path(p).read_text())
        metas.append(data["meta"])
        for r in data["rows"]:
            key = (r["dag"], r["instance"], r["agent"], r["seed"])
            if key not in seen:
                seen.add(key)
                rows.append(r)
    agents = [a for a in AGENTS if any(r["agent"] == a for r in rows)]
    summary = summarise(rows, agents)
    meta = dict(metas[0])
    meta["seeds"] = max(m["seeds"] for m in metas)
    print(markdown_table(summary, agents, meta))
    by = {(s["dag"], s["agent"]): s for s in summary}
    dags = list(dict.fromkeys(s["dag"] for s in summary))
    print("Stability (seed-to-seed std of the makespan, averaged over instances), WORL-RTGS vs WOA:\n")
    with_ls = any(a == "ls" for a in agents)  # the refinement alone (gpusched dag-bench's ls agent)
    print(
        "| DAG | WOA std | WOA+list std | WORL-RTGS std | WORL-RTGS vs HEFT, paired [95% CI] "
        "| WORL-RTGS vs WOA+list, paired [95% CI] |"
        + (" WORL-RTGS vs LS, paired [95% CI] |" if with_ls else "")
    )
    print("|---|---|---|---|---|---|" + ("---|" if with_ls else ""))
    ms = {(r["dag"], r["instance"], r["seed"], r["agent"]): r.get("makespan") for r in rows}

    def std(s):  # float noise of identical runs shown as 0
        if s is None:
            return "–"
        v = s["makespan_std_over_seeds"]
        return f"{0.0 if v <= 1e-9 * abs(s['makespan_mean']) else v:.3g}"

    def rel(d, a, b):
        """Mean over (instance, seed) of makespan(a) / makespan(b) - 1, with its bootstrap interval."""
        keys = [k for k in ms if k[0] == d and k[3] == a and ms[k] is not None]
        v = [ms[k] / ms[(*k[:3], b)] - 1 for k in keys if ms.get((*k[:3], b))]
        if not v:
            return "–"
        m, lo, hi = mean_ci(v)
        return f"{100 * m:+.2f}% [{100 * lo:+.2f}, {100 * hi:+.2f}]"

    for d in dags:
        w, wl, r = (by.get((d, a)) for a in ("woa", "woa+list", "worl-rtgs"))
        if r and (w or wl):
            print(
                f"| `{d}` | {std(w)} | {std(wl)} | {std(r)} | {rel(d, 'worl-rtgs', 'heft')} "
                f"| {rel(d, 'worl-rtgs', 'woa+list')} |"
                + (f" {rel(d, 'worl-rtgs', 'ls')} |" if with_ls else "")
            )
    print()
    small = [
        (d, by[(d, a)]["gap_to_reference_mean"])
        for d in dags
        for a in ("worl-rtgs",)
        if (d, a) in by and by[(d, a)]["reference"] == "optimum"
    ]
    if small:
        print(
            "Goal 1 (within 2% of CP-SAT on small DAGs, where CP-SAT proved the optimum): "
            + "; ".join(f"`{d}` {100 * g:+.2f}%" for d, g in small)
        )
    big = [
        (d, by[(d, "worl-rtgs")]["vs_heft_mean"])
        for d in dags
        if (d, "worl-rtgs") in by and by[(d, "worl-rtgs")]["tasks"] == 100 and "ccr=0.1" not in d
    ]
    if big:
        print(
            "Goal 2 (>= 5% shorter than HEFT on 100-task DAGs at CCR >= 1): "
            + "; ".join(f"`{d}` {100 * g:+.1f}%" for d, g in big)
        )
    walls = {
        a: float(np.mean([s["wall_s_mean"] for s in summary if s["agent"] == a]))
        for a in agents
        if any(s["agent"] == a for s in summary)
    }
    print("\nMean wall time per run (s): " + ", ".join(f"{a} {w:.2g}" for a, w in walls.items()))


if __name__ == "__main__":
    main(sys.argv[1:])
