"""HopGNN's data movement in the executor: micrograph redistribution, the pre-gather buffer, model migration and
the merge controller (mechanism and terms: :mod:`simulator.strategies.hopgnn`; paper-private terms are defined
in :mod:`simulator.strategies.hopgnn.micrographs`).

Notation: M -> ``num_machines``, S -> ``num_steps``, mg_d^s -> a micrograph group, |R_s| -> the pre-gather's
remote rows, m (merges) -> ``num_merges``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import dgl
import numpy as np
import torch

from gnnplan.executor import comm
from gnnplan.executor.data import Topology
from gnnplan.executor.features import FeatureStore, PullStats
from gnnplan.simulator.strategies.hopgnn.micrographs import build_blocks, cut_blocks, host_worker, seed_positions


@dataclass
class Hosted:
    """A micrograph group this worker trains at one step: model ``model``'s seeds and their rebuilt blocks."""

    model: int
    seeds: np.ndarray
    blocks: list[Any]

    @property
    def input_nodes(self) -> torch.Tensor:
        """(v,) int64 input vertices of the group."""
        return self.blocks[0].srcdata[dgl.NID]


@dataclass
class Redistribution:
    """What :func:`redistribute` did: edge ids sent to and received from other ranks, and the groups hosted."""

    hosted: dict[int, Hosted] = field(default_factory=dict)
    sent_edges: int = 0
    received_edges: int = 0


def _payload(eids: list[np.ndarray]) -> np.ndarray:
    """One group on the wire: the L per-layer edge counts, then the edge ids (int64)."""
    return np.concatenate([np.array([len(e) for e in eids], dtype=np.int64), *eids]).astype(np.int64)


def redistribute(topo: Topology, graph: Any, my_blocks: list[Any], my_seeds: np.ndarray, steps: list[int],
                 merged: list[list[np.ndarray]], num_layers: int) -> Redistribution:
    """Cut this worker's sampled batch into its micrograph groups and send each to the worker that trains it;
    rebuild the groups this worker trains (collective: two ``all_to_all_single``, counts then edge ids).

    Args:
        topo: this worker's place.
        graph: the DGL graph (every rank holds it).
        my_blocks: blocks of this worker's batch (model ``topo.rank``), as DGL sampled them.
        my_seeds: (b,) this batch's seeds (the last block's destination vertices, in order).
        steps: the remaining step indices; merged: ``merged[d][k]`` seeds of model d at step ``steps[k]``.
        num_layers: L.
    """
    me, world, g = topo.rank, topo.world_size, topo.gpus_per_machine
    out = [np.empty(0, dtype=np.int64)] * world
    result = Redistribution()
    for k, t in enumerate(steps):
        seeds = merged[me][k]
        if len(seeds):
            eids = cut_blocks(my_blocks, seed_positions(my_seeds, seeds))[0]
            out[host_worker(me, t, topo.num_machines, g)] = _payload(eids)
    send_counts = torch.tensor([len(p) for p in out], dtype=torch.int64)
    ones = [1] * world
    recv_counts = comm.all_to_all_single(torch.empty_like(send_counts), send_counts, ones, ones).tolist()
    sc = send_counts.tolist()
    got = comm.all_to_all_single(torch.empty(sum(recv_counts), dtype=torch.int64),
                                 torch.from_numpy(np.concatenate(out)), recv_counts, sc).numpy()
    result.sent_edges = sum(sc) - sc[me] - num_layers * sum(1 for r, c in enumerate(sc) if c and r != me)
    offsets = np.concatenate([[0], np.cumsum(recv_counts)])
    for src in range(world):
        if not recv_counts[src]:
            continue
        part = got[offsets[src]:offsets[src + 1]]
        sizes = part[:num_layers]
        bounds = np.concatenate([[num_layers], num_layers + np.cumsum(sizes)])
        eids = [part[bounds[i]:bounds[i + 1]] for i in range(num_layers)]
        k = next(k for k, t in enumerate(steps) if host_worker(src, t, topo.num_machines, g) == me)
        result.hosted[k] = Hosted(src, merged[src][k], build_blocks(graph, merged[src][k], eids))
        if src != me:
            result.received_edges += int(sizes.sum())
    return result


@dataclass
class Buffer:
    """Feature rows of an iteration's input vertices (the pre-gather buffer), looked up by vertex id.

    Shapes:
        ids: (u,) sorted int64; rows: (u, d) float32.
    """

    ids: torch.Tensor
    rows: torch.Tensor
    pull: PullStats | None
    num_local: int

    def lookup(self, nodes: torch.Tensor) -> torch.Tensor:
        """Rows of ``nodes`` (all must be in the buffer). Shapes: (k,) int64 -> (k, d)."""
        return self.rows[torch.searchsorted(self.ids, nodes)]


