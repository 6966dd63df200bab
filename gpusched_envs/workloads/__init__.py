"""Workloads: trace loaders, windows, synthetic generators and named specs.

``load_workload("philly:start=2017-10-01,end=2017-11-30", seed=0)`` is the usual entry point; see
:mod:`gpusched_envs.workloads.registry` for the spec grammar and :func:`list_workloads` for the names.
DAG workloads live in :mod:`gpusched_envs.workloads.dag`.
"""

from .describe import describe
from .errors import WorkloadError
from .helios import load_helios
from .openb import load_openb, openb_nodes
from .pai2020 import load_pai2020, pai2020_machines
from .philly import load_philly, philly_machines, philly_vc_nodes
from .registry import list_workloads, load_workload, parse_spec
from .select import scale_arrivals, scale_to_load, select
from .sia import load_sia
from .synthetic import generate_synthetic, load_fit

__all__ = [
    "WorkloadError",
    "describe",
    "generate_synthetic",
    "list_workloads",
    "load_fit",
    "load_helios",
    "load_openb",
    "load_pai2020",
    "load_philly",
    "load_sia",
    "load_workload",
    "openb_nodes",
    "pai2020_machines",
    "parse_spec",
    "philly_machines",
    "philly_vc_nodes",
    "scale_arrivals",
    "scale_to_load",
    "select",
]
