"""Learning agents for the gpusched envs: networks (GNN / CNN / MLP), Double DQN, MaskablePPO extractors, TopDRL,
checkpoint loading (``agents.load(path)``) and the training-speed benchmark. Imports ``gpusched_envs``, never
``train`` or ``evaluate``."""

from __future__ import annotations

__all__ = ["Agent", "CheckpointMismatchError", "load"]


def __getattr__(name: str):
    # torch and torch_geometric load only when an agent is used
    if name in __all__:
        from gpusched_lab.agents import checkpoint

        return getattr(checkpoint, name)
    raise AttributeError(f"module 'agents' has no attribute {name!r}")
