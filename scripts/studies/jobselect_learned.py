"""Learned JobSelect checkpoints on the held-out Philly windows, read against the best heuristic of their class and the
measured room (docs/headroom.md).

For every checkpoint and every scenario of the ``philly_heldout`` suite (ten 300-job and four 1,000-job windows after
2017-11-01 on ``topdrl`` at offered load 0.9), this runs ``train compare`` on ``--seeds``: the checkpoint's
deterministic policy and, paired on the same (window, seed), the heuristics of its information class
(non-clairvoyant FIFO, Tiresias, LAS, Gittins; clairvoyant also SJF, SRTF), each as ``Simulator.run`` and, for a
preemptive agent, through the agent's own env (``NAME@env``: same window, lease and scheduling rounds). Per window
family it reports

- ``ratio`` = agent ÷ the family's best heuristic of the class *chosen on held-in windows* (read from the headroom
  data: ``best``), with a paired 95% bootstrap interval over the (window, seed) pairs, and the same against the best
  heuristic *on these held-out pairs* (chosen after the fact, the stricter reading);
- per window: the mean ratio over the seeds, so a family's average cannot hide a window it loses;
- ``room share`` = (heuristic − agent) ÷ (heuristic − search) on the pairs where the headroom study ran its search
  with the future known (its seeds), averaged over those pairs first: the share of the measured room the agent takes.

    nice -n 10 python scripts/studies/jobselect_learned.py runs/ppo_nc_scale_s0/best runs/ppo_nc_scale_s1/best \\
        --seeds 0-9 --workers 2 --out docs/data/jobselect_learned.json        # docs/headroom.md
    python scripts/studies/jobselect_learned.py checkpoints/ppo_jobselect_gnn_nc --seeds 0 \\
        --scenarios topdrl-philly-heldout-300-1113 --out /tmp/learned.json    # a minute

Finished (checkpoint, window) results are kept in the output file as they come, and a rerun resumes from them (a
checkpoint whose files changed is run again).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np

SUITE = "philly_heldout"
HEADROOM = Path(__file__).resolve().parents[2] / "docs" / "data" / "jobselect_headroom.json"
HEURISTICS = {
    "non-clairvoyant": ("fifo", "tiresias", "las", "gittins"),
    "clairvoyant": ("fifo", "tiresias", "las", "gittins", "sjf", "srtf"),
}


def family_of(scenario: str) -> str:
    """``topdrl-philly-heldout-300-1101`` → ``"300"``."""
    parts = scenario.split("-")
    if len(parts) < 2 or not parts[-2].isdigit():
        raise ValueError(f"scenario {scenario!r}: expected a name ending in -JOBS-MMDD")
    return parts[-2]


def checkpoint_digest(path: Path) -> str:
    """A digest of the checkpoint's files (weights and metadata), so that a retrained checkpoint is run again."""
    h = hashlib.sha256()
    for name in ("model.pt", "meta.json"):
        h.update((path / name).read_bytes())
    return h.hexdigest()[:16]


