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

Information setting (``information=`` on every cluster env): what the time columns show. ``"clairvoyant"`` keeps the
v0 layout, whose columns are derived from the traced durations; ``"non-clairvoyant"`` (the default) shows only what
a real scheduler knows, in the same columns (same shapes, so one network architecture serves both):

=================  =============================  =====================================================
column             ``"clairvoyant"``              ``"non-clairvoyant"``
=================  =============================  =====================================================
GPU column 2       ``remaining_time``: seconds    ``time_in_use``: seconds since the job on the GPU
/ image channel 1  until its job ends              started its current allocation (0 when free)
job column 3       ``duration`` (traced)          ``attained_service``: GPU-seconds allocated so far
job column 4       ``remaining``: remaining work  ``time_in_state``: seconds since the job entered the
                   × ideal iteration time         queue (arrival or last preemption), or since its
                                                  current allocation started (running rows)
job column 6       ``preempted``: waits to         ``preemptions``: log1p(times preempted)
                   restart (0/1)
=================  =============================  =====================================================

Every other column (GPUs asked, age, network sensitivity of the job's model, fits, occupancy, bandwidths, queue
lengths) is known to a real scheduler and is the same in both settings. The contexts are set by each env (named by
``context_names``; non-clairvoyant ones count only what has happened). One bit about the future remains in both
settings: waiting is masked when nothing runs and no job is still to arrive, since it would end the episode in a
deadlock. JobSelect's ``preemption=True`` appends
the columns :data:`PREEMPTION_JOB_FEATURES` and rows for running jobs after the queue rows.
:func:`flat_feature_names` names every entry of the ``flat`` vector.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np
from gymnasium import spaces

from gpusched_envs.envs.history import HISTORY_BOUNDS
from gpusched_envs.sim import encode_state as _encode_state
from gpusched_envs.sim import kernels as _kernels
from gpusched_envs.sim.topology import Cluster

INFORMATION = ("non-clairvoyant", "clairvoyant")
CLAIRVOYANT, NON_CLAIRVOYANT = "clairvoyant", "non-clairvoyant"

# The clairvoyant names are the v0 layout (kept so that checkpoints trained on it load unchanged).
GPU_FEATURES = ("speed", "busy", "remaining_time", "in_placement")
SERVER_FEATURES = ("gpus", "intra_bandwidth", "nic_bandwidth", "free", "jobs", "in_placement")
RACK_FEATURES = ("uplink_bandwidth", "free", "crossing_jobs")
CLUSTER_FEATURES = ("free", "queued", "running", "waiting_beyond_window")
JOB_FEATURES = ("gpus", "log_gpus", "age", "duration", "remaining", "sensitivity", "preempted", "fits")
EDGE_FEATURES = ("bandwidth", "gpu_server", "server_rack", "rack_cluster")
IMAGE_CHANNELS = ("busy", "remaining_time", "speed", "slot_exists", "in_placement")
# per information setting (same lengths: only the meaning of a few columns changes)
GPU_FEATURES_OF = {
    CLAIRVOYANT: GPU_FEATURES,
    NON_CLAIRVOYANT: ("speed", "busy", "time_in_use", "in_placement"),
}
JOB_FEATURES_OF = {
    CLAIRVOYANT: JOB_FEATURES,
    NON_CLAIRVOYANT: (
        "gpus",
        "log_gpus",
        "age",
        "attained_service",
        "time_in_state",
        "sensitivity",
        "preemptions",
        "fits",
    ),
}
IMAGE_CHANNELS_OF = {
    CLAIRVOYANT: IMAGE_CHANNELS,
    NON_CLAIRVOYANT: ("busy", "time_in_use", "speed", "slot_exists", "in_placement"),
}
# appended to the job columns by JobSelect's preemption=True: 1 on the rows of running jobs, and a running job's
# progress rate ÷ its ideal rate (placement quality: 1 = as fast as consolidated on the reference GPU, 0 restarting)
PREEMPTION_JOB_FEATURES = ("running", "speed")
OBS_MODES = ("graph", "image", "flat")
KINDS = 4

