"""MetaPlace (Yang, Bao et al., IEEE TCC 2023): a worker-placement policy meta-trained across workload variations of
``WorkerPlacement-v0`` so that it adapts to a new (or drifting) workload in a few episodes, exploring where its
performance model is unsure.

Pieces:

- **Policy**: the project's hierarchical GNN (:func:`agents.nets.networks.build_network`, ``slots="servers"``: one
  logit per server from the server's embedding ⊕ the head job's, one for deferring) plus a value head on the pooled
  embedding, and a **model-based score**: a server's score is its logit minus ``w · Δ(s)``, ``Δ(s)`` the
  performance model's predicted marginal log slowdown of putting the head job's next worker there (the head job's
  own slowdown plus the rise of its new neighbours', :meth:`~agents.methods.metaplace.perf_model.PerformanceModel.
  candidate_slowdown`) and ``w`` a learned weight (initialised at ``model_score``; 0 switches the score off). So
  refitting the performance model on a new task's iteration times changes the policy's choices directly, which
  is how adaptation acts within a few episodes. Decisions with a single valid action are taken without the
  network (they carry no gradient).
- **Inner learner** (:func:`adapt`): advantage actor-critic policy gradient, ``inner_steps`` Adam steps per
  episode on that episode (returns-to-go with the value baseline, normalised advantages, entropy bonus) inside a
  **trust region** around the meta-trained policy (``max_kl``: the steps are halved until the adapted policy's
  mean KL from the meta-trained one on the episode's decisions is within it; unbounded, single-episode gradients
  taught the policy to defer jobs for ever), and a refit of the
  performance model on the task's own samples as a MAP estimate under a Gaussian **prior centred on the
  meta-trained weights** (``perf_prior``; its weight shrinks as the task's samples grow); ``k`` episodes. The
  model score is **cautious**: ``Δ + c·σ`` (``caution``), so a placement the model is unsure of is not preferred
  on a hopeful mean (:func:`model_slowdown`).
- **Outer loop** (:func:`meta_train`): Reptile (Nichol et al. 2018), ``θ ← θ + ε · mean_tasks(φ_task − θ)`` with
  ``φ_task`` the inner learner's weights after ``k`` episodes; first-order MAML (:func:`fomaml_update`) is offered as
  the alternative update (``outer="fomaml"``: the gradient of one more episode taken at ``φ_task``). Each task
  adapts its own copy of the performance model; the samples join a shared buffer on which the shared model (the
  initialisation every task's copy starts from) is refitted after each outer update.
- **Uncertainty-directed exploration**: during adaptation episodes actions are sampled from
  ``softmax(score + β · w · σ(s))``, ``σ(s)`` being the :class:`~agents.methods.metaplace.perf_model.PerformanceModel` ensemble's
  spread for the head job placed with its next worker on server ``s`` (an optimistic bonus in the model score's
  own units; ``β / mean σ`` on the logits without a model score); ``β = 0`` is the ablation (plain sampling from
  the policy). The performance model is refitted after every adaptation episode from the
  iteration times the env reported.
- **Warm start** (optional, ``imitation_episodes``): before meta-training the policy imitates a placement heuristic
  (behaviour cloning on the heuristic's server choices over the training tasks), so the few hundred meta-training
  episodes a CPU allows start from a sensible policy. The multi-task baseline gets the same warm start; the
  from-scratch baseline does not (it is the same network from a random initialisation).

Checkpoints (:func:`save_meta` / :func:`load_meta`): ``model.pt`` (the greedy policy in
:class:`agents.checkpoint.PPOPolicy`'s layout, so ``agents.load`` and the leaderboard can run it), ``value.pt`` (the
critic), ``perf_model.pt`` (the performance model) and ``meta.json`` (:mod:`agents.checkpoint`'s fields plus
``"meta_rl"``: mode, outer update, task seed, the iteration reached, the files' sha256).
"""

from __future__ import annotations

import copy
import dataclasses
import io
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
from gpusched_lab.agents.common import seed_everything, set_torch_threads
from gpusched_lab.agents.methods.metaplace.perf_model import PerformanceModel
from gpusched_lab.agents.nets.networks import (
    NetworkConfig,
    build_network,
    config_for_env,
    masked,
    obs_to_tensors,
)

ENV_ID = "gpusched/WorkerPlacement-v0"
POLICY_FILE, VALUE_FILE, PERF_FILE, META_FILE = "model.pt", "value.pt", "perf_model.pt", "meta.json"


