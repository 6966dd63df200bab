"""The previous version of :mod:`gpusched_envs.multi_agent.multi_scheduler_v1`, refused: v1 changed the semantics
(an invalid action of the agent that must place becomes its first placement, so episodes never deadlock; infos have
fixed keys and dtypes; synthetic workload specs are sized to the cluster). Each constructor raises an error naming
``multi_scheduler_v1``."""

from __future__ import annotations

import gymnasium as gym

MESSAGE = (
    "multi_scheduler_v0 is no longer offered: use gpusched_envs.multi_agent.multi_scheduler_v1 (invalid actions "
    "never deadlock, fixed info keys, synthetic workloads sized to the cluster)"
)


def parallel_env(**kwargs):
    raise gym.error.DeprecatedEnv(MESSAGE)


def env(**kwargs):
    raise gym.error.DeprecatedEnv(MESSAGE)


def raw_env(**kwargs):
    raise gym.error.DeprecatedEnv(MESSAGE)


__all__ = ["env", "parallel_env", "raw_env"]
