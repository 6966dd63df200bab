"""Training runs: envs, TensorBoard scalars, periodic evaluation on held-out seeds, atomic checkpoints, resume.

Run folder (``--out``)::

    config.json             the resolved configuration and the command
    tb/                     TensorBoard events
    checkpoint/model.pt     the latest policy weights (torch.load(weights_only=True))
    checkpoint/meta.json    its metadata (agents.checkpoint)
    checkpoint/resume.pt    DDQN / TopDRL: full training state (pickled envs, replay, RNGs, optimiser)
    checkpoint/sb3.zip      PPO: SB3's save (policy, optimiser, step counter)
    best/model.pt, meta.json  the policy with the lowest evaluation objective so far (avg JCT; makespan on
                              DAGSchedule-v0), on the eval seeds

TensorBoard scalars: ``episode/return``, ``episode/length``, ``episode/avg_jct`` (from ``info["metrics"]`` at
episode end), ``train/loss``, ``train/epsilon`` (DDQN), ``train/steps_per_second``, ``eval/return``,
``eval/avg_jct`` (``eval/makespan`` on DAGSchedule-v0).

Resume guarantees. DDQN / TopDRL: bit-for-bit — a run resumed from a checkpoint ends with the same parameters as an
uninterrupted run (the envs are pickled mid-episode, with every RNG). PPO: the policy, optimiser state and step
counter continue exactly; the collected-but-unused part of a rollout is dropped (checkpoints are taken at rollout
boundaries, so nothing is lost there) and the envs restart with fresh episodes seeded from ``seed`` + the step
count, so a resumed PPO run is reproducible but not identical to an uninterrupted one.
"""

from __future__ import annotations

import io
import json
import time
from functools import partial
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from agents import checkpoint as ckpt
from agents.common import make_env, resolve_device
from agents.networks import OBS_MODE_OF_ENCODER, masked, obs_to_tensors
from gpusched_envs.io import atomic_write_bytes, atomic_write_text
from train.config import RunConfig

CHECKPOINT_DIR = "checkpoint"
BEST_DIR = "best"
RESUME_FILE = "resume.pt"
SB3_FILE = "sb3.zip"


class ScaleReward(gym.RewardWrapper):
    """Multiply rewards by a constant (a class, not a lambda, so the env pickles)."""

    def __init__(self, env, scale: float):
        super().__init__(env)
        self.scale = float(scale)

    def reward(self, reward):
        return reward * self.scale


def obs_mode_for(cfg: RunConfig) -> str:
    encoder = cfg.args.get("encoder", "cnn" if cfg.algorithm == "topdrl" else "gnn")
    if encoder not in OBS_MODE_OF_ENCODER:
        raise ValueError(f"encoder: {encoder!r} is not one of {', '.join(OBS_MODE_OF_ENCODER)}")
    mode = OBS_MODE_OF_ENCODER[encoder]
    given = cfg.env_kwargs.get("obs_mode")
    if given is not None and given != mode:
        raise ValueError(
            f"encoder {encoder!r} reads obs_mode {mode!r}, but env_kwargs set obs_mode={given!r}"
        )
    return mode


def make_train_env(env_id: str, env_kwargs: dict, obs_mode: str, reward_scale: float = 1.0):
    env = make_env(env_id, env_kwargs, obs_mode)
    return ScaleReward(env, reward_scale) if reward_scale != 1.0 else env


def summarize(episodes: list[dict]) -> dict:
    """Evaluation figures; ``objective`` (lower is better) is the average JCT, or the makespan on envs without jobs
    (DAGSchedule-v0), and selects the best policy."""
    name = "avg_jct" if not episodes or "avg_jct" in episodes[0]["metrics"] else "makespan"
    jct = [e["metrics"].get("avg_jct", np.nan) for e in episodes]
    values = [e["metrics"].get(name, np.nan) for e in episodes]
    return {
        "seeds": [e["seed"] for e in episodes],
        "avg_jct": float(np.nanmean(jct)) if episodes and not np.all(np.isnan(jct)) else float("nan"),
        "avg_jct_per_seed": [float(x) for x in jct],
        "objective_name": name,
        "objective": float(np.nanmean(values)) if episodes else float("nan"),
        "return": float(np.mean([e["return"] for e in episodes])) if episodes else float("nan"),
    }


