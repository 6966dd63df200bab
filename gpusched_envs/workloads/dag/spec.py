"""Named DAG specs: ``load_dag("dag:<kind>:key=value,...", seed=...)``.

==============  ===========================================================  ==========================================
kind            keys (defaults)                                              source
==============  ===========================================================  ==========================================
``random``      n=50, alpha=1.0, out_degree=3, ccr=1.0, beta=0.5,            Topcuoglu et al. 2002 layered generator
                mean_work=10.0, bandwidth=1e10
``alibaba``     n=(drawn), min_tasks=2, ccr=0.0, bandwidth=1e10              fitted Alibaba-2018 shape statistics
``tpch``        q=9, size=10g, ccr=0.0, bandwidth=1e10                       bundled TPC-H (Decima/Park)
``pipedream``   model=vgg16, mode=data|pipeline, gpus=1, microbatches=gpus   bundled PipeDream profiles
``gpt2``        phase=prefill|decode                                         bundled DAGBench GPT-2
``alibaba2018`` path=<batch_task.csv[.gz]>, job=<job_name>,                  the user's Alibaba 2018 batch_task file
                truncated=drop_last|keep|skip_job
==============  ===========================================================  ==========================================

``seed`` only matters for the generators (``random``, ``alibaba``). Unknown kinds or keys raise ``ValueError``
listing the valid ones. The key list is split on commas, so a ``path`` must not contain one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .model import DAG

_KEYS: dict[str, dict[str, Callable[[str], Any]]] = {
    "random": {
        "n": int,
        "alpha": float,
        "out_degree": int,
        "ccr": float,
        "beta": float,
        "mean_work": float,
        "bandwidth": float,
    },
    "alibaba": {"n": int, "min_tasks": int, "ccr": float, "bandwidth": float},
    "tpch": {"q": int, "size": str, "ccr": float, "bandwidth": float},
    "pipedream": {"model": str, "mode": str, "gpus": int, "microbatches": int},
    "gpt2": {"phase": str},
    "alibaba2018": {"path": str, "job": str, "truncated": str},
}


def dag_spec_kinds() -> dict[str, tuple[str, ...]]:
    """Valid spec kinds and their keys."""
    return {k: tuple(v) for k, v in _KEYS.items()}


def _parse(spec: str) -> tuple[str, dict[str, Any]]:
    parts = spec.strip().split(":", 2)
    if len(parts) < 2 or parts[0] != "dag":
        raise ValueError(
            f"DAG spec {spec!r} must look like 'dag:<kind>[:key=value,...]'; kinds: {', '.join(_KEYS)}"
        )
    kind = parts[1].strip().lower()
    if kind not in _KEYS:
        raise ValueError(f"unknown DAG kind {kind!r} in {spec!r}; valid: {', '.join(_KEYS)}")
    kw: dict[str, Any] = {}
    body = parts[2] if len(parts) == 3 else ""
    for item in filter(None, (x.strip() for x in body.split(","))):
        if "=" not in item:
            raise ValueError(
                f"DAG spec {spec!r}: {item!r} is not key=value; keys of {kind!r}: {', '.join(_KEYS[kind])}"
            )
        key, val = (s.strip() for s in item.split("=", 1))
        if key not in _KEYS[kind]:
            raise ValueError(
                f"DAG spec {spec!r}: unknown key {key!r} for {kind!r}; valid: {', '.join(_KEYS[kind])}"
            )
        try:
            kw[key] = _KEYS[kind][key](val)
        except ValueError:
            raise ValueError(
                f"DAG spec {spec!r}: {key}={val!r} is not a valid {_KEYS[kind][key].__name__}"
            ) from None
    return kind, kw


def load_dag(spec: str, *, seed: int = 0) -> DAG:
    """Build the DAG a spec string names (see the module docstring)."""
    kind, kw = _parse(spec)
    if kind == "random":
        from .random_layered import random_layered_dag

        return random_layered_dag(**kw, seed=seed)
    if kind == "alibaba":
        from .alibaba_like import alibaba_like_dag

        return alibaba_like_dag(**kw, seed=seed)
    if kind == "tpch":
        from .tpch import tpch_dag

        return tpch_dag(kw.pop("q", 9), kw.pop("size", "10g"), **kw)
    if kind == "pipedream":
        from .pipedream import pipedream_dag

        return pipedream_dag(kw.pop("model", "vgg16"), **kw)
    if kind == "gpt2":
        from .gpt2 import gpt2_dag

        return gpt2_dag(**kw)
    from .alibaba2018 import load_alibaba2018_job

    if "path" not in kw or "job" not in kw:
        raise ValueError(f"DAG spec {spec!r}: 'alibaba2018' needs path=... and job=...")
    return load_alibaba2018_job(kw["path"], kw["job"], truncated=kw.get("truncated", "drop_last"))
