"""What the cluster envs share: resolving cluster and workload arguments, one simulator per episode, the exact reward
integrals, the observation encoder, invalid-action handling and rendering. Each env adds its decision and action."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from gpusched_envs.envs.encoding import OBS_MODES, ClusterEncoder, Layout, gpu_remaining_time
from gpusched_envs.envs.features import RunningTotals, gpu_relative_speed
from gpusched_envs.envs.render import render_ansi, render_rgb
from gpusched_envs.sim import SimConfig, Simulator
from gpusched_envs.sim.engine import FULL_GPU
from gpusched_envs.sim.sensitivity import job_sensitivities
from gpusched_envs.sim.topology import Cluster, load_cluster
from gpusched_envs.sim.workload import Workload

REWARDS = ("throughput", "jct", "slowdown")
INVALID_ACTIONS = ("penalize", "raise")

WorkloadArg = str | Workload | Callable[[Cluster, np.random.Generator], Workload] | None


class InvalidActionError(ValueError):
    """An action the mask forbids, with ``invalid_action="raise"``."""


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
    """Base of the envs that drive :class:`~gpusched_envs.sim.Simulator` (not registered itself)."""

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}
    obs_modes_offered: tuple[str, ...] = OBS_MODES

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
    ):
        check_choice("obs_mode", obs_mode, OBS_MODES)
        check_choice("reward", reward, REWARDS)
        check_choice("invalid_action", invalid_action, INVALID_ACTIONS)
        check_choice("render_mode", render_mode, (None, *self.metadata["render_modes"]))
        if obs_mode not in self.obs_modes_offered:
            raise ValueError(
                f"{type(self).__name__} offers obs_mode 'graph' or 'flat'; 'image' observations are offered by "
                "JobSelect-v0 and WorkerPlacement-v0"
            )
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        if time_scale <= 0:
            raise ValueError(f"time_scale must be > 0 seconds, got {time_scale}")
        if max_steps is not None and max_steps < 1:
            raise ValueError(f"max_steps must be >= 1 or None, got {max_steps}")
        self.cluster = resolve_cluster(cluster)
        self.workload_arg = workload
        self.num_jobs, self.load = int(num_jobs), float(load)
        self.window = int(window)
        self.obs_mode, self.reward_kind = obs_mode, reward
        self.max_steps = max_steps
        self.time_scale = float(time_scale)
        self.invalid_action, self.invalid_penalty = invalid_action, float(invalid_penalty)
        self.interference, self.speed_model = bool(interference), speed_model
        self.workload_seed = workload_seed
        self.render_mode = render_mode
        self.layout = Layout.for_clusters(
            [self.cluster, *layout_clusters], self.window, context_size, num_actions
        )
        self.encoder = ClusterEncoder(self.layout, obs_mode, self.time_scale)
        self.observation_space = self.encoder.observation_space()
        self.sim: Simulator | None = None
        self._static_cluster: Cluster | None = None

    # ------------------------------------------------------------------ episode
    def _new_episode(self) -> None:
        self.sim = episode_simulator(self, self.np_random)
        sim = self.sim
        if self._static_cluster is not self.cluster:
            self.encoder.set_cluster(self.cluster, gpu_relative_speed(self.cluster))
            self._static_cluster = self.cluster
            self._gpu_remaining = np.zeros(self.cluster.num_gpus)
        self.sensitivity = job_sensitivities(self.cluster, sim.job_model, sim.job_gpus_n)  # (J,)
        self.log_sensitivity = np.log(self.sensitivity)
        ideal = np.maximum(sim.job_work * sim.job_ideal_iter, 1e-9)
        self.totals = RunningTotals(sim, 1.0 / ideal if self.reward_kind == "slowdown" else None)
        self.steps = 0
        self.drained = False
        self._last_mark = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._new_episode()
        self._first_decision()
        return self._observe(), self._info(False, False)

    def _first_decision(self) -> None:
        """Run the new episode's simulator to its first decision for the agent (each env says how)."""
        raise NotImplementedError

    def _advance(self) -> bool:
        """Run the simulator to its next decision point; False once it has drained."""
        more = self.sim.next_decision()
        self.totals.sync()
        if not more:
            self.drained = True
        return more

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
        need = sim.job_gpus_n[jobs]
        plain = (sim.job_allowed[jobs] < 0) & (sim.job_milli[jobs] >= FULL_GPU)
        fits = need <= self.sim.free_gpus()
        if plain.all():
            return fits
        for i in np.flatnonzero(~plain):
            j = int(jobs[i])
            n = 1 if sim.job_milli[j] < FULL_GPU else int(need[i])
            fits[i] = np.count_nonzero(sim.free_mask(j)) >= n
        return fits

    def _can_wait(self) -> bool:
        """Waiting is allowed while something can still happen without the agent (a run, an arrival)."""
        sim = self.sim
        return bool(sim.running) or sim.next_arrival < sim.num_jobs

    # ------------------------------------------------------------------ observation
    def _encode(self, jobs: np.ndarray, fits: np.ndarray, in_placement: np.ndarray | None = None) -> dict:
        sim = self.sim
        enc = self.encoder
        gpu_remaining_time(sim, self._gpu_remaining)
        queued_beyond = max(0, len(sim.queue) - len(jobs))
        enc.encode_cluster(sim, self.sim.free_gpus(), self._gpu_remaining, in_placement, queued_beyond)
        enc.encode_jobs(sim, jobs, fits, self.log_sensitivity)
        return enc.observation()

    def action_masks(self) -> np.ndarray:
        """(A,) bool: the valid actions now (``sb3_contrib.MaskablePPO`` reads this)."""
        return self.encoder.action_mask.astype(bool)

    # ------------------------------------------------------------------ invalid actions
    def _check_action(self, action) -> int:
        a = int(np.asarray(action).reshape(()))
        if not 0 <= a < self.layout.actions:
            raise InvalidActionError(f"action {a} outside 0..{self.layout.actions - 1}")
        return a

    def _invalid(self, action: int, why: str):
        """No-op with a penalty (or raise): the state and the clock do not move."""
        if self.invalid_action == "raise":
            raise InvalidActionError(f"invalid action {action}: {why}")
        self.steps += 1
        truncated = self.max_steps is not None and self.steps >= self.max_steps
        info = {"invalid_action": True, "reason": why}
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
