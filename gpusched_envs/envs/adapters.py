"""Let a classical heuristic of :mod:`gpusched_envs.policies` act on an env: the heuristic is run on a recording
view of the env's simulator, and its first start (or preemption) becomes the env action.

    agent = HeuristicAgent(make_policy("tiresias", "closest"))
    env = gym.make("gpusched/JobSelect-v1", preemption=True)
    obs, info = env.reset(seed=0)
    while True:
        obs, reward, terminated, truncated, info = env.step(agent(env))

With the env's own placer and a window that holds every waiting (and, with preemption, running) job, a
``JobSelect-v1`` episode reproduces ``Simulator.run`` of the same heuristic exactly (same starts and preemptions at
the same instants, hence the same metrics): the env asks again after every action at the same instant, exactly as
the heuristic's loop goes on, and with ``preemption=True`` it asks at every decision point of the simulator.
A timer the heuristic sets when it waits (Tiresias' demotion) is passed to the simulator, as in ``Simulator.run``.

Information: in a non-clairvoyant env (the default) the view hides what a real scheduler cannot know (traced
durations, total and remaining work); a clairvoyant heuristic (SJF, SRTF: :func:`~gpusched_envs.policies.
is_clairvoyant`) is refused there with a clear error unless ``allow_clairvoyant=True``. A preemptive heuristic
(Tiresias, LAS, SRTF, Gittins) needs ``preemption=True``: :func:`~gpusched_envs.policies.playable.check_playable`
refuses it otherwise, naming the env arguments that play it.
"""

from __future__ import annotations

import numpy as np

from gpusched_envs.policies.playable import check_playable
from gpusched_envs.policies.schedulers import is_clairvoyant

# simulator state a non-clairvoyant heuristic may not read (derived from traced durations)
HIDDEN_FROM_NON_CLAIRVOYANT = frozenset(
    {"job_work", "remaining_work", "remaining_ideal_time", "finish_time", "_heap"}
)


class ClairvoyanceError(ValueError):
    """A heuristic read something a non-clairvoyant env does not show."""


class _Acted(Exception):
    """Raised by the recording view at the heuristic's first start or preemption, to stop it there."""


class _HiddenDurations:
    """The workload without its traced durations."""

    def __init__(self, workload):
        self._workload = workload

    def __getattr__(self, name):
        if name == "duration":
            raise ClairvoyanceError(
                "the heuristic read the traced job durations, which a non-clairvoyant env hides; use "
                "information='clairvoyant' or HeuristicAgent(..., allow_clairvoyant=True)"
            )
        return getattr(self._workload, name)


class _RecordingSim:
    """Reads go to the real simulator, except ``queue`` (the env's queue window: the jobs an action can start) and
    ``running`` (its running window: the jobs an action can preempt, empty without preemption); ``start`` and
    ``preempt`` are recorded (and stop the heuristic); ``set_timer`` is recorded."""

    def __init__(self, sim, window, running, preemption: bool, hide: bool):
        self._sim = sim
        self._hide = hide
        self._preemption = preemption
        self.queue = dict.fromkeys(int(j) for j in window)
        self.running = dict.fromkeys(int(j) for j in running) if preemption else sim.running
        self.acted: tuple[str, int, object] | None = None
        self.timer: float | None = None
        if hide:
            self.workload = _HiddenDurations(sim.workload)

    def __getattr__(self, name):
        if self._hide and name in HIDDEN_FROM_NON_CLAIRVOYANT:
            raise ClairvoyanceError(
                f"the heuristic read sim.{name}, which a non-clairvoyant env hides; use information='clairvoyant' "
                "or HeuristicAgent(..., allow_clairvoyant=True)"
            )
        return getattr(self._sim, name)

    def start(self, job, gpus) -> None:
        self.acted = ("start", int(job), gpus)
        raise _Acted

    def preempt(self, job) -> None:
        if not self._preemption:
            raise ValueError(
                "the heuristic preempts a job but this JobSelect-v1 cannot preempt: make it with preemption=True "
                "(or use a non-preemptive heuristic: fifo, sjf, gandiva)"
            )
        self.acted = ("preempt", int(job), None)
        raise _Acted

    def set_timer(self, at: float) -> None:
        self.timer = float(at)


class HeuristicAgent:
    """Turns a :class:`~gpusched_envs.policies.base.Policy` into ``JobSelect-v1`` actions.

    The heuristic sees the queue window only (the jobs an action can start) and, with ``preemption=True``, the
    running window (the jobs an action can preempt); the action is the slot of the job it would start or preempt
    first, or "wait" when it would do nothing. If that action is masked (waiting when it would deadlock, a job
    beyond the window), the first valid action is taken; a preemption the env does not allow yet (``min_run``)
    waits instead. The env's placer chooses the GPUs, so use the same placement for both. ``allow_clairvoyant``:
    run a clairvoyant heuristic in a non-clairvoyant env (it then sees the durations the agent does not).
    """

    def __init__(self, policy, allow_clairvoyant: bool = False):
        self.policy = policy
        self.allow_clairvoyant = bool(allow_clairvoyant)
        self._sim = None

    def __call__(self, env) -> int:
        action, timer = self.decide(env)
        if timer is not None:  # the heuristic asked for a decision point (Tiresias' demotion)
            env.unwrapped.sim.set_timer(timer)
        return action

    def decide(self, env) -> tuple[int, float | None]:
        """``(action, timer)``: the heuristic's action now and, when it waits, the time it asked to be woken at
        (None: no timer). Changes nothing in the env: :meth:`__call__` sets the timer; a hint
        (``JobSelect-v1(hint=...)``) only reads the action."""
        u = env.unwrapped
        sim = u.sim
        hide = not getattr(u, "clairvoyant", True) and not self.allow_clairvoyant
        if hide and is_clairvoyant(self.policy):
            raise ClairvoyanceError(
                f"{getattr(self.policy, 'name', type(self.policy).__name__)} is clairvoyant (it reads traced "
                "durations) and this env is non-clairvoyant: make the env with information='clairvoyant', or pass "
                "HeuristicAgent(..., allow_clairvoyant=True) to compare with it anyway"
            )
        if sim is not self._sim:
            check_playable(self.policy, u, allow_clairvoyant=True)  # preemptions the env cannot carry out
            self._sim = sim
            if hasattr(self.policy, "reset"):
                self.policy.reset(sim)
        preemption = bool(getattr(u, "preemption", False))
        running = u.running_window() if preemption else ()
        view = _RecordingSim(sim, u._window_jobs(), running, preemption, hide)
        try:
            self.policy.schedule(view)
        except _Acted:
            pass
        mask = u.action_masks()
        if view.acted is None:
            action = u.wait_action
        elif view.acted[0] == "start":
            action = u.slot_of(view.acted[1])
        else:
            action = u.preempt_action_of(view.acted[1])
        if action < 0 or not mask[action]:
            if view.acted is not None and view.acted[0] == "preempt" and mask[u.wait_action]:
                action = u.wait_action  # its victim is not preemptible yet (min_run): wait for the next round
            else:
                action = int(np.flatnonzero(mask)[0])
        elif action == u.wait_action and view.timer is not None:
            return action, view.timer
        return action, None
