"""Training configuration: defaults < YAML file (``--config``) < command-line options < ``--set key=value``.

A config file (``train/configs/*.yaml``, read with ``yaml.safe_load``)::

    env: gpusched/JobSelect-v1
    env_kwargs: {cluster: topdrl, reward: jct, num_jobs: 400, load: 0.9}
    steps: 30000
    seed: 0
    num_envs: 1
    eval_every: 5000          # env steps between evaluations (0: only at the end)
    eval_seeds: [10000, 10001, 10002]
    eval_choices: [{workload: "philly:start=2017-10-07,jobs=300,load=0.9,gpus=32"}]  # optional: evaluate on these
    checkpoint_every: 5000    # env steps between checkpoints (0: only at the end)
    args: {encoder: gnn, learning_rate: 0.0005}   # fields of DDQNArgs / PPOArgs
    curriculum: [{until: 20000, env_kwargs: {load: 0.6}}]   # optional, see train/curriculum.py
    bc: {policy: tiresias, rounds: 3}   # optional (PPO): imitation warm start, see train/bc.py

``--set`` keys: a top-level key (``steps=1000``), an algorithm argument (``learning_rate=1e-3`` or
``args.learning_rate=1e-3``), an env kwarg (``env_kwargs.load=1.0``) or an imitation key (``bc.rounds=2``); values are parsed as YAML scalars.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

CONFIG_DIR = Path(__file__).parent / "configs"


@dataclass
class RunConfig:
    algorithm: str  # ddqn | ppo | topdrl
    env: str = "gpusched/JobSelect-v1"
    env_kwargs: dict = field(default_factory=dict)
    steps: int = 10_000
    seed: int = 0
    num_envs: int = 1
    eval_every: int = 0
    eval_seeds: list[int] = field(default_factory=lambda: [10_000, 10_001, 10_002])
    # env-kwargs overrides to evaluate on (every seed on each; empty: the run's env): select a checkpoint on
    # held-in trace windows rather than on the synthetic default workload
    eval_choices: list = field(default_factory=list)
    checkpoint_every: int = 0
    progress: bool = True
    args: dict = field(default_factory=dict)
    curriculum: list = field(default_factory=list)  # stages of env kwargs over the run (train/curriculum.py)
    bc: dict = field(default_factory=dict)  # PPO: behaviour-cloning / DAgger warm start (train/bc.py)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


TOP_KEYS = {f.name for f in dataclasses.fields(RunConfig)} - {"algorithm"}


def resolve_config_path(name: str | Path) -> Path:
    """A path, or the name of a file in ``train/configs`` (with or without ``.yaml``): the agents' one resolver
    over :data:`CONFIG_DIR`."""
    from gpusched_lab.agents.common import resolve_config_path as resolve

    return resolve(name, CONFIG_DIR)


def load_yaml(path: str | Path) -> dict:
    path = resolve_config_path(path)
    from gpusched_envs.safety import load_yaml as safe_load_yaml
    from gpusched_envs.validation import FIELD_RULES, check_fields, check_key

    doc = safe_load_yaml(path.read_bytes(), str(path)) or {}  # limits on alias expansion (YAML bombs)
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: a config is a mapping of keys to values")
    for key in doc:
        check_key(key, TOP_KEYS, str(path))
    check_fields({k: v for k, v in doc.items() if k in INT_KEYS}, str(path), FIELD_RULES)
    for key, kind in (("env_kwargs", dict), ("args", dict), ("bc", dict), ("eval_seeds", list)):
        if key in doc and not isinstance(doc[key], kind):
            raise ValueError(
                f"{path}: {key} must be a {'mapping' if kind is dict else 'list'}, got {doc[key]!r}"
            )
    if isinstance(doc.get("args"), dict):
        check_names(doc["args"], f"{path}: args")
    return doc


def check_names(mapping: dict, where: str) -> None:
    """Keys of a mapping handed to a constructor as keyword arguments: plain identifiers, no ``__dunder__``."""
    for key in mapping:
        if not isinstance(key, str) or not key.isidentifier() or key.startswith("_"):
            raise ValueError(f"{where}: {key!r} is not a valid name")


def apply_set(cfg: RunConfig, items: list[str], arg_fields: set[str], arg_rules: dict | None = None) -> None:
    """Apply ``key=value`` overrides in place. A key is a run key, an algorithm argument (``name`` or
    ``args.name``), ``env_kwargs.NAME`` or ``bc.NAME``; an unknown key is refused with the closest known ones, a value
    outside its field's range (NaN, a negative rate, a discount outside (0, 1]) with the field named."""
    from gpusched_envs.validation import FIELD_RULES, check_key, parse_set_value

    rules = {**FIELD_RULES, **(arg_rules or {})}
    for item in items:
        if "=" not in item:
            raise ValueError(f"--set takes key=value, got {item!r}")
        key, raw = item.split("=", 1)
        value = parse_set_value(key, raw)
        where = f"--set {key}"
        prefix, _, rest = key.partition(".")
        if prefix in ("env_kwargs", "bc") and rest:
            check_names({rest: None}, where)
            getattr(cfg, prefix)[rest] = value
            continue
        if prefix == "args" and rest:
            name = check_key(rest, arg_fields, where, f"{cfg.algorithm} argument")
        elif key in arg_fields and not key.startswith("_"):
            name = key
        else:
            known = sorted(TOP_KEYS | set(arg_fields) | {"env_kwargs.NAME", "bc.NAME"})
            key = check_key(key, known, "--set", "key")
            setattr(cfg, key, value)  # run keys are checked with the whole config (validate)
            continue
        if name in rules:
            value = rules[name].check(value, where)
        cfg.args[name] = value


