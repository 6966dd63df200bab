"""The engine's and the placement rules' compiled loops against the numpy definitions they replace, bit for bit:
placement shapes and rates (``throughput.placement_shape`` / ``iteration_time_of_shape`` with the engine's link
loads, co-location slowdown and GPU sharing), and the GPUs ``consolidate`` / ``closest`` / ``pack`` /
``closest_in_rack`` pick, on random occupancies of several clusters."""

from __future__ import annotations

import numpy as np
import pytest

from gpusched_envs.policies import placement as pl
from gpusched_envs.sim import SimConfig, Simulator, load_cluster
from gpusched_envs.sim import engine_kernels as ek
from gpusched_envs.sim import throughput as tp
from gpusched_envs.sim.catalog import default_catalog
from gpusched_envs.sim.engine import FULL_GPU, RUNNING
from gpusched_envs.sim.topology import build_cluster
from gpusched_envs.sim.workload import Workload


def _azure():
    """Two racks of catalogue ND40rs_v2 servers (host-staged intra link, host overhead) and a V100 server."""
    doc = {
        "name": "az",
        "racks": [
            {"count": 2, "servers": [{"count": 2, "server_type": "ND40rs_v2"}]},
            {"servers": [{"gpus": 8, "gpu_type": "V100", "intra_link": "nvlink", "nic": "eth100"}]},
        ],
    }
    return build_cluster(doc, default_catalog(), where="az")


CLUSTERS = {
    "hetero64": lambda: load_cluster("hetero64"),
    "congested-4x": lambda: load_cluster("congested-4x"),
    "openb": lambda: load_cluster("openb"),
    "az": _azure,
}


