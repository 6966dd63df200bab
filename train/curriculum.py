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

import json

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


# (env id, obs mode, base kwargs, stage kwargs) whose env was found to have the base env's spaces in this process:
# the other copies of a vector env build that env only when they first draw it
_SAME_SPACES: set[tuple] = set()


def _frozen(value) -> str | None:
    """A key that two equal kwargs share: their JSON text with sorted keys (None for a value JSON cannot write)."""
    try:
        return json.dumps(value, sort_keys=True, allow_nan=True)
    except (TypeError, ValueError):
        return None


class CurriculumEnv(gym.Env):
    """Switches between envs built from the stages' kwargs at episode boundaries (see the module docstring).

    Each stage's envs are checked against the config's env (same spaces) when the first copy is built in a process;
    a later copy builds an env only when it first draws it (``envs[stage][choice]`` is None until then). An env
    depends only on its kwargs and the seed of each reset, so the episodes are those of envs built up front."""

    def __init__(self, env_id: str, base_kwargs: dict, curriculum, obs_mode: str, num_envs: int = 1):
        self.stages = parse_stages(curriculum, base_kwargs)
        self.env_id, self.obs_mode = env_id, obs_mode
        self.final = make_env(env_id, base_kwargs, obs_mode)
        self.observation_space = self.final.observation_space
        self.action_space = self.final.action_space
        base = _frozen(base_kwargs)
        self.envs: list[list[gym.Env | None]] = []
        for i, (_, choices) in enumerate(self.stages):
            group: list[gym.Env | None] = []
            for kw in choices:
                frozen = _frozen(kw)
                key = None if base is None or frozen is None else (env_id, obs_mode, base, frozen)
                if key is not None and key in _SAME_SPACES:
                    group.append(None)
                    continue
                env = make_env(env_id, kw, obs_mode)
                if env.observation_space != self.observation_space or env.action_space != self.action_space:
                    raise ValueError(
                        f"curriculum[{i}]: its env has other observation or action spaces than the config's env "
                        "(a stage must keep the cluster layout and the window)"
                    )
                if key is not None:
                    _SAME_SPACES.add(key)
                group.append(env)
            self.envs.append(group)
        self.num_envs = int(num_envs)
        self.steps = 0  # this copy's steps
        self.rng = np.random.default_rng()
        self.current = self.final
        self.spec = self.final.spec

    def _env(self, stage: int, choice: int) -> gym.Env:
        """The env of a stage's choice, built when first drawn."""
        env = self.envs[stage][choice]
        if env is None:
            env = self.envs[stage][choice] = make_env(
                self.env_id, self.stages[stage][1][choice], self.obs_mode
            )
        return env

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
        choice = int(self.rng.integers(len(self.envs[k]) if k < len(self.stages) else 1))
        self.current = self._env(k, choice) if k < len(self.stages) else self.final
        return self.current.reset(seed=int(self.rng.integers(2**31)), options=options)

    def step(self, action):
        self.steps += 1
        return self.current.step(action)

    def action_masks(self):
        return self.current.unwrapped.action_masks()

    def close(self):
        for env in [self.final, *(e for g in self.envs for e in g if e is not None)]:
            env.close()


def resume_at(envs, run_steps: int) -> int:
    """Continue the curricula of a resumed run: every :class:`CurriculumEnv` among ``envs`` (each possibly inside
    wrappers that hold it as ``env``) counts ``run_steps`` steps of the run so far, as its copy does in a run that
    went on without a break. Returns how many it set."""
    count = 0
    for env in envs:
        while not isinstance(env, CurriculumEnv) and hasattr(env, "env"):
            env = env.env
        if isinstance(env, CurriculumEnv):
            env.steps = int(run_steps) // env.num_envs
            count += 1
    return count
