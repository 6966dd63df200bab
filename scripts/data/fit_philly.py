"""Fit the synthetic-workload distributions to the bundled Philly job list.

Writes ``gpusched_envs/data/fits/philly_fit.yaml`` with:
- ``gpu_sizes``: the empirical GPU-count distribution (every size seen, with its probability);
- ``duration``: per GPU-size class, the duration quantile function on a probability grid that is dense in the tail
  (sampled by log-linear interpolation, so mean and tail percentiles are kept, not just the median);
- ``arrivals``: the mean arrival rate (jobs/hour) and a 24-hour diurnal profile (relative rate per hour, mean 1).

Usage: ``python scripts/data/fit_philly.py [--out PATH]``. The command and the input's sha256 are stored in the file.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from gpusched_envs.workloads.philly import PHILLY_JOBS, load_philly  # noqa: E402

# GPU-size classes for the conditional duration distribution: (label, lowest size, highest size)
SIZE_CLASSES = [("1", 1, 1), ("2", 2, 2), ("3-4", 3, 4), ("5-8", 5, 8), ("9+", 9, 10**9)]


def probability_grid() -> np.ndarray:
    """0..1, 1% steps to 0.9, 0.1% steps to 0.99, 0.01% steps to 0.999, then 0.9995, 0.9999, 1."""
    parts = [
        np.linspace(0.0, 0.9, 91),
        np.linspace(0.9, 0.99, 91)[1:],
        np.linspace(0.99, 0.999, 91)[1:],
        np.array([0.9995, 0.9999, 1.0]),
    ]
    return np.round(np.concatenate(parts), 6)


def fit(path: Path | None = None) -> dict:
    wl = load_philly(path)
    src = Path(path) if path is not None else PHILLY_JOBS
    sizes, counts = np.unique(wl.num_gpus, return_counts=True)
    grid = probability_grid()
    classes = []
    for label, lo, hi in SIZE_CLASSES:
        sel = (wl.num_gpus >= lo) & (wl.num_gpus <= hi)
        d = wl.duration[sel]
        q = np.quantile(d, grid)
        classes.append(
            {
                "label": label,
                "min_gpus": int(lo),
                "max_gpus": int(min(hi, sizes.max())),
                "jobs": int(sel.sum()),
                "quantiles_s": [float(f"{x:.6g}") for x in q],
            }
        )
    # Arrivals: wall-clock hour of day of every submission, averaged over the whole days of the trace.
    origin = np.datetime64(wl.time_origin, "s")
    stamps = origin + wl.submit_time.astype("timedelta64[s]")
    day0 = stamps[0].astype("datetime64[D]") + np.timedelta64(1, "D")
    day1 = stamps[-1].astype("datetime64[D]")
    whole = (stamps >= day0) & (stamps < day1)
    hours = ((stamps[whole] - stamps[whole].astype("datetime64[D]")) // np.timedelta64(1, "h")).astype(int)
    hourly = np.bincount(hours, minlength=24).astype(float)
    profile = hourly / hourly.mean()
    span_h = float(wl.submit_time[-1] - wl.submit_time[0]) / 3600.0
    return {
        "source": {
            "file": f"gpusched_envs/data/traces/philly/{src.name}",
            "sha256": hashlib.sha256(src.read_bytes()).hexdigest(),
            "jobs": len(wl),
            "first_submit": wl.time_origin,
            "citation": "Jeon et al., Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN Training "
            "Workloads, USENIX ATC 2019 (data CC-BY-4.0)",
        },
        "command": "python scripts/data/fit_philly.py",
        "method": "empirical GPU-size pmf; per-size-class duration quantile function (log-linear inverse-CDF "
        "sampling); Poisson rate = jobs / arrival span; diurnal profile = submissions per hour of day over "
        "whole days, normalised to mean 1",
        "gpu_sizes": {
            "sizes": [int(s) for s in sizes],
            "probs": [float(f"{c / counts.sum():.8g}") for c in counts],
        },
        "duration": {"probs": [float(p) for p in grid], "classes": classes},
        "arrivals": {
            "rate_per_hour": float(f"{(len(wl) - 1) / span_h:.6g}"),
            "diurnal_profile": [float(f"{x:.5g}") for x in profile],
        },
        "reference": {
            "mean_duration_s": float(f"{wl.duration.mean():.6g}"),
            "p50_duration_s": float(f"{np.percentile(wl.duration, 50):.6g}"),
            "p95_duration_s": float(f"{np.percentile(wl.duration, 95):.6g}"),
            "mean_gpus": float(f"{wl.num_gpus.mean():.6g}"),
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", type=Path, default=None, help="Philly CSV (default: the bundled file)")
    ap.add_argument("--out", type=Path, default=ROOT / "gpusched_envs" / "data" / "fits" / "philly_fit.yaml")
    args = ap.parse_args(argv)
    doc = fit(args.input)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    header = (
        "# Synthetic-workload fit to the bundled Philly job list. GENERATED: do not edit by hand.\n"
        "# Regenerate with: python scripts/data/fit_philly.py\n"
    )
    tmp = args.out.with_suffix(".yaml.tmp")
    tmp.write_text(header + yaml.safe_dump(doc, sort_keys=False, width=110, default_flow_style=None))
    tmp.replace(args.out)
    print(f"wrote {args.out} ({doc['source']['jobs']} jobs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
