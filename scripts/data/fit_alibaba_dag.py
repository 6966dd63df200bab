"""Fit DAG-shape statistics of Alibaba cluster-trace-v2018 batch jobs; store only the statistics.

The real rows (research-use terms) are NOT bundled: this script reads them from ``--trace-dir`` and writes
``gpusched_envs/data/fits/alibaba2018_dag_fit.yaml`` with the fitted statistics that
:mod:`gpusched_envs.workloads.dag.alibaba_like` samples from.

Inputs (see ``../shared/traces/alibaba_v2018_dag/PROVENANCE.md``):
- ``batch_task_window_1h_16749jobs.csv.gz``: one hour of jobs (derived 7-column format with a header); used for the
  job-size distribution (representative) and the shape statistics;
- ``batch_task_dag_sample_2120jobs.csv.gz``: 2,120 jobs stratified by size (official columns + header); adds the
  large jobs (>91 tasks) to the shape statistics, never to the size distribution.

Usage::

    .venv/bin/python scripts/data/fit_alibaba_dag.py --trace-dir ../shared/traces/alibaba_v2018_dag
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import sys
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from gpusched_envs.workloads.dag.alibaba2018 import (  # noqa: E402
    BatchTask,
    build_job_dag,
    group_jobs,
    parse_task_name,
    read_batch_task,
)

BUCKETS = [(2, 2), (3, 10), (11, 50), (51, 100), (101, 10**9)]
QUANTILES = np.linspace(0.0, 1.0, 21)
PROFILE_BINS = 5


def read_window(path: Path) -> list[BatchTask]:
    out = []
    with io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="") as fh:
        rd = csv.DictReader(fh)
        for k, r in enumerate(rd, 1):
            d = float(r["duration_s"])
            out.append(
                BatchTask(
                    task_name=r["task_name"],
                    instance_num=float(r["instance_num"]),
                    job_name=r["job_name"],
                    task_type="",
                    status="Terminated",
                    start_time=1.0,
                    end_time=1.0 + d,
                    plan_cpu=float(r["plan_cpu"]),
                    plan_mem=float(r["plan_mem"]),
                    row=k,
                )
            )
    return out


def dag_jobs(rows: list[BatchTask]):
    """DAGs of jobs with DAG-named tasks only (independent task_... rows removed)."""
    out = []
    for name, tasks in group_jobs(rows).items():
        tasks = [t for t in tasks if parse_task_name(t.task_name).is_dag]
        if tasks:
            dag = build_job_dag(name, tasks, truncated="drop_last")
            out.append(dag)
    return out


def pmf(values: np.ndarray) -> dict[int, float]:
    v, c = np.unique(values.astype(np.int64), return_counts=True)
    return {int(a): round(float(b / c.sum()), 6) for a, b in zip(v, c, strict=True)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace-dir", type=Path, default=ROOT.parent / "shared/traces/alibaba_v2018_dag")
    ap.add_argument("--out", type=Path, default=ROOT / "gpusched_envs/data/fits/alibaba2018_dag_fit.yaml")
    args = ap.parse_args()

    window = dag_jobs(read_window(args.trace_dir / "batch_task_window_1h_16749jobs.csv.gz"))
    sample = dag_jobs(list(read_batch_task(args.trace_dir / "batch_task_dag_sample_2120jobs.csv.gz")))
    seen = {d.name for d in window}
    shape_jobs = [d for d in window if d.num_tasks >= 2] + [
        d for d in sample if d.num_tasks >= 2 and d.name not in seen
    ]

    sizes = np.array([d.num_tasks for d in window])
    buckets = []
    for lo, hi in BUCKETS:
        js = [d for d in shape_jobs if lo <= d.num_tasks <= hi]
        depth_frac = np.array([(d.depth - 1) / (d.num_tasks - 1) for d in js])
        indeg = np.concatenate([d.in_degree[d.in_degree > 0] for d in js])
        # task share per normalised level position (bins over [0, 1]), tasks weighted equally
        prof = np.zeros(PROFILE_BINS)
        skip = spans = 0
        last_w = []
        for d in js:
            if d.depth > 1:
                pos = d.level / (d.depth - 1)
                prof += np.bincount(
                    np.minimum((pos * PROFILE_BINS).astype(int), PROFILE_BINS - 1), minlength=PROFILE_BINS
                )
                last_w.append(int((d.level == d.depth - 1).sum()))
            if d.num_edges:
                span = d.level[d.edges[:, 1]] - d.level[d.edges[:, 0]]
                skip += int((span > 1).sum())
                spans += len(span)
        buckets.append(
            {
                "min_tasks": lo,
                "max_tasks": min(hi, int(max(d.num_tasks for d in js))),
                "jobs": len(js),
                "depth_fraction_quantiles": [round(float(x), 5) for x in np.quantile(depth_frac, QUANTILES)],
                "in_degree_pmf": pmf(indeg),
                "level_profile": [round(float(x), 5) for x in prof / prof.sum()],
                "skip_edge_fraction": round(skip / max(spans, 1), 5),
                "sinks_median": float(np.median(last_w)) if last_w else 1.0,
                "mean_edges_per_task": round(float(np.mean([d.num_edges / d.num_tasks for d in js])), 4),
            }
        )
    dur = np.concatenate([d.work for d in shape_jobs])
    pos = dur[dur > 0]
    logd = np.log(pos)
    fit = {
        "description": "DAG-shape statistics of Alibaba cluster-trace-v2018 batch_task DAG jobs (fitted; no trace rows)",
        "command": "python scripts/data/fit_alibaba_dag.py --trace-dir ../shared/traces/alibaba_v2018_dag",
        "sources": {
            "trace": "alibaba/clusterdata cluster-trace-v2018 batch_task (research-use terms; rows not bundled)",
            "size_distribution": "batch_task_window_1h_16749jobs (hsnlab/SLAMBUC sample_tasks.csv, one hour, day 3): "
            "jobs with DAG-named tasks, independent task_ rows removed",
            "shape_statistics": "the same hour (jobs >= 2 tasks) + batch_task_dag_sample_2120jobs "
            "(hliangzhao/embedding selected_DAGs.csv, size-stratified) for jobs not in the hour",
            "truncated_names": "50-character task names: possibly-cut last parent id dropped",
            "cite": "Tian, Zheng, Wang, Characterizing and Synthesizing Task Dependencies of Data-Parallel Jobs in "
            "Alibaba Cloud, SoCC'19; github.com/alibaba/clusterdata cluster-trace-v2018",
        },
        "jobs_in_size_distribution": len(window),
        "jobs_in_shape_statistics": len(shape_jobs),
        "tasks_per_job_pmf": pmf(sizes),
        "size_buckets": buckets,
        "duration_s": {
            "zero_fraction": round(float((dur <= 0).mean()), 5),
            "lognormal_mu": round(float(logd.mean()), 5),
            "lognormal_sigma": round(float(logd.std()), 5),
            "quantiles": [round(float(x), 3) for x in np.quantile(dur, QUANTILES)],
            "note": "task duration = end_time - start_time (s) of jobs >= 2 tasks; quantiles include zeros",
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        "# Generated by scripts/data/fit_alibaba_dag.py — fitted statistics only, no Alibaba trace rows.\n"
        + yaml.safe_dump(fit, sort_keys=False, width=110)
    )
    print(f"wrote {args.out} ({len(window)} jobs for sizes, {len(shape_jobs)} for shapes)")


if __name__ == "__main__":
    main()
