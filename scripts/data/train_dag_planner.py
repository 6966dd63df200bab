"""Train the DAG plan generators shipped in checkpoints/ (WORL-RTGS): DDQN (the plan generator) or
MaskablePPO (the PPO-GNN list-scheduler baseline) on ``gpusched/DAGSchedule-v1`` in construct mode with graph
observations, across DAG families (random layered at CCR 0.1 / 1 / 10, Alibaba-like, TPC-H, PipeDream pipeline
training DAGs), then score the greedy policy on held-out DAG seeds against HEFT and write the checkpoint.

Usage::

    OMP_NUM_THREADS=1 python scripts/data/train_dag_planner.py --algo ddqn --steps 8000 --out checkpoints/ddqn_dagschedule_gnn
    OMP_NUM_THREADS=1 python scripts/data/train_dag_planner.py --algo ppo --steps 8000 --out checkpoints/ppo_dagschedule_gnn
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gpusched_lab.agents.checkpoint import save  # noqa: E402
from gpusched_lab.agents.common import make_env  # noqa: E402
from gpusched_lab.agents.nets.networks import config_for_env  # noqa: E402

ENV_ID = "gpusched/DAGSchedule-v1"
TRAIN_DAGS = [
    "dag:random:n=20,ccr=0.1",
    "dag:random:n=20,ccr=1.0",
    "dag:random:n=20,ccr=10.0",
    "dag:random:n=30,ccr=1.0",
    "dag:alibaba:n=20,ccr=1.0",
    "dag:tpch:q=9,ccr=1.0",
    "dag:pipedream:model=vgg16,mode=pipeline,gpus=4",
]
ENV_KWARGS = {
    "cluster": "hetero64",
    "gpus": 8,
    "dag": TRAIN_DAGS,
    "mode": "construct",
    "ccr_at": "gpus",  # the CCR holds on the 8 GPUs' links (as in gpusched dag-bench), not at 10 GB/s
    "max_tasks": 36,
}
EVAL_SEEDS = list(range(10_000, 10_020))  # held out: training episodes draw from the env's own seed stream


def evaluate(act_batch, env_kwargs: dict) -> dict:
    """Greedy makespan on held-out DAG draws, and the same DAGs' HEFT makespan (paired)."""
    from gpusched_envs.policies.dag import heft_schedule

    ratios, mine, hefts = [], [], []
    for seed in EVAL_SEEDS:
        env = make_env(ENV_ID, env_kwargs, "graph")
        obs, _ = env.reset(seed=seed)
        while True:
            obs, _, term, trunc, info = env.step(int(act_batch({k: v[None] for k, v in obs.items()})[0]))
            if term or trunc:
                break
        u = env.unwrapped
        h = heft_schedule(u.dag, u.speed, u.bandwidth, gpu_types=u.gpu_types).makespan
        mine.append(info["makespan"])
        hefts.append(h)
        ratios.append(info["makespan"] / h)
    return {
        "seeds": EVAL_SEEDS,
        "makespan_mean": float(np.mean(mine)),
        "heft_makespan_mean": float(np.mean(hefts)),
        "ratio_to_heft_mean": float(np.mean(ratios)),
        "ratio_to_heft_per_seed": [float(r) for r in ratios],
        "note": "held-out DAG draws (env reset seeds 10000-10019); ratio < 1 = shorter than HEFT",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--algo", choices=("ddqn", "ppo"), default="ddqn")
    ap.add_argument("--steps", type=int, default=8000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    t0 = time.time()
    command = "python " + " ".join(shlex.quote(a) for a in sys.argv)
    env_kwargs = dict(ENV_KWARGS)
    if args.algo == "ddqn":
        from gpusched_lab.agents.algos.ddqn import DDQN, DDQNArgs

        dargs = DDQNArgs(
            encoder="gnn",
            hidden=64,
            layers=1,
            learning_rate=5e-4,
            buffer_size=5000,
            batch_size=32,
            n_step=3,
            target_update_interval=500,
            exploration_fraction=0.3,
            end_epsilon=0.05,
            learning_starts=500,
            train_frequency=4,
            seed=args.seed,
        )
        envs = [make_env(ENV_ID, env_kwargs, "graph") for _ in range(2)]
        algo = DDQN(dargs, envs, total_steps=args.steps)
        last = time.time()

        def progress(a) -> None:
            nonlocal last
            if time.time() - last > 30:
                last = time.time()
                eps = a.finished_episodes[-20:]
                ret = np.mean([e["return"] for e in eps]) if eps else float("nan")
                print(
                    f"step {a.global_step} eps {a.epsilon:.2f} loss {a.last_loss:.4f} return {ret:.3f}",
                    flush=True,
                )

        algo.learn(args.steps, callback=progress)
        module, cfg, policy, arg_dict = algo.q, algo.net_config, "q", dargs.to_dict()
        ev = evaluate(algo.greedy, env_kwargs)
    else:
        from gpusched_lab.agents.algos.ppo import PPOArgs, make_ppo
        from gpusched_lab.agents.checkpoint import PPOPolicy
        from gpusched_lab.agents.nets.networks import masked, obs_to_tensors

        pargs = PPOArgs(encoder="gnn", n_steps=256, batch_size=64, n_epochs=4, ent_coef=0.01, seed=args.seed)
        env = make_env(ENV_ID, env_kwargs, "graph")
        cfg = config_for_env(env, "gnn", pargs.hidden, pargs.layers)
        model = make_ppo(env, cfg, pargs)
        model.learn(args.steps)
        module, policy, arg_dict = PPOPolicy.from_sb3(model, cfg).eval(), "logits", pargs.to_dict()

        def act_batch(obs):
            with torch.no_grad():
                t = obs_to_tensors(obs, "cpu", batched=True)
                return masked(module(t), t["action_mask"]).argmax(-1).numpy()

        ev = evaluate(act_batch, env_kwargs)
    ev["train_seconds"] = round(time.time() - t0, 1)
    ev["machine"] = f"{os.cpu_count()}-CPU {platform.machine()} {platform.system()} machine"
    save(
        args.out,
        module,
        algorithm=args.algo,
        policy=policy,
        env_id=ENV_ID,
        env_kwargs=env_kwargs,
        obs_mode="graph",
        network=cfg,
        steps=args.steps,
        seed=args.seed,
        command=command,
        evaluation=ev,
        args=arg_dict,
    )
    print(
        f"{args.algo}: {args.steps} steps in {ev['train_seconds']} s; held-out makespan / HEFT = "
        f"{ev['ratio_to_heft_mean']:.3f} -> {args.out}",
        flush=True,
    )


if __name__ == "__main__":
    main()
