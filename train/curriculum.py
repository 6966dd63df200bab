"""Curricula over env settings (offered load, workload windows, clusters): a training env whose kwargs change with
the run's progress.

A config's ``curriculum`` is a list of stages, each active until a step count of the whole run::

    curriculum:
      - until: 20000                       # steps of the run (all envs together)
        env_kwargs: {load: 0.6}            # merged over the config's env_kwargs
      - until: 60000
        choices:                           # one drawn (seeded) at every episode
          - {workload: "philly:start=2017-10-02,jobs=300,load=0.9,gpus=32"}
          - {workload: "synthetic:jobs=300,load=0.9,gpus=32,max_gpus=32"}
      - until: 200000
        env_kwargs: {load: 0.95}

After the last stage the config's own ``env_kwargs`` apply. Every stage must keep the observation and action spaces
(same cluster layout and window), so that one network and one replay buffer serve the whole run. Each copy of the env
counts its own steps × ``num_envs`` (the envs of a vector env step in lock-step), so no process shares a counter.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gpusched_lab.agents.common import make_env


def parse_stages(curriculum, base_kwargs: dict) -> list[tuple[int, list[dict]]]:
    """``[(until, [kwargs, ...]), ...]`` with each choice merged over ``base_kwargs``; one clear error per bad field."""
    if not isinstance(curriculum, list):
        raise ValueError(f"curriculum: expected a list of stages, got {curriculum!r}")
    stages, last = [], 0
    for i, stage in enumerate(curriculum):
        where = f"curriculum[{i}]"
        if not isinstance(stage, dict) or set(stage) - {"until", "env_kwargs", "choices"}:
            raise ValueError(f"{where}: a stage is a mapping of until, env_kwargs and/or choices")
        until = stage.get("until")
        if isinstance(until, bool) or not isinstance(until, int) or until <= last:
            raise ValueError(f"{where}.until: expected an integer step > {last}, got {until!r}")
        common = stage.get("env_kwargs") or {}
        choices = stage.get("choices") or [{}]
        if (
            not isinstance(common, dict)
            or not isinstance(choices, list)
            or not all(isinstance(c, dict) for c in choices)
        ):
            raise ValueError(f"{where}: env_kwargs must be a mapping and choices a list of mappings")
        stages.append((until, [{**base_kwargs, **common, **c} for c in choices]))
        last = until
    return stages


class CurriculumEnv(gym.Env):
    """Switches between envs built from the stages' kwargs at episode boundaries (see the module docstring)."""

    def __init__(self, env_id: str, base_kwargs: dict, curriculum, obs_mode: str, num_envs: int = 1):
        self.stages = parse_stages(curriculum, base_kwargs)
        self.final = make_env(env_id, base_kwargs, obs_mode)
        self.envs = [[make_env(env_id, kw, obs_mode) for kw in choices] for _, choices in self.stages]
        self.observation_space = self.final.observation_space
        self.action_space = self.final.action_space
        for i, group in enumerate(self.envs):
            for env in group:
                if env.observation_space != self.observation_space or env.action_space != self.action_space:
                    raise ValueError(
                        f"curriculum[{i}]: its env has other observation or action spaces than the config's env "
                        "(a stage must keep the cluster layout and the window)"
                    )
        self.num_envs = int(num_envs)
        self.steps = 0  # this copy's steps
        self.rng = np.random.default_rng()
        self.current = self.final
        self.spec = self.final.spec

    @property
    def unwrapped(self):
        return self.current.unwrapped

    def stage(self) -> int:
        """Index of the active stage (``len(stages)``: past the curriculum)."""
        run_steps = self.steps * self.num_envs
        return next((i for i, (until, _) in enumerate(self.stages) if run_steps < until), len(self.stages))

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        k = self.stage()
        group = self.envs[k] if k < len(self.stages) else [self.final]
        self.current = group[int(self.rng.integers(len(group)))]
        return self.current.reset(seed=int(self.rng.integers(2**31)), options=options)

    def step(self, action):
        self.steps += 1
        return self.current.step(action)

    def action_masks(self):
        return self.current.unwrapped.action_masks()

    def close(self):
        for env in [self.final, *(e for g in self.envs for e in g)]:
            env.close()
