"""PPO through ``sb3_contrib.MaskablePPO`` with the project's encoders as SB3 features extractors.

    model = make_ppo(env, encoder="gnn", seed=0)    # MaskablePPO("MultiInputPolicy", env, policy_kwargs=...)
    model.learn(10_000)

The extractor returns ``[per-action scores (A) ⊕ pooled embedding (h)]``: the scores come from the slot-scoring head
of :class:`agents.nets.networks.ActionScorer` (a job's score is computed from its own embedding ⊕ the cluster
embedding), and SB3's action net is initialised to read them through (identity on the first A features), so the
policy starts out permutation-equivariant over window slots; the value net reads the pooled embedding.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F
from gpusched_lab.agents.common import resolve_device, seed_everything, set_torch_threads
from gpusched_lab.agents.nets.common import FlatAdam
from gpusched_lab.agents.nets.networks import ActionScorer, NetworkConfig, build_network
from gymnasium import spaces
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.buffers import MaskableDictRolloutBuffer
from sb3_contrib.common.maskable.policies import MaskableMultiInputActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from stable_baselines3.common.utils import explained_variance


class ScorerExtractor(BaseFeaturesExtractor):
    """A :class:`~agents.nets.networks.ActionScorer` (GNN, CNN or MLP) as a features extractor."""

    def __init__(self, observation_space, network_config: dict, gnn_impl: str = "dense"):
        cfg = NetworkConfig(**network_config)
        super().__init__(observation_space, features_dim=cfg.num_actions + cfg.hidden)
        self.scorer: ActionScorer = build_network(cfg, observation_space, gnn_impl)
        self.num_actions = cfg.num_actions

    def forward(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        scores, embedding = self.scorer.scores_and_embedding(observations)  # SB3 hands edge_index as float
        return torch.cat([scores, embedding], dim=-1)


class GNNExtractor(ScorerExtractor):
    """The hierarchical GNN (``obs_mode="graph"``)."""


class CNNExtractor(ScorerExtractor):
    """TopDRL's multi-branch CNN (``obs_mode="image"``)."""


class MLPExtractor(ScorerExtractor):
    """An MLP over the flat observation (``obs_mode="flat"``)."""


EXTRACTORS = {"gnn": GNNExtractor, "cnn": CNNExtractor, "mlp": MLPExtractor}


class MaskedDiscretePolicy(MaskableMultiInputActorCriticPolicy):
    """sb3_contrib's ``MultiInputPolicy`` whose rollout step (:meth:`forward`) and update (:meth:`evaluate_actions`)
    compute the masked categorical distribution as plain tensor ops instead of through three
    ``MaskableCategorical`` constructions per call: the same operations in the same order (the logits normalised,
    masked to -1e8, normalised again; ``softmax``; ``multinomial`` for a sample), so the same numbers and the same
    random draws. Without masks, or for an action space other than ``Discrete``, sb3_contrib's own methods run."""

    def _masked_log_probs(self, latent_pi: torch.Tensor, action_masks) -> tuple[torch.Tensor, torch.Tensor]:
        """``(log_probs, masks)``: what ``MaskableCategorical(logits=action_net(latent_pi))`` with
        ``apply_masking(action_masks)`` holds as ``logits`` and ``masks``."""
        logits = self.action_net(latent_pi)
        logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        masks = torch.as_tensor(action_masks, dtype=torch.bool, device=logits.device).reshape(logits.shape)
        masked = torch.where(masks, logits, torch.tensor(-1e8, dtype=logits.dtype, device=logits.device))
        return masked - masked.logsumexp(dim=-1, keepdim=True), masks

    def _fast(self, action_masks) -> bool:
        return action_masks is not None and isinstance(self.action_space, spaces.Discrete)

    def _latents(self, obs) -> tuple[torch.Tensor, torch.Tensor]:
        """The actor's and the critic's latent features of ``obs`` (as sb3's ``forward`` computes them)."""
        features = self.extract_features(obs)
        if self.share_features_extractor:
            return self.mlp_extractor(features)
        return self.mlp_extractor.forward_actor(features[0]), self.mlp_extractor.forward_critic(features[1])

    def forward(self, obs, deterministic: bool = False, action_masks=None):
        if not self._fast(action_masks):
            return super().forward(obs, deterministic, action_masks)
        if not torch.is_grad_enabled():  # a rollout step: no autograd bookkeeping at all (the same numbers)
            with torch.inference_mode():
                return self._forward(obs, deterministic, action_masks)
        return self._forward(obs, deterministic, action_masks)

    def _forward(self, obs, deterministic: bool, action_masks):
        latent_pi, latent_vf = self._latents(obs)
        values = self.value_net(latent_vf)
        log_probs, _ = self._masked_log_probs(latent_pi, action_masks)
        probs = F.softmax(log_probs, dim=-1)
        if deterministic:
            actions = torch.argmax(probs, dim=-1)
        else:
            with torch.no_grad():
                actions = torch.multinomial(probs.reshape(-1, probs.shape[-1]), 1, True).T.reshape(
                    probs.shape[:-1]
                )
        log_prob = log_probs.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
        return actions.reshape((-1, *self.action_space.shape)), values, log_prob

    def evaluate_actions(self, obs, actions: torch.Tensor, action_masks=None):
        if not self._fast(action_masks):
            return super().evaluate_actions(obs, actions, action_masks)
        latent_pi, latent_vf = self._latents(obs)
        log_probs, masks = self._masked_log_probs(latent_pi, action_masks)
        value, log_pmf = torch.broadcast_tensors(actions.long().unsqueeze(-1), log_probs)
        log_prob = log_pmf.gather(-1, value[..., :1]).squeeze(-1)
        values = self.value_net(latent_vf)
        p_log_p = torch.where(
            masks, log_probs * F.softmax(log_probs, dim=-1), torch.tensor(0.0, device=masks.device)
        )
        return values, log_prob, -p_log_p.sum(-1)


