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
written before ``model_sha256`` existed load without the check (``require_sha256=True`` refuses them).

A checkpoint folder is untrusted input: nothing in it may make :func:`load` import or run code or read files outside
the package. ``meta.json`` is checked field by field (types, known values) before anything is built; ``env_id``
must be an id this package registers (``gpusched_envs.envs.ENTRY_POINTS``) or one the caller allows explicitly
(``allowed_env_ids``): Gymnasium would otherwise import the module named by ``"module:Env-v0"``. Env kwargs that name
files (``cluster``, a workload spec's ``path`` / ``job_table`` / ``fit``) must name bundled data unless the caller
passes ``allow_paths=True``. ``model.pt`` is read with ``torch.load(weights_only=True)``; a file it refuses, a
truncated or empty file, and weights of another shape are each one :class:`CheckpointError` line naming the file.

:func:`load` returns an :class:`Agent` whose ``act(obs)`` is the deterministic masked argmax of the policy.
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

# the metadata half of a checkpoint (torch-free); its names stay importable from here
from gpusched_lab.agents.meta import (  # noqa: F401 - re-exported
    FORMAT,
    META_FILE,
    MODEL_FILE,
    OBS_MODES,
    POLICY_KINDS,
    CheckpointCorruptError,
    CheckpointError,
    CheckpointMismatchError,
    build_config,
    check_compatible,
    check_env_id,
    check_known_fields,
    meta_path_of,
    read_meta,
    read_policy_meta,
    validate_meta,
)
from gpusched_lab.agents.nets.networks import (
    ActionScorer,
    NetworkConfig,
    build_network,
    masked,
    obs_to_tensors,
)

from gpusched_envs.io import atomic_write_bytes, atomic_write_text

ACT_MANY_MARGIN = 1e-3
"""How far (relative) :meth:`Agent.act_many`'s batched best score must lead the second best to be used as is; a
batched and a single forward pass differ by rounding, orders of magnitude less than this."""


class PPOPolicy(nn.Module):
    """The deterministic part of a MaskablePPO policy built by :func:`agents.algos.ppo.make_ppo`: the scorer (features
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


def _stacked(observations: list[dict]) -> dict[str, np.ndarray]:
    """The observations stacked key by key, each straight into the dtype :func:`obs_to_tensors` gives it
    (``edge_index`` int64, every other key float32): one copy per key, written row by row into one new array (the
    values ``np.stack(...).astype(...)`` gives); the tensors are views of these arrays."""
    n = len(observations)
    out = {}
    for k, first in observations[0].items():
        buf = np.empty((n, *np.shape(first)), np.int64 if k == "edge_index" else np.float32)
        for i, o in enumerate(observations):
            buf[i] = o[k]
        out[k] = buf
    return out


def _batched_choice(raw: np.ndarray, action_mask: np.ndarray) -> tuple[list[int], list[int] | None]:
    """:meth:`Agent.act_many`'s decision from a batch's raw scores ``(B, A)``: each row's masked argmax (a row
    without a valid action stays unmasked, as :func:`masked`), and the rows that :meth:`Agent.act` must decide
    instead (None when there are none): those whose best score is not finite, or does not lead the second best by
    more than :data:`ACT_MANY_MARGIN` × (1 + the row's largest finite magnitude).

    The usual batch (every row has a valid action and finite valid scores, two actions or more) takes a short path:
    the two best valid scores of each row from one partition, the largest magnitude from the best and the lowest
    valid score (``max(|best|, |lowest|) = max(best, -lowest)``); the same float32 values and comparisons as the
    general path, which every other batch takes."""
    valid = action_mask > 0
    scores = np.where(valid, raw, -np.inf)
    if scores.ndim == 2 and scores.shape[-1] > 1:
        top = np.partition(scores, -2, axis=-1)
        best, second = top[:, -1], top[:, -2]
        low = np.where(valid, raw, np.inf).min(axis=-1)
        # both finite: a valid action in every row, and every valid score finite
        if np.isfinite(best).all() and np.isfinite(low).all():
            sure = best - second > ACT_MANY_MARGIN * (1.0 + np.maximum(best, -low))
            out = scores.argmax(axis=-1).tolist()
            return (out, None) if sure.all() else (out, np.flatnonzero(~sure).tolist())
    return _batched_choice_general(raw, valid)


def _batched_choice_general(raw: np.ndarray, valid: np.ndarray) -> tuple[list[int], list[int] | None]:
    """:func:`_batched_choice` of any batch (``valid``: the action mask as bools, changed in place)."""
    if not valid.any(axis=-1).all():
        valid |= ~valid.any(axis=-1, keepdims=True)
    scores = np.where(valid, raw, -np.inf)
    idx = scores.argmax(axis=-1)
    out = idx.tolist()
    rows = np.arange(len(out))
    best = scores[rows, idx]
    if scores.shape[-1] == 1:
        sure = np.isfinite(best)
    else:  # a second best of -inf (one valid action) leads by +inf
        finite = np.isfinite(scores)
        scale = np.abs(scores, where=finite, out=np.zeros_like(scores)).max(axis=-1)
        scores[rows, idx] = -np.inf
        second = scores.max(axis=-1)
        with np.errstate(invalid="ignore"):
            sure = np.isfinite(best) & (best - second > ACT_MANY_MARGIN * (1.0 + scale))
    if sure.all():
        return out, None
    return out, np.flatnonzero(~sure).tolist()


class Agent:
    """A loaded policy: ``act(obs) -> int`` (deterministic masked argmax); ``agent(env)`` acts on an env's current
    observation (checking the env once). Its forward passes run in ``torch.inference_mode`` (the numbers of
    ``no_grad``, with less bookkeeping per op: a decision is ~100 small ops), so its module is for inference only."""

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

    @torch.inference_mode()
    def scores(self, obs: dict) -> np.ndarray:
        t = obs_to_tensors(obs, self.device)
        return self.module(t).cpu().numpy()

    @torch.inference_mode()
    def act(self, obs: dict) -> int:
        t = obs_to_tensors(obs, self.device, batched=False) if np.ndim(obs["action_mask"]) == 1 else None
        if t is None:
            raise ValueError("act() takes one observation; use act_batch() for a batch")
        return int(masked(self.module(t), t["action_mask"]).argmax(dim=-1)[0])

    @torch.inference_mode()
    def act_batch(self, obs: dict) -> np.ndarray:
        t = obs_to_tensors(obs, self.device, batched=True)
        return masked(self.module(t), t["action_mask"]).argmax(dim=-1).cpu().numpy()

    @torch.inference_mode()
    def act_many(self, observations: list[dict]) -> list[int]:
        """``[act(obs) for obs in observations]``, exactly, with one batched forward pass instead of one per
        observation (the observations share their shapes).

        A batched forward may round differently from a single one in the last bits, which could change the argmax
        of two nearly equal scores; so an observation whose best score does not lead the second best by more than
        :data:`ACT_MANY_MARGIN` (relative to the row's largest magnitude) is decided by :meth:`act` itself. Rows
        whose best score is not finite are decided by :meth:`act` too."""
        if len(observations) == 1:
            return [self.act(observations[0])]
        batch = _stacked(observations)
        raw = self.module({k: torch.from_numpy(v).to(self.device) for k, v in batch.items()}).cpu().numpy()
        out, sure = _batched_choice(raw, batch["action_mask"])
        if sure is not None:  # NaN or +-inf best, or a near tie: decided by act()
            for i in sure:
                out[i] = self.act(observations[i])
        return out

    def check_env(self, env) -> None:
        spec = getattr(env, "spec", None) or getattr(env.unwrapped, "spec", None)
        env_id = spec.id if spec is not None else None
        check_compatible(self.meta, self.where, env_id, getattr(env.unwrapped, "obs_mode", None))
        from gpusched_lab.agents.nets.networks import layout_mismatch

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
        from gpusched_lab.agents.common import make_env

        return make_env(self.env_id, {**self.meta["env_kwargs"], **overrides}, self.obs_mode)


def read_model_bytes(folder: Path, meta: dict, require_sha256: bool = False) -> bytes:
    """``model.pt``'s bytes, checked against ``meta["model_sha256"]`` when the checkpoint has one (required with
    ``require_sha256``)."""
    model_path = folder / MODEL_FILE
    if not model_path.is_file():
        raise FileNotFoundError(f"{model_path}: no such file (a checkpoint is {MODEL_FILE} + {META_FILE})")
    data = model_path.read_bytes()
    expected = meta.get("model_sha256")
    if expected is None and require_sha256:
        raise CheckpointCorruptError(f"{folder / META_FILE}: no model_sha256 to verify {MODEL_FILE} against")
    if expected is not None and hashlib.sha256(data).hexdigest() != expected:
        raise CheckpointCorruptError(f"{folder}: {MODEL_FILE} does not match {META_FILE} (interrupted save?)")
    return data


def load_state(folder: Path, data: bytes, name: str = MODEL_FILE) -> dict:
    """``torch.load(weights_only=True)`` of a weights file's bytes (``model.pt``, or ``name``); anything it refuses
    is one line naming the file (never torch's advice to set ``weights_only=False``: a checkpoint that needs it is
    refused)."""
    where = folder / name
    if not data:
        raise CheckpointCorruptError(f"{where}: empty file")
    try:
        state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "weights_only" in str(exc) or "Weights only load failed" in first:
            raise CheckpointCorruptError(
                f"{where}: holds Python objects other than tensors; refused (checkpoints are plain state dicts)"
            ) from None
        raise CheckpointCorruptError(f"{where}: not a torch weights file ({first})") from None
    except (RuntimeError, EOFError, ValueError, OSError, AttributeError, TypeError, KeyError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointCorruptError(f"{where}: truncated or not a torch weights file ({first})") from None
    if not isinstance(state, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()
    ):
        raise CheckpointCorruptError(f"{where}: not a state dict of named tensors")
    return state


def load(
    path: str | Path,
    env_id: str | None = None,
    obs_mode: str | None = None,
    env=None,
    device: str | torch.device = "cpu",
    *,
    allowed_env_ids=(),
    allow_paths: bool = False,
    require_sha256: bool = False,
) -> Agent:
    """Load a checkpoint directory (or its ``model.pt``); with ``env_id`` / ``obs_mode`` / ``env`` check that the
    checkpoint was trained for it and raise :class:`CheckpointMismatchError` otherwise.

    ``meta.json`` is validated before anything is imported or built (see the module docstring): ``allowed_env_ids``
    names env ids of other packages the caller trusts, ``allow_paths`` lets env kwargs name files, and
    ``require_sha256`` refuses a checkpoint without a ``model_sha256``."""
    path = Path(path)
    # first: a path that does not exist is "no such checkpoint"; then every field is checked
    meta = read_policy_meta(path, allowed_env_ids, allow_paths)
    folder = path if path.is_dir() else path.parent
    check_compatible(meta, str(folder), env_id, obs_mode)
    state = load_state(folder, read_model_bytes(folder, meta, require_sha256))
    from gpusched_lab.agents.common import make_env

    probe = env if env is not None else make_env(meta["env_id"], meta["env_kwargs"], meta["obs_mode"])
    if env is not None:
        spec = getattr(env, "spec", None)
        check_compatible(
            meta, str(folder), spec.id if spec else None, getattr(env.unwrapped, "obs_mode", None)
        )
    cfg = build_config(NetworkConfig, meta["network"], str(folder / META_FILE), "network")
    if env is not None and meta["policy"] != "logits":  # PPO's action net is sized by the action count
        from gpusched_lab.agents.nets.networks import for_env

        cfg = for_env(cfg, env)  # a GNN runs on any cluster size (its parameters do not depend on it)
    module = policy_module(meta["policy"], cfg, probe.observation_space)
    try:
        module.load_state_dict(state)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0]
        raise CheckpointCorruptError(
            f"{folder / MODEL_FILE}: weights do not fit the network {META_FILE} describes ({first})"
        ) from None
    agent = Agent(module.to(device), meta, probe.observation_space, str(folder), device)
    if env is not None:
        agent.check_env(env)
    else:
        probe.close()
    return agent


def scorer_of(module: nn.Module) -> ActionScorer:
    return module.scorer if isinstance(module, PPOPolicy) else module
