"""What can a NON-clairvoyant scheduler gain over default Tiresias on Philly? Cheap heuristic study.

Runs candidate non-clairvoyant rules with ``Simulator.run`` (seconds per episode) on HELD-IN Philly windows only
(jobs submitted before 2017-11-01) at offered load 0.9 on ``topdrl``, the held-out suite's setting, and prints the
average JCT of each rule relative to default Tiresias (one 1-GPU-hour threshold), paired per (window, seed).

    python scripts/studies/nc_heuristic_study.py --size 300 --seeds 2 --out runs/nc_study_300.json
    python scripts/studies/nc_heuristic_study.py --size 1000 --seeds 1
    python scripts/studies/nc_heuristic_study.py --size 300 --seeds 10 --only las,srtf --heldout   # the chosen rule, once

Never run this on the held-out windows to choose a rule: the chosen rule is checked once on ``philly_heldout``.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

HELD_IN_300 = [f"2017-10-{d:02d}" for d in range(1, 30, 2)]  # 15 windows
HELD_IN_1000 = ["2017-09-26", "2017-10-02", "2017-10-08", "2017-10-14", "2017-10-20", "2017-10-26"]


def candidates() -> dict:
    from gpusched_envs.policies.schedulers import SRTF, Tiresias

    out = {"tiresias": lambda: Tiresias()}
    for t in (900.0, 1800.0, 7200.0, 14400.0):
        out[f"tiresias[{t:g}]"] = lambda t=t: Tiresias(thresholds=[t])
    geo = {
        "las-geo2-900": [900.0 * 2**k for k in range(12)],
        "las-geo4-900": [900.0 * 4**k for k in range(7)],
        "las-geo10-360": [360.0 * 10**k for k in range(5)],
        "las-3q": [3600.0, 36000.0],
        "las-geo4-3600": [3600.0 * 4**k for k in range(5)],
    }
    for name, th in geo.items():
        out[name] = lambda th=th: Tiresias(thresholds=th)
    from gpusched_envs.policies.gittins import LAS, Gittins

    class LASByGPUs(LAS):  # fewer GPUs first inside a queue
        def priority(self, sim, job):
            return (self.queue_level(sim, job), int(sim.job_gpus_n[job]), sim.workload.submit_time[job], job)

    for name, (first, factor, levels) in {
        "las-geo2-300": (300.0, 2.0, 14),
        "las-geo2-1800": (1800.0, 2.0, 11),
        "las-geo3-600": (600.0, 3.0, 9),
        "las-geo2-60": (60.0, 2.0, 18),
    }.items():
        out[name] = lambda a=(first, factor, levels): LAS(first=a[0], factor=a[1], levels=a[2])
    out["las-gpus"] = lambda: LASByGPUs()
    out["las"] = lambda: LAS()  # the chosen default (first 900, factor 4, 7 levels) = las-geo4-900
    out["srtf"] = lambda: SRTF()  # clairvoyant: a reference for what knowing durations gives, not a candidate
    out["gittins"] = lambda: Gittins()
    out["gittins-1class"] = lambda: Gittins(per_class=False)
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=300, choices=(300, 1000))
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--only", default="", help="comma-separated candidate names")
    p.add_argument("--extra", default="", help="module:function returning more candidates (name -> factory)")
    p.add_argument("--out", default="")
    p.add_argument(
        "--heldout",
        action="store_true",
        help="run the windows of evaluate/suites/philly_heldout.yaml instead (check a chosen rule ONCE; never tune)",
    )
    a = p.parse_args(argv)
    from gpusched_lab.agents.common import fresh_simulator, make_env

    cands = candidates()
    if a.extra:
        import importlib

        mod, fn = a.extra.split(":")
        cands.update(getattr(importlib.import_module(mod), fn)())
    if a.only:
        keep = a.only.split(",")
        cands = {k: v for k, v in cands.items() if k in keep or k == "tiresias"}
    starts = HELD_IN_300 if a.size == 300 else HELD_IN_1000
    if a.heldout:
        from gpusched_lab.evaluate.compare import suite_scenarios

        starts = [
            kw["workload"].split("start=")[1].split(",")[0]
            for _, _, kw in suite_scenarios("philly_heldout")
            if f"jobs={a.size}," in kw["workload"]
        ]
    rows = []
    for start in starts:
        kw = {
            "cluster": "topdrl",
            "workload": f"philly:start={start},jobs={a.size},load=0.9,gpus=32",
            "placement": "closest",
        }
        env = make_env("gpusched/JobSelect-v1", kw, "flat")
        for s in range(a.seeds):
            row = {"window": start, "seed": s}
            for name, make in cands.items():
                t0 = time.perf_counter()
                row[name] = float(fresh_simulator(env, s).run(make())["avg_jct"])
                row[f"t_{name}"] = time.perf_counter() - t0
            rows.append(row)
            print(start, s, " ".join(f"{n}={row[n]:,.0f}" for n in cands), flush=True)
        env.close()
    print(
        f"\n{a.size}-job {'HELD-OUT' if a.heldout else 'held-in'} windows, {len(rows)} (window, seed) pairs; mean avg JCT and ratio to tiresias"
    )
    base = np.array([r["tiresias"] for r in rows])
    for name in cands:
        v = np.array([r[name] for r in rows])
        ratio = v / base
        print(
            f"{name:>22s}  mean {v.mean():>10,.0f}  mean/tiresias {v.mean() / base.mean():6.3f}  "
            f"geo-mean ratio {np.exp(np.log(ratio).mean()):6.3f}  better in {(v < base).sum()}/{len(v)}  "
            f"{np.mean([r[f't_{name}'] for r in rows]):.1f} s/episode"
        )
    if a.out:
        from pathlib import Path

        from gpusched_envs.io import atomic_write_text

        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(a.out, json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
