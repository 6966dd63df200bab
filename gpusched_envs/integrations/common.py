"""What every library integration shares: a picklable env factory, a fixed-info PettingZoo wrapper and the
missing-library error."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence

import numpy as np
from pettingzoo.utils.wrappers import BaseParallelWrapper

from gpusched_envs import EnvFactory as BaseEnvFactory

EXTRA = "integrations"


def require(module: str, what: str):
    """``importlib.import_module(module)``, or an ImportError naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f"{what} needs {module.split('.')[0]!r}, which is not installed: "
            f"pip install 'gpusched-envs[{EXTRA}]'"
        ) from err


class EnvFactory(BaseEnvFactory):
    """:class:`gpusched_envs.EnvFactory` (picklable; imports :mod:`gpusched_envs` in the calling process, so a
    worker process or a spawned vector-env worker finds the ids) that then applies ``wrappers`` (callables
    ``env -> env``, picklable themselves) in order.

    Called with one argument (RLlib's ``EnvContext``, a dict), its entries override ``env_kwargs``."""

    def __init__(self, env_id: str, env_kwargs: dict | None = None, wrappers: Sequence[Callable] = ()):
        if not isinstance(env_id, str) or not env_id:
            raise ValueError(
                f"env_id must be a registered id such as 'gpusched/JobSelect-v1', got {env_id!r}"
            )
        super().__init__(env_id, dict(env_kwargs or {}))
        self.wrappers = tuple(wrappers)

    @property
    def env_kwargs(self) -> dict:
        return self.kwargs

    def __call__(self, config: dict | None = None):
        env = super().__call__(config)
        for wrap in self.wrappers:
            env = wrap(env)
        return env

    def __repr__(self) -> str:
        return f"EnvFactory({self.env_id!r}, {self.env_kwargs!r})"


def gpusched_env_ids() -> list[str]:
    """Every current id of the suite (``gpusched/...-v1``; the refused ``-v0`` ids left out), in registration
    order."""
    from gpusched_envs.envs import CURRENT_IDS

    return list(CURRENT_IDS)


def _is_number(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


class FixedAgentInfo(BaseParallelWrapper):
    """A PettingZoo ``ParallelEnv`` wrapper whose per-agent info holds the same keys at every reset and step:
    ``keys`` of the agent's info and ``metrics`` of its ``info["metrics"]`` (at the episode's end) as float64 numpy scalars (NaN when
    absent), ``flags`` (``conflict``, ``invalid_action``) as numpy bools (False when absent). Other entries are
    dropped; everything else is the wrapped env's."""

    def __init__(
        self,
        env,
        keys: Sequence[str] = ("time", "queued"),
        metrics: Sequence[str] = ("avg_jct", "makespan"),
        flags: Sequence[str] = ("conflict", "invalid_action"),
    ):
        super().__init__(env)
        self.metadata = getattr(env, "metadata", {})
        self.possible_agents = list(env.possible_agents)
        self.keys, self.metrics, self.flags = tuple(keys), tuple(metrics), tuple(flags)

    @property
    def agents(self):
        return self.env.agents

    def _fixed(self, info: dict) -> dict:
        metrics = (info.get("metrics") or {}) if info.get("episode_done", True) else {}
        out = {}
        for k in self.keys:
            out[k] = np.float64(info[k]) if _is_number(info.get(k)) else np.float64(np.nan)
        for k in self.metrics:
            out[k] = np.float64(metrics[k]) if _is_number(metrics.get(k)) else np.float64(np.nan)
        for k in self.flags:
            out[k] = np.bool_(bool(info.get(k, False)))
        return out

    def reset(self, seed=None, options=None):
        obs, infos = self.env.reset(seed=seed, options=options)
        return obs, {a: self._fixed(infos.get(a, {})) for a in obs}

    def step(self, actions):
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        return obs, rewards, terms, truncs, {a: self._fixed(i) for a, i in infos.items()}

    def action_masks(self, agent) -> np.ndarray:
        """The wrapped env's ``action_masks(agent)``."""
        return self.env.action_masks(agent)
