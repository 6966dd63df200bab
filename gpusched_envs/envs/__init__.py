"""Gymnasium environments. Importing this module registers every id, in this one place:

==============================  ========================================================================
``gpusched/JobSelect-v1``       TopDRL: pick a job from a queue window; a placer picks its GPUs
``gpusched/WorkerPlacement-v1`` MetaPlace: place the head job's workers one server at a time
``gpusched/DelayTuning-v1``     NetSens: set delay-scheduling timers per network-sensitivity class
``gpusched/DAGSchedule-v1``     WORL-RTGS: build or improve a DAG's GPU assignment
==============================  ========================================================================

The ``-v0`` ids are registered only to refuse: ``gym.make("gpusched/JobSelect-v0")`` raises
``gymnasium.error.DeprecatedEnv`` naming the ``-v1`` id. v1 changed the semantics: invalid actions resolve to a safe
action so every episode ends, infos have fixed keys and dtypes, synthetic workload specs are sized to the cluster
(masked trajectories are the same as v0's).

Entry points are strings, so registration does not import the env modules (nor the simulator) until ``gym.make``.

Subprocess workers (``SubprocVecEnv``, ``AsyncVectorEnv`` with the ``spawn`` start method, e.g. from a notebook)
start without the ids: give them a factory that imports this package, :func:`gpusched_envs.make_env_fn`::

    from gpusched_envs import make_env_fn
    from stable_baselines3.common.vec_env import SubprocVecEnv
    venv = SubprocVecEnv([make_env_fn("gpusched/JobSelect-v1", cluster="tiny") for _ in range(4)],
                         start_method="spawn")

or name the module in the id, which makes ``gym.make`` import it: ``gym.make("gpusched_envs:gpusched/JobSelect-v1")``.

Every ``-v1`` id also has a ``vector_entry_point`` (:data:`VECTOR_ENTRY_POINTS`):
``gymnasium.make_vec(id, num_envs=N, **env_kwargs)`` builds the native vector env of
:mod:`gpusched_envs.envs.vector` (N copies stepped in one process, batched buffers, masks and metrics);
``vectorization_mode="sync"`` or ``"async"`` builds Gymnasium's vector envs over ``gym.make`` copies as before.
"""

from __future__ import annotations

import gymnasium as gym

# the current id of every env and its entry point
CURRENT_IDS = {
    "gpusched/JobSelect-v1": "gpusched_envs.envs.job_select:JobSelectEnv",
    "gpusched/WorkerPlacement-v1": "gpusched_envs.envs.worker_placement:WorkerPlacementEnv",
    "gpusched/DelayTuning-v1": "gpusched_envs.envs.delay_tuning:DelayTuningEnv",
    "gpusched/DAGSchedule-v1": "gpusched_envs.envs.dag_schedule:DAGScheduleEnv",
}
# the native vector env of every current id (gymnasium.make_vec's default for these ids)
VECTOR_ENTRY_POINTS = {
    "gpusched/JobSelect-v1": "gpusched_envs.envs.vector:JobSelectVectorEnv",
    "gpusched/WorkerPlacement-v1": "gpusched_envs.envs.vector:WorkerPlacementVectorEnv",
    "gpusched/DelayTuning-v1": "gpusched_envs.envs.vector:DelayTuningVectorEnv",
    "gpusched/DAGSchedule-v1": "gpusched_envs.envs.vector:DAGScheduleVectorEnv",
}
# the previous version of each id: registered so that gym.make("...-v0") raises an error naming the -v1 id (with
# V0_REFUSED False it would make the -v1 env instead)
V0_IDS = {env_id.replace("-v1", "-v0"): env_id for env_id in CURRENT_IDS}
V0_REFUSED = True
# the ids a checkpoint may name: the current ones
ENTRY_POINTS = dict(CURRENT_IDS)

CLUSTER_ENVS = ("gpusched/JobSelect-v1", "gpusched/WorkerPlacement-v1", "gpusched/DelayTuning-v1")


def make_previous_version(*, gpusched_current_id: str, **kwargs):
    """The entry point of a ``-v0`` id: the env of ``gpusched_current_id`` (its ``-v1``), or, with
    :data:`V0_REFUSED`, an error naming that id."""
    from gymnasium.envs.registration import load_env_creator

    if V0_REFUSED:
        old = gpusched_current_id.replace("-v1", "-v0")
        raise gym.error.DeprecatedEnv(
            f"{old} is no longer offered: use {gpusched_current_id} (invalid actions resolve to a safe action, "
            "fixed info keys, synthetic workloads sized to the cluster)"
        )
    return load_env_creator(CURRENT_IDS[gpusched_current_id])(**kwargs)


class SingleEnvWrappers(tuple):
    """The ``additional_wrappers`` of a current id: ``gym.make`` applies them as usual (it iterates them), while
    their length reads 0, because ``gym.make_vec`` refuses any additional wrapper in its ``vector_entry_point``
    mode. The native vector env does what they add to a single env itself (it fills ``info["metrics"]`` when its
    ``max_episode_steps`` truncates an episode), so the vector entry point loses nothing."""

    def __len__(self) -> int:
        return 0


def register_envs() -> None:
    """Register every id, ``-v1`` and the refusing ``-v0`` (idempotent; ids whose module is not importable
    are skipped)."""
    import importlib.util

    from gymnasium.envs.registration import WrapperSpec

    # fills info["metrics"] after gym.make's TimeLimit truncates an episode
    wrappers = (WrapperSpec("EpisodeMetrics", "gpusched_envs.envs.base:EpisodeMetrics", {}),)
    for env_id, entry in CURRENT_IDS.items():
        if importlib.util.find_spec(entry.split(":")[0]) is None:
            continue
        if env_id not in gym.registry:
            gym.register(
                id=env_id,
                entry_point=entry,
                vector_entry_point=VECTOR_ENTRY_POINTS.get(env_id),
                additional_wrappers=SingleEnvWrappers(wrappers),
            )
    for old, current in V0_IDS.items():
        if old not in gym.registry and current in gym.registry:
            gym.register(
                id=old,
                entry_point="gpusched_envs.envs:make_previous_version",
                kwargs={"gpusched_current_id": current},
                additional_wrappers=wrappers,
            )


def list_env_specs(**kwargs) -> list[tuple[str, object, object]]:
    """``(id, action space, observation space)`` of every registered env, built with default arguments
    (plus ``kwargs``, e.g. ``obs_mode="flat"``); for the command line."""
    out = []
    for env_id in CURRENT_IDS:
        if env_id not in gym.registry:
            continue
        env = gym.make(env_id, **kwargs)
        out.append((env_id, env.action_space, env.observation_space))
        env.close()
    return out


register_envs()

__all__ = [
    "CURRENT_IDS",
    "ENTRY_POINTS",
    "V0_IDS",
    "V0_REFUSED",
    "VECTOR_ENTRY_POINTS",
    "SingleEnvWrappers",
    "list_env_specs",
    "make_previous_version",
    "register_envs",
]
