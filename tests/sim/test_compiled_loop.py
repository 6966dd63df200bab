"""The compiled event loop of ``Simulator.run`` (``gpusched_envs.sim.loop_kernels``) against the Python engine it
stands in for: the same metrics, per-job arrays and Python-side state (queue, running jobs, per-server and per-link
job dicts in their order, the events left in the order they would be taken) bit for bit, on clusters with and without pools, fractional jobs, interference
off, the duration model and ``max_time``; batches of tied completions are ordered as the engine's sets order them."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from gpusched_envs.policies import make_policy
from gpusched_envs.policies.preemptive import Tiresias
from gpusched_envs.policies.schedulers import FIFO, SJF, QueuePolicy
from gpusched_envs.sim import SimConfig, Simulator, load_cluster
from gpusched_envs.sim import loop_kernels as lk
from gpusched_envs.sim.catalog import default_catalog
from gpusched_envs.sim.engine import FULL_GPU, SimulationError
from gpusched_envs.sim.workload import Workload
from gpusched_envs.workloads import load_workload


class _Plain:
    """A user policy wrapping a built-in one: runs through next_decision / start like any Python policy."""

    def __init__(self, policy):
        self.policy = policy

    def schedule(self, sim) -> None:
        self.policy.schedule(sim)


_ARRAYS = (
    "status", "done_work", "rate", "comm_fraction", "last_update", "first_start", "finish_time", "run_start",
    "attained", "allocated_time", "running_time", "comm_time", "preemptions", "needs_restart", "version",
    "demand_at_arrival", "_demand_at_finish", "gpu_free_milli", "gpu_job", "server_free", "on_network",
    "rack_crossing", "uplink_load", "nic_load",
)  # fmt: skip
_SCALARS = (
    "now", "_seq", "next_arrival", "events_processed", "decisions", "finished", "_demand", "_demand_integral",
    "_fragmentation_integral", "_utilisation_integral", "_allocated_now", "_last_integral_time", "_fragmented_now",
    "_free_total", "changed",
)  # fmt: skip


def _state(sim: Simulator) -> dict:
    out = {name: np.array(getattr(sim, name)) for name in _ARRAYS}
    out.update({name: getattr(sim, name) for name in _SCALARS})
    out["queue"] = list(sim.queue)
    out["running"] = list(sim.running)
    out["server_jobs"] = [list(d) for d in sim.server_jobs]
    out["nic_users"] = [list(d) for d in sim.nic_users]
    out["rack_crossers"] = [list(d) for d in sim.rack_crossers]
    out["gpu_sharers"] = {g: list(d) for g, d in sim.gpu_sharers.items()}
    out["job_gpus"] = [None if g is None else g.tolist() for g in sim.job_gpus]
    # the events left, in the order they would be taken (a batch's sequence numbers, which only order equal
    # times, may be dealt out in another order among events of different times)
    heap = sorted(sim._heap)
    out["heap"] = [(float(t), int(k), int(j), int(v)) for t, _, k, j, v in heap]
    return out


def _assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        x, y = a[key], b[key]
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), key
        elif isinstance(x, float) or isinstance(y, float):
            assert (math.isnan(x) and math.isnan(y)) or x == y, key
        else:
            assert x == y, key


def _both(cluster, workload, config, make):
    """(metrics, state) of the compiled run and of the Python run, and how many compiled loop calls there were."""
    out = []
    calls = []
    real = lk.run_queue

    def counted(*args):
        calls.append(1)
        return real(*args)

    for compiled in (True, False):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sim = Simulator(cluster, workload, config)
        policy = make() if compiled else _Plain(make())
        lk.run_queue = counted
        try:
            metrics = sim.run(policy)
        finally:
            lk.run_queue = real
        out.append((metrics, _state(sim)))
    return out, len(calls)


def _jobs(cluster, rng, n: int, fractional: bool, ties: bool, spacing: float = 30.0) -> Workload:
    names = default_catalog().model_names
    gpus = np.minimum(rng.choice([1, 1, 1, 2, 4, 8, 16], size=n), max(1, cluster.num_gpus // 2))
    milli = np.full(n, FULL_GPU)
    if fractional:
        small = (gpus == 1) & (rng.random(n) < 0.4)
        milli[small] = rng.choice([250, 500], size=int(small.sum()))
    if ties:  # identical jobs in pairs, submitted together: equal completion times in one refresh batch
        gpus[1::2] = gpus[0::2][: len(gpus[1::2])]
        milli[1::2] = milli[0::2][: len(milli[1::2])]
        duration = np.repeat(rng.choice([600.0, 1200.0, 3000.0], size=(n + 1) // 2), 2)[:n]
        submit = np.repeat(np.cumsum(rng.exponential(spacing, size=(n + 1) // 2)), 2)[:n]
        model = np.repeat(rng.integers(0, len(names), size=(n + 1) // 2), 2)[:n]
    else:
        duration = rng.uniform(100.0, 8000.0, size=n)
        submit = np.cumsum(rng.exponential(spacing, size=n))
        model = rng.integers(0, len(names), size=n)
    return Workload.from_columns(
        "random", submit, duration, gpus, model=model, gpu_milli=milli, model_names=tuple(names)
    )


POLICIES = {
    "fifo-closest": lambda: make_policy("fifo", "closest"),
    "fifo-consolidate": lambda: make_policy("fifo", "consolidate"),
    "fifo-backfill": lambda: make_policy("fifo-backfill", "closest"),
    "sjf": lambda: make_policy("sjf", "consolidate"),
    "queue": lambda: QueuePolicy(),
    "gandiva": lambda: make_policy("gandiva"),
    "fifo-pack": lambda: make_policy("fifo", "pack"),
    "srtf": lambda: make_policy("srtf", "closest"),
    "tiresias": lambda: make_policy("tiresias", "consolidate"),
    "las": lambda: make_policy("las", "pack"),
    "gittins": lambda: make_policy("gittins", "closest"),
    "las-no-restart-delay": lambda: make_policy("las", "closest"),
}


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize(
    "cluster,config,fractional",
    [
        ("hetero64", {}, True),
        ("congested-4x", {}, False),
        ("congested-nic", {}, False),
        ("openb", {"interference": False}, True),
        ("tiny", {"speed_model": "duration"}, False),
        ("hetero64", {"max_time": 4000.0}, True),
    ],
)
def test_compiled_run_equals_the_python_engine(policy, cluster, config, fractional):
    c = load_cluster(cluster)
    for seed in range(2):
        rng = np.random.default_rng(seed)
        w = _jobs(c, rng, 120, fractional, ties=seed == 1)
        if policy.endswith("no-restart-delay"):
            config = {**config, "restart_delay": 0.0}
        ((m1, s1), (m2, s2)), calls = _both(c, w, SimConfig(seed=seed, **config), POLICIES[policy])
        assert calls >= 1  # the compiled loop ran (the Python run never calls it)
        assert m1.keys() == m2.keys()
        for k in m1:
            assert m1[k] == m2[k] or (m1[k] != m1[k] and m2[k] != m2[k]), k
        _assert_same(s1, s2)


def test_ties_are_ordered_by_the_engine_and_pools_take_their_own_servers():
    """Philly's VCs (pools) and a tie-heavy workload: several batches of tied completions, each handed back to
    the engine for ordering (more than one compiled loop call), and the result equals the Python engine's."""
    from gpusched_envs.workloads import philly_vc_nodes  # noqa: F401  (the philly-vc cluster's pools)

    c = load_cluster("philly-vc")
    rng = np.random.default_rng(3)
    w = load_workload("philly:jobs=1500", seed=0)
    for make in (lambda: FIFO("consolidate"), lambda: make_policy("tiresias")):
        ((m1, s1), (m2, s2)), calls = _both(c, w, SimConfig(seed=0, oversize="drop"), make)
        assert all(m1[k] == m2[k] or m1[k] != m1[k] for k in m1)
        _assert_same(s1, s2)
    w = _jobs(load_cluster("hetero64"), rng, 300, fractional=False, ties=True, spacing=5.0)
    ((m1, s1), (m2, s2)), calls = _both(load_cluster("hetero64"), w, SimConfig(seed=0), lambda: SJF())
    assert calls > 1
    _assert_same(s1, s2)


