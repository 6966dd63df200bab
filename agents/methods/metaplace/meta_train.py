"""MetaPlace's meta-training (:func:`meta_train`): the Reptile / first-order MAML outer updates
(:func:`reptile_update`, :func:`fomaml_update`) over the inner learner of :mod:`agents.methods.metaplace.adaptation`,
or multi-task training of the same episodes, after an optional behaviour-cloning warm start on a placement heuristic
(:class:`HeuristicExpert`, :func:`imitation`); checkpoints every few iterations and resumes from them."""

from __future__ import annotations

import copy
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
from gpusched_lab.agents.algos.pg import gradient_step, minibatches
from gpusched_lab.agents.common import seed_everything, set_torch_threads
from gpusched_lab.agents.methods.metaplace.adaptation import adapt, pg_loss, pg_step
from gpusched_lab.agents.methods.metaplace.checkpoint import META_FILE, _save, load_meta
from gpusched_lab.agents.methods.metaplace.config import MetaArgs
from gpusched_lab.agents.methods.metaplace.policy import (
    Episode,
    PlacementPolicy,
    _batch,
    make_env,
    make_policy,
    new_perf_model,
    rollout,
)
from gpusched_lab.agents.nets.common import masked


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
        total = 0.0
        for idx in minibatches(rng, len(acts), 64):
            t = _batch([obs[i] for i in idx])
            logits, _ = policy(t)
            loss = nn.functional.cross_entropy(masked(logits, t["action_mask"]), acts[idx])
            gradient_step(opt, loss)
            total += float(loss.detach()) * len(idx)
        if epoch % 10 == 9:
            log(
                f"imitation epoch {epoch + 1}: cross-entropy {total / len(acts):.3f} on {len(acts)} decisions"
            )


# ---------------------------------------------------------------------------------------------- training
def _params(m: nn.Module) -> list[torch.Tensor]:
    return [p for p in m.parameters()]


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
