"""Per-batch plans of one ``hongtu`` worker: its buffer slots, what it loads, pulls, serves, pushes and flushes
in every batch, and its chunk's index structures (built once, before training: HongTu's preprocessing).

Notation as :mod:`simulator.strategies.hongtu` (S_ij = the rows GPU i's buffer holds in batch j). What moves is
derived here from the buffer's contents, independently of the simulator's counts: the rows of S_ij not in the
buffer are loaded from this worker's host when it owns them and pulled from their owner otherwise (``none``:
from the owner's host, else from the owner's buffer); at dedup ``reuse`` the buffer keeps S_i,j-1 and a row
keeps its slot from one batch to the next (the in-place transition/neighbour buffer, brief §1.7), new rows
take the freed slots. One worker per machine: a machine's host rows are its worker's.

Backward: the partial gradients of N_ij's rows owned by worker k go to k (added into its buffer's gradient slots,
or at ``none`` into its host); a worker flushes the gradient rows of T_ij (``none``: its own rows of N_ij) to its
host, except, at ``reuse``, those of T_ij ∩ T_i,j+1, which stay in their slots and keep accumulating.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from gnnplan.simulator.strategies.hongtu.chunks import Chunk

_EMPTY = np.empty(0, dtype=np.int64)


def assign_slots(sets: list[np.ndarray], reuse: bool) -> tuple[list[np.ndarray], int]:
    """Buffer slots of every batch's rows.

    Args:
        sets: per batch, the sorted rows S_j.
        reuse: keep a row that stays from batch j-1 to j in its slot (new rows fill the freed slots in order);
            otherwise batch j's rows take slots 0..|S_j|-1.

    Returns:
        (per batch the slot of each row of S_j, the buffer's capacity = the most rows of a batch).
    """
    capacity = max((len(s) for s in sets), default=0)
    out: list[np.ndarray] = []
    for j, s in enumerate(sets):
        if not reuse or j == 0:
            out.append(np.arange(len(s), dtype=np.int64))
            continue
        prev, prev_slots = sets[j - 1], out[j - 1]
        stays = np.isin(s, prev, assume_unique=True)
        slots = np.empty(len(s), dtype=np.int64)
        slots[stays] = prev_slots[np.searchsorted(prev, s[stays])]
        free = np.setdiff1d(np.arange(capacity), slots[stays], assume_unique=True)
        slots[~stays] = free[: int((~stays).sum())]
        out.append(slots)
    return out, capacity


@dataclass(frozen=True)
class Fetch:
    """What one worker's buffer holds and receives in one batch (vertex ids, sorted).

    Attributes:
        rows: S_ij; slots: their buffer slots.
        load: rows loaded from its own host; pulls: per worker k, rows received from k.
        num_reused: rows already in the buffer.
    """

    rows: np.ndarray
    slots: np.ndarray
    load: np.ndarray
    pulls: list[np.ndarray]
    num_reused: int

    def slot_of(self, vertices: np.ndarray) -> np.ndarray:
        """Slots of ``vertices`` (all in ``rows``)."""
        return self.slots[np.searchsorted(self.rows, vertices)]


def fetches(level: str, slots: list[list[Chunk]], transition: list[list[np.ndarray]],
            owner: np.ndarray) -> list[list[Fetch]]:
    """``fetches[i][j]`` for every worker and batch at dedup ``level`` (module docstring)."""
    world = len(slots)
    out = []
    for i in range(world):
        sets = [c.src if level == "none" else np.union1d(transition[i][j], c.src) for j, c in enumerate(slots[i])]
        slot_lists, _ = assign_slots(sets, level == "reuse")
        row, present = [], _EMPTY
        for s, sl in zip(sets, slot_lists):
            missing = np.setdiff1d(s, present, assume_unique=True)
            pulls = [missing[owner[missing] == k] if k != i else _EMPTY for k in range(world)]
            row.append(Fetch(s, sl, missing[owner[missing] == i], pulls, len(s) - len(missing)))
            present = s if level == "reuse" else _EMPTY
        out.append(row)
    return out


def _csr(rows: np.ndarray, cols: np.ndarray, values: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    """A float32 sparse CSR matrix from COO entries.

    Shapes:
        rows, cols: (nnz,) int64; values: (nnz,) float32 -> (shape) sparse CSR.
    """
    order = np.lexsort((cols, rows))
    crow = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=shape[0]))]).astype(np.int64)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
        return torch.sparse_csr_tensor(torch.from_numpy(crow), torch.from_numpy(cols[order]),
                                       values[torch.from_numpy(order)], size=shape, check_invariants=False)


@dataclass
class BatchPlan:
    """One worker's batch j (module docstring).

    Attributes:
        chunk: global id of its chunk (seeds its dropout masks); dst: V_ij (host rows of its outputs).
        fetch: its buffer rows and what it loads and pulls.
        load_rows, load_slots: host rows it loads and their buffer slots.
        pull_slots: per worker k, the buffer slots of the rows received from k.
        serve: per worker k, what k pulls from it: its buffer slots (``none``: its host rows).
        push: per worker k, its gradient slots whose partial gradients go to k.
        take: per worker k, where the gradients k pushes land: its gradient slots (``none``: its host rows).
        flush_rows, flush_slots: gradient rows written to its host, and their slots.
        clear_slots: gradient slots zeroed after the flush (every slot of S_ij but the kept ones).
        src_slots: slots of N_ij in the block's source order.
        matrix, matrix_t: GCN's (|V_ij|, capacity) aggregation and its (|N_ij|, |V_ij|) transpose (sparse CSR).
        block: GAT's DGL block (destinations V_ij first among its sources); block_edges: its (source, destination)
            positions, the index arrays the block holds.
        positions: per split name (train, val, test), positions within V_ij; labels: their labels.
        pulls_anywhere, pushes_anywhere: whether any worker receives rows in the batch's forward fetch, or sends
            gradients in its backward push (then every worker meets at a barrier first, Algorithms 2 and 3).
    """

    chunk: int
    dst: torch.Tensor
    fetch: Fetch
    load_rows: torch.Tensor
    load_slots: torch.Tensor
    pull_slots: list[torch.Tensor]
    serve: list[torch.Tensor]
    push: list[torch.Tensor]
    take: list[torch.Tensor]
    flush_rows: torch.Tensor
    flush_slots: torch.Tensor
    clear_slots: torch.Tensor
    src_slots: torch.Tensor
    matrix: Any
    matrix_t: Any
    block: Any
    block_edges: tuple[torch.Tensor, ...]
    positions: dict[str, torch.Tensor]
    labels: dict[str, torch.Tensor]
    pulls_anywhere: bool
    pushes_anywhere: bool


def _gradient_lists(level: str, me: int, j: int, slots: list[list[Chunk]], transition: list[list[np.ndarray]],
                    owner: np.ndarray, mine: Fetch) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray,
                                                             np.ndarray]:
    """(per worker k the vertices pushed to k, per worker k the vertices k pushes here, flushed, kept)."""
    world, src = len(slots), slots[me][j].src
    push = [src[owner[src] == k] if k != me else _EMPTY for k in range(world)]
    take = [slots[k][j].src[owner[slots[k][j].src] == me] if k != me else _EMPTY for k in range(world)]
    if level == "none":
        return push, take, src[owner[src] == me], _EMPTY
    t = transition[me][j]
    nxt = transition[me][j + 1] if level == "reuse" and j + 1 < len(transition[me]) else _EMPTY
    return push, take, np.setdiff1d(t, nxt, assume_unique=True), np.intersect1d(t, nxt, assume_unique=True)


def _structures(arch: str, graph: Any, weight: torch.Tensor | None, chunk: Chunk, fetch: Fetch,
                capacity: int) -> tuple[Any, Any, Any, tuple[torch.Tensor, ...], torch.Tensor]:
    """(GCN matrix, its transpose, GAT block and its edge positions, source slots in the block's order) of one
    chunk.

    Raises:
        RuntimeError: DGL's in-edges of V_ij do not come from N_ij (the partition and the graph disagree).
    """
    import dgl

    src, dst, eids = (t.numpy() for t in graph.in_edges(torch.from_numpy(chunk.dst), form="all"))
    if not np.array_equal(np.unique(src), chunk.src):
        raise RuntimeError("hongtu: a chunk's in-edges do not match its neighbour set")
    dst_local = np.searchsorted(chunk.dst, dst)
    if weight is not None:  # GCN
        w = weight[torch.from_numpy(eids)]
        src_pos = np.searchsorted(chunk.src, src)
        matrix = _csr(dst_local, fetch.slot_of(src), w, (len(chunk.dst), capacity))
        matrix_t = _csr(src_pos, dst_local, w, (len(chunk.src), len(chunk.dst)))
        return matrix, matrix_t, None, (), torch.from_numpy(fetch.slot_of(chunk.src))
    order = np.concatenate([chunk.dst, np.setdiff1d(chunk.src, chunk.dst, assume_unique=True)])
    local = np.searchsorted(np.sort(order), src)
    position = np.argsort(order)[local]
    edges = (torch.from_numpy(position), torch.from_numpy(dst_local))
    block = dgl.create_block(edges, num_src_nodes=len(order), num_dst_nodes=len(chunk.dst))
    return None, None, block, edges, torch.from_numpy(fetch.slot_of(order))


def batch_plans(arch: str, level: str, me: int, slots: list[list[Chunk]], transition: list[list[np.ndarray]],
                owner: np.ndarray, graph: Any, weight: torch.Tensor | None, labels: np.ndarray,
                splits: dict[str, np.ndarray]) -> tuple[list[BatchPlan], int]:
    """Worker ``me``'s plan of every batch and its buffer capacity (module docstring).

    Args:
        arch: ``gcn`` or ``gat``; level: the dedup level; me: this worker.
        slots: ``slots[i][j]``, every worker's chunk per batch; transition: T_ij; owner: (|V|,) owner worker.
        graph: the DGL training graph; weight: GCN's edge weights by edge id (None for GAT).
        labels: (|V|,) int64; splits: split name -> (|V|,) bool membership.
    """
    fetch = fetches(level, slots, transition, owner)
    world, mine = len(slots), fetch[me]
    capacity = max((len(f.rows) for f in mine), default=0)
    plans = []
    for j, chunk in enumerate(slots[me]):
        push, take, flush, keep = _gradient_lists(level, me, j, slots, transition, owner, mine[j])
        at = (lambda v: v) if level == "none" else mine[j].slot_of
        serve = [mine[j].slot_of(fetch[k][j].pulls[me]) if level != "none" else fetch[k][j].pulls[me]
                 for k in range(world)]
        matrix, matrix_t, block, edges, src_slots = _structures(arch, graph, weight, chunk, mine[j], capacity)
        pos = {name: np.flatnonzero(mask[chunk.dst]) for name, mask in splits.items()}
        f = mine[j]
        plans.append(BatchPlan(
            me * len(slots[me]) + j, torch.from_numpy(chunk.dst), f, torch.from_numpy(f.load),
            torch.from_numpy(f.slot_of(f.load)), [torch.from_numpy(f.slot_of(v)) for v in f.pulls],
            [torch.from_numpy(s) for s in serve], [torch.from_numpy(mine[j].slot_of(v)) for v in push],
            [torch.from_numpy(at(v)) for v in take], torch.from_numpy(flush),
            torch.from_numpy(mine[j].slot_of(flush)),
            torch.from_numpy(np.setdiff1d(mine[j].slots, mine[j].slot_of(keep))), src_slots, matrix, matrix_t,
            block, edges, {k: torch.from_numpy(v) for k, v in pos.items()},
            {k: torch.from_numpy(labels[chunk.dst[v]]) for k, v in pos.items()},
            any(len(v) for row in fetch for v in row[j].pulls),
            any(bool((owner[row[j].src] != k).any()) for k, row in enumerate(slots))))
    return plans, capacity
