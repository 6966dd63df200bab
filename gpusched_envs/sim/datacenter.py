"""Generated data centres of identical racks (the HMARL setting's larger cluster) and the cluster argument that
names one: ``"datacenter:racks=R,servers=S,gpus=G"`` beside the presets, YAML paths and built clusters."""

from __future__ import annotations

from typing import Any

from gpusched_envs.sim.topology import Cluster, build_cluster, load_cluster


def datacenter_cluster(
    racks: int = 16, servers: int = 4, gpus: int = 4, gpu_type: str = "V100", oversubscription: float = 2.0
) -> Cluster:
    """A generated data centre of identical racks (the HMARL setting's larger cluster): ``racks`` × ``servers`` ×
    ``gpus`` GPUs of one type, PCIe inside a server, 25 GbE NICs, rack uplinks oversubscribed by ``oversubscription``
    (links as the ``topdrl`` preset)."""
    doc = {
        "name": f"datacenter-{racks}x{servers}x{gpus}",
        "description": "generated data centre (multi_scheduler_v1)",
        "racks": [
            {
                "count": int(racks),
                "oversubscription": float(oversubscription),
                "servers": [
                    {
                        "count": int(servers),
                        "gpus": int(gpus),
                        "gpu_type": gpu_type,
                        "intra_link": "pcie3",
                        "nic": "eth25",
                    }
                ],
            }
        ],
    }
    return build_cluster(doc, where="datacenter cluster")


DATACENTER_KEYS = {"racks": int, "servers": int, "gpus": int, "gpu_type": str, "oversubscription": float}


def resolve_multi_cluster(cluster: str | Cluster) -> Cluster:
    """A preset, a YAML path, a built :class:`Cluster` or ``"datacenter:racks=R,servers=S,gpus=G"`` (any of the
    keys of :func:`datacenter_cluster`; e.g. ``"datacenter:racks=16"``)."""
    if isinstance(cluster, str) and cluster.split(":", 1)[0] == "datacenter":
        kwargs: dict[str, Any] = {}
        rest = cluster.split(":", 1)[1] if ":" in cluster else ""
        for item in filter(None, rest.split(",")):
            key, _, value = item.partition("=")
            key = key.strip()
            if key not in DATACENTER_KEYS or not value:
                raise ValueError(
                    f"cluster {cluster!r}: bad item {item!r} (expected key=value with key one of "
                    f"{', '.join(DATACENTER_KEYS)})"
                )
            try:
                kwargs[key] = DATACENTER_KEYS[key](value)
            except ValueError:
                raise ValueError(
                    f"cluster {cluster!r}: {key}={value!r} is not a {DATACENTER_KEYS[key].__name__}"
                ) from None
        return datacenter_cluster(**kwargs)
    if isinstance(cluster, Cluster):
        return cluster
    return load_cluster(cluster)
