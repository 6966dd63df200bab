"""Merge ``train compare --out`` JSON files (e.g. one per seed) and print the issue-10 tables: per (window, seed)
pair and per window (seeds averaged first, bootstrap over windows), split by window size.

    python scripts/studies/nc_tables.py runs/cmp_s0_300.json runs/cmp1000/s*.json --out compare.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+")
    p.add_argument("--out", default="", help="write the merged rows and summaries here")
    p.add_argument("--checkpoint", default="", help="name the checkpoint so (it was evaluated from a copy)")
    a = p.parse_args(argv)
    from gpusched_lab.evaluate.compare import summarize_by_scenario, summarize_pairs

    docs = [json.loads(Path(f).read_text()) for f in a.files]
    rows = [r for d in docs for r in d["rows"]]
    names = [k for k in rows[0] if k not in ("scenario", "seed", "agent")]
    names = [
        n for n in names if all(n in r for r in rows)
    ]  # rows every file has (in-env rows may be missing)
    merged = {
        "checkpoint": a.checkpoint or docs[0]["checkpoint"],
        "commands": [d.get("command", "") for d in docs],
        "information": docs[0]["information"],
        "groups": {},
    }
    for label, part in (("300", "-300-"), ("1000", "-1000-"), ("all", "")):
        sub = [r for r in rows if part in r["scenario"]]
        if not sub:
            continue
        pairs, by = summarize_pairs(sub, names), summarize_by_scenario(sub, names)
        merged["groups"][label] = {"rows": sub, "summary": pairs, "summary_by_scenario": by}
        windows = len({r["scenario"] for r in sub})
        seeds = sorted({r["seed"] for r in sub})
        title = "all windows" if label == "all" else f"{label}-job windows"
        print(f"\n**{title}** ({len(sub)} (window, seed) pairs: {windows} windows × seeds {seeds})\n")
        print(
            "| policy | mean avg JCT (s) | agent − policy, per pair (s) [95% CI] | relative | better in "
            "| per window (s) [95% CI] | better in |"
        )
        print("|---|---:|---|---:|---:|---|---:|")
        print(f"| agent | {pairs['agent']['mean']:,.0f} | — | — | — | — | — |")
        for n in names:
            d, w = pairs[f"agent_minus_{n}"], by[f"agent_minus_{n}"]
            print(
                f"| {n} | {pairs[n]['mean']:,.0f} | {d['mean']:+,.0f} [{d['ci95'][0]:+,.0f}, {d['ci95'][1]:+,.0f}]"
                f" | {d['relative']:+.1%} | {d['agent_better_in']}/{d['pairs']} | {w['mean']:+,.0f} "
                f"[{w['ci95'][0]:+,.0f}, {w['ci95'][1]:+,.0f}] | {w['agent_better_in']}/{w['scenarios']} |"
            )
    print("\nper window (mean over seeds): " + ", ".join(["agent", *names]))
    for sc in dict.fromkeys(r["scenario"] for r in rows):
        mine = [r for r in rows if r["scenario"] == sc]
        means = [sum(r[n] for r in mine) / len(mine) for n in ("agent", *names)]
        print(f"| {sc} | {len(mine)} | " + " | ".join(f"{m:,.0f}" for m in means) + " |")
    if a.out:
        from gpusched_envs.io import atomic_write_text

        atomic_write_text(a.out, json.dumps(merged, indent=1) + "\n")


if __name__ == "__main__":
    main()