ENV_PREFIX = "gpusched/"


def registered_env_ids() -> list[str]:
    """The project's env ids (``gpusched/...``) in gymnasium's registry."""
    import gymnasium

    import gpusched_envs.envs  # noqa: F401 - registers the ids

    return sorted(i for i in gymnasium.registry if i.startswith(ENV_PREFIX))


def check_env_id(env_id) -> None:
    import gymnasium

    import gpusched_envs.envs  # noqa: F401 - registers the ids

    if not isinstance(env_id, str) or env_id not in gymnasium.registry:
        raise ValueError(f"unknown env id {env_id!r}; registered: {', '.join(registered_env_ids())}")


def check_choice(key: str, value, choices) -> None:
    """A ValueError naming the key and the valid values when ``value`` is not one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{key}: {value!r} is not one of {', '.join(map(str, choices))}")


def check_device(value) -> None:
    import torch

    if not isinstance(value, str) or not value:
        raise ValueError(f"device: {value!r} is not one of auto, cpu, cuda, cuda:N (or another torch device)")
    if value == "auto":
        return
    try:
        torch.device(value)
    except (RuntimeError, ValueError):
        raise ValueError(
            f"device: {value!r} is not one of auto, cpu, cuda, cuda:N (or another torch device)"
        ) from None


INT_KEYS = ("steps", "seed", "num_envs", "eval_every", "checkpoint_every")


def validate(cfg: RunConfig) -> None:
    """Check the resolved configuration (YAML, options and ``--set`` applied): the env id, the enumerated
    algorithm arguments (``encoder``, ``device``; TopDRL's selector is the CNN) and the integer run keys."""
    from gpusched_lab.agents.nets.networks import ENCODERS

    from gpusched_envs.validation import FIELD_RULES, check_cap, check_fields, check_seed

    check_env_id(cfg.env)
    for key in INT_KEYS:
        value = getattr(cfg, key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{key}: expected an integer, got {value!r}")
    for key in INT_KEYS:
        FIELD_RULES[key].check(getattr(cfg, key), key)
    if not isinstance(cfg.env_kwargs, dict):
        raise ValueError(f"env_kwargs: expected a mapping, got {cfg.env_kwargs!r}")
    if not isinstance(cfg.args, dict):
        raise ValueError(f"args: expected a mapping, got {cfg.args!r}")
    if not isinstance(cfg.eval_seeds, list) or not all(
        isinstance(s, int) and not isinstance(s, bool) for s in cfg.eval_seeds
    ):
        raise ValueError(f"eval_seeds: expected a list of integers, got {cfg.eval_seeds!r}")
    check_cap("seeds", len(cfg.eval_seeds), "eval_seeds")
    for seed in cfg.eval_seeds:
        check_seed(seed, "eval_seeds")
    check_names(cfg.env_kwargs, "env_kwargs")
    check_names(cfg.args, "args")
    check_fields(cfg.args, "args", args_rules(cfg.algorithm), prefix="")
    if not isinstance(cfg.eval_choices, list) or not all(isinstance(c, dict) for c in cfg.eval_choices):
        raise ValueError(f"eval_choices: expected a list of env-kwargs mappings, got {cfg.eval_choices!r}")
    encoders = ("cnn",) if cfg.algorithm == "topdrl" else ENCODERS
    if "encoder" in cfg.args:
        check_choice(
            "encoder" if cfg.algorithm != "topdrl" else "encoder (TopDRL)", cfg.args["encoder"], encoders
        )
    if "device" in cfg.args:
        check_device(cfg.args["device"])
    if cfg.curriculum:
        from gpusched_lab.train.curriculum import parse_stages

        parse_stages(cfg.curriculum, {})
    if cfg.bc:
        if cfg.algorithm != "ppo":
            raise ValueError(f"bc: the imitation warm start is for ppo runs, not {cfg.algorithm}")
        from gpusched_lab.train.bc import BCArgs

        BCArgs.from_dict(cfg.bc)


def args_type(algorithm: str):
    """The argument dataclass of a trainer (PPOArgs for ppo, DDQNArgs for ddqn and topdrl)."""
    if algorithm == "ppo":
        from gpusched_lab.agents.algos.ppo import PPOArgs

        return PPOArgs
    from gpusched_lab.agents.algos.ddqn import DDQNArgs

    return DDQNArgs


def args_rules(algorithm: str) -> dict:
    """The range rules of a trainer's arguments (:func:`gpusched_envs.validation.rules_of`)."""
    from gpusched_envs.validation import rules_of

    return rules_of(args_type(algorithm))


def build_args(dataclass_type, values: dict):
    """The algorithm's argument dataclass from a dict, rejecting unknown names."""
    names = {f.name for f in dataclasses.fields(dataclass_type)}
    unknown = set(values) - names
    if unknown:
        raise ValueError(
            f"unknown {dataclass_type.__name__} fields {sorted(unknown)} (known: {sorted(names)})"
        )
    return dataclass_type(**values)
