"""An HMARL training run (``gpusched train hmarl``): the optional imitation warm start, then MAPPO updates with
periodic evaluation, TensorBoard logs, checkpoints and the best actor (:func:`train`); config file < options <
``--set`` (:func:`train_command`). The run folder is described in :mod:`agents.methods.hmarl.agent`."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
from gpusched_lab.agents.methods.hmarl.checkpoint import save_actor
from gpusched_lab.agents.methods.hmarl.config import (
    HMARLArgs,
    HMARLConfig,
    ImitationArgs,
    apply_overrides,
    load_config,
)
from gpusched_lab.agents.methods.hmarl.dagger import imitate
from gpusched_lab.agents.methods.hmarl.mappo import Trainer

from gpusched_envs.io import atomic_write_text


def train(
    cfg: HMARLConfig, out: Path | None = None, command: str = "", resume: bool = False, log=print
) -> dict:
    """Train; with ``out`` write TensorBoard logs, checkpoints and the best actor. Returns a summary."""
    known = {f for f in HMARLArgs.__dataclass_fields__}
    unknown = set(cfg.args) - known
    if unknown:
        raise ValueError(f"args: unknown keys {sorted(unknown)} (known: {sorted(known)})")
    args = HMARLArgs(**cfg.args)
    imitation = ImitationArgs.from_dict(cfg.imitation) if cfg.imitation is not None else None
    trainer = Trainer(cfg.env_kwargs, args)
    writer = None
    resumed = False
    best = float("inf")
    if out is not None:
        out = Path(out)
        atomic_write_text(
            out / "config.json", json.dumps({**cfg.to_dict(), "command": command}, indent=2) + "\n"
        )
        if resume and trainer.resume(out / "checkpoint"):
            resumed = True
            log(f"resumed from {out / 'checkpoint'} at step {trainer.steps}")
            if (out / "best" / "meta.json").exists():  # keep the best so far unless a later policy beats it
                prev = json.loads((out / "best" / "meta.json").read_text()).get("evaluation") or {}
                best = float(prev.get("avg_jct", best))
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(str(out / "tb"))
    if imitation is not None and not resumed:
        history = imitate(trainer, imitation, seed=args.seed, log=lambda r: log(f"imitation {r}"))
        evaluation = trainer.evaluate(cfg.eval_seeds, cfg.eval_env_kwargs)
        evaluation.update(steps=0, stage="imitation")
        log(f"after imitation: eval avg JCT {evaluation['avg_jct']:,.0f} s")
        if writer is not None:
            writer.add_scalar("eval/avg_jct", evaluation["avg_jct"], 0)
        if out is not None:
            atomic_write_text(out / "imitation.json", json.dumps(history, indent=2) + "\n")
            save_actor(out / "imitation", trainer.actor, cfg.env_kwargs, args, 0, evaluation, command)
            save_actor(out / "best", trainer.actor, cfg.env_kwargs, args, 0, evaluation, command)
            trainer.save(out / "checkpoint", evaluation, command)
        best = evaluation["avg_jct"]
    next_eval = trainer.steps + (cfg.eval_every or cfg.steps)
    next_ckpt = trainer.steps + (cfg.checkpoint_every or cfg.steps)
    evaluation = None
    t0, s0 = time.perf_counter(), trainer.steps
    while trainer.steps < cfg.steps:
        n_ep = len(trainer.episodes)
        roll = trainer.collect()
        stats = trainer.update(roll)
        if writer is not None:
            for key, v in stats.items():
                writer.add_scalar(f"train/{key}", v, trainer.steps)
            writer.add_scalar(
                "train/steps_per_second", (trainer.steps - s0) / (time.perf_counter() - t0), trainer.steps
            )
            for ep in trainer.episodes[n_ep:]:
                writer.add_scalar("episode/return", ep["return"], trainer.steps)
                if "avg_jct" in ep:
                    writer.add_scalar("episode/avg_jct", ep["avg_jct"], trainer.steps)
        if trainer.steps >= next_eval or trainer.steps >= cfg.steps:
            evaluation = trainer.evaluate(cfg.eval_seeds, cfg.eval_env_kwargs)
            evaluation["steps"] = trainer.steps
            recent = trainer.episodes[-20:]
            log(
                f"step {trainer.steps}: eval avg JCT {evaluation['avg_jct']:,.0f} s, recent train return "
                f"{np.mean([e['return'] for e in recent]) if recent else float('nan'):.3f}, "
                f"entropy {stats['entropy']:.3f}"
            )
            if writer is not None:
                writer.add_scalar("eval/avg_jct", evaluation["avg_jct"], trainer.steps)
            if out is not None and evaluation["avg_jct"] < best:
                best = evaluation["avg_jct"]
                save_actor(
                    out / "best", trainer.actor, cfg.env_kwargs, args, trainer.steps, evaluation, command
                )
            next_eval += cfg.eval_every or cfg.steps
        if out is not None and (trainer.steps >= next_ckpt or trainer.steps >= cfg.steps):
            trainer.save(out / "checkpoint", evaluation, command)
            next_ckpt += cfg.checkpoint_every or cfg.steps
    if writer is not None:
        writer.close()
    return {
        "steps": trainer.steps,
        "evaluation": evaluation,
        "episodes": len(trainer.episodes),
        "trainer": trainer,
    }


def train_command(
    config: str,
    out: Path,
    steps: int | None = None,
    seed: int | None = None,
    device: str | None = None,
    resume: bool = False,
    set_: list[str] | None = None,
    command: str = "",
    log=print,
) -> dict:
    """What ``gpusched train hmarl`` runs: config file < options < ``--set``; returns :func:`train`'s summary."""
    cfg = load_config(config)
    if steps is not None:
        cfg.steps = steps
    if seed is not None:
        cfg.args = {**cfg.args, "seed": seed}
    if device is not None:
        cfg.args = {**cfg.args, "device": device}
    apply_overrides(cfg, set_ or [])
    if not isinstance(cfg.steps, int) or cfg.steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {cfg.steps!r}")
    return train(cfg, Path(out), command=command, resume=resume, log=log)
