"""MetaPlace checkpoints: ``model.pt`` (the greedy policy in :class:`agents.checkpoint.PPOPolicy`'s layout),
``value.pt``, ``perf_model.pt`` and ``meta.json`` written atomically (:func:`save_meta`) and read back with every
file checked against its sha256 (:func:`load_meta`)."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import torch
from gpusched_lab.agents.methods.metaplace.config import (
    META_FILE,
    PERF_FILE,
    POLICY_FILE,
    VALUE_FILE,
    MetaArgs,
)
from gpusched_lab.agents.methods.metaplace.perf_model import PerformanceModel
from gpusched_lab.agents.methods.metaplace.policy import (
    ENV_ID,
    PlacementPolicy,
    make_env,
    make_policy,
    new_perf_model,
)


def _save(out: Path, policy: PlacementPolicy, perf: PerformanceModel, args: MetaArgs, mode, it, env) -> None:
    save_meta(out, policy, perf, args, mode=mode, iteration=it, env_kwargs=_env_kwargs(args))


def _env_kwargs(args: MetaArgs) -> dict:
    return {"cluster": args.cluster, "num_jobs": args.num_jobs}


def policy_state(policy: PlacementPolicy) -> dict:
    """The greedy policy as :class:`agents.checkpoint.PPOPolicy` weights (the scorer, and an action net that reads
    the scores through), so ``agents.load`` and the leaderboard run a MetaPlace checkpoint like any other."""
    state = {f"scorer.{k}": v for k, v in policy.scorer.state_dict().items()}
    a, h = policy.cfg.num_actions, policy.cfg.hidden
    w = torch.zeros(a, a + h)
    w[:, :a] = torch.eye(a)
    state["action_net.weight"], state["action_net.bias"] = w, torch.zeros(a)
    return state


def save_meta(
    out: str | Path,
    policy: PlacementPolicy,
    perf: PerformanceModel,
    args: MetaArgs,
    *,
    mode: str,
    iteration: int,
    env_kwargs: dict,
    evaluation: dict | None = None,
    command: str = "",
) -> Path:
    """``model.pt`` (the greedy policy, :func:`policy_state`), ``value.pt`` (the critic), ``perf_model.pt`` (the
    performance model) then ``meta.json`` (with the three files' sha256), each written atomically."""
    import hashlib
    from datetime import UTC, datetime

    from gpusched_envs.io import atomic_write_bytes, atomic_write_text

    out = Path(out)
    hashes = {}
    for name, state in (
        (POLICY_FILE, policy_state(policy)),
        (VALUE_FILE, {**policy.value.state_dict(), "model_weight": policy.model_weight}),
        (PERF_FILE, perf.state_dict()),
    ):
        buf = io.BytesIO()
        torch.save({k: v.detach().cpu() for k, v in state.items()}, buf)
        atomic_write_bytes(out / name, buf.getvalue())
        hashes[name] = hashlib.sha256(buf.getvalue()).hexdigest()
    meta = {
        "format": 1,
        "algorithm": "metaplace" if mode == "meta" else "multitask-pg",
        "policy": "logits",
        "env_id": ENV_ID,
        "env_kwargs": env_kwargs,
        "obs_mode": "graph",
        "network": policy.cfg.to_dict(),
        "steps": 0,
        "seed": args.seed,
        "command": command,
        "evaluation": evaluation,
        "args": args.to_dict(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "model_sha256": hashes[POLICY_FILE],
        "meta_rl": {
            "mode": mode,
            "outer": args.outer,
            "iteration": int(iteration),
            "task_seed": args.task_seed,
            "sha256": hashes,
        },
    }
    atomic_write_text(out / META_FILE, json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return out


def load_meta(path: str | Path) -> tuple[PlacementPolicy, PerformanceModel, dict]:
    """Policy (with its critic), performance model and ``meta.json`` of a checkpoint written by :func:`save_meta`
    (every file checked against its sha256)."""
    import hashlib

    path = Path(path)
    if not (path / META_FILE).exists():
        raise FileNotFoundError(f"{path}: no MetaPlace checkpoint ({META_FILE} missing)")
    from gpusched_lab.agents.checkpoint import CheckpointError, build_config, load_state

    where = str(path / META_FILE)
    try:
        meta = json.loads((path / META_FILE).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise CheckpointError(f"{where}: not a JSON metadata file ({' '.join(str(exc).split())})") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("meta_rl"), dict):
        raise CheckpointError(f"{path}: not a MetaPlace checkpoint (no 'meta_rl' in {META_FILE})")
    hashes = meta["meta_rl"].get("sha256")
    if not isinstance(hashes, dict):
        raise CheckpointError(f"{where}: meta_rl.sha256 must be an object of file hashes")
    fields = {f.name for f in dataclasses.fields(MetaArgs)}
    args = build_config(
        MetaArgs, {k: v for k, v in (meta.get("args") or {}).items() if k in fields}, where, "args"
    )
    env = make_env(args)
    policy = make_policy(env, args)
    perf = new_perf_model(env, args.seed)
    env.close()
    states = {}
    for name in (POLICY_FILE, VALUE_FILE, PERF_FILE):
        f = path / name
        if not f.exists():
            raise FileNotFoundError(f"{f}: no such file")
        data = f.read_bytes()
        if hashlib.sha256(data).hexdigest() != hashes.get(name):
            raise CheckpointError(f"{path}: {name} does not match {META_FILE} (interrupted save?)")
        states[name] = load_state(path, data, name)
    prefix = "scorer."
    policy.scorer.load_state_dict(
        {k[len(prefix) :]: v for k, v in states[POLICY_FILE].items() if k.startswith(prefix)}
    )
    value = dict(states[VALUE_FILE])
    w = value.pop("model_weight", None)  # absent in checkpoints from before the model-based score
    policy.value.load_state_dict(value)
    with torch.no_grad():
        policy.model_weight.fill_(0.0 if w is None else float(w))
    perf.load_state_dict(states[PERF_FILE])
    return policy, perf, meta
