"""Cluster simulator: topology, catalogue, throughput model, discrete-event engine and metrics (no gymnasium)."""

from gpusched_envs.sim.catalog import Catalog, default_catalog, load_catalog
from gpusched_envs.sim.engine import SimConfig, SimulationError, Simulator
from gpusched_envs.sim.throughput import IterationTime, predict_iteration_time
from gpusched_envs.sim.topology import Cluster, ClusterConfigError, build_cluster, list_presets, load_cluster
from gpusched_envs.sim.workload import JobSpec, Workload

__all__ = [
    "Catalog",
    "Cluster",
    "ClusterConfigError",
    "IterationTime",
    "JobSpec",
    "SimConfig",
    "SimulationError",
    "Simulator",
    "Workload",
    "build_cluster",
    "default_catalog",
    "list_presets",
    "load_catalog",
    "load_cluster",
    "predict_iteration_time",
]
