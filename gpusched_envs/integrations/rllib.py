"""RLlib (new API stack) envs and a PPO configuration for the suite.

RLlib needs four things the envs do not give as they are:

- an env creator that works in remote env runners: :func:`register_env` registers a picklable
  :class:`~gpusched_envs.integrations.common.EnvFactory` under a name (it imports :mod:`gpusched_envs`, so the
  ``gpusched/...`` ids exist in every worker process; ``gym.make`` by id alone raises ``NamespaceNotFound``
  there);
- observations in the layout of RLlib's action-masking module, ``{"observations": Box(float32),
  "action_mask": Box(0, 1, float32)}`` (the default encoders take no nested ``Dict``):
  :class:`~gpusched_envs.wrappers.FlattenFeatures` with ``features_key="observations"``;
- per-agent masks for the multi-agent env: :class:`AgentMaskLayout` gives every agent that layout, and
  ``ParallelPettingZooEnv`` makes it a ``MultiAgentEnv``;
- no env checking: RLlib's checker steps random unmasked actions, which ``invalid_action="raise"`` refuses;
  :func:`ppo_config` sets ``disable_env_checking=True``.

:func:`ppo_config` builds a ``PPOConfig`` with ``ActionMaskingTorchRLModule`` (one policy, or with
``multi_agent=True`` one shared policy or one per agent). ``ray`` is imported inside the functions; without it
they raise an ImportError naming the ``integrations`` extra.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import numpy as np
from gymnasium import spaces
from pettingzoo.utils.wrappers import BaseParallelWrapper

from gpusched_envs.integrations.common import EnvFactory, require
from gpusched_envs.wrappers import MASK_KEY, FlattenFeatures, feature_keys, flat_layout, flat_layout_space

__all__ = [
    "AgentMaskLayout",
    "MultiAgentEnvFactory",
    "ppo_config",
    "register_env",
    "register_multi_agent_env",
    "rllib_env_name",
]

OBS_KEY = "observations"


def masking_layout(env):
    """``FlattenFeatures`` in RLlib's action-masking layout (``observations`` float32, ``action_mask`` float32)."""
    return FlattenFeatures(env, features_key=OBS_KEY, mask_key=MASK_KEY, mask_dtype=np.float32)


def rllib_env_name(env_id: str) -> str:
    """The name :func:`register_env` registers ``env_id`` under (``gpusched/JobSelect-v1`` ->
    ``gpusched-rllib/JobSelect-v1``)."""
    return env_id.replace("gpusched/", "gpusched-rllib/", 1)


def register_env(env_id: str = "gpusched/JobSelect-v1", name: str | None = None, **env_kwargs) -> str:
    """Register with ``ray.tune`` a creator of ``env_id`` (built with ``env_kwargs``, then any entries of
    RLlib's ``env_config``) in the masking layout; returns the name to give ``config.environment(env=...)``."""
    require("ray.tune", "gpusched_envs.integrations.rllib")
    from ray.tune.registry import register_env as tune_register

    name = name or rllib_env_name(env_id)
    tune_register(name, EnvFactory(env_id, env_kwargs, (masking_layout,)))
    return name


class AgentMaskLayout(BaseParallelWrapper):
    """A PettingZoo ``ParallelEnv`` wrapper giving every agent RLlib's masking layout: its feature entries
    flattened to float32 under ``observations`` and its own mask as float32 under ``action_mask``. Infos keep
    only numbers and flags (``time``, ``queued``, ``conflict``, ``invalid_action``, and at the episode's end the
    ``avg_jct`` and ``makespan`` of its metrics)."""

    def __init__(self, env, keys: Sequence[str] | None = None):
        super().__init__(env)
        self.metadata = getattr(env, "metadata", {})
        self.possible_agents = list(env.possible_agents)
        inner = env.observation_space(self.possible_agents[0])
        self.keys = feature_keys(inner, keys)
        self._space = flat_layout_space(inner, self.keys, OBS_KEY, MASK_KEY, np.float32)

    @property
    def agents(self):
        return self.env.agents

    def observation_space(self, agent) -> spaces.Dict:
        return self._space

    def _obs(self, obs: dict) -> dict:
        return {a: flat_layout(o, self.keys, OBS_KEY, MASK_KEY, np.float32) for a, o in obs.items()}

    @staticmethod
    def _info(info: dict) -> dict:
        out = {k: v for k, v in info.items() if isinstance(v, (bool, int, float, np.number, np.bool_))}
        for k in ("avg_jct", "makespan"):
            if info.get("episode_done", True) and k in (info.get("metrics") or {}):
                out[k] = float(info["metrics"][k])
        return out

    def reset(self, seed=None, options=None):
        obs, infos = self.env.reset(seed=seed, options=options)
        return self._obs(obs), {a: self._info(i) for a, i in infos.items()}

    def step(self, actions):
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        return self._obs(obs), rewards, terms, truncs, {a: self._info(i) for a, i in infos.items()}


