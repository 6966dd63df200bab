"""Observation encoders shared by the cluster envs: one fixed-shape layout, three views (graph, image, flat).

The encoder owns its buffers (allocated once per env); :meth:`ClusterEncoder.encode` writes the dynamic columns in
place and returns copies. Static columns (GPU speed and type, bandwidths, topology edges) are written once per cluster.

Graph node order (padded to the layout's maxima, padding masked out by ``node_mask``)::

    [0, G)                   GPUs
    [G, G + S)               servers
    [G + S, G + S + R)       racks
    G + S + R                the cluster

Node feature columns: ``kind`` one-hot (gpu, server, rack, cluster), ``gpu_type`` one-hot over the catalogue's GPU
types, then one block per kind (zero on nodes of other kinds) with the columns named in :data:`GPU_FEATURES`,
:data:`SERVER_FEATURES`, :data:`RACK_FEATURES`, :data:`CLUSTER_FEATURES`. Edges (both directions) GPU–server
(intra-server link), server–rack (NIC) and rack–cluster (uplink), with :data:`EDGE_FEATURES`.
Times are ``log1p(seconds / time_scale)``; bandwidths ``(log10(GB/s) + 1) / 3``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from gymnasium import spaces

from gpusched_envs.sim.topology import Cluster

GPU_FEATURES = ("speed", "busy", "remaining_time", "in_placement")
SERVER_FEATURES = ("gpus", "intra_bandwidth", "nic_bandwidth", "free", "jobs", "in_placement")
RACK_FEATURES = ("uplink_bandwidth", "free", "crossing_jobs")
CLUSTER_FEATURES = ("free", "queued", "running", "waiting_beyond_window")
JOB_FEATURES = ("gpus", "log_gpus", "age", "duration", "remaining", "sensitivity", "preempted", "fits")
EDGE_FEATURES = ("bandwidth", "gpu_server", "server_rack", "rack_cluster")
IMAGE_CHANNELS = ("busy", "remaining_time", "speed", "slot_exists", "in_placement")
OBS_MODES = ("graph", "image", "flat")
KINDS = 4


def bandwidth_feature(bytes_per_s) -> np.ndarray:
    return (np.log10(np.asarray(bytes_per_s, dtype=np.float64) / 1e9) + 1.0) / 3.0


@dataclass(frozen=True)
class Layout:
    """Padded sizes of one env's observations (the maxima over every cluster the env may run on)."""

    num_gpus: int
    num_servers: int
    num_racks: int
    max_server_gpus: int
    num_gpu_types: int
    window: int  # queued jobs shown
    context: int  # env-specific extra features
    actions: int  # length of action_mask

    @classmethod
    def for_clusters(cls, clusters: list[Cluster], window: int, context: int, actions: int) -> Layout:
        return cls(
            num_gpus=max(c.num_gpus for c in clusters),
            num_servers=max(c.num_servers for c in clusters),
            num_racks=max(c.num_racks for c in clusters),
            max_server_gpus=max(c.max_server_gpus for c in clusters),
            num_gpu_types=len(clusters[0].catalog.gpu_types),
            window=window,
            context=context,
            actions=actions,
        )

    @property
    def num_nodes(self) -> int:
        return self.num_gpus + self.num_servers + self.num_racks + 1

    @property
    def num_edges(self) -> int:
        return 2 * (self.num_gpus + self.num_servers + self.num_racks)


