"""What the cluster envs share: resolving and checking arguments, one simulator per episode, the one ``step`` (each
env supplies only how an action acts, :meth:`ClusterEnv._apply`, and what it observes), the exact reward integrals,
the observation encoder and its information setting, invalid-action handling and rendering."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from gpusched_envs.envs.encoding import INFORMATION, NON_CLAIRVOYANT, OBS_MODES, ClusterEncoder, Layout
from gpusched_envs.envs.features import RunningTotals, gpu_relative_speed
from gpusched_envs.envs.render import render_ansi, render_rgb
from gpusched_envs.sim import SimConfig, Simulator
from gpusched_envs.sim.engine import FULL_GPU
from gpusched_envs.sim.sensitivity import job_sensitivities
from gpusched_envs.sim.topology import Cluster, load_cluster
from gpusched_envs.sim.workload import Workload

REWARDS = ("throughput", "jct", "slowdown")
INVALID_ACTIONS = ("penalize", "raise")
SPEED_MODELS = ("throughput", "duration")

WorkloadArg = str | Workload | Callable[[Cluster, np.random.Generator], Workload] | None


class InvalidActionError(ValueError):
    """An action that is malformed (not one integer of the action space) or, with ``invalid_action="raise"``, one
    the mask forbids."""


class EpisodeEndedError(gym.error.ResetNeeded, RuntimeError):
    """``step`` after the episode terminated (every job finished): call ``reset()``."""


def check_int(name: str, value, low: int | None = None) -> int:
    """``value`` as an int (Python or numpy integer, not a bool / float / string), ``>= low``; else a ValueError
    naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    if low is not None and value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return int(value)


def check_number(name: str, value, low: float | None = None, positive: bool = False) -> float:
    """``value`` as a finite float (``> 0`` with ``positive``, ``>= low``); else a ValueError naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if positive and v <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    if low is not None and v < low:
        raise ValueError(f"{name} must be >= {low}, got {value!r}")
    return v


def check_bool(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")
    return bool(value)


def check_action_value(action, n: int) -> int:
    """One action of ``Discrete(n)``: an integer (or an integral float, or a one-element array of one), in
    ``0..n-1``; anything else (NaN, inf, 0.7, a vector, a string) raises :class:`InvalidActionError` naming it."""
    if type(action) is int or type(action) is np.int64:  # the usual case, without the array round trip
        if 0 <= action < n:
            return int(action)
        raise InvalidActionError(f"action {action} outside 0..{n - 1}")
    try:
        arr = np.asarray(action)
    except Exception as exc:  # an object numpy cannot read
        raise InvalidActionError(f"action must be one integer in 0..{n - 1}, got {action!r}") from exc
    if arr.size != 1:
        raise InvalidActionError(f"action must be one integer in 0..{n - 1}, got shape {arr.shape}")
    value = arr.reshape(()).item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidActionError(f"action must be one integer in 0..{n - 1}, got {action!r}")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise InvalidActionError(f"action must be an integer in 0..{n - 1}, got {value!r}")
    a = int(value)
    if not 0 <= a < n:
        raise InvalidActionError(f"action {a} outside 0..{n - 1}")
    return a


class EpisodeMetrics(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Registered as an additional wrapper of every cluster env, so it sits outside ``gym.make``'s ``TimeLimit``:
    when an episode is truncated (``max_episode_steps``) it puts the simulator's metrics in ``info["metrics"]``,
    as the env itself does at termination and at its own ``max_steps``."""

    def __init__(self, env: gym.Env):
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if (terminated or truncated) and "metrics" not in info:
            info = {**info, "metrics": self.env.unwrapped.sim.metrics()}
        return obs, reward, terminated, truncated, info


def resolve_cluster(cluster: str | Cluster, catalog=None) -> Cluster:
    """A preset name, a YAML path or a built :class:`Cluster`."""
    if isinstance(cluster, Cluster):
        return cluster
    return load_cluster(cluster, catalog=catalog)


def default_workload_spec(cluster: Cluster, num_jobs: int, load: float) -> str:
    """Philly-fitted synthetic arrivals at the given offered load on this cluster, job sizes capped at its size."""
    return f"synthetic:jobs={num_jobs},load={load},gpus={cluster.num_gpus},max_gpus={cluster.num_gpus}"


