"""multi_scheduler_v1's compiled candidates (``candidate_kernels.joint_candidates``) against the Python path that
asks each placement rule in turn: the same head jobs, placements, duplicates, masks and candidate features, bit for
bit, on a hand-built cluster with known answers and at every state of random episodes on several clusters (GPU
types, pools, fractional GPUs, host-staged links and host overhead, both speed models, several heads, preemption)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpusched_envs.multi_agent import candidate_kernels as ck
from gpusched_envs.multi_agent import multi_scheduler_v1
from gpusched_envs.sim import throughput as tp
from gpusched_envs.sim.catalog import default_catalog
from gpusched_envs.sim.engine import FULL_GPU
from gpusched_envs.sim.topology import build_cluster
from gpusched_envs.sim.workload import Workload


def _cluster(doc):
    return build_cluster(doc, default_catalog(), where=doc["name"])


def _square():
    """Two racks of two servers of 4 V100s: GPUs 0-3 and 4-7 in rack 0, 8-11 and 12-15 in rack 1."""
    server = {"count": 2, "gpus": 4, "gpu_type": "V100", "intra_link": "nvlink", "nic": "eth100"}
    return _cluster({"name": "square", "racks": [{"count": 2, "servers": [server]}]})


def _azure():
    """Two racks of catalogue ND40rs_v2 servers (host-staged intra link, host overhead) and a rack of a V100 and a
    T4 server."""
    return _cluster(
        {
            "name": "az",
            "racks": [
                {"count": 2, "servers": [{"count": 2, "server_type": "ND40rs_v2"}]},
                {
                    "servers": [
                        {"gpus": 8, "gpu_type": "V100", "intra_link": "nvlink", "nic": "eth100"},
                        {"gpus": 4, "gpu_type": "T4", "intra_link": "pcie3", "nic": "eth25"},
                    ]
                },
            ],
        }
    )


def _pooled():
    """Two pools ("a": two racks, "b": one rack) of 4-GPU servers."""
    server = {"count": 2, "gpus": 4, "gpu_type": "V100", "intra_link": "nvlink", "nic": "eth100"}
    return _cluster(
        {
            "name": "pooled",
            "racks": [
                {"count": 2, "pool": "a", "servers": [server]},
                {"count": 1, "pool": "b", "servers": [server]},
            ],
        }
    )


def _jobs(rng, n: int, max_gpus: int, *, fractional=False, types=(), vcs=()) -> Workload:
    """n jobs arriving over 3,000 s, random models and sizes; some fractional, constrained to a GPU type or in a VC
    when asked."""
    names = default_catalog().model_names
    gpus = np.minimum(rng.choice([1, 1, 1, 2, 2, 3, 4, 6, 8, 12], size=n), max_gpus)
    milli = np.full(n, FULL_GPU)
    if fractional:
        small = (gpus == 1) & (rng.random(n) < 0.5)
        milli[small] = rng.choice([250, 300, 500], size=int(small.sum()))
    return Workload.from_columns(
        "random",
        np.sort(rng.uniform(0.0, 3000.0, size=n)),
        rng.uniform(200.0, 4000.0, size=n),
        gpus,
        model=rng.integers(0, len(names), size=n),
        gpu_milli=milli,
        gpu_type=rng.integers(-1, len(types), size=n) if types else None,
        gpu_type_names=tuple(types),
        vc=rng.integers(0, len(vcs), size=n) if vcs else None,
        vc_names=tuple(vcs),
        model_names=tuple(names),
    )


def _snapshot(env) -> dict:
    return {
        "heads": env._head_jobs.copy(),
        "window": env._window_jobs.copy(),
        "queued": env._queued_n.copy(),
        "masks": env._masks.copy(),
        "same_as": env._same_as.copy(),
        "features": env._candidate_buf.tobytes(),  # bit for bit (NaN included)
        "coordination": env._coordination_buf.tobytes(),
        "placements": [
            [None if g is None else g.tolist() for g in env.candidate_placements(a)]
            for a in env.possible_agents
        ],
    }


def _assert_paths_agree(env) -> dict:
    """The compiled and the Python candidates at the env's current state are the same; returns them."""
    env._compute_candidates(compiled=False)
    python = _snapshot(env)
    env._compute_candidates(compiled=True)
    compiled = _snapshot(env)
    for key, value in python.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(compiled[key], value, err_msg=key)
        else:
            assert compiled[key] == value, key
    return compiled


