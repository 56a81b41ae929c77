"""Sampling on a partitioned graph structure, as DistDGL does it (``dp`` with ``graph_structure = partitioned``).

Each machine keeps only the in-edges of the vertices it owns (its METIS or random partition: DistDGL's
per-machine graph partition; :func:`local_structure`). A block is sampled layer by layer from the seeds outward:
the destination vertices this machine owns are sampled at home, the others are sent to their owners (int64
ids), which sample them on their own partition and send the chosen edges back (global source, destination and
edge id, int64 each: DGL's ``SubgraphResponse``). Source: Zheng et al., "DistDGL", IA3 2020, §3.3 (distributed
sampler); dgl/distributed/graph_services.py (DGL 1.1.3). The simulator prices the same exchange
(:func:`simulator.strategies.dp.work.remote_sampling`).

Here the exchange is collective: per layer every rank takes part in four ``all_to_all`` calls (request counts,
ids, reply counts, edges; a request goes to the rank of the owner machine with the same local rank, as the
feature pulls do), where DistDGL's samplers call RPC servers; so sampling runs in the trainer
(``num_sampler_workers = 0``) and every rank samples the same number of batches (the schedule pads with empty
ones). With ``sampler = keyed`` a vertex's neighbour choice depends only on its key and its in-edges in CSC order
(:mod:`executor.sampling_keyed`), which its owner keeps in the same order, so the blocks are exactly those of the
replicated structure (tests/strategies/dp/test_dp_partitioned_structure.py). With ``sampler = dgl`` an owner
draws from its own DGL RNG stream (``dgl.sampling.sample_neighbors`` on its partition), as DistDGL's servers do.

Memory: the worker loads the whole graph to partition it and take its part, then keeps only the part: the trainer
drops the whole graph and evaluates on the part (:meth:`PartitionedSampler.local_graph`; a rank's inference blocks
are its own machine's vertices' in-edges, all in the part), so a training or evaluation epoch holds the machine's
share of the in-edges (about ``1 / M`` on an edge-balanced partition), as the simulator's memory model prices it.
A machine's workers share one copy of the part and its edge ids (:mod:`executor.shared`), as DistDGL's trainers
share their server's partition.
Measured on rmat100k, 2 machines, a random partition: 592.9 MB peak per machine against 670.1 MB replicated
(2026-11-28).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dgl
import numpy as np
import torch

from gnnplan.executor import comm
from gnnplan.executor.data import Topology
from gnnplan.executor.sampling import TimedSampler
from gnnplan.executor.sampling_keyed import choose_in_edges, make_block, vertex_keys
from gnnplan.executor.shared import SharedObjects, or_private
from gnnplan.executor.trace import now
from gnnplan.simulator.units import INDEX_BYTES

EDGE_FIELDS = 3
"""int64 values per sampled edge in a reply: global source, destination and edge id (DGL's SubgraphResponse)."""


@dataclass
class RemoteSampling:
    """What one batch's sampling exchanged with other machines (summed over its layers).

    Attributes:
        num_remote_vertices: destination vertices sent to their owners.
        num_remote_edges: sampled edges received back.
        request_bytes, reply_bytes: the int64 ids this rank sent and the edges (3 int64 each) it received, as the
            simulator counts them (``IterationWork.sample_request_bytes`` / ``sample_reply_bytes``; the per-rank counts
            exchanged first are not included).
    """

    num_remote_vertices: int = 0
    num_remote_edges: int = 0
    request_bytes: int = 0
    reply_bytes: int = 0


def local_structure(g: Any, owner: np.ndarray, machine: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The CSC of the in-edges of the vertices ``machine`` owns (the others have none), each vertex's in-edges in
    the whole graph's CSC order.

    Shapes:
        owner: (n,) int64 machine of every vertex -> (indptr (n + 1,), in-neighbours (e,), edge ids (e,)), int64.
    """
    indptr, indices, eids = (t.numpy() for t in g.adj_tensors("csc"))
    mine = np.asarray(owner) == machine
    deg = np.where(mine, np.diff(indptr), 0)
    keep = np.repeat(mine, np.diff(indptr))
    return np.concatenate([[0], np.cumsum(deg)]).astype(np.int64), indices[keep], eids[keep]


class PartitionedSampler(TimedSampler):
    """Blocks for seeds on a partitioned structure (module docstring), timed like :class:`TimedSampler`
    (collective: every rank calls :meth:`sample` for every batch, in the same order).

    Args:
        g: the graph (its structure is read once, then only this machine's part is used).
        owner: (n,) int64 machine of every vertex.
        topo: this worker's place.
        fanouts: per layer, input side first; -1 = all in-neighbours.
        keyed_seed: ``training.seed`` for the keyed neighbour choice (:mod:`executor.sampling_keyed`); None =
            DGL's ``sample_neighbors`` on the partition.
        shared: the machine's shared objects: its part and edge ids are the same on every worker of the machine,
            which hold one copy (None: this worker builds its own; construction is then not collective).
    """

    def __init__(self, g: Any, owner: np.ndarray, topo: Topology, fanouts: list[int],
                 keyed_seed: int | None, shared: SharedObjects | None = None) -> None:
        super().__init__(fanouts)
        self.fanouts, self.topo, self.keyed_seed = list(fanouts), topo, keyed_seed
        self.owner = np.asarray(owner, dtype=np.int64)
        share = or_private(shared, topo)
        built: dict[str, np.ndarray] = {}  # the edge ids of the part the machine's local rank 0 builds

        def part() -> Any:
            indptr, indices, built["eids"] = local_structure(g, self.owner, topo.machine)
            return _partition_graph(indptr, indices)

        self.part = share.graph("part", part, formats=("csc",))
        self.eids = share.array("part-eids", lambda: built.pop("eids") if "eids" in built  # part() ran here
                                else local_structure(g, self.owner, topo.machine)[2])
        self.indptr, self.indices = (t.numpy() for t in self.part.adj_tensors("csc")[:2])  # the part's own arrays
        self.last = RemoteSampling()

    def local_graph(self) -> tuple[Any, np.ndarray]:
        """This machine's part as a DGL graph over all n vertices (only the owned vertices' in-edges, in CSC order)
        and the global id of each of its edges (local edge i is global edge ``ids[i]``: index GCN's global edge
        weights with it). Sampling it with all in-neighbours gives an owned vertex's whole in-neighbourhood, what
        layer-wise inference needs (:class:`executor.evaluate.Evaluator`)."""
        return self.part, self.eids

    def sample(self, g: Any, seeds: torch.Tensor,
               key: tuple[int, int] | None = None) -> tuple[torch.Tensor, torch.Tensor, list[Any], torch.Tensor]:
        """Sample blocks for ``seeds`` at ``key`` = (epoch, iteration) (default (0, 0)); returns (input nodes,
        seeds, blocks, [start_s, end_s] float64) like :meth:`TimedSampler.sample`; :attr:`last` then holds the
        batch's exchange (:class:`RemoteSampling`). ``g`` is not read: this machine's part was taken at
        construction."""
        start = now()
        self.last = RemoteSampling()
        dst = seeds.to(torch.int64)
        blocks: list[Any] = []
        for layer in reversed(range(len(self.fanouts))):
            nodes = dst.numpy()
            src, dst_index, eids = self._layer(nodes, layer, key or (0, 0))
            block = make_block(nodes, src, dst_index, eids)
            dst = block.srcdata[dgl.NID]
            blocks.insert(0, block)
        return dst, seeds, blocks, torch.tensor([start, now()], dtype=torch.float64)

    def _layer(self, nodes: np.ndarray, layer: int, key: tuple[int, int]) -> tuple[np.ndarray, ...]:
        """(source, index into ``nodes`` of the destination, edge id) of the sampled in-edges of the distinct
        vertices ``nodes``: the owned ones chosen here, the others by their owners (collective); grouped by
        destination in ``nodes`` order, each one's edges in the order they were chosen."""
        topo = self.topo
        home = self.owner[nodes] == topo.machine
        dest = self.owner[nodes[~home]] * topo.gpus_per_machine + topo.local_rank
        got = self._exchange(nodes[~home], dest, layer, key)
        edges = np.concatenate([self._choose(nodes[home], layer, key)[0], got])
        order = np.argsort(nodes, kind="stable")
        at = order[np.searchsorted(nodes[order], edges[:, 1])]
        keep = np.argsort(at, kind="stable")
        return edges[keep, 0], at[keep], edges[keep, 2]

    def _choose(self, asked: np.ndarray, layer: int, key: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
        """The in-edges chosen for the owned vertices ``asked`` (a vertex may be asked more than once: by two
        ranks). Returns ((e, 3) int64 source, destination, edge id; (e,) index into ``asked`` of each edge's
        request), grouped by request in ``asked`` order."""
        fanout = self.fanouts[layer]
        if self.keyed_seed is not None:
            keys = vertex_keys(self.keyed_seed, key[0], key[1], layer, asked)
            pos, which = choose_in_edges(self.indptr, asked, keys, fanout)
            return np.stack([self.indices[pos], asked[which], self.eids[pos]], axis=1).astype(np.int64), which
        uniq, inverse = np.unique(asked, return_inverse=True)  # one draw per vertex, shared by its requests
        frontier = dgl.sampling.sample_neighbors(self.part, torch.from_numpy(uniq), fanout)
        src, dst = (t.numpy() for t in frontier.edges())
        eid = self.eids[frontier.edata[dgl.EID].numpy()]
        group = np.searchsorted(uniq, dst)
        by = np.argsort(group, kind="stable")
        counts = np.bincount(group, minlength=len(uniq))
        starts = np.cumsum(counts) - counts
        per = counts[inverse]
        which = np.repeat(np.arange(len(asked)), per)
        pos = np.repeat(starts[inverse], per) + np.arange(per.sum()) - np.repeat(np.cumsum(per) - per, per)
        pick = by[pos]
        return np.stack([src[pick], dst[pick], eid[pick]], axis=1).astype(np.int64), which

    def _exchange(self, ids: np.ndarray, dest: np.ndarray, layer: int, key: tuple[int, int]) -> np.ndarray:
        """Send ``ids`` to the ranks ``dest`` that own them, serve what the others ask, and return the edges
        received for ``ids`` ((e, 3) int64, grouped by the rank that served them; collective)."""
        world, dev = self.topo.world_size, comm.device()
        order = np.argsort(dest, kind="stable")
        send = torch.bincount(torch.from_numpy(dest), minlength=world)
        ones = [1] * world
        recv = comm.all_to_all_single(torch.empty_like(send, device=dev), send.to(dev), ones, ones).cpu()
        sc, rc = send.tolist(), recv.tolist()
        asked = comm.all_to_all_single(torch.empty(sum(rc), dtype=torch.int64, device=dev),
                                       torch.from_numpy(ids[order]).to(dev), rc, sc).cpu().numpy()
        served, which = self._choose(asked, layer, key)
        source = np.repeat(np.arange(world), rc)  # the rank that asked for each served request
        out_counts = torch.from_numpy(np.bincount(source[which], minlength=world).astype(np.int64))
        in_counts = comm.all_to_all_single(torch.empty_like(out_counts, device=dev), out_counts.to(dev), ones,
                                           ones).cpu()
        oc, ic = [EDGE_FIELDS * c for c in out_counts.tolist()], [EDGE_FIELDS * c for c in in_counts.tolist()]
        got = comm.all_to_all_single(torch.empty(sum(ic), dtype=torch.int64, device=dev),
                                     torch.from_numpy(np.ascontiguousarray(served).reshape(-1)).to(dev), ic,
                                     oc).cpu().numpy()
        self.last.num_remote_vertices += len(ids)
        self.last.num_remote_edges += len(got) // EDGE_FIELDS
        self.last.request_bytes += INDEX_BYTES * len(ids)
        self.last.reply_bytes += INDEX_BYTES * len(got)
        return got.reshape(-1, EDGE_FIELDS)


def _partition_graph(indptr: np.ndarray, indices: np.ndarray) -> Any:
    """A DGL graph over all ``len(indptr) - 1`` vertices holding only this machine's in-edges, stored as CSC alone
    (no COO or CSR copy is ever made; edge i is the i-th in CSC order): what ``dgl.sampling.sample_neighbors``
    draws from, as a DistDGL server's local partition, and what layer-wise inference samples."""
    n = len(indptr) - 1
    part = dgl.graph(("csc", (torch.from_numpy(indptr), torch.from_numpy(indices),
                              torch.arange(len(indices), dtype=torch.int64))), num_nodes=n)
    return part.formats("csc")
