"""Observation spaces of envs of one layout are equal copies of one built Box (not shared objects), equal to the
Box gymnasium builds from the same bounds."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import gpusched_envs  # noqa: F401  (registers the env ids)
from gpusched_envs.envs import encoding


@pytest.mark.parametrize("mode", ["flat", "graph", "image"])
def test_spaces_of_two_envs_are_equal_independent_copies(mode):
    a = gym.make("gpusched/JobSelect-v1", cluster="hetero64", obs_mode=mode).observation_space
    b = gym.make("gpusched/JobSelect-v1", cluster="hetero64", obs_mode=mode).observation_space
    assert a == b
    for key, box in a.spaces.items():
        other = b.spaces[key]
        assert box is not other
        if isinstance(box, spaces.Box):
            assert not np.shares_memory(box.low, other.low) and not np.shares_memory(box.high, other.high)
    # each copy samples from its own generator: seeding the other env's space in between changes nothing
    a.seed(1)
    first = a.sample()
    a.seed(1)
    b.seed(2)
    again = a.sample()
    for key in first:
        np.testing.assert_array_equal(first[key], again[key])


def test_float_box_equals_a_fresh_box_and_keeps_distinct_bounds_apart():
    low = np.array([[0.0, -1.5], [0.0, 0.0]])
    high = np.array([[1.0, 2.0], [3.0, 1e6]])
    box = encoding.float_box(low, high)
    fresh = spaces.Box(low=low.astype(np.float32), high=high.astype(np.float32), dtype=np.float32)
    assert box == fresh and box.dtype == np.float32 and box.shape == (2, 2)
    np.testing.assert_array_equal(box.low, fresh.low)
    np.testing.assert_array_equal(box.high, fresh.high)
    assert box.low_repr == fresh.low_repr and box.high_repr == fresh.high_repr
    # same values in another shape, and one bound changed: other Boxes
    assert encoding.float_box(low.ravel(), high.ravel()).shape == (4,)
    changed = high.copy()
    changed[1, 1] = 7.0
    assert encoding.float_box(low, changed).high[1, 1] == 7.0
    assert encoding.float_box(low, high).high[1, 1] == np.float32(1e6)


def test_the_cache_stays_bounded():
    for i in range(encoding._BOXES_MAX + 10):
        encoding.float_box(np.zeros(3), np.full(3, float(i + 1)))
    assert len(encoding._BOXES) <= encoding._BOXES_MAX
