"""Double DQN (van Hasselt et al. 2016) for the masked, Dict-observation envs, written to read top to bottom.

The online network picks the next action (masked argmax over the next state's valid actions), the target network
evaluates it; invalid actions are never chosen, neither when acting nor inside the target. Replay is a numpy buffer
allocated once for the Dict observation and written in place; optional n-step returns; Huber loss; hard target
sync or Polyak averaging; linear ε schedule. Works with the GNN, CNN or MLP network of :mod:`agents.nets.networks`.

    algo = DDQN(DDQNArgs(encoder="gnn", seed=0), [make_env(...) for _ in range(2)])
    algo.learn(10_000)

    algo = DDQN(DDQNArgs(encoder="gnn", seed=0), make_vector_env(env_id, kwargs, "graph", 64))
    algo.learn(100_000)

Given a list, the envs are stepped one after the other (acting on them as one batch); given a native vector env
(:func:`agents.common.make_vector_env`, autoresets disabled), one call steps all its copies: one greedy forward, the
ε draws and the replay writes for the whole batch at once, and the gradient steps and target updates that fall due
in the ``N`` env steps after them.

Everything that changes while learning (networks, optimiser, buffer, RNG states, the envs themselves, partial
n-step windows) is in :meth:`DDQN.training_state`, so a run restored with :meth:`DDQN.load_training_state`
continues bit-for-bit.
"""

from __future__ import annotations

import copy
import pickle
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from gpusched_lab.agents.common import resolve_device, seed_everything, set_torch_threads
from gpusched_lab.agents.nets.common import FlatAdam
from gpusched_lab.agents.nets.networks import (
    ActionScorer,
    build_network,
    config_for_env,
    masked,
    obs_to_tensors,
)


@dataclass
class DDQNArgs:
    encoder: str = "gnn"
    """network: gnn (obs_mode graph) | cnn (image) | mlp (flat)"""
    hidden: int = 64
    """width of the network's layers"""
    layers: int = 1
    """GNN: up/down sweeps over the tree; CNN/MLP: hidden layers"""
    gnn_impl: str = "dense"
    """GNN implementation: dense (default; tree operators built once per cluster) | scatter | pyg (the torch_geometric reference); same function"""
    learning_rate: float = 5e-4
    """Adam step size"""
    buffer_size: int = 20_000
    """replay capacity in transitions"""
    batch_size: int = 64
    """transitions per gradient step"""
    gamma: float = 0.99
    """discount"""
    n_step: int = 1
    """n-step returns (1: one-step TD)"""
    tau: float = 1.0
    """target update: 1.0 = hard copy every target_update_interval steps; < 1 = Polyak averaging at that interval"""
    target_update_interval: int = 500
    """env steps between target updates"""
    start_epsilon: float = 1.0
    """ε at step 0"""
    end_epsilon: float = 0.05
    """ε after exploration_fraction of the run"""
    exploration_fraction: float = 0.3
    """share of total steps over which ε decays linearly"""
    learning_starts: int = 500
    """env steps collected before learning"""
    train_frequency: int = 4
    """env steps between gradient steps"""
    gradient_steps: int = 1
    """gradient steps each time"""
    max_grad_norm: float = 10.0
    """gradient clipping"""
    reward_scale: float = 1.0
    """rewards are multiplied by this before learning (the env's units can be large)"""
    seed: int = 0
    """seeds python, numpy, torch, the envs and the exploration generator"""
    device: str = "auto"
    """auto | cpu | cuda[:N] (cuda without CUDA falls back to cpu with a warning)"""
    torch_threads: int = 1
    """CPU threads for torch (1 is fastest for these small networks on a shared machine; 0 leaves torch's default)"""
    bc_from: str = ""
    """expert for a warm start ('' none): a placement rule whose env.unwrapped.heuristic_action(rule) acts
    (WorkerPlacement-v1: consolidate | closest | pack | first-fit | spread | random)"""
    bc_steps: int = 0
    """pre-training gradient steps on the expert's demonstrations before the first env step (DQfD-style)"""
    bc_demo_steps: int = 5_000
    """expert env steps collected as demonstrations (whole episodes; at most buffer_size)"""
    bc_margin: float = 0.5
    """large-margin loss: non-expert actions are pushed at least this far below the expert's, in Q units"""
    bc_weight: float = 1.0
    """weight of the large-margin loss on demonstration transitions (pre-training and while they stay in replay)"""
    bc_learning_rate: float = 0.0
    """Adam step size of the pre-training steps (0: learning_rate); fine-tuning then uses learning_rate"""

    def to_dict(self) -> dict:
        return asdict(self)


