"""Training speed of the learning agents (for ``gpusched bench``): env samples per second while training, learning
included, on the CPU by default.

    from gpusched_lab.agents.bench import training_samples_per_second, training_benchmarks
    training_samples_per_second("ppo", "gnn", steps=2000)      # one figure, in gpusched bench's record format
    training_benchmarks(quick=True)                              # DDQN and PPO × GNN / CNN / MLP

The GNN is measured with each implementation in the same run, alternately round by round: the ``torch_geometric``
reference (``gnn_impl="pyg"``, the first encoder), the per-forward scatter one and the default dense one,
so the speed-ups are read off figures taken under the same machine load; ``speedup`` records give the ratios. Every
record names the machine and its load average (a shared machine's wall clock counts the other jobs too, so each
record also gives samples per second of this process's own CPU time).
"""

from __future__ import annotations

import os
import platform
import time

from gpusched_lab.agents.common import make_env, make_vec_env, make_vector_env
from gpusched_lab.agents.nets.networks import OBS_MODE_OF_ENCODER

DEFAULT_ENV = "gpusched/JobSelect-v1"
DEFAULT_ENV_KWARGS = {"cluster": "topdrl", "reward": "jct", "num_jobs": 400, "load": 0.9}
GNN_BENCH_IMPLS = ("pyg", "scatter", "dense")  # the first encoder, its first fast version, the default


def machine() -> dict:
    """The machine a figure was taken on: CPU model and count, torch threads, and the load average now."""
    import torch

    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), model)
    except OSError:
        pass
    return {
        "cpu": model,
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_average_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }


def training_samples_per_second(
    algorithm: str = "ddqn",
    encoder: str = "gnn",
    steps: int = 2000,
    env_id: str = DEFAULT_ENV,
    env_kwargs: dict | None = None,
    device: str = "cpu",
    seed: int = 0,
    gnn_impl: str = "dense",
    num_envs: int = 1,
) -> dict:
    """Env steps per second of ``algorithm`` (``"ddqn"`` | ``"ppo"``) training with ``encoder`` for ``steps`` steps
    after a short warm-up (DDQN: one gradient step of batch 64 every 4 env steps; PPO: rollouts of 256 per env, 4
    epochs of minibatch 64). ``num_envs > 1``: the native vector env (DDQN steps it directly, PPO through
    :func:`agents.common.make_vec_env`). Returns ``{"name", "value", "unit", "target", "meets", "detail"}``; PPO's
    detail splits the CPU time between rollout collection and the update (``rollout_cpu_seconds``,
    ``update_cpu_seconds``)."""
    kwargs = dict(DEFAULT_ENV_KWARGS if env_kwargs is None else env_kwargs)
    mode = OBS_MODE_OF_ENCODER[encoder]
    load_before = machine()["load_average_1min"]
    if algorithm == "ddqn":
        from gpusched_lab.agents.algos.ddqn import DDQN, DDQNArgs

        warmup = 300
        args = DDQNArgs(
            encoder=encoder,
            device=device,
            seed=seed,
            learning_starts=warmup // 2,
            buffer_size=steps + warmup,
            gnn_impl=gnn_impl,
        )
        if num_envs > 1:  # one vector env, stepped in one call
            envs = make_vector_env(env_id, kwargs, mode, num_envs)
        else:
            envs = [make_env(env_id, kwargs, mode)]
        algo = DDQN(args, envs, total_steps=steps + warmup)
        algo.learn(warmup)
        t0, c0 = time.perf_counter(), time.process_time()
        algo.learn(warmup + steps)
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
        done = algo.global_step - warmup
    elif algorithm == "ppo":
        from gpusched_lab.agents.algos.ppo import PPOArgs, make_ppo
        from gpusched_lab.agents.nets.networks import config_for_env

        env = make_env(env_id, kwargs, mode)
        venv = make_vec_env(env_id, kwargs, mode, num_envs) if num_envs > 1 else env
        args = PPOArgs(
            encoder=encoder,
            device=device,
            seed=seed,
            n_steps=256,
            batch_size=64,
            n_epochs=4,
            gnn_impl=gnn_impl,
        )
        model = make_ppo(venv, config_for_env(env, encoder, args.hidden, args.layers), args)
        model.learn(256)  # warm-up: one rollout (256 steps per env) and its update
        split = {"collect_rollouts": 0.0, "train": 0.0}
        for name in split:  # the CPU time of each part, on this model only
            setattr(model, name, _cpu_timed(getattr(model, name), split, name))
        start = model.num_timesteps
        t0, c0 = time.perf_counter(), time.process_time()
        model.learn(steps, reset_num_timesteps=False)
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
        done = model.num_timesteps - start
        for name in split:
            delattr(model, name)
        extra = {"rollout_cpu_seconds": split["collect_rollouts"], "update_cpu_seconds": split["train"]}
    else:
        raise ValueError(f"algorithm must be 'ddqn' or 'ppo', got {algorithm!r}")
    extra = extra if algorithm == "ppo" else {}
    impl = (f"_{gnn_impl}" if encoder == "gnn" else "") + (f"_{num_envs}envs" if num_envs > 1 else "")
    return {
        "name": f"train_{algorithm}_{encoder}{impl}",
        "value": done / elapsed,
        "unit": "samples/s",
        "target": "",
        "meets": None,
        "detail": {
            "env": env_id,
            "env_kwargs": kwargs,
            "steps": done,
            "seconds": elapsed,
            "cpu_seconds": cpu,
            # samples per second of this process's CPU time: on a shared machine, wall time counts other jobs too
            "samples_per_cpu_second": done / max(cpu, 1e-9),
            "device": device,
            "num_envs": num_envs,
            "gnn_impl": gnn_impl if encoder == "gnn" else None,
            **extra,
            "machine": {**machine(), "load_average_1min_before": load_before},
        },
    }


