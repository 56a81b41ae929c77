"""HongTu's deduplicated host-GPU communication: the greedy subgraph reorganisation (Algorithm 4), the transition
sets, the communication volumes and cost of Eq. 4, and what every GPU moves per batch at each dedup level.

Notation (brief ../shared/papers/hongtu.md §1.1, §1.6): batch j = the chunks in slots (i, j), i < m; TU_j (paper
ℕ_j^U) -> ``transition[j]`` = ∪_i N_ij; T_ij (paper ℕ_ij) -> ``owned_transition[i][j]`` = the part of TU_j whose
level-1 owner is GPU i (owner-based assignment, brief §1.6 [inferred]: GPU i then reads only its own host
rows); T_ij^gpu = T_ij ∩ T_i,j-1 (reused in place), T_ij^cpu = T_ij \\ T_i,j-1 (loaded over PCIe); S_ij = T_ij ∪
N_ij, the merged transition/neighbour buffer (brief §1.7); V_ori, V_+p2p, V_+ru -> :class:`Volumes`.

Dedup levels (knob ``dedup``; brief §6, §7 "Baseline"):

* ``none`` (Baseline): GPU i loads its whole N_ij; rows owned by another machine's GPU are read from that
  machine's host (the NUMA remote read of brief §1.2, across the network on a multi-machine cluster).
* ``gpu`` (+P2P, Algorithm 2): GPU i loads T_ij over PCIe and pulls N_ij ∩ T_kj from GPU k (NVLink within a
  machine, PCIe + network + PCIe across machines).
* ``reuse`` (+RU): as ``gpu``, but rows of S_i,j-1 stay in their buffer slots: GPU i loads T_ij \\ S_i,j-1 (= T_ij^cpu,
  since a row of T_ij in N_i,j-1 has owner i and so is in T_i,j-1) and pulls only (N_ij ∩ T_kj) \\ N_i,j-1 (the
  in-place neighbour buffer, brief §1.7).

Backward (Algorithm 3): every GPU pushes the partial gradients of N_ij ∩ T_kj to GPU k (``none``: to the host of
the row's machine), then writes the gradients of T_ij to its host, where the CPU adds them; at ``reuse`` the rows of
T_ij ∩ T_i,j+1 stay on the GPU and keep accumulating (brief §1.6, [inferred] "shared with the next batch").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from gnnplan.simulator.hardware import pricing
from gnnplan.simulator.hardware.collectives import intra_machine_link
from gnnplan.simulator.hardware.spec import ClusterSpec
from gnnplan.simulator.strategies.hongtu.chunks import Chunk, sorted_unique

DEDUP_LEVELS = ("none", "gpu", "reuse")


def _incidence(sets: list[np.ndarray], num_vertices: int) -> sp.csr_matrix:
    """(len(sets), |V|) 0/1 matrix with a 1 where a vertex is in a set."""
    rows = np.repeat(np.arange(len(sets)), [len(s) for s in sets])
    cols = np.concatenate(sets) if sets else np.empty(0, dtype=np.int64)
    return sp.csr_matrix((np.ones(len(cols), dtype=np.int64), (rows, cols)), shape=(len(sets), num_vertices))


def _greedy_pick(scores: np.ndarray, free: np.ndarray) -> int:
    """Index of the largest score among the free ones (ties: the smallest index)."""
    return int(np.argmax(np.where(free, scores, -1)))


def reorganise(chunks: list[list[Chunk]], num_vertices: int) -> list[list[int]]:
    """Algorithm 4 (brief §1.8): permute each partition's chunks into batch slots.

    Phase 1 fills the batches in j order, partition by partition: slot (i, j) gets the unplaced chunk of
    partition i sharing most neighbours with TU_j so far (partition 0 keeps its order). Phase 2 orders the
    batches as a greedy chain: batch 0 first, then repeatedly the unplaced batch sharing most of TU with the
    batch placed last. The brief's loop-bound errata (§1.8) are applied: Phase 2 covers every partition and
    removes a batch once it is placed.

    Args:
        chunks: ``chunks[i][a]``, the chunks of partition i in range order.
        num_vertices: |V|.

    Returns:
        ``placement[i][j]``: index into ``chunks[i]`` of the chunk in slot (i, j).
    """
    m, n = len(chunks), len(chunks[0])
    union = [c.src for c in chunks[0]]
    phase1 = [list(range(n))]
    for i in range(1, m):
        overlap = (_incidence([c.src for c in chunks[i]], num_vertices)
                   @ _incidence(union, num_vertices).T).toarray()
        free, row = np.ones(n, dtype=bool), []
        for j in range(n):
            k = _greedy_pick(overlap[:, j], free)
            free[k] = False
            row.append(k)
            union[j] = sorted_unique(np.concatenate([union[j], chunks[i][k].src]))
        phase1.append(row)
    batches = _incidence(union, num_vertices)
    shared = (batches @ batches.T).toarray()
    order, free = [0], np.ones(n, dtype=bool)
    free[0] = False
    for _ in range(1, n):
        k = _greedy_pick(shared[order[-1]], free)
        free[k] = False
        order.append(k)
    return [[row[b] for b in order] for row in phase1]


def identity_placement(num_parts: int, num_chunks: int) -> list[list[int]]:
    """Every chunk in its own range slot (no reorganisation)."""
    return [list(range(num_chunks)) for _ in range(num_parts)]


def placed(chunks: list[list[Chunk]], placement: list[list[int]]) -> list[list[Chunk]]:
    """``chunks`` rearranged so that ``result[i][j]`` is the chunk in slot (i, j)."""
    return [[part[a] for a in slots] for part, slots in zip(chunks, placement)]


def transition_sets(slots: list[list[Chunk]], owner: np.ndarray) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
    """(TU_j for every batch, T_ij for every GPU and batch), sorted vertex arrays (module docstring)."""
    m, n = len(slots), len(slots[0])
    union = [sorted_unique(np.concatenate([slots[i][j].src for i in range(m)])) for j in range(n)]
    return union, [[tu[owner[tu] == i] for tu in union] for i in range(m)]


@dataclass(frozen=True)
class Volumes:
    """Eq. 4's vertex-row volumes of one pass over one layer (brief §2).

    Attributes:
        v_ori: sum over batches and GPUs of |N_ij| (every chunk ships its whole neighbour set).
        v_p2p: sum over batches of |TU_j| (after inter-GPU dedup).
        v_ru: |TU_0| + sum_{j>=1} |TU_j \\ TU_{j-1}| (after intra-GPU reuse).
    """

    v_ori: int
    v_p2p: int
    v_ru: int


def volumes(slots: list[list[Chunk]], owner: np.ndarray) -> Volumes:
    """Eq. 4's V_ori, V_+p2p and V_+ru of a placement. Source: HongTu §5.3, Eq. 4 (index ranges j < n, i < m)."""
    union, _ = transition_sets(slots, owner)
    fresh = len(union[0]) + sum(len(np.setdiff1d(union[j], union[j - 1], assume_unique=True))
                                for j in range(1, len(union)))
    return Volumes(sum(len(c.src) for part in slots for c in part), sum(len(u) for u in union), fresh)