def make_workload(workload: WorkloadArg, cluster: Cluster, seed: int, num_jobs: int, load: float) -> Workload:
    """The workload of one episode: a fixed :class:`Workload`, a spec string loaded with ``seed``, or a generator
    ``f(cluster, rng)``; ``None`` is :func:`default_workload_spec`."""
    from gpusched_envs.workloads import load_workload

    if isinstance(workload, Workload):
        return workload
    if workload is None:
        return load_workload(default_workload_spec(cluster, num_jobs, load), seed=seed)
    if isinstance(workload, str):
        return load_workload(workload, seed=seed)
    if callable(workload):
        return workload(cluster, np.random.default_rng(seed))
    raise TypeError(
        f"workload must be a spec string, a Workload or a callable, got {type(workload).__name__}"
    )


def episode_simulator(env, rng: np.random.Generator) -> Simulator:
    """The simulator of a new episode of ``env`` (a :class:`ClusterEnv` or ``multi_scheduler_v0``): workload and
    simulator seeds drawn from ``rng`` in that order (the workload seed unless ``env.workload_seed`` fixes it), the
    env's workload argument, interference and speed model. On a cluster of VC pools a job larger than its VC's quota
    is dropped with a warning, as in ``gpusched simulate``."""
    wl_seed = int(rng.integers(2**31)) if env.workload_seed is None else int(env.workload_seed)
    sim_seed = int(rng.integers(2**31))
    workload = make_workload(env.workload_arg, env.cluster, wl_seed, env.num_jobs, env.load)
    config = SimConfig(
        seed=sim_seed,
        interference=env.interference,
        speed_model=env.speed_model,
        oversize="drop" if env.cluster.pool_names else "error",
    )
    return Simulator(env.cluster, workload, config)


