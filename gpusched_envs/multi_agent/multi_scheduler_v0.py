"""The previous version's module name of :mod:`gpusched_envs.multi_agent.multi_scheduler_v1` (the same envs; v1
changed the semantics: invalid actions never deadlock, fixed info keys, synthetic workload specs sized to the
cluster). Kept importable for one release; use ``multi_scheduler_v1``."""

from gpusched_envs.multi_agent.multi_scheduler_v1 import (
    HeuristicMultiAgent,
    MultiSchedulerEnv,
    env,
    parallel_env,
    raw_env,
)

__all__ = ["HeuristicMultiAgent", "MultiSchedulerEnv", "env", "parallel_env", "raw_env"]
