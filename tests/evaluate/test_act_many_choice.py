"""The decision act_many takes from a batch's raw scores: each row's masked argmax, and which rows act() decides
instead (a near tie, a best score that is not finite); hand-built rows with their exact answers."""

from __future__ import annotations

import numpy as np
from gpusched_lab.agents.checkpoint import ACT_MANY_MARGIN, _batched_choice


def choice(raw, mask):
    return _batched_choice(np.asarray(raw, dtype=np.float32), np.asarray(mask, dtype=np.float32))


def test_a_clear_best_valid_action_is_taken_as_is():
    out, redo = choice([[1.0, 5.0, 2.0], [9.0, 0.0, 3.0]], [[1, 0, 1], [1, 1, 1]])
    assert out == [2, 0]
    assert redo is None


def test_a_row_without_a_valid_action_is_left_unmasked():
    out, redo = choice([[1.0, 5.0, 2.0], [0.0, 1.0, 0.0]], [[0, 0, 0], [1, 0, 0]])
    assert out == [1, 0]
    assert redo is None  # row 1: one valid action leads the -inf rest by +inf


def test_near_ties_and_scores_that_are_not_finite_go_to_act():
    lead = ACT_MANY_MARGIN * (1.0 + 100.0)  # the margin of a row whose largest magnitude is 100
    raw = [
        [100.0, 100.0 - 0.5 * lead, 0.0],  # leads by less than the margin
        [100.0, 100.0 - 2.0 * lead, 0.0],  # leads by more
        [100.0, 100.0, -3.0],  # an exact tie
        [np.nan, 1.0, 0.0],
        [np.inf, 1.0, 0.0],
        [-np.inf, -np.inf, -np.inf],
    ]
    out, redo = choice(raw, np.ones((6, 3)))
    assert redo == [0, 2, 3, 4, 5]
    assert out[1] == 0


def test_the_margin_scales_with_the_largest_finite_magnitude_of_the_row():
    # a valid -1000 widens the margin to 1e-3 × 1001 (a lead of 0.5 is a near tie); masked out, it is not counted
    # (the margin is 1e-3 × 3, a lead of 0.5 is clear)
    assert choice([[2.0, 1.5, -1000.0]], [[1, 1, 1]]) == ([0], [0])
    assert choice([[2.0, 1.5, -1000.0]], [[1, 1, 0]]) == ([0], None)
    assert choice([[2.0, 1.5, -1000.0], [3.5, 2.0, -1000.0]], [[1, 1, 1], [1, 1, 1]]) == ([0, 0], [0])


def test_one_action_decides_unless_its_score_is_not_finite():
    assert choice([[3.0], [np.nan], [-np.inf]], [[1], [1], [0]]) == ([0, 0, 0], [1, 2])