def eval_status(evaluation: dict) -> str:
    label = "JCT" if evaluation["objective_name"] == "avg_jct" else evaluation["objective_name"]
    return f" eval {label}={evaluation['objective']:,.0f}s"


def greedy_act(module: torch.nn.Module, device) -> callable:
    @torch.no_grad()
    def act(obs: dict) -> int:
        t = obs_to_tensors(obs, device, batched=False)
        return int(masked(module(t), t["action_mask"]).argmax(dim=-1)[0])

    return act


def evaluate_module(module, env, seeds, device) -> dict:
    from agents.common import evaluate

    was_training = module.training
    module.eval()
    try:
        return summarize(evaluate(greedy_act(module, device), env, seeds))
    finally:
        module.train(was_training)


class Progress:
    """A rich progress bar (or nothing)."""

    def __init__(self, total: int, start: int, enabled: bool, label: str):
        self.bar = None
        if enabled:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as RichProgress

            self.bar = RichProgress(
                TextColumn(f"[bold]{label}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                TextColumn("{task.fields[status]}"),
                transient=False,
            )
            self.task = self.bar.add_task(label, total=total, completed=start, status="")
            self.bar.start()

    def update(self, step: int, status: str = "") -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=step, status=status)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


class Writer:
    """TensorBoard scalars (a thin SummaryWriter holder; ``purge_step`` drops events past a resumed step)."""

    def __init__(self, log_dir: Path, purge_step: int | None):
        from torch.utils.tensorboard import SummaryWriter

        self.w = SummaryWriter(log_dir=str(log_dir), purge_step=purge_step)

    def scalar(self, tag: str, value: float, step: int) -> None:
        if value is not None and np.isfinite(value):
            self.w.add_scalar(tag, float(value), step)

    def episodes(self, episodes: list[dict], step: int) -> None:
        for e in episodes:
            self.scalar("episode/return", e["return"], step)
            self.scalar("episode/length", e["length"], step)
            self.scalar("episode/avg_jct", e["metrics"].get("avg_jct", np.nan), step)

    def close(self) -> None:
        self.w.flush()
        self.w.close()


def write_config(out: Path, cfg: RunConfig, command: str) -> None:
    atomic_write_text(
        out / "config.json", json.dumps({"config": cfg.to_dict(), "command": command}, indent=2) + "\n"
    )


def read_config(out: Path) -> tuple[RunConfig, str]:
    doc = json.loads((out / "config.json").read_text())
    return RunConfig(**doc["config"]), doc["command"]


def _due(before: int, after: int, every: int) -> bool:
    return every > 0 and after // every > before // every


def best_objective(out: Path) -> float:
    """The objective (avg JCT or makespan) of the best policy saved so far; inf when there is none."""
    try:
        evaluation = json.loads((out / BEST_DIR / ckpt.META_FILE).read_text())["evaluation"]
        return float(evaluation.get("objective", evaluation["avg_jct"]))
    except (OSError, KeyError, TypeError, ValueError):
        return float("inf")


def save_policy(
    out: Path,
    module,
    cfg: RunConfig,
    policy: str,
    network,
    obs_mode: str,
    steps: int,
    command: str,
    evaluation: dict | None,
    args: dict,
    folder: str = "checkpoint",
) -> None:
    ckpt.save(
        out / folder,
        module,
        algorithm=cfg.algorithm,
        policy=policy,
        env_id=cfg.env,
        env_kwargs=cfg.env_kwargs,
        obs_mode=obs_mode,
        network=network,
        steps=steps,
        seed=cfg.seed,
        command=command,
        evaluation=evaluation,
        args=args,
    )


def resumed_config(cfg: RunConfig, out: Path) -> tuple[RunConfig, str]:
    """On ``--resume`` the run's own saved configuration and command hold; only the step budget may change."""
    saved, command = read_config(out)
    saved.steps, saved.progress = cfg.steps, cfg.progress
    return saved, command


