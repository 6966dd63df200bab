"""How the Philly trace's jobs differ between the periods a learned scheduler trains on and is tested on.

Per period (submit date): the number of jobs, the median, mean and 90th percentile of their durations, the mean GPU
count, the share of multi-GPU jobs and their share of the GPU time. The JobSelect studies train on jobs submitted
before 2017-11-01 and test on jobs submitted after it (the ``philly_heldout`` suite); a policy that learned one
period's mix of job lengths and sizes meets another mix there.

    python scripts/studies/philly_periods.py                          # the default periods, a Markdown table
    python scripts/studies/philly_periods.py --periods 2017-10-01:2017-10-31,2017-11-01:2017-12-31 --json out.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

PERIODS = (
    ("2017-09-01", "2017-09-30"),
    ("2017-10-01", "2017-10-15"),
    ("2017-10-16", "2017-10-31"),
    ("2017-11-01", "2017-11-30"),
    ("2017-12-01", "2017-12-31"),
)


def parse_periods(text: str) -> list[tuple[str, str]]:
    """``START:END,START:END`` (dates, END inclusive) → pairs; one clear error for a malformed item."""
    out = []
    for item in (s.strip() for s in text.split(",") if s.strip()):
        start, sep, end = item.partition(":")
        if not sep or not start or not end:
            raise SystemExit(f"--periods: {item!r} is not START:END (e.g. 2017-10-01:2017-10-31)")
        out.append((start, end))
    if not out:
        raise SystemExit("--periods: no period given")
    return out


def period_row(start: str, end: str) -> dict:
    """The statistics of the jobs submitted from ``start`` to ``end`` (inclusive)."""
    from gpusched_envs.workloads import load_workload

    wl = load_workload(f"philly:start={start},end={end}", seed=0)
    d = np.asarray(wl.duration, dtype=np.float64)
    g = np.asarray(wl.num_gpus, dtype=np.float64)
    gpu_time = d * g
    multi = g > 1
    return {
        "period": f"{start} to {end}",
        "jobs": int(len(d)),
        "median_duration_s": float(np.median(d)),
        "mean_duration_s": float(d.mean()),
        "p90_duration_s": float(np.percentile(d, 90)),
        "mean_gpus": float(g.mean()),
        "multi_gpu_share": float(multi.mean()),
        "multi_gpu_time_share": float(gpu_time[multi].sum() / gpu_time.sum()),
    }


def markdown(rows: list[dict]) -> str:
    lines = [
        "| submitted | jobs | median duration (s) | mean (s) | p90 (s) | mean GPUs | multi-GPU jobs | their GPU time |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['period']} | {r['jobs']:,} | {r['median_duration_s']:,.0f} | {r['mean_duration_s']:,.0f} "
            f"| {r['p90_duration_s']:,.0f} | {r['mean_gpus']:.2f} | {100 * r['multi_gpu_share']:.0f}% "
            f"| {100 * r['multi_gpu_time_share']:.0f}% |"
        )
    return "\n".join(lines)


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--periods", default="", help="START:END,... (dates, END inclusive; default: Sep to Dec 2017)"
    )
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = ap.parse_args(argv)
    periods = parse_periods(args.periods) if args.periods else list(PERIODS)
    rows = [period_row(a, b) for a, b in periods]
    print(markdown(rows))
    if args.json is not None:
        from gpusched_envs.io import atomic_write_text

        atomic_write_text(args.json, json.dumps({"rows": rows}, indent=1) + "\n")
    return rows


if __name__ == "__main__":
    main()