def check_choice(name: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")


class ClusterEnv(gym.Env):
    """Base of the envs that drive :class:`~gpusched_envs.sim.Simulator` (not registered itself).

    Subclasses supply :meth:`_first_decision` (run a new episode to the first decision), :meth:`_apply` (act and run
    to the next decision), :meth:`_observe` (write the action mask and context, return the observation) and
    :meth:`_why_invalid` (the message for a masked action); :meth:`step` is shared.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}
    obs_modes_offered: tuple[str, ...] = OBS_MODES
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
    ):
        check_choice("obs_mode", obs_mode, OBS_MODES)
        check_choice("reward", reward, REWARDS)
        check_choice("invalid_action", invalid_action, INVALID_ACTIONS)
        check_choice("render_mode", render_mode, (None, *self.metadata["render_modes"]))
        check_choice("information", information, INFORMATION)
        check_choice("speed_model", speed_model, SPEED_MODELS)
        if obs_mode not in self.obs_modes_offered:
            raise ValueError(
                f"{type(self).__name__} offers obs_mode 'graph' or 'flat'; 'image' observations are offered by "
                "JobSelect-v0 and WorkerPlacement-v0"
            )
        self.num_jobs = check_int("num_jobs", num_jobs, 1)
        self.load = check_number("load", load, positive=True)
        self.window = check_int("window", window, 1)
        self.max_steps = None if max_steps is None else check_int("max_steps", max_steps, 1)
        self.time_scale = check_number("time_scale", time_scale, positive=True)
        self.invalid_penalty = check_number("invalid_penalty", invalid_penalty)
        self.interference = check_bool("interference", interference)
        self.workload_seed = None if workload_seed is None else check_int("workload_seed", workload_seed, 0)
        self.cluster = resolve_cluster(cluster)
        self.workload_arg = workload
        self.obs_mode, self.reward_kind = obs_mode, reward
        self.invalid_action = invalid_action
        self.speed_model = speed_model
        self.information = information
        self.render_mode = render_mode
        self.layout = Layout.for_clusters(
            [self.cluster, *layout_clusters], self.window + running_rows, context_size, num_actions
        )
        names = self.context_names if len(self.context_names) == context_size else None
        self.encoder = ClusterEncoder(
            self.layout, obs_mode, self.time_scale, information, running_rows, names
        )
        self.observation_space = self.encoder.observation_space()
        self.sim: Simulator | None = None
        self._static_cluster: Cluster | None = None
        self._terminated = False

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
        self.sim = episode_simulator(self, self.np_random)
        sim = self.sim
        if self._static_cluster is not self.cluster:
            self.encoder.set_cluster(self.cluster, gpu_relative_speed(self.cluster))
            self._static_cluster = self.cluster
        self.sensitivity = job_sensitivities(self.cluster, sim.job_model, sim.job_gpus_n)  # (J,)
        self.log_sensitivity = np.log(self.sensitivity)
        ideal = np.maximum(sim.job_work * sim.job_ideal_iter, 1e-9)
        self.totals = RunningTotals(sim, 1.0 / ideal if self.reward_kind == "slowdown" else None)
        self.steps = 0
        self.drained = False
        self._terminated = False
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
        if not self.encoder.action_mask[a]:
            return self._invalid(a, self._why_invalid(a))
        mark = self._pending_mark if self._pending_mark is not None else self._mark()
        self._pending_mark = None
        self._apply(a)
        reward = self._reward_since(mark)
        self.steps += 1
        terminated = self.drained
        truncated = not terminated and self.max_steps is not None and self.steps >= self.max_steps
        self._terminated = terminated
        obs = self._observe()
        return obs, reward, terminated, truncated, self._info(terminated, truncated)

    # ------------------------------------------------------------------ rewards
    def _mark(self) -> tuple[float, float, float]:
        """(time, accrued weighted time, goodput) now; the integrals only change when time passes."""
        now = self.sim.now
        last = self._last_mark
        if last is not None and last[0] == now:
            return last
        t = self.totals
        self._last_mark = (now, t.weighted_time(), t.goodput() if self.reward_kind == "throughput" else 0.0)
        return self._last_mark

    def _reward_since(self, mark: tuple[float, float, float]) -> float:
        """Reward for the simulated time since ``mark`` (see the env docstrings, section Rewards)."""
        now, weighted, goodput = self._mark()
        if now == mark[0]:
            return 0.0
        if self.reward_kind == "throughput":
            g = self.cluster.num_gpus
            return (goodput - mark[2] - g * (now - mark[0])) / (g * self.time_scale)
        if self.reward_kind == "jct":
            return -(weighted - mark[1]) / self.time_scale
        return -(weighted - mark[1])

    # ------------------------------------------------------------------ queue helpers
    def _window_jobs(self) -> np.ndarray:
        q = self.sim.queue
        k = min(len(q), self.window)
        return np.fromiter(itertools.islice(q, k), dtype=np.int64, count=k)

    def _count_fits(self, jobs: np.ndarray) -> np.ndarray:
        """(k,) whether enough GPUs are free (in the job's pool / type, with its share) for each job."""
        sim = self.sim
        if not len(jobs):
            return np.zeros(0, dtype=bool)
        fits = sim.job_gpus_n[jobs] <= sim.free_gpus()
        # a job with a pool / type constraint or a GPU share counts the GPUs it may use (a fractional job asks
        # for one GPU: the workload validation allows no fractional multi-GPU job)
        special = (sim.job_allowed[jobs] >= 0) | (sim.job_milli[jobs] < FULL_GPU)
        for i in np.flatnonzero(special):
            j = int(jobs[i])
            fits[i] = np.count_nonzero(sim.free_mask(j)) >= sim.job_gpus_n[j]
        return fits

    def _can_wait(self) -> bool:
        """Waiting is allowed while something can still happen without the agent (a run, an arrival)."""
        sim = self.sim
        return bool(sim.running) or sim.next_arrival < sim.num_jobs

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
        queued_beyond = max(0, len(sim.queue) - len(jobs))
        enc.encode_cluster(sim, sim.free_gpus(), None, in_placement, queued_beyond)
        enc.encode_jobs(sim, jobs, fits, self.log_sensitivity, running, preemptible)
        return enc.observation()

    def action_masks(self) -> np.ndarray:
        """(A,) bool: the valid actions now (``sb3_contrib.MaskablePPO`` reads this)."""
        return self.encoder.action_mask.astype(bool)

    # ------------------------------------------------------------------ invalid actions
    def _check_action(self, action) -> int:
        return check_action_value(action, self.layout.actions)

    def _invalid(self, action: int, why: str):
        """No-op with a penalty (or raise): the state and the clock do not move."""
        if self.invalid_action == "raise":
            raise InvalidActionError(f"invalid action {action}: {why}")
        self.steps += 1
        truncated = self.max_steps is not None and self.steps >= self.max_steps
        info = {**self._info(False, truncated), "invalid_action": True, "reason": why}
        return self.encoder.observation(), -self.invalid_penalty, False, truncated, info

    def _info(self, terminated: bool, truncated: bool) -> dict[str, Any]:
        sim = self.sim
        info: dict[str, Any] = {"time": sim.now, "queued": len(sim.queue), "running": len(sim.running)}
        if terminated or truncated:
            info["metrics"] = sim.metrics()
        return info

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