# Box bounds of each column: its known range, UNBOUNDED (a finite stand-in for "no known bound") where it has none
UNBOUNDED = 1e30
_U = UNBOUNDED
BOUNDS: dict[str, tuple[float, float]] = {
    # shares, flags, one-hots
    **dict.fromkeys(("busy", "in_placement", "free", "fits", "running", "gpus"), (0.0, 1.0)),
    # a 0/1 flag, bounded as its non-clairvoyant twin "preemptions" so that both settings have the same spaces
    "preempted": (0.0, _U),
    **dict.fromkeys(("gpu_server", "server_rack", "rack_cluster"), (0.0, 1.0)),
    "slot_exists": (-1.0, 1.0),
    # non-negative: log1p times and counts, speeds, raw counts
    **dict.fromkeys(
        (
            "speed",
            "remaining_time",
            "time_in_use",
            "jobs",
            "crossing_jobs",
            "queued",
            "waiting_beyond_window",
            "log_gpus",
            "age",
            "duration",
            "remaining",
            "attained_service",
            "time_in_state",
            "preemptions",
        ),
        (0.0, _U),
    ),
    # JobSelect's history_features=True (gpusched_envs.envs.history)
    **HISTORY_BOUNDS,
    # log10-based bandwidths and log sensitivities: no known sign
    **dict.fromkeys(
        ("intra_bandwidth", "nic_bandwidth", "uplink_bandwidth", "bandwidth", "sensitivity"), (-_U, _U)
    ),
}
# where a name means another thing in one block: the cluster's "running" is log1p(running jobs), not a 0/1 flag
CLUSTER_BOUNDS = {**BOUNDS, "running": (0.0, _U)}


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


# float32 Boxes already built, by their bounds: gymnasium's Box writes a text form of non-uniform bounds when it is
# built (most of an env's construction time), so an env gets a copy of the first Box with the same bounds
_BOXES: dict[tuple, spaces.Box] = {}
_BOXES_MAX = 256


def float_box(low: np.ndarray, high: np.ndarray) -> spaces.Box:
    """A float32 ``Box`` with these bounds: a copy of the one built for the same shape and values (its own arrays
    and random generator), so building many envs of one layout does not rebuild the same spaces."""
    low32, high32 = np.ascontiguousarray(low, dtype=np.float32), np.ascontiguousarray(high, dtype=np.float32)
    key = (low32.shape, low32.tobytes(), high32.shape, high32.tobytes())
    template = _BOXES.get(key)
    if template is None:
        template = spaces.Box(low=low32, high=high32, dtype=np.float32)
        if len(_BOXES) >= _BOXES_MAX:
            _BOXES.pop(next(iter(_BOXES)))
        _BOXES[key] = template
    return copy.deepcopy(template)


