"""The base of the single-agent cluster envs: one simulator per episode from the env's
:class:`~gpusched_envs.envs.core.EpisodeSpec`, the one ``step`` (each env supplies only how an action acts,
:meth:`ClusterEnv._apply`, and what it observes), the exact reward integrals, the observation encoder and its
information setting, invalid-action handling and rendering. What the multi-agent env shares with them (argument
checks, action parsing and its errors, the episode spec, the reward integral) is in :mod:`gpusched_envs.envs.core`
and re-exported here."""

from __future__ import annotations

import itertools
from typing import Any

import gymnasium as gym
import numpy as np

from gpusched_envs.envs.core import (
    DEFAULT_MAX_INVALID_REPEATS,
    INVALID_ACTIONS,
    OBS_MODES,
    RENDER_MODES,
    REWARDS,
    SPEED_MODELS,
    EnvCore,
    EpisodeEndedError,
    EpisodeSpec,
    InvalidActionError,
    RewardIntegral,
    WorkloadArg,
    check_action_value,
    check_bool,
    check_choice,
    check_int,
    check_number,
    default_workload_spec,
    make_workload,
    metrics_info,
    resolve_cluster,
)
from gpusched_envs.envs.encoding import NON_CLAIRVOYANT, ClusterEncoder, Layout
from gpusched_envs.envs.features import RunningTotals, gpu_relative_speed
from gpusched_envs.envs.render import render_ansi, render_rgb
from gpusched_envs.sim import Simulator
from gpusched_envs.sim import kernels as _kernels
from gpusched_envs.sim.engine import FULL_GPU
from gpusched_envs.sim.metrics import METRIC_KEYS
from gpusched_envs.sim.sensitivity import job_sensitivities
from gpusched_envs.sim.topology import Cluster

# the info's counts as numpy scalars (immutable: one object serves every info), and its metrics before the end
_NUM_INT64 = 4096
_INT64 = tuple(np.int64(i) for i in range(_NUM_INT64))
_MINUS_ONE = np.int64(-1)
_ZERO_METRICS = metrics_info(None, METRIC_KEYS)