class ClusterEncoder:
    """Writes cluster state + queue window + context into the buffers of one obs mode."""

    def __init__(self, layout: Layout, mode: str, time_scale: float):
        if mode not in OBS_MODES:
            raise ValueError(f"obs_mode must be one of {', '.join(OBS_MODES)}, got {mode!r}")
        self.layout, self.mode, self.time_scale = layout, mode, float(time_scale)
        lo = layout
        G, S, R, W = lo.num_gpus, lo.num_servers, lo.num_racks, lo.window
        self.num_node_features = (
            KINDS
            + lo.num_gpu_types
            + sum(map(len, (GPU_FEATURES, SERVER_FEATURES, RACK_FEATURES, CLUSTER_FEATURES)))
        )
        self.job_features = np.zeros((W, len(JOB_FEATURES)), dtype=np.float32)  # (W, Fj)
        self.job_mask = np.zeros(W, dtype=np.int8)  # (W,)
        self.context = np.zeros(lo.context, dtype=np.float32)  # (C,)
        self.action_mask = np.zeros(lo.actions, dtype=np.int8)  # (A,)
        self.buffers: dict[str, np.ndarray] = {}
        if mode == "graph":
            self.node_features = np.zeros((lo.num_nodes, self.num_node_features), dtype=np.float32)  # (N, F)
            self.node_mask = np.zeros(lo.num_nodes, dtype=np.int8)  # (N,)
            self.edge_index = np.zeros((2, lo.num_edges), dtype=np.int64)  # (2, E)
            self.edge_features = np.zeros((lo.num_edges, len(EDGE_FEATURES)), dtype=np.float32)  # (E, Fe)
            self.edge_mask = np.zeros(lo.num_edges, dtype=np.int8)  # (E,)
            col = KINDS + lo.num_gpu_types
            blocks = []
            for rows, names in (
                (slice(0, G), GPU_FEATURES),
                (slice(G, G + S), SERVER_FEATURES),
                (slice(G + S, G + S + R), RACK_FEATURES),
                (slice(G + S + R, G + S + R + 1), CLUSTER_FEATURES),
            ):
                blocks.append(self.node_features[rows, col : col + len(names)])  # views
                col += len(names)
            self.gpu, self.server, self.rack, cluster = blocks
            self.cluster = cluster[0]
            self.buffers = {
                "node_features": self.node_features,
                "node_mask": self.node_mask,
                "edge_index": self.edge_index,
                "edge_features": self.edge_features,
                "edge_mask": self.edge_mask,
                "job_features": self.job_features,
                "job_mask": self.job_mask,
            }
        else:
            sizes = [
                G * len(GPU_FEATURES),
                S * len(SERVER_FEATURES),
                R * len(RACK_FEATURES),
                len(CLUSTER_FEATURES),
            ]
            if mode == "flat":
                sizes += [W * len(JOB_FEATURES), W, lo.context]
            self.flat = np.zeros(sum(sizes), dtype=np.float32)
            cuts = np.cumsum([0, *sizes])
            parts = [self.flat[a:b] for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
            self.gpu = parts[0].reshape(G, len(GPU_FEATURES))
            self.server = parts[1].reshape(S, len(SERVER_FEATURES))
            self.rack = parts[2].reshape(R, len(RACK_FEATURES))
            self.cluster = parts[3]
            if mode == "flat":
                self.job_features = parts[4].reshape(W, len(JOB_FEATURES))
                self._job_mask_f = parts[5]
                self.context = parts[6]
                self.buffers = {"obs": self.flat}
            else:
                self.image = np.zeros(
                    (len(IMAGE_CHANNELS), S, lo.max_server_gpus), dtype=np.float32
                )  # (C, S, M)
                self.buffers = {
                    "cluster_image": self.image,
                    "cluster_features": self.flat,
                    "queue": self.job_features,
                    "job_mask": self.job_mask,
                }
        self.buffers["context"] = self.context
        self.buffers["action_mask"] = self.action_mask
        self.cluster_obj: Cluster | None = None

    # ------------------------------------------------------------------ pickling
    # The feature blocks are views into the observation buffers; pickle would turn them into separate copies, so
    # the state keeps only the buffers that own their memory and the views are rebuilt on load.
    def __getstate__(self) -> dict:
        return {
            k: v for k, v in self.__dict__.items() if not (isinstance(v, np.ndarray) and v.base is not None)
        }

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["layout"], state["mode"], state["time_scale"])
        for key, value in state.items():
            current = self.__dict__.get(key)
            if (
                isinstance(value, np.ndarray)
                and isinstance(current, np.ndarray)
                and current.shape == value.shape
            ):
                current[...] = value  # keep the views pointing at this buffer
            elif key != "buffers":
                self.__dict__[key] = value

    # ------------------------------------------------------------------ spaces
    def observation_space(self) -> spaces.Dict:
        lo = self.layout
        inf = np.float32(np.inf)

        def box(shape, low=-inf, high=inf, dtype=np.float32):
            return spaces.Box(low=low, high=high, shape=shape, dtype=dtype)

        def mask(n):
            return spaces.Box(0, 1, shape=(n,), dtype=np.int8)

        d: dict[str, spaces.Space] = {}
        if self.mode == "graph":
            d["node_features"] = box(self.node_features.shape)
            d["node_mask"] = mask(lo.num_nodes)
            d["edge_index"] = spaces.Box(0, lo.num_nodes - 1, shape=self.edge_index.shape, dtype=np.int64)
            d["edge_features"] = box(self.edge_features.shape)
            d["edge_mask"] = mask(lo.num_edges)
            d["job_features"] = box(self.job_features.shape)
            d["job_mask"] = mask(lo.window)
        elif self.mode == "flat":
            d["obs"] = box(self.flat.shape)
        else:
            d["cluster_image"] = box(self.image.shape)
            d["cluster_features"] = box(self.flat.shape)
            d["queue"] = box(self.job_features.shape)
            d["job_mask"] = mask(lo.window)
        d["context"] = box((lo.context,))
        d["action_mask"] = mask(lo.actions)
        return spaces.Dict(d)

    # ------------------------------------------------------------------ static part
    def set_cluster(self, cluster: Cluster, gpu_speed: np.ndarray) -> None:
        """Write the features that never change on this cluster (and zero the padding)."""
        lo = self.layout
        G, S, R = cluster.num_gpus, cluster.num_servers, cluster.num_racks
        if (
            G > lo.num_gpus
            or S > lo.num_servers
            or R > lo.num_racks
            or cluster.max_server_gpus > lo.max_server_gpus
        ):
            raise ValueError(f"cluster {cluster.name!r} is larger than this env's layout {lo}")
        self.cluster_obj = cluster
        self.G, self.S, self.R = G, S, R
        for a in (self.gpu, self.server, self.rack):
            a[...] = 0.0
        self.gpu[:G, 0] = gpu_speed
        self.server[:S, 0] = cluster.server_num_gpus / lo.max_server_gpus
        self.server[:S, 1] = bandwidth_feature(cluster.server_intra_bandwidth)
        self.server[:S, 2] = bandwidth_feature(cluster.server_nic_bandwidth)
        self.rack[:R, 0] = bandwidth_feature(cluster.rack_uplink_bandwidth)
        self.inv_rack_gpus = 1.0 / np.bincount(cluster.gpu_rack, minlength=R)
        self.inv_server_gpus = 1.0 / cluster.server_num_gpus
        self.gpu_slot = np.arange(G) - cluster.server_first_gpu[cluster.gpu_server]
        if self.mode == "graph":
            Gm, Sm, Rm = lo.num_gpus, lo.num_servers, lo.num_racks
            nf, nm = self.node_features, self.node_mask
            nf[:, : KINDS + lo.num_gpu_types] = 0.0
            nm[:] = 0
            for k, (start, n) in enumerate(((0, G), (Gm, S), (Gm + Sm, R), (Gm + Sm + Rm, 1))):
                nf[start : start + n, k] = 1.0
                nm[start : start + n] = 1
            nf[np.arange(G), KINDS + cluster.gpu_type] = 1.0
            # edges: child -> parent then parent -> child
            child = np.concatenate([np.arange(G), Gm + np.arange(S), Gm + Sm + np.arange(R)])
            parent = np.concatenate(
                [Gm + cluster.gpu_server, Gm + Sm + cluster.server_rack, np.full(R, Gm + Sm + Rm)]
            )
            bw = np.concatenate(
                [
                    cluster.server_intra_bandwidth[cluster.gpu_server],
                    cluster.server_nic_bandwidth,
                    cluster.rack_uplink_bandwidth,
                ]
            )
            level = np.concatenate([np.zeros(G), np.ones(S), np.full(R, 2)]).astype(np.int64)
            e = len(child)
            self.edge_index[:] = 0
            self.edge_features[:] = 0.0
            self.edge_mask[:] = 0
            for k, (src, dst) in enumerate(((child, parent), (parent, child))):
                sl = slice(k * e, (k + 1) * e)
                self.edge_index[0, sl], self.edge_index[1, sl] = src, dst
                self.edge_features[sl, 0] = bandwidth_feature(bw)
                self.edge_features[np.arange(k * e, (k + 1) * e), 1 + level] = 1.0
                self.edge_mask[sl] = 1
        elif self.mode == "image":
            self.image[...] = 0.0
            self.image[3] = -1.0
            self.image[3, cluster.gpu_server, self.gpu_slot] = 1.0
            self.image[2, cluster.gpu_server, self.gpu_slot] = gpu_speed

    # ------------------------------------------------------------------ dynamic part
    def encode_cluster(
        self,
        sim,
        free_gpus: int,
        gpu_remaining: np.ndarray,
        in_placement: np.ndarray | None,
        queued_beyond: int,
    ) -> None:
        """Write the GPU/server/rack/cluster columns that change; ``gpu_remaining`` (G,) seconds."""
        G, S, R = self.G, self.S, self.R
        c = sim.cluster
        ts = self.time_scale
        busy = 1.0 - sim.gpu_free_milli * 1e-3
        gpu, server, rack = self.gpu, self.server, self.rack
        gpu[:G, 1] = busy
        remaining = np.log1p(gpu_remaining / ts)
        gpu[:G, 2] = remaining
        server[:S, 3] = sim.server_free * self.inv_server_gpus
        server[:S, 4] = list(map(len, sim.server_jobs))
        if in_placement is None:
            gpu[:G, 3] = 0.0
            server[:S, 5] = 0.0
        else:
            gpu[:G, 3] = in_placement
            server[:S, 5] = (
                np.bincount(c.gpu_server, weights=in_placement, minlength=S) * self.inv_server_gpus
            )
        rack[:R, 1] = np.bincount(c.server_rack, weights=sim.server_free, minlength=R) * self.inv_rack_gpus
        rack[:R, 2] = np.log1p(sim.rack_crossing)
        self.cluster[0] = free_gpus / G
        self.cluster[1] = math.log1p(len(sim.queue))
        self.cluster[2] = math.log1p(len(sim.running))
        self.cluster[3] = math.log1p(queued_beyond)
        if self.mode == "image":
            img = self.image
            s, slot = c.gpu_server, self.gpu_slot
            img[0, s, slot] = busy
            img[1, s, slot] = remaining
            img[4, s, slot] = 0.0 if in_placement is None else in_placement

    def encode_jobs(self, sim, jobs: np.ndarray, fits: np.ndarray, log_sensitivity: np.ndarray) -> None:
        """Write the queue window: ``jobs`` (k,) ids in window order, ``fits`` (k,) bool."""
        k = len(jobs)
        jf = self.job_features
        ts = self.time_scale
        jf[k:] = 0.0
        self.job_mask[:k] = 1
        self.job_mask[k:] = 0
        if self.mode == "flat":
            self._job_mask_f[:k] = 1.0
            self._job_mask_f[k:] = 0.0
        if not k:
            return
        n = sim.job_gpus_n[jobs]
        jf[:k, 0] = n * (1.0 / self.G)
        jf[:k, 1] = np.log2(n)
        jf[:k, 2] = sim.now - sim.workload.submit_time[jobs]
        jf[:k, 3] = sim.workload.duration[jobs]
        jf[:k, 4] = np.maximum(sim.job_work[jobs] - sim.done_work[jobs], 0.0) * sim.job_ideal_iter[jobs]
        times = jf[:k, 2:5]
        times *= 1.0 / ts
        np.log1p(times, out=times)
        jf[:k, 5] = log_sensitivity[jobs]
        jf[:k, 6] = sim.needs_restart[jobs]
        jf[:k, 7] = fits

    def observation(self) -> dict[str, np.ndarray]:
        return {k: v.copy() for k, v in self.buffers.items()}


def gpu_remaining_time(sim, out: np.ndarray) -> np.ndarray:
    """(G,) seconds until the job on each GPU finishes at its current rate (0 on free GPUs, the restart delay while
    restarting; a shared GPU shows one of its jobs); written into ``out``."""
    out[:] = 0.0
    if not sim.running:
        return out
    held = np.flatnonzero(sim.gpu_job >= 0)
    jobs = sim.gpu_job[held]
    rate = sim.rate[jobs]
    left = sim.job_work[jobs] - sim.done_work[jobs] - rate * (sim.now - sim.last_update[jobs])
    seconds = np.full(len(jobs), sim.restart_delay)
    np.divide(left, rate, out=seconds, where=rate > 0)
    out[held] = np.maximum(seconds, 0.0)
    return out
