"""Gymnasium observation wrappers that keep the action mask apart from the features.

Every env of the suite observes a ``Dict`` with an ``action_mask`` entry beside its feature arrays (``obs`` and
``context`` in ``flat`` mode, node/edge/job arrays in ``graph`` mode, the occupancy image in ``image`` mode).
Gymnasium's own ``FlattenObservation`` flattens the mask into the features (float64) and ``NormalizeObservation``
refuses a ``Dict``; these wrappers do what a feature-vector learner needs instead:

- :class:`FlattenFeatures`: the feature arrays flattened into one float32 vector, the mask kept as its own key
  (``{"obs": Box, "action_mask": Box}``, key names and mask dtype configurable: ``features_key="observations"``
  and ``mask_dtype=np.float32`` give RLlib's action-masking layout) or, with ``with_mask=False``, a plain ``Box``
  observation with the mask offered by :meth:`~MaskedWrapper.action_masks` (what ``sb3_contrib.MaskablePPO``
  reads).
- :class:`NormalizeFeatures`: running mean / variance normalisation of the float features only; masks, edge
  indices and other integer arrays pass through unchanged.
- :class:`FixedInfo`: an ``info`` with the same keys at every step (float64 numpy scalars, NaN where the env
  gives no value, e.g. the episode metrics before the episode ends): what batching libraries (TorchRL's info
  readers, Gymnasium's vector envs) need to stack infos.

Both offer ``action_masks()`` (the mask of the latest observation, bool). The module imports gymnasium and numpy
only.
"""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from gpusched_envs.envs.encoding import float_box

MASK_KEY = "action_mask"

__all__ = [
    "MASK_KEY",
    "FixedInfo",
    "FlattenFeatures",
    "MaskedWrapper",
    "NormalizeFeatures",
    "RunningMeanStd",
    "feature_keys",
    "flat_layout",
    "flat_layout_space",
]


def _mask_of(obs, env: gym.Env, mask_key: str) -> np.ndarray:
    if isinstance(obs, dict) and mask_key in obs:
        return np.asarray(obs[mask_key]).astype(bool)
    return np.asarray(env.get_wrapper_attr("action_masks")()).astype(bool)


class MaskedWrapper(gym.ObservationWrapper, gym.utils.RecordConstructorArgs):
    """An observation wrapper that remembers the action mask of the latest observation and offers it as
    ``action_masks()`` (bool, one entry per action), whatever layout it gives its own observations."""

    mask_key = MASK_KEY

    def __init__(self, env: gym.Env, **constructor_args):
        gym.utils.RecordConstructorArgs.__init__(self, **constructor_args)
        gym.ObservationWrapper.__init__(self, env)
        self._mask: np.ndarray | None = None

    def _remember_mask(self, obs) -> None:
        self._mask = _mask_of(obs, self.env, self.mask_key)

    def reset(self, *, seed=None, options=None):
        obs, info = self.env.reset(seed=seed, options=options)
        self._remember_mask(obs)
        return self.observation(obs), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._remember_mask(obs)
        return self.observation(obs), reward, terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        """(A,) bool: the valid actions of the latest observation (``sb3_contrib.MaskablePPO`` reads this)."""
        if self._mask is None:
            raise gym.error.ResetNeeded("action_masks() called before reset()")
        return self._mask.copy()


def _dict_space(env: gym.Env, wrapper: str) -> spaces.Dict:
    space = env.observation_space
    if not isinstance(space, spaces.Dict) or MASK_KEY not in space.spaces:
        raise TypeError(
            f"{wrapper} wraps an env whose observation space is a Dict with an {MASK_KEY!r} entry "
            f"(the gpusched envs), got {space!r}"
        )
    return space


def feature_keys(space: spaces.Dict, keys: Sequence[str] | None = None) -> tuple[str, ...]:
    """The feature entries of a gpusched ``Dict`` space to flatten: ``keys`` checked, or every entry but the
    action mask in the space's order."""
    available = [k for k in space.spaces if k != MASK_KEY]
    chosen = tuple(available if keys is None else keys)
    unknown = [k for k in chosen if k not in available]
    if unknown or not chosen:
        raise ValueError(
            f"FlattenFeatures(keys={keys!r}): expected a non-empty list of feature entries among {available}"
            + (f"; unknown: {unknown}" if unknown else "")
        )
    for k in chosen:
        if not isinstance(space.spaces[k], spaces.Box):
            raise TypeError(f"FlattenFeatures: entry {k!r} is {space.spaces[k]!r}, expected a Box")
    return chosen