def communication_cost_s(cluster: ClusterSpec, vol: Volumes, row_bytes: float) -> float:
    """Eq. 4: C = V_+ru / T_hd + (V_ori - V_+p2p) / T_dd + (V_+p2p - V_+ru) / T_ru for rows of ``row_bytes``.

    Throughput terms only, as Eq. 4: T_hd is the PCIe link (:func:`~simulator.hardware.pricing.bandwidth_s`); T_dd
    the GPU-GPU path, which on a multi-machine cluster crosses PCIe, the network and PCIe
    (:func:`~simulator.hardware.pricing.exchange_per_byte_s`), else NVLink (PCIe without it); T_ru a gather in GPU
    memory (:func:`~simulator.hardware.pricing.gpu_gather_s`). Source: HongTu §5.3, Eq. 4 (brief §2; the
    volumes in rows times the row width in bytes, [inferred]).
    """
    peer = (vol.v_ori - vol.v_p2p) * row_bytes
    d2d = peer * pricing.exchange_per_byte_s(cluster) if cluster.num_machines > 1 else \
        pricing.bandwidth_s(intra_machine_link(cluster)[0], peer)
    return (pricing.bandwidth_s(cluster.pcie, vol.v_ru * row_bytes) + d2d
            + pricing.gpu_gather_s(cluster, (vol.v_p2p - vol.v_ru) * row_bytes))


