"""Cluster topology: a cluster → rack → server → GPU tree with link bandwidths, loaded from YAML presets.

A cluster is stored as arrays per level (structure of arrays) so that placement and throughput code stay in numpy.
Schema of a cluster YAML file (every bandwidth name refers to ``links`` in the catalogue)::

    name: tiny
    description: one line
    spine_link: eth100            # optional: latency of a cross-rack hop (default: the servers' NIC link)
    racks:
      - count: 2                  # this rack block is repeated
        oversubscription: 1.0     # uplink = sum of the rack's NIC bandwidth / oversubscription
        uplink_gbytes_per_s: 25   # or an explicit uplink bandwidth (takes precedence)
        pool: null                # optional virtual-cluster name: jobs of that VC run only here
        servers:
          - {count: 2, gpus: 4, gpu_type: V100, gpu_model: V100M16, intra_link: nvlink, nic: eth100}
          - {count: 2, server_type: ND40rs_v2}   # a catalogue server type: its GPUs, links and host overhead
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, cached_property
from importlib import resources
from pathlib import Path

import numpy as np
import yaml

from gpusched_envs.safety import load_yaml
from gpusched_envs.sim.catalog import GIGA, Catalog, default_catalog

SAME_GPU, SAME_SERVER, SAME_RACK, CROSS_RACK = 0, 1, 2, 3
DISTANCE_NAMES = ("same GPU", "same server", "same rack", "cross rack")


class ClusterConfigError(ValueError):
    """An impossible or malformed cluster description; the message names the file and the field."""


@dataclass(frozen=True, eq=False)
class Cluster:
    """An immutable cluster. Indices: GPUs ``g`` in 0..G-1, servers ``s`` in 0..S-1, racks ``r`` in 0..R-1."""

    name: str
    description: str
    catalog: Catalog
    # servers
    server_rack: np.ndarray  # (S,) int32
    server_gpu_type: np.ndarray  # (S,) int16, index into catalog.gpu_types
    server_gpu_model: np.ndarray  # (S,) int16, index into gpu_model_names (vendor label, e.g. V100M32)
    server_num_gpus: np.ndarray  # (S,) int32
    server_first_gpu: np.ndarray  # (S,) int32
    server_intra_bandwidth: np.ndarray  # (S,) float64 bytes/s (NVLink / PCIe)
    server_intra_latency: np.ndarray  # (S,) float64 s per hop
    server_nic_bandwidth: np.ndarray  # (S,) float64 bytes/s
    server_nic_latency: np.ndarray  # (S,) float64 s per hop
    server_pool: np.ndarray  # (S,) int16 index into pool_names, -1 = shared
    # racks
    rack_uplink_bandwidth: np.ndarray  # (R,) float64 bytes/s, shared by every job crossing the rack boundary
    spine_latency: float  # s per cross-rack hop
    # GPUs
    gpu_server: np.ndarray  # (G,) int32
    gpu_rack: np.ndarray  # (G,) int32
    gpu_type: np.ndarray  # (G,) int16
    gpu_model: np.ndarray  # (G,) int16
    gpu_model_names: tuple[str, ...]
    pool_names: tuple[str, ...]
    source: str = ""
    # Only where some server is a catalogue server type or has a shared (host-staged) intra-server link; None keeps
    # every other cluster on the plain arithmetic (bit-identical results)
    server_intra_shared: np.ndarray | None = (
        None  # (S,) bool: the job's GPUs on the server share the intra link
    )
    server_compute_overhead: np.ndarray | None = (
        None  # (S, M) float64 s per iteration added to the GPU's time
    )

    def __setstate__(self, state: dict) -> None:
        """A copy (pickle, ``copy.deepcopy``) is as immutable as the original: its arrays are read-only again, which
        is also the array type the compiled kernels are compiled for (a writable copy would compile them anew)."""
        for value in state.values():
            if isinstance(value, np.ndarray):
                value.flags.writeable = False
        self.__dict__.update(state)

    def compute_time(self, model: int, gpus: np.ndarray) -> np.ndarray:
        """Seconds per iteration of ``model`` on each of ``gpus`` alone: the GPU type's time plus the host
        overhead of its server type (0 on plain servers)."""
        t = self.catalog.iteration_time[model, self.gpu_type[gpus]]
        if self.server_compute_overhead is None:
            return t
        return t + self.server_compute_overhead[self.gpu_server[gpus], model]

    @property
    def num_gpus(self) -> int:
        return len(self.gpu_server)

    @property
    def num_servers(self) -> int:
        return len(self.server_rack)

    @property
    def num_racks(self) -> int:
        return len(self.rack_uplink_bandwidth)

    @cached_property
    def max_server_gpus(self) -> int:
        return int(self.server_num_gpus.max())

    @cached_property
    def gpu_server_i64(self) -> np.ndarray:
        """(G,) ``gpu_server`` as int64 (the compiled loops' index type)."""
        out = self.gpu_server.astype(np.int64)
        out.flags.writeable = False
        return out

    @cached_property
    def gpu_server_list(self) -> list[int]:
        """(G,) ``gpu_server`` as a list of Python ints (the engine's per-start look-ups)."""
        return self.gpu_server.tolist()

    @cached_property
    def server_rack_list(self) -> list[int]:
        """(S,) ``server_rack`` as a list of Python ints."""
        return self.server_rack.tolist()

    @cached_property
    def server_rows_i64(self) -> np.ndarray:
        """(3, S) int64: each server's first GPU, GPU count and rack (the compiled placement loops' layout)."""
        out = np.stack([self.server_first_gpu, self.server_num_gpus, self.server_rack]).astype(np.int64)
        out.flags.writeable = False
        return out

    def gpu_speed(self, model: int) -> np.ndarray:
        """(G,) iterations per second of ``model`` on each GPU alone."""
        if self.server_compute_overhead is None:
            return 1.0 / self.catalog.iteration_time[model, self.gpu_type]
        return 1.0 / self.compute_time(model, np.arange(self.num_gpus))

    def distance(self, a: int, b: int) -> int:
        """Distance class between two GPUs: SAME_GPU, SAME_SERVER, SAME_RACK or CROSS_RACK."""
        if a == b:
            return SAME_GPU
        if self.gpu_server[a] == self.gpu_server[b]:
            return SAME_SERVER
        if self.gpu_rack[a] == self.gpu_rack[b]:
            return SAME_RACK
        return CROSS_RACK

    def distance_matrix(self) -> np.ndarray:
        """(G, G) int8 distance classes."""
        same_server = self.gpu_server[:, None] == self.gpu_server[None, :]
        same_rack = self.gpu_rack[:, None] == self.gpu_rack[None, :]
        d = np.full((self.num_gpus, self.num_gpus), CROSS_RACK, dtype=np.int8)
        d[same_rack] = SAME_RACK
        d[same_server] = SAME_SERVER
        np.fill_diagonal(d, SAME_GPU)
        return d

    def bandwidth_matrix(self) -> np.ndarray:
        """(G, G) bytes/s between two GPUs on an idle network (inf on the diagonal); used by the DAG model. Across
        servers the slower of each side's NIC and intra-server link bounds it, across racks also the uplinks."""
        s = self.gpu_server
        intra = self.server_intra_bandwidth[s]
        nic = self.server_nic_bandwidth[s]
        uplink = self.rack_uplink_bandwidth[self.gpu_rack]
        d = self.distance_matrix()
        link = np.minimum(
            nic, intra
        )  # leaving a server crosses its intra-server link and its NIC (as throughput.py)
        bw = np.minimum(link[:, None], link[None, :])
        cross = np.minimum(bw, np.minimum(uplink[:, None], uplink[None, :]))
        out = np.where(d == CROSS_RACK, cross, bw)
        out = np.where(d == SAME_SERVER, intra[:, None], out)
        np.fill_diagonal(out, np.inf)
        return out

    def pool_index(self, name: str) -> int:
        return self.pool_names.index(name) if name in self.pool_names else -1

    def summary(self) -> dict:
        types, counts = np.unique(self.gpu_type, return_counts=True)
        return {
            "name": self.name,
            "racks": self.num_racks,
            "servers": self.num_servers,
            "gpus": self.num_gpus,
            "gpu_types": {self.catalog.gpu_types[t]: int(c) for t, c in zip(types, counts, strict=True)},
            "pools": list(self.pool_names),
        }


PRESETS = ("tiny", "topdrl", "hetero64", "philly", "philly-vc", "openb", "pai2020")
# NetSens congested-network family: rack uplinks oversubscribed 1:1, 4:1, 16:1, and 10 GbE NICs (same layout)
PRESETS += ("congested-1x", "congested-4x", "congested-16x", "congested-nic")


def list_presets() -> list[str]:
    return list(PRESETS)


def load_cluster(name_or_path: str | Path, catalog: Catalog | None = None) -> Cluster:
    """Load a preset by name (see :data:`PRESETS`) or a custom cluster from a YAML path.

    A preset with the bundled catalogue is built once per process and shared (clusters are immutable: their arrays
    are read-only), so every env on it shares the per-cluster caches (network sensitivities)."""
    key = str(name_or_path)
    if key in PRESETS and (catalog is None or catalog is default_catalog()):
        return _preset(key)
    catalog = catalog or default_catalog()
    if key in PRESETS:
        text = resources.files("gpusched_envs").joinpath(f"data/clusters/{key}.yaml").read_text()
        where = f"cluster preset {key!r}"
    else:
        path = Path(key)
        if not path.exists():
            raise ClusterConfigError(
                f"unknown cluster {key!r}: not a preset ({', '.join(PRESETS)}) nor an existing file"
            )
        if not path.is_file():
            raise ClusterConfigError(f"{path}: not a regular file")
        text = path.read_bytes()
        where = str(path)
    doc = load_yaml(text, where, ClusterConfigError)  # safe_load with limits on alias expansion (YAML bombs)
    return build_cluster(doc, catalog, where=where)


@cache
def _preset(name: str) -> Cluster:
    text = resources.files("gpusched_envs").joinpath(f"data/clusters/{name}.yaml").read_text()
    return build_cluster(yaml.safe_load(text), default_catalog(), where=f"cluster preset {name!r}")


MAX_SERVERS = 1_000_000  # a larger "cluster" is a typo or a YAML bomb: refused before its arrays are built
MAX_SERVER_GPUS = 1024


def _int_field(
    spec: dict, key: str, where: str, default=None, minimum: int = 1, maximum: int = MAX_SERVERS
) -> int:
    value = spec.get(key, default)
    if value is None:
        raise ClusterConfigError(f"{where}: missing field {key!r}")
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ClusterConfigError(f"{where}.{key}: must be an integer >= {minimum}, got {value!r}")
    if value > maximum:  # a typo or a bomb: refused before arrays of that size are built
        raise ClusterConfigError(f"{where}.{key}: must be at most {maximum:,}, got {value!r}")
    return value


def _float_field(spec: dict, key: str, where: str) -> float:
    value = spec[key]
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ClusterConfigError(f"{where}.{key}: must be a number, got {value!r}") from None
    if not np.isfinite(v) or v <= 0:
        raise ClusterConfigError(f"{where}.{key}: must be a positive number, got {value!r}")
    return v


def build_cluster(doc: dict, catalog: Catalog | None = None, where: str = "cluster") -> Cluster:
    """Validate a cluster description (the YAML schema above) and build its arrays."""
    catalog = catalog or default_catalog()
    if not isinstance(doc, dict):
        raise ClusterConfigError(f"{where}: expected a mapping with 'name' and 'racks'")
    racks_doc = doc.get("racks")
    if not isinstance(racks_doc, list) or not racks_doc:
        raise ClusterConfigError(f"{where}.racks: must be a non-empty list")

    def link(name, field_where):
        if not isinstance(name, str) or name not in catalog.links:
            raise ClusterConfigError(
                f"{field_where}: unknown link {name!r}; known: {', '.join(catalog.links)}"
            )
        return catalog.links[name]

    server_rows: list[
        tuple
    ] = []  # (rack, type, model label, gpus, intra bw, intra lat, nic bw, nic lat, shared, server type, pool)
    uplinks: list[float] = []
    model_names: list[str] = []
    pool_names: list[str] = []
    nic_latencies: list[float] = []
    for ri, rack in enumerate(racks_doc):
        rw = f"{where}.racks[{ri}]"
        if not isinstance(rack, dict):
            raise ClusterConfigError(f"{rw}: expected a mapping")
        rack_count = _int_field(rack, "count", rw, default=1)
        servers_doc = rack.get("servers")
        if not isinstance(servers_doc, list) or not servers_doc:
            raise ClusterConfigError(f"{rw}.servers: must be a non-empty list")
        pool = rack.get("pool")
        pool_idx = -1
        if pool is not None:
            pool = str(pool)
            if pool not in pool_names:
                pool_names.append(pool)
            pool_idx = pool_names.index(pool)
        block: list[tuple] = []
        for si, server in enumerate(servers_doc):
            sw = f"{rw}.servers[{si}]"
            if not isinstance(server, dict):
                raise ClusterConfigError(f"{sw}: expected a mapping")
            count = _int_field(server, "count", sw, default=1)
            stype = None
            if "server_type" in server:
                name = server["server_type"]
                if not isinstance(name, str) or name not in catalog.server_types:
                    raise ClusterConfigError(
                        f"{sw}.server_type: unknown server type {name!r}; known: "
                        f"{', '.join(catalog.server_types) or 'none'}"
                    )
                stype = catalog.server_types[name]
                defaults = {
                    "gpus": stype.gpus,
                    "gpu_type": stype.gpu_type,
                    "intra_link": stype.intra_link,
                    "nic": stype.nic,
                }
                server = {**defaults, **server}  # explicit fields override the type's
            gpus = _int_field(server, "gpus", sw, maximum=MAX_SERVER_GPUS)
            gpu_type = server.get("gpu_type")
            if not isinstance(gpu_type, str) or gpu_type not in catalog.gpu_types:
                raise ClusterConfigError(
                    f"{sw}.gpu_type: unknown GPU type {gpu_type!r}; known: {', '.join(catalog.gpu_types)}"
                )
            label = str(server.get("gpu_model", gpu_type))
            if label not in model_names:
                model_names.append(label)
            intra = link(server.get("intra_link", "pcie3"), f"{sw}.intra_link")
            nic = link(server.get("nic", "eth25"), f"{sw}.nic")
            nic_latencies.append(nic.latency)
            row = (
                catalog.gpu_types.index(gpu_type),
                model_names.index(label),
                gpus,
                intra.bandwidth,
                intra.latency,
                nic.bandwidth,
                nic.latency,
                intra.shared_by_gpus,
                stype.name if stype is not None else None,
            )
            if len(block) + count > MAX_SERVERS:
                raise ClusterConfigError(f"{sw}.count: more than {MAX_SERVERS:,} servers in one rack block")
            block.extend([row] * count)
        if "uplink_gbytes_per_s" in rack:
            uplink = _float_field(rack, "uplink_gbytes_per_s", rw) * GIGA
        else:
            over = _float_field(
                {"oversubscription": rack.get("oversubscription", 1.0)}, "oversubscription", rw
            )
            uplink = sum(r[5] for r in block) / over
        if len(server_rows) + rack_count * len(block) > MAX_SERVERS:
            raise ClusterConfigError(f"{rw}.count: the cluster would have more than {MAX_SERVERS:,} servers")
        for _ in range(rack_count):
            rack_id = len(uplinks)
            uplinks.append(uplink)
            server_rows.extend((rack_id, *r, pool_idx) for r in block)

    if "spine_link" in doc:
        spine_latency = link(doc["spine_link"], f"{where}.spine_link").latency
    else:
        spine_latency = max(nic_latencies)
    rows = np.array([r[:4] for r in server_rows], dtype=np.int64)  # rack, type, label, gpus
    floats = np.array([r[4:8] for r in server_rows], dtype=np.float64)
    shared = np.array([r[8] for r in server_rows], dtype=bool)
    stypes = [r[9] for r in server_rows]
    overhead = None
    if any(t is not None for t in stypes):
        per_type = {
            t: catalog.server_types[t].compute_overhead(catalog) for t in set(stypes) if t is not None
        }
        zero = np.zeros(len(catalog.model_names))
        overhead = np.stack([per_type[t] if t is not None else zero for t in stypes])
    server_num_gpus = rows[:, 3].astype(np.int32)
    first = np.concatenate([[0], np.cumsum(server_num_gpus)[:-1]]).astype(np.int32)
    gpu_server = np.repeat(np.arange(len(server_rows), dtype=np.int32), server_num_gpus)
    server_rack = rows[:, 0].astype(np.int32)
    server_type = rows[:, 1].astype(np.int16)
    server_label = rows[:, 2].astype(np.int16)
    cluster = Cluster(
        name=str(doc.get("name", where)),
        description=str(doc.get("description", "")),
        catalog=catalog,
        server_rack=server_rack,
        server_gpu_type=server_type,
        server_gpu_model=server_label,
        server_num_gpus=server_num_gpus,
        server_first_gpu=first,
        server_intra_bandwidth=floats[:, 0],
        server_intra_latency=floats[:, 1],
        server_nic_bandwidth=floats[:, 2],
        server_nic_latency=floats[:, 3],
        server_pool=np.array([r[-1] for r in server_rows], dtype=np.int16),
        rack_uplink_bandwidth=np.array(uplinks, dtype=np.float64),
        spine_latency=float(spine_latency),
        gpu_server=gpu_server,
        gpu_rack=server_rack[gpu_server],
        gpu_type=server_type[gpu_server],
        gpu_model=server_label[gpu_server],
        gpu_model_names=tuple(model_names),
        pool_names=tuple(pool_names),
        source=where,
        server_intra_shared=shared if shared.any() or overhead is not None else None,
        server_compute_overhead=overhead,
    )
    for value in vars(cluster).values():
        if isinstance(value, np.ndarray):
            value.flags.writeable = False  # immutable: presets are shared between envs
    return cluster
