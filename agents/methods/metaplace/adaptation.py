"""MetaPlace's inner learner (adaptation to one task): the advantage actor-critic loss of whole episodes
(:func:`pg_loss`), its steps inside a trust region around a reference policy (:func:`pg_step`, :func:`mean_kl`) and
the adaptation loop over a task's episodes with refits of the performance model (:func:`adapt`)."""

from __future__ import annotations

import copy

import numpy as np
import torch
from gpusched_lab.agents.algos.pg import discounted_returns, gradient_step, normalise_advantages
from gpusched_lab.agents.methods.metaplace.config import MetaArgs
from gpusched_lab.agents.methods.metaplace.perf_model import PerformanceModel
from gpusched_lab.agents.methods.metaplace.policy import (
    Episode,
    PlacementPolicy,
    _batch,
    policy_logp,
    rollout,
)
from gpusched_lab.agents.nets.common import masked


def mean_kl(logp_old: torch.Tensor, logp_new: torch.Tensor) -> float:
    """Mean over decisions of KL(old ‖ new) (masked actions, −inf in both, contribute 0)."""
    p = logp_old.exp()
    diff = torch.where(p > 0, logp_old - logp_new, torch.zeros_like(logp_old))
    return float((p * diff).sum(-1).mean())


def pg_loss(policy: PlacementPolicy, episodes: list[Episode], args: MetaArgs) -> torch.Tensor | None:
    """Advantage actor-critic loss of whole episodes (returns-to-go, γ = 1, value baseline)."""
    obs, acts, bon, slow, rets = [], [], [], [], []
    for ep in episodes:
        if not ep.actions:
            continue
        r = np.asarray(ep.rewards) * args.reward_scale
        rets.append(discounted_returns(r, 1.0))
        obs += ep.obs
        acts += ep.actions
        bon += ep.bonus
        slow += ep.slowdown
    if not acts:
        return None
    t = _batch(obs)
    logits, v = policy(t)
    scores = logits - policy.model_weight * torch.as_tensor(np.stack(slow)) + torch.as_tensor(np.stack(bon))
    logits = masked(scores, t["action_mask"])
    logp = torch.log_softmax(logits, -1)
    a = torch.as_tensor(acts)
    ret = torch.as_tensor(np.concatenate(rets), dtype=torch.float32)
    adv = (ret - v).detach()
    if len(adv) > 1:
        adv = normalise_advantages(adv, ddof=1)
    # masked actions have log-probability −inf: zero them before the product, or 0 · −inf poisons the gradient
    safe = logp.masked_fill(~torch.isfinite(logp), 0.0)
    ent = -(safe.exp() * safe).sum(-1).mean()
    chosen = logp.gather(1, a[:, None]).squeeze(1)
    return -(chosen * adv).mean() + args.value_coef * ((v - ret) ** 2).mean() - args.entropy * ent


def pg_step(
    policy: PlacementPolicy,
    opt,
    episodes: list[Episode],
    args: MetaArgs,
    steps: int = 1,
    max_kl: float = 0.0,
    ref: PlacementPolicy | None = None,
) -> float:
    """``steps`` gradient steps of :func:`pg_loss` on ``episodes`` (the later ones slightly off-policy: the
    episodes' actions were sampled before the first step); returns the mean KL(reference ‖ policy) on the
    episodes' decisions after the steps (NaN when unbounded; the reference: ``ref``, else the policy before the
    steps).

    ``max_kl`` > 0 is a trust region (a backtracking line search, as in TRPO): when the steps moved the policy
    further than ``max_kl`` from the reference, the change of the weights is halved until it is within (up to 10
    times; beyond that the weights are restored). With ``ref`` the policy adaptation started from, the bound
    holds for the adapted policy as a whole, not per episode: ten episodes each within a per-episode bound still
    drifted far enough to defer jobs for ever (the K = 10 column of the first 20-seed run). A single 30-job episode is a very noisy policy-gradient estimate; unbounded, two
    steps of Adam at 1e-3 per episode raise the defer logit until the adapted policy defers jobs for ever
    (a held-out task went from 20,927 s to 354,466 s average JCT after 3 episodes)."""
    with torch.no_grad():
        ref_logp = policy_logp(policy if ref is None else ref, episodes) if max_kl > 0 else None
    before = [p.detach().clone() for p in policy.parameters()] if ref_logp is not None else None
    for _ in range(int(steps)):
        loss = pg_loss(policy, episodes, args)
        if loss is None:
            return 0.0
        gradient_step(opt, loss, policy.parameters(), 1.0)
    if ref_logp is None:
        return float("nan")
    with torch.no_grad():
        after = [p.detach().clone() for p in policy.parameters()]
        kl = mean_kl(ref_logp, policy_logp(policy, episodes))
        scale = 1.0
        for _ in range(10):
            if kl <= max_kl:
                return kl
            scale *= 0.5
            for p, b, a in zip(policy.parameters(), before, after, strict=True):
                p.copy_(b + scale * (a - b))
            kl = mean_kl(ref_logp, policy_logp(policy, episodes))
        if kl <= max_kl:
            return kl
        for p, b in zip(policy.parameters(), before, strict=True):
            p.copy_(b)
        return mean_kl(ref_logp, policy_logp(policy, episodes))


def adapt(
    policy: PlacementPolicy,
    env,
    task,
    seeds,
    args: MetaArgs,
    *,
    perf: PerformanceModel | None = None,
    bonus: float | None = None,
    rng: np.random.Generator,
    callback=None,
) -> PlacementPolicy:
    """Inner loop: ``args.inner_steps`` policy-gradient steps per episode on ``task`` within the trust region
    ``args.max_kl`` around ``policy`` (the start), one episode per seed of ``seeds``; returns the adapted copy. ``perf`` (changed in place) is
    refitted after every episode, on the task's own samples only when ``args.task_data_only``, under a Gaussian
    prior centred on its weights at the start (``args.perf_prior``: the meta-trained model is the prior, the
    task's samples outweigh it as they grow). ``callback(k, policy)`` after episode ``k``."""
    env.unwrapped.set_task(task)
    phi = copy.deepcopy(policy)
    opt = torch.optim.Adam(phi.parameters(), lr=args.inner_lr)
    beta = args.bonus if bonus is None else bonus
    anchor = None
    if perf is not None:
        if args.task_data_only:
            perf.since(len(perf))
        anchor = perf.anchor() if perf.trained and args.perf_prior > 0 else None
    for k, s in enumerate(seeds, start=1):
        ep = rollout(phi, env, int(s), greedy=False, rng=rng, perf=perf, bonus=beta, caution=args.caution)
        pg_step(phi, opt, [ep], args, args.inner_steps, args.max_kl, ref=policy)
        if perf is not None:
            perf.fit(args.perf_fit_steps, anchor=anchor, prior=args.perf_prior)
        if callback is not None:
            callback(k, phi)
    return phi
