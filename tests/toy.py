"""Shared test helpers: a tiny hand-built catalogue and cluster whose numbers are easy to compute by hand."""

from __future__ import annotations

import numpy as np

from gpusched_envs.sim.catalog import parse_catalog
from gpusched_envs.sim.topology import build_cluster
from gpusched_envs.sim.workload import Workload

GB = 1e9

TOY_CATALOG = {
    "reference_gpu": "fast",
    "gpu_types": {"fast": {"memory_gb": 16}, "slow": {"memory_gb": 16}},
    "links": {
        "bus": {"bandwidth_gbytes_per_s": 100.0, "latency_s": 0.0},
        "nic": {"bandwidth_gbytes_per_s": 10.0, "latency_s": 0.0},
        "laggy": {"bandwidth_gbytes_per_s": 10.0, "latency_s": 0.001},
    },
    "models": {
        # gamma = 1: iteration = compute + communication, easy to check by hand
        "additive": {
            "gradient_bytes": 1e9,
            "overlap_gamma": 1.0,
            "iteration_time_s": {"fast": 0.1, "slow": 0.3},
        },
        "overlapped": {
            "gradient_bytes": 1e9,
            "overlap_gamma": 2.0,
            "iteration_time_s": {"fast": 0.1, "slow": 0.3},
        },
    },
    "interference": {
        "default_server_slowdown": 1.5,
        "default_gpu_share_fraction": 0.6,
    },
}

# 2 racks x 2 servers x 4 GPUs; rack uplink 5 GB/s (half of one NIC)
TOY_CLUSTER = {
    "name": "toy",
    "racks": [
        {
            "count": 2,
            "uplink_gbytes_per_s": 5.0,
            "servers": [{"count": 2, "gpus": 4, "gpu_type": "fast", "intra_link": "bus", "nic": "nic"}],
        }
    ],
}


def toy_catalog():
    return parse_catalog(TOY_CATALOG, "toy-catalog")


def toy_cluster():
    return build_cluster(TOY_CLUSTER, toy_catalog(), where="toy")


def one_rack(catalog, *servers: tuple[int, str], name: str = "one-rack"):
    """A one-rack cluster of the toy catalogue, one server per ``(gpus, gpu_type)`` in order (bus inside, nic out)."""
    doc = {
        "name": name,
        "racks": [
            {"servers": [{"gpus": g, "gpu_type": t, "intra_link": "bus", "nic": "nic"} for g, t in servers]}
        ],
    }
    return build_cluster(doc, catalog)


def make_workload(rows, model_names=("additive",), name="hand"):
    """rows: (submit, duration, gpus[, model index[, milli]])."""
    rows = [tuple(r) + (0, 1000)[len(r) - 3 :] for r in rows]
    submit, duration, gpus, model, milli = (np.array(c) for c in zip(*rows, strict=True))
    return Workload.from_columns(
        name, submit, duration, gpus, model=model, gpu_milli=milli, model_names=model_names
    )


def play_marl(env, seed, policy):
    """One episode of a multi_scheduler_v1 parallel env with ``policy(env, observations)``; its global metrics."""
    obs, _ = env.reset(seed=seed)
    infos = {}
    while env.agents:
        obs, _, _, _, infos = env.step(policy(env, obs))
    return infos[env.possible_agents[0]]["metrics"]


def tiny_dag():
    """The 4-task DAG of the DAG evaluator's hand-computed cases: 0 -> 1 (100 B), 0 -> 2 (200 B), 1 -> 3 (50 B),
    2 -> 3 (0 B); work 2, 3, 4, 1 reference seconds."""
    from gpusched_envs.workloads.dag import DAG

    return DAG(
        work=np.array([2.0, 3.0, 4.0, 1.0]),
        edges=np.array([[0, 1], [0, 2], [1, 3], [2, 3]]),
        edge_bytes=np.array([100.0, 200.0, 50.0, 0.0]),
        name="tiny",
    )