def flat_layout_space(
    space: spaces.Dict,
    keys: Sequence[str],
    features_key: str | None,
    mask_key: str = MASK_KEY,
    mask_dtype=np.int8,
) -> spaces.Space:
    """The space of :func:`flat_layout`: ``Box(float32)`` of the flattened ``keys``, inside
    ``Dict({features_key: ..., mask_key: Box(0, 1, mask_dtype)})`` unless ``features_key`` is None."""
    low = np.concatenate([np.asarray(space.spaces[k].low, dtype=np.float32).ravel() for k in keys])
    high = np.concatenate([np.asarray(space.spaces[k].high, dtype=np.float32).ravel() for k in keys])
    features = float_box(low, high)  # a copy of the Box built for these bounds before
    if features_key is None:
        return features
    n = int(space.spaces[MASK_KEY].shape[0])
    return spaces.Dict(
        {features_key: features, mask_key: spaces.Box(0, 1, shape=(n,), dtype=np.dtype(mask_dtype))}
    )


def flat_layout(
    obs: dict, keys: Sequence[str], features_key: str | None, mask_key: str = MASK_KEY, mask_dtype=np.int8
):
    """One observation in the layout of :func:`flat_layout_space`."""
    flat = np.concatenate([np.asarray(obs[k], dtype=np.float32).ravel() for k in keys])
    if features_key is None:
        return flat
    return {features_key: flat, mask_key: np.asarray(obs[MASK_KEY]).astype(mask_dtype)}


class FlattenFeatures(MaskedWrapper):
    """The feature arrays of a ``Dict`` observation flattened into one float32 vector; the action mask kept apart.

    Args:
        env: an env observing a ``Dict`` with an ``action_mask`` entry.
        keys: the feature entries to flatten, in this order (default: every entry but the mask, in the space's
            sorted key order).
        with_mask: ``True`` (default): observations are ``{features_key: Box(float32), mask_key: Box(mask_dtype)}``;
            ``False``: observations are the feature ``Box`` alone (the mask through :meth:`action_masks`).
        features_key: the key of the features in the ``Dict`` layout (``"obs"``; RLlib's masking module reads
            ``"observations"``).
        mask_key: the key of the mask in the ``Dict`` layout.
        mask_dtype: the dtype of the mask entry (``np.int8`` as the envs; RLlib wants ``np.float32``).
    """

    def __init__(
        self,
        env: gym.Env,
        keys: Sequence[str] | None = None,
        *,
        with_mask: bool = True,
        features_key: str = "obs",
        mask_key: str = MASK_KEY,
        mask_dtype=np.int8,
    ):
        super().__init__(
            env,
            keys=keys,
            with_mask=with_mask,
            features_key=features_key,
            mask_key=mask_key,
            mask_dtype=mask_dtype,
        )
        space = _dict_space(env, type(self).__name__)
        self.keys = feature_keys(space, keys)
        if with_mask and features_key == mask_key:
            raise ValueError(f"features_key and mask_key must differ, both are {mask_key!r}")
        self.with_mask = bool(with_mask)
        self.features_key, self.out_mask_key = features_key, mask_key
        self.mask_dtype = np.dtype(mask_dtype)
        self.sizes = tuple(int(np.prod(space.spaces[k].shape)) for k in self.keys)
        self.observation_space = flat_layout_space(
            space, self.keys, features_key if with_mask else None, mask_key, self.mask_dtype
        )

    def feature_slices(self) -> dict[str, slice]:
        """Where each feature entry lies in the flat vector."""
        out, start = {}, 0
        for k, size in zip(self.keys, self.sizes, strict=True):
            out[k] = slice(start, start + size)
            start += size
        return out

    def observation(self, observation):
        return flat_layout(
            observation,
            self.keys,
            self.features_key if self.with_mask else None,
            self.out_mask_key,
            self.mask_dtype,
        )


class RunningMeanStd:
    """Running mean and variance of arrays of one shape (parallel-variance update, as Gymnasium's)."""

    def __init__(self, shape: tuple[int, ...], epsilon: float = 1e-4):
        self.mean = np.zeros(shape, dtype=np.float64)
        self.var = np.ones(shape, dtype=np.float64)
        self.count = float(epsilon)

    def update(self, x: np.ndarray) -> None:
        """Fold in one sample ``x`` (of the running shape)."""
        x = np.asarray(x, dtype=np.float64)[None]
        batch_mean, batch_var, batch_count = x.mean(axis=0), x.var(axis=0), x.shape[0]
        delta = batch_mean - self.mean
        total = self.count + batch_count
        self.mean = self.mean + delta * batch_count / total
        m2 = self.var * self.count + batch_var * batch_count + delta**2 * self.count * batch_count / total
        self.var = m2 / total
        self.count = total


