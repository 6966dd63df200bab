"""Training configuration: defaults < YAML file (``--config``) < command-line options < ``--set key=value``.

A config file (``train/configs/*.yaml``, read with ``yaml.safe_load``)::

    env: gpusched/JobSelect-v0
    env_kwargs: {cluster: topdrl, reward: jct, num_jobs: 400, load: 0.9}
    steps: 30000
    seed: 0
    num_envs: 1
    eval_every: 5000          # env steps between evaluations (0: only at the end)
    eval_seeds: [10000, 10001, 10002]
    checkpoint_every: 5000    # env steps between checkpoints (0: only at the end)
    args: {encoder: gnn, learning_rate: 0.0005}   # fields of DDQNArgs / PPOArgs

``--set`` keys: a top-level key (``steps=1000``), an algorithm argument (``learning_rate=1e-3`` or
``args.learning_rate=1e-3``) or an env kwarg (``env_kwargs.load=1.0``); values are parsed as YAML scalars.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import yaml

CONFIG_DIR = Path(__file__).parent / "configs"


@dataclass
class RunConfig:
    algorithm: str  # ddqn | ppo | topdrl
    env: str = "gpusched/JobSelect-v0"
    env_kwargs: dict = field(default_factory=dict)
    steps: int = 10_000
    seed: int = 0
    num_envs: int = 1
    eval_every: int = 0
    eval_seeds: list[int] = field(default_factory=lambda: [10_000, 10_001, 10_002])
    checkpoint_every: int = 0
    progress: bool = True
    args: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


TOP_KEYS = {f.name for f in dataclasses.fields(RunConfig)} - {"algorithm"}


def resolve_config_path(name: str | Path) -> Path:
    """A path, or the name of a file in ``train/configs`` (with or without ``.yaml``)."""
    p = Path(name)
    if p.exists():
        return p
    for candidate in (CONFIG_DIR / p, CONFIG_DIR / f"{p}.yaml"):
        if candidate.exists():
            return candidate
    known = ", ".join(sorted(c.stem for c in CONFIG_DIR.glob("*.yaml")))
    raise FileNotFoundError(f"config {name!s} not found (neither a path nor one of train/configs: {known})")


def load_yaml(path: str | Path) -> dict:
    path = resolve_config_path(path)
    doc = yaml.safe_load(path.read_text()) or {}
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: a config is a mapping of keys to values")
    unknown = set(doc) - TOP_KEYS
    if unknown:
        raise ValueError(f"{path}: unknown keys {sorted(unknown)} (known: {sorted(TOP_KEYS)})")
    return doc


def apply_set(cfg: RunConfig, items: list[str], arg_fields: set[str]) -> None:
    """Apply ``key=value`` overrides in place."""
    for item in items:
        if "=" not in item:
            raise ValueError(f"--set takes key=value, got {item!r}")
        key, raw = item.split("=", 1)
        value = yaml.safe_load(raw) if raw else None
        if key.startswith("env_kwargs."):
            cfg.env_kwargs[key.split(".", 1)[1]] = value
        elif key.startswith("args.") or key in arg_fields:
            name = key.split(".", 1)[1] if key.startswith("args.") else key
            if name not in arg_fields:
                raise ValueError(
                    f"--set {key}: {cfg.algorithm} has no argument {name!r} (known: {sorted(arg_fields)})"
                )
            cfg.args[name] = value
        elif key in TOP_KEYS:
            setattr(cfg, key, value)
        else:
            raise ValueError(
                f"--set {key}: not a run key ({', '.join(sorted(TOP_KEYS))}), an algorithm argument or env_kwargs.*"
            )


def build_args(dataclass_type, values: dict):
    """The algorithm's argument dataclass from a dict, rejecting unknown names."""
    names = {f.name for f in dataclasses.fields(dataclass_type)}
    unknown = set(values) - names
    if unknown:
        raise ValueError(
            f"unknown {dataclass_type.__name__} fields {sorted(unknown)} (known: {sorted(names)})"
        )
    return dataclass_type(**values)
