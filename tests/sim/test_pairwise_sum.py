"""``engine_kernels.pairwise_sum`` adds in numpy's order: the same bits as ``ndarray.sum()`` (what the running
totals of the envs use through ``portable_dot``), for every length and offset."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from gpusched_envs.sim.engine_kernels import pairwise_sum


def _bits(x) -> bytes:
    return np.float64(x).tobytes()


@settings(max_examples=200, deadline=None)
@given(
    a=arrays(np.float64, st.integers(0, 700), elements=st.floats(-1e12, 1e12, allow_nan=False, width=64)),
    lo=st.integers(0, 3),
)
def test_the_sum_has_numpys_bits(a, lo):
    padded = np.concatenate([np.full(lo, 7.0), a])
    assert _bits(pairwise_sum(padded, lo, len(a))) == _bits(a.sum())


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 127, 128, 129, 255, 256, 257, 1000, 4099, 70_001])
def test_every_block_size_and_depth(n):
    a = np.random.default_rng(n).standard_normal(n) * 10.0 ** np.random.default_rng(n + 1).uniform(-4, 8, n)
    assert _bits(pairwise_sum(a, 0, n)) == _bits(a.sum())


def test_negative_zeros_sum_to_positive_zero_as_numpy():
    for n in (1, 8, 300):
        a = np.full(n, -0.0)
        assert _bits(pairwise_sum(a, 0, n)) == _bits(a.sum()) == _bits(0.0)
