"""Scheduler interface and classical heuristics (they run on the simulator without RL)."""

from gpusched_envs.policies.base import Policy
from gpusched_envs.policies.placement import PLACEMENTS, get_placement
from gpusched_envs.policies.schedulers import FIFO, POLICIES, SJF, SRTF, Gandiva, Tiresias, make_policy

__all__ = [
    "FIFO",
    "PLACEMENTS",
    "POLICIES",
    "SJF",
    "SRTF",
    "Gandiva",
    "Policy",
    "Tiresias",
    "get_placement",
    "make_policy",
]