class ReplayBatch(NamedTuple):
    obs: dict[str, torch.Tensor]
    actions: torch.Tensor  # (B,) int64
    returns: torch.Tensor  # (B,) n-step discounted reward sum
    discounts: torch.Tensor  # (B,) γ^m for a bootstrap after m steps, 0 after termination
    next_obs: dict[str, torch.Tensor]
    demo: torch.Tensor  # (B,) bool: the expert's transition


class DictReplayBuffer:
    """Ring buffer of n-step transitions for Dict observations; arrays allocated once and written in place."""

    def __init__(self, obs_space, capacity: int):
        self.capacity = int(capacity)
        self.obs = {k: np.zeros((capacity, *s.shape), dtype=s.dtype) for k, s in obs_space.spaces.items()}
        self.next_obs = {
            k: np.zeros((capacity, *s.shape), dtype=s.dtype) for k, s in obs_space.spaces.items()
        }
        self.actions = np.zeros(capacity, dtype=np.int64)
        self.returns = np.zeros(capacity, dtype=np.float32)
        self.discounts = np.zeros(capacity, dtype=np.float32)
        self.demo = np.zeros(capacity, dtype=bool)  # an expert's transition (behaviour-cloning warm start)
        self.pos = 0
        self.size = 0

    def add(
        self, obs: dict, action: int, ret: float, discount: float, next_obs: dict, demo: bool = False
    ) -> None:
        i = self.pos
        for k, buf in self.obs.items():
            buf[i] = obs[k]
            self.next_obs[k][i] = next_obs[k]
        self.actions[i], self.returns[i], self.discounts[i] = action, ret, discount
        self.demo[i] = demo
        self.pos = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def add_batch(
        self, obs: dict, actions: np.ndarray, returns: np.ndarray, discounts: np.ndarray, next_obs: dict
    ) -> None:
        """``len(actions)`` transitions at once (row ``j`` of each array), in order, as many :meth:`add` calls."""
        m = len(actions)
        if m > self.capacity:  # only the last capacity rows survive, as with add
            cut = slice(m - self.capacity, m)
            obs, next_obs = {k: v[cut] for k, v in obs.items()}, {k: v[cut] for k, v in next_obs.items()}
            actions, returns, discounts = actions[cut], returns[cut], discounts[cut]
            self.pos = (self.pos + m - self.capacity) % self.capacity
            m = self.capacity
        idx = (self.pos + np.arange(m)) % self.capacity
        for k, buf in self.obs.items():
            buf[idx] = obs[k]
            self.next_obs[k][idx] = next_obs[k]
        self.actions[idx], self.returns[idx], self.discounts[idx] = actions, returns, discounts
        self.demo[idx] = False
        self.pos = (self.pos + m) % self.capacity
        self.size = min(self.size + m, self.capacity)

    def sample(self, batch_size: int, rng: np.random.Generator, device) -> ReplayBatch:
        idx = rng.integers(0, self.size, size=batch_size)
        return ReplayBatch(
            obs_to_tensors({k: v[idx] for k, v in self.obs.items()}, device, batched=True),
            torch.as_tensor(self.actions[idx], device=device),
            torch.as_tensor(self.returns[idx], device=device),
            torch.as_tensor(self.discounts[idx], device=device),
            obs_to_tensors({k: v[idx] for k, v in self.next_obs.items()}, device, batched=True),
            torch.as_tensor(self.demo[idx], device=device),
        )

    def state(self) -> dict:
        n = self.size
        return {
            "obs": {k: v[:n].copy() for k, v in self.obs.items()} if n < self.capacity else self.obs,
            "next_obs": {k: v[:n].copy() for k, v in self.next_obs.items()}
            if n < self.capacity
            else self.next_obs,
            "actions": self.actions[:n],
            "returns": self.returns[:n],
            "discounts": self.discounts[:n],
            "demo": self.demo[:n],
            "pos": self.pos,
            "size": n,
        }

    def load_state(self, s: dict) -> None:
        n = s["size"]
        for k in self.obs:
            self.obs[k][:n] = s["obs"][k]
            self.next_obs[k][:n] = s["next_obs"][k]
        self.actions[:n], self.returns[:n], self.discounts[:n] = s["actions"], s["returns"], s["discounts"]
        self.demo[:n] = s.get("demo", False)  # states saved before demonstrations existed have none
        self.pos, self.size = s["pos"], n


