"""Sizing a workload spec to the cluster it runs on: the one rule ``gpusched simulate`` and every env apply to a
workload spec string before loading it (:func:`fit_workload_to_cluster`)."""

from __future__ import annotations

# the offered load a synthetic spec gets when it names neither ``load`` nor ``rate`` (the envs' default load)
DEFAULT_SYNTHETIC_LOAD = 0.9


def _cluster_gpus(cluster) -> int:
    n = (
        cluster
        if isinstance(cluster, int) and not isinstance(cluster, bool)
        else getattr(cluster, "num_gpus", None)
    )
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"cluster must be a Cluster or a GPU count >= 1, got {cluster!r}")
    return n


def fit_workload_to_cluster(spec: str, cluster) -> str:
    """``spec`` sized to ``cluster`` (a :class:`~gpusched_envs.sim.topology.Cluster` or its GPU count ``G``), where
    the spec does not say otherwise:

    - ``synthetic``: ``max_gpus=G`` (no job larger than the cluster); ``gpus=G`` when it names ``load`` but not
      ``gpus`` (the offered load is over this cluster); ``load=0.9,gpus=G`` when it names neither ``load`` nor
      ``rate`` (the fit's arrival rate is that of the traced cluster, far more than a small cluster can serve).
    - a trace spec with ``oversize`` but no ``max_gpus``: ``max_gpus=G`` (the jobs larger than the cluster are
      dropped or refused).
    - anything else is returned unchanged.

    Keys are appended in that order (``synthetic`` alone on a 16-GPU cluster becomes
    ``synthetic:load=0.9,gpus=16,max_gpus=16``)."""
    if not isinstance(spec, str):
        raise TypeError(f"workload spec must be a string, got {type(spec).__name__}")
    g = _cluster_gpus(cluster)
    name, _, rest = spec.strip().partition(":")
    keys = {part.partition("=")[0].strip() for part in rest.split(",") if part.strip()}
    extra: list[str] = []
    if name.strip() == "synthetic":
        if "load" not in keys and "rate" not in keys:
            extra.append(f"load={DEFAULT_SYNTHETIC_LOAD}")
        if "gpus" not in keys and "rate" not in keys:
            extra.append(f"gpus={g}")
        if "max_gpus" not in keys:
            extra.append(f"max_gpus={g}")
    elif "oversize" in keys and "max_gpus" not in keys:
        extra.append(f"max_gpus={g}")
    if not extra:
        return spec
    head = spec.strip()
    return f"{head},{','.join(extra)}" if rest.strip() else f"{name.strip()}:{','.join(extra)}"


__all__ = ["DEFAULT_SYNTHETIC_LOAD", "fit_workload_to_cluster"]
