"""The policy-gradient core HMARL's MAPPO learner (:mod:`agents.methods.hmarl.mappo`, :mod:`~agents.methods.hmarl.
dagger`) and MetaPlace's learners (:mod:`agents.methods.metaplace.adaptation`, :mod:`~agents.methods.metaplace.
meta_train`) share: returns (:func:`discounted_returns`, :func:`gae`), advantage normalisation
(:func:`normalise_advantages`), shuffled minibatches (:func:`minibatches`), PPO's clipped surrogate
(:func:`clipped_surrogate`, :func:`clip_fraction`) and one optimiser step with gradient clipping
(:func:`gradient_step`).

Each piece performs the very operations, in the very order, its callers performed before they shared it (same
random draws, same floating-point results for a seed). torch is imported only by the functions that use it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch


def discounted_returns(rewards, gamma: float) -> np.ndarray:
    """``G_t = r_t + γ G_{t+1}`` over one episode (``G`` after the last step is 0), in float64."""
    g, out = 0.0, np.empty(len(rewards))
    for t in range(len(rewards) - 1, -1, -1):
        g = rewards[t] + gamma * g
        out[t] = g
    return out


def gae(rewards, values, dones, last_value, gamma: float, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimates over ``(T, M)`` arrays; ``dones[t]`` = the episode ended at step t. Returns
    the advantages and the returns (advantages + values), float32."""
    t_max = len(rewards)
    adv = np.zeros_like(rewards, dtype=np.float32)
    last = np.zeros(rewards.shape[1], dtype=np.float32)
    for t in reversed(range(t_max)):
        next_value = last_value if t == t_max - 1 else values[t + 1]
        live = 1.0 - dones[t]
        delta = rewards[t] + gamma * next_value * live - values[t]
        last = delta + gamma * lam * live * last
        adv[t] = last
    return adv, adv + values


def normalise_advantages(adv, where=None, *, ddof: int = 0, eps: float = 1e-8):
    """``(adv − mean) / (std + eps)`` with the mean and standard deviation taken over ``adv[where]`` (all of it when
    ``where`` is None). Works on a numpy array or a torch tensor; ``ddof`` is the standard deviation's delta degrees
    of freedom (0: numpy's default, 1: torch's)."""
    ref = adv if where is None else adv[where]
    std = ref.std(ddof=ddof) if isinstance(ref, np.ndarray) else ref.std(correction=ddof)
    return (adv - ref.mean()) / (std + eps)


def minibatches(rng: np.random.Generator, n: int, batch_size: int, epochs: int = 1) -> Iterator[np.ndarray]:
    """The indices of ``n`` samples in minibatches of ``batch_size`` (the last may be smaller), one fresh
    ``rng.permutation(n)`` per epoch, drawn when the epoch starts."""
    for _ in range(epochs):
        order = rng.permutation(n)
        for lo in range(0, n, batch_size):
            yield order[lo : lo + batch_size]


def clipped_surrogate(
    logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, clip_range: float, weight: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """PPO's clipped surrogate loss ``−Σ w · min(ρ A, clip(ρ, 1 ± ε) A) / max(Σ w, 1)`` with ``ρ = exp(logp −
    old_logp)``; ``weight`` leaves samples out (0) or in (1). Returns the loss, ``ρ`` and the denominator (for
    weighted means of other terms, e.g. the entropy)."""
    import torch

    ratio = torch.exp(logp - old_logp)
    surr = torch.min(ratio * adv, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * adv)
    denom = weight.sum().clamp(min=1.0)
    return -(surr * weight).sum() / denom, ratio, denom


def clip_fraction(ratio: torch.Tensor, clip_range: float, weight: torch.Tensor, denom: torch.Tensor) -> float:
    """The weighted share of samples whose ratio left ``1 ± clip_range``."""
    return float(((ratio - 1).abs() > clip_range).float().mul(weight).sum() / denom)


def gradient_step(
    optimizer: torch.optim.Optimizer,
    loss: torch.Tensor,
    params: Iterable[torch.Tensor] | None = None,
    max_grad_norm: float | None = None,
) -> None:
    """``zero_grad``, ``backward``, the gradients of ``params`` clipped to norm ``max_grad_norm`` (when given),
    ``step``."""
    import torch.nn as nn

    optimizer.zero_grad()
    loss.backward()
    if max_grad_norm is not None:
        nn.utils.clip_grad_norm_(params, max_grad_norm)
    optimizer.step()