def double_q_targets(
    q_online_next: torch.Tensor,  # (B, A) online network on s'
    q_target_next: torch.Tensor,  # (B, A) target network on s'
    next_action_mask: torch.Tensor,  # (B, A) valid actions in s'
    returns: torch.Tensor,  # (B,) n-step reward sums
    discounts: torch.Tensor,  # (B,) γ^m, 0 when the episode terminated
) -> torch.Tensor:
    """``y = R + γ^m · Q_target(s', argmax_{a valid in s'} Q_online(s', a))``."""
    best = masked(q_online_next, next_action_mask).argmax(dim=-1, keepdim=True)  # (B, 1)
    value = q_target_next.gather(-1, best).squeeze(-1)
    return returns + discounts * torch.where(discounts > 0, value, torch.zeros_like(value))


def large_margin_loss(
    q: torch.Tensor,  # (B, A) online network on s
    action_mask: torch.Tensor,  # (B, A) valid actions in s
    expert_actions: torch.Tensor,  # (B,) the expert's action
    margin: float,
) -> torch.Tensor:
    """DQfD's supervised loss (Hester et al. 2018): ``max_{a valid} [Q(s,a) + margin·1(a ≠ a_E)] − Q(s,a_E)``,
    zero exactly when the expert's action leads every other valid action by at least ``margin``; (B,)."""
    penalty = torch.full_like(q, margin).scatter(-1, expert_actions.unsqueeze(-1), 0.0)
    best = masked(q + penalty, action_mask).max(dim=-1).values
    return best - q.gather(-1, expert_actions.unsqueeze(-1)).squeeze(-1)


def is_vector_env(envs) -> bool:
    """A native vector env (``num_envs`` copies in its ``envs``, batched ``step``), not a list of envs."""
    from gymnasium.vector import VectorEnv

    return isinstance(envs, VectorEnv)


def linear_schedule(start: float, end: float, duration: float, t: int) -> float:
    if duration <= 0:
        return end
    return start + min(t / duration, 1.0) * (end - start)


