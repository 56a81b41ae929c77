"""HongTu's two-level partitioning: m level-1 partitions (one per GPU), each cut into n destination-range chunks,
and every chunk's in-neighbour set.

Notation (brief ../shared/papers/hongtu.md §1.1): G = (V, E) -> :class:`InCSR`; m -> ``num_parts``; n ->
``num_chunks``; G_ij = (V_ij, E_ij) -> ``chunks[i][j]`` (:class:`Chunk`), V_ij -> ``Chunk.dst``, |E_ij| ->
``Chunk.num_edges``; N_ij -> ``Chunk.src``; the level-1 partition of a vertex (its owner GPU) -> ``owner``.

* The training graph is the dataset's edges with every self-loop replaced by one per vertex: both architectures
  HongTu trains here (GCN, GAT) aggregate over the vertex itself (Kipf and Welling, ICLR 2017, eq. 2: A + I;
  Velickovic et al., ICLR 2018, §2.1), the same rule as the executor's :func:`executor.data.build_graph`. With
  self-loops N_ij includes V_ij (brief §1.1, [inferred]).
* Level 1 (brief §1.3 step 1): METIS into m parts (:func:`simulator.workload.owners.partition_owners`,
  pymetis, seed 0, cached), or ``chunk``: contiguous vertex-id ranges.
* Level 2 (brief §1.3 step 2, §1.11): the vertices of partition i, renumbered contiguously in id order, are
  cut into n contiguous ranges balanced on |V| + |E| (weight 1 + in-degree per vertex); each chunk holds all
  in-edges of its destinations, so it aggregates over full neighbourhoods on its own (GAT's softmax included).
  The ``chunk`` level-1 partitioner uses the same balance. Source: brief §1.11 ("contiguous destination ranges
  balanced by |V|+|E| per chunk"); Gemini (Zhu et al., OSDI 2016, §4.1) balances a weighted vertex + edge sum.
  A partition with fewer vertices than n leaves some chunks empty.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.workload.datasets import GraphData
from gnnplan.simulator.workload.spec import SELF_LOOP_ARCHS as SELF_LOOP_ARCHS
from gnnplan.simulator.workload.spec import GeneratedSpec

PARTITIONERS = ("metis", "chunk")


@dataclass(frozen=True)
class InCSR:
    """In-neighbour CSR of the training graph.

    Shapes:
        indptr: (|V| + 1,) int64; the in-edges of v are ``indices[indptr[v]:indptr[v + 1]]``.
        indices: (|E|,) int64 source of every in-edge, grouped by destination.
    """

    num_vertices: int
    indptr: np.ndarray
    indices: np.ndarray

    @property
    def in_degrees(self) -> np.ndarray:
        """(|V|,) int64 in-degree of every vertex."""
        return np.diff(self.indptr)


@dataclass(frozen=True)
class Chunk:
    """One subgraph G_ij: a destination set and all its in-edges.

    Shapes:
        dst: (|V_ij|,) int64 sorted destination vertices V_ij.
        src: (|N_ij|,) int64 sorted distinct in-neighbours N_ij (V_ij included, through the self-loops).
    """

    dst: np.ndarray
    src: np.ndarray
    num_edges: int


def training_csr(graph: GraphData, arch: str) -> InCSR:
    """The in-neighbour CSR of the graph the executor trains ``arch`` on (self-loop rule: module docstring)."""
    src, dst = graph.src, graph.dst
    if arch in SELF_LOOP_ARCHS:
        keep = src != dst
        loops = np.arange(graph.num_vertices, dtype=np.int64)
        src, dst = np.concatenate([src[keep], loops]), np.concatenate([dst[keep], loops])
    order = np.argsort(dst, kind="stable")
    counts = np.bincount(dst, minlength=graph.num_vertices)
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return InCSR(graph.num_vertices, indptr, src[order].astype(np.int64))


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """The distinct values, ascending (sort-based: faster than ``np.unique``'s hashing on large int64 arrays).

    Shapes:
        values: (k,) int64 -> (k',) int64.
    """
    out = np.sort(values)
    return out[np.concatenate([[True], out[1:] != out[:-1]])] if len(out) else out


def balanced_ranges(weights: np.ndarray, num_parts: int) -> np.ndarray:
    """Cut a sequence into ``num_parts`` contiguous ranges of about equal total weight.

    Element k goes to the range whose share of the total its prefix sum before k falls into.

    Args:
        weights: (k,) non-negative weights, in sequence order.
        num_parts: ranges (>= 1).

    Returns:
        (k,) int64 range of every element, non-decreasing.
    """
    w = np.asarray(weights, dtype=np.float64)
    before = np.cumsum(w) - w
    total = float(w.sum())
    if total <= 0:
        return np.zeros(len(w), dtype=np.int64)
    return np.minimum((before * num_parts / total).astype(np.int64), num_parts - 1)


def level1_owner(ref: str | GeneratedSpec, graph: GraphData, csr: InCSR, num_parts: int,
                 partitioner: str) -> np.ndarray:
    """The level-1 partition (owner GPU) of every vertex.

    Args:
        ref: ``workload.dataset`` (names METIS's cache entry).
        graph: the loaded dataset.
        csr: its training graph.
        num_parts: m.
        partitioner: ``metis`` or ``chunk``.

    Returns:
        (|V|,) int64 owners in [0, m).

    Raises:
        SpecError: unknown partitioner.
    """
    if partitioner == "chunk":
        return balanced_ranges(1 + csr.in_degrees, num_parts)
    if partitioner == "metis":
        from gnnplan.simulator.workload.owners import partition_owners

        return partition_owners(ref, num_parts, "metis", 0, graph=graph)
    raise SpecError(f"partitioner: {partitioner!r} is not one of {', '.join(PARTITIONERS)}")


def two_level_chunks(csr: InCSR, owner: np.ndarray, num_parts: int, num_chunks: int) -> list[list[Chunk]]:
    """Level 2 of the partitioning (module docstring): ``chunks[i][j]`` in range order.

    Args:
        csr: the training graph.
        owner: (|V|,) level-1 partition of every vertex.
        num_parts: m.
        num_chunks: n >= 1.

    Returns:
        m lists of n chunks.
    """
    deg = csr.in_degrees
    chunk_of = np.empty(csr.num_vertices, dtype=np.int64)
    for i in range(num_parts):
        members = np.flatnonzero(owner == i)
        chunk_of[members] = i * num_chunks + balanced_ranges(1 + deg[members], num_chunks)
    edge_chunk = np.repeat(chunk_of, deg)
    pairs = sorted_unique(edge_chunk * csr.num_vertices + csr.indices)
    pair_chunk, pair_src = np.divmod(pairs, csr.num_vertices)
    total = num_parts * num_chunks
    src_bounds = np.searchsorted(pair_chunk, np.arange(total + 1))
    order = np.argsort(chunk_of, kind="stable")
    dst_bounds = np.searchsorted(chunk_of[order], np.arange(total + 1))
    edges = np.bincount(edge_chunk, minlength=total)
    return [[Chunk(order[dst_bounds[c]:dst_bounds[c + 1]], pair_src[src_bounds[c]:src_bounds[c + 1]], int(edges[c]))
             for c in range(i * num_chunks, (i + 1) * num_chunks)] for i in range(num_parts)]


def replication_factor(chunks: list[list[Chunk]], num_vertices: int) -> float:
    """alpha_{m n} = sum |N_ij| / |V|, the average number of replicas per vertex (brief §1.1, §2)."""
    return sum(len(c.src) for part in chunks for c in part) / max(num_vertices, 1)
