"""HMARL checkpoints: ``model.pt`` (the actor's ``state_dict``) and ``meta.json`` written atomically
(:func:`save_actor`), and read back as an :class:`~agents.methods.hmarl.policy.HMARLPolicy` (:func:`load`) with the
interference model the metadata names (only inside the repository or beside the checkpoint)."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import torch
from gpusched_lab.agents.common import REPO_ROOT
from gpusched_lab.agents.methods.hmarl.config import HMARLArgs
from gpusched_lab.agents.methods.hmarl.policy import ENV_ID, HMARLActor, HMARLPolicy, load_interference
from gpusched_lab.agents.nets.common import NetworkConfig

from gpusched_envs.io import atomic_write_bytes, atomic_write_text


def save_actor(
    folder: Path,
    actor: HMARLActor,
    env_kwargs: dict,
    args: HMARLArgs,
    steps: int,
    evaluation: dict | None,
    command: str = "",
) -> Path:
    """``model.pt`` (actor ``state_dict``) then ``meta.json`` (with its sha256), each atomically."""
    from datetime import UTC, datetime

    folder = Path(folder)
    buf = io.BytesIO()
    torch.save({k: v.detach().cpu() for k, v in actor.state_dict().items()}, buf)
    data = buf.getvalue()
    atomic_write_bytes(folder / "model.pt", data)
    meta = {
        "format": 1,
        "algorithm": "hmarl" if args.critic == "central" else "hmarl-independent",
        "policy": "logits",
        "env_id": ENV_ID,
        "env_kwargs": env_kwargs,
        "obs_mode": "graph",
        "network": actor.cfg.to_dict(),
        "dims": actor.dims,
        "steps": int(steps),
        "seed": int(args.seed),
        "command": command,
        "evaluation": evaluation,
        "args": args.to_dict(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "model_sha256": hashlib.sha256(data).hexdigest(),
    }
    atomic_write_text(folder / "meta.json", json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return folder


def interference_folder(folder: Path, model_path) -> Path:
    """The interference model a checkpoint names: a relative path inside the repository (where the shipped
    checkpoints live) or beside the checkpoint. A checkpoint may not make the loader read files elsewhere."""
    root = REPO_ROOT
    where = f"{folder / 'meta.json'}: args.interference_model"
    if not isinstance(model_path, str) or Path(model_path).is_absolute() or ".." in Path(model_path).parts:
        raise ValueError(f"{where} must be a relative path without '..', got {model_path!r}")
    for base in (folder.parent, root):
        candidate = (base / model_path).resolve()
        if candidate.is_dir() and candidate.is_relative_to(base.resolve()):
            return candidate
    raise ValueError(
        f"{where}: no checkpoint folder {model_path!r} beside the checkpoint or in the repository"
    )


def load(path: str | Path, device: str = "cpu", interference: bool = True) -> HMARLPolicy:
    """A saved actor as an :class:`HMARLPolicy` (it adapts to the layout of whatever env it acts on). The
    interference model named in the metadata is loaded from its folder (relative to the repository root or absolute)."""
    from gpusched_lab.agents.methods.hmarl.interference import read_meta, read_state

    folder, meta = read_meta(path, ("hmarl", "hmarl-independent"))
    if meta.get("env_id") != ENV_ID:
        raise ValueError(
            f"{folder / 'meta.json'}: env_id {meta.get('env_id')!r}, an HMARL checkpoint has {ENV_ID}"
        )
    from gpusched_lab.agents.checkpoint import build_config

    cfg = build_config(NetworkConfig, meta.get("network"), str(folder / "meta.json"), "network")
    try:
        dims = {k: int(v) for k, v in meta["dims"].items()}
        actor = HMARLActor(cfg, dims)
        actor.load_state_dict(read_state(folder, meta))
    except (KeyError, TypeError, AttributeError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"{folder}: network description and weights do not match ({first})") from None
    model_path = meta.get("args", {}).get("interference_model")
    model = None
    if interference and model_path:
        model = load_interference(str(interference_folder(folder, model_path)))
    return HMARLPolicy(actor, model, device, meta)