# ------------------------------------------------------------------------------------------------------ DDQN
def run_ddqn(cfg: RunConfig, out: Path, command: str, resume: bool = False) -> dict:
    """Train DDQN (or TopDRL) per ``cfg`` into ``out``; returns the final evaluation."""
    from agents.ddqn import DDQN, DDQNArgs
    from agents.topdrl import TopDRL, topdrl_env_kwargs
    from train.config import build_args

    resume_path = out / CHECKPOINT_DIR / RESUME_FILE
    resume = resume and resume_path.exists()
    if resume:
        cfg, command = resumed_config(cfg, out)
    if cfg.algorithm == "topdrl":
        cfg.env_kwargs = topdrl_env_kwargs(**{k: v for k, v in cfg.env_kwargs.items() if k != "obs_mode"})
        cfg.args.setdefault("encoder", "cnn")
    args = build_args(DDQNArgs, {**cfg.args, "seed": cfg.seed})
    mode = obs_mode_for(cfg)
    cfg.env_kwargs = {**cfg.env_kwargs, "obs_mode": mode}
    if not resume:
        out.mkdir(parents=True, exist_ok=True)
        write_config(out, cfg, command)
    envs = [
        make_env(cfg.env, cfg.env_kwargs, mode) for _ in range(cfg.num_envs)
    ]  # DDQN scales rewards itself
    cls = TopDRL if cfg.algorithm == "topdrl" else DDQN
    algo = cls(args, envs, total_steps=cfg.steps)
    if resume:
        state = torch.load(
            resume_path, map_location=algo.device, weights_only=False
        )  # our own file: envs pickled
        algo.load_training_state(state)
    eval_env = make_env(cfg.env, cfg.env_kwargs, mode)
    writer = Writer(out / "tb", purge_step=algo.global_step if resume else None)
    bar = Progress(cfg.steps, algo.global_step, cfg.progress, cfg.algorithm)
    t0, s0 = time.perf_counter(), algo.global_step
    last = {"eval": None}

    def save(step: int) -> None:
        save_policy(out, algo.q, cfg, "q", algo.net_config, mode, step, command, last["eval"], args.to_dict())
        buf = io.BytesIO()
        torch.save(algo.training_state(), buf)
        atomic_write_bytes(resume_path, buf.getvalue())

    def callback(a: DDQN) -> None:
        step, before = a.global_step, a.global_step - cfg.num_envs
        if a.finished_episodes:
            writer.episodes(a.finished_episodes, step)
            a.finished_episodes.clear()
        if _due(before, step, 100):
            writer.scalar("train/loss", a.last_loss, step)
            writer.scalar("train/epsilon", a.epsilon, step)
            sps = (step - s0) / max(time.perf_counter() - t0, 1e-9)
            writer.scalar("train/steps_per_second", sps, step)
            status = f"{sps:,.0f} steps/s ε={a.epsilon:.2f} loss={a.last_loss:.3g}"
            if last["eval"]:
                status += eval_status(last["eval"])
            bar.update(step, status)
        if _due(before, step, cfg.eval_every) and step < cfg.steps:
            run_eval(step)
        if _due(before, step, cfg.checkpoint_every) and step < cfg.steps:
            save(step)

    def run_eval(step: int) -> None:
        last["eval"] = evaluate_module(algo.q, eval_env, cfg.eval_seeds, algo.device)
        writer.scalar(f"eval/{last['eval']['objective_name']}", last["eval"]["objective"], step)
        writer.scalar("eval/return", last["eval"]["return"], step)
        if last["eval"]["objective"] < best_objective(out):
            save_policy(
                out,
                algo.q,
                cfg,
                "q",
                algo.net_config,
                mode,
                step,
                command,
                last["eval"],
                args.to_dict(),
                folder=BEST_DIR,
            )

    try:
        algo.learn(cfg.steps, callback)
        run_eval(algo.global_step)
        save(algo.global_step)
    finally:
        bar.close()
        writer.close()
    return {
        "steps": algo.global_step,
        "evaluation": last["eval"],
        "steps_per_second": (algo.global_step - s0) / max(time.perf_counter() - t0, 1e-9),
    }


