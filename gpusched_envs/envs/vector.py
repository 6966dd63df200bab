"""A native vector env: ``N`` copies of one env of the suite stepped in one process, in one call.

``gymnasium.make_vec("gpusched/JobSelect-v1", num_envs=N, **env_kwargs)`` builds one (every ``-v1`` id registers a
``vector_entry_point``; ``vectorization_mode="sync"`` / ``"async"`` still give Gymnasium's own vector envs). The
copies are the unwrapped single envs (no ``PassiveEnvChecker`` / ``OrderEnforcing`` per copy), so a step costs the
``N`` single-env steps plus one pass that copies each observation into its row of preallocated batch buffers.

What it returns, in Gymnasium's vector conventions:

- observations: the batched ``Dict`` (:func:`gymnasium.vector.utils.batch_space` of the single env's space): one
  ``(N, ...)`` array per key (``obs``, ``context``, ``action_mask`` in ``flat`` mode; the node / edge / job arrays
  in ``graph`` mode; the occupancy image in ``image`` mode);
- rewards ``(N,) float64``, terminations and truncations ``(N,) bool``;
- infos: every key of the single env's info as an ``(N,)`` array beside its ``_key`` mask (bool keys as bool
  arrays), plus ``action_mask`` ``(N, A) bool``; ``metrics``, in the steps where some env's episode ended, is a
  dict of ``(N,) float64`` arrays whose mask ``_metrics`` marks those envs (the other rows hold 0.0);
- :meth:`~GpuschedVectorEnv.action_masks` ``(N, A) bool``: the valid actions of each row (what
  ``sb3_contrib.MaskablePPO`` reads).

Seeds: ``reset(seed=s)`` resets env ``i`` with ``s + i``; a list of ``N`` seeds (ints or None) gives each its own;
the copies then run exactly as ``N`` single envs reset with those seeds and stepped with the same actions.

Autoreset (``autoreset_mode=``, also in ``metadata["autoreset_mode"]``): ``AutoresetMode.NEXT_STEP`` (default)
returns an episode's last observation, and the next ``step`` resets that env (its action is ignored, reward 0,
not terminated); ``AutoresetMode.SAME_STEP`` resets it in the same step and puts the last observation and info in
``info["final_obs"]`` (an object array of per-env observation dicts) and ``info["final_info"]`` (batched, with
``_final_obs`` / ``_final_info`` masks), as :class:`gymnasium.vector.SyncVectorEnv` does;
``AutoresetMode.DISABLED`` leaves resets to the caller (``reset(options={"reset_mask": mask})`` resets the masked
envs only).

``max_episode_steps=n`` truncates every episode after ``n`` steps as ``gym.make(..., max_episode_steps=n)`` does,
with the episode's metrics in the info of that step.

Malformed actions are refused before any env steps, with the single env's message and the env's index: a wrong
shape, a value outside ``0..A-1``, NaN / non-integral floats, booleans; with ``invalid_action="raise"`` an action
the mask forbids too; ``step`` before ``reset`` raises ``ResetNeeded``, after ``close`` ``ClosedEnvironmentError``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from gpusched_envs.envs.core import InvalidActionError, check_action_value, check_int

MASK_KEY = "action_mask"
METRICS_KEY = "metrics"
# the info entries filled at an episode's end (0.0 placeholders before): batched only where an episode ended
EPISODE_END_KEYS = ("metrics", "agent_metrics")
DONE_KEY = "episode_done"

__all__ = [
    "DAGScheduleVectorEnv",
    "DelayTuningVectorEnv",
    "GpuschedVectorEnv",
    "JobSelectVectorEnv",
    "WorkerPlacementVectorEnv",
    "autoreset_mode_of",
    "make_vector_env",
]


def autoreset_mode_of(mode) -> AutoresetMode:
    """An :class:`~gymnasium.vector.AutoresetMode` from the enum, its value (``"NextStep"``) or its name
    (``"next_step"``, any case); a ValueError naming the choices otherwise."""
    if isinstance(mode, AutoresetMode):
        return mode
    if isinstance(mode, str):
        for m in AutoresetMode:
            if mode.lower() in (m.value.lower(), m.name.lower()):
                return m
    raise ValueError(
        "autoreset_mode must be one of "
        + ", ".join(f"AutoresetMode.{m.name} ({m.value!r})" for m in AutoresetMode)
        + f", got {mode!r}"
    )


def seed_list(seed, n: int) -> list[int | None]:
    """The per-env seeds of ``reset(seed=...)``: None for all, ``s`` → ``s, s + 1, ...``, or a list of ``n``."""
    if seed is None:
        return [None] * n
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_)):
        s = check_int("seed", seed, 0)
        return [s + i for i in range(n)]
    if isinstance(seed, (list, tuple, np.ndarray)):
        if len(seed) != n:
            raise ValueError(f"seed: a list of seeds must have one per env ({n}), got {len(seed)}")
        return [None if s is None else check_int(f"seed[{i}]", s, 0) for i, s in enumerate(seed)]
    raise ValueError(f"seed must be None, an integer or a list of {n} integers, got {seed!r}")


def batch_infos(infos: list[dict | None], present: np.ndarray) -> dict[str, Any]:
    """The infos of the envs where ``present`` is set, batched by key (``key`` and its ``_key`` mask); the
    ``metrics`` dicts (:data:`EPISODE_END_KEYS`) only from the infos whose ``episode_done`` is set."""
    n = len(infos)
    idx = np.flatnonzero(present).tolist()
    if not idx:
        return {}
    rows = infos if len(idx) == n else [infos[i] for i in idx]
    out: dict[str, Any] = {}
    for key, value in rows[0].items():
        if key in EPISODE_END_KEYS and isinstance(value, dict):
            done = np.zeros(n, dtype=bool)
            done[idx] = [bool(d.get(DONE_KEY, True)) for d in rows]
            if not done.any():  # metrics only where an episode ended
                continue
            out[key] = _batch_metrics(infos, done, key, list(value))
            out["_" + key] = done
            continue
        if isinstance(value, dict):
            sub = [d.get(key) if d is not None else None for d in infos]
            mask = np.array([v is not None for v in sub])
            out[key] = batch_infos(sub, mask)
            out["_" + key] = mask
            continue
        if isinstance(value, np.ndarray):
            arr = np.zeros((n, *value.shape), dtype=value.dtype)
        elif isinstance(value, (bool, int, float, np.generic)):
            arr = np.zeros(n, dtype=np.asarray(value).dtype)
        else:
            arr = np.full(n, None, dtype=object)
        values = [d[key] for d in rows]
        if arr.dtype == object:
            for i, v in zip(idx, values, strict=True):
                arr[i] = v
        elif len(idx) == n:
            arr[:] = values
        else:
            arr[idx] = values
        out[key] = arr
        out["_" + key] = present.copy()
    return out


def _batch_metrics(
    infos: list[dict | None], ended: np.ndarray, name: str, keys: list[str]
) -> dict[str, np.ndarray]:
    """The ``name`` dict (``metrics``) batched: an ``(N,) float64`` array per metric (0.0 where the episode did not end), each with its
    ``_name`` mask."""
    idx = np.flatnonzero(ended).tolist()
    out: dict[str, np.ndarray] = {}
    for k in keys:
        arr = np.zeros(len(infos), dtype=np.float64)
        if idx:
            arr[idx] = [infos[i][name][k] for i in idx]
        out[k] = arr
        out["_" + k] = ended
    return out


class GpuschedVectorEnv(VectorEnv):
    """``num_envs`` copies of the env ``env_id`` (built with ``env_kwargs``) stepped in one process, in one call;
    see the module docstring for what ``reset`` / ``step`` return.

    Args:
        env_id: a registered id of the suite (``"gpusched/JobSelect-v1"``, ...).
        num_envs: how many copies (``N``).
        autoreset_mode: ``AutoresetMode.NEXT_STEP`` (default), ``SAME_STEP`` or ``DISABLED`` (the enum, its value
            or its name).
        max_episode_steps: truncate each episode after this many steps (``gym.make``'s ``TimeLimit``); None: no
            limit beyond the env's own ``max_steps``.
        copy: return copies of the observation buffers (default); ``False`` returns the buffers themselves, which
            the next ``step`` / ``reset`` overwrites.
        env_kwargs: the single env's arguments (``cluster=``, ``obs_mode=``, ...), the same for every copy.
    """

    def __init__(
        self,
        env_id: str,
        num_envs: int = 1,
        *,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        max_episode_steps: int | None = None,
        copy: bool = True,
        **env_kwargs,
    ):
        from gymnasium.envs.registration import load_env_creator

        import gpusched_envs.envs  # noqa: F401  (registers the ids)

        n = check_int("num_envs", num_envs, 1)
        mode = autoreset_mode_of(autoreset_mode)
        self.max_episode_steps = (
            None if max_episode_steps is None else check_int("max_episode_steps", max_episode_steps, 1)
        )
        self.copy = bool(copy)
        spec = gym.spec(env_id)
        creator = spec.entry_point if callable(spec.entry_point) else load_env_creator(spec.entry_point)
        kwargs = {**spec.kwargs, **env_kwargs}
        self.env_id = spec.id
        self.env_kwargs = dict(env_kwargs)
        self.envs: list[gym.Env] = [creator(**kwargs) for _ in range(n)]
        for (
            env
        ) in self.envs:  # each step's observation is copied into the batch at once: no copy of its own first
            encoder = getattr(env, "encoder", None)
            if hasattr(encoder, "copy_observations"):
                encoder.copy_observations = False
        first = self.envs[0]
        for i, env in enumerate(self.envs[1:], 1):
            if env.observation_space != first.observation_space or env.action_space != first.action_space:
                raise ValueError(
                    f"env {i} of {env_id} has other spaces than env 0 (observation {env.observation_space} vs "
                    f"{first.observation_space}); give the copies arguments that fix their layout"
                )
        if not isinstance(first.action_space, spaces.Discrete) or not isinstance(
            first.observation_space, spaces.Dict
        ):
            raise TypeError(f"{env_id}: expected a Discrete action space and a Dict observation space")
        self.num_envs = n
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        self.observation_space = batch_space(self.single_observation_space, n)
        self.action_space = batch_space(self.single_action_space, n)
        self.num_actions = int(first.action_space.n)
        self.autoreset_mode = mode
        self.metadata = {
            "autoreset_mode": mode,
            "render_modes": list(first.metadata.get("render_modes", [])),
            "render_fps": first.metadata.get("render_fps"),
        }
        self.render_mode = getattr(first, "render_mode", None)
        # the batch buffers: one (N, ...) array per observation key, written row by row
        self._obs = {
            k: np.zeros((n, *sp.shape), dtype=sp.dtype)
            for k, sp in self.single_observation_space.spaces.items()
        }
        self._obs_items = list(self._obs.items())
        self._rewards = np.zeros(n, dtype=np.float64)
        self._terminations = np.zeros(n, dtype=bool)
        self._truncations = np.zeros(n, dtype=bool)
        self._autoreset_envs = np.zeros(n, dtype=bool)
        self._elapsed = [0] * n
        # each env's latest info (the single env's dict itself; the SB3 adapter reads them)
        self.env_infos: list[dict] = [{} for _ in range(n)]
        # SAME_STEP: the last info of each env whose episode ended in the latest step (env index -> info)
        self.final_infos: dict[int, dict] = {}
        self._raising = np.array([getattr(env, "invalid_action", "penalize") == "raise" for env in self.envs])
        self._any_raising = bool(self._raising.any())
        # the info keys of the fast batching path ((key, dtype) of the scalar entries; the metric names), learned
        # from the first reset's infos
        self._scalar_keys: list[tuple[str, np.dtype]] | None = None
        self._metric_keys: list[str] = []
        self._was_reset = False
        self.closed = False

    # ------------------------------------------------------------------ checks
    def _checked_actions(self, actions) -> list[int]:
        """The actions as ``N`` Python ints, or the single env's error naming the env (``actions[i]``)."""
        if self.closed:
            raise gym.error.ClosedEnvironmentError(f"{type(self).__name__} is closed; make a new one")
        if not self._was_reset:
            raise gym.error.ResetNeeded("call reset() before step()")
        n, a_n = self.num_envs, self.num_actions
        try:
            arr = np.asarray(actions)
        except Exception as exc:
            raise InvalidActionError(
                f"actions: expected {n} integers (one per env), got {actions!r}"
            ) from exc
        if arr.shape != (n,):
            raise InvalidActionError(
                f"actions: expected {n} integers in 0..{a_n - 1} (one per env), got shape {arr.shape}"
            )
        kind = arr.dtype.kind
        if kind in "iu":
            acts = arr.tolist()
            if min(acts) >= 0 and max(acts) < a_n:
                bad = ()
            else:
                bad = np.flatnonzero((arr < 0) | (arr >= a_n))
        elif kind == "f":
            bad = np.flatnonzero(~np.isfinite(arr) | (arr != np.round(arr)) | (arr < 0) | (arr >= a_n))
        else:  # bool, object, strings: each element decides (check_action_value names the first bad one)
            bad = np.arange(n)
        for i in bad:
            check_action_value(arr[i].item() if kind != "O" else arr[i], a_n, where=f"actions[{i}]")
        if kind not in "iu":
            acts = [check_action_value(x, a_n) for x in arr.tolist()]
        if self._any_raising:
            mask = self._obs[MASK_KEY]
            for i in np.flatnonzero(self._raising):
                live = not (self.autoreset_mode == AutoresetMode.NEXT_STEP and self._autoreset_envs[i])
                if live and not mask[i, acts[i]]:
                    raise InvalidActionError(
                        f"actions[{i}]: invalid action {acts[i]} in env {i}: the action mask forbids it now"
                    )
        return acts

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None):
        """Reset every env (``options["reset_mask"]``: the masked ones only) with its seed (see the class)."""
        if self.closed:
            raise gym.error.ClosedEnvironmentError(f"{type(self).__name__} is closed; make a new one")
        n = self.num_envs
        seeds = seed_list(seed, n)
        if isinstance(seed, (int, np.integer)):
            super().reset(seed=int(seed))
        mask = np.ones(n, dtype=bool)
        env_options = options
        if options is not None and "reset_mask" in options:
            env_options = {k: v for k, v in options.items() if k != "reset_mask"} or None
            mask = np.asarray(options["reset_mask"])
            if mask.shape != (n,) or mask.dtype != np.bool_:
                raise ValueError(
                    f"options['reset_mask'] must be a bool array of shape ({n},), got {mask.dtype} {mask.shape}"
                )
        if not self._was_reset and not mask.all():
            raise gym.error.ResetNeeded("the first reset() must reset every env (no reset_mask)")
        infos = self.env_infos
        for i in np.flatnonzero(mask).tolist():
            obs, info = self.envs[i].reset(seed=seeds[i], options=env_options)
            for k, buf in self._obs_items:
                buf[i] = obs[k]
            infos[i] = info
            self._elapsed[i] = 0
        self._rewards[mask] = 0.0
        self._terminations[mask] = False
        self._truncations[mask] = False
        self._autoreset_envs[mask] = False
        self._was_reset = True
        return self._observations(), self._infos(mask)

    def step(self, actions):
        """Step every env with its action (see the class for autoresets and what comes back)."""
        acts = self._checked_actions(actions)
        envs, items, infos = self.envs, self._obs_items, self.env_infos
        rewards, terms, truncs, elapsed = self._rewards, self._terminations, self._truncations, self._elapsed
        limit = self.max_episode_steps
        next_step = self.autoreset_mode == AutoresetMode.NEXT_STEP
        same_step = self.autoreset_mode == AutoresetMode.SAME_STEP
        pending = self._autoreset_envs.tolist()
        final_obs: dict[int, dict] = {}
        final_infos: dict[int, dict] = {}
        for i, env in enumerate(envs):
            if next_step and pending[i]:
                obs, info = env.reset()
                rewards[i], terms[i], truncs[i], elapsed[i] = 0.0, False, False, 0
            else:
                try:
                    obs, reward, terminated, truncated, info = env.step(acts[i])
                except Exception as exc:
                    exc.add_note(f"raised by env {i} of {type(self).__name__}")
                    raise
                if limit is not None:
                    elapsed[i] += 1
                    if elapsed[i] >= limit:
                        truncated = True
                rewards[i], terms[i], truncs[i] = reward, terminated, truncated
                if terminated or truncated:
                    if not info.get(DONE_KEY, True):  # truncated by max_episode_steps: the metrics so far
                        info = {**info, DONE_KEY: np.bool_(True), METRICS_KEY: env.episode_metrics()}
                    if same_step:
                        # a copy: the reset may reuse the buffers the env observes into
                        final_obs[i], final_infos[i] = {k: v.copy() for k, v in obs.items()}, info
                        obs, info = env.reset()
                        elapsed[i] = 0
            for k, buf in items:
                buf[i] = obs[k]
            infos[i] = info
        self.final_infos = final_infos
        out = self._infos(None)
        if final_obs:
            ended = np.zeros(self.num_envs, dtype=bool)
            ended[list(final_obs)] = True
            fo = np.full(self.num_envs, None, dtype=object)
            for i, o in final_obs.items():
                fo[i] = o
            out["final_obs"], out["_final_obs"] = fo, ended
            out["final_info"] = batch_infos([final_infos.get(i) for i in range(self.num_envs)], ended)
            out["_final_info"] = ended.copy()
        if self.autoreset_mode != AutoresetMode.DISABLED:
            np.logical_or(terms, truncs, out=self._autoreset_envs)
            if same_step:
                self._autoreset_envs[:] = False
        return self._observations(), rewards.copy(), terms.copy(), truncs.copy(), out

    def _observations(self) -> dict[str, np.ndarray]:
        if self.copy:
            return {k: buf.copy() for k, buf in self._obs_items}
        return self._obs

    def _infos(self, present: np.ndarray | None) -> dict[str, Any]:
        """The batched infos of every env (``present`` None) or of the envs ``present`` marks (a partial reset)."""
        out = None
        if present is None:
            if self._scalar_keys is None:
                self._learn_info_keys(self.env_infos[0])
            if self._scalar_keys:
                try:
                    out = self._fast_infos()
                except (KeyError, TypeError, ValueError):  # an info off the first one's schema
                    out = None
            present = np.ones(self.num_envs, dtype=bool)
        if out is None:
            out = batch_infos(self.env_infos, present)
        out[MASK_KEY] = self._obs[MASK_KEY].astype(bool)
        out["_" + MASK_KEY] = present.copy()
        return out

    def _learn_info_keys(self, info: dict) -> None:
        """The schema of the fast path, when every entry is a scalar or the ``metrics`` dict (else none)."""
        scalars, metrics = [], []
        for key, value in info.items():
            if key == METRICS_KEY and isinstance(value, dict):
                metrics = list(value)
            elif isinstance(value, (bool, int, float, np.generic)):
                scalars.append((key, np.asarray(value).dtype))
            else:
                self._scalar_keys = []
                return
        if DONE_KEY not in dict(scalars) and metrics:
            self._scalar_keys = []
            return
        self._scalar_keys, self._metric_keys = scalars, metrics

    def _fast_infos(self) -> dict[str, Any]:
        """Every env's info batched: one array per scalar key (all present), ``metrics`` where episodes ended."""
        infos, n = self.env_infos, self.num_envs
        out: dict[str, Any] = {}
        everyone = np.ones(n, dtype=bool)
        for key, dtype in self._scalar_keys:
            out[key] = np.array([d[key] for d in infos], dtype=dtype)
            out["_" + key] = everyone
        ended = out[DONE_KEY] if self._metric_keys else None
        if ended is not None and ended.any():  # metrics only in the steps where an episode ended
            ended = ended.astype(bool)
            block = np.zeros((len(self._metric_keys), n), dtype=np.float64)
            idx = np.flatnonzero(ended).tolist()
            for i in idx:
                block[:, i] = list(infos[i][METRICS_KEY].values())
            metrics: dict[str, np.ndarray] = {}
            for j, k in enumerate(self._metric_keys):
                metrics[k] = block[j]
                metrics["_" + k] = ended
            out[METRICS_KEY], out["_" + METRICS_KEY] = metrics, ended
        return out

    def action_masks(self) -> np.ndarray:
        """(N, A) bool: the valid actions of each env's current observation; with ``NEXT_STEP`` autoresets, an env
        whose episode just ended ignores its next action, and its row is all True."""
        mask = self._obs[MASK_KEY].astype(bool)
        if self.autoreset_mode == AutoresetMode.NEXT_STEP:
            mask[self._autoreset_envs] = True
        return mask

    def render(self):
        """Each env's ``render()``, in a tuple."""
        return tuple(env.render() for env in self.envs)

    def close_extras(self, **kwargs) -> None:
        for env in getattr(self, "envs", ()):  # (none when the constructor failed)
            env.close()

    # ------------------------------------------------------------------ the copies
    def call(self, name: str, *args, **kwargs) -> tuple:
        """Each env's ``name(*args, **kwargs)`` (or its attribute ``name`` when not callable), in a tuple."""
        out = []
        for env in self.envs:
            attr = getattr(env, name)
            out.append(attr(*args, **kwargs) if callable(attr) else attr)
        return tuple(out)

    def get_attr(self, name: str) -> tuple:
        """Each env's attribute ``name``, in a tuple."""
        return tuple(getattr(env, name) for env in self.envs)

    def set_attr(self, name: str, values) -> None:
        """Set attribute ``name`` of each env: one value for all, or a list of ``N``."""
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(f"set_attr({name!r}): expected {self.num_envs} values, got {len(values)}")
        for env, value in zip(self.envs, values, strict=True):
            setattr(env, name, value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.env_id!r}, num_envs={self.num_envs})"


