"""How much of a GNN checkpoint's episode is the network, per GNN implementation.

    python scripts/studies/gnn_episode_timing.py checkpoints/ppo_jobselect_gnn_nc --impls dense,pyg,scatter \\
        --workload "philly:jobs=300,load=0.9,gpus=32" --seed 0 [--out timing.json]

Plays one episode of the checkpoint's own env (``env_kwargs`` overridden by ``--workload`` when given: the default
is the `make run` quick suite's ``topdrl-philly`` scenario) with each implementation of the encoder in turn, in one
process, and prints the CPU and wall seconds of the episode and of ``agent.act`` (the policy), and whether every
implementation took the same actions.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint", type=Path)
    ap.add_argument("--impls", default="dense,pyg", help="comma-separated: dense, scatter, pyg")
    ap.add_argument(
        "--workload", default="philly:jobs=300,load=0.9,gpus=32", help="'' keeps the checkpoint's"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None, help="write the figures (and actions) as JSON here")
    a = ap.parse_args(argv)
    import torch
    from gpusched_lab import agents
    from gpusched_lab.agents.nets.networks import GNN_IMPLS, GraphEncoder

    from gpusched_envs.io import atomic_write_text

    impls = [i.strip() for i in a.impls.split(",") if i.strip()]
    bad = [i for i in impls if i not in GNN_IMPLS]
    if bad:
        print(f"error: --impls: unknown {', '.join(bad)} (one of {', '.join(GNN_IMPLS)})", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    try:
        agent = agents.load(a.checkpoint)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    encoders = [m for m in agent.module.modules() if isinstance(m, GraphEncoder)]
    if not encoders:
        print(f"error: {a.checkpoint}: not a GNN checkpoint", file=sys.stderr)
        return 2
    env = agent.make_env(**({"workload": a.workload} if a.workload else {}))
    results = {}
    for impl in impls:
        for m in encoders:
            m.impl = impl
        obs, _ = env.reset(seed=a.seed)
        actions, pol_wall, pol_cpu = [], 0.0, 0.0
        t0, c0 = time.perf_counter(), time.process_time()
        while True:
            w, c = time.perf_counter(), time.process_time()
            act = agent.act(obs)
            pol_wall += time.perf_counter() - w
            pol_cpu += time.process_time() - c
            actions.append(act)
            obs, _, terminated, truncated, info = env.step(act)
            if terminated or truncated:
                break
        results[impl] = {
            "decisions": len(actions),
            "episode_cpu_s": time.process_time() - c0,
            "episode_wall_s": time.perf_counter() - t0,
            "policy_cpu_s": pol_cpu,
            "policy_wall_s": pol_wall,
            "avg_jct": info.get("metrics", {}).get("avg_jct"),
            "load_average_1min": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
            "actions": actions,
        }
        shown = {
            k: round(v, 3) if isinstance(v, float) else v for k, v in results[impl].items() if k != "actions"
        }
        print(impl, shown, flush=True)
    same = all(r["actions"] == results[impls[0]]["actions"] for r in results.values())
    print("same actions:", same)
    if a.out is not None:
        atomic_write_text(a.out, json.dumps({"same_actions": same, "results": results}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
