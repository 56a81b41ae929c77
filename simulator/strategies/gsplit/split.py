"""Online splitting of one sampled mini-batch by vertex owner (GSplit's split-parallel scheduling), in numpy.

Shared by the graph statistics (:mod:`.stats`, counts for every split) and the executor
(:mod:`gnnplan.executor.strategies.gsplit`, one split's index plan), so predicted and executed shuffle volumes
are the same function of the same sample.

Terms (paper-private, brief §1.4-§1.6): a *split* is the part of a mini-batch one GPU computes: every sampled
vertex of every layer belongs to the split of its owner P(v) (an offline partition of the whole graph into g
parts); a *reference vertex* stands, in the source's split, for a destination owned by another split; the
*shuffle* of a layer sends source-side rows to the destination's owner (one message per GPU pair).

Notation: g -> ``num_splits``, P(v) -> ``owner``, V^(l), E^(l) -> a block's source positions and edges
(``edge_src``, ``edge_dst``: positions in the block's source / destination lists, destinations a prefix of the
sources as in DGL blocks), R_{i->j}^(l) -> ``sage_rows[i, j]``, S_{i->j}^(l) -> ``gat_rows[i, j]``, C_i ->
:func:`partition_cache`, B -> ``batch_size``.

What a layer's shuffle carries (brief §1.6, §1.7 and §2.3):

* GraphSAGE: the source owner i pre-aggregates its in-edges of every destination v into one partial sum and
  sends it to P(v): one row per (i, v) pair with an edge from a vertex of i to v, P(v) = j (R_{i->j}); the
  destination's owner adds the partial sums and divides by v's in-degree in the block.
* GAT: the edge softmax needs all of v's in-edges in one place, so edges are computed at the destination's
  owner j, which receives one projected row per remote source: (u, j) pairs with P(u) = i and an edge from u
  to a vertex of j (S_{i->j}).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

BATCH_SEED_MULTIPLIER = 1_000_003
"""Mixes the training seed into a batch's sampling seed (a prime, so distinct training seeds give distinct seeds)."""


def global_batches(train_idx: np.ndarray, batch_size: int, seed: int, epoch: int) -> list[np.ndarray]:
    """The mini-batches of one epoch: the training vertices shuffled with ``numpy.random.default_rng((seed,
    epoch))`` and cut into consecutive batches of ``batch_size`` (the last may be smaller). Every GPU trains
    the same batch (brief §1.2 step 0: one mini-batch for all GPUs).

    Shapes:
        train_idx: (n,) int64 -> ceil(n / B) arrays of int64 seeds.
    """
    shuffled = np.random.default_rng((seed, epoch)).permutation(np.asarray(train_idx, dtype=np.int64))
    return [shuffled[i:i + batch_size] for i in range(0, len(shuffled), batch_size)]


def batch_seed(seed: int, seeds: np.ndarray) -> int:
    """The DGL sampling seed of one batch: a CRC-32 of its seed vertices mixed with the training seed, so every
    process that samples the same batch (every machine's sampler, the statistics) draws the same sample."""
    crc = zlib.crc32(np.ascontiguousarray(seeds, dtype=np.int64).tobytes())
    return (crc + BATCH_SEED_MULTIPLIER * int(seed)) % (2 ** 31)


def partition_cache(in_degrees: np.ndarray, owner: np.ndarray, part: int, cache_fraction: float) -> np.ndarray:
    """The feature cache C_i of GPU ``part``: the ``floor(cache_fraction * n)`` highest in-degree vertices of its
    own partition (all of them if the partition is smaller); ties go to the lower id.

    Source: brief §1.3 (each GPU caches the highest-degree vertices of its own partition; caches are disjoint).

    Shapes:
        in_degrees, owner: (n,) int64 -> (k,) int64 vertex ids, hottest first.

    Raises:
        ValueError: cache_fraction outside [0, 1].
    """
    if not 0.0 <= cache_fraction <= 1.0:
        raise ValueError(f"cache_fraction must be in [0, 1], got {cache_fraction}")
    k = int(np.floor(cache_fraction * len(owner) + 1e-9))
    mine = np.flatnonzero(owner == part)
    order = np.argsort(-np.asarray(in_degrees)[mine], kind="stable")
    return mine[order[:k]].astype(np.int64)


@dataclass(frozen=True)
class LayerCounts:
    """Per-split sizes of one layer of one batch (brief §2.1, §2.3).

    Attributes:
        src, dst: (g,) source / destination vertices each split owns.
        edges_by_src, edges_by_dst: (g,) edges whose source / destination the split owns (GraphSAGE computes
            an edge at its source's owner, GAT at its destination's).
        local_edges: (g,) edges with both ends in the split.
        sage_rows, gat_rows: (g, g) rows split i sends split j in the layer's forward shuffle (diagonal: rows
            kept locally, never sent).
    """

    src: np.ndarray
    dst: np.ndarray
    edges_by_src: np.ndarray
    edges_by_dst: np.ndarray
    local_edges: np.ndarray
    sage_rows: np.ndarray
    gat_rows: np.ndarray


def _pairs(first: np.ndarray, second: np.ndarray, width: int) -> np.ndarray:
    """Distinct (first, second) pairs encoded as ``first * width + second``, sorted."""
    return np.unique(first.astype(np.int64) * width + second)


