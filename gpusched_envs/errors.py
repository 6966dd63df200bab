"""The exceptions that mean "bad input" (printed as one line by the CLI, never as a traceback)."""

from __future__ import annotations

from gpusched_envs.sim.catalog import CatalogError
from gpusched_envs.sim.engine import SimulationError
from gpusched_envs.sim.topology import ClusterConfigError

USER_ERRORS: tuple[type[BaseException], ...] = (
    CatalogError,
    ClusterConfigError,
    SimulationError,
    ValueError,
    KeyError,
    OSError,
    EOFError,
)

__all__ = ["USER_ERRORS", "CatalogError", "ClusterConfigError", "SimulationError"]
