"""Glue for RL libraries that do not take the suite's envs as they are.

- :mod:`gpusched_envs.integrations.common`: a picklable env factory that registers the ids in the process that
  calls it (for worker processes), and a PettingZoo wrapper with a fixed per-agent info.
- :mod:`gpusched_envs.integrations.rllib`: RLlib env creators (single- and multi-agent, the action-masking layout
  ``{"observations", "action_mask"}``) and a ``PPOConfig`` with the action-masking RLModule.
- :mod:`gpusched_envs.integrations.torchrl`: TorchRL envs with specs and the ``ActionMask`` transform (batched
  too), the multi-agent env through ``PettingZooWrapper``.
- :mod:`gpusched_envs.integrations.baselines`: the heuristics, a random masked policy and FIFO with backfilling on
  the episodes a learnt policy plays, for the comparison the examples print.

The library modules import ray / torchrl inside their functions only; a missing library raises one
:class:`ImportError` naming the ``integrations`` extra.
"""