class MultiAgentEnvFactory:
    """A picklable creator of ``multi_scheduler_v1`` as an RLlib ``MultiAgentEnv`` (``ParallelPettingZooEnv`` over
    :class:`AgentMaskLayout`); ``env_config`` entries override ``env_kwargs``."""

    def __init__(self, env_kwargs: dict | None = None):
        self.env_kwargs = dict(env_kwargs or {})

    def __call__(self, config: dict | None = None):
        from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv

        from gpusched_envs.multi_agent import multi_scheduler_v1

        env = multi_scheduler_v1.parallel_env(**{**self.env_kwargs, **dict(config or {})})
        return ParallelPettingZooEnv(AgentMaskLayout(env))


def register_multi_agent_env(name: str = "gpusched-rllib/multi_scheduler_v1", **env_kwargs) -> str:
    """Register ``multi_scheduler_v1.parallel_env(**env_kwargs)`` as an RLlib ``MultiAgentEnv``; returns ``name``."""
    require("ray.tune", "gpusched_envs.integrations.rllib")
    from ray.tune.registry import register_env as tune_register

    tune_register(name, MultiAgentEnvFactory(env_kwargs))
    return name


def _shared_policy(agent_id, *args, **kwargs) -> str:
    return "shared"


def _own_policy(agent_id, *args, **kwargs) -> str:
    return str(agent_id)


def ppo_config(
    env_id: str = "gpusched/JobSelect-v1",
    env_kwargs: dict | None = None,
    *,
    multi_agent: bool = False,
    shared_policy: bool = True,
    hiddens: Sequence[int] = (64, 64),
    num_env_runners: int = 0,
    train_batch_size: int = 512,
    minibatch_size: int = 128,
    num_epochs: int = 4,
    lr: float = 3e-4,
    seed: int | None = 0,
):
    """A ``PPOConfig`` on ``env_id`` (``multi_agent=False``) or on ``multi_scheduler_v1`` (``multi_agent=True``;
    ``env_id`` is then ignored), with ``ActionMaskingTorchRLModule`` (an MLP of ``hiddens`` on the flattened
    features; invalid actions get logit -inf). Multi-agent: one policy ``"shared"`` for every agent
    (``shared_policy``) or one policy per agent, named after it. Env checking is off (see the module docstring).
    Call ``.build_algo()`` (or ``.build()`` on older RLlib) on the result to train."""
    require("ray.rllib", "gpusched_envs.integrations.rllib")
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.examples.rl_modules.classes.action_masking_rlm import ActionMaskingTorchRLModule

    env_kwargs = dict(env_kwargs or {})
    model_config = {"head_fcnet_hiddens": list(hiddens), "head_fcnet_activation": "relu"}
    module = partial(RLModuleSpec, module_class=ActionMaskingTorchRLModule, model_config=model_config)
    config = PPOConfig()
    if multi_agent:
        from gpusched_envs.multi_agent import multi_scheduler_v1

        name = register_multi_agent_env(**env_kwargs)
        probe = multi_scheduler_v1.parallel_env(**env_kwargs)
        agents = list(probe.possible_agents)
        if shared_policy:
            policies, mapping = {"shared"}, _shared_policy
        else:
            policies, mapping = set(agents), _own_policy
        config = config.environment(env=name, disable_env_checking=True).multi_agent(
            policies=policies, policy_mapping_fn=mapping
        )
        config = config.rl_module(
            rl_module_spec=MultiRLModuleSpec(rl_module_specs={p: module() for p in sorted(policies)})
        )
    else:
        name = register_env(env_id, **env_kwargs)
        config = config.environment(env=name, disable_env_checking=True).rl_module(rl_module_spec=module())
    config = config.env_runners(num_env_runners=num_env_runners).training(
        train_batch_size=train_batch_size, minibatch_size=minibatch_size, num_epochs=num_epochs, lr=lr
    )
    if seed is not None:
        config = config.debugging(seed=seed)
    return config
