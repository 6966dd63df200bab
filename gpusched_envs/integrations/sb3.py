"""Stable-Baselines3 over the native vector env (:mod:`gpusched_envs.envs.vector`).

:class:`SB3VecEnv` wraps a :class:`~gpusched_envs.envs.vector.GpuschedVectorEnv` built with
``autoreset_mode=AutoresetMode.SAME_STEP`` in Stable-Baselines3's ``VecEnv`` API: ``reset`` with the seeds of
``seed()`` (env ``i`` gets ``seed + i``, as ``DummyVecEnv``), ``step`` returning ``(obs, rewards, dones, infos)``
with each finished env already reset and its last observation in ``infos[i]["terminal_observation"]``
(``infos[i]["TimeLimit.truncated"]`` as SB3 sets it), and the batched ``action_masks()`` that sb3-contrib's
``MaskablePPO`` reads (through ``env_method("action_masks")``; ``has_attr("action_masks")`` is True). The copies
run exactly as ``DummyVecEnv`` over ``gym.make`` copies would, in one call per step.

``flatten=True`` gives a ``Box`` observation, the feature arrays flattened into one float32 vector per env (the
layout of :class:`gpusched_envs.wrappers.FlattenFeatures` with ``with_mask=False``), for ``MlpPolicy``; the mask
then comes only through ``action_masks()``. Without it the observation is the env's ``Dict``
(``MultiInputPolicy``, or the project's graph extractor).

::

    from sb3_contrib import MaskablePPO
    from gpusched_envs.integrations.sb3 import make_sb3_vec_env

    venv = make_sb3_vec_env("gpusched/JobSelect-v1", num_envs=8, flatten=True, cluster="tiny", obs_mode="flat")
    model = MaskablePPO("MlpPolicy", venv, n_steps=64, seed=0).learn(1024)

``stable_baselines3`` is imported when :class:`SB3VecEnv` is first used (``gpusched_envs`` itself never imports
it); without it an ImportError names the ``agents`` extra.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# SB3VecEnv is built on first access (the module __getattr__), so that importing this module does not import SB3
__all__ = ["SB3VecEnv", "make_sb3_vec_env"]  # noqa: F822

_CLASS = None


def _vec_env_base():
    try:
        from stable_baselines3.common.vec_env import VecEnv
    except ImportError as err:
        raise ImportError(
            "gpusched_envs.integrations.sb3 needs 'stable_baselines3', which is not installed: "
            "pip install 'gpusched-envs[agents]'"
        ) from err
    return VecEnv


def _build_class():
    """The adapter class, subclassing SB3's ``VecEnv`` (built on first use, so that importing this module does not
    import SB3)."""
    global _CLASS
    if _CLASS is not None:
        return _CLASS
    from gymnasium.vector import AutoresetMode

    from gpusched_envs.envs.vector import GpuschedVectorEnv
    from gpusched_envs.wrappers import feature_keys, flat_layout_space

    VecEnv = _vec_env_base()

    class SB3VecEnv(VecEnv):
        """Stable-Baselines3's ``VecEnv`` API over a native vector env (see the module docstring).

        Args:
            vec_env: a :class:`~gpusched_envs.envs.vector.GpuschedVectorEnv` with ``SAME_STEP`` autoresets (SB3
                resets a finished env in the step that ends its episode).
            flatten: observe the flattened feature vector (``Box``) instead of the ``Dict``.
        """

        def __init__(self, vec_env: GpuschedVectorEnv, *, flatten: bool = False):
            if not isinstance(vec_env, GpuschedVectorEnv):
                raise TypeError(
                    f"SB3VecEnv wraps a GpuschedVectorEnv (gymnasium.make_vec of a gpusched id), got "
                    f"{type(vec_env).__name__}"
                )
            if vec_env.autoreset_mode != AutoresetMode.SAME_STEP:
                raise ValueError(
                    "SB3VecEnv needs a vector env with autoreset_mode=AutoresetMode.SAME_STEP (SB3 resets a finished "
                    f"env in the same step), got {vec_env.autoreset_mode}; make_sb3_vec_env builds one"
                )
            self.vec_env = vec_env
            self.flatten = bool(flatten)
            space = vec_env.single_observation_space
            self.feature_keys = feature_keys(space) if self.flatten else ()
            obs_space = flat_layout_space(space, self.feature_keys, None) if self.flatten else space
            self._actions: np.ndarray | None = None
            super().__init__(vec_env.num_envs, obs_space, vec_env.single_action_space)

        # -------------------------------------------------------------- observations
        def _obs(self, obs: dict[str, np.ndarray]):
            if not self.flatten:
                return obs
            n = self.num_envs
            return np.concatenate(
                [np.asarray(obs[k], dtype=np.float32).reshape(n, -1) for k in self.feature_keys], axis=1
            )

        def _single_obs(self, obs: dict[str, np.ndarray]):
            if not self.flatten:
                return obs
            return np.concatenate([np.asarray(obs[k], dtype=np.float32).ravel() for k in self.feature_keys])

        # -------------------------------------------------------------- VecEnv API
        def reset(self):
            options = [o for o in self._options if o]
            if options and (len(options) < self.num_envs or any(o != options[0] for o in options)):
                raise ValueError("SB3VecEnv.set_options: every env takes the same options")
            seeds = None if all(s is None for s in self._seeds) else list(self._seeds)
            obs, _ = self.vec_env.reset(seed=seeds, options=options[0] if options else None)
            self.reset_infos = [dict(d) for d in self.vec_env.env_infos]
            self._reset_seeds()
            self._reset_options()
            return self._obs(obs)

        def step_async(self, actions: np.ndarray) -> None:
            self._actions = actions

        def step_wait(self):
            obs, rewards, terms, truncs, info = self.vec_env.step(self._actions)
            dones = terms | truncs
            infos: list[dict[str, Any]] = []
            final_obs = info.get("final_obs")
            finals = self.vec_env.final_infos
            for i, d in enumerate(self.vec_env.env_infos):
                if dones[i]:
                    self.reset_infos[i] = dict(d)
                    d = dict(finals[i])
                    d["terminal_observation"] = self._single_obs(final_obs[i])
                else:
                    d = dict(d)
                d["TimeLimit.truncated"] = bool(truncs[i] and not terms[i])
                infos.append(d)
            return self._obs(obs), rewards.astype(np.float32), dones, infos

        def close(self) -> None:
            self.vec_env.close()

        def action_masks(self) -> np.ndarray:
            """(N, A) bool: the valid actions of each env's current observation."""
            return self.vec_env.action_masks()

        def get_images(self):
            if self.render_mode != "rgb_array":
                return [None] * self.num_envs
            return list(self.vec_env.render())

        def has_attr(self, attr_name: str) -> bool:
            try:
                self.get_attr(attr_name)
                return True
            except AttributeError:
                return False

        def get_attr(self, attr_name: str, indices=None) -> list[Any]:
            envs = self.vec_env.envs
            return [getattr(envs[i], attr_name) for i in self._get_indices(indices)]

        def set_attr(self, attr_name: str, value: Any, indices=None) -> None:
            envs = self.vec_env.envs
            for i in self._get_indices(indices):
                setattr(envs[i], attr_name, value)

        def env_method(self, method_name: str, *method_args, indices=None, **method_kwargs) -> list[Any]:
            if method_name == "action_masks" and not method_args and not method_kwargs:
                masks = self.vec_env.action_masks()  # one batched call instead of N
                return [masks[i] for i in self._get_indices(indices)]
            envs = self.vec_env.envs
            return [
                getattr(envs[i], method_name)(*method_args, **method_kwargs)
                for i in self._get_indices(indices)
            ]

        def env_is_wrapped(self, wrapper_class, indices=None) -> list[bool]:
            return [False for _ in self._get_indices(indices)]  # the copies are the unwrapped envs

    SB3VecEnv.__module__ = __name__
    _CLASS = SB3VecEnv
    return _CLASS


def make_sb3_vec_env(env_id: str, num_envs: int = 1, *, flatten: bool = False, **env_kwargs):
    """An :class:`SB3VecEnv` over the native vector env of ``env_id`` (``num_envs`` copies built with
    ``env_kwargs``; ``max_episode_steps=`` as in ``gymnasium.make_vec``)."""
    from gymnasium.vector import AutoresetMode

    from gpusched_envs.envs.vector import GpuschedVectorEnv

    vec = GpuschedVectorEnv(env_id, num_envs, autoreset_mode=AutoresetMode.SAME_STEP, **env_kwargs)
    return _build_class()(vec, flatten=flatten)


def __getattr__(name: str):
    if name == "SB3VecEnv":
        return _build_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