class EpisodeMetrics(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Fills ``info["metrics"]`` (and sets ``info["episode_done"]``) when a wrapper inside it truncates the episode:
    the env fills them itself at termination and at its own ``max_steps``, but a ``TimeLimit`` only sets
    ``truncated``. Registered as an additional wrapper of every env, so it sits outside ``gym.make``'s
    ``TimeLimit`` (``max_episode_steps``). With a hand-added ``TimeLimit``, wrap it once more:
    ``EpisodeMetrics(TimeLimit(env, n))``, or read ``env.unwrapped.episode_metrics()`` after the last step."""

    def __init__(self, env: gym.Env):
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if (terminated or truncated) and not info.get("episode_done", False):
            info = {**info, "episode_done": np.bool_(True), "metrics": self.env.unwrapped.episode_metrics()}
        return obs, reward, terminated, truncated, info


class ClusterEnv(EnvCore, gym.Env):
    """Base of the envs that drive :class:`~gpusched_envs.sim.Simulator` (not registered itself).

    Subclasses supply :meth:`_first_decision` (run a new episode to the first decision), :meth:`_apply` (act and run
    to the next decision), :meth:`_observe` (write the action mask and context, return the observation) and
    :meth:`_why_invalid` (the message for a masked action); :meth:`step` is shared.
    """

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 4}
    context_names: tuple[str, ...] = ()  # one name per context entry (the subclass sets them)

    def __init__(
        self,
        *,
        cluster: str | Cluster,
        workload: WorkloadArg,
        num_jobs: int,
        load: float,
        window: int,
        obs_mode: str,
        reward: str,
        max_steps: int | None,
        time_scale: float,
        invalid_action: str,
        invalid_penalty: float,
        interference: bool,
        speed_model: str,
        workload_seed: int | None,
        render_mode: str | None,
        context_size: int,
        num_actions: int,
        layout_clusters: tuple[Cluster, ...] = (),
        information: str = NON_CLAIRVOYANT,
        running_rows: int = 0,
        max_invalid_repeats: int = DEFAULT_MAX_INVALID_REPEATS,
        extra_job_features: tuple[str, ...] = (),
    ):
        self._set_common_args(
            obs_mode, render_mode, invalid_action, information, window, time_scale, invalid_penalty
        )
        self.max_invalid_repeats = check_int("max_invalid_repeats", max_invalid_repeats, 1)
        check_choice("reward", reward, REWARDS)
        self.max_steps = None if max_steps is None else check_int("max_steps", max_steps, 1)
        self.episode = EpisodeSpec.checked(
            resolve_cluster(cluster), workload, workload_seed, num_jobs, load, interference, speed_model
        )
        self.reward_kind = reward
        self.layout = Layout.for_clusters(
            [self.cluster, *layout_clusters], self.window + running_rows, context_size, num_actions
        )
        names = self.context_names if len(self.context_names) == context_size else None
        self.encoder = ClusterEncoder(
            self.layout, obs_mode, self.time_scale, information, running_rows, names, extra_job_features
        )
        self.observation_space = self.encoder.observation_space()
        self.sim: Simulator | None = None
        self._static_cluster: Cluster | None = None
        self._terminated = False
        self.last_invalid_reason = ""

    @property
    def clairvoyant(self) -> bool:
        """Whether observations carry what a real scheduler cannot know (traced durations, remaining work)."""
        return self.information != NON_CLAIRVOYANT

    def flat_feature_names(self) -> list[str]:
        """The name of every entry of ``obs["obs"]`` (``obs_mode="flat"``), e.g. ``"gpu3.busy"``, ``"job0.age"``,
        ``"context.finished"``; see :mod:`gpusched_envs.envs.encoding` for what each column means."""
        return self.encoder.flat_feature_names()

    # ------------------------------------------------------------------ episode
    def _new_episode(self) -> None:
        self.sim = self.episode.simulator(self.np_random)
        sim = self.sim
        if self._static_cluster is not self.cluster:
            self.encoder.set_cluster(self.cluster, gpu_relative_speed(self.cluster))
            self._static_cluster = self.cluster
        self.sensitivity = job_sensitivities(self.cluster, sim.job_model, sim.job_gpus_n)  # (J,)
        self.log_sensitivity = np.log(self.sensitivity)
        ideal = np.maximum(sim.job_work * sim.job_ideal_iter, 1e-9)
        self.totals = RunningTotals(sim, 1.0 / ideal if self.reward_kind == "slowdown" else None)
        self.reward_integral = RewardIntegral(self.totals, self.reward_kind, self.time_scale)
        self.steps = 0
        self.drained = False
        self._terminated = False
        self.last_invalid_reason = ""  # why the last invalid action was refused
        self._invalid_run = 0  # invalid actions since the last action that acted (the state has not moved)
        self._last_mark = None
        # rewards accrue from the start of the run, so a full episode's return is the exact integral even when
        # jobs waited before the first decision (that share goes to the first step)
        self._pending_mark = self._mark()

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._new_episode()
        self._first_decision()
        return self._observe(), self._info(False, False)

    def _first_decision(self) -> None:
        """Run the new episode's simulator to its first decision for the agent (each env says how)."""
        raise NotImplementedError

    def _apply(self, action: int) -> None:
        """Carry out a valid action and run the simulator to the agent's next decision (each env says how)."""
        raise NotImplementedError

    def _observe(self) -> dict:
        """Write the action mask and context, encode the state, return the observation (each env says how)."""
        raise NotImplementedError

    def _why_invalid(self, action: int) -> str:
        """Why the mask forbids ``action`` now (each env words it)."""
        return "the action mask forbids it now"

    def _advance(self) -> bool:
        """Run the simulator to its next decision point; False once it has drained."""
        more = self.sim.next_decision()
        self.totals.sync()
        if not more:
            self.drained = True
        return more

    # ------------------------------------------------------------------ the step
    def step(self, action):
        if self.sim is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        if self._terminated:
            raise EpisodeEndedError(
                "the episode has ended (every job finished, terminated=True); call reset() before step()"
            )
        a = self._check_action(action)
        penalty, forced = 0.0, False
        if not self.encoder.action_mask[a]:
            why = self._why_invalid(a)
            if self.invalid_action == "raise":
                raise InvalidActionError(f"invalid action {a}: {why}")
            self.last_invalid_reason = f"invalid action {a}: {why}"
            self._invalid_run += 1
            if self._invalid_run < self.max_invalid_repeats:
                return self._invalid()
            # the max_invalid_repeats-th invalid action in a row: the env takes the safe action itself
            penalty, forced = self.invalid_penalty, True
            a = self.safe_action()
        self._invalid_run = 0
        mark = self._pending_mark
        if mark is None:
            mark = self._mark()
        else:
            self._pending_mark = None
        self._apply(a)
        now = self._last_mark  # _reward_since, inlined
        if now is None or now[0] != self.sim.now:
            now = self._mark()
        reward = 0.0 if now[0] == mark[0] else self.reward_integral.between(mark, now)
        if forced:
            reward = reward - penalty
        self.steps += 1
        terminated = self.drained
        truncated = not terminated and self.max_steps is not None and self.steps >= self.max_steps
        self._terminated = terminated
        obs = self._observe()
        info = self._info(terminated, truncated, forced, a if forced else -1)
        return obs, reward, terminated, truncated, info

    # ------------------------------------------------------------------ rewards
    def _mark(self) -> tuple[float, float, float]:
        """(time, accrued weighted time, goodput) now; the integrals only change when time passes."""
        last = self._last_mark
        if last is not None and last[0] == self.sim.now:
            return last
        self._last_mark = self.reward_integral.mark()
        return self._last_mark

    def _reward_since(self, mark: tuple[float, float, float]) -> float:
        """Reward for the simulated time since ``mark`` (see the env docstrings, section Rewards)."""
        now = self._mark()
        if now[0] == mark[0]:
            return 0.0
        return self.reward_integral.between(mark, now)

    # ------------------------------------------------------------------ queue helpers
    def _window_jobs(self) -> np.ndarray:
        q = self.sim.queue
        k = min(len(q), self.window)
        return np.fromiter(itertools.islice(q, k), dtype=np.int64, count=k)

    def _count_fits(self, jobs: np.ndarray) -> np.ndarray:
        """(k,) whether enough GPUs are free (in the job's pool / type, with its share) for each job."""
        sim = self.sim
        k = len(jobs)
        fits = np.empty(k, dtype=bool)
        if not k:
            return fits
        jobs = np.ascontiguousarray(jobs, dtype=np.int64)
        special = _kernels.count_fits(
            fits, jobs, sim.job_gpus_n, sim.job_allowed, sim.job_milli, sim.free_gpus(), FULL_GPU
        )
        if special:
            # a job with a pool / type constraint or a GPU share counts the GPUs it may use (a fractional job asks
            # for one GPU: the workload validation allows no fractional multi-GPU job)
            for i in np.flatnonzero((sim.job_allowed[jobs] >= 0) | (sim.job_milli[jobs] < FULL_GPU)):
                j = int(jobs[i])
                fits[i] = np.count_nonzero(sim.free_mask(j)) >= sim.job_gpus_n[j]
        return fits

    def _can_wait(self) -> bool:
        """Waiting is allowed while something can still happen without the agent (a run, an arrival)."""
        sim = self.sim
        return sim.num_running() > 0 or sim.next_arrival < sim.num_jobs

    # ------------------------------------------------------------------ observation
    def _encode(
        self,
        jobs: np.ndarray,
        fits: np.ndarray,
        in_placement: np.ndarray | None = None,
        running: np.ndarray | None = None,
        preemptible: np.ndarray | None = None,
    ) -> dict:
        sim = self.sim
        enc = self.encoder
        queued_beyond = max(0, sim.num_queued() - len(jobs))
        enc.encode(sim, jobs, fits, self.log_sensitivity, running, preemptible, in_placement, queued_beyond)
        return enc.observation()

    def action_masks(self) -> np.ndarray:
        """(A,) bool: the valid actions now (``sb3_contrib.MaskablePPO`` reads this)."""
        return self.encoder.action_mask.astype(bool)

    # ------------------------------------------------------------------ invalid actions
    def _check_action(self, action) -> int:
        return check_action_value(action, self.layout.actions)

    def safe_action(self) -> int:
        """The action an invalid one resolves to once ``max_invalid_repeats`` of them came in a row: the last
        action (wait / defer) when it is valid, else the first valid action (a job to start, a server for the
        next worker)."""
        mask = self.encoder.action_mask
        last = self.layout.actions - 1
        return last if mask[last] else int(np.flatnonzero(mask)[0])

    def _invalid(self):
        """No-op with a penalty: the state and the clock do not move."""
        self.steps += 1
        truncated = self.max_steps is not None and self.steps >= self.max_steps
        info = self._info(False, truncated, True)
        return self._unchanged_observation(), -self.invalid_penalty, False, truncated, info

    def _unchanged_observation(self) -> dict:
        """The observation again, after an invalid action (the state has not moved)."""
        return self.encoder.observation()

    def episode_metrics(self) -> dict[str, np.float64]:
        """The simulator's metrics (:data:`~gpusched_envs.sim.metrics.METRIC_KEYS`, float64) of the episode so far:
        what ``info["metrics"]`` holds once the episode ends, available at any step (e.g. after a truncation by a
        hand-added ``TimeLimit``)."""
        if self.sim is None:
            raise gym.error.ResetNeeded("call reset() before episode_metrics()")
        return metrics_info(self.sim.metrics(), METRIC_KEYS)

    def _info(
        self, terminated: bool, truncated: bool, invalid: bool = False, forced: int = -1
    ) -> dict[str, Any]:
        """The info of every ``reset`` and ``step``: the same keys and dtypes throughout (see the env docstring,
        section Info)."""
        sim = self.sim
        done = terminated or truncated
        q, r = sim.num_queued(), sim.num_running()
        return {
            "time": np.float64(sim.now),
            "queued": _INT64[q] if q < _NUM_INT64 else np.int64(q),
            "running": _INT64[r] if r < _NUM_INT64 else np.int64(r),
            "invalid_action": np.True_ if invalid else np.False_,
            "forced_action": _MINUS_ONE if forced == -1 else np.int64(forced),
            "episode_done": np.True_ if done else np.False_,
            "metrics": metrics_info(sim.metrics(), METRIC_KEYS) if done else _ZERO_METRICS.copy(),
        }

    # ------------------------------------------------------------------ rendering
    def _render_window(self) -> list[int]:
        return self._window_jobs().tolist()

    def _render_extra(self) -> str:
        return ""

    def render(self):
        if self.render_mode is None or self.sim is None:
            return None
        if self.render_mode == "ansi":
            return render_ansi(self.sim, self._render_window(), type(self).__name__, self._render_extra())
        return render_rgb(self.sim, self._render_window(), self.layout.max_server_gpus)


# the shared pieces of gpusched_envs.envs.core, importable from here as before
__all__ = [
    "DEFAULT_MAX_INVALID_REPEATS",
    "INVALID_ACTIONS",
    "OBS_MODES",
    "RENDER_MODES",
    "REWARDS",
    "SPEED_MODELS",
    "ClusterEnv",
    "EpisodeEndedError",
    "EpisodeMetrics",
    "EpisodeSpec",
    "InvalidActionError",
    "WorkloadArg",
    "check_action_value",
    "check_bool",
    "check_choice",
    "check_int",
    "check_number",
    "default_workload_spec",
    "make_workload",
    "resolve_cluster",
]
