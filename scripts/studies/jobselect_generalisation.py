"""Does a learned JobSelect checkpoint carry over, unchanged, to other clusters, loads and window lengths?

One checkpoint runs on a grid of held-out settings (Philly jobs submitted after 2017-11-01 only), each paired per
(window, seed) with the heuristics of its information class as ``train compare`` runs them (non-clairvoyant FIFO,
Tiresias, LAS, Gittins; clairvoyant also SJF, SRTF):

- ``load``: the training cluster ``topdrl`` with 300-job windows at offered load 0.7, 0.8, 0.9, 1.0, 1.1, 1.2;
- ``length``: ``topdrl`` at load 0.9 with 1,000- and 3,000-job windows;
- ``cluster``: ``hetero64`` (64 GPUs of three types; 300-job windows at load 0.9), ``rack16`` (16 racks of two
  8-GPU servers, 256 GPUs: ``scripts/studies/data/rack16.yaml``; 3,000-job windows at load 0.9, since a 300-job
  window never fills it) and ``philly-vc`` (the Philly virtual clusters as separate pools with their quotas, 2,816
  GPUs; 3,000-job windows at the trace's own pace, jobs going to their own VC's pool).

Per cell it reports the agent's mean average JCT ÷ the best heuristic's *on that cell* (chosen after the fact: the
strictest reading) and ÷ LAS, with paired 95% bootstrap intervals over the (window, seed) pairs, and says where the
checkpoint breaks: a cell it cannot run on (the observation layout differs) or where it is worse than the best
heuristic by more than ``--breaks`` (default 10%).

    nice -n 10 python scripts/studies/jobselect_generalisation.py runs/ppo_nc_scale_s0/best --workers 2 \\
        --out docs/data/jobselect_generalisation.json                            # docs/headroom.md
    python scripts/studies/jobselect_generalisation.py checkpoints/ppo_jobselect_gnn_nc --cells load-0.7 \\
        --windows 1 --seeds 0 --out /tmp/gen.json                                 # a minute

Finished (checkpoint, cell) results are kept in the output file as they come, and a rerun resumes from them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from jobselect_learned import HEURISTICS, checkpoint_digest, paired_ratio, parse_seeds  # noqa: E402

RACK16 = HERE / "data" / "rack16.yaml"
# held-out window starts (every job submitted after 2017-11-01); --windows takes the first N
STARTS = ("2017-11-05", "2017-11-17", "2017-11-29")


def cells() -> dict[str, dict]:
    """Cell name → ``{"cluster", "gpus", "jobs", "load"}``."""
    out = {}
    for load in (0.7, 0.8, 0.9, 1.0, 1.1, 1.2):
        out[f"load-{load}"] = {"cluster": "topdrl", "gpus": 32, "jobs": 300, "load": load}
    for jobs in (1000, 3000):
        out[f"length-{jobs}"] = {"cluster": "topdrl", "gpus": 32, "jobs": jobs, "load": 0.9}
    out["cluster-hetero64"] = {"cluster": "hetero64", "gpus": 64, "jobs": 300, "load": 0.9}
    # a 256-GPU cluster needs longer windows to fill up; the VC pools run the trace at its own pace (no rescaling)
    out["cluster-rack16"] = {"cluster": str(RACK16), "gpus": 256, "jobs": 3000, "load": 0.9}
    out["cluster-philly-vc"] = {"cluster": "philly-vc", "gpus": None, "jobs": 3000, "load": None}
    return out


def cell_kwargs(cell: dict, start: str) -> dict:
    spec = f"philly:start={start},jobs={cell['jobs']}"
    if cell["load"] is not None:
        spec += f",load={cell['load']},gpus={cell['gpus']}"
    return {"cluster": cell["cluster"], "workload": spec}


def _one(checkpoint: str, cell: dict, starts: list[str], seeds: list[int], heuristics) -> dict:
    from gpusched_lab.evaluate.compare import compare

    rows, t0 = [], time.perf_counter()
    for start in starts:
        try:
            r = compare(checkpoint, seeds, heuristics=heuristics, env_kwargs=cell_kwargs(cell, start))
        except (
            ValueError
        ) as exc:  # the checkpoint cannot read this env (layout): that is a finding, not a crash
            return {"error": str(exc).strip().splitlines()[-1], "rows": rows}
        for row in r["rows"]:
            rows.append({**row, "scenario": start})
    return {"rows": rows, "seconds": time.perf_counter() - t0}


def summarize_cell(rows: list[dict], heuristics, breaks: float) -> dict:
    agent = [r["agent"] for r in rows]
    means = {h: float(np.mean([r[h] for r in rows])) for h in heuristics}
    best = min(means, key=means.get)
    vs_best = paired_ratio(agent, [r[best] for r in rows])
    return {
        "pairs": len(rows),
        "agent_mean": float(np.mean(agent)),
        "heuristic_means": means,
        "best": best,
        "vs_best": vs_best,
        "vs_las": paired_ratio(agent, [r["las"] for r in rows]),
        "breaks": bool(vs_best["ratio"] > 1.0 + breaks),
    }


def markdown(result: dict) -> str:
    lines = []
    for ck, res in result["checkpoints"].items():
        lines += [f"### {ck}", "", "| cell | vs best on the cell | 95% CI | vs LAS | 95% CI | pairs | |"]
        lines.append("|---|---|---|---|---|---:|---|")
        for name in cells():
            c = res["done"].get(name)
            if c is None:
                continue
            if "error" in c:
                lines.append(f"| {name} | does not run: {c['error']} | | | | | breaks |")
                continue
            s = c["summary"]
            a, b = s["vs_best"], s["vs_las"]
            lines.append(
                f"| {name} | {a['ratio']:.3f}× ({s['best']}) | [{a['ci95'][0]:.3f}, {a['ci95'][1]:.3f}] "
                f"| {b['ratio']:.3f}× | [{b['ci95'][0]:.3f}, {b['ci95'][1]:.3f}] | {s['pairs']} "
                f"| {'breaks' if s['breaks'] else ''} |"
            )
        lines.append("")
    return "\n".join(lines)


def renew_entry(entry: dict, digest: str, seeds: list[int], starts: list[str], info: str) -> list[str]:
    """Start a checkpoint's entry afresh when it was computed for another checkpoint file (its digest), seeds or
    windows; returns the names of the cells it drops (none when it is current)."""
    if entry.get("digest") == digest and entry.get("seeds") == seeds and entry.get("windows") == starts:
        return []
    dropped = sorted(entry.get("done", {}))
    entry.clear()
    entry.update(digest=digest, seeds=seeds, windows=starts, information=info, done={})
    return dropped


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoints", nargs="+", type=Path, help="checkpoint folders (model.pt + meta.json)")
    ap.add_argument("--cells", default="", help=f"comma list of cells (default: all: {', '.join(cells())})")
    ap.add_argument("--windows", type=int, default=len(STARTS), help=f"windows per cell (1-{len(STARTS)})")
    ap.add_argument("--seeds", default="0-2", help="simulator seeds per window (default 0-2)")
    ap.add_argument(
        "--breaks", type=float, default=0.10, help="worse than the best heuristic by more: breaks"
    )
    ap.add_argument("--workers", type=int, default=1, help="processes (default 1)")
    ap.add_argument("--out", type=Path, required=True, help="result JSON (resumed when it exists)")
    a = ap.parse_args(argv)
    try:
        seeds = parse_seeds(a.seeds)
    except ValueError as exc:
        ap.error(str(exc))
    if not 1 <= a.windows <= len(STARTS):
        ap.error(f"--windows: expected 1-{len(STARTS)}, got {a.windows}")
    if a.workers < 1:
        ap.error(f"--workers: expected >= 1, got {a.workers}")
    if not a.breaks >= 0:
        ap.error(f"--breaks: expected a fraction >= 0, got {a.breaks}")
    grid = cells()
    names = list(grid)
    if a.cells:
        names = [c.strip() for c in a.cells.split(",") if c.strip()]
        unknown = sorted(set(names) - set(grid))
        if unknown:
            ap.error(f"--cells: {', '.join(unknown)} unknown (cells: {', '.join(grid)})")
    for ck in a.checkpoints:
        if not (ck / "model.pt").is_file() or not (ck / "meta.json").is_file():
            ap.error(f"{ck}: not a checkpoint folder (model.pt and meta.json expected)")

    from gpusched_lab.evaluate.compare import information_of

    from gpusched_envs.io import atomic_write_text

    starts = list(STARTS[: a.windows])
    result = json.loads(a.out.read_text()) if a.out.is_file() else {}
    result.setdefault("checkpoints", {})
    result.update(
        seeds=seeds,
        windows=starts,
        breaks=a.breaks,
        command="python scripts/studies/jobselect_generalisation.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
    )
    todo = []
    for ck in a.checkpoints:
        info = information_of(json.loads((ck / "meta.json").read_text()))
        entry = result["checkpoints"].setdefault(str(ck), {})
        dropped = renew_entry(entry, checkpoint_digest(ck), seeds, starts, info)
        if dropped:
            print(
                f"{ck}: {a.out} holds {len(dropped)} cells ({', '.join(dropped)}) of another checkpoint file, seeds "
                "or windows: they are dropped and computed again when asked for",
                flush=True,
            )
        todo += [(str(ck), n, HEURISTICS[info]) for n in names if n not in entry["done"]]

    t0 = time.perf_counter()

    def done(i: int, ck: str, name: str, res: dict) -> None:
        if "error" not in res:
            res["summary"] = summarize_cell(
                res["rows"], HEURISTICS[result["checkpoints"][ck]["information"]], a.breaks
            )
        result["checkpoints"][ck]["done"][name] = res
        atomic_write_text(a.out, json.dumps(result, indent=2) + "\n")
        print(f"[{i}/{len(todo)}] {ck} {name} ({time.perf_counter() - t0:.0f} s)", flush=True)

    if todo:
        print(
            f"{len(todo)} (checkpoint, cell) runs of {len(starts)} windows x {len(seeds)} seeds", flush=True
        )
    if a.workers == 1:
        for i, (ck, name, hs) in enumerate(todo, 1):
            done(i, ck, name, _one(ck, grid[name], starts, seeds, hs))
    else:
        with ProcessPoolExecutor(max_workers=a.workers) as pool:
            futures = {pool.submit(_one, ck, grid[n], starts, seeds, hs): (ck, n) for ck, n, hs in todo}
            for i, fut in enumerate(as_completed(futures), 1):
                done(i, *futures[fut], fut.result())
    atomic_write_text(a.out, json.dumps(result, indent=2) + "\n")
    print(markdown(result))
    return result


if __name__ == "__main__":
    main()
