"""HopGNN's naive feature-centric variant (``micrograph = false``) for real: every model tours all machines with
its whole mini-batch subgraph, reading only the features stored where it stops.

Source: the brief §1.2 (paper §3.2, Fig 6; the ablation baseline "Naive"); the simulator's
:func:`simulator.strategies.hopgnn.work.naive_work` prices the same schedule. Per iteration worker r

1. samples its own mini-batch at home (``dp``'s worker-r batch, :func:`simulator.workload.batches.epoch_seeds`,
   or an even cut with ``seed_split = random``), inline — span ``sample``;
2. for each of the M machines in ring order, starting at home: the model visiting this worker (worker
   ``r - k g`` 's at step k) adds to its partial layer-1 aggregation the input rows stored on this machine
   (``load``: local rows only; nothing is fetched) and fills in the destination vertices' own rows stored here,
   then migrates to the same local rank of the next machine, carrying its parameters, the partial aggregates and
   destination rows (2 x dst_0 x D floats) and the first block's topology (destination ids; source id,
   destination index and edge id per edge, int64) — ``migrate`` (``nbytes`` = bytes sent); the M-th migration
   brings it home (the ``sample`` span's ``tour_dst`` and ``tour_edges`` give the first block's size);
3. at home: layer 1 from the aggregates (:func:`layer_from_aggregate`), the other layers on their blocks, loss
   ``sum(cross-entropy) / B``, backward — ``forward``, ``backward``; the gradients summed over workers —
   ``all_reduce``; Adam — ``optimizer``.

Layer 1 of ``sage`` (mean), ``gcn`` (weighted sum) and ``gin`` (sum) is a function of the destination rows and a
sum over the in-edges of the input rows, which adds up across machines; so the gradient equals ``dp``'s on the
same blocks up to float summation order (tests/strategies/hopgnn/test_hopgnn_naive.py). ``gat``'s attention is
not such a sum (its softmax and its backward need every input row at once): the executor refuses it, the
simulator still prices it. The parameters travel as the paper says, though layer-1 sums of raw features do not
read them.
"""

from __future__ import annotations

from typing import Any

import dgl
import numpy as np
import torch
import torch.nn.functional as F

from gnnplan.executor import comm
from gnnplan.executor.data import Topology
from gnnplan.executor.models import GNN, attach_edge_weights
from gnnplan.executor.sampling import epoch_seed, sample_inline
from gnnplan.executor.strategies.base import EpochStats
from gnnplan.executor.strategies.hopgnn.base import HopTrainerBase
from gnnplan.executor.trace import Recorder, now
from gnnplan.simulator.plan import Plan
from gnnplan.simulator.units import FLOAT_BYTES, INDEX_BYTES
from gnnplan.simulator.workload.dgl_seed import seed_dgl

ARCHS = ("sage", "gcn", "gin")
"""Models whose first layer is a sum over in-edges of the input rows (module docstring)."""


def layer_from_aggregate(model: GNN, x_dst: torch.Tensor, neigh: torch.Tensor, deg: torch.Tensor) -> torch.Tensor:
    """Layer 1 of ``model`` (with the activation and dropout that follow it) from the destination vertices' own
    rows and the sum over their in-edges of the input rows (for ``gcn`` each weighted by the edge's weight), as
    DGL's layer computes it on the block: SAGEConv ``fc_self(x) + fc_neigh(sum / deg)`` (mean; 0 without in-edges),
    GraphConv ``sum @ W + b``, GINConv ``mlp((1 + eps) x + sum)``.

    Shapes:
        x_dst, neigh: (dst_0, feature_dim); deg: (dst_0,) in-degrees in the block -> (dst_0, out).
    """
    conv = model.layers[0]
    if model.arch == "sage":
        h = conv.fc_self(x_dst) + conv.fc_neigh(neigh / deg.clamp(min=1).unsqueeze(1).to(neigh.dtype))
    elif model.arch == "gcn":
        h = neigh @ conv.weight + conv.bias
    elif model.arch == "gin":
        h = conv.apply_func((1 + conv.eps) * x_dst + neigh)
    else:
        raise ValueError(f"model.arch: {model.arch!r}; the naive variant runs {', '.join(ARCHS)}")
    if len(model.layers) > 1:
        h = model.dropout(model.activation(h))
    return h


