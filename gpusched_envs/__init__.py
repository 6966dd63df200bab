"""gpusched_envs: GPU-cluster scheduling simulator and reinforcement-learning environments.

``import gpusched_envs`` registers the Gymnasium ids (``gpusched/JobSelect-v0`` ...); the registration uses string
entry points, so it imports gymnasium only. The simulator lives in :mod:`gpusched_envs.sim`, workloads in
:mod:`gpusched_envs.workloads`, heuristics in :mod:`gpusched_envs.policies`, PettingZoo envs in
:mod:`gpusched_envs.multi_agent`.
"""

__version__ = "0.1.0"

try:  # registers the gymnasium ids (string entry points: imports gymnasium only)
    from gpusched_envs import envs as _envs  # noqa: F401
except ImportError:  # gymnasium missing: the simulator still works
    pass
