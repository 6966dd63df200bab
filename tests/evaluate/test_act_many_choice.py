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


def reference_choice(raw: np.ndarray, mask: np.ndarray) -> tuple[list[int], list[int] | None]:
    """The decision spelled out row by row: the masked argmax (first of equal bests; a row without a valid action
    unmasked) and whether it leads the second best by more than the margin × (1 + the row's largest finite
    magnitude) with a finite best, in float32 as the batch is."""
    out, redo = [], []
    for i, (r, m) in enumerate(zip(raw, mask > 0, strict=True)):
        m = m if m.any() else np.ones_like(m)
        scores = np.where(m, r, -np.inf).astype(np.float32)
        idx = int(np.argmax(scores))
        best = scores[idx]
        finite = scores[np.isfinite(scores)]
        scale = np.float32(np.abs(finite).max()) if len(finite) else np.float32(0.0)
        rest = np.delete(scores, idx)
        second = rest.max() if len(rest) else np.float32(-np.inf)
        with np.errstate(invalid="ignore", over="ignore"):
            lead = np.float32(best - second)
            sure = bool(np.isfinite(best)) and bool(
                lead > np.float32(ACT_MANY_MARGIN) * (np.float32(1.0) + scale)
            )
        out.append(idx)
        if not sure:
            redo.append(i)
    return out, (redo or None)


def test_every_batch_gets_the_decision_spelled_out_row_by_row():
    """Random batches with ties, near ties, huge, infinite and NaN scores and rows without a valid action: the
    batched decision (its short path or its general one) is the row-by-row one."""
    rng = np.random.default_rng(7)
    values = [0.0, 1.0, 1.0005, 1.001, 2.0, -1.0, 100.0, 100.1, -1000.0, np.nan, np.inf, -np.inf, 3e38, -3e38]
    short = 0
    for _ in range(4000):
        b, a = int(rng.integers(1, 7)), int(rng.integers(1, 9))
        if rng.random() < 0.5:
            raw = rng.choice(values, size=(b, a)).astype(np.float32)
        else:
            raw = (rng.normal(size=(b, a)) * rng.choice([1e-3, 1.0, 1e3])).astype(np.float32)
            raw = np.round(raw, int(rng.integers(0, 4))) if rng.random() < 0.3 else raw
        mask = (rng.random((b, a)) < rng.random()).astype(np.float32)
        with np.errstate(invalid="ignore", over="ignore"):  # a lead of 3e38 - (-3e38) overflows to inf
            expected = reference_choice(raw, mask)
            got = _batched_choice(raw.copy(), mask.copy())
        assert got == expected, (raw, mask)
        short += bool(a > 1 and (mask > 0).any(axis=-1).all() and np.isfinite(raw).all())
    assert short > 1000  # the short path was taken often