def _random_episode(env, seed: int, steps: int) -> tuple[int, int]:
    """Random valid actions for ``steps`` joint steps (resetting when an episode ends), checking both paths at
    every state; returns (states checked, valid candidates seen)."""
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    states = valid = 0
    for _ in range(steps):
        snap = _assert_paths_agree(env)
        states += 1
        valid += int(snap["masks"][:, : env.num_choices].sum())
        obs, *_ = env.step({a: int(rng.choice(np.flatnonzero(o["action_mask"]))) for a, o in obs.items()})
        if not env.agents:
            obs, _ = env.reset()
    return states, valid


def test_known_candidates_on_a_hand_built_cluster():
    cluster = _square()
    names = default_catalog().model_names
    work = Workload.from_columns(
        "four", np.zeros(4), np.full(4, 1e5), [2, 1, 2, 12], model=[0, 0, 1, 0], model_names=tuple(names)
    )
    env = multi_scheduler_v1.parallel_env(num_agents=1, cluster=cluster, workload=work, routing="round_robin")
    env.reset(seed=0)
    assert env.compiled_candidates
    sim = env.sim
    sim.start(0, np.array([0, 1]))  # a 2-GPU job on server 0
    sim.start(1, np.array([8]))  # a 1-GPU job on server 2
    snap = _assert_paths_agree(env)
    assert env.head_job("scheduler_0") == 2
    # closest / consolidate / first-fit / pack (a server with a job of the same size) / rack-0: the best-fit
    # server 0's two free GPUs; spread: one GPU in each rack; rack-1: the best fit in rack 1 (server 2)
    assert snap["placements"][0] == [[2, 3], None, None, None, [2, 9], None, [9, 10]]
    assert snap["same_as"][0].tolist() == [0, 0, 0, 0, 4, 0, 6]
    assert snap["masks"][0].tolist() == [True, False, False, False, True, False, True, True]
    feats = env._candidate_buf[0]
    m = int(sim.job_model[2])
    for a, gpus, servers, racks, colocated in (
        (0, [2, 3], 1, 1, 1),
        (4, [2, 9], 2, 2, 2),
        (6, [9, 10], 1, 1, 1),
    ):
        shape = tp.placement_shape(cluster, m, np.array(gpus))
        uplinks = sim.rack_crossing + 1 if shape.crosses_racks else None
        total = tp.iteration_time_of_shape(cluster, m, shape, uplinks).total
        expected = [1.0, servers / 4, racks / 2, np.log(total / sim.job_ideal_iter[2]), np.log1p(colocated)]
        assert feats[a].tolist() == np.array(expected, dtype=np.float32).tolist(), a
    assert not feats[[1, 2, 3, 5]].any()
    # the 12-GPU job is the head once job 2 runs; 11 GPUs are free: no candidate, only waiting
    sim.start(2, np.array([2, 3]))
    snap = _assert_paths_agree(env)
    assert env.head_job("scheduler_0") == 3
    assert snap["masks"][0].tolist() == [False] * 7 + [True]
    assert snap["placements"][0] == [None] * 7


def test_a_fractional_head_on_a_hand_built_cluster():
    cluster = _square()
    names = default_catalog().model_names
    work = Workload.from_columns(
        "shared",
        np.zeros(3),
        np.full(3, 1e5),
        [1, 1, 1],
        model=[0, 0, 0],
        gpu_milli=[500, 300, 400],
        model_names=tuple(names),
    )
    env = multi_scheduler_v1.parallel_env(num_agents=1, cluster=cluster, workload=work)
    env.reset(seed=0)
    sim = env.sim
    sim.start(0, np.array([5]))  # 500 left on GPU 5
    sim.start(1, np.array([12]))  # 700 left on GPU 12
    snap = _assert_paths_agree(env)
    # the least share left (GPU 5) for the topology-aware rules, GPU 0 for first-fit and spread, GPU 12 in rack 1
    assert snap["placements"][0] == [[5], None, [0], None, None, None, [12]]
    assert snap["same_as"][0].tolist() == [0, 0, 2, 0, 2, 0, 6]
    assert env._candidate_buf[0, 0, 4] == np.float32(np.log1p(1))