def layer_counts(src_owner: np.ndarray, num_dst: int, edge_src: np.ndarray, edge_dst: np.ndarray,
                 num_splits: int) -> LayerCounts:
    """Count one block's split (module docstring).

    Args:
        src_owner: (n_src,) owner of every source position; destinations are the first ``num_dst``.
        num_dst: destination vertices of the block.
        edge_src, edge_dst: (E,) int64 positions of each sampled edge's source and destination.
        num_splits: g.

    Returns:
        The layer's :class:`LayerCounts`.
    """
    g, n_src = num_splits, len(src_owner)
    so, do = src_owner[edge_src], src_owner[edge_dst]
    sage = _pairs(so, edge_dst, max(num_dst, 1))             # (i, v) pairs
    gat = _pairs(do, edge_src, max(n_src, 1))                # (j, u) pairs
    sage_i, sage_v = np.divmod(sage, max(num_dst, 1))
    gat_j, gat_u = np.divmod(gat, max(n_src, 1))
    return LayerCounts(
        src=np.bincount(src_owner, minlength=g), dst=np.bincount(src_owner[:num_dst], minlength=g),
        edges_by_src=np.bincount(so, minlength=g), edges_by_dst=np.bincount(do, minlength=g),
        local_edges=np.bincount(so[so == do], minlength=g),
        sage_rows=np.bincount(sage_i * g + src_owner[sage_v], minlength=g * g).reshape(g, g),
        gat_rows=np.bincount(src_owner[gat_u] * g + gat_j, minlength=g * g).reshape(g, g))


@dataclass(frozen=True)
class LayerPlan:
    """One split's (rank ``r``'s) index plan for one layer; rows of ``h`` are the split's own source vertices in
    ascending block position, and its own destinations are their prefix (``num_own_dst`` rows).

    Attributes:
        own_src: (s,) block positions of the split's source vertices.
        num_own_dst: d, the split's destination vertices (the first d of ``own_src``).
        send_counts, recv_counts: (g,) rows sent to / received from each split in the forward shuffle.
        send_index: GraphSAGE: (E_r,) partial-sum slot of every edge the split computes (slots are grouped by
            destination split); GAT: (n_send,) own source row of every row sent.
        gather_index: GraphSAGE: (E_r,) own source row of every edge the split computes; GAT: (E_r,) received
            row (table of every split's rows) of every edge the split computes.
        scatter_index: GraphSAGE: (n_recv,) own destination row each received partial sum adds to; GAT: (E_r,)
            own destination row of every edge the split computes.
        degree: (d,) in-degree of each own destination in the whole block (the mean's divisor; GraphSAGE).
    """

    own_src: np.ndarray
    num_own_dst: int
    send_counts: np.ndarray
    recv_counts: np.ndarray
    send_index: np.ndarray
    gather_index: np.ndarray
    scatter_index: np.ndarray
    degree: np.ndarray

    @property
    def num_edges(self) -> int:
        """Edges this split computes."""
        return len(self.gather_index)


def layer_plan(arch: str, rank: int, src_owner: np.ndarray, num_dst: int, edge_src: np.ndarray,
               edge_dst: np.ndarray, num_splits: int) -> LayerPlan:
    """Split ``rank``'s plan for one block (module docstring); the counts agree with :func:`layer_counts`.

    Args:
        arch: ``sage`` or ``gat``.
        rank: the split.
        src_owner, num_dst, edge_src, edge_dst, num_splits: as :func:`layer_counts`.

    Raises:
        ValueError: ``arch`` is neither ``sage`` nor ``gat``.
    """
    g, n_src = num_splits, len(src_owner)
    own = np.flatnonzero(src_owner == rank)
    row_of = np.full(n_src, -1, dtype=np.int64)
    row_of[own] = np.arange(len(own))
    num_own_dst = int(np.searchsorted(own, num_dst))
    so, do = src_owner[edge_src], src_owner[edge_dst]
    mine_src, mine_dst = so == rank, do == rank
    if arch == "sage":
        width = max(num_dst, 1)
        targets, slot = np.unique(do[mine_src] * width + edge_dst[mine_src], return_inverse=True)
        received = _pairs(so[mine_dst], edge_dst[mine_dst], width)
        degree = np.bincount(edge_dst, minlength=num_dst)[own[:num_own_dst]]
        return LayerPlan(own, num_own_dst, np.bincount(targets // width, minlength=g),
                         np.bincount(received // width, minlength=g), slot.astype(np.int64),
                         row_of[edge_src[mine_src]], row_of[received % width], degree)
    if arch == "gat":
        width = max(n_src, 1)
        sent = _pairs(do[mine_src], edge_src[mine_src], width)
        table, inverse = np.unique(so[mine_dst] * width + edge_src[mine_dst], return_inverse=True)
        return LayerPlan(own, num_own_dst, np.bincount(sent // width, minlength=g),
                         np.bincount(table // width, minlength=g), row_of[sent % width],
                         inverse.astype(np.int64), row_of[edge_dst[mine_dst]], np.zeros(0, dtype=np.int64))
    raise ValueError(f"model.arch: {arch!r} is not one of sage, gat")


def shuffle_width(arch: str, in_dim: int, out_dim: int, num_heads: int) -> int:
    """float32 elements of one shuffled row of a layer.

    GraphSAGE ships partial sums of what it aggregates: the projected rows (``out_dim``) when DGL's SAGEConv
    applies ``fc_neigh`` before message passing (``in_dim > out_dim``), else the input rows (``in_dim``). GAT
    ships projected source rows, ``num_heads * out_dim``.

    Source: brief §2.3 ("m_l = h if the linear layer comes before aggregation, else the input width"; GAT ships
    source rows); DGL 1.1.3 dgl/nn/pytorch/conv/sageconv.py (``lin_before_mp = in_feats > out_feats``).
    """
    if arch == "sage":
        return min(in_dim, out_dim)
    return num_heads * out_dim
