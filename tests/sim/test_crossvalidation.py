"""Cross-validation of the engine against an independent replay of the Philly trace (issue: foundation, item 8).

Setting: ``--cluster philly-vc --speed-model duration --policy fifo --placement consolidate`` on the jobs submitted
2017-10-01..2017-11-30. The reference below is a separate, minimal trace replayer written without the engine: each VC
is a pool of 8-GPU servers (quota from philly_vc_nodes.csv); jobs run exactly their traced duration; strict FIFO per
VC; placement rule "consolidate": a job of n <= 8 GPUs goes to the server of its VC with the fewest free GPUs that
still has n (lowest index on ties); a larger job takes whole free servers, lowest index first, 8 GPUs from each
until n are covered. Jobs of VCs without a quota, or larger than their VC, are dropped.
"""

from __future__ import annotations

import heapq
from collections import deque

import numpy as np
import pytest

from gpusched_envs.policies import make_policy
from gpusched_envs.sim import SimConfig, Simulator, load_cluster
from gpusched_envs.workloads import load_workload, philly_vc_nodes

SERVER_GPUS = 8


def reference_replay(submit, duration, gpus, vcs, quotas):
    """Returns finish times (nan for dropped jobs)."""
    free = {v: [SERVER_GPUS] * n for v, n in quotas.items()}
    queues = {v: deque() for v in quotas}
    finish = np.full(len(submit), np.nan)
    running: list[tuple[float, int, str, list[tuple[int, int]]]] = []
    i, n = 0, len(submit)
    while i < n or running:
        t = min(submit[i] if i < n else np.inf, running[0][0] if running else np.inf)
        touched = set()
        while i < n and submit[i] <= t:
            v = vcs[i]
            if v in quotas and gpus[i] <= SERVER_GPUS * quotas[v]:
                queues[v].append(i)
                touched.add(v)
            i += 1
        while running and running[0][0] <= t:
            _, _, v, alloc = heapq.heappop(running)
            for s, k in alloc:
                free[v][s] += k
            touched.add(v)
        for v in touched:
            servers = free[v]
            while queues[v]:
                j = queues[v][0]
                need = gpus[j]
                if need <= SERVER_GPUS:
                    fits = [(servers[s], s) for s in range(len(servers)) if servers[s] >= need]
                    if not fits:
                        break
                    alloc = [(min(fits)[1], need)]
                else:
                    whole = [s for s in range(len(servers)) if servers[s] == SERVER_GPUS]
                    if len(whole) * SERVER_GPUS < need:
                        break
                    alloc = []
                    for s in whole:
                        take = min(SERVER_GPUS, need)
                        alloc.append((s, take))
                        need -= take
                        if need == 0:
                            break
                queues[v].popleft()
                for s, k in alloc:
                    servers[s] -= k
                finish[j] = t + duration[j]
                heapq.heappush(running, (finish[j], j, v, alloc))
    return finish


def test_engine_agrees_with_an_independent_philly_replay():
    workload = load_workload("philly:start=2017-10-01,end=2017-11-30")
    quotas = philly_vc_nodes()
    vcs = [workload.vc_names[v] for v in workload.vc]
    finish = reference_replay(
        workload.submit_time, workload.duration, workload.num_gpus.tolist(), vcs, quotas
    )
    kept = ~np.isnan(finish)
    ref_jct = float(np.mean(finish[kept] - workload.submit_time[kept]))
    ref_makespan = float(np.max(finish[kept]) - workload.submit_time[kept].min())

    cluster = load_cluster("philly-vc")
    config = SimConfig(speed_model="duration", oversize="drop", seed=0)
    with pytest.warns(UserWarning, match="without a quota"):
        sim = Simulator(cluster, workload, config)
    metrics = sim.run(make_policy("fifo", "consolidate"))

    assert metrics["jobs"] == int(kept.sum())
    assert metrics["avg_jct"] == pytest.approx(ref_jct, rel=0.01)  # the bar
    assert metrics["makespan"] == pytest.approx(ref_makespan, rel=0.01)
    # and more: every job finishes at exactly the reference's time (a replay without queueing would be 0.9% off)
    np.testing.assert_array_equal(sim.finish_time[kept], finish[kept])
    # the light load the SPEC describes: little queueing against an average JCT of about 11,600 s
    assert 11_000 < metrics["avg_jct"] < 12_200
    assert metrics["avg_queueing_delay"] < 200
