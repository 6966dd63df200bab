"""TorchRL envs of the suite.

:func:`make_env` builds a ``GymWrapper`` over one env or over a Gymnasium vector env of ``num_envs`` copies
(``autoreset_mode=DISABLED``: TorchRL resets the finished sub-envs itself), reads a fixed info
(:class:`~gpusched_envs.wrappers.FixedInfo`: the env's numeric entries and the episode's ``avg_jct`` /
``makespan``, NaN where the env's info has no value) and appends the ``ActionMask`` transform on the (batched) env, so random
and policy actions respect the mask. :func:`make_multi_agent_env` wraps ``multi_scheduler_v1`` with
``PettingZooWrapper`` (per-agent masks, one group or one group per agent).

``torchrl`` is imported inside the functions; without it they raise an ImportError naming the ``integrations``
extra.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gpusched_envs.integrations.common import EnvFactory, FixedAgentInfo, require

__all__ = ["make_env", "make_multi_agent_env"]


def _fixed_info(env):
    from gpusched_envs.wrappers import FixedInfo

    return FixedInfo(env)


def make_env(
    env_id: str = "gpusched/JobSelect-v1",
    num_envs: int = 0,
    *,
    vectorization: str = "sync",
    wrappers: Sequence[Callable] = (),
    action_mask: bool = True,
    read_info: bool = True,
    device: str = "cpu",
    **env_kwargs,
):
    """A TorchRL env of ``env_id`` built with ``env_kwargs``.

    Args:
        num_envs: 0: one env (batch size ``[]``); ``n >= 1``: a Gymnasium vector env of ``n`` copies (batch size
            ``[n]``), ``vectorization`` ``"sync"`` (one process) or ``"async"`` (one process per copy; the copies
            are built by a picklable factory that registers the ids in each worker).
        wrappers: Gymnasium wrappers (callables ``env -> env``) applied to each copy before TorchRL sees it, e.g.
            ``gpusched_envs.wrappers.FlattenFeatures``.
        action_mask: append ``torchrl.envs.ActionMask`` (the action spec's mask follows the observation's
            ``action_mask``).
        read_info: read the fixed info (``time``, ``queued``, ``running`` / ``makespan``, and ``avg_jct``) into
            the tensordict.
    """
    require("torchrl", "gpusched_envs.integrations.torchrl")
    import gymnasium as gym
    from torchrl.envs import ActionMask, GymWrapper, TransformedEnv

    if vectorization not in ("sync", "async"):
        raise ValueError(f"vectorization must be 'sync' or 'async', got {vectorization!r}")
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 0:
        raise ValueError(f"num_envs must be an integer >= 0, got {num_envs!r}")
    chain = (*wrappers, _fixed_info) if read_info else tuple(wrappers)
    factory = EnvFactory(env_id, env_kwargs, chain)
    if num_envs == 0:
        env = GymWrapper(factory(), device=device)
    else:
        vec = gym.vector.SyncVectorEnv if vectorization == "sync" else gym.vector.AsyncVectorEnv
        env = GymWrapper(
            vec([factory] * num_envs, autoreset_mode=gym.vector.AutoresetMode.DISABLED), device=device
        )
    if read_info:
        env = env.auto_register_info_dict()
    return TransformedEnv(env, ActionMask()) if action_mask else env


def make_multi_agent_env(
    *,
    group_map: str | dict | None = "one_group",
    return_state: bool = False,
    seed: int | None = None,
    device: str = "cpu",
    **env_kwargs,
):
    """``multi_scheduler_v1.parallel_env(**env_kwargs)`` through TorchRL's ``PettingZooWrapper``.

    Each agent's ``action_mask`` becomes the mask of its action spec (``use_mask``: agents that finished are
    masked out too); the per-agent info is fixed (:class:`~gpusched_envs.integrations.common.FixedAgentInfo`).

    Args:
        group_map: ``"one_group"`` (all agents in one group, ``"agents"``; a shared policy), ``"per_agent"``
            (one group per agent) or a dict ``{group: [agents]}``.
        return_state: also give the env's global ``state()`` (for a centralised critic).
    """
    require("torchrl", "gpusched_envs.integrations.torchrl")
    from torchrl.envs import PettingZooWrapper
    from torchrl.envs.utils import MarlGroupMapType

    from gpusched_envs.multi_agent import multi_scheduler_v1

    maps = {"one_group": MarlGroupMapType.ALL_IN_ONE_GROUP, "per_agent": MarlGroupMapType.ONE_GROUP_PER_AGENT}
    if isinstance(group_map, str):
        if group_map not in maps:
            raise ValueError(f"group_map must be one of {sorted(maps)} or a dict, got {group_map!r}")
        group_map = maps[group_map]
    env = FixedAgentInfo(multi_scheduler_v1.parallel_env(**env_kwargs))
    return PettingZooWrapper(
        env, group_map=group_map, return_state=return_state, use_mask=True, seed=seed, device=device
    )
