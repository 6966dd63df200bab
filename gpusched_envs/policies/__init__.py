"""Scheduler interface and classical heuristics (they run on the simulator without RL)."""

from gpusched_envs.policies.base import Policy
from gpusched_envs.policies.placement import PLACEMENTS, get_placement
from gpusched_envs.policies.playable import NotPlayableError, check_playable
from gpusched_envs.policies.schedulers import (
    CLAIRVOYANT_POLICIES,
    FIFO,
    NON_CLAIRVOYANT_POLICIES,
    POLICIES,
    PREEMPTIVE_POLICIES,
    SJF,
    SRTF,
    Gandiva,
    Tiresias,
    comparable_policies,
    is_clairvoyant,
    make_policy,
)

__all__ = [
    "CLAIRVOYANT_POLICIES",
    "FIFO",
    "NON_CLAIRVOYANT_POLICIES",
    "PREEMPTIVE_POLICIES",
    "PLACEMENTS",
    "POLICIES",
    "SJF",
    "SRTF",
    "Gandiva",
    "NotPlayableError",
    "Policy",
    "Tiresias",
    "check_playable",
    "comparable_policies",
    "get_placement",
    "is_clairvoyant",
    "make_policy",
]
