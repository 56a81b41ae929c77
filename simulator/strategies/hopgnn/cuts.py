"""HopGNN's micrograph groups cut out of sampled mini-batches, thousands at once (one sparse product per layer).

Why a cut is a sample (the measurement of :mod:`.micrographs` rests on it): DGL's ``NeighborSampler`` draws, at
every layer, each destination vertex's in-neighbours on its own (``dgl.sampling.sample_neighbors``: per vertex,
``fanout`` of its in-edges uniformly without replacement, all of them below ``fanout``), and the next layer's
destinations are the block's source vertices (the destinations first, then the new neighbours). Cutting a group of
seeds out of the sample of a whole mini-batch that holds them (every destination vertex a seed needs keeps all its
sampled in-edges, :func:`~.micrographs.cut_blocks`) therefore gives blocks distributed exactly as the group's own
sample with the same sampler: the group's block sizes, input vertices and their owners have the same distribution.
Groups of one model cut from one sample share their draws where they overlap (a vertex two groups reach has the
same neighbours in both); the statistics that add up vertices over groups (a worker's pre-gather) only combine the
groups a worker hosts, which belong to different models and so to independent samples
(:func:`~.micrographs.host_worker`: a worker hosts one model per step). With the executor's ``keyed`` sampler
(:mod:`gnnplan.executor.sampling_keyed`) a group's home sample is this cut exactly.

Stacking: the blocks of B sampled batches are placed side by side (block-diagonal), so that the groups of every
model are cut in one product per layer. With ``R_l`` the (dst, src) 0/1 matrix of layer l (a destination needs
itself and its sampled in-neighbours) and ``N`` a (groups, destinations) 0/1 membership, the group's sources at
layer l are the non-zeros of ``N R_l`` and its sampled edges ``N deg_l``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class StackedBlocks:
    """The blocks of several sampled batches side by side, input side first.

    Attributes:
        reach: per layer l, a (n_dst_l, n_src_l) int32 CSR matrix, 1 where a destination vertex needs a source
            vertex (itself, or one of its sampled in-neighbours).
        in_degree: per layer, (n_dst_l,) int64 sampled in-edges of each destination vertex (parallel edges
            counted, as DGL's ``num_edges``).
        input_ids: (n_src_0,) int64 graph ids of the input vertices.
        num_seeds: destinations of the last layer: the batches' seeds, batch after batch, each in batch order.
    """

    reach: list[sp.csr_matrix]
    in_degree: list[np.ndarray]
    input_ids: np.ndarray
    num_seeds: int


def stack_blocks(batches: Sequence[list[Any]]) -> StackedBlocks:
    """Place the DGL blocks of ``batches`` (each a sampled batch's block list, input side first, ``dgl.NID`` set
    as ``NeighborSampler`` sets it; all with the same number of layers) side by side.

    Raises:
        ValueError: no batch, or batches with different numbers of layers.
    """
    if not batches or len({len(b) for b in batches}) != 1:
        raise ValueError("batches: must be one or more sampled batches with the same number of layers")
    reach, in_degree = [], []
    for layer in range(len(batches[0])):
        blocks = [b[layer] for b in batches]
        src_at = np.cumsum([0] + [b.num_src_nodes() for b in blocks])
        dst_at = np.cumsum([0] + [b.num_dst_nodes() for b in blocks])
        edge_dst, edge_src = [], []
        for i, block in enumerate(blocks):
            src, dst = (t.numpy().astype(np.int64) for t in block.edges())
            edge_dst.append(dst + dst_at[i])
            edge_src.append(src + src_at[i])
        own = np.arange(dst_at[-1], dtype=np.int64)  # DGL puts a block's destinations first among its sources
        own_src = own + np.repeat(src_at[:-1] - dst_at[:-1], np.diff(dst_at))
        rows, cols = np.concatenate([*edge_dst, own]), np.concatenate([*edge_src, own_src])
        shape = (int(dst_at[-1]), int(src_at[-1]))
        matrix = sp.csr_matrix((np.ones(len(rows), dtype=np.int32), (rows, cols)), shape=shape)
        matrix.data[:] = 1  # parallel edges (and a self-loop's edge beside the vertex itself) were summed
        reach.append(matrix)
        in_degree.append(np.bincount(np.concatenate(edge_dst), minlength=shape[0]).astype(np.int64))
    inputs = np.concatenate([b[0].srcdata["_ID"].numpy() for b in batches]).astype(np.int64)  # "_ID" = dgl.NID
    return StackedBlocks(reach, in_degree, inputs, reach[-1].shape[0])


def members(groups: Sequence[np.ndarray], num_seeds: int) -> sp.csr_matrix:
    """The (len(groups), num_seeds) int32 0/1 membership of seed positions (indices among the stacked seeds, no
    repeats within a group) in groups."""
    lengths = np.array([len(g) for g in groups], dtype=np.int64)
    indices = np.concatenate([np.asarray(g, dtype=np.int64) for g in groups]) if len(groups) else np.empty(0, np.int64)
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    return sp.csr_matrix((np.ones(len(indices), dtype=np.int32), indices, indptr), shape=(len(groups), num_seeds))


def each_seed(num_seeds: int) -> sp.csr_matrix:
    """The (num_seeds, num_seeds) membership of one-seed groups, seed i alone in group i (micrographs, §4)."""
    return sp.identity(num_seeds, dtype=np.int32, format="csr")


@dataclass(frozen=True)
class Cuts:
    """Groups cut out of stacked blocks (:func:`cut`).

    Attributes:
        sizes: (G, L, 3) float64 (num_src, num_dst, num_edges) of every group's blocks, input side first.
        inputs: (G, n_src_0) CSR matrix whose row i holds group i's input vertices (column j: the stack's input
            vertex j, graph id ``input_ids[j]``; not sorted within a row).
    """

    sizes: np.ndarray
    inputs: sp.csr_matrix


def cut(stacked: StackedBlocks, groups: sp.csr_matrix) -> Cuts:
    """Cut every group (a row of ``groups``, :func:`members`) out of the stacked blocks (module docstring).

    Shapes:
        groups: (G, ``stacked.num_seeds``) -> sizes (G, L, 3), inputs (G, n_src_0).

    Raises:
        ValueError: ``groups`` has not ``stacked.num_seeds`` columns.
    """
    if groups.shape[1] != stacked.num_seeds:
        raise ValueError(f"groups: must have {stacked.num_seeds} columns (the stacked seeds), got {groups.shape[1]}")
    layers = len(stacked.reach)
    sizes = np.zeros((groups.shape[0], layers, 3))
    need = groups.tocsr().astype(np.int32)
    for layer in reversed(range(layers)):
        sizes[:, layer, 1] = np.diff(need.indptr)
        sizes[:, layer, 2] = need @ stacked.in_degree[layer]
        need = need @ stacked.reach[layer]
        need.data[:] = 1
        sizes[:, layer, 0] = np.diff(need.indptr)
    return Cuts(sizes, need)


class DistinctCounter:
    """Distinct vertices in each segment of an id array, counted without sorting or clearing a table.

    Each entry j of a segment writes j into its vertex's cell of a stamp table; exactly one writer of every cell
    finds its own j there afterwards (whichever numpy kept), so counting those counts the segment's distinct
    vertices. The table is never cleared: a cell a segment reads was written by that segment.
    """

    def __init__(self, num_vertices: int) -> None:
        self.stamp = np.zeros(num_vertices, dtype=np.int64)
        self.order = np.arange(0, dtype=np.int64)

    def count(self, ids: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """(len(starts) - 1,) int64 distinct ids of every segment ``ids[starts[i]:starts[i + 1]]``.

        Shapes:
            ids: (n,) int in [0, num_vertices); starts: (k + 1,) non-decreasing, from 0 to n.
        """
        if len(self.order) < len(ids):
            self.order = np.arange(len(ids), dtype=np.int64)
        out = np.zeros(len(starts) - 1, dtype=np.int64)
        for i, (lo, hi) in enumerate(zip(starts[:-1].tolist(), starts[1:].tolist())):
            if hi > lo:
                seg, order = ids[lo:hi], self.order[: hi - lo]
                self.stamp[seg] = order
                out[i] = np.count_nonzero(self.stamp[seg] == order)
        return out