class DDQN:
    """Double DQN over a list of envs stepped in lock-step, or a native vector env (in-process either way, so their
    state can be checkpointed)."""

    algorithm = "ddqn"

    def __init__(self, args: DDQNArgs, envs, total_steps: int | None = None):
        self.args = args
        self.venv = envs if is_vector_env(envs) else None
        self.envs = list(envs.envs) if self.venv is not None else envs  # the single envs (demonstrations)
        self.total_steps = total_steps
        seed_everything(args.seed)
        set_torch_threads(args.torch_threads)
        self.device = resolve_device(args.device)
        env0 = self.envs[0]
        self.obs_space = env0.observation_space
        self.net_config = config_for_env(env0, args.encoder, args.hidden, args.layers)
        self.q: ActionScorer = build_network(self.net_config, self.obs_space, args.gnn_impl).to(self.device)
        self.q_target = copy.deepcopy(self.q)
        # Adam as a few ops on one flat buffer instead of a loop over ~80 small tensors (same arithmetic, bit for bit)
        self.optimizer = FlatAdam(self.q.parameters(), lr=args.learning_rate)
        self.buffer = DictReplayBuffer(self.obs_space, args.buffer_size)
        self.rng = np.random.default_rng(args.seed)  # exploration and replay sampling
        self.global_step = 0  # env steps summed over envs
        self.updates = 0
        self.last_loss = float("nan")
        self.epsilon = args.start_epsilon
        self.finished_episodes: list[dict] = []  # drained by the caller (logging)
        self._obs: list[dict] | dict | None = None  # per env (a list), or the vector env's batch
        self._windows = [deque() for _ in self.envs]  # pending (obs, action, reward) for n-step returns
        self._ep_return = [0.0] * len(self.envs)
        self._ep_length = [0] * len(self.envs)
        self.pretrain_stats: dict | None = None  # set by pretrain() (behaviour-cloning warm start)

    # ------------------------------------------------------------------ acting
    @torch.inference_mode()
    def greedy(self, obs_batch: dict) -> np.ndarray:
        """Masked argmax of the online network for a batch of observations (inference mode: no autograd
        bookkeeping at all; nothing computed here is trained through)."""
        t = obs_to_tensors(obs_batch, self.device, batched=True)
        return masked(self.q(t), t["action_mask"]).argmax(dim=-1).cpu().numpy()

    def _select(self, obs: list[dict]) -> list[int]:
        """ε-greedy actions, one per env. The draws are made first, in the same order as always (explore or not,
        then which valid action when exploring); the greedy forward, which draws nothing and changes nothing, runs
        on the whole batch as before, and only when some env takes its greedy action."""
        picks: list[int | None] = []
        for o in obs:
            pick = None
            if self.rng.random() < self.epsilon:
                valid = np.flatnonzero(o["action_mask"])
                if len(valid):
                    pick = int(self.rng.choice(valid))
            picks.append(pick)
        if any(p is None for p in picks):
            greedy = self.greedy({k: np.stack([o[k] for o in obs]) for k in obs[0]})
            picks = [int(greedy[i]) if p is None else p for i, p in enumerate(picks)]
        return picks  # type: ignore[return-value]

    def _select_batch(self, obs: dict) -> np.ndarray:
        """ε-greedy actions for a batch of observations: one greedy forward, then two draws per env (explore or
        not; which valid action) from the run's generator, whatever ε is, so the draws a step makes are fixed."""
        actions = self.greedy(obs)
        n = len(actions)
        u = self.rng.random((2, n))
        explore = u[0] < self.epsilon
        if explore.any():
            masks = np.asarray(obs["action_mask"]).astype(bool)
            counts = masks.sum(axis=1)
            k = np.minimum(
                (u[1] * counts).astype(np.int64), np.maximum(counts - 1, 0)
            )  # the k-th valid action
            choice = np.argmax(np.cumsum(masks, axis=1) > k[:, None], axis=1)
            actions = np.where(explore & (counts > 0), choice, actions)
        return actions.astype(np.int64)

    # ------------------------------------------------------------------ n-step transitions
    def _push(
        self,
        i: int,
        obs: dict,
        action: int,
        reward: float,
        next_obs: dict,
        terminated: bool,
        ended: bool,
        demo: bool = False,
    ):
        """Queue a step of env ``i``; write n-step transitions once n steps are pending or the episode ended."""
        a = self.args
        window = self._windows[i]
        window.append((obs, action, reward))
        if len(window) < a.n_step and not ended:
            return
        while window:
            ret = sum(r * a.gamma**k for k, (_, _, r) in enumerate(window))
            discount = 0.0 if terminated else a.gamma ** len(window)
            o, act, _ = window[0]
            self.buffer.add(o, act, ret, discount, next_obs, demo)
            window.popleft()
            if not ended:
                break

    # ------------------------------------------------------------------ learning
    def _reset_all(self) -> None:
        if self.venv is not None:
            self._obs = self.venv.reset(seed=[self.args.seed + i for i in range(self.venv.num_envs)])[0]
            return
        self._obs = [env.reset(seed=self.args.seed + i)[0] for i, env in enumerate(self.envs)]

    def train_step(self) -> None:
        """One step of every env, then the gradient steps and target updates that fall due."""
        if self.venv is not None:
            self._train_step_vector()
            return
        a = self.args
        if self._obs is None:
            self._reset_all()
        if self.total_steps:
            self.epsilon = linear_schedule(
                a.start_epsilon, a.end_epsilon, a.exploration_fraction * self.total_steps, self.global_step
            )
        actions = self._select(self._obs)
        for i, env in enumerate(self.envs):
            obs = self._obs[i]
            next_obs, reward, terminated, truncated, info = env.step(actions[i])
            reward = float(reward) * a.reward_scale
            self._ep_return[i] += float(reward)
            self._ep_length[i] += 1
            ended = terminated or truncated
            self._push(i, obs, actions[i], reward, next_obs, terminated, ended)
            if ended:
                self.finished_episodes.append(
                    {
                        "return": self._ep_return[i],
                        "length": self._ep_length[i],
                        "metrics": info.get("metrics", {}),
                    }
                )
                self._ep_return[i], self._ep_length[i] = 0.0, 0
                next_obs, _ = env.reset()  # the env's own generator continues: the next episode is seeded too
            self._obs[i] = next_obs
            before = self.global_step
            self.global_step += 1
            if self.global_step > a.learning_starts and self.buffer.size >= a.batch_size:
                if self.global_step // a.train_frequency > before // a.train_frequency:
                    for _ in range(a.gradient_steps):
                        self.last_loss = self._gradient_step()
            if self.global_step // a.target_update_interval > before // a.target_update_interval:
                self._update_target()

    def _train_step_vector(self) -> None:
        """:meth:`train_step` on a native vector env: one call steps every copy; the ``N`` transitions go to the
        replay buffer together (n-step windows per env when ``n_step > 1``); then the gradient steps due at the
        ``N`` env steps (one every ``train_frequency`` past ``learning_starts``) and the target updates due."""
        a, venv = self.args, self.venv
        n = venv.num_envs
        if self._obs is None:
            self._reset_all()
        if self.total_steps:
            self.epsilon = linear_schedule(
                a.start_epsilon, a.end_epsilon, a.exploration_fraction * self.total_steps, self.global_step
            )
        obs = self._obs
        actions = self._select_batch(obs)
        next_obs, rewards, terminated, truncated, _ = venv.step(actions)
        rewards = rewards * a.reward_scale
        ended = terminated | truncated
        if not isinstance(self._ep_return, np.ndarray):
            self._ep_return = np.asarray(self._ep_return, dtype=np.float64)
            self._ep_length = np.asarray(self._ep_length, dtype=np.int64)
        self._ep_return += rewards
        self._ep_length += 1
        if a.n_step == 1:
            discounts = np.where(terminated, 0.0, a.gamma)
            self.buffer.add_batch(obs, actions, rewards, discounts, next_obs)
        else:
            keys = list(obs)
            for i in range(n):
                self._push(
                    i,
                    {k: obs[k][i] for k in keys},
                    int(actions[i]),
                    float(rewards[i]),
                    {k: next_obs[k][i] for k in keys},
                    bool(terminated[i]),
                    bool(ended[i]),
                )
        if ended.any():
            for i in np.flatnonzero(ended).tolist():
                self.finished_episodes.append(
                    {
                        "return": float(self._ep_return[i]),
                        "length": int(self._ep_length[i]),
                        "metrics": venv.env_infos[i].get("metrics", {}),
                    }
                )
            self._ep_return[ended], self._ep_length[ended] = 0.0, 0
            # no seed: each env's own generator continues, so the next episode is seeded too
            next_obs, _ = venv.reset(options={"reset_mask": ended})
        self._obs = next_obs
        before = self.global_step
        self.global_step += n
        if self.buffer.size >= a.batch_size:
            lo = max(
                before, a.learning_starts
            )  # env steps k in (lo, global_step] with k % train_frequency == 0
            due = (
                self.global_step // a.train_frequency - lo // a.train_frequency
                if self.global_step > lo
                else 0
            )
            for _ in range(due * a.gradient_steps):
                self.last_loss = self._gradient_step()
        syncs = self.global_step // a.target_update_interval - before // a.target_update_interval
        for _ in range(min(syncs, 1) if a.tau >= 1.0 else syncs):
            self._update_target()

    def _gradient_step(self) -> float:
        a = self.args
        batch = self.buffer.sample(a.batch_size, self.rng, self.device)
        with torch.inference_mode():  # no autograd bookkeeping at all (views, version counters)
            target = double_q_targets(
                self.q(batch.next_obs),
                self.q_target(batch.next_obs),
                batch.next_obs["action_mask"],
                batch.returns,
                batch.discounts,
            )
        target = target.clone()  # a normal tensor: the loss saves it for backward
        q_all = self.q(batch.obs)
        q = q_all.gather(-1, batch.actions.unsqueeze(-1)).squeeze(-1)
        loss = F.smooth_l1_loss(q, target)
        if a.bc_weight > 0 and bool(batch.demo.any()):  # the expert's transitions keep their margin (DQfD)
            margin = large_margin_loss(q_all, batch.obs["action_mask"], batch.actions, a.bc_margin)
            loss = loss + a.bc_weight * (margin * batch.demo).sum() / batch.demo.sum()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.clip_grad_norm_(a.max_grad_norm)  # torch's clip_grad_norm_ over q's parameters
        self.optimizer.step()
        self.updates += 1
        return float(loss.detach())

    @torch.no_grad()
    def _update_target(self) -> None:
        tau = self.args.tau
        if tau >= 1.0:
            self.q_target.load_state_dict(self.q.state_dict())
            return
        for p_t, p in zip(self.q_target.parameters(), self.q.parameters(), strict=True):
            p_t.mul_(1.0 - tau).add_(p, alpha=tau)

    # ------------------------------------------------------------------ warm start from an expert
    def expert_action(self, env) -> int:
        rule = self.args.bc_from
        act = getattr(env.unwrapped, "heuristic_action", None)
        if act is None:
            raise ValueError(
                f"bc_from={rule!r}: {type(env.unwrapped).__name__} has no heuristic_action (WorkerPlacement-v1 has)"
            )
        return int(act(rule))

    def collect_demonstrations(self) -> int:
        """Play the expert (``bc_from``) for whole episodes until ``bc_demo_steps`` transitions are in the replay
        buffer, flagged as demonstrations; episode ``k`` is seeded ``1_000_000 + 1_000·seed + k`` (far from the
        validation and held-out seeds). Returns the number of transitions."""
        a = self.args
        limit = min(a.bc_demo_steps, self.buffer.capacity)
        steps, k = 0, 0
        while steps < limit:
            i = k % len(self.envs)
            env = self.envs[i]
            obs, _ = env.reset(seed=1_000_000 + 1_000 * a.seed + k)
            while True:
                action = self.expert_action(env)
                next_obs, reward, terminated, truncated, _ = env.step(action)
                ended = terminated or truncated
                self._push(i, obs, action, float(reward) * a.reward_scale, next_obs, terminated, ended, True)
                steps += 1
                obs = next_obs
                if ended:
                    break
            k += 1
        return steps

    def pretrain(self) -> dict:
        """Behaviour cloning before the first env step: demonstrations, then ``bc_steps`` gradient steps of TD
        loss + large-margin loss on them (DQfD's pre-training), then the target network takes the weights and the
        envs start fresh episodes from the run's own seeds. Returns ``{"demo_steps", "loss"}``."""
        a = self.args
        demos = self.collect_demonstrations()
        self._set_learning_rate(a.bc_learning_rate or a.learning_rate)
        losses = [self._gradient_step() for _ in range(a.bc_steps)]
        self._set_learning_rate(a.learning_rate)
        self.q_target.load_state_dict(self.q.state_dict())
        self._obs = None  # the run's episodes start from its own seeds, as without a warm start
        for w in self._windows:
            w.clear()
        return {"demo_steps": demos, "loss": float(np.mean(losses[-100:])) if losses else float("nan")}

    def _set_learning_rate(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def learn(self, total_steps: int, callback: Callable[[DDQN], bool | None] | None = None) -> DDQN:
        """Step until ``global_step >= total_steps``; ``callback(self)`` after each step may return False to stop.
        The ε schedule spans the run's planned length (the constructor's ``total_steps``; else this one). With
        ``bc_from``, a fresh run (step 0) first :meth:`pretrain` s on the expert's demonstrations."""
        if self.total_steps is None:
            self.total_steps = total_steps
        if self.args.bc_from and self.global_step == 0 and self.updates == 0:
            self.pretrain_stats = self.pretrain()
        while self.global_step < total_steps:
            self.train_step()
            if callback is not None and callback(self) is False:
                break
        return self

    # ------------------------------------------------------------------ checkpoints
    def training_state(self) -> dict:
        """Everything needed to continue bit-for-bit (pickled envs included)."""
        return {
            "global_step": self.global_step,
            "updates": self.updates,
            "last_loss": self.last_loss,
            "epsilon": self.epsilon,
            "q": self.q.state_dict(),
            "q_target": self.q_target.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "buffer": self.buffer.state(),
            "rng": self.rng.bit_generator.state,
            "python_rng": random.getstate(),
            "numpy_rng": np.random.get_state(),  # noqa: NPY002 - the global generator seeded in seed_everything
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            "envs": pickle.dumps(self.venv if self.venv is not None else self.envs),
            "obs": self._obs,
            "windows": [list(w) for w in self._windows],
            "ep_return": [float(x) for x in self._ep_return],
            "ep_length": [int(x) for x in self._ep_length],
            "time": time.time(),
        }

    def load_training_state(self, s: dict) -> None:
        self.global_step, self.updates, self.last_loss = s["global_step"], s["updates"], s["last_loss"]
        self.epsilon = s["epsilon"]
        self.q.load_state_dict(s["q"])
        self.q_target.load_state_dict(s["q_target"])
        self.optimizer.load_state_dict(s["optimizer"])
        self.buffer.load_state(s["buffer"])
        self.rng.bit_generator.state = s["rng"]
        random.setstate(s["python_rng"])
        np.random.set_state(s["numpy_rng"])  # noqa: NPY002
        torch.set_rng_state(s["torch_rng"])
        if s["cuda_rng"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(s["cuda_rng"])
        if self.venv is not None:
            self.venv.close()
        else:
            for env in self.envs:
                env.close()
        envs = pickle.loads(s["envs"])
        self.venv = envs if is_vector_env(envs) else None
        self.envs = list(envs.envs) if self.venv is not None else envs
        self._obs = s["obs"]
        self._windows = [deque(w) for w in s["windows"]]
        self._ep_return, self._ep_length = list(s["ep_return"]), list(s["ep_length"])

    def policy_network(self) -> ActionScorer:
        return self.q