class FlatMaskablePPO(MaskablePPO):
    """``sb3_contrib.MaskablePPO`` whose update clips the gradients through the policy's :class:`FlatAdam`
    (:meth:`FlatAdam.clip_grad_norm_`: torch's norms and arithmetic, the gradients scaled as one flat buffer
    instead of ~90 tensors), else through ``torch.nn.utils.clip_grad_norm_`` as sb3_contrib does; everything else
    is sb3_contrib's update, step for step: the same minibatches, losses, logs and weights, bit for bit. Dict
    observations are kept in a :class:`OneCopyDictRolloutBuffer` (the same minibatches with one copy fewer). Saved
    models load with ``MaskablePPO.load`` too (they then update the plain way)."""

    def _setup_model(self) -> None:
        if self.rollout_buffer_class is None and isinstance(self.observation_space, spaces.Dict):
            self.rollout_buffer_class = OneCopyDictRolloutBuffer
        super()._setup_model()

    def train(self) -> None:
        """sb3_contrib's ``MaskablePPO.train`` (n_epochs passes of minibatches over the rollout, the clipped
        surrogate, value and entropy losses, the optional KL early stop) with the flat gradient clipping."""
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        clip_range = self.clip_range(self._current_progress_remaining)
        if self.clip_range_vf is not None:
            clip_range_vf = self.clip_range_vf(self._current_progress_remaining)
        optimizer = self.policy.optimizer
        # the optimizer's parameters are the policy's, in order (then its clipping is torch's over them)
        flat_clip = isinstance(optimizer, FlatAdam) and [id(p) for p in self.policy.parameters()] == [
            id(p) for g in optimizer.param_groups for p in g["params"]
        ]

        entropy_losses = []
        pg_losses, value_losses = [], []
        clip_fractions = []
        continue_training = True
        for epoch in range(self.n_epochs):
            approx_kl_divs = []
            for rollout_data in self.rollout_buffer.get(self.batch_size):
                actions = rollout_data.actions
                if isinstance(self.action_space, spaces.Discrete):
                    actions = rollout_data.actions.long().flatten()
                values, log_prob, entropy = self.policy.evaluate_actions(
                    rollout_data.observations, actions, action_masks=rollout_data.action_masks
                )
                values = values.flatten()
                advantages = rollout_data.advantages
                if self.normalize_advantage:
                    advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
                ratio = torch.exp(log_prob - rollout_data.old_log_prob)
                policy_loss_1 = advantages * ratio
                policy_loss_2 = advantages * torch.clamp(ratio, 1 - clip_range, 1 + clip_range)
                policy_loss = -torch.min(policy_loss_1, policy_loss_2).mean()
                pg_losses.append(policy_loss.item())
                clip_fractions.append(torch.mean((torch.abs(ratio - 1) > clip_range).float()).item())
                if self.clip_range_vf is None:
                    values_pred = values
                else:
                    values_pred = rollout_data.old_values + torch.clamp(
                        values - rollout_data.old_values, -clip_range_vf, clip_range_vf
                    )
                value_loss = F.mse_loss(rollout_data.returns, values_pred)
                value_losses.append(value_loss.item())
                entropy_loss = -torch.mean(-log_prob) if entropy is None else -torch.mean(entropy)
                entropy_losses.append(entropy_loss.item())
                loss = policy_loss + self.ent_coef * entropy_loss + self.vf_coef * value_loss
                with torch.no_grad():
                    log_ratio = log_prob - rollout_data.old_log_prob
                    approx_kl_div = torch.mean((torch.exp(log_ratio) - 1) - log_ratio).cpu().numpy()
                    approx_kl_divs.append(approx_kl_div)
                if self.target_kl is not None and approx_kl_div > 1.5 * self.target_kl:
                    continue_training = False
                    if self.verbose >= 1:
                        print(f"Early stopping at step {epoch} due to reaching max kl: {approx_kl_div:.2f}")
                    break
                optimizer.zero_grad()
                loss.backward()
                if flat_clip:
                    optimizer.clip_grad_norm_(self.max_grad_norm)
                else:
                    torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
                optimizer.step()
            self._n_updates += 1
            if not continue_training:
                break
        explained_var = explained_variance(
            self.rollout_buffer.values.flatten(), self.rollout_buffer.returns.flatten()
        )
        self.logger.record("train/entropy_loss", np.mean(entropy_losses))
        self.logger.record("train/policy_gradient_loss", np.mean(pg_losses))
        self.logger.record("train/value_loss", np.mean(value_losses))
        self.logger.record("train/approx_kl", np.mean(approx_kl_divs))
        self.logger.record("train/clip_fraction", np.mean(clip_fractions))
        self.logger.record("train/loss", loss.item())
        self.logger.record("train/explained_variance", explained_var)
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/clip_range", clip_range)
        if self.clip_range_vf is not None:
            self.logger.record("train/clip_range_vf", clip_range_vf)


