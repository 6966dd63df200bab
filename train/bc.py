"""Behaviour-cloning warm start for MaskablePPO on JobSelect-v1 and WorkerPlacement-v1: imitate a heuristic, then
let PPO improve on it.

From a random start, PPO on a 300-job Philly window with preemption wastes its budget: a uniform policy preempts
about as often as it starts a job, so jobs restart over and over and an episode does not end in 20,000 steps (a
Tiresias episode takes ~1,100). So the policy first imitates a heuristic of its own information class
(Tiresias non-clairvoyant; SRTF clairvoyant) with DAgger (Ross et al., AISTATS'11): round 0 rolls out the
heuristic itself; each later round rolls out the current policy and labels every state it visits with the
heuristic's action, so the policy learns to recover from its own mistakes. The value head is fitted to the
discounted returns of the rolled-out episodes (in the same reward scale PPO uses), so PPO's first updates start from
a sensible baseline instead of tearing the imitated policy apart. On WorkerPlacement-v1 the heuristic is a
placement rule under the env's head rule, FIFO with backfill (``consolidate``, ``closest``, ...: the env's
``heuristic_action``, :class:`PlacementExpert`).

A config's ``bc`` block (all keys optional but ``policy``)::

    bc:
      policy: tiresias          # the heuristic to imitate (gpusched_envs.policies.make_policy name; on
                                # WorkerPlacement-v1 a placement rule under FIFO with backfill, e.g. consolidate)
      episodes: 4               # episodes per DAgger round
      rounds: 3                 # 1 = plain behaviour cloning on the heuristic's own trajectories
      epochs: 4                 # passes over the data after each round
      batch_size: 256
      learning_rate: 0.001
      choices: [{}, {load: 1.0}]   # env-kwargs overrides, one drawn per episode (default: the run's env)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from gpusched_lab.agents.common import discounted_returns, make_env


@dataclass
class BCArgs:
    policy: str
    """heuristic to imitate (tiresias, srtf, ...)"""
    episodes: int = 4
    """episodes collected per round"""
    rounds: int = 3
    """DAgger rounds (round 0 follows the heuristic, later rounds the learner)"""
    epochs: int = 4
    """passes over all the data collected so far, after each round"""
    batch_size: int = 256
    learning_rate: float = 1e-3
    value_coef: float = 0.5
    """weight of the value regression next to the imitation loss"""
    max_steps: int = 8_000
    """cap on one collected episode's steps (a learner that loops)"""
    beta_decay: float = 0.5
    """round r acts with the heuristic's action with probability beta_decay**r, else with the learner's (DAgger's
    mixture: early rounds stay near the heuristic's states, so episodes finish)"""
    choices: list = field(default_factory=list)
    """env-kwargs overrides drawn per episode (empty: the run's env kwargs)"""

    @classmethod
    def from_dict(cls, doc: dict) -> BCArgs:
        if not isinstance(doc, dict) or "policy" not in doc:
            raise ValueError("bc: expected a mapping with at least 'policy' (e.g. {policy: tiresias})")
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(doc) - known)
        if unknown:
            raise ValueError(f"bc: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        args = cls(**doc)
        if not 0.0 <= float(args.beta_decay) <= 1.0:
            raise ValueError(f"bc.beta_decay must be in [0, 1], got {args.beta_decay!r}")
        for name in ("episodes", "rounds", "epochs", "batch_size", "max_steps"):
            value = getattr(args, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"bc.{name} must be an integer >= 1, got {value!r}")
        if not isinstance(args.choices, list) or not all(isinstance(c, dict) for c in args.choices):
            raise ValueError("bc.choices must be a list of env-kwargs mappings")
        return args

    def to_dict(self) -> dict:
        return asdict(self)


class Dataset:
    """Observations (dict of stacked arrays), the heuristic's actions, masks and discounted returns."""

    def __init__(self):
        self.obs: dict[str, list[np.ndarray]] = {}
        self.actions: list[int] = []
        self.masks: list[np.ndarray] = []
        self.returns: list[float] = []

    def __len__(self) -> int:
        return len(self.actions)

    def add_episode(
        self, obs: list[dict], actions: list[int], masks: list[np.ndarray], rewards: list[float], gamma: float
    ) -> None:
        rets = discounted_returns(rewards, gamma)
        for o in obs:
            for k, v in o.items():
                self.obs.setdefault(k, []).append(np.array(v, copy=True))
        self.actions += actions
        self.masks += masks
        self.returns += rets.tolist()

    def tensors(self, device) -> tuple[dict, torch.Tensor, torch.Tensor, torch.Tensor]:
        obs = {k: torch.as_tensor(np.stack(v)).to(device) for k, v in self.obs.items()}
        return (
            obs,
            torch.as_tensor(self.actions, dtype=torch.long, device=device),
            torch.as_tensor(np.stack(self.masks), dtype=torch.bool, device=device),
            torch.as_tensor(self.returns, dtype=torch.float32, device=device),
        )


def collect_episode(
    env,
    expert,
    learner,
    gamma: float,
    reward_scale: float,
    seed: int,
    max_steps: int,
    data,
    beta: float = 1.0,
):
    """Roll out the expert with probability ``beta`` per step, else ``learner`` (None: always the expert),
    labelling every state with the expert's action; adds to ``data``."""
    obs, _ = env.reset(seed=seed)
    coin = np.random.default_rng(seed)
    u = env.unwrapped
    observations, actions, masks, rewards = [], [], [], []
    done, steps, agree = False, 0, 0
    while not done and steps < max_steps:
        mask = np.asarray(u.action_masks(), dtype=bool)
        label = int(expert(env))
        if learner is None:
            act = label
        else:  # how often the learner itself would have done what the heuristic does, whichever acts
            mine = int(learner(obs, mask))
            agree += mine == label
            act = label if coin.random() < beta else mine
        observations.append(obs)
        actions.append(label)
        masks.append(mask)
        obs, reward, terminated, truncated, info = env.step(act)
        rewards.append(float(reward) * reward_scale)
        done = terminated or truncated
        steps += 1
    data.add_episode(observations, actions, masks, rewards, gamma)
    metrics = info.get("metrics", {}) if done else {}
    return {
        "steps": steps,
        "agreement": agree / max(steps, 1),
        "avg_jct": metrics.get("avg_jct"),
        "done": done,
    }


def fit(model, data: Dataset, args: BCArgs, rng: np.random.Generator) -> dict:
    """Cross-entropy to the expert's actions (under the action mask) plus value regression, on SB3's policy."""
    policy = model.policy
    policy.set_training_mode(True)
    obs, actions, masks, returns = data.tensors(policy.device)
    # the value regression is scaled by the returns' variance, so it neither swamps nor vanishes next to the
    # cross-entropy whatever the reward scale (the targets themselves stay in PPO's scale)
    value_norm = float(returns.var()) + 1e-8
    optimiser = torch.optim.Adam(policy.parameters(), lr=args.learning_rate)
    n = len(data)
    losses, accs = [], []
    for _ in range(args.epochs):
        order = rng.permutation(n)
        for start in range(0, n, args.batch_size):
            idx = torch.as_tensor(order[start : start + args.batch_size], device=policy.device)
            batch = {k: v[idx] for k, v in obs.items()}
            values, log_prob, _ = policy.evaluate_actions(batch, actions[idx], action_masks=masks[idx])
            value_loss = torch.nn.functional.mse_loss(values.flatten(), returns[idx])
            loss = -log_prob.mean() + args.value_coef * value_loss / value_norm
            optimiser.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
            optimiser.step()
            losses.append(loss.item())
            accs.append((log_prob.detach() > np.log(0.5)).float().mean().item())
    policy.set_training_mode(False)
    return {"loss": float(np.mean(losses[-10:])), "p_expert_gt_half": float(np.mean(accs[-10:]))}


class PlacementExpert:
    """``expert(env) -> action`` on WorkerPlacement-v1: FIFO with backfill and the placement rule ``rule`` (the
    env's ``heuristic_action``; played to the end it is ``Simulator.run(FIFO(rule, backfill=True))``)."""

    def __init__(self, rule: str):
        self.rule = rule

    def __call__(self, env) -> int:
        return int(env.unwrapped.heuristic_action(self.rule))


def pretrain(
    model,
    env_id: str,
    env_kwargs: dict,
    obs_mode: str,
    args: BCArgs,
    gamma: float,
    reward_scale: float,
    seed: int,
    log=None,
) -> list[dict]:
    """DAgger warm start of ``model`` (a MaskablePPO) towards ``args.policy``; returns one record per round."""
    from gpusched_envs.envs.adapters import HeuristicAgent
    from gpusched_envs.policies import make_policy

    rng = np.random.default_rng(seed)
    choices = args.choices or [{}]
    envs = [make_env(env_id, {**env_kwargs, **c}, obs_mode) for c in choices]
    placement = all(hasattr(e.unwrapped, "heuristic_action") for e in envs)  # WorkerPlacement-v1
    for e in envs:
        if not placement and not hasattr(e.unwrapped, "running_window"):
            raise ValueError(f"bc: imitation needs a JobSelect-v1 or WorkerPlacement-v1 env, got {env_id}")
    if placement:
        from gpusched_envs.policies.placement import get_placement

        get_placement(args.policy)  # an unknown rule fails here, not mid-round

    def learner(obs, mask):
        action, _ = model.predict(obs, action_masks=mask, deterministic=True)
        return int(action)

    data, history = Dataset(), []
    for rnd in range(args.rounds):
        episodes = []
        for i in range(args.episodes):
            env = envs[int(rng.integers(len(envs)))]
            expert = PlacementExpert(args.policy) if placement else HeuristicAgent(make_policy(args.policy))
            ep_seed = int(seed * 100_003 + rnd * 1_009 + i)
            episodes.append(
                collect_episode(
                    env,
                    expert,
                    None if rnd == 0 else learner,
                    gamma,
                    reward_scale,
                    ep_seed,
                    args.max_steps,
                    data,
                    beta=args.beta_decay**rnd,
                )
            )
        stats = fit(model, data, args, rng)
        done = [e["avg_jct"] for e in episodes if e["avg_jct"] is not None]
        record = {
            "round": rnd,
            "samples": len(data),
            "beta": args.beta_decay**rnd,
            "agreement": None if rnd == 0 else float(np.mean([e["agreement"] for e in episodes])),
            "finished_episodes": len(done),
            "avg_jct": float(np.mean(done)) if done else None,
            **stats,
        }
        history.append(record)
        if log is not None:
            log(record)
    for e in envs:
        e.close()
    return history