def _random_jobs(cluster, rng, n: int, fractional: bool) -> Workload:
    """n jobs at t=0 of random models and sizes (some fractional when asked)."""
    names = default_catalog().model_names
    gpus = rng.choice([1, 1, 2, 3, 4, 8, 12, 16], size=n)
    gpus = np.minimum(gpus, cluster.num_gpus // 2)
    milli = np.full(n, FULL_GPU)
    if fractional:
        small = (gpus == 1) & (rng.random(n) < 0.5)
        milli[small] = rng.choice([250, 300, 500], size=int(small.sum()))
    return Workload.from_columns(
        "random",
        np.zeros(n),
        rng.uniform(100.0, 5000.0, size=n),
        gpus,
        model=rng.integers(0, len(names), size=n),
        gpu_milli=milli,
        model_names=tuple(names),
    )


def _fill(sim, rng, keep_free: float = 0.0) -> None:
    """Start the queued jobs on random free GPUs (any servers, so rings cross NICs and uplinks) while they fit,
    leaving about ``keep_free`` of the GPUs free."""
    assert sim.next_decision()
    for job in list(sim.queue):
        if sim.free_gpus() <= keep_free * sim.cluster.num_gpus:
            break
        free = np.flatnonzero(sim.free_mask(job))
        n = int(sim.job_gpus_n[job])
        if len(free) < n or rng.random() < 0.2:
            continue
        sim.start(job, np.sort(rng.choice(free, size=n, replace=False)))


def _expected_rate(sim, job: int) -> tuple[float, float]:
    """Rate and communication share of a running job by the numpy definitions (the engine before compilation)."""
    c, cat = sim.cluster, sim.cluster.catalog
    m = int(sim.job_model[job])
    gpus = sim.job_gpus[job]
    shape = tp.placement_shape(c, m, gpus)
    others = set()
    for s in shape.servers:
        others.update(sim.server_jobs[s])
    others.discard(job)
    sharers = set(sim.gpu_sharers.get(int(gpus[0]), ())) if sim.job_milli[job] < FULL_GPU else set()
    others -= sharers
    slowdown = 1.0
    if others:
        slowdown = sim._uniform_slowdown or float(
            cat.colocation_slowdown[m, sim.job_model[list(others)]].max()
        )
    share = 1.0
    sharers.discard(job)
    if sharers:
        share = float(
            cat.space_sharing_by_type[c.gpu_type[int(gpus[0])], m, sim.job_model[sorted(sharers)]].min()
        )
    if shape.num_gpus <= 1:
        return 1.0 / (shape.compute * slowdown / share), 0.0
    it = tp.iteration_time_of_shape(
        c, m, shape, None, slowdown, share, nic_load=sim.nic_load, uplink_load=sim.uplink_load
    )
    return 1.0 / it.total, it.communication_fraction


@pytest.mark.parametrize("name", sorted(CLUSTERS))
@pytest.mark.parametrize("seed", [0, 1])
def test_shapes_and_rates_equal_the_numpy_definitions(name, seed):
    cluster = CLUSTERS[name]()
    rng = np.random.default_rng(seed)
    sim = Simulator(cluster, _random_jobs(cluster, rng, 60, fractional=name == "openb"), SimConfig(seed=seed))
    _fill(sim, rng)
    running = [j for j in sim.running if sim.status[j] == RUNNING]
    assert len(running) >= 5
    crossing = 0
    for job in running:
        shape = tp.placement_shape(cluster, int(sim.job_model[job]), sim.job_gpus[job])
        assert sim._jf[ek.CMP, job] == shape.compute
        assert sim._jf[ek.BW, job] == shape.base_bandwidth
        assert sim._jf[ek.LAT, job] == shape.hop_latency
        assert sim._jf[ek.TRAF, job] == shape.traffic
        assert sim._job_servers[job] == list(shape.servers)
        assert sim._job_racks[job] == shape.racks.tolist()
        assert sim._shape[job].servers == shape.servers and sim._shape[job].traffic == shape.traffic
        rate, comm = _expected_rate(sim, job)
        assert sim.rate[job] == rate, (job, sim.rate[job], rate)
        assert sim.comm_fraction[job] == comm
        crossing += shape.crosses_racks
    if name != "openb":
        assert crossing > 0  # the loads of shared uplinks were exercised
    # and after some of them leave (their neighbours refreshed by the release)
    for job in running[::3]:
        sim.preempt(job)
    for job in sim.running:
        if sim.status[job] == RUNNING:
            assert (sim.rate[job], sim.comm_fraction[job]) == _expected_rate(sim, job)


def _occupied(cluster, rng, pools: bool):
    """A simulator with random whole- and shared-GPU jobs running and a queue of probes of every size."""
    if pools:
        from gpusched_envs.workloads import load_workload

        w = load_workload("philly:start=2017-10-01,jobs=400")
        workload = Workload.from_columns(  # the same jobs, all at t=0, in their VCs (pools)
            "pools", np.zeros(len(w)), w.duration, w.num_gpus, vc=w.vc, vc_names=w.vc_names
        )
        sim = Simulator(cluster, workload, SimConfig(seed=0, oversize="drop"))
        assert sim.allowed_masks and all(m is not None for m in sim.allowed_server_masks)
    else:
        sim = Simulator(cluster, _random_jobs(cluster, rng, 120, fractional=True), SimConfig(seed=0))
    _fill(sim, rng, keep_free=0.5)
    return sim


@pytest.mark.parametrize(
    "name,pools", [("hetero64", False), ("openb", False), ("congested-4x", False), ("philly-vc", True)]
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_placements_equal_the_numpy_definition(name, pools, seed):
    cluster = load_cluster(name)
    rng = np.random.default_rng(seed)
    sim = _occupied(cluster, rng, pools)
    probes = [j for j in sim.queue if sim.job_milli[j] >= FULL_GPU]
    assert probes
    compared = placed = 0
    for job in probes:
        for spread, affinity in ((False, False), (True, False), (True, True)):
            got = pl._topology_aware(sim, job, spread=spread, affinity=affinity)
            want = pl._whole_reference(sim, job, spread=spread, affinity=affinity)
            assert (got is None) == (want is None), (job, spread, affinity)
            if got is not None:
                assert got.tolist() == want.tolist(), (job, spread, affinity)
                placed += 1
            compared += 1
        rack = int(rng.integers(cluster.num_racks))
        within = cluster.gpu_rack == rack
        got = pl._topology_aware(sim, job, spread=True, affinity=False, within=within)
        want = pl._whole_reference(sim, job, spread=True, affinity=False, within=within)
        assert (None if got is None else got.tolist()) == (None if want is None else want.tolist())
    assert placed > 0 and compared >= 3 * len(probes)


@pytest.mark.parametrize(
    "name,pools", [("hetero64", False), ("openb", False), ("congested-4x", False), ("philly-vc", True)]
)
@pytest.mark.parametrize("seed", [0, 1])
def test_spread_equals_the_numpy_definition(name, pools, seed):
    """The compiled ``spread`` picks the GPUs of its numpy definition, whole and shared GPUs, free or not."""
    cluster = load_cluster(name)
    rng = np.random.default_rng(seed)
    sim = _occupied(cluster, rng, pools)
    placed = none = 0
    for job in list(sim.queue):
        got, want = pl.spread(sim, job), pl._spread_reference(sim, job)
        assert (None if got is None else got.tolist()) == (None if want is None else want.tolist()), job
        placed += got is not None
        none += got is None
    assert placed > 0
    # a full cluster: nothing to spread over
    sim.gpu_free_milli[:] = 0
    job = next(iter(sim.queue))
    assert pl.spread(sim, job) is None and pl._spread_reference(sim, job) is None


@pytest.mark.parametrize("name,pools", [("hetero64", False), ("philly-vc", True)])
def test_closest_in_rack_equals_the_numpy_definition(name, pools):
    """``closest_in_rack`` (its rack masks made once per cluster) places as the numpy rule inside that rack."""
    cluster = load_cluster(name)
    rng = np.random.default_rng(4)
    sim = _occupied(cluster, rng, pools)
    placed = 0
    for job in [j for j in sim.queue if sim.job_milli[j] >= FULL_GPU]:
        for rack in range(cluster.num_racks):
            got = pl.closest_in_rack(sim, job, rack)
            want = pl._whole_reference(sim, job, spread=True, affinity=False, within=cluster.gpu_rack == rack)
            assert (None if got is None else got.tolist()) == (None if want is None else want.tolist())
            placed += got is not None
            if got is not None:
                assert (cluster.gpu_rack[got] == rack).all()
    assert placed > 0
    assert pl.closest_in_rack(sim, 0, -1) is None and pl.closest_in_rack(sim, 0, cluster.num_racks) is None


def test_spread_hand_values():
    """tiny: servers 0-3 of 4 GPUs (ids 4s..4s+3), racks {0, 1} and {2, 3}. Free GPUs are dealt by slot in their
    server, then the server's rank in its rack, then rack: 0, 8, 4, 12, 1, 9, ..."""
    cluster = load_cluster("tiny")
    workload = Workload.from_columns("w", np.zeros(3), np.full(3, 100.0), np.array([3, 5, 5]))
    sim = Simulator(cluster, workload, SimConfig())
    sim.next_decision()
    assert pl.spread(sim, 0).tolist() == [0, 4, 8]
    assert pl.spread(sim, 1).tolist() == [0, 1, 4, 8, 12]
    sim.gpu_free_milli[0] = 0  # GPU 0 taken: server 0's first free GPU is 1
    assert pl.spread(sim, 1).tolist() == [1, 2, 4, 8, 12]
    sim.gpu_free_milli[4:8] = 0  # server 1 full: rack 0 has one server left
    assert pl.spread(sim, 1).tolist() == [1, 2, 8, 9, 12]
    for job in (0, 1):
        assert pl.spread(sim, job).tolist() == pl._spread_reference(sim, job).tolist()


def test_placement_with_a_mask_that_splits_a_server_takes_the_gpu_scan():
    """A GPU mask that allows part of a server (not a pool or type mask) goes through the per-GPU loop."""
    cluster = load_cluster("hetero64")
    rng = np.random.default_rng(3)
    sim = _occupied(cluster, rng, pools=False)
    job = next(j for j in sim.queue if sim.job_milli[j] >= FULL_GPU)
    within = np.zeros(cluster.num_gpus, dtype=bool)
    within[::2] = True
    assert pl._server_mask(sim, job, within) is None
    got = pl._topology_aware(sim, job, spread=True, affinity=False, within=within)
    want = pl._whole_reference(sim, job, spread=True, affinity=False, within=within)
    assert (None if got is None else got.tolist()) == (None if want is None else want.tolist())


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_a_copied_simulator_keeps_its_arrays_linked_and_runs_the_same(how):
    """Pickled (a bit-for-bit training resume pickles its envs) or deep-copied mid-run, a simulator's public
    arrays stay the rows of its packed state, and the copy finishes exactly as the original does."""
    import copy
    import pickle

    from gpusched_envs.policies import make_policy
    from gpusched_envs.sim.engine import _ROW_VIEWS

    cluster = load_cluster("hetero64")
    sim = Simulator(cluster, _random_jobs(cluster, np.random.default_rng(5), 80, False), SimConfig(seed=0))
    policy = make_policy("tiresias")
    policy.reset(sim)
    for _ in range(30):
        assert sim.next_decision()
        policy.schedule(sim)
    twin = pickle.loads(pickle.dumps(sim)) if how == "pickle" else copy.deepcopy(sim)
    for name, (packed, row) in _ROW_VIEWS.items():
        view = getattr(twin, name)
        assert np.shares_memory(view, getattr(twin, packed)) and view is not getattr(sim, name), name
        assert np.array_equal(view, getattr(twin, packed)[row], equal_nan=True), name
    twin_policy = copy.deepcopy(policy)
    while sim.next_decision():
        policy.schedule(sim)
    while twin.next_decision():
        twin_policy.schedule(twin)
    assert sim.finish_time.tobytes() == twin.finish_time.tobytes()
    assert {k: repr(v) for k, v in sim.metrics().items()} == {k: repr(v) for k, v in twin.metrics().items()}


@pytest.mark.parametrize("name", sorted(CLUSTERS))
@pytest.mark.parametrize("fractional", [False, True])
def test_server_job_counts_equal_the_engine_dicts(name, fractional):
    """The compiled count of jobs per server (the encoders' ``jobs`` column) is ``len(sim.server_jobs[s])`` through
    starts, completions and preemptions, shared GPUs included."""
    from gpusched_envs.sim import kernels as kn

    cluster = CLUSTERS[name]()
    rng = np.random.default_rng(7)
    sim = Simulator(cluster, _random_jobs(cluster, rng, 60, fractional), SimConfig(seed=0))
    _fill(sim, rng)
    checked = shared = 0
    for _ in range(40):
        counts = [kn.server_job_count(s, sim._gi, sim._si, sim._ji) for s in range(cluster.num_servers)]
        assert counts == [len(d) for d in sim.server_jobs]
        checked += sum(counts)
        running = list(sim.running)
        if running and rng.random() < 0.3:
            sim.preempt(running[int(rng.integers(len(running)))])
        if not sim.next_decision():
            break
        for job in list(sim.queue):
            free = np.flatnonzero(sim.free_mask(job))
            n = int(sim.job_gpus_n[job])
            if len(free) < n or rng.random() < 0.3:
                continue
            if sim.job_milli[job] < FULL_GPU:  # best fit: onto a GPU already shared where one has room
                sim.start(job, free[np.argmin(sim.gpu_free_milli[free])][None])
                shared = max(shared, max(map(len, sim.gpu_sharers.values()), default=0))
            else:
                sim.start(job, np.sort(rng.choice(free, size=n, replace=False)))
    assert checked > 0
    assert shared >= (2 if fractional else 0)  # shared GPUs were counted


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_a_copied_simulator_runs_the_kernels_compiled_for_the_original(how):
    """A copy's cluster arrays (and its empty overhead table) are read-only like the original's, so the compiled
    event loop is not compiled a second time for writable arrays."""
    import copy
    import pickle

    from gpusched_envs.policies import make_policy
    from gpusched_envs.sim import loop_kernels as lk
    from gpusched_envs.workloads import load_workload

    cluster = load_cluster("hetero64")
    jobs = load_workload("synthetic:jobs=30,load=1.0,gpus=64,max_gpus=4", seed=0)
    first = Simulator(cluster, jobs, SimConfig(seed=0))
    expected = first.run(make_policy("fifo", "closest"))
    before = len(lk.run_queue.signatures)
    fresh = Simulator(cluster, jobs, SimConfig(seed=0))
    twin = copy.deepcopy(fresh) if how == "deepcopy" else pickle.loads(pickle.dumps(fresh))
    assert twin.cluster is not cluster
    assert not twin.cluster.gpu_server.flags.writeable and not twin._overhead.flags.writeable
    assert twin.run(make_policy("fifo", "closest")) == expected
    assert len(lk.run_queue.signatures) == before
