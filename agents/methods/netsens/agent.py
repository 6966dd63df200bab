"""The NetSens auto-tuner (:class:`~gpusched_envs.policies.netsens.TimerTuner`, hill climbing over timer levels) as
an agent on ``gpusched/DelayTuning-v1``: at every interval it reads the starts the env's delay-scheduling policy made
since its last action (their waits, how they were placed and how much spreading slowed them) and answers with the action
that sets the tuned levels. No learning: the non-RL baseline the RL tuner is compared with.

    env = gym.make("gpusched/DelayTuning-v1", cluster="congested-4x")
    agent = NetSensAutoAgent(env)
    obs, _ = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(agent.act(obs))

The standalone scheduler with the same tuner is ``make_policy("netsens-auto")``.
"""

from __future__ import annotations

import numpy as np

from gpusched_envs.policies.netsens import TimerTuner, observed_runtime
from gpusched_envs.sim.defaults import sim_defaults


class NetSensAutoAgent:
    """Hill-climbing timer tuner acting on a DelayTuning-v1 env (``initial_level``: None for the defaults of
    ``data/sim_defaults.yaml``, clipped to the env's number of levels)."""

    env_ids = ("gpusched/DelayTuning-v1",)
    name = "netsens-auto"

    def __init__(self, env, initial_level=None):
        self.env = env.unwrapped
        if not hasattr(self.env, "timer_levels") or not hasattr(self.env, "action_of"):
            raise ValueError(
                f"NetSensAutoAgent runs on gpusched/DelayTuning-v1, not {type(self.env).__name__}"
            )
        if initial_level is None:
            initial_level = sim_defaults()["netsens"]["auto_tuner"]["initial_level"]["value"]
        top = len(self.env.timer_levels) - 1
        self.initial_level = np.minimum(np.asarray(initial_level, dtype=np.int64), top)
        self._policy = None
        self.tuner = TimerTuner(self.env.timer_levels, self.initial_level)
        self._seen = 0

    def reset(self) -> None:
        """Forget the last episode (also done by itself when the env starts a new one)."""
        self._policy = None

    def act(self, obs=None) -> int:
        policy = self.env.policy
        if policy is not self._policy:  # a new episode: start from the initial levels
            self._policy, self._seen = policy, 0
            self.tuner = TimerTuner(self.env.timer_levels, self.initial_level)
        else:
            self.tuner.update(policy.start_log[self._seen :], observed_runtime(self.env.sim))
        self._seen = len(policy.start_log)
        return self.env.action_of(self.tuner.level)
