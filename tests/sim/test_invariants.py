"""Simulator invariants over random small clusters, workloads and policies (hypothesis).

Checked at every decision point and at the end: a GPU never holds more than its capacity; the GPUs the simulator
thinks are allocated are exactly those held by running jobs; no job starts before it arrives; work done never
exceeds work asked; time never goes back; when a run drains, every arrived job has finished exactly once; the
metrics respect their lower bounds.
"""

from __future__ import annotations

import warnings

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpusched_envs.policies import PLACEMENTS, POLICIES, make_policy
from gpusched_envs.sim import SimConfig, Simulator
from gpusched_envs.sim.engine import DONE, DROPPED, FULL_GPU, RESTARTING, RUNNING
from gpusched_envs.sim.topology import build_cluster
from gpusched_envs.sim.workload import Workload
from tests.toy import toy_catalog

CATALOG = toy_catalog()


@st.composite
def clusters(draw):
    racks = []
    for _ in range(draw(st.integers(1, 3))):
        servers = [
            {
                "count": draw(st.integers(1, 2)),
                "gpus": draw(st.integers(1, 4)),
                "gpu_type": draw(st.sampled_from(["fast", "slow"])),
                "intra_link": "bus",
                "nic": draw(st.sampled_from(["nic", "laggy"])),
            }
            for _ in range(draw(st.integers(1, 2)))
        ]
        over = draw(st.sampled_from([1.0, 2.0, 4.0]))
        racks.append(
            {
                "count": 1,
                "oversubscription": over,
                "servers": servers,
                "pool": draw(st.sampled_from([None, "a", "b"])),
            }
        )
    if any(r["pool"] is not None for r in racks):  # a pooled cluster: every rack belongs to some VC
        for r in racks:
            r["pool"] = r["pool"] or "a"
    return build_cluster({"name": "random", "racks": racks}, CATALOG)


@st.composite
def scenarios(draw):
    cluster = draw(clusters())
    n = draw(st.integers(1, 25))
    gaps = draw(st.lists(st.floats(0, 200), min_size=n, max_size=n))
    durations = draw(st.lists(st.floats(1, 2000), min_size=n, max_size=n))
    gpus = draw(st.lists(st.integers(1, cluster.num_gpus), min_size=n, max_size=n))
    fractional = draw(st.lists(st.sampled_from([1000, 1000, 500, 250]), min_size=n, max_size=n))
    milli = [m if g == 1 else 1000 for m, g in zip(fractional, gpus, strict=True)]
    models = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    vcs = draw(st.lists(st.integers(-1, 2), min_size=n, max_size=n))  # VC "c" never has a pool
    workload = Workload.from_columns(
        "random",
        np.cumsum(gaps),
        durations,
        gpus,
        model=models,
        gpu_milli=milli,
        vc=vcs,
        vc_names=("a", "b", "c"),
        model_names=("additive", "overlapped"),
    )
    config = SimConfig(
        speed_model=draw(st.sampled_from(["throughput", "duration"])),
        interference=draw(st.booleans()),
        restart_delay=draw(st.sampled_from([0.0, 5.0])),
        seed=draw(st.integers(0, 3)),
        oversize="drop",  # on a pooled cluster a job may be larger than its VC
        max_time=draw(st.sampled_from([float("inf"), float("inf"), 1500.0])),
    )
    return (
        cluster,
        workload,
        config,
        draw(st.sampled_from(sorted(POLICIES))),
        draw(st.sampled_from(sorted(PLACEMENTS))),
    )


class Checked:
    """Wraps a policy and checks the invariants at every decision point."""

    def __init__(self, policy):
        self.policy = policy
        self.last_time = -np.inf

    def reset(self, sim):
        self.policy.reset(sim)

    def schedule(self, sim):
        check_state(sim)
        assert sim.now >= self.last_time, "time went back"
        self.last_time = sim.now
        self.policy.schedule(sim)
        check_state(sim)


def check_state(sim):
    used = np.zeros(sim.cluster.num_gpus, dtype=np.int64)
    for j in sim.running:
        assert sim.status[j] in (RUNNING, RESTARTING)
        used[sim.job_gpus[j]] += min(sim.job_milli[j], FULL_GPU)
        assert sim.first_start[j] >= sim.workload.submit_time[j], "started before arrival"
    assert (used <= FULL_GPU).all(), "a GPU holds more than its capacity"
    held = np.flatnonzero(sim.gpu_job >= 0)
    assert np.array_equal(sim.gpu_job >= 0, used > 0), "gpu_job out of step with the allocations"
    assert all(g in sim.job_gpus[j] for g, j in zip(held, sim.gpu_job[held], strict=True))
    assert np.array_equal(FULL_GPU - used, sim.gpu_free_milli), "free-GPU bookkeeping out of step"
    whole_free = np.bincount(sim.cluster.gpu_server[used == 0], minlength=sim.cluster.num_servers)
    assert np.array_equal(whole_free, sim.server_free)
    assert (sim.done_work <= sim.job_work * (1 + 1e-9)).all(), "work done exceeds work asked"


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_invariants_hold_on_random_runs(scenario):
    cluster, workload, config, policy_name, placement = scenario
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # jobs of VCs without a pool, or too large, are dropped
        sim = Simulator(cluster, workload, config)
    metrics = sim.run(Checked(make_policy(policy_name, placement)))
    check_state(sim)
    admitted = sim.status != DROPPED
    done = sim.status == DONE
    if cluster.pool_names:
        assert not admitted[workload.vc == 2].any() and not admitted[workload.vc < 0].any()
    # whatever finished: started after it arrived, finished after it started, did all its work, and only once
    assert (sim.first_start[done] >= workload.submit_time[done]).all()
    assert (sim.finish_time[done] >= sim.first_start[done]).all()
    assert np.allclose(sim.done_work[done], sim.job_work[done])
    assert metrics["jobs"] == int(done.sum()) and metrics["jobs"] + metrics["unfinished"] == int(
        admitted.sum()
    )
    if sim.now >= config.max_time:  # stopped at max_time: nothing finished later
        assert (sim.finish_time[done] <= config.max_time).all()
        return
    # drained: every admitted job finished
    assert sim.drained and (done == admitted).all()
    assert sim.gpu_free_milli.min() == FULL_GPU and not sim.running and not sim.queue
    if not done.any():
        return
    # the lower bounds hold
    assert metrics["avg_jct"] >= metrics["lower_bound_avg_jct"] * (1 - 1e-9)
    assert metrics["makespan"] >= metrics["lower_bound_makespan"] * (1 - 1e-9)
    assert 0.0 <= metrics["gpu_utilisation"] <= 1.0 + 1e-9
    assert 0.0 <= metrics["fragmentation"] <= 1.0 + 1e-9
    if config.speed_model == "duration" and metrics["preemptions"] == 0:
        # a job runs exactly its traced duration wherever it is placed
        assert np.allclose(sim.finish_time[done] - sim.first_start[done], workload.duration[done])


@settings(max_examples=15, deadline=None)
@given(scenarios())
def test_same_seed_same_run(scenario):
    cluster, workload, config, policy_name, placement = scenario
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        a = Simulator(cluster, workload, config).run(make_policy(policy_name, placement))
        b = Simulator(cluster, workload, config).run(make_policy(policy_name, placement))
    assert repr(a) == repr(b)
