"""Training samples per second on a CUDA machine, beside its CPU, with the GPU's utilisation sampled throughout.

    python scripts/studies/gpu_training_check.py --out gpu.json [--steps 2048]

Measures, in one process: PPO-GNN and DDQN-GNN training (``gpusched_lab.agents.bench.training_samples_per_second``,
the benchmark's shipped hyperparameters) on ``cuda`` with 8 and 64 envs and on ``cpu`` with 8; a batched GNN forward and
forward + backward on both devices; then a short ``gpusched train ppo --device cuda`` run that must write its
checkpoint. ``nvidia-smi`` is polled every 200 ms in the background; the JSON keeps each figure's mean and peak GPU
utilisation and memory. Figures that fail are recorded with their error, never dropped.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path


class GpuSampler:
    """``nvidia-smi`` utilisation and memory samples, taken every ``period`` seconds on a thread."""

    def __init__(self, period: float = 0.2):
        self.period, self.samples, self._stop = period, [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        query = ["nvidia-smi", "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits"]
        while not self._stop.is_set():
            try:
                line = subprocess.run(query, capture_output=True, text=True, timeout=5).stdout.strip()
                util, mem = (float(x) for x in line.splitlines()[0].split(","))
                self.samples.append((time.perf_counter(), util, mem))
            except (OSError, ValueError, IndexError, subprocess.SubprocessError):
                pass
            self._stop.wait(self.period)

    def start(self) -> GpuSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def between(self, t0: float, t1: float) -> dict:
        inside = [(u, m) for t, u, m in self.samples if t0 <= t <= t1]
        if not inside:
            return {"gpu_util_mean": None, "gpu_util_max": None, "gpu_mem_mib_max": None, "samples": 0}
        utils = [u for u, _ in inside]
        return {
            "gpu_util_mean": sum(utils) / len(utils),
            "gpu_util_max": max(utils),
            "gpu_mem_mib_max": max(m for _, m in inside),
            "samples": len(inside),
        }


def forward_timings(device: str, batch: int = 256, rounds: int = 20) -> dict:
    """ms per batched GNN forward (no autograd) and per forward + backward, on ``device``."""
    import numpy as np
    import torch
    from gpusched_lab.agents.bench import DEFAULT_ENV, DEFAULT_ENV_KWARGS
    from gpusched_lab.agents.common import make_env
    from gpusched_lab.agents.nets.networks import build_network, config_for_env, obs_to_tensors

    env = make_env(DEFAULT_ENV, dict(DEFAULT_ENV_KWARGS), "graph")
    obs, _ = env.reset(seed=0)
    seen = []
    while len(seen) < batch:
        obs, _, terminated, truncated, _ = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
        seen.append(obs)
        if terminated or truncated:
            obs, _ = env.reset(seed=len(seen))
    many = obs_to_tensors({k: np.stack([o[k] for o in seen]) for k in seen[0]}, device, batched=True)
    torch.manual_seed(0)
    net = build_network(config_for_env(env, "gnn", 64, 1), env.observation_space, "dense").to(device)

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    with torch.no_grad():
        for _ in range(3):
            net(many)
        sync()
        t0 = time.perf_counter()
        for _ in range(rounds):
            net(many)
        sync()
        fwd = (time.perf_counter() - t0) / rounds * 1e3
    for _ in range(2):
        net(many).square().mean().backward()
    sync()
    t0 = time.perf_counter()
    for _ in range(rounds):
        net(many).square().mean().backward()
    sync()
    upd = (time.perf_counter() - t0) / rounds * 1e3
    return {"batch": batch, "forward_ms": fwd, "forward_backward_ms": upd}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=2048)
    ns = parser.parse_args()
    import torch
    from gpusched_lab.agents.bench import machine, training_samples_per_second

    record: dict = {
        "torch": torch.__version__,
        "cuda_available": torch.cuda.is_available(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "machine": machine(),
        "figures": [],
    }
    try:
        smi = subprocess.run(["nvidia-smi"], capture_output=True, text=True, check=False).stdout
    except OSError:
        smi = "nvidia-smi not found"
    record["nvidia_smi"] = smi
    print(smi, flush=True)
    sampler = GpuSampler().start()

    def save() -> None:
        tmp = ns.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=1))
        os.replace(tmp, ns.out)

    plan = [("forward", "cuda", 0), ("ppo", "cuda", 8), ("ppo", "cuda", 64), ("ddqn", "cuda", 8)]
    plan += [("forward", "cpu", 0), ("ppo", "cpu", 8), ("ddqn", "cpu", 8)]  # the same machine's CPU, beside
    for what, device, num_envs in plan:
        if device == "cuda" and not torch.cuda.is_available():
            continue
        t0 = time.perf_counter()
        try:
            if what == "forward":
                fig = {"name": f"gnn_batch_forward_{device}", **forward_timings(device)}
            else:
                rec = training_samples_per_second(
                    what, "gnn", steps=ns.steps, device=device, num_envs=num_envs
                )
                fig = {"name": rec["name"] + f"_{device}", "samples_per_s": rec["value"], **rec["detail"]}
        except Exception as exc:  # record and go on: one failing figure must not lose the others
            fig = {
                "name": f"{what}_{device}_{num_envs}",
                "error": f"{exc!r}",
                "trace": traceback.format_exc(),
            }
        t1 = time.perf_counter()
        fig.update(wall_s=t1 - t0, **sampler.between(t0, t1))
        record["figures"].append(fig)
        print(json.dumps({k: v for k, v in fig.items() if k not in ("trace", "machine")}), flush=True)
        save()

    if torch.cuda.is_available():  # the training command end to end on CUDA: it must write its checkpoint
        with tempfile.TemporaryDirectory() as run_dir:
            t0 = time.perf_counter()
            cmd = [sys.executable, "-m", "gpusched_lab.train", "ppo", "--device", "cuda", "--steps", "1024"]
            cmd += ["--out", run_dir, "--no-progress", "--set", "eval_every=0"]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            t1 = time.perf_counter()
            files = sorted(str(p.relative_to(run_dir)) for p in Path(run_dir).rglob("*") if p.is_file())
            record["train_cli_cuda"] = {
                "command": " ".join(cmd[1:]),
                "returncode": proc.returncode,
                "wall_s": t1 - t0,
                "files": files,
                "output_tail": (proc.stdout + proc.stderr)[-3000:],
                **sampler.between(t0, t1),
            }
            print(
                json.dumps({k: v for k, v in record["train_cli_cuda"].items() if k != "output_tail"}),
                flush=True,
            )
            print(record["train_cli_cuda"]["output_tail"][-1500:], flush=True)
    sampler.stop()
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
