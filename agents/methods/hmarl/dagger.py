"""HMARL's imitation warm start: DAgger towards a per-agent heuristic (:func:`imitate`): episodes where each agent
acts as the expert or as the actor (:func:`collect_dagger`), every decisive agent state labelled with the expert's
action, and the actor fitted by cross-entropy, the critic on the discounted returns (:func:`fit_imitation`)."""

from __future__ import annotations

import numpy as np
import torch
from gpusched_lab.agents.algos.pg import discounted_returns, gradient_step, minibatches
from gpusched_lab.agents.methods.hmarl.config import ImitationArgs
from gpusched_lab.agents.methods.hmarl.mappo import Trainer
from gpusched_lab.agents.methods.hmarl.policy import to_tensors
from gpusched_lab.agents.nets.common import masked


def collect_dagger(trainer: Trainer, expert, seed: int, beta: float, max_steps: int, data: dict) -> dict:
    """One episode on ``trainer.envs[0]``: every agent acts as the expert with probability ``beta`` (per agent and
    step), else as the actor (masked argmax). Every decisive agent state (more than one valid action) is appended to
    ``data`` with the expert's action as its label, the global state and the discounted shared return."""
    env, a = trainer.envs[0], trainer.args
    obs, _ = env.reset(seed=int(seed))
    coin = np.random.default_rng(seed)
    agents = trainer.agents
    steps, agree, decisive, rewards, rows, infos = 0, 0, 0, [], [], {}
    while env.agents and steps < max_steps:
        labels = expert(env, obs)
        batch = trainer.policy.batch(env, obs)
        mine = trainer.policy(env, obs)
        keep = batch["action_mask"].sum(-1) > 1
        state = env.state()
        for j, agent in enumerate(agents):
            if keep[j]:
                decisive += 1
                agree += int(mine[agent] == labels[agent])
                rows.append(({k: v[j] for k, v in batch.items()}, labels[agent], state, steps))
        actions = {ag: labels[ag] if coin.random() < beta else mine[ag] for ag in agents}
        obs, rew, _, _, infos = env.step(actions)
        rewards.append(float(rew[agents[0]]) * a.reward_scale)
        steps += 1
    returns = discounted_returns(rewards, a.gamma)
    for ob, label, state, t in rows:
        for k, v in ob.items():
            data.setdefault("obs", {}).setdefault(k, []).append(v)
        data.setdefault("action", []).append(int(label))
        data.setdefault("state", []).append(state)
        data.setdefault("return", []).append(float(returns[t]))
    metrics = infos[agents[0]].get("metrics", {}) if infos and not env.agents else {}
    return {
        "steps": steps,
        "agreement": agree / max(decisive, 1),
        "avg_jct": metrics.get("avg_jct"),
        "done": not env.agents,
    }


def fit_imitation(trainer: Trainer, data: dict, args: ImitationArgs, rng: np.random.Generator) -> dict:
    """Cross-entropy of the actor's masked distribution to the expert's labels, plus the critic's regression on the
    discounted returns (divided by their variance, so it neither swamps nor vanishes next to the cross-entropy)."""
    obs = {k: np.stack(v) for k, v in data["obs"].items()}
    actions = np.asarray(data["action"], dtype=np.int64)
    states = np.stack(data["state"]).astype(np.float32)
    returns = np.asarray(data["return"], dtype=np.float32)
    value_norm = float(returns.var()) + 1e-8
    params = list(trainer.actor.parameters()) + list(trainer.critic.parameters())
    optimiser = torch.optim.Adam(params, lr=args.learning_rate)
    dev = trainer.device
    trainer.actor.train(True)
    losses, accs = [], []
    n = len(actions)
    for idx in minibatches(rng, n, args.batch_size, args.epochs):
        t = to_tensors({k: v[idx] for k, v in obs.items()}, dev)
        logits, emb = trainer.actor(t)
        logits = masked(logits, t["action_mask"])
        act = torch.as_tensor(actions[idx], device=dev)
        ce = torch.nn.functional.cross_entropy(logits, act)
        value = trainer.critic(torch.as_tensor(states[idx], device=dev), t, emb)
        value_loss = torch.nn.functional.mse_loss(value, torch.as_tensor(returns[idx], device=dev))
        loss = ce + args.value_coef * value_loss / value_norm
        gradient_step(optimiser, loss, params, 1.0)
        losses.append(ce.item())
        accs.append(float((logits.argmax(-1) == act).float().mean()))
    trainer.actor.train(False)
    return {"cross_entropy": float(np.mean(losses[-10:])), "train_accuracy": float(np.mean(accs[-10:]))}


def imitate(trainer: Trainer, args: ImitationArgs, seed: int = 0, log=None) -> list[dict]:
    """DAgger warm start of ``trainer``'s actor and critic towards the per-agent heuristic ``args.expert``; one
    record per round (``agreement``: the share of decisive agent states where the actor's argmax equals the
    expert's action, measured on the round's rollouts before that round's fit)."""
    from gpusched_envs.multi_agent.multi_scheduler import HeuristicMultiAgent

    expert = HeuristicMultiAgent.from_name(args.expert)
    rng = np.random.default_rng(seed)
    data: dict = {}
    history = []
    for rnd in range(args.rounds):
        beta = args.beta_decay**rnd
        episodes = [
            collect_dagger(
                trainer, expert, seed * 100_003 + 50_021 + rnd * 1_009 + i, beta, args.max_steps, data
            )
            for i in range(args.episodes)
        ]
        stats = fit_imitation(trainer, data, args, rng)
        done = [e["avg_jct"] for e in episodes if e["avg_jct"] is not None]
        record = {
            "round": rnd,
            "samples": len(data.get("action", [])),
            "beta": beta,
            "agreement": float(np.mean([e["agreement"] for e in episodes])),
            "avg_jct": float(np.mean(done)) if done else None,
            **stats,
        }
        history.append(record)
        if log is not None:
            log(record)
    return history