def _cpu_timed(fn, totals: dict, name: str):
    """``fn`` that adds the CPU seconds of each call to ``totals[name]``."""

    def timed(*args, **kwargs):
        c = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            totals[name] += time.process_time() - c

    return timed


def rollout_samples_per_second(
    encoder: str = "gnn",
    num_envs: int = 8,
    steps: int = 2048,
    device: str = "cpu",
    env_id: str = DEFAULT_ENV,
    env_kwargs: dict | None = None,
    seed: int = 0,
) -> dict:
    """PPO's rollout collection alone (``MaskablePPO.collect_rollouts`` on :func:`agents.common.make_vec_env` with
    ``num_envs`` copies; the shipped hyperparameters): about ``steps`` samples (at least 8 steps per env, at most
    the rollout length of 256), after a warm-up of 8 steps per env. ``value`` is samples per CPU-second of this
    process; the detail gives wall-clock samples per second too."""
    from gpusched_lab.agents.algos.ppo import PPOArgs, make_ppo
    from gpusched_lab.agents.nets.networks import config_for_env

    kwargs = dict(DEFAULT_ENV_KWARGS if env_kwargs is None else env_kwargs)
    mode = OBS_MODE_OF_ENCODER[encoder]
    load_before = machine()["load_average_1min"]
    venv = make_vec_env(env_id, kwargs, mode, num_envs)
    args = PPOArgs(encoder=encoder, device=device, seed=seed, n_steps=256, batch_size=64, n_epochs=4)
    model = make_ppo(
        venv, config_for_env(make_env(env_id, kwargs, mode), encoder, args.hidden, args.layers), args
    )
    _, callback = model._setup_learn(10**9, None)
    callback.on_training_start(locals(), globals())
    per_env = min(model.n_steps, max(8, steps // num_envs))
    model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=8)  # warm
    t0, c0 = time.perf_counter(), time.process_time()
    model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=per_env)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    venv.close()
    done = per_env * num_envs
    return {
        "name": f"rollout_ppo_{encoder}_{num_envs}envs",
        "value": done / max(cpu, 1e-9),
        "unit": "samples/CPU-s",
        "target": "",
        "meets": None,
        "detail": {
            "env": env_id,
            "env_kwargs": kwargs,
            "samples": done,
            "seconds": elapsed,
            "cpu_seconds": cpu,
            "samples_per_second": done / max(elapsed, 1e-9),
            "device": str(model.device),
            "num_envs": num_envs,
            "machine": {**machine(), "load_average_1min_before": load_before},
        },
    }


def encoder_timings(
    impls: tuple[str, ...] = GNN_BENCH_IMPLS,
    rounds: int = 5,
    env_id: str = DEFAULT_ENV,
    env_kwargs: dict | None = None,
    layers: int = 1,
    batch: int = 64,
) -> list[dict]:
    """The GNN alone, each implementation alternately for ``rounds`` rounds (same parameters, observations of the
    benchmark env): ms of CPU time per batch-1 forward without autograd (a rollout step) and per forward + backward
    of a batch of ``batch`` (an update's minibatch); the medians, as ``gpusched bench`` records."""
    import numpy as np
    import torch
    from gpusched_lab.agents.nets.networks import build_network, config_for_env, obs_to_tensors

    env = make_env(env_id, dict(DEFAULT_ENV_KWARGS if env_kwargs is None else env_kwargs), "graph")
    obs, _ = env.reset(seed=0)
    seen = []
    while len(seen) < batch:
        obs, _, terminated, truncated, _ = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
        seen.append(obs)
        if terminated or truncated:
            obs, _ = env.reset(seed=len(seen))
    one = obs_to_tensors(seen[0])
    many = obs_to_tensors({k: np.stack([o[k] for o in seen]) for k in seen[0]}, batched=True)
    cfg = config_for_env(env, "gnn", 64, layers)
    torch.manual_seed(0)
    nets = {impl: build_network(cfg, env.observation_space, impl) for impl in impls}
    for net in nets.values():
        net.load_state_dict(nets[impls[0]].state_dict())
    fwd: dict[str, list[float]] = {impl: [] for impl in impls}
    upd: dict[str, list[float]] = {impl: [] for impl in impls}
    for _ in range(max(1, rounds)):
        for impl, net in nets.items():
            with torch.no_grad():
                net(one)  # warm (builds the dense tree once)
                c = time.process_time()
                for _ in range(20):
                    net(one)
                fwd[impl].append((time.process_time() - c) / 20 * 1e3)
            c = time.process_time()
            for _ in range(2):
                net(many).square().mean().backward()
            upd[impl].append((time.process_time() - c) / 2 * 1e3)
    out = []
    for impl in impls:
        for name, values, what in (
            ("forward_1", fwd[impl], "batch-1 forward, no autograd"),
            (f"forward_backward_{batch}", upd[impl], f"forward + backward, batch {batch}"),
        ):
            out.append(
                {
                    "name": f"gnn_{name}_{impl}",
                    "value": median(values),
                    "unit": "ms CPU",
                    "target": "",
                    "meets": None,
                    "detail": {"what": what, "rounds": values, "layers": layers, "machine": machine()},
                }
            )
    return out


