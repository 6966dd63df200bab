"""Reduce the TPC-H-on-Spark DAG set (Decima / Park) to what the package bundles.

Reads ``../shared/traces/tpch_dag/{tpch_dag_edges.csv, tpch_stages.csv, tpch_task_durations.json.gz}`` and writes
``gpusched_envs/data/dags/tpch/{tpch_edges.csv, tpch_stages.csv}``: the DAG edges unchanged, and per stage the task
count plus mean/median task duration recomputed from the per-task durations (2.3 MB gz) — which are not bundled.
The recomputed mean is checked against the source's ``mean_task_duration_ms`` column.

Usage::

    .venv/bin/python scripts/data/bundle_tpch.py --src ../shared/traces/tpch_dag
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", type=Path, default=ROOT.parent / "shared/traces/tpch_dag")
    ap.add_argument("--out", type=Path, default=ROOT / "gpusched_envs/data/dags/tpch")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    with gzip.open(args.src / "tpch_task_durations.json.gz", "rt") as fh:
        durs = json.load(fh)
    with open(args.src / "tpch_stages.csv", newline="") as fh:
        stages = list(csv.DictReader(fh))
    rows = []
    worst = 0.0
    for s in stages:
        rec = durs[s["query_size"]][s["query_id"]][s["stage"]]
        allv = [v for kind in rec.values() for lst in kind.values() for v in lst]
        first = [v for lst in rec.get("first_wave", {}).values() for v in lst]
        mean = float(np.mean(allv)) if allv else float("nan")
        worst = max(worst, abs(mean - float(s["mean_task_duration_ms"])))
        rows.append(
            {
                "query_size": s["query_size"],
                "query_id": int(s["query_id"]),
                "stage": int(s["stage"]),
                "num_tasks": int(s["num_tasks"]),
                "mean_task_duration_ms": round(mean, 1),
                "median_task_duration_ms": round(float(np.median(allv)), 1) if allv else "",
                "mean_first_wave_ms": round(float(np.mean(first)), 1) if first else "",
                "num_durations": len(allv),
            }
        )
    if worst > 0.1:
        raise SystemExit(f"recomputed mean task duration differs from tpch_stages.csv by {worst:.3f} ms")
    with open(args.out / "tpch_stages.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    edges = (args.src / "tpch_dag_edges.csv").read_text()
    (args.out / "tpch_edges.csv").write_text(edges)
    print(
        f"wrote {len(rows)} stages and {edges.count(chr(10)) - 1} edges to {args.out} (max |Δmean| {worst:.3f} ms)"
    )


if __name__ == "__main__":
    main()
