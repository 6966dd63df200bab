"""``N`` parallel episodes of ``multi_scheduler_v1`` (the PettingZoo ``ParallelEnv``) stepped in one call.

:class:`MultiSchedulerVectorEnv` holds ``N`` copies of :class:`~gpusched_envs.multi_agent.multi_scheduler.
MultiSchedulerEnv` built with the same arguments, and batches the parallel API per agent:

- ``reset(seed=s)`` resets copy ``i`` with ``s + i`` (or each with its own from a list of ``N`` seeds); returns
  ``(observations, infos)``, ``observations[agent][key]`` an ``(N, ...)`` array;
- ``step(actions)`` takes an ``(N, K)`` integer array (agents in ``possible_agents`` order) or a dict ``agent ->
  (N,)`` and returns ``observations``, ``rewards[agent]`` ``(N,) float64``, ``terminations[agent]`` and
  ``truncations[agent]`` ``(N,) bool``, ``infos[agent]`` batched in Gymnasium's vector convention (``key`` and
  ``_key``; ``metrics`` / ``agent_metrics`` where the episode ended in this step);
- :meth:`~MultiSchedulerVectorEnv.action_masks` ``(N, K, A) bool``.

Episodes end for every agent at once; a finished copy resets itself (``autoreset_mode``:
``AutoresetMode.NEXT_STEP``, the default, at its next step, whose actions it ignores; ``SAME_STEP`` in the step
that ends it, the last observations and infos in ``infos[agent]["final_obs"]`` / ``["final_info"]``). Each copy runs
exactly as an independent env reset with its seed and stepped with its row of actions. Malformed actions are
refused before any copy steps, naming the copy and the agent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from gpusched_envs.envs.core import InvalidActionError, check_action_value, check_int
from gpusched_envs.envs.vector import autoreset_mode_of, batch_infos, seed_list
from gpusched_envs.multi_agent.multi_scheduler import MultiSchedulerEnv

__all__ = ["MultiSchedulerVectorEnv"]


class MultiSchedulerVectorEnv:
    """``num_envs`` parallel episodes of ``multi_scheduler_v1`` (see the module docstring).

    Args:
        num_envs: how many copies (``N``).
        autoreset_mode: ``AutoresetMode.NEXT_STEP`` (default) or ``SAME_STEP`` (the enum, its value or its name).
        copy: return copies of the observation buffers (default); ``False`` returns the buffers themselves.
        env_kwargs: :class:`MultiSchedulerEnv`'s arguments (``num_agents=``, ``cluster=``, ...).
    """

    def __init__(
        self,
        num_envs: int = 1,
        *,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        copy: bool = True,
        **env_kwargs,
    ):
        n = check_int("num_envs", num_envs, 1)
        mode = autoreset_mode_of(autoreset_mode)
        if mode == AutoresetMode.DISABLED:
            raise ValueError("MultiSchedulerVectorEnv offers autoreset_mode NEXT_STEP or SAME_STEP")
        self.envs = [MultiSchedulerEnv(**env_kwargs) for _ in range(n)]
        first = self.envs[0]
        self.num_envs, self.autoreset_mode, self.copy = n, mode, bool(copy)
        self.possible_agents = list(first.possible_agents)
        self.agent_index = {a: j for j, a in enumerate(self.possible_agents)}
        self.single_observation_space = first.observation_space(self.possible_agents[0])
        self.single_action_space = first.action_space(self.possible_agents[0])
        self.num_actions = int(self.single_action_space.n)
        self.metadata = {"autoreset_mode": mode, "render_modes": list(first.metadata.get("render_modes", []))}
        k = len(self.possible_agents)
        self._obs = {
            a: {
                key: np.zeros((n, *sp.shape), dtype=sp.dtype)
                for key, sp in self.single_observation_space.items()
            }
            for a in self.possible_agents
        }
        self._rewards = np.zeros((n, k), dtype=np.float64)
        self._terminations = np.zeros(n, dtype=bool)
        self._truncations = np.zeros(n, dtype=bool)
        self._autoreset = np.zeros(n, dtype=bool)
        self.env_infos: list[dict[str, dict]] = [{} for _ in range(n)]
        self._was_reset = False
        self.closed = False

    # ------------------------------------------------------------------ checks
    def _checked_actions(self, actions) -> list[dict[str, int]]:
        if self.closed:
            raise gym.error.ClosedEnvironmentError("MultiSchedulerVectorEnv is closed; make a new one")
        if not self._was_reset:
            raise gym.error.ResetNeeded("call reset() before step()")
        n, k, a_n = self.num_envs, len(self.possible_agents), self.num_actions
        if isinstance(actions, dict):
            unknown = set(actions) - set(self.agent_index)
            missing = [a for a in self.possible_agents if a not in actions]
            if unknown or missing:
                raise InvalidActionError(
                    f"actions: expected one (N,) array per agent of {self.possible_agents}; "
                    f"unknown {sorted(map(str, unknown))}, missing {missing}"
                )
            cols = [np.asarray(actions[a]) for a in self.possible_agents]
            if any(c.shape != (n,) for c in cols):
                shapes = {a: c.shape for a, c in zip(self.possible_agents, cols, strict=True)}
                raise InvalidActionError(f"actions: expected shape ({n},) per agent, got {shapes}")
            arr = np.stack(cols, axis=1)
        else:
            arr = np.asarray(actions)
            if arr.shape != (n, k):
                raise InvalidActionError(
                    f"actions: expected an ({n}, {k}) array (envs x agents {self.possible_agents}), got shape "
                    f"{arr.shape}"
                )
        if arr.dtype.kind in "iu":
            bad = np.argwhere((arr < 0) | (arr >= a_n))
        elif arr.dtype.kind == "f":
            bad = np.argwhere(~np.isfinite(arr) | (arr != np.round(arr)) | (arr < 0) | (arr >= a_n))
        else:
            bad = np.argwhere(np.ones(arr.shape, dtype=bool))
        for i, j in bad:
            v = arr[i, j]
            check_action_value(
                v.item() if arr.dtype != object else v, a_n, f"actions[{i}][{self.possible_agents[j]!r}]"
            )
        rows = arr.astype(np.int64).tolist() if arr.dtype.kind != "O" else [[int(x) for x in r] for r in arr]
        return [dict(zip(self.possible_agents, row, strict=True)) for row in rows]

    # ------------------------------------------------------------------ API
    def reset(self, *, seed: int | Sequence[int | None] | None = None, options: dict | None = None):
        """Reset every copy (copy ``i`` with ``seed + i``, or with its seed from a list)."""
        if self.closed:
            raise gym.error.ClosedEnvironmentError("MultiSchedulerVectorEnv is closed; make a new one")
        seeds = seed_list(seed, self.num_envs)
        for i, env in enumerate(self.envs):
            obs, infos = env.reset(seed=seeds[i], options=options)
            self._write(i, obs)
            self.env_infos[i] = infos
        self._rewards[:] = 0.0
        self._terminations[:] = self._truncations[:] = self._autoreset[:] = False
        self._was_reset = True
        return self._observations(), self._infos()

    def step(self, actions):
        """Step every copy with its row of actions (see the module docstring)."""
        per_env = self._checked_actions(actions)
        next_step = self.autoreset_mode == AutoresetMode.NEXT_STEP
        agents = self.possible_agents
        final_obs: dict[int, dict] = {}
        final_infos: dict[int, dict] = {}
        for i, env in enumerate(self.envs):
            if next_step and self._autoreset[i]:
                obs, infos = env.reset()
                self._rewards[i] = 0.0
                self._terminations[i] = self._truncations[i] = False
            else:
                try:
                    obs, rewards, terms, truncs, infos = env.step(per_env[i])
                except Exception as exc:
                    exc.add_note(f"raised by env {i} of MultiSchedulerVectorEnv")
                    raise
                self._rewards[i] = [rewards[a] for a in agents]
                te, tr = bool(terms[agents[0]]), bool(truncs[agents[0]])
                self._terminations[i], self._truncations[i] = te, tr
                if (te or tr) and not next_step:
                    # a copy: the reset may reuse the buffers the env observes into
                    final_obs[i] = {a: {k: v.copy() for k, v in o.items()} for a, o in obs.items()}
                    final_infos[i] = infos
                    obs, infos = env.reset()
            self._write(i, obs)
            self.env_infos[i] = infos
        done = self._terminations | self._truncations
        self._autoreset[:] = done if next_step else False
        out = self._infos()
        if final_obs:
            ended = np.zeros(self.num_envs, dtype=bool)
            ended[list(final_obs)] = True
            for a in agents:
                fo = np.full(self.num_envs, None, dtype=object)
                for i, o in final_obs.items():
                    fo[i] = o[a]
                out[a]["final_obs"], out[a]["_final_obs"] = fo, ended
                rows = [final_infos[i][a] if i in final_infos else None for i in range(self.num_envs)]
                out[a]["final_info"], out[a]["_final_info"] = batch_infos(rows, ended), ended.copy()
        rewards = {a: self._rewards[:, j].copy() for j, a in enumerate(agents)}
        terms = {a: self._terminations.copy() for a in agents}
        truncs = {a: self._truncations.copy() for a in agents}
        return self._observations(), rewards, terms, truncs, out

    def _write(self, i: int, obs: dict[str, dict[str, np.ndarray]]) -> None:
        for a, bufs in self._obs.items():
            o = obs[a]
            for key, buf in bufs.items():
                buf[i] = o[key]

    def _observations(self) -> dict[str, dict[str, np.ndarray]]:
        if not self.copy:
            return self._obs
        return {a: {k: v.copy() for k, v in bufs.items()} for a, bufs in self._obs.items()}

    def _infos(self) -> dict[str, dict[str, Any]]:
        everyone = np.ones(self.num_envs, dtype=bool)
        out = {}
        for a in self.possible_agents:
            out[a] = batch_infos([infos[a] for infos in self.env_infos], everyone)
        return out

    def action_masks(self) -> np.ndarray:
        """(N, K, A) bool: each agent's valid actions in each copy (rows of copies awaiting a ``NEXT_STEP``
        autoreset are all True: their actions are ignored)."""
        mask = np.stack([self._obs[a]["action_mask"] for a in self.possible_agents], axis=1).astype(bool)
        mask[self._autoreset] = True
        return mask

    def close(self) -> None:
        if not self.closed:
            for env in self.envs:
                env.close()
            self.closed = True

    def __repr__(self) -> str:
        return f"MultiSchedulerVectorEnv(num_envs={self.num_envs}, agents={self.possible_agents})"
