"""The compiled observation writers equal the numpy expressions they replace, bit for bit: every dynamic column of
the cluster and job blocks (both information settings, the running rows of JobSelect's preemption, the image), on
states reached by random valid actions."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

import gpusched_envs.envs  # noqa: F401
from gpusched_envs.envs.encoding import CLAIRVOYANT, JOB_FEATURES, gpu_remaining_time


def reference_cluster(enc, sim, free_gpus, in_placement, queued_beyond):
    """(gpu, server, rack, cluster, image or None) as numpy writes them."""
    G, S, R = enc.G, enc.S, enc.R
    gpu, server, rack = enc.gpu.copy(), enc.server.copy(), enc.rack.copy()
    if enc.information == CLAIRVOYANT:
        seconds = gpu_remaining_time(sim, np.zeros(G))
    else:
        seconds = np.where(sim.gpu_job >= 0, sim.now - sim.run_start[np.maximum(sim.gpu_job, 0)], 0.0)
    gpu[:G, 1] = 1.0 - sim.gpu_free_milli * 1e-3
    gpu_time = np.log1p(seconds * (1.0 / enc.time_scale))
    gpu[:G, 2] = gpu_time
    placement = np.zeros(G) if in_placement is None else np.asarray(in_placement, dtype=np.float64)
    gpu[:G, 3] = placement
    c = sim.cluster
    server[:S, 3] = sim.server_free * (1.0 / c.server_num_gpus)
    server[:S, 4] = [len(j) for j in sim.server_jobs]
    server[:S, 5] = np.bincount(c.gpu_server, weights=placement, minlength=S) * (1.0 / c.server_num_gpus)
    rack_free = np.zeros(R)
    for s in range(S):
        rack_free[c.server_rack[s]] += float(sim.server_free[s])
    rack[:R, 1] = rack_free * (1.0 / np.bincount(c.gpu_rack, minlength=R))
    rack[:R, 2] = np.log1p(sim.rack_crossing)
    cluster = np.array(
        [
            free_gpus / G,
            math.log1p(len(sim.queue)),
            math.log1p(len(sim.running)),
            math.log1p(queued_beyond),
        ],
        dtype=np.float32,
    )
    image = None
    if enc.mode == "image":
        image = enc.image.copy()
        slot = enc.gpu_slot
        image[0, c.gpu_server, slot] = gpu[:G, 1]
        image[1, c.gpu_server, slot] = gpu_time
        image[4, c.gpu_server, slot] = placement
    return gpu, server, rack, cluster, image


def reference_rows(enc, sim, jobs, fits, log_sensitivity, running: bool) -> np.ndarray:
    """The job rows of ``jobs`` as numpy writes them."""
    n = sim.job_gpus_n[jobs]
    submit = sim.workload.submit_time[jobs]
    now = sim.now
    jf = np.zeros((len(jobs), enc.job_features.shape[1]), dtype=np.float32)
    jf[:, 0] = n * (1.0 / enc.G)
    jf[:, 1] = np.log2(n)
    jf[:, 2] = now - submit
    if enc.information == CLAIRVOYANT:
        jf[:, 3] = sim.workload.duration[jobs]
        done = sim.done_work[jobs]
        if running:
            done = done + sim.rate[jobs] * (now - sim.last_update[jobs])
        jf[:, 4] = np.maximum(sim.job_work[jobs] - done, 0.0) * sim.job_ideal_iter[jobs]
        jf[:, 6] = sim.needs_restart[jobs]
    else:
        attained = sim.attained[jobs]
        if running:
            since = sim.run_start[jobs]
            attained = attained + n * (now - since)
        else:
            since = np.where(sim.preemptions[jobs] > 0, sim.last_update[jobs], submit)
        jf[:, 3] = attained
        jf[:, 4] = now - since
        jf[:, 6] = np.log1p(sim.preemptions[jobs])
    times = jf[:, 2:5]
    times *= 1.0 / enc.time_scale
    np.log1p(times, out=times)
    jf[:, 5] = log_sensitivity[jobs]
    jf[:, 7] = fits
    if enc.running_rows:
        f = len(JOB_FEATURES)
        jf[:, f] = float(running)
        if running:
            jf[:, f + 1] = sim.rate[jobs] * sim.job_ideal_iter[jobs]
    return jf


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("information", ["clairvoyant", "non-clairvoyant"])
@pytest.mark.parametrize(
    "env_id, kwargs",
    [
        ("gpusched/JobSelect-v1", {"obs_mode": "flat"}),
        ("gpusched/JobSelect-v1", {"obs_mode": "image", "preemption": True, "preempt_window": 3}),
        ("gpusched/JobSelect-v1", {"obs_mode": "graph", "preemption": True}),
        ("gpusched/WorkerPlacement-v1", {"obs_mode": "image"}),
    ],
)
def test_compiled_writers_equal_numpy(env_id, kwargs, information):
    env = gym.make(env_id, cluster="hetero64", num_jobs=120, information=information, **kwargs)
    obs, _ = env.reset(seed=4)
    e = env.unwrapped
    enc, rng = e.encoder, np.random.default_rng(0)
    checked = 0
    for _ in range(150):
        obs, _, terminated, truncated, _ = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
        if terminated or truncated:
            break
        sim = e.sim
        placement = getattr(e, "_taken", None)
        queued = np.fromiter(sim.queue, dtype=np.int64, count=len(sim.queue))
        jobs = queued[: enc.queue_rows]
        fits = rng.random(len(jobs)) < 0.5
        beyond = max(0, len(queued) - len(jobs))
        want = reference_cluster(enc, sim, sim.free_gpus(), placement, beyond)
        enc.encode_cluster(sim, sim.free_gpus(), None, placement, beyond)
        for got, ref in zip((enc.gpu, enc.server, enc.rack, enc.cluster), want[:4], strict=True):
            assert same_bits(got, ref)
        if want[4] is not None:
            assert same_bits(enc.image, want[4])
        running = np.fromiter(sim.running, dtype=np.int64, count=len(sim.running))[: enc.running_rows]
        preemptible = rng.random(len(running)) < 0.5
        enc.encode_jobs(sim, jobs, fits, e.log_sensitivity, running, preemptible)
        rows = np.zeros_like(enc.job_features)
        mask = np.zeros(len(rows), dtype=np.int8)
        rows[: len(jobs)] = reference_rows(enc, sim, jobs, fits, e.log_sensitivity, False)
        mask[: len(jobs)] = 1
        if enc.running_rows:
            q = enc.queue_rows
            rows[q : q + len(running)] = reference_rows(
                enc, sim, running, preemptible, e.log_sensitivity, True
            )
            mask[q : q + len(running)] = 1
        assert same_bits(np.ascontiguousarray(enc.job_features), rows)
        assert same_bits(enc.job_mask, mask)
        if enc.mode == "flat":
            assert same_bits(enc._job_mask_f, mask.astype(np.float32))
        # the one-call writer (the envs' path) writes the same buffers as the two above
        written = {k: v.copy() for k, v in enc.buffers.items()}
        G, S, R = enc.G, enc.S, enc.R
        enc.gpu[:G, 1:], enc.server[:S, 3:], enc.rack[:R, 1:], enc.cluster[:] = np.nan, np.nan, np.nan, np.nan
        enc.job_features[...], enc.job_mask[...] = np.nan, 0
        if enc.mode == "image":
            c = e.cluster
            enc.image[np.array([0, 1, 4])[:, None], c.gpu_server[None, :], enc.gpu_slot[None, :]] = np.nan
        enc.encode(sim, jobs, fits, e.log_sensitivity, running, preemptible, placement, beyond)
        for k, v in written.items():
            assert same_bits(enc.buffers[k], v), k
        checked += len(jobs) + len(running)
    assert checked > 50  # the states held jobs to write
