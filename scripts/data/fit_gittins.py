"""Fit the 2D-Gittins table of :class:`gpusched_envs.policies.gittins.Gittins` on the bundled Philly job list.

Only jobs submitted BEFORE the cut-off (default 2017-11-01) are used: the held-out windows of
``evaluate/suites/philly_heldout.yaml`` start on or after it. GPU-service S = traced duration × GPUs requested
(GPU-seconds); one index row per GPU-count class.

    python scripts/data/fit_gittins.py            # writes gpusched_envs/data/fits/philly_gittins.yaml
"""

from __future__ import annotations

import argparse
import hashlib

import numpy as np
import yaml

CLASSES = ((1, "1 GPU"), (4, "2-4 GPUs"), (8, "5-8 GPUs"), (1_000_000, "more than 8 GPUs"))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cutoff", default="2017-11-01", help="use jobs submitted before this date only")
    p.add_argument("--first", type=float, default=60.0, help="first grid point after 0 (GPU-seconds)")
    p.add_argument("--factor", type=float, default=2.0, help="geometric step of the grid")
    p.add_argument("--points", type=int, default=23, help="grid points after 0")
    p.add_argument("--out", default="gpusched_envs/data/fits/philly_gittins.yaml")
    a = p.parse_args(argv)
    from gpusched_envs.io import atomic_write_text
    from gpusched_envs.policies.gittins import gittins_index
    from gpusched_envs.workloads.philly import PHILLY_JOBS, load_philly
    from gpusched_envs.workloads.select import resolve_time

    wl = load_philly()
    cut = resolve_time(wl, a.cutoff, what="cutoff")
    held_in = wl.submit_time < cut
    service = wl.duration[held_in] * wl.num_gpus[held_in]
    gpus = wl.num_gpus[held_in]
    grid = [0.0] + [a.first * a.factor**k for k in range(a.points)]
    classes, lo = [], 1
    for hi, label in CLASSES:
        sel = (gpus >= lo) & (gpus <= hi)
        idx = gittins_index(service[sel], grid)
        classes.append(
            {
                "label": label,
                "max_gpus": hi,
                "jobs": int(sel.sum()),
                "index": [float(f"{v:.6g}") for v in idx],
            }
        )
        lo = hi + 1
    doc = {
        "source": {
            "file": "gpusched_envs/data/traces/philly/philly_jobs_sia.csv.gz",
            "sha256": hashlib.sha256(PHILLY_JOBS.read_bytes()).hexdigest(),
            "jobs_used": int(held_in.sum()),
            "submitted_before": a.cutoff,
            "citation": "Jeon et al., USENIX ATC 2019 (Philly trace, CC-BY-4.0); index: Gu et al., Tiresias, NSDI 2019",
        },
        "command": "python scripts/data/fit_gittins.py"
        + ("" if a.cutoff == "2017-11-01" else f" --cutoff {a.cutoff}"),
        "method": (
            "Gittins index of attained GPU-service a, G(a) = sup_D P(S-a <= D | S>a) / E[min(S-a, D) | S>a], S ="
            " duration x GPUs of the held-in jobs of each GPU-count class, at each grid point (GPU-seconds);"
            " 0 beyond the largest held-in job"
        ),
        "grid_gpu_s": [float(g) for g in grid],
        "classes": classes,
    }
    text = "# 2D-Gittins table for the `gittins` heuristic. GENERATED: do not edit by hand.\n"
    text += "# Regenerate with: python scripts/data/fit_gittins.py\n"
    text += yaml.safe_dump(doc, sort_keys=False, width=110)
    atomic_write_text(a.out, text)
    print(f"wrote {a.out}: {int(held_in.sum())} jobs before {a.cutoff}, {len(grid)} grid points")
    for c in classes:
        print(f"  {c['label']:>18s} ({c['jobs']} jobs): {np.round(c['index'][:8], 7)}")


if __name__ == "__main__":
    main()