def test_a_deadlock_in_the_compiled_loop_is_the_engines_error():
    """A job that can never be placed under strict FIFO on the duration model raises the same SimulationError."""
    c = load_cluster("tiny")
    w = Workload.from_columns("w", np.array([0.0, 1.0]), np.array([10.0, 10.0]), np.array([1, c.num_gpus]))
    messages = []
    for compiled in (True, False):
        sim = Simulator(c, w, SimConfig(seed=0))
        sim.job_gpus_n[1] = c.num_gpus + 1  # bigger than the cluster, past the bind-time check
        sim._n_list[1] = c.num_gpus + 1
        policy = FIFO() if compiled else _Plain(FIFO())
        with pytest.raises(SimulationError) as err:
            sim.run(policy)
        messages.append(str(err.value))
    assert messages[0] == messages[1] and "deadlock" in messages[0]


def test_the_compiled_loop_is_left_out_where_it_cannot_stand_in():
    """A subclass, an instance override, another placement, a progress hook or a used simulator take the Python
    path (the loop is not called)."""
    c = load_cluster("tiny")
    w = _jobs(c, np.random.default_rng(0), 20, fractional=False, ties=False)

    class Mine(FIFO):
        pass

    overridden = FIFO()
    overridden.key = lambda sim, job: -job
    assert Mine().compiled_spec() is None

    class MyTiresias(Tiresias):
        pass

    sim = Simulator(c, w, SimConfig(seed=0))
    mine = MyTiresias()
    mine.reset(sim)
    assert mine.compiled_spec() is None
    builtin = Tiresias("pack")
    builtin.reset(sim)
    assert builtin.compiled_spec()["priority"] == "level" and builtin.compiled_spec()["affinity"]
    assert overridden.compiled_spec() is None
    assert getattr(make_policy("tiresias"), "compiled_spec", lambda: None)() is None
    assert make_policy("fifo", "first-fit").compiled_spec() is None
    assert make_policy("fifo").compiled_spec() == {
        "backfill": False, "spread": True, "affinity": False, "order": "submit",
    }  # fmt: skip
    assert make_policy("sjf", "consolidate").compiled_spec() == {
        "backfill": True, "spread": False, "affinity": False, "order": "duration",
    }  # fmt: skip
    assert make_policy("gandiva").compiled_spec() == {
        "backfill": True, "spread": True, "affinity": True, "order": "submit",
    }  # fmt: skip
    real = lk.run_queue
    calls = []
    lk.run_queue = lambda *a: calls.append(1) or real(*a)
    try:
        sim = Simulator(c, w, SimConfig(seed=0))
        sim.on_progress = lambda s: None
        sim.run(FIFO())
        sim = Simulator(c, w, SimConfig(seed=0))
        sim.next_decision()
        sim.run(FIFO())
        sim = Simulator(c, w, SimConfig(seed=0))
        expected = Simulator(c, w, SimConfig(seed=0)).run(_Plain(FIFO()))
        assert not calls
        assert sim.run(FIFO()) == expected and calls
    finally:
        lk.run_queue = real
