"""Compiled (numba) distinct rows of a batch of graph observations on a regular tree: the GPUs of one server, and
with servers merged the servers of one rack, that the dense GNN computes once (see ``gnn._GpuRows``).

Two items (nodes with their node mask, a server with its GPUs) are equal when no coordinate differs: every
difference is exactly 0 (``-0.0`` equals ``0.0``; a NaN or an infinite value differs from everything, itself
included). An item is kept when no earlier item of its group equals it; one that equals no item at all (not even
itself) stands for the group's first item. Rows are numbered sample-major, in node order."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, no_cpython_wrapper=True)
def _same_nodes(nf, mask, i, a, c):
    """Do nodes ``a`` and ``c`` of sample ``i`` differ by exactly 0 in every feature and in the node mask?"""
    u = nf[i, a]
    v = nf[i, c]
    differ = mask[i, a] - mask[i, c] != 0  # a NaN difference is != 0 too
    for j in range(u.shape[0]):  # no early exit: the loop vectorizes
        differ |= u[j] - v[j] != 0
    return not differ


@njit(cache=True, no_cpython_wrapper=True)
def _same_servers(nf, mask, i, sa, sc, g, k):
    """Are servers ``sa`` and ``sc`` of sample ``i`` equal: the server nodes and their GPUs one by one?"""
    if not _same_nodes(nf, mask, i, g + sa, g + sc):
        return False
    for j in range(k):
        if not _same_nodes(nf, mask, i, sa * k + j, sc * k + j):
            return False
    return True


@njit(cache=True)
def distinct_rows(nf, mask, g, k, m):
    """The distinct rows of ``nf`` (B, N, F) with ``mask`` (B, N) (same dtype) on a tree whose first ``g`` nodes
    are GPUs, ``k`` per server (server ``s`` is node ``g + s`` with GPUs ``k·s … k·s+k-1``), and with ``m > 0``
    the servers ``m`` per rack (rack ``r`` has servers ``m·r … m·r+m-1``). Returns ``(size, sample, node, count,
    parent_row, weight, server_size, server_sample, server_parent_row, server_node, server_count, server_of)``,
    ``gnn._GpuRows``'s attributes (the same meaning and order), the arrays longer than needed: the first ``size`` (GPU rows) and ``server_size`` (server rows) entries hold
    them, ``server_of`` all ``B·S``; the server arrays are empty where ``m == 0``. ``count`` and ``weight`` (GPU
    rows, ``(·, 1)``) and ``server_count`` have ``nf``'s dtype."""
    b, n = nf.shape[0], nf.shape[1]
    s = g // k
    merge = m > 0
    server_of = np.empty(b * s if merge else 0, np.int64)
    server_sample = np.empty(b * s if merge else 0, np.int64)
    server_parent_row = np.empty(b * s if merge else 0, np.int64)
    server_node = np.empty(b * s if merge else 0, np.int64)
    server_count = np.zeros((b * s if merge else 0, 1), nf.dtype)
    server_kept = np.ones(b * s, np.bool_)
    server_size = 0
    if merge:
        srv_row = np.empty(m, np.int64)  # the row of each kept server of the current rack
        for i in range(b):
            for r in range(s // m):
                lo = r * m
                for q in range(m):
                    srv = lo + q
                    first = -1
                    for c in range(q):  # the first equal server is a kept one
                        if srv_row[c] >= 0 and _same_servers(nf, mask, i, lo + c, srv, g, k):
                            first = c
                            break
                    if first < 0 and q > 0 and not _same_servers(nf, mask, i, srv, srv, g, k):
                        first = 0  # equal to nothing, not even itself: stands for the rack's first server
                    if first < 0:  # kept: a new row
                        srv_row[q] = server_size
                        server_sample[server_size] = i
                        server_parent_row[server_size] = r * b + i
                        server_node[server_size] = i * n + g + srv
                        server_size += 1
                        row = srv_row[q]
                    else:
                        srv_row[q] = -1
                        server_kept[i * s + srv] = False
                        row = srv_row[first]
                    server_of[i * s + srv] = row
                    server_count[row, 0] += 1
    sample = np.empty(b * g, np.int64)
    node = np.empty(b * g, np.int64)
    parent_row = np.empty(b * g, np.int64)
    count = np.zeros((b * g, 1), nf.dtype)
    weight = np.empty((b * g, 1), nf.dtype)
    size = 0
    gpu_row = np.empty(k, np.int64)  # the row of each kept GPU of the current server
    for i in range(b):
        for srv in range(s):
            if not server_kept[i * s + srv]:
                continue  # a server merged into an earlier one: its GPUs are that one's
            parent = server_of[i * s + srv] if merge else srv * b + i
            lo = srv * k
            for q in range(k):
                gpu = lo + q
                first = -1
                for c in range(q):  # the first equal GPU is a kept one
                    if gpu_row[c] >= 0 and _same_nodes(nf, mask, i, lo + c, gpu):
                        first = c
                        break
                if first < 0 and q > 0 and not _same_nodes(nf, mask, i, gpu, gpu):
                    first = 0  # equal to nothing, not even itself: stands for the server's first GPU
                if first < 0:
                    gpu_row[q] = size
                    sample[size] = i
                    node[size] = i * n + gpu
                    parent_row[size] = parent
                    size += 1
                    row = gpu_row[q]
                else:
                    gpu_row[q] = -1
                    row = gpu_row[first]
                count[row, 0] += 1
    for r in range(size):
        weight[r, 0] = count[r, 0] * server_count[parent_row[r], 0] if merge else count[r, 0]
    return (
        size,
        sample,
        node,
        count,
        parent_row,
        weight,
        server_size,
        server_sample,
        server_parent_row,
        server_node,
        server_count,
        server_of,
    )


@njit(cache=True)
def distinct_bit_rows(x):
    """The distinct rows of ``x`` (R, F), an integer array (the bits of float rows): ``(u, uid, rep)``, ``u`` the
    number of distinct rows, ``uid`` (R,) each row's distinct row, numbered in order of first appearance, and ``rep``
    (R,) whose first ``u`` entries are each distinct row's first appearance. Rows are equal when every entry is
    (so float rows are equal when their bits are: ``-0.0`` differs from ``0.0``, a NaN equals the same NaN)."""
    r, f = x.shape
    cap = 1
    while cap < 2 * r:
        cap *= 2
    table = np.full(cap, -1, np.int64)  # open addressing: a slot holds a distinct row's number
    uid = np.empty(r, np.int64)
    rep = np.empty(r, np.int64)
    u = 0
    for i in range(r):
        h = np.int64(-3750763034362895579)  # FNV-1a over the row's entries (wrapping int64 arithmetic)
        for j in range(f):
            h = (h ^ np.int64(x[i, j])) * np.int64(1099511628211)
        h ^= h >> 32  # bring the high bits down: a float's low bits are often all zero
        h *= np.int64(-7046029254386353131)
        h ^= h >> 29
        slot = h & (cap - 1)
        while True:
            k = table[slot]
            if k < 0:  # a new distinct row
                table[slot] = u
                rep[u] = i
                uid[i] = u
                u += 1
                break
            other = rep[k]
            same = True
            for j in range(f):
                if x[other, j] != x[i, j]:
                    same = False
                    break
            if same:
                uid[i] = k
                break
            slot = (slot + 1) & (cap - 1)
    return u, uid, rep
