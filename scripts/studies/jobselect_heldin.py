"""A JobSelect checkpoint against the heuristics on a training config's held-in windows, next to the held-out reading.

A training config chooses its checkpoint on held-in windows (``eval_choices``: Philly windows submitted before
2017-11-01 that no training window shares a job with). This runs one or more checkpoints and the preemptive
non-clairvoyant heuristics acting through the checkpoint's own env (``NAME@env``: same window, lease and
scheduling rounds) on those windows, with the seeds given, and prints average JCT per window and each checkpoint's
mean ratio to every heuristic. Read beside :mod:`jobselect_learned` (the held-out windows), it says whether what
a run learned on its own period carries over to another.

    nice -n 10 python scripts/studies/jobselect_heldin.py runs/ppo_nc_scale_s0/best checkpoints/ppo_jobselect_gnn_nc \\
        --config ppo_jobselect_gnn_nc_scale --seeds 0 --out heldin.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from jobselect_learned import parse_seeds  # noqa: E402

HEURISTICS = ("las", "gittins", "tiresias")


def windows_of(config: str) -> list[dict]:
    """The held-in windows (``eval_choices``) of a training config (a path or a name in ``train/configs``), each
    with ``num_jobs`` set from its ``jobs=``."""
    from gpusched_lab.train.config import load_yaml

    doc = load_yaml(config)
    out = []
    for choice in doc.get("eval_choices") or []:
        spec = choice.get("workload", "")
        m = re.search(r"jobs=(\d+)", spec)
        out.append({**choice, **({"num_jobs": int(m.group(1))} if m else {})})
    if not out:
        raise SystemExit(f"--config {config}: the config has no eval_choices (held-in windows)")
    return out


def run(checkpoints: list[str], windows: list[dict], seeds: list[int], heuristics=HEURISTICS) -> dict:
    from gpusched_lab import agents
    from gpusched_lab.agents.common import run_episode
    from gpusched_lab.evaluate.compare import heuristic_in_env_jct, information_of

    from gpusched_envs.policies import CLAIRVOYANT_POLICIES

    loaded = {ck: agents.load(ck) for ck in checkpoints}
    # the heuristics act through the last checkpoint's env (they read no agent features); a clairvoyant heuristic
    # needs an env that shows durations: the last clairvoyant checkpoint's
    host = checkpoints[-1]
    if any(h in CLAIRVOYANT_POLICIES for h in heuristics):
        seeing = [ck for ck in checkpoints if information_of(loaded[ck].meta) == "clairvoyant"]
        if not seeing:
            raise SystemExit(
                "--heuristics: "
                + ", ".join(h for h in heuristics if h in CLAIRVOYANT_POLICIES)
                + " read traced durations; give a clairvoyant checkpoint too (its env hosts them)"
            )
        host = seeing[-1]
    rows = []
    for w in windows:
        envs = {ck: agent.make_env(**w) for ck, agent in loaded.items()}
        for seed in seeds:
            row = {"window": w["workload"], "seed": seed}
            for ck, agent in loaded.items():
                row[ck] = float(run_episode(agent.act, envs[ck], seed)["metrics"]["avg_jct"])
            for h in heuristics:
                row[f"{h}@env"] = heuristic_in_env_jct(envs[host], h, "closest", seed)
            rows.append(row)
            print(json.dumps(row), flush=True)
    ratios = {
        ck: {
            h: float(np.mean([r[ck] for r in rows]) / np.mean([r[f"{h}@env"] for r in rows]))
            for h in heuristics
        }
        for ck in checkpoints
    }
    return {"rows": rows, "mean_ratio": ratios, "heuristics": list(heuristics)}


def markdown(result: dict, checkpoints: list[str]) -> str:
    cols = [*checkpoints, *(f"{h}@env" for h in result.get("heuristics", HEURISTICS))]
    lines = [
        "| window | seed | " + " | ".join(f"`{c}`" for c in cols) + " |",
        "|---|---:|" + "---:|" * len(cols),
    ]
    for r in result["rows"]:
        lines.append(f"| {r['window']} | {r['seed']} | " + " | ".join(f"{r[c]:,.0f}" for c in cols) + " |")
    for ck in checkpoints:
        parts = ", ".join(f"{v:.3f}× {h}" for h, v in result["mean_ratio"][ck].items())
        lines.append(f"\n`{ck}`: mean average JCT {parts}")
    return "\n".join(lines)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoints", nargs="+", help="checkpoint folders (model.pt + meta.json)")
    ap.add_argument("--config", required=True, help="the training config whose eval_choices are the windows")
    ap.add_argument(
        "--seeds", default="0", help="simulator seeds per window (default 0, as training evaluates)"
    )
    ap.add_argument(
        "--heuristics",
        default=",".join(HEURISTICS),
        help=f"comma-separated heuristics acting through the checkpoint's env (default {','.join(HEURISTICS)}; "
        "e.g. add srtf,sjf for a clairvoyant checkpoint)",
    )
    ap.add_argument("--out", type=Path, default=None, help="result JSON")
    args = ap.parse_args(argv)
    from gpusched_envs.policies import POLICIES

    heuristics = tuple(h.strip() for h in args.heuristics.split(",") if h.strip())
    unknown = [h for h in heuristics if h not in POLICIES]
    if not heuristics or unknown:
        raise SystemExit(
            f"--heuristics: unknown {', '.join(unknown) or '(none given)'}; valid: {', '.join(POLICIES)}"
        )
    for ck in args.checkpoints:
        if not (Path(ck) / "meta.json").is_file():
            raise SystemExit(f"{ck}: not a checkpoint folder (no meta.json)")
    result = run(args.checkpoints, windows_of(args.config), parse_seeds(args.seeds), heuristics)
    result["command"] = "python scripts/studies/jobselect_heldin.py " + " ".join(argv or sys.argv[1:])
    print(markdown(result, args.checkpoints))
    if args.out is not None:
        from gpusched_envs.io import atomic_write_text

        atomic_write_text(args.out, json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
