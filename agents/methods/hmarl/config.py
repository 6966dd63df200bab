"""HMARL's run configuration: the learner's arguments (:class:`HMARLArgs`), a training run (:class:`HMARLConfig`,
``gpusched train hmarl --config ...``), the imitation warm start's block (:class:`ImitationArgs`), reading a YAML
config (:func:`load_config`) and ``--set key=value`` overrides (:func:`apply_overrides`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from gpusched_lab.agents.common import REPO_ROOT, read_config

from gpusched_envs.validation import checked, positive_int

CRITICS = ("central", "local")
CONFIG_DIR = REPO_ROOT / "train" / "configs"


@dataclass
class HMARLArgs:
    critic: str = "central"
    """central (MAPPO: critic on env.state()) | local (independent learners: critic on the agent's observation)"""
    hidden: int = 32
    """width of the GNN and heads"""
    layers: int = 1
    """GNN up/down sweeps"""
    learning_rate: float = 5e-4
    """Adam step size"""
    num_envs: int = checked(4, positive_int())
    """env copies stepped together (in one process)"""
    n_steps: int = 32
    """rollout length per env copy (each step gives one sample per agent)"""
    n_epochs: int = 4
    """passes over each rollout"""
    batch_size: int = 256
    """minibatch size (agent samples)"""
    gamma: float = 0.995
    """discount"""
    gae_lambda: float = 0.95
    """GAE λ"""
    clip_range: float = 0.2
    """PPO clip"""
    ent_coef: float = 0.01
    """entropy bonus"""
    vf_coef: float = 0.5
    """value-loss weight"""
    max_grad_norm: float = 0.5
    """gradient clipping"""
    reward_scale: float = 0.1
    """rewards are multiplied by this before learning"""
    wait_logit_init: float = -2.0
    """initial bias of the wait logit: the policy starts near work-conserving"""
    interference_model: str | None = None
    """folder of an agents.methods.hmarl.interference model: its predicted slowdown becomes a candidate feature (None: zeros)"""
    seed: int = 0
    """seeds python, numpy, torch and the envs"""
    device: str = "auto"
    """auto | cpu | cuda[:N]"""
    torch_threads: int = 1
    """CPU threads for torch (0: torch's default)"""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class HMARLConfig:
    """A training run (``gpusched train hmarl --config ...``; YAML keys as here)."""

    env_kwargs: dict = field(default_factory=dict)
    steps: int = 20_000  # env steps summed over the env copies (each gives one sample per agent)
    eval_every: int = 0  # env steps between evaluations (0: only at the end)
    eval_seeds: list[int] = field(default_factory=lambda: [10_000, 10_001, 10_002])
    eval_env_kwargs: dict = field(
        default_factory=dict
    )  # merged over env_kwargs for evaluation (validation data)
    checkpoint_every: int = 0
    args: dict = field(default_factory=dict)
    imitation: dict | None = None  # an ImitationArgs mapping: DAgger warm start before PPO (None: none)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ImitationArgs:
    """DAgger warm start (Ross et al., AISTATS'11; as :mod:`train.bc` for JobSelect): a config's ``imitation``
    block. Round 0 rolls out the expert; round r acts per agent with the expert's action with probability
    ``beta_decay**r``, else the actor's own (argmax), and every agent's state is labelled with the expert's action."""

    expert: str = "sjf-consolidate+backfill"
    """per-agent heuristic to imitate (HeuristicMultiAgent.from_name: ORDER-PLACEMENT[+backfill])"""
    rounds: int = 3
    """DAgger rounds (1 = plain behaviour cloning)"""
    episodes: int = 4
    """episodes collected per round"""
    epochs: int = 4
    """passes over all the data collected so far, after each round"""
    batch_size: int = 256
    learning_rate: float = 1e-3
    value_coef: float = 0.5
    """weight of the critic's regression on the discounted returns (scaled by their variance)"""
    beta_decay: float = 0.5
    max_steps: int = 5_000
    """cap on one collected episode's steps"""

    @classmethod
    def from_dict(cls, doc: dict) -> ImitationArgs:
        if not isinstance(doc, dict):
            raise ValueError(
                f"imitation: expected a mapping (e.g. {{expert: sjf-consolidate+backfill}}), got {doc!r}"
            )
        unknown = sorted(set(doc) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(
                f"imitation: unknown key(s) {', '.join(unknown)}; known: {', '.join(cls.__dataclass_fields__)}"
            )
        args = cls(**doc)
        for name in ("rounds", "episodes", "epochs", "batch_size", "max_steps"):
            value = getattr(args, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"imitation.{name} must be an integer >= 1, got {value!r}")
        if not 0.0 <= float(args.beta_decay) <= 1.0:
            raise ValueError(f"imitation.beta_decay must be in [0, 1], got {args.beta_decay!r}")
        from gpusched_envs.multi_agent.multi_scheduler import HeuristicMultiAgent

        HeuristicMultiAgent.from_name(args.expert)  # a bad name fails here, before any rollout
        return args


def load_config(path: str | Path) -> HMARLConfig:
    """A YAML run configuration (``train/configs/hmarl*.yaml`` by name, or a path), read with
    :func:`agents.common.read_config` (``yaml.safe_load`` with limits, unknown keys refused)."""
    from gpusched_envs.validation import FIELD_RULES, check_fields, rules_of

    where, doc = read_config(path, CONFIG_DIR, HMARLConfig.__dataclass_fields__)
    check_fields(
        {k: v for k, v in doc.items() if k in ("steps", "eval_every", "checkpoint_every")},
        str(where),
        FIELD_RULES,
    )
    for key in ("env_kwargs", "eval_env_kwargs", "args"):
        if key in doc and not isinstance(doc[key], dict):
            raise ValueError(f"{where}: {key} must be a mapping, got {doc[key]!r}")
    if isinstance(doc.get("args"), dict):
        check_fields(
            doc["args"], str(where), rules_of(HMARLArgs), known=HMARLArgs.__dataclass_fields__, prefix="args."
        )
    return HMARLConfig(**doc)


def apply_overrides(cfg: HMARLConfig, items: list[str]) -> None:
    """``--set key=value``: a top-level key (``steps=1000``, ``imitation=null``), an algorithm argument
    (``critic=local`` or ``args.critic=local``), an env kwarg (``env_kwargs.num_agents=8``) or an imitation key
    (``imitation.rounds=2``); values parsed as YAML scalars."""

    from gpusched_envs.validation import FIELD_RULES, check_key, parse_set_value, rules_of

    top = set(HMARLConfig.__dataclass_fields__) - {"args", "env_kwargs", "eval_env_kwargs"}
    arg_fields = set(HMARLArgs.__dataclass_fields__)
    rules = {**FIELD_RULES, **rules_of(HMARLArgs)}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ValueError(f"--set takes key=value, got {item!r}")
        value = parse_set_value(key, raw)
        where = f"--set {key}"
        prefix, _, rest = key.partition(".")
        if prefix in ("env_kwargs", "eval_env_kwargs", "imitation") and rest:
            if not rest.isidentifier() or rest.startswith("_"):
                raise ValueError(f"{where}: {rest!r} is not a valid name")
            if prefix == "imitation":  # imitation.rounds=2 (``imitation=null`` turns the warm start off)
                check_key(rest, ImitationArgs.__dataclass_fields__, where, "imitation key")
                if rest in rules:
                    value = rules[rest].check(value, where)
                cfg.imitation = {**(cfg.imitation or {}), rest: value}
            else:
                setattr(cfg, prefix, {**getattr(cfg, prefix), rest: value})
        elif key.removeprefix("args.") in arg_fields and not key.startswith("_"):
            name = key.removeprefix("args.")
            if name in rules:
                value = rules[name].check(value, where)
            cfg.args = {**cfg.args, name: value}
        else:
            known = sorted(top | arg_fields | {"env_kwargs.NAME", "eval_env_kwargs.NAME", "imitation.NAME"})
            key = check_key(key, known, "--set", "key")
            if key in rules:
                value = rules[key].check(value, where)
            setattr(cfg, key, value)
