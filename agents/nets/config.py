"""The configuration of the networks (:class:`NetworkConfig`, stored in a checkpoint's ``meta.json``) and the
layout checks between a trained network and an env. Imports no torch: checking a checkpoint against an env needs
none."""

from __future__ import annotations

from dataclasses import asdict, dataclass

ENCODERS = ("gnn", "cnn", "mlp")
OBS_MODE_OF_ENCODER = {"gnn": "graph", "cnn": "image", "mlp": "flat"}
SLOT_KINDS = ("jobs", "servers", "rules", "none")


@dataclass(frozen=True)
class NetworkConfig:
    """Everything needed to rebuild a network (stored in a checkpoint's ``meta.json``)."""

    encoder: str  # gnn | cnn | mlp
    num_actions: int  # A = action_mask length
    slots: str  # jobs | servers | none
    num_gpus: int  # padded layout sizes of the env
    num_servers: int
    num_racks: int
    max_server_gpus: int
    window: int
    hidden: int = 64
    layers: int = 2  # GNN: up/down sweeps; CNN/MLP: hidden layers
    # > 0: the env's obs["hint"] (a heuristic's action, JobSelect-v1(hint=...)) is added to the scores times a
    # learned weight starting at this value, so the policy starts as the rule and learns where to depart from it
    hint_logit: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


def config_for_env(
    env, encoder: str, hidden: int = 64, layers: int = 2, slots: str | None = None, hint_logit: float = 0.0
) -> NetworkConfig:
    """The network config matching an env's layout and action space (``slots`` detected when not given)."""
    if encoder not in ENCODERS:
        raise ValueError(f"encoder must be one of {', '.join(ENCODERS)}, got {encoder!r}")
    u = env.unwrapped
    a = int(env.observation_space["action_mask"].shape[-1])
    lo = getattr(u, "layout", None)
    if lo is None:  # not a cluster env (DAGSchedule-v1): its own GNN (agents.nets.dag) or the MLP
        env_id = u.spec.id if u.spec is not None else type(u).__name__
        if encoder == "gnn" and hasattr(u, "max_tasks") and getattr(u, "obs_mode", None) == "graph":
            return NetworkConfig(encoder, a, "dag", a, 0, 0, 0, int(u.max_tasks), hidden, layers)
        if encoder != "mlp":
            raise ValueError(
                f"encoder {encoder!r} reads the cluster observations of JobSelect, WorkerPlacement and DelayTuning; "
                f"{env_id} has none: use encoder=mlp (flat), or encoder=gnn with obs_mode='graph' (a DAG env's "
                "own task-DAG network)"
            )
        return NetworkConfig(encoder, a, "none", 0, 0, 0, 0, 0, hidden, layers)
    if slots is None:
        if encoder == "mlp":
            slots = "none"
        elif getattr(u, "rules", None) is not None:  # JobSelect-v1(rules=...): one action per rule
            slots = "rules"
        elif a == lo.window + 1 and hasattr(u, "wait_action"):
            slots = "jobs"
        elif a == lo.num_servers + 1 and hasattr(u, "defer_action"):
            slots = "servers"
        else:
            slots = "none"
    if slots not in SLOT_KINDS:
        raise ValueError(f"slots must be one of {', '.join(SLOT_KINDS)}, got {slots!r}")
    if hint_logit and "hint" not in env.observation_space.spaces:
        raise ValueError(
            f"hint_logit={hint_logit} adds the env's obs['hint'] to the policy's logits, but this env has no hint: "
            "make it with hint=<heuristic> (JobSelect-v1), or set hint_logit to 0"
        )
    return config_for_layout(lo, encoder, a, slots, hidden, layers, hint_logit)


def config_for_layout(
    lo, encoder: str, num_actions: int, slots: str, hidden: int = 64, layers: int = 2, hint_logit: float = 0.0
) -> NetworkConfig:
    """The network config of a cluster encoder's padded layout (``envs.encoding.Layout``)."""
    return NetworkConfig(
        encoder=encoder,
        num_actions=num_actions,
        slots=slots,
        num_gpus=lo.num_gpus,
        num_servers=lo.num_servers,
        num_racks=lo.num_racks,
        max_server_gpus=lo.max_server_gpus,
        window=lo.window,
        hidden=hidden,
        layers=layers,
        hint_logit=float(hint_logit),
    )


GNN_FEATURE_KEYS = ("node_features", "edge_features", "job_features", "context")


def layout_mismatch(encoder: str, trained_space, env_space, fixed_actions: bool = False) -> str | None:
    """Why a network trained on ``trained_space`` cannot read ``env_space`` (None when it can). The GNN reads any
    cluster size and window (same feature columns); the CNN and MLP need the very same shapes. ``fixed_actions``:
    the policy also needs the same number of actions (a PPO policy's action net is a linear layer over them)."""
    mine = {k: tuple(s.shape) for k, s in trained_space.spaces.items()}
    theirs = {k: tuple(s.shape) for k, s in env_space.spaces.items()}
    if encoder == "gnn":
        if set(mine) != set(theirs):
            return f"observation keys differ ({sorted(mine)} vs {sorted(theirs)})"
        for k in GNN_FEATURE_KEYS:
            if k in mine and mine[k][-1:] != theirs[k][-1:]:  # DAGSchedule-v1 has no job_features
                return f"{k} has {theirs[k][-1]} feature columns, the network reads {mine[k][-1]}"
        if fixed_actions and mine["action_mask"] != theirs["action_mask"]:
            return f"{theirs['action_mask'][0]} actions, the policy has {mine['action_mask'][0]}"
        return None
    if mine != theirs:
        return (
            f"observation shapes {theirs} differ from the trained {mine} (another cluster layout or window)"
        )
    return None