class Tour:
    """One model's first block on its way round the machines: what it carries (module docstring, step 2).

    Attributes:
        dst: (dst_0,) int64 destination ids; edges: (e, 3) int64 (source id, destination index, edge id).
        neigh, x_dst: (dst_0, D) float32 partial aggregates and destination rows.
    """

    def __init__(self, dst: torch.Tensor, edges: torch.Tensor, dim: int) -> None:
        self.dst, self.edges = dst, edges
        self.neigh = torch.zeros((len(dst), dim))
        self.x_dst = torch.zeros((len(dst), dim))

    @classmethod
    def of_block(cls, block: Any, dim: int) -> Tour:
        """The tour of a sampled first block (input side first)."""
        src, dst = block.edges()
        ids = block.srcdata[dgl.NID]
        edges = torch.stack([ids[src.long()], dst.long(), block.edata[dgl.EID].long()], dim=1)
        return cls(block.dstdata[dgl.NID].long(), edges, dim)

    def visit(self, store: Any, owner: torch.Tensor, machine: int, edge_weight: torch.Tensor | None) -> int:
        """Add the rows stored on ``machine`` (``store.gather`` of global ids, each row read once): their part of
        every destination's sum, and the destinations' own rows. Returns the rows read: the block's input vertices
        stored there (its sources and destinations, as the simulator's ``naive_work`` prices them)."""
        src, index, eid = self.edges.unbind(1)
        here = owner[src] == machine
        mine = owner[self.dst] == machine
        ids, where = torch.unique(torch.cat([src[here], self.dst[mine]]), return_inverse=True)
        rows = store.gather(ids)
        num_here = int(here.sum())
        neighbours = rows[where[:num_here]]
        if edge_weight is not None:
            neighbours = neighbours * edge_weight[eid[here]].unsqueeze(1)
        self.neigh.index_add_(0, index[here], neighbours)
        self.x_dst[mine] = rows[where[num_here:]]
        return len(ids)

    def migrate(self, params: torch.Tensor, dst_rank: int, src_rank: int) -> tuple[Tour, torch.Tensor, int]:
        """Send this tour and ``params`` (flat float32) to ``dst_rank`` while receiving the tour and parameters
        arriving from ``src_rank`` (collective ring shift: sizes first, then the int64 and float32 parts).
        Returns (the arriving tour, its parameters, bytes sent)."""
        dim = self.neigh.shape[1]
        head = torch.tensor([len(self.dst), len(self.edges)], dtype=torch.int64)
        got = comm.shift(head, dst_rank, torch.empty(2, dtype=torch.int64), src_rank)
        n_dst, n_edges = int(got[0]), int(got[1])
        ints = torch.cat([self.dst, self.edges.reshape(-1)])
        floats = torch.cat([params, self.neigh.reshape(-1), self.x_dst.reshape(-1)])
        in_ints = comm.shift(ints, dst_rank, torch.empty(n_dst + 3 * n_edges, dtype=torch.int64), src_rank)
        in_floats = comm.shift(floats, dst_rank, torch.empty(len(params) + 2 * n_dst * dim), src_rank)
        arrived = Tour(in_ints[:n_dst], in_ints[n_dst:].view(-1, 3), dim)
        sums = in_floats[len(params):].view(2, n_dst, dim) if n_dst else torch.zeros((2, 0, dim))
        arrived.neigh, arrived.x_dst = sums[0].clone(), sums[1].clone()
        sent = INDEX_BYTES * (head.numel() + ints.numel()) + FLOAT_BYTES * floats.numel()
        return arrived, in_floats[:len(params)], sent