class NormalizeFeatures(MaskedWrapper):
    """Running normalisation, ``(x - mean) / sqrt(var + epsilon)`` clipped to ``±clip``, of the float features.

    On a ``Dict`` observation it normalises each float32 entry (or the entries named by ``keys``) and passes the
    action mask and every integer entry (other masks, ``edge_index``) through; on a ``Box`` observation (e.g. after
    ``FlattenFeatures(with_mask=False)``) it normalises the whole vector. The statistics update at every
    observation while ``update_running_mean`` is true (set it false to evaluate with frozen statistics).
    """

    def __init__(
        self,
        env: gym.Env,
        keys: Sequence[str] | None = None,
        *,
        epsilon: float = 1e-8,
        clip: float = 10.0,
    ):
        super().__init__(env, keys=keys, epsilon=epsilon, clip=clip)
        space = env.observation_space
        if not np.isfinite(clip) or clip <= 0 or not np.isfinite(epsilon) or epsilon <= 0:
            raise ValueError(
                f"NormalizeFeatures: clip and epsilon must be > 0, got clip={clip}, epsilon={epsilon}"
            )
        self.epsilon, self.clip = float(epsilon), float(clip)
        self.update_running_mean = True
        if isinstance(space, spaces.Box):
            if keys is not None:
                raise ValueError(
                    "NormalizeFeatures: keys apply to a Dict observation; this env observes a Box"
                )
            self.keys: tuple[str, ...] = ()
            self.rms: dict[str | None, RunningMeanStd] = {None: RunningMeanStd(space.shape)}
            self.observation_space = spaces.Box(-self.clip, self.clip, shape=space.shape, dtype=np.float32)
            return
        if not isinstance(space, spaces.Dict):
            raise TypeError(f"NormalizeFeatures wraps a Box or Dict observation space, got {space!r}")
        floats = [
            k
            for k, s in space.spaces.items()
            if k != MASK_KEY and isinstance(s, spaces.Box) and np.issubdtype(s.dtype, np.floating)
        ]
        self.keys = tuple(floats if keys is None else keys)
        bad = [k for k in self.keys if k not in floats]
        if bad:
            raise ValueError(
                f"NormalizeFeatures(keys={keys!r}): {bad} are not float feature entries of {floats}"
            )
        self.rms = {k: RunningMeanStd(space.spaces[k].shape) for k in self.keys}
        new = dict(space.spaces)
        for k in self.keys:
            new[k] = spaces.Box(-self.clip, self.clip, shape=space.spaces[k].shape, dtype=np.float32)
        self.observation_space = spaces.Dict(new)

    def _normalize(self, key, x) -> np.ndarray:
        rms = self.rms[key]
        x = np.asarray(x, dtype=np.float64)
        if self.update_running_mean:
            rms.update(x)
        out = (x - rms.mean) / np.sqrt(rms.var + self.epsilon)
        return np.clip(out, -self.clip, self.clip).astype(np.float32)

    def observation(self, observation):
        if not self.keys:
            return self._normalize(None, observation)
        out = dict(observation)
        for k in self.keys:
            out[k] = self._normalize(k, observation[k])
        return out


class FixedInfo(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """An ``info`` of fixed keys: ``keys`` read at the top level of the env's info and ``metrics`` read from its
    ``info["metrics"]`` when the episode ends, each a float64 numpy scalar, NaN when absent (the metrics: NaN
    before the episode's last step). Other entries of the env's info are dropped.

    Args:
        env: any env of the suite (or another env whose info values under ``keys`` are numbers).
        keys: top-level info entries kept; ``None`` (default): the entries of the first ``reset``'s info that are
            numbers (``time``, ``queued``, ``running`` for the cluster envs, ``makespan`` for DAGSchedule-v1).
        metrics: entries of ``info["metrics"]`` kept under their own name (default ``avg_jct``, ``makespan``;
            a name also among ``keys`` keeps the top-level value when there is one).
    """

    def __init__(
        self,
        env: gym.Env,
        keys: Sequence[str] | None = None,
        metrics: Sequence[str] = ("avg_jct", "makespan"),
    ):
        gym.utils.RecordConstructorArgs.__init__(self, keys=keys, metrics=metrics)
        gym.Wrapper.__init__(self, env)
        self.keys = None if keys is None else tuple(keys)
        self.metrics = tuple(metrics)

    def fixed(self, info: dict) -> dict:
        """The fixed-key info of the env's ``info``."""
        if self.keys is None:
            self.keys = tuple(k for k, v in info.items() if k != "metrics" and _is_number(v))
        # metrics count at the episode's end only (an info that says ``episode_done`` may carry them always)
        metrics = (info.get("metrics") or {}) if info.get("episode_done", True) else {}
        out = {k: np.float64(np.nan) for k in (*self.keys, *self.metrics)}
        for k in self.metrics:
            if _is_number(metrics.get(k)):
                out[k] = np.float64(metrics[k])
        for k in self.keys:
            if _is_number(info.get(k)):
                out[k] = np.float64(info[k])
        return out

    def reset(self, *, seed=None, options=None):
        obs, info = self.env.reset(seed=seed, options=options)
        return obs, self.fixed(info)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, self.fixed(info)

    def action_masks(self) -> np.ndarray:
        """The wrapped env's ``action_masks()``."""
        return self.env.get_wrapper_attr("action_masks")()


def _is_number(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
