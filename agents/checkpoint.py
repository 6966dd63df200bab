"""Checkpoints of trained policies: ``model.pt`` (a plain ``state_dict``, loadable with ``torch.load(weights_only=True)``)
and ``meta.json`` (env id, env kwargs, obs mode, algorithm, network config, steps, seed, command, evaluation).

``meta.json`` schema (``format`` 1)::

    {"format": 1, "algorithm": "ddqn" | "ppo" | "topdrl", "policy": "q" | "logits",
     "env_id": str, "env_kwargs": {...}, "information": "non-clairvoyant" | "clairvoyant",
     "obs_mode": "graph" | "image" | "flat",
     "network": {NetworkConfig fields}, "steps": int, "seed": int, "command": str,
     "evaluation": {...} | null, "created": ISO time, "args": {algorithm arguments},
     "model_sha256": hex digest of model.pt}

``model.pt`` and ``meta.json`` are each written atomically, ``meta.json`` last; its ``model_sha256`` ties the pair
together, so a save interrupted between the two files (new weights, old metadata) is detected on load. Checkpoints
written before ``model_sha256`` existed load without the check.

:func:`load` returns an :class:`Agent` whose ``act(obs)`` is the deterministic masked argmax of the policy.
"""

from __future__ import annotations

import hashlib
import io
import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

from agents.networks import ActionScorer, NetworkConfig, build_network, masked, obs_to_tensors
from gpusched_envs.io import atomic_write_bytes, atomic_write_text

FORMAT = 1
MODEL_FILE = "model.pt"
META_FILE = "meta.json"


class CheckpointMismatchError(ValueError):
    """A checkpoint used with an env (id or observation mode) other than the one it was trained on."""


class CheckpointCorruptError(ValueError):
    """``model.pt`` is not the file ``meta.json`` describes (a save interrupted between the two files)."""


