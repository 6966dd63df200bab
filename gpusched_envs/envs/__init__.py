"""Gymnasium environments. Importing this module registers every id, in this one place:

==============================  ========================================================================
``gpusched/JobSelect-v0``       TopDRL: pick a job from a queue window; a placer picks its GPUs
``gpusched/WorkerPlacement-v0`` MetaPlace: place the head job's workers one server at a time
``gpusched/DelayTuning-v0``     NetSens: set delay-scheduling timers per network-sensitivity class
``gpusched/DAGSchedule-v0``     WORL-RTGS: build or improve a DAG's GPU assignment
==============================  ========================================================================

Entry points are strings, so registration does not import the env modules (nor the simulator) until ``gym.make``.
"""

from __future__ import annotations

import gymnasium as gym

ENTRY_POINTS = {
    "gpusched/JobSelect-v0": "gpusched_envs.envs.job_select:JobSelectEnv",
    "gpusched/WorkerPlacement-v0": "gpusched_envs.envs.worker_placement:WorkerPlacementEnv",
    "gpusched/DelayTuning-v0": "gpusched_envs.envs.delay_tuning:DelayTuningEnv",
    "gpusched/DAGSchedule-v0": "gpusched_envs.envs.dag_schedule:DAGScheduleEnv",
}

CLUSTER_ENVS = ("gpusched/JobSelect-v0", "gpusched/WorkerPlacement-v0", "gpusched/DelayTuning-v0")


def register_envs() -> None:
    """Register every id (idempotent; ids whose module is not importable are skipped)."""
    import importlib.util

    from gymnasium.envs.registration import WrapperSpec

    for env_id, entry in ENTRY_POINTS.items():
        if env_id in gym.registry:
            continue
        module = entry.split(":")[0]
        if importlib.util.find_spec(module) is None:
            continue
        # fills info["metrics"] after gym.make's TimeLimit truncates an episode
        wrappers = (WrapperSpec("EpisodeMetrics", "gpusched_envs.envs.base:EpisodeMetrics", {}),)
        gym.register(id=env_id, entry_point=entry, additional_wrappers=wrappers)


def list_env_specs(**kwargs) -> list[tuple[str, object, object]]:
    """``(id, action space, observation space)`` of every registered env, built with default arguments
    (plus ``kwargs``, e.g. ``obs_mode="flat"``); for the command line."""
    out = []
    for env_id in ENTRY_POINTS:
        if env_id not in gym.registry:
            continue
        env = gym.make(env_id, **kwargs)
        out.append((env_id, env.action_space, env.observation_space))
        env.close()
    return out


register_envs()

__all__ = ["ENTRY_POINTS", "list_env_specs", "register_envs"]