class ClusterEncoder:
    """Writes cluster state + queue window + context into the buffers of one obs mode."""

    def __init__(
        self,
        layout: Layout,
        mode: str,
        time_scale: float,
        information: str = NON_CLAIRVOYANT,
        running_rows: int = 0,
        context_names: tuple[str, ...] | None = None,
        extra_job_features: tuple[str, ...] = (),
    ):
        """``running_rows``: the last rows of the job block show running jobs (JobSelect's preemption) and the
        job columns gain :data:`PREEMPTION_JOB_FEATURES`; ``context_names`` name the context entries;
        ``extra_job_features``: more job columns after those (each named in :data:`BOUNDS`), zero unless the env
        writes them after :meth:`encode_jobs` (:attr:`extra_job_column` is the first one's index)."""
        if mode not in OBS_MODES:
            raise ValueError(f"obs_mode must be one of {', '.join(OBS_MODES)}, got {mode!r}")
        if information not in INFORMATION:
            raise ValueError(
                f"information must be one of {', '.join(map(repr, INFORMATION))}, got {information!r}"
            )
        self.layout, self.mode, self.time_scale = layout, mode, float(time_scale)
        self.information, self.running_rows = information, int(running_rows)
        lo = layout
        if not 0 <= self.running_rows < lo.window:
            raise ValueError(f"running_rows must be in 0..{lo.window - 1}, got {running_rows}")
        self.queue_rows = lo.window - self.running_rows
        self.gpu_feature_names = GPU_FEATURES_OF[information]
        self.extra_job_features = tuple(extra_job_features)
        unknown = [n for n in self.extra_job_features if n not in BOUNDS]
        if unknown:
            raise ValueError(f"extra_job_features: no bounds for {', '.join(map(repr, unknown))}")
        self.job_feature_names = JOB_FEATURES_OF[information] + (
            PREEMPTION_JOB_FEATURES if self.running_rows else ()
        )
        self.extra_job_column = len(self.job_feature_names)
        self.job_feature_names += self.extra_job_features
        self.image_channel_names = IMAGE_CHANNELS_OF[information]
        if context_names is None:
            context_names = tuple(f"context_{i}" for i in range(lo.context))
        if len(context_names) != lo.context:
            raise ValueError(f"{len(context_names)} context names for {lo.context} context entries")
        self.context_names = tuple(context_names)
        G, S, R, W = lo.num_gpus, lo.num_servers, lo.num_racks, lo.window
        self.num_node_features = (
            KINDS
            + lo.num_gpu_types
            + sum(map(len, (GPU_FEATURES, SERVER_FEATURES, RACK_FEATURES, CLUSTER_FEATURES)))
        )
        self.job_features = np.zeros((W, len(self.job_feature_names)), dtype=np.float32)  # (W, Fj)
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
            spans = []
            for rows, names in (
                (slice(0, G), GPU_FEATURES),
                (slice(G, G + S), SERVER_FEATURES),
                (slice(G + S, G + S + R), RACK_FEATURES),
                (slice(G + S + R, G + S + R + 1), CLUSTER_FEATURES),
            ):
                blocks.append(self.node_features[rows, col : col + len(names)])  # views
                spans += [rows.start, rows.stop, col, col + len(names)]
                col += len(names)
            self.gpu, self.server, self.rack, cluster = blocks
            # the compiled writer's arguments: each block as (base, rows and columns of it)
            self._block_bases = (self.node_features,) * 3
            self._block_spans = np.array(spans[:12], dtype=np.int64)
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
                sizes += [W * len(self.job_feature_names), W, lo.context]
            self.flat = np.zeros(sum(sizes), dtype=np.float32)
            cuts = np.cumsum([0, *sizes])
            parts = [self.flat[a:b] for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
            self.gpu = parts[0].reshape(G, len(GPU_FEATURES))
            self.server = parts[1].reshape(S, len(SERVER_FEATURES))
            self.rack = parts[2].reshape(R, len(RACK_FEATURES))
            self.cluster = parts[3]
            self._block_bases = (self.gpu, self.server, self.rack)
            self._block_spans = np.array(
                [0, G, 0, len(GPU_FEATURES), 0, S, 0, len(SERVER_FEATURES), 0, R, 0, len(RACK_FEATURES)],
                dtype=np.int64,
            )
            if mode == "flat":
                self.job_features = parts[4].reshape(W, len(self.job_feature_names))
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
        # the compiled writers' arguments: the job time columns (log1p-ed in place), the image (none: no channel),
        # and tables of log2 / log1p of counts (grown on demand)
        self._job_times = self.job_features[:, _JOB["age"] : _JOB["remaining"] + 1]
        self._image_arg = self.image if mode == "image" else np.zeros((0, 1, 1), dtype=np.float32)
        self._job_mask_arg = self._job_mask_f if mode == "flat" else np.zeros(0, dtype=np.float32)
        self._log1p_counts: list[float] = []
        self._grow_log1p_counts(lo.window + lo.num_gpus)
        self._log1p_table = np.zeros(0)
        self._grow_tables(lo.num_gpus)
        # the job block's per-job arrays of the simulator last encoded (the same arrays until it is reset)
        self._sim_arrays = _kernels.TransientCache()

    # ------------------------------------------------------------------ pickling
    # The feature blocks are views into the observation buffers; pickle would turn them into separate copies, so
    # the state keeps only the buffers that own their memory and the views are rebuilt on load.
    def __getstate__(self) -> dict:
        return {
            k: v
            for k, v in self.__dict__.items()
            if not (isinstance(v, np.ndarray) and v.base is not None) and k != "_block_bases"
        }

    def __setstate__(self, state: dict) -> None:
        self.__init__(
            state["layout"],
            state["mode"],
            state["time_scale"],
            state["information"],
            state["running_rows"],
            state["context_names"],
            state.get("extra_job_features", ()),
        )
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
        """Fixed-shape Boxes with finite bounds: the known range of each column (:data:`BOUNDS`; masks and
        one-hots 0..1), ``±UNBOUNDED`` where a column has none (times, counts, bandwidths)."""
        lo = self.layout

        def box(low, high):
            return float_box(low, high)

        def cols(names, rows=1, bounds=BOUNDS):
            """(rows, len(names)) bounds of a block, each column's range widened to hold 0."""
            low = np.array([min(bounds[n][0], 0.0) for n in names])
            high = np.array([max(bounds[n][1], 0.0) for n in names])
            return np.tile(low, (rows, 1)), np.tile(high, (rows, 1))

        def mask(n):
            return spaces.Box(0, 1, shape=(n,), dtype=np.int8)

        blocks = [
            cols(self.gpu_feature_names, lo.num_gpus),
            cols(SERVER_FEATURES, lo.num_servers),
            cols(RACK_FEATURES, lo.num_racks),
            cols(CLUSTER_FEATURES, bounds=CLUSTER_BOUNDS),
        ]
        jobs = cols(self.job_feature_names, lo.window)
        ctx = (np.full(lo.context, -UNBOUNDED), np.full(lo.context, UNBOUNDED))
        d: dict[str, spaces.Space] = {}
        if self.mode == "graph":
            n_static = KINDS + lo.num_gpu_types
            low = [np.zeros(n_static)] + [b[0][0] for b in blocks]
            high = [np.ones(n_static)] + [b[1][0] for b in blocks]
            # a column of one kind's block is 0 on the other kinds' nodes (the ranges already hold 0)
            d["node_features"] = box(
                np.tile(np.concatenate(low), (lo.num_nodes, 1)),
                np.tile(np.concatenate(high), (lo.num_nodes, 1)),
            )
            d["node_mask"] = mask(lo.num_nodes)
            d["edge_index"] = spaces.Box(0, lo.num_nodes - 1, shape=self.edge_index.shape, dtype=np.int64)
            e_low, e_high = cols(EDGE_FEATURES, lo.num_edges)
            d["edge_features"] = box(e_low, e_high)
            d["edge_mask"] = mask(lo.num_edges)
            d["job_features"] = box(*jobs)
            d["job_mask"] = mask(lo.window)
        else:
            parts = list(blocks)
            if self.mode == "flat":
                parts += [jobs, (np.zeros(lo.window), np.ones(lo.window)), ctx]
            flat_low = np.concatenate([p[0].ravel() for p in parts])
            flat_high = np.concatenate([p[1].ravel() for p in parts])
            if self.mode == "flat":
                d["obs"] = box(flat_low, flat_high)
            else:
                i_low, i_high = cols(self.image_channel_names)
                shape = self.image.shape
                d["cluster_image"] = box(
                    np.broadcast_to(i_low[0][:, None, None], shape),
                    np.broadcast_to(i_high[0][:, None, None], shape),
                )
                d["cluster_features"] = box(flat_low, flat_high)
                d["queue"] = box(*jobs)
                d["job_mask"] = mask(lo.window)
        d["context"] = box(*ctx)
        d["action_mask"] = mask(lo.actions)
        return spaces.Dict(d)

    # ------------------------------------------------------------------ static part
    def set_cluster(self, cluster: Cluster, gpu_speed: np.ndarray) -> None:
        """Write the features that never change on this cluster (and zero the padding)."""
        if hasattr(self, "_sim_arrays"):
            self._sim_arrays.clear()  # the packed arguments refer to this cluster's arrays
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
        self.gpu[:G, _GPU["speed"]] = gpu_speed
        self.server[:S, _SERVER["gpus"]] = cluster.server_num_gpus / lo.max_server_gpus
        self.server[:S, _SERVER["intra_bandwidth"]] = bandwidth_feature(cluster.server_intra_bandwidth)
        self.server[:S, _SERVER["nic_bandwidth"]] = bandwidth_feature(cluster.server_nic_bandwidth)
        self.rack[:R, _RACK["uplink_bandwidth"]] = bandwidth_feature(cluster.rack_uplink_bandwidth)
        self.inv_rack_gpus = 1.0 / np.bincount(cluster.gpu_rack, minlength=R)
        self.inv_server_gpus = 1.0 / cluster.server_num_gpus
        self.gpu_slot = np.ascontiguousarray(
            np.arange(G) - cluster.server_first_gpu[cluster.gpu_server], dtype=np.int64
        )
        self._logs = np.zeros(G + R)  # the arguments of the GPU time and rack crossing columns' log1p
        self.inv_server_gpus = np.ascontiguousarray(self.inv_server_gpus, dtype=np.float64)
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
            self.image[_IMG["slot_exists"]] = -1.0
            self.image[_IMG["slot_exists"], cluster.gpu_server, self.gpu_slot] = 1.0
            self.image[_IMG["speed"], cluster.gpu_server, self.gpu_slot] = gpu_speed

    # ------------------------------------------------------------------ dynamic part
    def encode_cluster(
        self,
        sim,
        free_gpus: int,
        gpu_seconds: np.ndarray | None,
        in_placement: np.ndarray | None,
        queued_beyond: int,
    ) -> None:
        """Write the GPU/server/rack/cluster columns that change (:meth:`_cluster_args`)."""
        _kernels.cluster_dynamic(
            *self._cluster_args(sim, free_gpus, gpu_seconds, in_placement, queued_beyond)
        )

    def _cluster_args(
        self,
        sim,
        free_gpus: int,
        gpu_seconds: np.ndarray | None,
        in_placement: np.ndarray | None,
        queued_beyond: int,
    ) -> tuple:
        """The arguments of the compiled cluster writer, after the GPU time and rack crossing columns' ``log1p``. ``gpu_seconds`` (G,): the GPU time column in
        seconds, or None (preferred) to compute it for this encoder's information setting: remaining time
        (clairvoyant) or time in use (non-clairvoyant). A non-clairvoyant encoder refuses a given array, so that a
        caller cannot leak remaining times into it."""
        G = self.G
        logs = self._logs
        if gpu_seconds is None:
            args = (
                logs,
                sim._gi,
                sim._jf,
                float(sim.now),
                float(sim.restart_delay),
                self.information == CLAIRVOYANT,
                sim.num_running() > 0,
                1.0 / self.time_scale,
                sim.rack_crossing,
            )
            _kernels.gpu_time_args(*args)
        elif self.information != CLAIRVOYANT:
            raise ValueError(
                "a non-clairvoyant encoder computes its GPU time column itself: pass gpu_seconds=None"
            )
        else:
            logs[:G] = np.asarray(gpu_seconds, dtype=np.float64) * (1.0 / self.time_scale)
            logs[G:] = sim.rack_crossing
        np.log1p(logs, out=logs)  # the time and crossing columns (numpy's log1p, as the columns always had)
        placement, has_placement = self._placement_arg(in_placement)
        q, r = sim.num_queued(), sim.num_running()
        table = self._log1p_counts
        if max(q, r, queued_beyond) >= len(table):
            self._grow_log1p_counts(max(q, r, queued_beyond))
            table = self._log1p_counts
        return (
            *self._block_bases,
            self._block_spans,
            self.cluster,
            self._image_arg,
            self.gpu_slot,
            logs,
            sim._gi,
            sim._si,
            sim._ji,
            self.inv_server_gpus,
            self.inv_rack_gpus,
            placement,
            has_placement,
            free_gpus / G,
            table[q],
            table[r],
            table[queued_beyond],
        )

    def _take_simulator(self, sim) -> None:
        """Keep the job block's per-job arrays of this simulator (the same arrays until it is reset)."""
        fast = self._sim_arrays
        fast.clear()
        fast["jf"] = sim._jf
        fast["job_arrays"] = (
            sim._jf,
            sim.job_gpus_n,
            sim.workload.submit_time,
            sim.workload.duration,
            sim.job_ideal_iter,
            sim.needs_restart,
            sim.preemptions,
        )

    def log1p_count(self, n: int) -> np.float64:
        """``np.log1p(n)`` of a count ``n >= 0``, from a table."""
        if n >= len(self._log1p_table):
            self._grow_tables(n)
        return self._log1p_table[n]

    def _grow_log1p_counts(self, n: int) -> None:
        """Extend the table of ``math.log1p`` of the counts 0..n at least (the cluster's queue lengths)."""
        size = max(2 * len(self._log1p_counts), n + 1)
        self._log1p_counts = [math.log1p(i) for i in range(size)]

    def encode_jobs(
        self,
        sim,
        jobs: np.ndarray,
        fits: np.ndarray,
        log_sensitivity: np.ndarray,
        running: np.ndarray | None = None,
        preemptible: np.ndarray | None = None,
    ) -> None:
        """Write the job rows: ``jobs`` (k,) queued ids in window order with ``fits`` (k,) bool in the queue rows;
        with ``running_rows``, ``running`` (r,) running ids with ``preemptible`` (r,) bool in the rows after them."""
        while True:
            short = _kernels.job_block(
                *self._job_args(sim, jobs, fits, log_sensitivity, running, preemptible)
            )
            if short < 0:
                break
            # a job size or preemption count beyond the tables: extend them (numpy's own log2 / log1p values)
            self._grow_tables(int(short))
        times = self._job_times
        np.log1p(times, out=times)  # numpy's float32 log1p of the time columns (log1p(0) = 0 on empty rows)

    def encode(
        self,
        sim,
        jobs: np.ndarray,
        fits: np.ndarray,
        log_sensitivity: np.ndarray,
        running: np.ndarray | None = None,
        preemptible: np.ndarray | None = None,
        in_placement: np.ndarray | None = None,
        queued_beyond: int = 0,
    ) -> None:
        """:meth:`encode_cluster` (the GPU time column for this encoder's information setting) and
        :meth:`encode_jobs` in one compiled call: the same columns. The constant arguments of the compiled writers
        are packed once per simulator (:mod:`gpusched_envs.sim.encode_state`)."""
        es = self._state_for(sim, log_sensitivity)
        now = float(sim.now)
        q, r = sim.num_queued(), sim.num_running()
        _encode_state.time_args(es, now, r > 0)
        logs = self._logs
        np.log1p(logs, out=logs)  # the time and crossing columns (numpy's log1p, as the columns always had)
        placement, has_placement = self._placement_arg(in_placement)
        table = self._log1p_counts
        if max(q, r, queued_beyond) >= len(table):
            self._grow_log1p_counts(max(q, r, queued_beyond))
            table = self._log1p_counts
        if running is None or not self.running_rows:
            running, preemptible = _NO_JOBS, _NO_FITS
        args = (
            placement,
            has_placement,
            sim.free_gpus() / self.G,
            table[q],
            table[r],
            table[queued_beyond],
            np.ascontiguousarray(jobs, dtype=np.int64),
            np.ascontiguousarray(fits, dtype=np.bool_),
            np.ascontiguousarray(running, dtype=np.int64),
            np.ascontiguousarray(preemptible, dtype=np.bool_),
            now,
        )
        if _encode_state.blocks(es, *args) >= 0:
            self.encode_jobs(sim, jobs, fits, log_sensitivity, running, preemptible)  # grows the tables
            return
        times = self._job_times
        np.log1p(times, out=times)  # numpy's float32 log1p of the time columns (log1p(0) = 0 on empty rows)

    def _state_for(self, sim, log_sensitivity: np.ndarray):
        """The packed constant arguments for this simulator, sensitivity column and tables (built on change)."""
        fast = self._sim_arrays
        if fast.get("jf") is not sim._jf:  # a new (or reset) simulator
            self._take_simulator(sim)
        key = fast.get("state_key")
        if key is None or key[0] is not log_sensitivity or key[1] is not self._log1p_table:
            log_sensitivity = np.ascontiguousarray(log_sensitivity, dtype=np.float64)
            fast["state"] = _encode_state.new_state(
                *self._block_bases, self._block_spans, self.cluster, self._image_arg, self.gpu_slot, self._logs,
                sim._gi, sim._si, sim._ji, self.inv_server_gpus, self.inv_rack_gpus, self.job_features,
                self.job_mask, self._job_mask_arg, self.queue_rows, self.information == CLAIRVOYANT,
                self.running_rows > 0, 1.0 / self.G, 1.0 / self.time_scale, *fast["job_arrays"], log_sensitivity,
                self._log2_table, self._log1p_table, float(sim.restart_delay), sim.rack_crossing,
            )  # fmt: skip
            fast["state_key"] = (log_sensitivity, self._log1p_table)
        return fast["state"]

    def _placement_arg(self, in_placement: np.ndarray | None) -> tuple[np.ndarray, bool]:
        if in_placement is None:
            return _NO_PLACEMENT, False
        placement = np.ascontiguousarray(in_placement, dtype=np.float64)
        if len(placement) not in (0, self.G):
            raise ValueError(f"in_placement must have one entry per GPU ({self.G}), got {len(placement)}")
        return placement, len(placement) > 0

    def _job_args(
        self,
        sim,
        jobs: np.ndarray,
        fits: np.ndarray,
        log_sensitivity: np.ndarray,
        running: np.ndarray | None,
        preemptible: np.ndarray | None,
    ) -> tuple:
        """The arguments of the compiled job block writer."""
        if running is None or not self.running_rows:
            running, preemptible = _NO_JOBS, _NO_FITS
        fast = self._sim_arrays
        if fast.get("jf") is not sim._jf:  # a new (or reset) simulator
            self._take_simulator(sim)
        return (
            self.job_features,
            self.job_mask,
            self._job_mask_arg,
            self.queue_rows,
            np.ascontiguousarray(jobs, dtype=np.int64),
            np.ascontiguousarray(fits, dtype=np.bool_),
            np.ascontiguousarray(running, dtype=np.int64),
            np.ascontiguousarray(preemptible, dtype=np.bool_),
            self.information == CLAIRVOYANT,
            self.running_rows > 0,
            float(sim.now),
            1.0 / self.G,
            1.0 / self.time_scale,
            *fast["job_arrays"],
            np.ascontiguousarray(log_sensitivity, dtype=np.float64),
            self._log2_table,
            self._log1p_table,
        )

    def _grow_tables(self, n: int) -> None:
        """Tables of numpy's ``log2`` and ``log1p`` of the counts 0..n at least (GPUs asked, preemptions)."""
        size = max(2 * len(self._log1p_table), n + 1)
        counts = np.arange(size, dtype=np.int64)
        with np.errstate(divide="ignore"):
            self._log2_table = np.log2(counts)
        self._log1p_table = np.log1p(counts)

    # False: observation() hands out the buffers themselves, which the next step overwrites (the vector env copies
    # each into its batch at once, so it asks for no copy of its own)
    copy_observations = True

    def observation(self) -> dict[str, np.ndarray]:
        if self.copy_observations:
            return {k: v.copy() for k, v in self.buffers.items()}
        return dict(self.buffers)

    # ------------------------------------------------------------------ names
    def flat_feature_names(self) -> list[str]:
        """The name of every entry of the ``flat`` observation vector (``obs["obs"]``), in order; in the other
        modes, of ``cluster_features`` (image) or of the cluster blocks (graph) followed by the job block."""
        lo = self.layout
        names = [f"gpu{i}.{f}" for i in range(lo.num_gpus) for f in self.gpu_feature_names]
        names += [f"server{i}.{f}" for i in range(lo.num_servers) for f in SERVER_FEATURES]
        names += [f"rack{i}.{f}" for i in range(lo.num_racks) for f in RACK_FEATURES]
        names += [f"cluster.{f}" for f in CLUSTER_FEATURES]
        if self.mode == "flat":
            names += [f"{self._row_name(i)}.{f}" for i in range(lo.window) for f in self.job_feature_names]
            names += [f"{self._row_name(i)}.present" for i in range(lo.window)]
            names += [f"context.{c}" for c in self.context_names]
        return names

    def _row_name(self, i: int) -> str:
        return f"job{i}" if i < self.queue_rows else f"running{i - self.queue_rows}"


_NO_PLACEMENT = np.zeros(0)
_NO_JOBS = np.zeros(0, dtype=np.int64)
_NO_FITS = np.zeros(0, dtype=bool)
# column indices by name (the clairvoyant names; the non-clairvoyant columns sit at the same indices)
_GPU = {n: i for i, n in enumerate(GPU_FEATURES)}
_SERVER = {n: i for i, n in enumerate(SERVER_FEATURES)}
_RACK = {n: i for i, n in enumerate(RACK_FEATURES)}
_CLUSTER = {n: i for i, n in enumerate(CLUSTER_FEATURES)}
_JOB = {n: i for i, n in enumerate(JOB_FEATURES)} | {
    n: i for i, n in enumerate(JOB_FEATURES_OF[NON_CLAIRVOYANT])
}
_IMG = {n: i for i, n in enumerate(IMAGE_CHANNELS)}
# the compiled writers (gpusched_envs.sim.kernels) address the dynamic columns by these indices
assert (_GPU["busy"], _GPU["remaining_time"], _GPU["in_placement"]) == (1, 2, 3)
assert (_SERVER["free"], _SERVER["jobs"], _SERVER["in_placement"]) == (3, 4, 5)
assert (_RACK["free"], _RACK["crossing_jobs"]) == (1, 2)
assert (_IMG["busy"], _IMG["remaining_time"], _IMG["in_placement"]) == (0, 1, 4)
assert [_JOB[n] for n in JOB_FEATURES] == list(range(8)) and len(PREEMPTION_JOB_FEATURES) == 2


def gpu_time_column(sim, out: np.ndarray, information: str) -> np.ndarray:
    """(G,) seconds shown in the GPU time column: :func:`gpu_remaining_time` (clairvoyant) or
    :func:`gpu_time_in_use` (non-clairvoyant)."""
    if information == CLAIRVOYANT:
        return gpu_remaining_time(sim, out)
    return gpu_time_in_use(sim, out)


def gpu_time_in_use(sim, out: np.ndarray) -> np.ndarray:
    """(G,) seconds since the job on each GPU started its current allocation (0 on free GPUs; a shared GPU shows
    one of its jobs); written into ``out``."""
    return _kernels.time_in_use(out, sim.gpu_job, sim.run_start, float(sim.now))


def gpu_remaining_time(sim, out: np.ndarray) -> np.ndarray:
    """(G,) seconds until the job on each GPU finishes at its current rate (0 on free GPUs, the restart delay while
    restarting; a shared GPU shows one of its jobs); written into ``out``. Clairvoyant: derived from the traced
    duration."""
    out[:] = 0.0
    if not sim.num_running():
        return out
    held = np.flatnonzero(sim.gpu_job >= 0)
    jobs = sim.gpu_job[held]
    rate = sim.rate[jobs]
    left = sim.job_work[jobs] - sim.done_work[jobs] - rate * (sim.now - sim.last_update[jobs])
    seconds = np.full(len(jobs), sim.restart_delay)
    np.divide(left, rate, out=seconds, where=rate > 0)
    out[held] = np.maximum(seconds, 0.0)
    return out