class _OneIdVectorEnv(GpuschedVectorEnv):
    """A :class:`GpuschedVectorEnv` of the one id ``env_id`` (the ``vector_entry_point`` of that id)."""

    env_id: str

    def __init__(self, num_envs: int = 1, **kwargs):
        super().__init__(type(self).env_id, num_envs, **kwargs)


class JobSelectVectorEnv(_OneIdVectorEnv):
    """:class:`GpuschedVectorEnv` of ``gpusched/JobSelect-v1`` (its ``vector_entry_point``)."""

    env_id = "gpusched/JobSelect-v1"


class WorkerPlacementVectorEnv(_OneIdVectorEnv):
    """:class:`GpuschedVectorEnv` of ``gpusched/WorkerPlacement-v1`` (its ``vector_entry_point``)."""

    env_id = "gpusched/WorkerPlacement-v1"


class DelayTuningVectorEnv(_OneIdVectorEnv):
    """:class:`GpuschedVectorEnv` of ``gpusched/DelayTuning-v1`` (its ``vector_entry_point``)."""

    env_id = "gpusched/DelayTuning-v1"


class DAGScheduleVectorEnv(_OneIdVectorEnv):
    """:class:`GpuschedVectorEnv` of ``gpusched/DAGSchedule-v1`` (its ``vector_entry_point``)."""

    env_id = "gpusched/DAGSchedule-v1"


def make_vector_env(env_id: str, num_envs: int = 1, **kwargs) -> GpuschedVectorEnv:
    """A :class:`GpuschedVectorEnv` of ``env_id`` (what ``gymnasium.make_vec(env_id, num_envs, **kwargs)`` builds,
    without the spec bookkeeping)."""
    return GpuschedVectorEnv(env_id, num_envs, **kwargs)
