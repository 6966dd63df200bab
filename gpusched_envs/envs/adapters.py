"""Let a classical heuristic of :mod:`gpusched_envs.policies` act on an env: the heuristic is run on a recording
view of the env's simulator, and its first start becomes the env action.

    agent = HeuristicAgent(make_policy("fifo", "closest"))
    obs, info = env.reset(seed=0)
    while True:
        obs, reward, terminated, truncated, info = env.step(agent(env))

With FIFO and the env's own placer, a ``JobSelect-v0`` episode reproduces ``Simulator.run`` exactly (same starts
at the same instants, hence the same metrics): the env asks again after every start, exactly as FIFO's loop goes on.
"""

from __future__ import annotations

import numpy as np


class _Started(Exception):
    """Raised by the recording view at the heuristic's first start, to stop it there."""


class _RecordingSim:
    """Reads go to the real simulator, except ``queue``, which holds only the env's window (the jobs an action can
    pick); ``start`` is recorded (and stops the heuristic), preemption is refused."""

    def __init__(self, sim, window):
        self._sim = sim
        self.queue = dict.fromkeys(int(j) for j in window)
        self.started: tuple[int, object] | None = None

    def __getattr__(self, name):
        return getattr(self._sim, name)

    def start(self, job, gpus) -> None:
        self.started = (int(job), gpus)
        raise _Started

    def preempt(self, job) -> None:
        raise NotImplementedError(
            "JobSelect-v0 cannot preempt; use a non-preemptive heuristic (fifo, sjf, gandiva)"
        )

    def set_timer(self, at: float) -> None:
        pass


class HeuristicAgent:
    """Turns a :class:`~gpusched_envs.policies.base.Policy` into ``JobSelect-v0`` actions.

    The heuristic sees the queue window only (the jobs an action can start); the action is the slot of the job it
    would start first, or "wait" when it would start nothing. If waiting is not allowed then (nothing runs and
    nothing is still to arrive), the first valid slot is taken. The env's placer chooses the GPUs, so use the same
    placement for both.
    """

    def __init__(self, policy):
        self.policy = policy
        self._sim = None

    def __call__(self, env) -> int:
        u = env.unwrapped
        sim = u.sim
        if sim is not self._sim:
            self._sim = sim
            if hasattr(self.policy, "reset"):
                self.policy.reset(sim)
        view = _RecordingSim(sim, u._window_jobs())
        try:
            self.policy.schedule(view)
        except _Started:
            pass
        mask = u.action_masks()
        action = u.wait_action if view.started is None else u.slot_of(view.started[0])
        if action < 0 or not mask[action]:
            action = int(np.flatnonzero(mask)[0])
        return action
