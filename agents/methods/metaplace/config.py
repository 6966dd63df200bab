"""MetaPlace's arguments (:class:`MetaArgs`): the task set, the network, the inner (adaptation) and outer
(meta-training) learners, the performance model and the exploration bonus."""

from __future__ import annotations

from dataclasses import asdict, dataclass

POLICY_FILE, VALUE_FILE, PERF_FILE, META_FILE = "model.pt", "value.pt", "perf_model.pt", "meta.json"
"""The files of a MetaPlace checkpoint folder: policy, value network, performance model, metadata."""


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