@dataclass(frozen=True)
class BatchCounts:
    """What GPU i moves in slot (i, j) at one dedup level, in vertex rows (module docstring).

    Attributes:
        num_dst, num_edges, num_src: |V_ij|, |E_ij|, |N_ij|.
        buffer_rows: rows of GPU i's vertex buffer in this batch (|N_ij| at ``none``, |S_ij| otherwise).
        load_rows: rows its PCIe loads from its own machine's host.
        pull_rows: per worker k, rows received from k in the forward fetch (k's GPU, or k's host at ``none``).
        reused_rows: rows of the previous batch's buffer used again in place.
        push_rows: per worker k, gradient rows sent to k in the backward pass (to k's GPU, or to the host of k's
            machine at ``none``).
        flush_rows: gradient rows written to its own machine's host and accumulated there by the CPU.
    """

    num_dst: int
    num_edges: int
    num_src: int
    buffer_rows: int
    load_rows: int
    pull_rows: tuple[int, ...]
    reused_rows: int
    push_rows: tuple[int, ...]
    flush_rows: int


CARD_VERTEX_FIELDS = ("num_dst", "num_src", "buffer_rows", "load_rows", "pull_rows", "reused_rows", "push_rows",
                      "flush_rows")
CARD_EDGE_FIELDS = ("num_edges",)
""":class:`BatchCounts` fields scaled from a dataset card's proxy to the card
(:func:`simulator.workload.proxy.for_card`): rows (vertex counts) and edges (extensive rule)."""


def _remote_rows(vertices: np.ndarray, owner: np.ndarray, rank: int, num_parts: int, gpus_per_machine: int,
                 peers_same_machine: bool) -> tuple[int, ...]:
    """Per worker k != rank, the rows of ``vertices`` that k owns (same-machine k only if asked)."""
    counts = np.bincount(owner[vertices], minlength=num_parts)
    machine = rank // gpus_per_machine
    return tuple(int(c) if k != rank and (peers_same_machine or k // gpus_per_machine != machine) else 0
                 for k, c in enumerate(counts))


def batch_counts(slots: list[list[Chunk]], owner: np.ndarray, level: str,
                 gpus_per_machine: int) -> list[list[BatchCounts]]:
    """Every GPU's :class:`BatchCounts` in every batch at dedup ``level`` (module docstring).

    Args:
        slots: ``slots[i][j]``, the chunk of GPU i in batch j (after any reorganisation).
        owner: (|V|,) level-1 owner GPU of every vertex.
        level: ``none``, ``gpu`` or ``reuse``.
        gpus_per_machine: GPUs per machine (host memory is per machine).

    Returns:
        ``counts[i][j]``.
    """
    m, n = len(slots), len(slots[0])
    _, t = transition_sets(slots, owner)
    out = []
    for i in range(m):
        row, prev_s, prev_n = [], np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        local = owner // gpus_per_machine == i // gpus_per_machine
        for j, c in enumerate(slots[i]):
            if level == "none":
                remote = _remote_rows(c.src, owner, i, m, gpus_per_machine, False)
                row.append(BatchCounts(len(c.dst), c.num_edges, len(c.src), len(c.src), int(local[c.src].sum()),
                                       remote, 0, remote, int(local[c.src].sum())))
                continue
            s = sorted_unique(np.concatenate([t[i][j], c.src]))
            push = _remote_rows(c.src, owner, i, m, gpus_per_machine, True)
            reuse = level == "reuse"
            fresh_n = np.setdiff1d(c.src, prev_n, assume_unique=True) if reuse else c.src
            pull = _remote_rows(fresh_n, owner, i, m, gpus_per_machine, True)
            load = np.setdiff1d(t[i][j], prev_s, assume_unique=True) if reuse else t[i][j]
            nxt = t[i][j + 1] if reuse and j + 1 < n else np.empty(0, dtype=np.int64)
            flush = len(np.setdiff1d(t[i][j], nxt, assume_unique=True))
            reused = len(np.intersect1d(s, prev_s, assume_unique=True)) if reuse else 0
            row.append(BatchCounts(len(c.dst), c.num_edges, len(c.src), len(s), len(load), pull, reused, push, flush))
            prev_s, prev_n = s, c.src
        out.append(row)
    return out
