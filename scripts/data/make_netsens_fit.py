"""Write ``gpusched_envs/data/fits/netsens_fit.yaml``: the Philly fit with a distributed-job size mix.

NetSens (Sharma, Bhasi et al., arXiv 2401.16492) studies distributed training jobs; in Philly 93% of jobs use one
GPU, so a Philly-fitted workload has too few network-sensitive jobs to show any effect of consolidation. This fit
keeps everything of ``philly_fit.yaml`` (per-size duration quantiles, arrival rate, diurnal profile) and changes only
the GPU-size pmf: a share ``--single`` of one-GPU jobs (the insensitive class, and the victims of network-sensitive
preemption), the rest distributed over sizes >= 2 in Philly's own relative frequencies. The share is our assumption.

    python scripts/data/make_netsens_fit.py --single 0.5
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import yaml

DATA = Path(__file__).resolve().parents[2] / "gpusched_envs" / "data" / "fits"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--single", type=float, default=0.5, help="share of one-GPU jobs (default 0.5)")
    args = parser.parse_args()
    if not 0.0 < args.single < 1.0:
        parser.error(f"--single must be in (0, 1), got {args.single}")
    doc = yaml.safe_load((DATA / "philly_fit.yaml").read_text())
    sizes = np.asarray(doc["gpu_sizes"]["sizes"])
    probs = np.asarray(doc["gpu_sizes"]["probs"], dtype=np.float64)
    multi = sizes >= 2
    new = np.where(multi, probs / probs[multi].sum() * (1.0 - args.single), 0.0)
    new[sizes == 1] = args.single
    doc["gpu_sizes"]["probs"] = [round(float(p), 8) for p in new]
    doc["command"] = f"python scripts/data/make_netsens_fit.py --single {args.single}"
    doc["method"] = (
        f"philly_fit.yaml with the GPU-size pmf replaced: {args.single:.0%} one-GPU jobs, the rest over sizes >= 2 "
        "in Philly's relative frequencies (distributed-job mix for the NetSens scenarios; the share is assumed). "
        + doc["method"]
    )
    header = (
        "# Synthetic-workload fit for the NetSens congested-network scenarios. GENERATED: do not edit by hand.\n"
        f"# Regenerate with: python scripts/data/make_netsens_fit.py --single {args.single}\n"
    )
    out = DATA / "netsens_fit.yaml"
    out.write_text(header + yaml.safe_dump(doc, sort_keys=False, width=118))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