@pytest.mark.parametrize(
    "name, kwargs",
    [
        ("hetero64", dict(num_agents=4, cluster="hetero64", num_jobs=150)),
        ("congested", dict(num_agents=3, cluster="congested-4x", num_jobs=120, load=2.0)),
        ("tiny-heads", dict(num_agents=2, cluster="tiny", num_jobs=60, heads=3, queue_order="las", load=1.5)),
        (
            "preempt",
            dict(num_agents=3, cluster="hetero64", num_jobs=120, preempt=2, coordination=True, load=1.5),
        ),
        ("duration", dict(num_agents=2, cluster="hetero64", num_jobs=80, speed_model="duration")),
    ],
)
def test_compiled_candidates_equal_the_python_path(name, kwargs):
    env = multi_scheduler_v1.parallel_env(**kwargs)
    assert env.compiled_candidates
    states, valid = _random_episode(env, 0, 150)
    assert valid > states  # candidates were offered, not only waits


@pytest.mark.parametrize("seed", [0, 1])
def test_compiled_candidates_on_types_fractions_and_host_staged_links(seed):
    rng = np.random.default_rng(seed)
    cluster = _azure()
    work = _jobs(rng, 120, 12, fractional=True, types=("V100", "V100|T4"))
    env = multi_scheduler_v1.parallel_env(
        num_agents=3, cluster=cluster, workload=work, routing="round_robin", heads=2, load=1.5
    )
    assert cluster.server_intra_shared is not None and cluster.server_compute_overhead is not None
    states, valid = _random_episode(env, seed, 200)
    assert valid > states
    assert len(env.sim.allowed_masks) == 2 and (env.sim.job_milli < FULL_GPU).any()


def test_compiled_candidates_on_pools():
    rng = np.random.default_rng(3)
    work = _jobs(rng, 100, 8, vcs=("a", "b"))
    env = multi_scheduler_v1.parallel_env(cluster=_pooled(), workload=work)
    assert env.possible_agents == ["scheduler_0", "scheduler_1"]
    states, valid = _random_episode(env, 3, 150)
    assert valid > states


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**16), frac=st.booleans(), heads=st.integers(1, 3))
def test_compiled_candidates_on_random_states(seed, frac, heads):
    rng = np.random.default_rng(seed)
    cluster = _square()
    work = _jobs(rng, 40, 8, fractional=frac, types=("V100",) if seed % 2 else ())
    env = multi_scheduler_v1.parallel_env(
        num_agents=2, cluster=cluster, workload=work, routing="round_robin", heads=heads, load=2.0
    )
    _random_episode(env, seed, 25)


def test_fifo_windows_are_the_oldest_jobs_of_each_agent():
    owner = np.array([0, 1, 0, 0, 1, 0, 0], dtype=np.int64)
    queued = np.array([6, 3, 0, 4, 5, 2], dtype=np.int64)  # the queue's order is not the jobs' order
    jobs = np.empty((3, 3), dtype=np.int64)
    counts = np.empty(3, dtype=np.int64)
    ck.fifo_windows(queued, owner, 3, jobs, counts)
    assert jobs.tolist() == [[0, 2, 3], [4, -1, -1], [-1, -1, -1]]
    assert counts.tolist() == [5, 1, 0]


def test_head_jobs_the_kernel_leaves_take_the_python_path():
    """A head job the kernel does not cover (a whole-GPU job asking for no GPU in its job table: the placement
    rules' numpy definition decides) gets its candidates from the Python path."""
    env = multi_scheduler_v1.parallel_env(num_agents=3, cluster="hetero64", num_jobs=80, load=1.5)
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=0)
    env._kernel_args[0][ck.J_GPUS] = 0  # the kernel's job table (the simulator still knows the sizes)
    valid = 0
    for _ in range(40):
        snap = _assert_paths_agree(env)
        valid += int(snap["masks"][:, : env.num_choices].sum())
        obs, *_ = env.step({a: int(rng.choice(np.flatnonzero(o["action_mask"]))) for a, o in obs.items()})
    assert valid > 40