def parse_seeds(text: str) -> list[int]:
    """``0-9`` or ``0,2,5`` → seeds."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise ValueError(f"--seeds: expected e.g. 0-9 or 0,2,5, got {text!r}")
        out += list(range(int(lo), int(hi or lo) + 1))
    if not out:
        raise ValueError(f"--seeds: no seed in {text!r}")
    return sorted(set(out))


def _one(checkpoint: str, scenario: str, seeds: list[int], heuristics: tuple[str, ...]) -> dict:
    from gpusched_lab.evaluate.compare import compare

    r = compare(checkpoint, seeds, heuristics=heuristics, suite=SUITE, only=[scenario])
    return {"rows": r["rows"], "seconds": r["seconds"], "information": r["information"]}


def paired_ratio(agent, base) -> dict:
    """mean(agent) ÷ mean(base) with the paired 95% bootstrap interval (pairs resampled together)."""
    from gpusched_lab.evaluate.stats import paired_relative_change

    mean, lo, hi = paired_relative_change(np.asarray(agent), np.asarray(base))
    return {"ratio": 1.0 + mean, "ci95": [1.0 + lo, 1.0 + hi], "pairs": len(agent)}


def summarize(rows: list[dict], heuristics: tuple[str, ...], best_by_family: dict, search: dict) -> dict:
    """Per-family figures from compare rows (each with ``scenario``, ``seed``, ``agent`` and one column per
    heuristic): see the module docstring. ``best_by_family`` is the held-in choice per family (``"300"``, ...);
    ``search`` maps ``(scenario, seed)`` to the headroom search's average JCT (for the room share)."""
    out = {}
    for fam in sorted({family_of(r["scenario"]) for r in rows}, key=int):
        best = best_by_family[fam]
        mine = [r for r in rows if family_of(r["scenario"]) == fam]
        agent = [r["agent"] for r in mine]
        means = {h: float(np.mean([r[h] for r in mine])) for h in heuristics}
        best_after = min(means, key=means.get)
        windows = {}
        for sc in dict.fromkeys(r["scenario"] for r in mine):
            w = [r for r in mine if r["scenario"] == sc]
            windows[sc] = {
                "seeds": len(w),
                "ratio": float(np.mean([r["agent"] for r in w]) / np.mean([r[best] for r in w])),
                "agent": float(np.mean([r["agent"] for r in w])),
                best: float(np.mean([r[best] for r in w])),
            }
        shares = []
        for r in mine:
            s = search.get((r["scenario"], r["seed"]))
            if s is not None and r[best] - s > 1e-9 * r[best]:
                shares.append((r[best] - r["agent"], r[best] - s))
        room = None
        if shares:
            gain, room_total = (float(np.sum(x)) for x in zip(*shares, strict=True))
            room = {"share": gain / room_total, "pairs": len(shares)}
        out[fam] = {
            "best_heldin": best,
            "vs_best_heldin": paired_ratio(agent, [r[best] for r in mine]),
            "best_heldout": best_after,
            "vs_best_heldout": paired_ratio(agent, [r[best_after] for r in mine]),
            "agent_mean": float(np.mean(agent)),
            "heuristic_means": means,
            "windows": windows,
            "windows_lost": int(sum(w["ratio"] > 1.0 for w in windows.values())),
            "room": room,
        }
    return out


def search_table(headroom: dict, information: str) -> tuple[dict, dict]:
    """``({family: held-in best heuristic}, {(window, seed): search avg JCT})`` from the headroom data (the search's
    schedule is the best of its rollouts)."""
    best, search = {}, {}
    for fam, f in headroom["families"].items():
        best[fam] = f["best"][information]
        for row in f["rows"]:
            ro = row.get("rollout") or {}
            vals = [v["avg_jct"] for v in ro.values() if isinstance(v, dict) and "avg_jct" in v]
            if vals:
                search[(row["window"], row["seed"])] = min(vals)
    return best, search


