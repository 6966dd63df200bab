"""The shared policy-gradient core (agents.algos.pg) on hand-built numbers."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gpusched_lab.agents.algos.pg import (
    clip_fraction,
    clipped_surrogate,
    discounted_returns,
    gradient_step,
    minibatches,
    normalise_advantages,
)


def test_discounted_returns_by_hand_and_as_reversed_cumsum_when_undiscounted():
    np.testing.assert_allclose(discounted_returns([1.0, 0.0, 2.0], 0.5), [1.5, 1.0, 2.0])
    r = np.array([0.3, -1.7, 0.2, 5.1]) * 0.1
    assert discounted_returns(r, 1.0).tolist() == np.cumsum(r[::-1])[::-1].tolist()  # bit for bit


def test_normalise_advantages_over_a_subset_numpy_and_torch():
    adv = np.array([1.0, 3.0, 100.0], dtype=np.float32)
    out = normalise_advantages(adv, np.array([True, True, False]))  # mean 2, std 1 over the first two
    np.testing.assert_allclose(out, [-1.0, 1.0, 98.0], rtol=1e-6)
    t = torch.tensor([1.0, 3.0])
    torch.testing.assert_close(normalise_advantages(t, ddof=1), (t - 2.0) / (2.0**0.5 + 1e-8))
    assert normalise_advantages(t, ddof=1).tolist() == ((t - t.mean()) / (t.std() + 1e-8)).tolist()


def test_minibatches_draw_one_permutation_per_epoch():
    got = list(minibatches(np.random.default_rng(3), 5, 2, epochs=2))
    rng = np.random.default_rng(3)
    p1, p2 = rng.permutation(5), rng.permutation(5)
    expected = [p1[:2], p1[2:4], p1[4:], p2[:2], p2[2:4], p2[4:]]
    assert [g.tolist() for g in got] == [e.tolist() for e in expected]


def test_clipped_surrogate_by_hand():
    logp = torch.log(torch.tensor([1.5, 0.5, 1.0]))
    old = torch.zeros(3)
    adv = torch.tensor([1.0, 1.0, -2.0])
    w = torch.tensor([1.0, 1.0, 0.0])  # the third sample left out
    loss, ratio, denom = clipped_surrogate(logp, old, adv, 0.2, w)
    # min(1.5·1, 1.2·1) = 1.2; min(0.5·1, 0.8·1) = 0.5 → −(1.2 + 0.5) / 2
    assert loss.item() == pytest.approx(-0.85)
    assert denom.item() == 2.0
    assert clip_fraction(ratio, 0.2, w, denom) == 1.0


def test_gradient_step_clips_then_steps():
    x = torch.nn.Parameter(torch.tensor([3.0, 4.0]))
    opt = torch.optim.SGD([x], lr=1.0)
    gradient_step(opt, (x * torch.tensor([3.0, 4.0])).sum(), [x], 1.0)  # gradient (3, 4), norm 5 → (0.6, 0.8)
    torch.testing.assert_close(x.detach(), torch.tensor([2.4, 3.2]))
