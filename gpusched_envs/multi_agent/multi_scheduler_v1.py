"""PettingZoo entry points of the multi-scheduler environment (versioned module, PettingZoo style)::

from gpusched_envs.multi_agent import multi_scheduler_v1
env = multi_scheduler_v1.parallel_env(num_agents=4, cluster="hetero64")   # ParallelEnv
aec = multi_scheduler_v1.env(num_agents=4, cluster="hetero64")            # AEC, via PettingZoo's conversion
"""

from __future__ import annotations

from pettingzoo.utils import conversions, wrappers

from gpusched_envs.multi_agent.multi_scheduler import MultiSchedulerEnv
from gpusched_envs.policies.multi_agent import HeuristicMultiAgent


def parallel_env(**kwargs) -> MultiSchedulerEnv:
    """The ParallelEnv; keyword arguments as :class:`MultiSchedulerEnv`."""
    return MultiSchedulerEnv(**kwargs)


def raw_env(**kwargs):
    """The AEC env without PettingZoo's checking wrappers."""
    return conversions.parallel_to_aec(parallel_env(**kwargs))


def env(**kwargs):
    """The AEC env with PettingZoo's order-enforcing wrapper."""
    return wrappers.OrderEnforcingWrapper(raw_env(**kwargs))


__all__ = ["HeuristicMultiAgent", "MultiSchedulerEnv", "env", "parallel_env", "raw_env"]
