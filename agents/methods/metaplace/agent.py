"""MetaPlace (Yang, Bao et al., IEEE TCC 2023): a worker-placement policy meta-trained across workload variations of
``WorkerPlacement-v1`` so that it adapts to a new (or drifting) workload in a few episodes, exploring where its
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

Modules by job: :mod:`~agents.methods.metaplace.config` (:class:`MetaArgs`), :mod:`~agents.methods.metaplace.policy`
(the policy, its env and episodes), :mod:`~agents.methods.metaplace.adaptation` (the inner learner),
:mod:`~agents.methods.metaplace.meta_train` (warm start and the outer loop), :mod:`~agents.methods.metaplace.checkpoint`
(saving and loading), :mod:`~agents.methods.metaplace.perf_model` (the performance model). This module re-exports
their names, the import path the evaluation and the CLI use.
"""

from __future__ import annotations

from gpusched_lab.agents.methods.metaplace.adaptation import (
    adapt,
    mean_kl,
    pg_loss,
    pg_step,
)
from gpusched_lab.agents.methods.metaplace.checkpoint import (
    META_FILE,
    PERF_FILE,
    POLICY_FILE,
    VALUE_FILE,
    load_meta,
    policy_state,
    save_meta,
)
from gpusched_lab.agents.methods.metaplace.config import (
    MetaArgs,
)
from gpusched_lab.agents.methods.metaplace.meta_train import (
    HeuristicExpert,
    fomaml_update,
    imitation,
    meta_train,
    perf_note,
    reptile_update,
)
from gpusched_lab.agents.methods.metaplace.perf_model import PerformanceModel
from gpusched_lab.agents.methods.metaplace.policy import (
    ENV_ID,
    Episode,
    PlacementPolicy,
    make_env,
    make_policy,
    model_slowdown,
    new_perf_model,
    policy_logp,
    rollout,
)

__all__ = [
    "ENV_ID",
    "Episode",
    "HeuristicExpert",
    "META_FILE",
    "MetaArgs",
    "PERF_FILE",
    "POLICY_FILE",
    "PerformanceModel",
    "PlacementPolicy",
    "VALUE_FILE",
    "adapt",
    "fomaml_update",
    "imitation",
    "load_meta",
    "make_env",
    "make_policy",
    "mean_kl",
    "meta_train",
    "model_slowdown",
    "new_perf_model",
    "perf_note",
    "pg_loss",
    "pg_step",
    "policy_logp",
    "policy_state",
    "reptile_update",
    "rollout",
    "save_meta",
]
