"""Graph observations → ``torch_geometric`` batches, for one observation or a stacked batch, without a Python loop
over samples (node ids are shifted by per-sample offsets and the padding is dropped with the masks).

torch and torch_geometric are imported only inside :func:`to_pyg`, so importing this module stays cheap.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

GRAPH_KEYS = ("node_features", "node_mask", "edge_index", "edge_features", "edge_mask")


def to_pyg(obs: Mapping[str, Any], device=None, keep_padding: bool = False):
    """A ``torch_geometric.data.Batch`` from a graph observation (``obs_mode="graph"``).

    With ``keep_padding=True`` the padded nodes stay (isolated, edges still filtered by ``edge_mask``), so node ``i``
    of sample ``s`` is row ``s · N + i``: models that look nodes up by their padded slot use plain index arithmetic.

    ``obs`` holds numpy arrays or torch tensors, either one observation (``node_features`` (N, F)) or a batch
    with a leading dimension (``(B, N, F)``, as vector envs and SB3 give them). The result has ``x`` (nodes, F),
    ``edge_index`` (2, edges), ``edge_attr`` (edges, Fe), ``batch``, ``ptr`` over the real (unmasked) nodes and edges;
    ``node_pos`` maps each node back to its padded position; every other key of ``obs`` (``job_features``,
    ``job_mask``, ``context``, ``action_mask``, ...) is kept dense with its batch dimension, and the queued jobs are
    also given as a node set ``job_x`` (jobs, Fj) with ``job_batch``.
    """
    import torch
    from torch_geometric.data import Batch

    missing = [k for k in GRAPH_KEYS if k not in obs]
    if missing:
        raise KeyError(
            f"to_pyg needs a graph observation (obs_mode='graph'); missing keys: {', '.join(missing)}"
        )

    def tensor(value, dtype=None):
        t = value if isinstance(value, torch.Tensor) else torch.as_tensor(value)
        if dtype is not None:
            t = t.to(dtype)
        return t.to(device) if device is not None else t

    x = tensor(obs["node_features"], torch.float32)
    single = x.dim() == 2
    if single:
        obs = {k: (v[None] if hasattr(v, "shape") else v) for k, v in obs.items()}
        x = x[None]
    b, n, f = x.shape
    node_mask = tensor(obs["node_mask"]).reshape(b, n) > 0
    edge_index = tensor(obs["edge_index"], torch.long).reshape(b, 2, -1)
    e = edge_index.shape[-1]
    edge_mask = tensor(obs["edge_mask"]).reshape(b, e) > 0
    edge_attr = tensor(obs["edge_features"], torch.float32).reshape(b * e, -1)

    flat_mask = node_mask.reshape(-1)
    if keep_padding:
        flat_mask = torch.ones_like(flat_mask)
        node_mask = flat_mask.reshape(b, n)
    new_id = torch.cumsum(flat_mask.long(), 0) - 1  # padded position -> compact node id
    offsets = (torch.arange(b, device=x.device) * n)[:, None]  # (B, 1)
    src = (edge_index[:, 0] + offsets).reshape(-1)
    dst = (edge_index[:, 1] + offsets).reshape(-1)
    keep = edge_mask.reshape(-1) & flat_mask[src] & flat_mask[dst]
    counts = node_mask.sum(dim=1)
    data: dict[str, Any] = {
        "x": x.reshape(b * n, f)[flat_mask],
        "edge_index": torch.stack([new_id[src[keep]], new_id[dst[keep]]]),
        "edge_attr": edge_attr[keep],
        "batch": torch.repeat_interleave(torch.arange(b, device=x.device), counts),
        "ptr": torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)]),
        "node_pos": torch.arange(b * n, device=x.device)[flat_mask] % n,
    }
    if "job_features" in obs:
        jobs = tensor(obs["job_features"], torch.float32)
        w = jobs.shape[1]
        job_mask = tensor(obs["job_mask"]).reshape(b, w) > 0
        data["job_x"] = jobs.reshape(b * w, -1)[job_mask.reshape(-1)]
        data["job_batch"] = torch.repeat_interleave(torch.arange(b, device=x.device), job_mask.sum(dim=1))
    for key, value in obs.items():
        if key not in GRAPH_KEYS and key not in data:
            data[key] = tensor(value)
    batch = Batch(**data)
    batch._num_graphs = b
    return batch