class NaiveTrainer(HopTrainerBase):
    """One rank of a ``hopgnn`` run with ``micrograph = false`` (construction is collective).

    Args:
        topo: this worker's place.
        plan: strategy ``hopgnn``, its knobs (``micrograph`` false) and the workload (``sage``, ``gcn`` or ``gin``).
        recorder: receives the spans.
    """

    def __init__(self, topo: Topology, plan: Plan, recorder: Recorder) -> None:
        super().__init__(topo, plan, recorder)
        self.owner = self.data.store.owner  # (n,) int64 owner machine of every vertex
        torch.manual_seed(self.workload.training.seed * 7919 + topo.rank)  # dropout masks differ between ranks

    def train_epoch(self, epoch: int) -> EpochStats:
        """Train one epoch, recording spans (collective)."""
        batches, sizes = self.schedule(epoch)
        seed_dgl(epoch_seed(self.workload.training.seed, epoch))
        stats = EpochStats(num_iterations=len(sizes))
        sent, start = comm.traffic_mark(), now()
        loss_sum = torch.zeros((), dtype=torch.float64)
        for it, size in enumerate(sizes):
            t0 = now()
            batch = sample_inline(self.data.graph, self.sampler, batches[self.topo.rank][it], (epoch, it))
            first = batch.blocks[0]
            self.rec.add("sample", batch.start_s, batch.end_s, "sampler", epoch, it,
                         num_input_vertices=len(batch.input_nodes), num_sampled_edges=batch.num_sampled_edges,
                         num_sampler_calls=len(batch.blocks), tour_dst=int(first.num_dst_nodes()),
                         tour_edges=int(first.num_edges()))
            loss_sum += self.iteration(batch, size, epoch, it, stats)
            self.optimizer_step(t0, epoch, it)
        end = now()
        self.rec.add("epoch", start, end, "host", epoch, num_steps=self.topo.num_machines)
        stats.epoch_s, stats.loss_sum = end - start, float(loss_sum)
        stats.network_bytes, stats.intra_machine_bytes = comm.traffic_since(sent)
        return stats

    def iteration(self, batch: Any, global_size: int, epoch: int = -1, it: int = -1,
                  stats: EpochStats | None = None) -> torch.Tensor:
        """The tour, forward, backward and gradient all-reduce of one batch (collective); no optimizer step.
        Returns the summed cross-entropy of this rank's seeds."""
        topo, d = self.topo, self.data
        m, g, w = topo.num_machines, topo.gpus_per_machine, topo.world_size
        for p in self.params:
            p.grad = torch.zeros_like(p)
        attach_edge_weights(batch.blocks, d.edge_weight)
        tour = Tour.of_block(batch.blocks[0], d.feature_dim)
        params = torch.cat([p.detach().reshape(-1) for p in self.params])
        weight = d.edge_weight if self.model.arch == "gcn" else None
        row_bytes = d.store.row_bytes
        for k in range(m):  # stop k on machine (home + k): then on to the next machine
            t0 = now()
            read = tour.visit(d.store.store, self.owner, topo.machine, weight)
            t1 = now()
            self.rec.add("load", t0, t1, "host", epoch, it, nbytes=read * row_bytes, local_bytes=read * row_bytes,
                         remote_bytes=0, num_input_vertices=read, step=k)
            if stats is not None:
                stats.local_bytes += read * row_bytes
            if m > 1:
                tour, params, nbytes = tour.migrate(params, (topo.rank + g) % w, (topo.rank - g) % w)
                self.rec.add("migrate", t1, now(), "network", epoch, it, nbytes=nbytes, step=k)
        return self._train(batch, tour, global_size, epoch, it, stats)

    def _train(self, batch: Any, tour: Tour, global_size: int, epoch: int, it: int,
               stats: EpochStats | None) -> torch.Tensor:
        """Forward and backward at home from the completed tour, then the gradient all-reduce."""
        t1 = now()
        dev = self.topo.device
        blocks = [b.to(dev) for b in batch.blocks] if dev.type != "cpu" else batch.blocks
        deg = blocks[0].in_degrees()
        h = layer_from_aggregate(self.model, tour.x_dst.to(dev), tour.neigh.to(dev), deg)
        for index in range(1, len(blocks)):
            h = self.model.apply_layer(index, blocks[index], h)
        y = self.data.labels[batch.seeds].to(dev)
        ce = F.cross_entropy(h, y, reduction="sum")
        t3 = self.backward(ce, global_size, blocks, t1, epoch, it, len(batch.seeds))
        self.all_reduce_gradients(t3, epoch, it)
        if stats is not None:
            stats.num_seeds += len(batch.seeds)
        return ce.detach().double()

    def gradient(self, seeds: np.ndarray) -> dict[str, torch.Tensor]:
        """The summed gradient of one global mini-batch with explicit seeds by the training code path
        (collective; every rank passes the same ``seeds`` and trains its split of them)."""
        mine = self.split(seeds)[self.topo.rank]
        self.iteration(sample_inline(self.data.graph, self.sampler, mine), len(seeds))
        return self.take_gradients()

    def close(self) -> None:
        """Nothing runs beside the trainer."""
