"""Parameter sharing for PettingZoo envs with stable-baselines3: every agent of a ``ParallelEnv`` is one slot of an
SB3 ``VecEnv``, so one policy (e.g. ``MaskablePPO``) acts for all agents and learns from all their transitions.

    from gpusched_envs.multi_agent import multi_scheduler_v1
    from sb3_contrib import MaskablePPO
    vec = SharedPolicyVecEnv(multi_scheduler_v1.parallel_env(num_agents=4, cluster="tiny"), seed=0)
    MaskablePPO("MultiInputPolicy", vec, n_steps=128, batch_size=64).learn(2048)

All agents must share one observation and one action space, and the env must keep every agent alive until the
episode ends (``multi_scheduler_v1`` does). When the episode ends, every slot reports done, carries its
``terminal_observation`` and the env is reset (SB3's convention). ``env_method("action_masks")`` returns the
per-agent masks that ``MaskablePPO`` reads.
"""

from __future__ import annotations

import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv


class SharedPolicyVecEnv(VecEnv):
    """A PettingZoo ParallelEnv seen as an SB3 VecEnv with one slot per agent."""

    def __init__(self, parallel_env, seed: int | None = None):
        self.env = parallel_env
        self.agent_ids = list(parallel_env.possible_agents)
        first = self.agent_ids[0]
        obs_space, act_space = parallel_env.observation_space(first), parallel_env.action_space(first)
        for a in self.agent_ids[1:]:
            if parallel_env.observation_space(a) != obs_space or parallel_env.action_space(a) != act_space:
                raise ValueError(
                    f"agent {a!r} has other spaces than {first!r}: parameter sharing needs equal spaces"
                )
        super().__init__(len(self.agent_ids), obs_space, act_space)
        self._seed = seed
        self._actions: np.ndarray | None = None
        self._last_obs: dict | None = None

    def _stack(self, observations: dict) -> dict[str, np.ndarray]:
        keys = self.observation_space.spaces.keys()
        return {k: np.stack([observations[a][k] for a in self.agent_ids]) for k in keys}

    def reset(self):
        observations, _ = self.env.reset(seed=self._seed)
        self._seed = None  # later resets continue the env's own random stream
        self._last_obs = observations
        return self._stack(observations)

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions)

    def step_wait(self):
        actions = {a: int(self._actions[i]) for i, a in enumerate(self.agent_ids)}
        observations, rewards, terminations, truncations, infos = self.env.step(actions)
        reward = np.array([rewards[a] for a in self.agent_ids], dtype=np.float32)
        terminated = any(terminations.values())
        truncated = any(truncations.values())
        done = terminated or truncated
        info_list = [dict(infos.get(a, {})) for a in self.agent_ids]
        if done:
            for a, info in zip(self.agent_ids, info_list, strict=True):
                info["terminal_observation"] = observations[a]
                info["TimeLimit.truncated"] = truncated and not terminated
            observations, _ = self.env.reset()
        self._last_obs = observations
        return self._stack(observations), reward, np.full(self.num_envs, done), info_list

    def _indices(self, indices) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        if isinstance(indices, int):
            return [indices]
        return list(indices)

    def env_method(self, method_name: str, *method_args, indices=None, **method_kwargs):
        chosen = self._indices(indices)
        if method_name == "action_masks":
            return [self.env.action_masks(self.agent_ids[i]) for i in chosen]
        method = getattr(self.env, method_name)
        return [method(*method_args, **method_kwargs) for _ in chosen]

    def get_attr(self, attr_name: str, indices=None):
        return [getattr(self.env, attr_name) for _ in self._indices(indices)]

    def set_attr(self, attr_name: str, value, indices=None) -> None:
        setattr(self.env, attr_name, value)

    def env_is_wrapped(self, wrapper_class, indices=None) -> list[bool]:
        return [False for _ in self._indices(indices)]

    def seed(self, seed: int | None = None):
        self._seed = seed
        return [seed for _ in range(self.num_envs)]

    def close(self) -> None:
        self.env.close()