def pregather(store: FeatureStore, topo: Topology, hosted: dict[int, Hosted]) -> Buffer:
    """Gather the distinct input rows of all hosted groups: local ones from the machine's partition, remote ones
    in ONE pull from their owners (collective on a multi-machine cluster; paper §5.2)."""
    parts = [h.input_nodes for h in hosted.values()]
    ids = torch.unique(torch.cat(parts)) if parts else torch.empty(0, dtype=torch.int64)
    if topo.num_machines == 1:
        return Buffer(ids, store.store.gather(ids), None, len(ids))
    rows = torch.empty((len(ids), store.dim))
    own = store.owner[ids]
    local = own == topo.machine
    rows[local] = store.store.gather(ids[local])
    pulled, stats = store.store.pull(ids[~local], own[~local] * topo.gpus_per_machine + topo.local_rank)
    rows[~local] = pulled
    return Buffer(ids, rows, stats, int(local.sum()))


def pack(params: list[torch.Tensor], with_parameters: bool) -> torch.Tensor:
    """The migration payload: (parameters and) accumulated gradients, flattened (float32)."""
    grads = [p.grad.reshape(-1) for p in params]
    return torch.cat(([p.detach().reshape(-1) for p in params] if with_parameters else []) + grads)


def unpack(params: list[torch.Tensor], flat: torch.Tensor, with_parameters: bool) -> None:
    """Load a migration payload into the replica: parameters (if carried) and gradients."""
    offset = 0
    with torch.no_grad():
        for part in ("data", "grad") if with_parameters else ("grad",):
            for p in params:
                n = p.numel()
                getattr(p, part).copy_(flat[offset:offset + n].view_as(p))
                offset += n


def migrate(params: list[torch.Tensor], with_parameters: bool, dst: int, src: int) -> int:
    """Send this replica's state to ``dst`` and take over the one arriving from ``src`` (ring shift); returns
    the bytes sent (0 when the model stays)."""
    flat = pack(params, with_parameters)
    incoming = torch.empty_like(flat)
    comm.shift(flat, dst, incoming, src)
    unpack(params, incoming, with_parameters)
    return 0 if dst == comm.rank() else flat.numel() * flat.element_size()


class MergeController:
    """The number of merges per epoch (paper §5.3; brief §1.9 step 10).

    The first ``1 + warmup_epochs`` epochs run M steps (the paper has no warm-up: its epoch 0 is the reference;
    [inferred] a cold first epoch carries one-time costs that would make any merge look profitable); after that
    one more step is merged per epoch while the epoch time (slowest rank) falls; at the first epoch that is not
    faster than the one before, the count freezes: at the previous count with ``revert`` (the fastest seen),
    else at the current one. A fixed ``num_steps`` disables the climb.

    Args:
        num_machines: M.
        num_steps: fixed S (capped at M) or None.
        revert: see above.
        warmup_epochs: epochs at M steps before the reference epoch.
    """

    def __init__(self, num_machines: int, num_steps: int | None, revert: bool, warmup_epochs: int = 0) -> None:
        self.m, self.revert, self.warmup = num_machines, revert, warmup_epochs
        self.frozen = num_steps is not None or num_machines == 1
        self.merges = num_machines - min(num_steps or num_machines, num_machines)
        self.history: list[tuple[int, float]] = []

    @property
    def num_steps(self) -> int:
        """S of the next epoch."""
        return self.m - self.merges

    def update(self, epoch_s: float) -> None:
        """Record an epoch's time (the same on every rank) and choose the next epoch's merges."""
        self.history.append((self.num_steps, epoch_s))
        if self.frozen or len(self.history) <= self.warmup:
            return
        if len(self.history) == self.warmup + 1 or epoch_s < self.history[-2][1]:
            if self.merges < self.m - 1:
                self.merges += 1
            else:
                self.frozen = True
            return
        self.frozen = True
        if self.revert:
            self.merges -= 1


def random_rank_batches(train_idx: np.ndarray, num_workers: int, seed: int, per_iteration: int, rank: int,
                        epoch: int) -> list[np.ndarray]:
    """One worker's seed batches of an epoch with the ``random`` seed split (the sampler stream's schedule)."""
    from gnnplan.executor.data import iteration_batches
    from gnnplan.simulator.strategies.hopgnn.micrographs import random_split

    shuffled = np.random.default_rng((seed, epoch)).permutation(train_idx)
    return iteration_batches(random_split(shuffled, num_workers), per_iteration)[0][rank]


__all__ = ["Buffer", "Hosted", "MergeController", "Redistribution", "migrate", "pregather", "random_rank_batches",
           "redistribute"]