# ------------------------------------------------------------------------------------------------------ PPO
def run_ppo(cfg: RunConfig, out: Path, command: str, resume: bool = False) -> dict:
    """Train MaskablePPO per ``cfg`` into ``out``; returns the final evaluation."""
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecMonitor

    from agents.checkpoint import PPOPolicy
    from agents.networks import config_for_env
    from agents.ppo import PPOArgs, make_ppo
    from train.config import build_args

    sb3_path = out / CHECKPOINT_DIR / SB3_FILE
    resume = resume and sb3_path.exists()
    if resume:
        cfg, command = resumed_config(cfg, out)
    args = build_args(PPOArgs, {**cfg.args, "seed": cfg.seed})
    mode = obs_mode_for(cfg)
    cfg.env_kwargs = {**cfg.env_kwargs, "obs_mode": mode}
    if not resume:
        out.mkdir(parents=True, exist_ok=True)
        write_config(out, cfg, command)
    factory = partial(make_train_env, cfg.env, cfg.env_kwargs, mode, args.reward_scale)
    vec_cls = SubprocVecEnv if cfg.num_envs > 1 else DummyVecEnv
    venv = VecMonitor(vec_cls([factory] * cfg.num_envs))  # episode returns/lengths in info["episode"]
    eval_env = make_env(cfg.env, cfg.env_kwargs, mode)
    network = config_for_env(eval_env, args.encoder, args.hidden, args.layers)
    device = resolve_device(args.device)
    if resume:
        model = MaskablePPO.load(sb3_path, env=venv, device=device)
        model.set_random_seed(cfg.seed + model.num_timesteps)
        venv.seed(cfg.seed + model.num_timesteps)
    else:
        venv.seed(cfg.seed)
        model = make_ppo(venv, network, args)
    writer = Writer(out / "tb", purge_step=model.num_timesteps if resume else None)
    bar = Progress(cfg.steps, model.num_timesteps, cfg.progress, cfg.algorithm)
    last = {"eval": None}

    def policy_copy() -> PPOPolicy:
        return PPOPolicy.from_sb3(model, network).to(model.device)

    def save(step: int) -> None:
        save_policy(
            out, policy_copy(), cfg, "logits", network, mode, step, command, last["eval"], args.to_dict()
        )
        tmp = sb3_path.with_name(".sb3.tmp.zip")
        model.save(tmp)
        tmp.replace(sb3_path)

    def run_eval(step: int) -> None:
        policy = policy_copy()
        last["eval"] = evaluate_module(policy, eval_env, cfg.eval_seeds, model.device)
        writer.scalar(f"eval/{last['eval']['objective_name']}", last["eval"]["objective"], step)
        writer.scalar("eval/return", last["eval"]["return"], step)
        if last["eval"]["objective"] < best_objective(out):
            save_policy(
                out,
                policy,
                cfg,
                "logits",
                network,
                mode,
                step,
                command,
                last["eval"],
                args.to_dict(),
                folder=BEST_DIR,
            )

    class Callback(BaseCallback):
        def _on_training_start(self) -> None:
            self.t0, self.s0 = time.perf_counter(), self.model.num_timesteps
            self.last_ckpt = self.model.num_timesteps

        def _on_step(self) -> bool:
            step = self.model.num_timesteps
            for info, done in zip(self.locals["infos"], self.locals["dones"], strict=True):
                ep = info.get("episode")
                if done and ep is not None:
                    writer.episodes(
                        [{"return": ep["r"], "length": ep["l"], "metrics": info.get("metrics", {})}], step
                    )
            before = step - cfg.num_envs
            if _due(before, step, 100):
                sps = (step - self.s0) / max(time.perf_counter() - self.t0, 1e-9)
                writer.scalar("train/steps_per_second", sps, step)
                bar.update(
                    step,
                    f"{sps:,.0f} steps/s" + (eval_status(last["eval"]) if last["eval"] else ""),
                )
            if _due(before, step, cfg.eval_every) and step < cfg.steps:
                run_eval(step)
            return True

        def _on_rollout_start(self) -> None:
            step = self.model.num_timesteps
            loss = self.model.logger.name_to_value.get("train/loss")
            if loss is not None:
                writer.scalar("train/loss", loss, step)
                writer.scalar(
                    "train/entropy_loss", self.model.logger.name_to_value.get("train/entropy_loss"), step
                )
            if (
                cfg.checkpoint_every > 0
                and step // cfg.checkpoint_every > self.last_ckpt // cfg.checkpoint_every
            ):
                save(step)  # a rollout boundary: nothing collected is lost
                self.last_ckpt = step

    try:
        remaining = max(cfg.steps - model.num_timesteps, 0)
        model.learn(remaining, callback=Callback(), reset_num_timesteps=not resume)
        run_eval(model.num_timesteps)
        save(model.num_timesteps)
    finally:
        bar.close()
        writer.close()
        venv.close()
    return {"steps": model.num_timesteps, "evaluation": last["eval"]}
