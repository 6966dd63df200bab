"""How much could ANY scheduler gain over clairvoyant SRTF on the HMARL data centre (``dc4``)?

Before asking a learned scheduler to beat SRTF, measure the room there is. Per Philly window (the ``dc4`` scenario of
``gpusched marl``: 4 racks × 2 servers × 4 GPUs, 120 jobs, offered load 1.0) this prints

- ``srtf``: preemptive SRTF with consolidated placement over the merged queue (``Simulator.run``), the
  ``srtf-consolidate`` row of ``gpusched marl``;
- ``rollout``: one step of policy improvement over SRTF (Bertsekas' rollout): at every decision point each rule of a
  small portfolio (SRTF; shortest remaining GPU-service first, SRSF; SRTF that preempts nothing at this decision;
  SRTF with ``closest`` placement) decides, the simulator is copied and run to the end with SRTF, and the rule whose
  copy ends with the lowest average JCT decides for real. It is never worse than SRTF on its window (SRTF is in the
  portfolio and the simulator is deterministic) — an achievable schedule, found by search with the future known;
- ``bound``: the mean of the jobs' ideal runtimes (no queueing, no preemption, fastest placement), below which no
  scheduler goes (``lower_bound_avg_jct`` of the simulator's metrics).

    python scripts/studies/marl_headroom.py --days 80-85 --seeds 10000-10011 --out runs/marl_headroom_val.json
    python scripts/studies/marl_headroom.py --days 85-105 --seeds 20000-20009 --out runs/marl_headroom_heldout.json
    python scripts/studies/marl_headroom.py --days 80-85 --seeds 10000-10011 --load 2.0   # more queueing, more room

It fits and selects nothing, so it may run on the held-out windows. A few seconds to a minute per window on a CPU.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path

import numpy as np

from gpusched_envs.policies.schedulers import SRTF, PreemptivePolicy, QueuePolicy


class SRSF(PreemptivePolicy):
    """Shortest remaining GPU-service (remaining ideal time × GPUs) first, preemptive."""

    name = "srsf"

    def priority(self, sim, job):
        return (sim.remaining_ideal_time(job) * sim.job_gpus_n[job], job)


class SRTFNoPreempt(QueuePolicy):
    """SRTF's order on the free GPUs only (list scheduling with backfill): preempts nothing at this decision."""

    name = "srtf-nopreempt"

    def key(self, sim, job):
        return (sim.remaining_ideal_time(job), job)  # SRTF's priority


def rules() -> list:
    """The rules the rollout chooses among at each decision (fresh instances: the policies keep per-run state)."""
    return [SRTF("consolidate"), SRSF("consolidate"), SRTFNoPreempt("consolidate"), SRTF("closest")]


def rollout(sim) -> tuple[float, list[int]]:
    """One-step rollout over SRTF on ``sim`` (run to the end); the average JCT and how often each rule decided."""
    chosen = [0] * len(rules())
    while sim.next_decision():
        best, best_jct = 0, np.inf
        for i, rule in enumerate(rules()):
            trial = copy.deepcopy(sim)
            rule.reset(trial)
            rule.schedule(trial)
            jct = trial.run(SRTF("consolidate"))["avg_jct"]  # the rest of the run with SRTF
            if jct < best_jct - 1e-6:  # ties: the earlier rule (SRTF first)
                best, best_jct = i, jct
        rule = rules()[best]
        rule.reset(sim)
        rule.schedule(sim)
        chosen[best] += 1
    return float(sim.metrics()["avg_jct"]), chosen


def main(argv=None) -> dict:
    from gpusched_lab.agents.methods.hmarl.agent import make_env
    from gpusched_lab.evaluate.marl import parse_seeds
    from gpusched_lab.evaluate.stats import bootstrap_ci

    from gpusched_envs.io import atomic_write_text
    from gpusched_envs.sim import Simulator

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--days", default="80-85", help="Philly trace days FIRST-LAST (80-85: validation; 85-105: held-out)"
    )
    ap.add_argument("--seeds", default="10000-10011")
    ap.add_argument("--jobs", type=int, default=120)
    ap.add_argument(
        "--load", type=float, default=1.0, help="offered load of the windows on the cluster's GPUs"
    )
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    first, _, last = a.days.partition("-")
    if not (first.isdigit() and last.isdigit() and int(first) < int(last)):
        raise SystemExit(f"--days: expected FIRST-LAST (integers, FIRST < LAST), got {a.days!r}")
    if not a.load > 0:
        raise SystemExit(f"--load must be > 0, got {a.load}")
    try:
        seeds = parse_seeds(a.seeds)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    env = make_env(
        dict(
            cluster="datacenter:racks=4,servers=2,gpus=4",
            workload=f"philly-windows:first={first},last={last},jobs={a.jobs},load={a.load}",
            num_agents=4,
        )
    )
    rows = []
    for seed in seeds:
        env.reset(seed=seed)
        cluster, workload, config = env.sim.cluster, env.sim.workload, env.sim.config
        m = Simulator(cluster, workload, config).run(SRTF("consolidate"))
        t0 = time.perf_counter()
        jct, chosen = rollout(Simulator(cluster, workload, config))
        row = {
            "seed": seed,
            "srtf": float(m["avg_jct"]),
            "rollout": jct,
            "bound": float(m["lower_bound_avg_jct"]),
            "rule_choices": chosen,
            "rollout_s": time.perf_counter() - t0,
        }
        rows.append(row)
        print(
            f"{seed}: srtf {row['srtf']:9,.0f}  rollout {jct:9,.0f} ({jct / row['srtf'] - 1:+.2%})  "
            f"bound {row['bound']:9,.0f} (srtf {row['srtf'] / row['bound']:.3f}×)  rules {chosen}",
            flush=True,
        )
    summary = {}
    for key in ("srtf", "rollout", "bound"):
        mean, lo, hi = bootstrap_ci([r[key] for r in rows])
        summary[key] = {"mean": mean, "ci95": [lo, hi]}
    gain = [r["rollout"] / r["srtf"] - 1 for r in rows]
    summary["rollout_vs_srtf"] = dict(zip(("mean", "lo", "hi"), bootstrap_ci(gain), strict=True))
    summary["srtf_over_bound"] = summary["srtf"]["mean"] / summary["bound"]["mean"]
    print(
        f"mean: srtf {summary['srtf']['mean']:,.0f}  rollout {summary['rollout']['mean']:,.0f} "
        f"({summary['rollout_vs_srtf']['mean']:+.2%} per window [{summary['rollout_vs_srtf']['lo']:+.2%}, "
        f"{summary['rollout_vs_srtf']['hi']:+.2%}])  bound {summary['bound']['mean']:,.0f} "
        f"(srtf {summary['srtf_over_bound']:.3f}×: at most {1 - 1 / summary['srtf_over_bound']:.1%} to gain)"
    )
    report = {"days": a.days, "jobs": a.jobs, "load": a.load, "rows": rows, "summary": summary}
    if a.out is not None:
        atomic_write_text(a.out, json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    main()