def median(values: list[float]) -> float:
    v = sorted(values)
    return v[len(v) // 2] if len(v) % 2 else 0.5 * (v[len(v) // 2 - 1] + v[len(v) // 2])


def training_benchmarks(
    quick: bool = False,
    encoders: tuple[str, ...] = ("gnn", "cnn", "mlp"),
    rounds: int | None = None,
    impls: tuple[str, ...] = GNN_BENCH_IMPLS,
    vector_envs: int | None = None,
    steps: int | None = None,
) -> list[dict]:
    """:func:`training_samples_per_second` for DDQN and PPO with each encoder (``quick``: 300 steps each). The GNN is
    measured with each implementation of ``impls`` (``pyg`` first, the default ``dense`` last)
    alternately for ``rounds`` rounds, so a change of machine load hits all; the records give the medians, and a
    ``speedup`` record the ratio of the last to the first (wall clock; the CPU-time ratio in its detail). PPO-GNN is
    also measured with ``vector_envs`` envs stepped as one batch (the native vector env through
    :func:`agents.common.make_vec_env`; same rollout length per env, minibatch and epochs), before and after, in the
    same alternation. Defaults: 3 rounds and 8 envs; ``quick`` (a smoke test) 1 round and no vectorised runs; ``steps`` (timed env steps per run, × up to 4 with vectorised
    envs) 2,000, quick 300."""
    steps = (300 if quick else 2000) if steps is None else steps
    rounds = (1 if quick else 3) if rounds is None else rounds
    vector_envs = (0 if quick else 8) if vector_envs is None else vector_envs
    out = encoder_timings(impls, rounds=rounds if quick else max(rounds, 3)) if "gnn" in encoders else []
    for alg in ("ddqn", "ppo"):
        for enc in encoders:
            if enc != "gnn":
                out.append(training_samples_per_second(alg, enc, steps=steps))
                continue
            settings = [(impl, 1) for impl in impls]
            if alg == "ppo" and vector_envs > 1:
                settings += [(impls[0], vector_envs), (impls[-1], vector_envs)]
            runs: dict[tuple[str, int], list[dict]] = {k: [] for k in settings}
            for _ in range(max(1, rounds)):
                for impl, n in runs:
                    kw = {"num_envs": n} if n > 1 else {}
                    runs[impl, n].append(
                        training_samples_per_second(alg, enc, steps=steps * min(n, 4), gnn_impl=impl, **kw)
                    )
            medians, cpu_medians = {}, {}
            for key, records in runs.items():
                best = dict(records[0])
                best["value"] = medians[key] = median([r["value"] for r in records])
                cpu_medians[key] = median([r["detail"]["samples_per_cpu_second"] for r in records])
                best["detail"] = {
                    **best["detail"],
                    "rounds": [r["value"] for r in records],
                    "rounds_per_cpu_second": [r["detail"]["samples_per_cpu_second"] for r in records],
                    "samples_per_cpu_second": cpu_medians[key],
                    "statistic": "median",
                }
                if alg == "ppo" and key[0] == impls[-1]:  # the absolute goal for PPO-GNN
                    best["target"], best["meets"] = ">= 1000", bool(best["value"] >= 1000.0)
                out.append(best)
            for n in sorted({n for _, n in settings}):
                before, after = (impls[0], n), (impls[-1], n)
                if before not in medians or after not in medians or before == after:
                    continue
                ratio = medians[after] / medians[before]
                suffix = f"_{n}envs" if n > 1 else ""
                out.append(
                    {
                        "name": f"train_{alg}_gnn_speedup{suffix}",
                        "value": ratio,
                        "unit": f"x ({after[0]} / {before[0]})",
                        "target": ">= 5",
                        "meets": bool(ratio >= 5.0),
                        "detail": {
                            **{impl: medians[impl, n] for impl in impls if (impl, n) in medians},
                            "cpu_time_ratio": cpu_medians[after] / cpu_medians[before],
                            "num_envs": n,
                            "machine": machine(),
                        },
                    }
                )
    return out