class PPOPolicy(nn.Module):
    """The deterministic part of a MaskablePPO policy built by :func:`agents.ppo.make_ppo`: the scorer (features
    extractor) and SB3's action net on ``[scores ⊕ embedding]``."""

    def __init__(self, cfg: NetworkConfig, obs_space):
        super().__init__()
        self.scorer = build_network(cfg, obs_space)
        self.action_net = nn.Linear(cfg.num_actions + cfg.hidden, cfg.num_actions)

    def forward(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        scores, embedding = self.scorer.scores_and_embedding(obs)
        return self.action_net(torch.cat([scores, embedding], dim=-1))

    @classmethod
    def from_sb3(cls, model, cfg: NetworkConfig) -> PPOPolicy:
        policy = cls(cfg, model.observation_space)
        policy.scorer.load_state_dict(model.policy.features_extractor.scorer.state_dict())
        policy.action_net.load_state_dict(model.policy.action_net.state_dict())
        return policy


def policy_module(kind: str, cfg: NetworkConfig, obs_space) -> nn.Module:
    if kind == "q":
        return build_network(cfg, obs_space)
    if kind == "logits":
        return PPOPolicy(cfg, obs_space)
    raise ValueError(f"unknown policy kind {kind!r} in meta.json (expected 'q' or 'logits')")


def save(
    path: str | Path,
    module: nn.Module,
    *,
    algorithm: str,
    policy: str,
    env_id: str,
    env_kwargs: dict,
    obs_mode: str,
    network: NetworkConfig,
    steps: int,
    seed: int,
    command: str = "",
    evaluation: dict | None = None,
    args: dict | None = None,
) -> Path:
    """Write ``model.pt`` then ``meta.json`` (with the sha256 of ``model.pt``), each atomically."""
    path = Path(path)
    buf = io.BytesIO()
    torch.save({k: v.detach().cpu() for k, v in module.state_dict().items()}, buf)
    model_bytes = buf.getvalue()
    atomic_write_bytes(path / MODEL_FILE, model_bytes)
    meta = {
        "format": FORMAT,
        "algorithm": algorithm,
        "policy": policy,
        "env_id": env_id,
        "env_kwargs": env_kwargs,
        # what the policy saw: the cluster envs' default is non-clairvoyant (no traced durations or remaining work)
        "information": env_kwargs.get("information", "non-clairvoyant"),
        "obs_mode": obs_mode,
        "network": network.to_dict(),
        "steps": int(steps),
        "seed": int(seed),
        "command": command,
        "evaluation": evaluation,
        "args": args or {},
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "model_sha256": hashlib.sha256(model_bytes).hexdigest(),
    }
    atomic_write_text(path / META_FILE, json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return path


def read_meta(path: str | Path) -> dict:
    """``meta.json`` of a checkpoint folder (or of the folder holding the given ``model.pt``)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such checkpoint")
    meta_path = path / META_FILE if path.is_dir() else path.parent / META_FILE
    if not meta_path.exists():
        raise FileNotFoundError(f"{meta_path}: no checkpoint metadata (expected {MODEL_FILE} + {META_FILE})")
    return json.loads(meta_path.read_text())


def check_compatible(meta: dict, where: str, env_id: str | None, obs_mode: str | None) -> None:
    """One clear error naming both sides when the env id or observation mode differs."""
    bad_id = env_id is not None and env_id != meta["env_id"]
    bad_mode = obs_mode is not None and obs_mode != meta["obs_mode"]
    if bad_id or bad_mode:
        raise CheckpointMismatchError(
            f"checkpoint {where} was trained on {meta['env_id']} (obs_mode={meta['obs_mode']!r}) but is used with "
            f"{env_id or meta['env_id']} (obs_mode={obs_mode or meta['obs_mode']!r})"
        )


class Agent:
    """A loaded policy: ``act(obs) -> int`` (deterministic masked argmax); ``agent(env)`` acts on an env's current
    observation (checking the env once)."""

    def __init__(
        self, module: nn.Module, meta: dict, obs_space, where: str, device: str | torch.device = "cpu"
    ):
        self.module = module.eval()
        self.meta = meta
        self.observation_space = obs_space
        self.where = where
        self.device = torch.device(device)
        self._checked: object | None = None

    @property
    def env_id(self) -> str:
        return self.meta["env_id"]

    @property
    def obs_mode(self) -> str:
        return self.meta["obs_mode"]

    @torch.no_grad()
    def scores(self, obs: dict) -> np.ndarray:
        t = obs_to_tensors(obs, self.device)
        return self.module(t).cpu().numpy()

    @torch.no_grad()
    def act(self, obs: dict) -> int:
        t = obs_to_tensors(obs, self.device, batched=False) if np.ndim(obs["action_mask"]) == 1 else None
        if t is None:
            raise ValueError("act() takes one observation; use act_batch() for a batch")
        return int(masked(self.module(t), t["action_mask"]).argmax(dim=-1)[0])

    @torch.no_grad()
    def act_batch(self, obs: dict) -> np.ndarray:
        t = obs_to_tensors(obs, self.device, batched=True)
        return masked(self.module(t), t["action_mask"]).argmax(dim=-1).cpu().numpy()

    def check_env(self, env) -> None:
        spec = getattr(env, "spec", None) or getattr(env.unwrapped, "spec", None)
        env_id = spec.id if spec is not None else None
        check_compatible(self.meta, self.where, env_id, getattr(env.unwrapped, "obs_mode", None))
        from agents.networks import layout_mismatch

        # a GNN reads any cluster size and window; the CNN and MLP need the trained shapes
        reason = layout_mismatch(
            self.meta["network"]["encoder"],
            self.observation_space,
            env.observation_space,
            fixed_actions=self.meta["policy"] == "logits",
        )
        if reason is not None:
            raise CheckpointMismatchError(f"checkpoint {self.where} was trained on {self.env_id}: {reason}")

    def __call__(self, env) -> int:
        if self._checked is not env:
            self.check_env(env)
            self._checked = env
        return self.act(env.unwrapped.encoder.observation())

    def make_env(self, **overrides):
        """The env this checkpoint was trained on (its kwargs, with ``overrides``)."""
        from agents.common import make_env

        return make_env(self.env_id, {**self.meta["env_kwargs"], **overrides}, self.obs_mode)


def read_model_bytes(folder: Path, meta: dict) -> bytes:
    """``model.pt``'s bytes, checked against ``meta["model_sha256"]`` when the checkpoint has one."""
    model_path = folder / MODEL_FILE
    if not model_path.exists():
        raise FileNotFoundError(f"{model_path}: no such file (a checkpoint is {MODEL_FILE} + {META_FILE})")
    data = model_path.read_bytes()
    expected = meta.get("model_sha256")
    if expected is not None and hashlib.sha256(data).hexdigest() != expected:
        raise CheckpointCorruptError(f"{folder}: {MODEL_FILE} does not match {META_FILE} (interrupted save?)")
    return data


def load(
    path: str | Path,
    env_id: str | None = None,
    obs_mode: str | None = None,
    env=None,
    device: str | torch.device = "cpu",
) -> Agent:
    """Load a checkpoint directory (or its ``model.pt``); with ``env_id`` / ``obs_mode`` / ``env`` check that the
    checkpoint was trained for it and raise :class:`CheckpointMismatchError` otherwise."""
    path = Path(path)
    meta = read_meta(path)  # first: a path that does not exist is "no such checkpoint"
    folder = path if path.is_dir() else path.parent
    if meta.get("format") != FORMAT:
        raise ValueError(f"{folder}: checkpoint format {meta.get('format')!r}, this version reads {FORMAT}")
    check_compatible(meta, str(folder), env_id, obs_mode)
    from agents.common import make_env

    probe = env if env is not None else make_env(meta["env_id"], meta["env_kwargs"], meta["obs_mode"])
    if env is not None:
        spec = getattr(env, "spec", None)
        check_compatible(
            meta, str(folder), spec.id if spec else None, getattr(env.unwrapped, "obs_mode", None)
        )
    cfg = NetworkConfig(**meta["network"])
    if env is not None:
        from agents.networks import for_env

        if meta["policy"] != "logits":  # PPO's action net is sized by the action count
            cfg = for_env(cfg, env)  # a GNN runs on any cluster size (its parameters do not depend on it)
    module = policy_module(meta["policy"], cfg, probe.observation_space)
    state = torch.load(io.BytesIO(read_model_bytes(folder, meta)), map_location="cpu", weights_only=True)
    module.load_state_dict(state)
    agent = Agent(module.to(device), meta, probe.observation_space, str(folder), device)
    if env is not None:
        agent.check_env(env)
    else:
        probe.close()
    return agent


def scorer_of(module: nn.Module) -> ActionScorer:
    return module.scorer if isinstance(module, PPOPolicy) else module
