"""gpusched_envs: GPU-cluster scheduling simulator and reinforcement-learning environments.

``import gpusched_envs`` registers the Gymnasium ids (``gpusched/JobSelect-v1`` ...); the registration uses string
entry points, so it imports gymnasium only. The simulator lives in :mod:`gpusched_envs.sim`, workloads in
:mod:`gpusched_envs.workloads`, heuristics in :mod:`gpusched_envs.policies`, PettingZoo envs in
:mod:`gpusched_envs.multi_agent`.
"""

__version__ = "0.1.0"

try:  # registers the gymnasium ids (string entry points: imports gymnasium only)
    from gpusched_envs import envs as _envs  # noqa: F401
except ImportError:  # gymnasium missing: the simulator still works
    pass


class EnvFactory:
    """A picklable ``() -> env``: ``gym.make(env_id, **kwargs)`` after importing this package, so a subprocess
    worker started with ``spawn`` (SB3's ``SubprocVecEnv``, Gymnasium's ``AsyncVectorEnv``) finds the ids."""

    def __init__(self, env_id: str, kwargs: dict):
        self.env_id, self.kwargs = env_id, dict(kwargs)

    def __call__(self, overrides: dict | None = None):
        """The env; ``overrides`` (a mapping, e.g. RLlib's ``EnvContext``) replace entries of the kwargs."""
        import gymnasium as gym

        import gpusched_envs.envs  # noqa: F401  (registers the ids in this process)

        return gym.make(self.env_id, **{**self.kwargs, **dict(overrides or {})})

    def __repr__(self) -> str:
        args = "".join(f", {k}={v!r}" for k, v in self.kwargs.items())
        return f"make_env_fn({self.env_id!r}{args})"


def make_env_fn(env_id: str, **kwargs) -> EnvFactory:
    """A picklable factory of ``gym.make(env_id, **kwargs)`` for vector envs whose workers are new processes::

    SubprocVecEnv([make_env_fn("gpusched/JobSelect-v1", cluster="tiny") for _ in range(4)], start_method="spawn")
    """
    if not isinstance(env_id, str):
        raise TypeError(f"env_id must be a string, got {type(env_id).__name__}")
    return EnvFactory(env_id, kwargs)


__all__ = ["EnvFactory", "__version__", "make_env_fn"]
