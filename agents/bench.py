"""Training speed of the learning agents (for ``gpusched bench``): env samples per second while training, learning
included, on the CPU by default.

    from agents.bench import training_samples_per_second, training_benchmarks
    training_samples_per_second("ppo", "gnn", steps=2000)      # one figure, in gpusched bench's record format
    training_benchmarks(quick=True)                              # DDQN and PPO × GNN / CNN / MLP

The GNN is measured twice in the same run, with the ``torch_geometric`` reference implementation
(``gnn_impl="pyg"``, the encoder before issue 10) and the default dense scatter one, so the speed-up is read off
figures taken under the same machine load; a ``speedup`` record gives the ratio.
"""

from __future__ import annotations

import time

from agents.common import make_env
from agents.networks import OBS_MODE_OF_ENCODER

DEFAULT_ENV = "gpusched/JobSelect-v0"
DEFAULT_ENV_KWARGS = {"cluster": "topdrl", "reward": "jct", "num_jobs": 400, "load": 0.9}


def training_samples_per_second(
    algorithm: str = "ddqn",
    encoder: str = "gnn",
    steps: int = 2000,
    env_id: str = DEFAULT_ENV,
    env_kwargs: dict | None = None,
    device: str = "cpu",
    seed: int = 0,
    gnn_impl: str = "scatter",
    num_envs: int = 1,
) -> dict:
    """Env steps per second of ``algorithm`` (``"ddqn"`` | ``"ppo"``) training with ``encoder`` for ``steps`` steps
    after a short warm-up (DDQN: one gradient step of batch 64 every 4 env steps; PPO: rollouts of 256, 4 epochs of
    minibatch 64). Returns ``{"name", "value", "unit", "target", "meets", "detail"}``."""
    kwargs = dict(DEFAULT_ENV_KWARGS if env_kwargs is None else env_kwargs)
    mode = OBS_MODE_OF_ENCODER[encoder]
    if algorithm == "ddqn":
        from agents.ddqn import DDQN, DDQNArgs

        warmup = 300
        args = DDQNArgs(
            encoder=encoder,
            device=device,
            seed=seed,
            learning_starts=warmup // 2,
            buffer_size=steps + warmup,
            gnn_impl=gnn_impl,
        )
        envs = [make_env(env_id, kwargs, mode) for _ in range(num_envs)]  # acted on as one batch
        algo = DDQN(args, envs, total_steps=steps + warmup)
        algo.learn(warmup)
        t0, c0 = time.perf_counter(), time.process_time()
        algo.learn(warmup + steps)
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
        done = algo.global_step - warmup
    elif algorithm == "ppo":
        from stable_baselines3.common.vec_env import DummyVecEnv

        from agents.networks import config_for_env
        from agents.ppo import PPOArgs, make_ppo

        env = make_env(env_id, kwargs, mode)
        venv = (
            DummyVecEnv([lambda: make_env(env_id, kwargs, mode) for _ in range(num_envs)])
            if num_envs > 1
            else env
        )
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
        start = model.num_timesteps
        t0, c0 = time.perf_counter(), time.process_time()
        model.learn(steps, reset_num_timesteps=False)
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
        done = model.num_timesteps - start
    else:
        raise ValueError(f"algorithm must be 'ddqn' or 'ppo', got {algorithm!r}")
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
        },
    }


def median(values: list[float]) -> float:
    v = sorted(values)
    return v[len(v) // 2] if len(v) % 2 else 0.5 * (v[len(v) // 2 - 1] + v[len(v) // 2])


def training_benchmarks(
    quick: bool = False, encoders: tuple[str, ...] = ("gnn", "cnn", "mlp"), rounds: int = 3
) -> list[dict]:
    """:func:`training_samples_per_second` for DDQN and PPO with each encoder (``quick``: 300 steps each). The GNN is
    measured with both implementations (``pyg`` before, ``scatter`` after) alternately for ``rounds`` rounds, so a
    change of machine load hits both; the records give the medians and a ``speedup`` record their ratio."""
    steps = 300 if quick else 2000
    out = []
    for alg in ("ddqn", "ppo"):
        for enc in encoders:
            if enc != "gnn":
                out.append(training_samples_per_second(alg, enc, steps=steps))
                continue
            runs: dict[str, list[dict]] = {"pyg": [], "scatter": []}
            for _ in range(max(1, rounds)):
                for impl in runs:
                    runs[impl].append(training_samples_per_second(alg, enc, steps=steps, gnn_impl=impl))
            medians, cpu_medians = {}, {}
            for impl, records in runs.items():
                best = dict(records[0])
                best["value"] = medians[impl] = median([r["value"] for r in records])
                cpu_medians[impl] = median([r["detail"]["samples_per_cpu_second"] for r in records])
                best["detail"] = {
                    **best["detail"],
                    "rounds": [r["value"] for r in records],
                    "rounds_per_cpu_second": [r["detail"]["samples_per_cpu_second"] for r in records],
                    "samples_per_cpu_second": cpu_medians[impl],
                    "statistic": "median",
                }
                out.append(best)
            ratio = medians["scatter"] / medians["pyg"]
            out.append(
                {
                    "name": f"train_{alg}_gnn_speedup",
                    "value": ratio,
                    "unit": "x (scatter / pyg)",
                    "target": ">= 5",
                    "meets": bool(ratio >= 5.0),
                    "detail": {
                        "pyg": medians["pyg"],
                        "scatter": medians["scatter"],
                        "cpu_time_ratio": cpu_medians["scatter"] / cpu_medians["pyg"],
                    },
                }
            )
    return out