@dataclass
class PPOArgs:
    encoder: str = "gnn"
    """network: gnn (obs_mode graph) | cnn (image) | mlp (flat)"""
    hidden: int = 64
    """width of the network's layers"""
    layers: int = 1
    """GNN: up/down sweeps; CNN/MLP: hidden layers"""
    gnn_impl: str = "dense"
    """GNN implementation: dense (default; tree operators built once per cluster) | scatter | pyg (the torch_geometric reference); same function"""
    learning_rate: float = 3e-4
    """Adam step size (at the start of the run)"""
    lr_final_fraction: float = 1.0
    """learning rate at the end of the run ÷ at its start, decayed linearly (1.0: constant). Late-training
    collapse of the shipped v0 checkpoint came with a constant step size; decaying it keeps late updates small"""
    target_kl: float | None = None
    """stop a rollout's epochs early once the approximate KL to the rollout policy exceeds this (None: never)"""
    n_steps: int = 256
    """rollout length per env"""
    batch_size: int = 64
    """minibatch size"""
    n_epochs: int = 4
    """passes over each rollout"""
    gamma: float = 0.99
    """discount"""
    gae_lambda: float = 0.95
    """GAE λ"""
    clip_range: float = 0.2
    """PPO clip"""
    ent_coef: float = 0.01
    """entropy bonus"""
    vf_coef: float = 0.5
    """value-loss weight"""
    max_grad_norm: float = 0.5
    """gradient clipping"""
    reward_scale: float = 1.0
    """rewards are multiplied by this before learning (applied by the env wrapper in train/)"""
    seed: int = 0
    """seeds python, numpy, torch and the envs"""
    device: str = "auto"
    """auto | cpu | cuda[:N]"""
    torch_threads: int = 1
    """CPU threads for torch (0: torch's default)"""
    hint_logit: float = 0.0
    """> 0: add the env's ``obs["hint"]`` (``JobSelect-v1(hint=<heuristic>)``: the rule's action) to the logits
    with a learned weight starting here, so the policy starts as the rule and learns where to depart from it"""
    wait_logit_init: float = -3.0
    """initial bias of the last action's logit (wait / defer): the policy starts near work-conserving, so the
    deterministic policy does not idle GPUs while the stochastic one still explores waiting"""
    rule_logit_init: float = 0.0
    """initial bias of the first rule's logit in a rule-choice env (``JobSelect-v1(rules=[...])``; the others
    start at 0): > 0 makes the policy start near the first rule, which it then learns where to leave"""

    def to_dict(self) -> dict:
        return asdict(self)


