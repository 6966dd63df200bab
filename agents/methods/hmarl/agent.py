"""HMARL (Zhao & Wu, IEEE TNSM 2022): K schedulers of one data centre learn cooperatively — a MAPPO-style trainer on
``multi_scheduler_v1``.

- **Actor** (shared by every agent: parameter sharing): the hierarchical GNN of :mod:`agents.nets.networks`
  (:class:`~agents.nets.networks.GraphEncoder`, GPU → server → rack → cluster and back) over the agent's own observation
  gives a cluster embedding and the head job's embedding; each candidate placement is scored by one shared MLP from
  its features (``candidate_features`` ⊕ the interference model's predicted slowdown, see
  :mod:`agents.methods.hmarl.interference`) ⊕ those two embeddings, the wait action by its own head; invalid actions are masked
  (categorical over the valid ones). No weight depends on the cluster's size, so a policy trained on a small data
  centre runs on a larger one (:func:`load` rebuilds the layout for the env it is given).
- **Critic**: ``critic="central"`` (MAPPO): an MLP on ``env.state()`` (the global flat encoding with every agent's head
  job) ⊕ the agent's context; ``critic="local"`` (independent learners, IPPO): a head on the actor's own embedding.
- **PPO**: rollouts over ``num_envs`` env copies stepped together (one batched forward for all agents of all copies),
  GAE(λ), clipped surrogate, entropy bonus, value loss, gradient clipping; samples where the agent had a single valid
  action (nothing to decide) are left out of the policy loss.
- The **centralised** baseline is the same learner on the env with ``num_agents=1`` and ``routing="round_robin"``: one
  scheduler over the merged queue.
- **Imitation warm start** (a config's ``imitation:`` block, :class:`ImitationArgs`): DAgger towards a per-agent
  heuristic (:class:`~gpusched_envs.multi_agent.multi_scheduler.HeuristicMultiAgent`, e.g.
  ``sjf-consolidate+backfill``) before PPO: every decisive agent state is labelled with the expert's action, the actor
  fitted by cross-entropy on its masked logits and the critic on the discounted returns (:func:`imitate`).

Run folder (``train(..., out=...)``, ``gpusched train hmarl --config hmarl``)::

    config.json        resolved configuration
    tb/                TensorBoard: episode/return, episode/avg_jct, train/{policy_loss,value_loss,entropy,clip_frac},
                       train/steps_per_second, eval/avg_jct
    checkpoint/        model.pt (actor), meta.json, resume.pt (actor, critic, optimiser, step counter)
    best/              the actor with the lowest eval avg JCT (step 0: the imitation warm start)
    imitation/         the actor right after the imitation warm start; imitation.json: one record per DAgger round

Checkpoints: ``model.pt`` is the actor's ``state_dict`` (``torch.load(weights_only=True)``); ``meta.json`` as the
other agents' (:mod:`agents.checkpoint`) with ``algorithm: "hmarl"``, ``env_id`` the PettingZoo module, the env
kwargs and the interference model's folder. Resume continues the parameters, optimiser and step counter; fresh
episodes are seeded from ``seed`` + the step count (reproducible, not identical to an uninterrupted run).

Modules by job: :mod:`~agents.methods.hmarl.config` (arguments, run configuration, YAML loading),
:mod:`~agents.methods.hmarl.policy` (networks and acting), :mod:`~agents.methods.hmarl.mappo` (the MAPPO / IPPO
learner, on the policy-gradient core of :mod:`agents.algos.pg`), :mod:`~agents.methods.hmarl.dagger` (the imitation
warm start), :mod:`~agents.methods.hmarl.checkpoint` (saving and loading actors), :mod:`~agents.methods.hmarl.run`
(a training run). This module re-exports their public names, the import path the CLI, the evaluation and the
checkpoints' README use.
"""

from __future__ import annotations

from gpusched_lab.agents.algos.pg import gae
from gpusched_lab.agents.methods.hmarl.checkpoint import (
    interference_folder,
    load,
    save_actor,
)
from gpusched_lab.agents.methods.hmarl.config import (
    CONFIG_DIR,
    CRITICS,
    HMARLArgs,
    HMARLConfig,
    ImitationArgs,
    apply_overrides,
    load_config,
)
from gpusched_lab.agents.methods.hmarl.dagger import (
    collect_dagger,
    fit_imitation,
    imitate,
)
from gpusched_lab.agents.methods.hmarl.mappo import (
    Trainer,
)
from gpusched_lab.agents.methods.hmarl.policy import (
    ENV_ID,
    INTERFERENCE_KEY,
    CentralCritic,
    HMARLActor,
    HMARLPolicy,
    LocalCritic,
    load_interference,
    make_env,
    network_config,
    obs_dims,
    run_episode,
    stack_agents,
    to_tensors,
)
from gpusched_lab.agents.methods.hmarl.run import (
    train,
    train_command,
)

__all__ = [
    "CONFIG_DIR",
    "CRITICS",
    "CentralCritic",
    "ENV_ID",
    "HMARLActor",
    "HMARLArgs",
    "HMARLConfig",
    "HMARLPolicy",
    "INTERFERENCE_KEY",
    "ImitationArgs",
    "LocalCritic",
    "Trainer",
    "apply_overrides",
    "collect_dagger",
    "fit_imitation",
    "gae",
    "imitate",
    "interference_folder",
    "load",
    "load_config",
    "load_interference",
    "make_env",
    "network_config",
    "obs_dims",
    "run_episode",
    "save_actor",
    "stack_agents",
    "to_tensors",
    "train",
    "train_command",
]