@dataclass
class MetaArgs:
    cluster: str = "topdrl"
    """cluster preset of every task"""
    num_jobs: int = 30
    """jobs per episode"""
    train_tasks: int = 16
    """size of the training task set (fixed by task_seed)"""
    task_seed: int = 0
    """seed of the training / held-out task sets"""
    hidden: int = 32
    """GNN width"""
    layers: int = 1
    """GNN up/down sweeps"""
    inner_lr: float = 1e-3
    """Adam step size of the inner (adaptation) learner"""
    inner_episodes: int = 3
    """episodes of adaptation per task in meta-training (k)"""
    inner_steps: int = 1
    """policy-gradient steps of the inner learner per adaptation episode (on that episode)"""
    model_score: float = 0.0
    """initial weight w of the performance-model score: logits − w · predicted marginal log slowdown
    (0: the GNN's logits alone, the design before the model-based score)"""
    task_data_only: bool = True
    """during adaptation, refit the performance model on the task's own samples only (from the meta-trained
    weights), not on the other tasks' samples in its buffer"""
    outer_lr: float = 0.5
    """Reptile / FOMAML outer step size ε"""
    outer: str = "reptile"
    """reptile | fomaml"""
    meta_batch: int = 4
    """tasks per outer update"""
    iterations: int = 60
    """outer updates"""
    entropy: float = 0.01
    """entropy bonus of the policy gradient"""
    value_coef: float = 0.5
    """value-loss weight"""
    reward_scale: float = 0.1
    """rewards (−jobs × hours) are multiplied by this for the critic"""
    bonus: float = 1.0
    """β of the uncertainty-directed exploration bonus (0: plain sampling, the ablation)"""
    imitation_episodes: int = 24
    """behaviour-cloning episodes of the warm start (0: none)"""
    imitation_placement: str = "consolidate"
    """the heuristic imitated by the warm start"""
    perf_fit_steps: int = 100
    """performance-model training steps per refit"""
    perf_prior: float = 1.0
    """strength of the prior of the adaptation refits: a Gaussian centred on the meta-trained performance model's
    weights, weighted perf_prior / (the task's samples) (0: the task's samples alone, the old refit)"""
    caution: float = 1.0
    """c of the cautious model score Δ + c·σ (σ the ensemble's spread): uncertain placements are not preferred
    (0: the mean prediction alone)"""
    max_kl: float = 0.03
    """trust region of the inner learner around the policy adaptation starts from (the meta-trained one): each
    episode's policy-gradient steps are shrunk (halved until within, else undone) so the adapted policy's mean
    KL(start ‖ adapted) on that episode's decisions stays ≤ max_kl, however many episodes (0: no bound)"""
    seed: int = 0
    """seeds torch, numpy and the episodes"""

    def to_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------------------------------- outer updates
@torch.no_grad()
def reptile_update(params: list[torch.Tensor], adapted: list[list[torch.Tensor]], outer_lr: float) -> None:
    """In place: ``θ ← θ + ε · mean_i(φ_i − θ)`` (Reptile, Nichol et al. 2018)."""
    for j, p in enumerate(params):
        delta = torch.stack([a[j] - p for a in adapted]).mean(0)
        p.add_(outer_lr * delta)


@torch.no_grad()
def fomaml_update(params: list[torch.Tensor], grads: list[list[torch.Tensor]], outer_lr: float) -> None:
    """In place: ``θ ← θ − ε · mean_i ∇L_i(φ_i)`` (first-order MAML: the query gradient at the adapted weights
    applied to the initial ones)."""
    for j, p in enumerate(params):
        p.sub_(outer_lr * torch.stack([g[j] for g in grads]).mean(0))