class LinearLR:
    """SB3 learning-rate schedule: ``start`` at the beginning of the run, ``start · final_fraction`` at its end
    (a class, not a closure, so SB3's save pickles it)."""

    def __init__(self, start: float, final_fraction: float):
        self.start, self.final_fraction = float(start), float(final_fraction)

    def __call__(self, progress_remaining: float) -> float:
        return self.start * (self.final_fraction + (1.0 - self.final_fraction) * progress_remaining)


def linear_lr(start: float, final_fraction: float):
    """A constant (``final_fraction == 1``) or a :class:`LinearLR` schedule."""
    if not 0.0 < final_fraction <= 1.0:
        raise ValueError(f"lr_final_fraction must be in (0, 1], got {final_fraction}")
    return start if final_fraction == 1.0 else LinearLR(start, final_fraction)


@torch.no_grad()
def identity_action_net(net: torch.nn.Linear, num_actions: int) -> None:
    """Set an action net on ``[scores ⊕ embedding]`` to "logits = scores" (it stays trainable)."""
    with torch.no_grad():
        net.weight.zero_()
        net.bias.zero_()
        net.weight[:, :num_actions] = torch.eye(num_actions)


def init_action_net_identity(model, num_actions: int) -> None:
    """Start SB3's action net as "logits = the extractor's scores" (it stays trainable)."""
    identity_action_net(model.policy.action_net, num_actions)


class OneCopyDictRolloutBuffer(MaskableDictRolloutBuffer):
    """sb3-contrib's masked dict rollout buffer, handing each minibatch over with one copy instead of two.

    Every array the buffer turns into a tensor for a minibatch (``obs[batch_inds]``, ``values[batch_inds].flatten()``,
    ...) is already a fresh copy made by numpy's fancy indexing; the base class then copies it again into the
    tensor. Here the tensor takes that fresh array's memory (on CPU; another device copies anyway), so nothing in a
    minibatch aliases the buffer."""

    def to_torch(self, array: np.ndarray, copy: bool = True) -> torch.Tensor:
        return torch.as_tensor(array, device=self.device)


def make_ppo(
    env, network_config: NetworkConfig, args: PPOArgs, tensorboard_log: str | None = None, verbose: int = 0
):
    """``MaskablePPO("MultiInputPolicy", env, policy_kwargs=dict(features_extractor_class=...))`` (as a
    :class:`FlatMaskablePPO`)."""
    seed_everything(args.seed)
    set_torch_threads(args.torch_threads)
    device = resolve_device(args.device)
    policy_kwargs = dict(
        features_extractor_class=EXTRACTORS[network_config.encoder],
        features_extractor_kwargs=dict(network_config=network_config.to_dict(), gnn_impl=args.gnn_impl),
        net_arch=dict(pi=[], vf=[network_config.hidden]),
        share_features_extractor=True,
        # SB3's default Adam (eps 1e-5) as a few ops on one flat buffer (the same arithmetic, bit for bit)
        optimizer_class=FlatAdam,
        optimizer_kwargs=dict(eps=1e-5),
    )
    model = FlatMaskablePPO(
        MaskedDiscretePolicy,
        env,
        learning_rate=linear_lr(args.learning_rate, args.lr_final_fraction),
        n_steps=args.n_steps,
        batch_size=args.batch_size,
        n_epochs=args.n_epochs,
        gamma=args.gamma,
        gae_lambda=args.gae_lambda,
        clip_range=args.clip_range,
        ent_coef=args.ent_coef,
        vf_coef=args.vf_coef,
        max_grad_norm=args.max_grad_norm,
        target_kl=args.target_kl,
        policy_kwargs=policy_kwargs,
        tensorboard_log=tensorboard_log,
        seed=args.seed,
        device=device,
        verbose=verbose,
    )
    init_action_net_identity(model, network_config.num_actions)
    if network_config.slots in ("jobs", "servers"):  # a wait / defer action (not DAGSchedule's GPUs)
        with torch.no_grad():
            model.policy.action_net.bias[-1] = args.wait_logit_init
    elif network_config.slots == "rules":  # one action per rule, the first the base rule
        with torch.no_grad():
            model.policy.action_net.bias[0] = args.rule_logit_init
    return model
