"""The small sort and search kernels the compiled engine uses in place of numpy's give numpy's results exactly:
the stable order of ``np.argsort(kind="stable")`` (ties in index order, NaN last, -0.0 equal to 0.0), the values of
``np.sort`` and the index of ``np.searchsorted``."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

from gpusched_envs.sim import engine_kernels as ek
from gpusched_envs.sim import loop_kernels as lk

# few distinct values: many ties
_INTS = st.lists(st.integers(min_value=-3, max_value=3), max_size=80)
_FLOATS = st.lists(st.sampled_from([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan, 7.25]), max_size=80)


def _order(keys: np.ndarray, n: int) -> np.ndarray:
    order = np.full(len(keys) + 2, -1, dtype=np.int64)
    tmp = np.full(len(keys) + 2, -1, dtype=np.int64)
    ek.stable_order(keys, np.int64(n), order, tmp)
    return order


@settings(max_examples=200, deadline=None)
@given(values=_INTS, cut=st.integers(min_value=0, max_value=80))
def test_stable_order_of_integers_is_numpys_stable_argsort(values, cut):
    keys = np.array(values + [9, -9], dtype=np.int64)  # entries past n are not looked at
    n = min(cut, len(values))
    order = _order(keys, n)
    np.testing.assert_array_equal(order[:n], np.argsort(keys[:n], kind="stable"))
    assert (order[n:] == -1).all()


@settings(max_examples=200, deadline=None)
@given(values=_FLOATS)
def test_stable_order_of_floats_puts_nan_last_and_keeps_ties_in_index_order(values):
    keys = np.array(values, dtype=np.float64)
    np.testing.assert_array_equal(_order(keys, len(keys))[: len(keys)], np.argsort(keys, kind="stable"))


def test_stable_order_on_a_hand_built_case():
    keys = np.array([3.0, np.nan, -0.0, 1.0, 0.0, 3.0, -np.inf])
    np.testing.assert_array_equal(_order(keys, 7)[:7], [6, 2, 4, 3, 0, 5, 1])


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.integers(min_value=-(2**40), max_value=2**40), max_size=200), data=st.data())
def test_sort_ints_sorts_the_prefix_in_place(values, data):
    a = np.array(values, dtype=np.int64)
    n = data.draw(st.integers(min_value=0, max_value=len(values)))
    before = a.copy()
    ek.sort_ints(a, np.int64(n))
    np.testing.assert_array_equal(a[:n], np.sort(before[:n]))
    np.testing.assert_array_equal(a[n:], before[n:])


@njit
def _level(a, thresholds):
    return lk._level(a, thresholds)


@njit
def _class_of(bounds, n):
    return lk._class_of(bounds, n)


@settings(max_examples=200, deadline=None)
@given(
    thresholds=st.lists(st.sampled_from([0.0, 1.0, 1.0, 5.5, 100.0, np.inf]), max_size=6),
    a=st.sampled_from([-1.0, 0.0, 1.0, 3.0, 5.5, 1e9, np.inf, np.nan]),
)
def test_queue_level_is_searchsorted_right(thresholds, a):
    t = np.sort(np.array(thresholds, dtype=np.float64))
    assert _level(a, t) == np.searchsorted(t, a, side="right")


@settings(max_examples=200, deadline=None)
@given(bounds=st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=6), n=st.integers(0, 70))
def test_gittins_class_is_searchsorted_left_capped_at_the_last_class(bounds, n):
    b = np.sort(np.array(bounds, dtype=np.int64))
    assert _class_of(b, np.int64(n)) == min(np.searchsorted(b, n, side="left"), len(b) - 1)
