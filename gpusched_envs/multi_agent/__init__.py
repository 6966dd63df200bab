"""PettingZoo multi-agent environments: ``multi_scheduler_v1`` (K schedulers sharing one cluster, HMARL).
``multi_scheduler_v0``, the previous version, refuses with an error naming ``multi_scheduler_v1``."""

from gpusched_envs.multi_agent import multi_scheduler_v0, multi_scheduler_v1

__all__ = ["multi_scheduler_v0", "multi_scheduler_v1"]
