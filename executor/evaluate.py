"""Distributed full-neighbour inference, layer by layer over the whole graph: validation and test accuracy.

Layer-wise inference as in DGL's and DistDGL's GraphSAGE examples (examples/pytorch/graphsage,
``SAGE.inference``): layer l is computed for every vertex from layer l-1 of all its in-neighbours, so each
vertex's embedding is computed once per layer instead of once per mini-batch that reaches it. Work is spread
over the ranks: each machine's vertices are split evenly among its workers; a worker computes its vertices'
rows in chunks of :data:`CHUNK_VERTICES`, reading layer-0 inputs from the feature store and deeper inputs from
the other ranks' previous-layer rows (:meth:`~executor.features.RowStore.pull`). Every rank runs the same number
of chunks (collectives inside). Dropout is off; accuracy counts are per rank (sum them over ranks). The rank
layout and the chunk size are :mod:`simulator.workload.inference`'s, which measures the same blocks so that the
memory models can price them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from gnnplan.executor.assemble import TrainingData
from gnnplan.executor.data import Topology, positions_in_owner
from gnnplan.executor.features import RowStore
from gnnplan.executor.models import GNN, attach_edge_weights
from gnnplan.executor.sampling import TimedSampler
from gnnplan.executor.shared import or_private
from gnnplan.simulator.workload.inference import CHUNK_VERTICES, inference_owners


@dataclass(frozen=True)
class Accuracy:
    """Correct predictions and vertex counts of the validation and test sets (one rank's share)."""

    val_correct: int
    val_total: int
    test_correct: int
    test_total: int


class Evaluator:
    """Layer-wise inference of a model on this rank's share of the vertices.

    Args:
        data: the rank's training data (graph, feature store, labels, splits, owners).
        topo: this worker's place.
        chunk_vertices: destination vertices per block.
    """

    def __init__(self, data: TrainingData, topo: Topology, chunk_vertices: int = CHUNK_VERTICES) -> None:
        self.data, self.topo, self.chunk = data, topo, chunk_vertices
        share = or_private(data.shared, topo).array  # the same maps on every worker
        rank_of = share("inference-ranks", lambda: inference_owners(data.owner, topo.num_machines,
                                                                    topo.gpus_per_machine))
        self.rank_of = torch.from_numpy(rank_of)
        self.position = torch.from_numpy(share("inference-positions", lambda: positions_in_owner(rank_of)))
        self.mine = np.flatnonzero(rank_of == topo.rank)
        counts = np.bincount(rank_of, minlength=topo.world_size)
        self.num_chunks = max(1, math.ceil(int(counts.max()) / chunk_vertices))
        self.sampler = TimedSampler([-1])
        self.val_mask = np.isin(self.mine, data.val_idx)
        self.test_mask = np.isin(self.mine, data.test_idx)

    def run(self, model: GNN) -> Accuracy:
        """Accuracy of ``model`` on this rank's validation and test vertices (collective)."""
        correct = (self.logits(model).argmax(1) == self.data.labels[torch.from_numpy(self.mine)]).numpy()
        return Accuracy(int(correct[self.val_mask].sum()), int(self.val_mask.sum()),
                        int(correct[self.test_mask].sum()), int(self.test_mask.sum()))

    @torch.no_grad()
    def logits(self, model: GNN) -> torch.Tensor:
        """The model's last-layer rows of this rank's vertices (``mine``, in id order; collective).

        Shapes:
            -> (len(mine), num_classes) float32 on the CPU.
        """
        was_training = model.training
        model.eval()
        rows: RowStore | None = None
        for layer in range(len(model.layers)):
            outs = [self._chunk(model, layer, c, rows) for c in range(self.num_chunks)]
            rows = RowStore(torch.cat(outs), self.position)
        model.train(was_training)
        assert rows is not None  # at least one layer (ModelSpec.num_layers >= 1)
        return rows.rows

    def _chunk(self, model: GNN, layer: int, index: int, rows: RowStore | None) -> torch.Tensor:
        dst = torch.from_numpy(np.ascontiguousarray(self.mine[index * self.chunk:(index + 1) * self.chunk]))
        src, _, blocks, _ = self.sampler.sample(self.data.graph, dst)
        attach_edge_weights(blocks, self.data.edge_weight)
        if rows is None:
            h = self.data.store.load(src)[0]
        elif self.topo.world_size == 1:
            h = rows.gather(src)
        else:
            h = rows.pull(src, self.rank_of[src])[0]
        dev = self.topo.device
        return model.apply_layer(layer, blocks[0].to(dev), h.to(dev)).cpu()