def markdown(result: dict) -> str:
    lines = []
    for ck, res in result["checkpoints"].items():
        lines += [f"### {ck}", ""]
        lines += [
            "| family | vs held-in choice | 95% CI | vs best on held-out | 95% CI | windows lost | room share | pairs |",
            "|---|---|---|---|---|---:|---:|---:|",
        ]
        for fam, s in (res.get("summary") or {}).items():
            a, b = s["vs_best_heldin"], s["vs_best_heldout"]
            room = f"{s['room']['share']:.0%} ({s['room']['pairs']} pairs)" if s["room"] else "—"
            lines.append(
                f"| {fam} jobs | {a['ratio']:.3f}× ({s['best_heldin']}) | [{a['ci95'][0]:.3f}, {a['ci95'][1]:.3f}] "
                f"| {b['ratio']:.3f}× ({s['best_heldout']}) | [{b['ci95'][0]:.3f}, {b['ci95'][1]:.3f}] "
                f"| {s['windows_lost']}/{len(s['windows'])} | {room} | {a['pairs']} |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoints", nargs="+", type=Path, help="checkpoint folders (model.pt + meta.json)")
    ap.add_argument("--seeds", default="0-9", help="simulator seeds per window (default 0-9)")
    ap.add_argument("--scenarios", default="", help="comma list of suite scenarios (default: all)")
    ap.add_argument("--workers", type=int, default=1, help="processes (default 1)")
    ap.add_argument("--headroom", type=Path, default=HEADROOM, help="the headroom study's JSON")
    ap.add_argument("--out", type=Path, required=True, help="result JSON (resumed when it exists)")
    a = ap.parse_args(argv)
    try:
        seeds = parse_seeds(a.seeds)
    except ValueError as exc:
        ap.error(str(exc))
    if a.workers < 1:
        ap.error(f"--workers: expected >= 1, got {a.workers}")
    for ck in a.checkpoints:
        if not (ck / "model.pt").is_file() or not (ck / "meta.json").is_file():
            ap.error(f"{ck}: not a checkpoint folder (model.pt and meta.json expected)")
    if not a.headroom.is_file():
        ap.error(f"--headroom: {a.headroom} does not exist (scripts/studies/jobselect_headroom.py writes it)")
    headroom = json.loads(a.headroom.read_text())

    from gpusched_lab.evaluate.compare import information_of, suite_scenarios

    from gpusched_envs.io import atomic_write_text

    names = [n for n, env_id, _ in suite_scenarios(SUITE) if env_id == "gpusched/JobSelect-v1"]
    if a.scenarios:
        only = [s.strip() for s in a.scenarios.split(",") if s.strip()]
        unknown = sorted(set(only) - set(names))
        if unknown:
            ap.error(f"--scenarios: {', '.join(unknown)} not in {SUITE} ({', '.join(names)})")
        names = [n for n in names if n in only]

    result = json.loads(a.out.read_text()) if a.out.is_file() else {}
    result.setdefault("checkpoints", {})
    result.update(
        suite=SUITE,
        seeds=seeds,
        command="python scripts/studies/jobselect_learned.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
    )
    todo = []
    for ck in a.checkpoints:
        meta = json.loads((ck / "meta.json").read_text())
        info = information_of(meta)
        entry = result["checkpoints"].setdefault(str(ck), {})
        digest = checkpoint_digest(ck)
        if entry.get("digest") != digest or entry.get("seeds") != seeds:
            entry.clear()
            entry.update(digest=digest, seeds=seeds, information=info, done={}, steps=meta.get("steps"))
        for sc in names:
            if sc not in entry["done"]:
                todo.append((str(ck), sc, HEURISTICS[info]))

    def save() -> None:
        for entry in result["checkpoints"].values():
            rows = [r for sc in entry["done"].values() for r in sc["rows"]]
            if rows:
                best, search = search_table(headroom, entry["information"])
                entry["summary"] = summarize(rows, HEURISTICS[entry["information"]], best, search)
        atomic_write_text(a.out, json.dumps(result, indent=2) + "\n")

    t0 = time.perf_counter()
    if todo:
        print(f"{len(todo)} (checkpoint, window) runs of {len(seeds)} seeds each", flush=True)

        def done(i: int, ck: str, sc: str, res: dict) -> None:
            result["checkpoints"][ck]["done"][sc] = res
            save()
            print(f"[{i}/{len(todo)}] {ck} {sc} ({time.perf_counter() - t0:.0f} s)", flush=True)

        if a.workers == 1:  # in this process (no pickling: the script also runs when loaded by path)
            for i, (ck, sc, hs) in enumerate(todo, 1):
                done(i, ck, sc, _one(ck, sc, seeds, hs))
        else:
            with ProcessPoolExecutor(max_workers=a.workers) as pool:
                futures = {pool.submit(_one, ck, sc, seeds, hs): (ck, sc) for ck, sc, hs in todo}
                for i, fut in enumerate(as_completed(futures), 1):
                    done(i, *futures[fut], fut.result())
    save()
    print(markdown(result))
    return result


if __name__ == "__main__":
    main()
