"""PettingZoo multi-agent environments: ``multi_scheduler_v0`` (K schedulers sharing one cluster, HMARL)."""

from gpusched_envs.multi_agent import multi_scheduler_v0

__all__ = ["multi_scheduler_v0"]