# ---------------------------------------------------------------------------------------------- policy
class PlacementPolicy(nn.Module):
    """GNN scorer (logits per server + defer) and a value head on the pooled embedding."""

    def __init__(self, cfg: NetworkConfig, obs_space, model_score: float = 0.0):
        super().__init__()
        self.cfg = cfg
        self.scorer = build_network(cfg, obs_space)
        self.value = nn.Linear(cfg.hidden, 1)
        # w of the model-based score (logits − w · Δ, Δ the performance model's predicted marginal log slowdown):
        # learned with the rest (meta-trained, adapted); 0 switches the score off
        self.model_weight = nn.Parameter(torch.tensor(float(model_score)))

    def forward(self, obs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        scores, emb = self.scorer.scores_and_embedding(obs)
        return scores, self.value(emb).squeeze(-1)


def make_env(args: MetaArgs):
    import gymnasium as gym

    import gpusched_envs.envs  # noqa: F401 - registers the ids

    return gym.make(ENV_ID, cluster=args.cluster, num_jobs=args.num_jobs, obs_mode="graph")


def make_policy(env, args: MetaArgs) -> PlacementPolicy:
    cfg = config_for_env(env, "gnn", hidden=args.hidden, layers=args.layers, slots="servers")
    return PlacementPolicy(cfg, env.observation_space, args.model_score)


@dataclass
class Episode:
    obs: list[dict]
    actions: list[int]
    bonus: list[np.ndarray]
    slowdown: list[np.ndarray]  # the performance model's Δ per action per decision (0 without a model)
    rewards: list[float]  # reward after each recorded decision (forced decisions' rewards folded in)
    metrics: dict


def _copy_obs(obs: dict) -> dict:
    return {k: np.array(v, copy=True) for k, v in obs.items()}


def model_slowdown(
    perf: PerformanceModel, env, mask: np.ndarray, caution: float
) -> tuple[np.ndarray, np.ndarray]:
    """(A,) cautious predicted marginal log slowdown ``Δ + c σ`` of each valid server relative to the best one
    (0 on masked actions and on defer), and the ensemble spread σ.

    Relative to the best server: the model ranks servers; whether to defer stays the GNN's call (a raw Δ pushes
    every server below defer on a task where the refitted model predicts large slowdowns, and the policy then
    defers jobs for ever). Cautious: a placement the model is unsure of is not preferred on a hopeful mean."""
    d, u = perf.candidate_slowdown(env)
    if caution:
        d = d + caution * u
    valid = np.flatnonzero(mask)
    servers = valid[valid < len(d) - 1]
    if len(servers):
        d = (d - d[servers].min()).astype(np.float32)
        d[mask == 0] = 0.0
        d[-1] = 0.0  # defer
    return d, u


@torch.no_grad()
def rollout(
    policy: PlacementPolicy,
    env,
    seed: int,
    *,
    greedy: bool,
    rng: np.random.Generator | None = None,
    perf: PerformanceModel | None = None,
    bonus: float = 0.0,
    expert=None,
    observe: bool = True,
    caution: float = 0.0,
) -> Episode:
    """One episode. Scores: ``logits − w Δ`` (``w`` the policy's model weight, ``Δ`` the performance model's
    predicted marginal log slowdown of each server made cautious, ``Δ + c σ`` with ``c`` = ``caution`` and σ
    the ensemble's spread, when ``perf`` is given and ``w ≠ 0``). ``greedy``: masked argmax of the scores; else
    sampled from ``softmax(scores + b)``, the exploration bonus ``b = β w σ`` (β = ``bonus``: optimism in the
    model score's own units, so β = c makes an exploratory choice judge a server by its mean prediction) or,
    without a model score, ``b = β σ / mean σ``. ``perf`` also records the iteration times the env reports unless ``observe`` is false (evaluation
    episodes). ``expert(env) -> action``: act by it (and record it) instead of the policy, for behaviour cloning."""
    obs, info = env.reset(seed=int(seed))
    ep = Episode([], [], [], [], [], {})
    use_model = perf is not None and perf.trained and float(policy.model_weight.detach()) != 0.0
    w = float(policy.model_weight.detach())
    if perf is not None and observe:
        perf.observe(env, info)
    pending = 0.0
    while True:
        mask = obs["action_mask"]
        valid = np.flatnonzero(mask)
        b = np.zeros(len(mask), dtype=np.float32)
        d = np.zeros(len(mask), dtype=np.float32)
        if expert is not None:
            a = int(expert(env))
            record = len(valid) > 1
        elif len(valid) == 1:
            a, record = int(valid[0]), False
        else:
            record = True
            logits, _ = policy(obs_to_tensors(obs, batched=False))
            u = None
            if use_model:
                d, u = model_slowdown(perf, env, mask, caution)
                logits = logits - w * torch.as_tensor(d)
            logits = masked(logits, torch.as_tensor(mask).unsqueeze(0))[0]
            if greedy:
                a = int(logits.argmax())
            else:
                if perf is not None and bonus > 0 and perf.trained:
                    if u is None:
                        u = perf.candidate_uncertainty(env)
                    mean_u = float(u[valid].mean())
                    if use_model:
                        b = (bonus * w * u).astype(np.float32)
                    elif mean_u > 0:
                        b = (bonus * u / mean_u).astype(np.float32)
                    b[mask == 0] = 0.0
                p = torch.softmax(logits + torch.as_tensor(b), -1).numpy().astype(np.float64)
                a = int(rng.choice(len(p), p=p / p.sum()))
        if record:
            if ep.actions:
                ep.rewards[-1] += pending
            elif pending:
                pass  # rewards before the first recorded decision do not depend on the policy
            pending = 0.0
            ep.obs.append(_copy_obs(obs))
            ep.actions.append(a)
            ep.bonus.append(b)
            ep.slowdown.append(d)
            ep.rewards.append(0.0)
        obs, r, terminated, truncated, info = env.step(a)
        if perf is not None and observe:
            perf.observe(env, info)
        pending += float(r)
        if terminated or truncated:
            if ep.actions:
                ep.rewards[-1] += pending
            ep.metrics = dict(info.get("metrics") or {})
            return ep


def _batch(obs: list[dict]) -> dict:
    return obs_to_tensors({k: np.stack([o[k] for o in obs]) for k in obs[0]}, batched=True)


def policy_logp(policy: PlacementPolicy, episodes: list[Episode]) -> torch.Tensor | None:
    """(N, A) log-probabilities of the (non-exploring) policy ``softmax(logits − w Δ)`` at every recorded decision
    of ``episodes`` (−inf on masked actions); None without decisions."""
    obs = [o for ep in episodes for o in ep.obs]
    if not obs:
        return None
    t = _batch(obs)
    logits, _ = policy(t)
    slow = torch.as_tensor(np.stack([d for ep in episodes for d in ep.slowdown]))
    return torch.log_softmax(masked(logits - policy.model_weight * slow, t["action_mask"]), -1)


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
        rets.append(np.cumsum(r[::-1])[::-1].copy())
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
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
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
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        opt.step()
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


# ---------------------------------------------------------------------------------------------- warm start
class HeuristicExpert:
    """``expert(env) -> action``: the server of the next GPU a placement heuristic would give the head job (it
    plans the whole placement when the first worker is placed), or defer when the heuristic would not place it."""

    def __init__(self, placement: str):
        from gpusched_envs.policies import get_placement

        self.place = get_placement(placement)
        self._plan: tuple[int, list[int]] | None = None

    def __call__(self, env) -> int:
        u = env.unwrapped
        mask = u.encoder.action_mask
        head = u.head_job
        if head < 0:
            return int(np.flatnonzero(mask)[0])
        if self._plan is None or self._plan[0] != head or not u._chosen:
            gpus = self.place(u.sim, head)
            servers = [] if gpus is None else u.cluster.gpu_server[np.asarray(gpus)].tolist()
            self._plan = (head, servers)
        servers = self._plan[1]
        if not servers:
            if mask[u.defer_action]:
                return int(u.defer_action)
            return int(np.flatnonzero(mask)[0])
        s = servers.pop(0)
        return int(s) if mask[s] else int(np.flatnonzero(mask)[0])


def imitation(
    policy: PlacementPolicy, env, tasks, args: MetaArgs, rng: np.random.Generator, log=print
) -> None:
    """Behaviour cloning of ``args.imitation_placement`` over ``tasks`` (cross-entropy on its actions)."""
    if args.imitation_episodes <= 0:
        return
    opt = torch.optim.Adam(policy.parameters(), lr=3e-3)
    data: list[Episode] = []
    for i in range(args.imitation_episodes):
        env.unwrapped.set_task(tasks[i % len(tasks)])
        data.append(
            rollout(
                policy,
                env,
                int(rng.integers(2**31)),
                greedy=True,
                expert=HeuristicExpert(args.imitation_placement),
            )
        )
    obs = [o for ep in data for o in ep.obs]
    acts = torch.as_tensor([a for ep in data for a in ep.actions])
    for epoch in range(30):
        perm = rng.permutation(len(acts))
        total = 0.0
        for lo in range(0, len(perm), 64):
            idx = perm[lo : lo + 64]
            t = _batch([obs[i] for i in idx])
            logits, _ = policy(t)
            loss = nn.functional.cross_entropy(masked(logits, t["action_mask"]), acts[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        if epoch % 10 == 9:
            log(
                f"imitation epoch {epoch + 1}: cross-entropy {total / len(acts):.3f} on {len(acts)} decisions"
            )


# ---------------------------------------------------------------------------------------------- training
def _params(m: nn.Module) -> list[torch.Tensor]:
    return [p for p in m.parameters()]


def new_perf_model(env, seed: int) -> PerformanceModel:
    return PerformanceModel(len(env.unwrapped.cluster.catalog.model_names), seed=seed)


def meta_train(
    args: MetaArgs,
    out: str | Path,
    *,
    mode: str = "meta",
    resume: bool = True,
    save_every: int = 5,
    log=print,
) -> Path:
    """Meta-train (``mode="meta"``: Reptile / FOMAML) or multi-task-train (``mode="multitask"``: the same episodes,
    every episode's policy-gradient step applied to the shared weights, no inner/outer split) on the training task
    set; checkpoints to ``out`` every ``save_every`` iterations and resumes from it."""
    from gpusched_envs.envs.placement_tasks import train_tasks

    set_torch_threads(1)
    seed_everything(args.seed)
    out = Path(out)
    env = make_env(args)
    tasks = train_tasks(args.train_tasks, args.task_seed, args.num_jobs, (args.cluster,))
    policy = make_policy(env, args)
    perf = new_perf_model(env, args.seed)
    start = 0
    if resume and (out / META_FILE).exists():
        policy, perf, meta = load_meta(out)
        start = int(meta["meta_rl"]["iteration"])
        log(f"resuming {out} at iteration {start}")
    else:
        imitation(policy, env, tasks, args, np.random.default_rng([args.seed, 7]), log=log)
        _save(out, policy, perf, args, mode, 0, env)
    opt = torch.optim.Adam(policy.parameters(), lr=args.inner_lr)
    t0 = time.time()
    for it in range(start, args.iterations):
        rng = np.random.default_rng([args.seed, 11, it])
        batch = [tasks[int(i)] for i in rng.choice(len(tasks), size=args.meta_batch, replace=False)]
        jcts = []
        if mode == "meta":
            adapted, grads = [], []
            for task in batch:
                seeds = rng.integers(2**31, size=args.inner_episodes)
                # the task adapts its own copy of the performance model (as at evaluation); its samples then
                # join the shared buffer, on which the shared model is refitted after the batch
                p_task = copy.deepcopy(perf)
                phi = adapt(policy, env, task, seeds, args, perf=p_task, rng=rng)
                if args.outer == "fomaml":
                    ep = rollout(
                        phi,
                        env,
                        int(rng.integers(2**31)),
                        greedy=False,
                        rng=rng,
                        perf=p_task,
                        caution=args.caution,
                    )
                    loss = pg_loss(phi, [ep], args)
                    phi.zero_grad()
                    if loss is not None:
                        loss.backward()
                    grads.append(
                        [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in _params(phi)]
                    )
                adapted.append([p.detach() for p in _params(phi)])
                jcts.append(perf_note(env))
                perf.absorb(p_task)
            if args.outer == "fomaml":
                fomaml_update(_params(policy), grads, args.outer_lr * args.inner_lr)
            else:
                reptile_update(_params(policy), adapted, args.outer_lr)
            perf.fit(args.perf_fit_steps)
        else:
            for task in batch:
                env.unwrapped.set_task(task)
                for s in rng.integers(2**31, size=args.inner_episodes):
                    ep = rollout(
                        policy, env, int(s), greedy=False, rng=rng, perf=perf, bonus=args.bonus,
                        caution=args.caution,
                    )  # fmt: skip
                    pg_step(policy, opt, [ep], args, args.inner_steps)
                    jcts.append(ep.metrics.get("avg_jct", float("nan")))
                perf.fit(args.perf_fit_steps)
        log(
            f"{mode} iteration {it + 1}/{args.iterations}: last-episode avg JCT {np.nanmean(jcts):,.0f} s, "
            f"perf-model samples {len(perf)}, {time.time() - t0:.0f} s"
        )
        if (it + 1) % save_every == 0 or it + 1 == args.iterations:
            _save(out, policy, perf, args, mode, it + 1, env)
    return out


def perf_note(env) -> float:
    sim = env.unwrapped.sim
    return (
        float(sim.metrics().get("avg_jct", float("nan"))) if sim is not None and sim.drained else float("nan")
    )


# ---------------------------------------------------------------------------------------------- checkpoints
def _save(out: Path, policy: PlacementPolicy, perf: PerformanceModel, args: MetaArgs, mode, it, env) -> None:
    save_meta(out, policy, perf, args, mode=mode, iteration=it, env_kwargs=_env_kwargs(args))


def _env_kwargs(args: MetaArgs) -> dict:
    return {"cluster": args.cluster, "num_jobs": args.num_jobs}


def policy_state(policy: PlacementPolicy) -> dict:
    """The greedy policy as :class:`agents.checkpoint.PPOPolicy` weights (the scorer, and an action net that reads
    the scores through), so ``agents.load`` and the leaderboard run a MetaPlace checkpoint like any other."""
    state = {f"scorer.{k}": v for k, v in policy.scorer.state_dict().items()}
    a, h = policy.cfg.num_actions, policy.cfg.hidden
    w = torch.zeros(a, a + h)
    w[:, :a] = torch.eye(a)
    state["action_net.weight"], state["action_net.bias"] = w, torch.zeros(a)
    return state


def save_meta(
    out: str | Path,
    policy: PlacementPolicy,
    perf: PerformanceModel,
    args: MetaArgs,
    *,
    mode: str,
    iteration: int,
    env_kwargs: dict,
    evaluation: dict | None = None,
    command: str = "",
) -> Path:
    """``model.pt`` (the greedy policy, :func:`policy_state`), ``value.pt`` (the critic), ``perf_model.pt`` (the
    performance model) then ``meta.json`` (with the three files' sha256), each written atomically."""
    import hashlib
    from datetime import UTC, datetime

    from gpusched_envs.io import atomic_write_bytes, atomic_write_text

    out = Path(out)
    hashes = {}
    for name, state in (
        (POLICY_FILE, policy_state(policy)),
        (VALUE_FILE, {**policy.value.state_dict(), "model_weight": policy.model_weight}),
        (PERF_FILE, perf.state_dict()),
    ):
        buf = io.BytesIO()
        torch.save({k: v.detach().cpu() for k, v in state.items()}, buf)
        atomic_write_bytes(out / name, buf.getvalue())
        hashes[name] = hashlib.sha256(buf.getvalue()).hexdigest()
    meta = {
        "format": 1,
        "algorithm": "metaplace" if mode == "meta" else "multitask-pg",
        "policy": "logits",
        "env_id": ENV_ID,
        "env_kwargs": env_kwargs,
        "obs_mode": "graph",
        "network": policy.cfg.to_dict(),
        "steps": 0,
        "seed": args.seed,
        "command": command,
        "evaluation": evaluation,
        "args": args.to_dict(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "model_sha256": hashes[POLICY_FILE],
        "meta_rl": {
            "mode": mode,
            "outer": args.outer,
            "iteration": int(iteration),
            "task_seed": args.task_seed,
            "sha256": hashes,
        },
    }
    atomic_write_text(out / META_FILE, json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return out


def load_meta(path: str | Path) -> tuple[PlacementPolicy, PerformanceModel, dict]:
    """Policy (with its critic), performance model and ``meta.json`` of a checkpoint written by :func:`save_meta`
    (every file checked against its sha256)."""
    import hashlib

    path = Path(path)
    if not (path / META_FILE).exists():
        raise FileNotFoundError(f"{path}: no MetaPlace checkpoint ({META_FILE} missing)")
    meta = json.loads((path / META_FILE).read_text())
    if "meta_rl" not in meta:
        raise ValueError(f"{path}: not a MetaPlace checkpoint (no 'meta_rl' in {META_FILE})")
    fields = {f.name for f in dataclasses.fields(MetaArgs)}
    args = MetaArgs(**{k: v for k, v in meta["args"].items() if k in fields})
    env = make_env(args)
    policy = make_policy(env, args)
    perf = new_perf_model(env, args.seed)
    env.close()
    states = {}
    for name in (POLICY_FILE, VALUE_FILE, PERF_FILE):
        f = path / name
        if not f.exists():
            raise FileNotFoundError(f"{f}: no such file")
        data = f.read_bytes()
        if hashlib.sha256(data).hexdigest() != meta["meta_rl"]["sha256"][name]:
            raise ValueError(f"{path}: {name} does not match {META_FILE} (interrupted save?)")
        states[name] = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    prefix = "scorer."
    policy.scorer.load_state_dict(
        {k[len(prefix) :]: v for k, v in states[POLICY_FILE].items() if k.startswith(prefix)}
    )
    value = dict(states[VALUE_FILE])
    w = value.pop("model_weight", None)  # absent in checkpoints from before the model-based score
    policy.value.load_state_dict(value)
    with torch.no_grad():
        policy.model_weight.fill_(0.0 if w is None else float(w))
    perf.load_state_dict(states[PERF_FILE])
    return policy, perf, meta
