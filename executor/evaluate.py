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

Traced (given a recorder), each chunk's steps are spans as the simulator prices them
(:mod:`simulator.strategies.inference_time`), at ``epoch`` and iteration ``layer * num_chunks + chunk``:
``eval_sample`` (the block, one sampler call; ``num_sampled_edges``), ``eval_fetch`` (the pull of the rows other
ranks hold, a collective every rank records: layer 0 from the feature store of other machines, none on one
machine; later layers from the previous layer's rows of every other rank), ``eval_load``
(from the sampled block to the inputs and the block on the device, the fetch inside; ``local_bytes``,
``remote_bytes``, ``hit_bytes``), ``eval_forward`` (the layer on the block with its activation; FLOPs of
:func:`simulator.workload.model_cost.inference_layer_kernels`) and, on a GPU, ``eval_to_host`` (the output rows
copied back).
Calibration fits the evaluation's own rates to the ``eval_sample`` and ``eval_forward`` spans
(:func:`simulator.strategies.calibration_rules.evaluation_rules`): full-neighbour sampling and the forward kernels
of large blocks, beside training's small sampled batches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from gnnplan.executor.assemble import TrainingData
from gnnplan.executor.data import Topology, positions_in_owner
from gnnplan.executor.features import PullStats, RowStore
from gnnplan.executor.models import GNN, attach_edge_weights
from gnnplan.executor.sampling import TimedSampler
from gnnplan.executor.trace import Recorder, now, record_load
from gnnplan.simulator.trace import EVALUATION_PHASES
from gnnplan.simulator.workload.inference import CHUNK_VERTICES, inference_owners
from gnnplan.simulator.workload.model_cost import Block, inference_layer_kernels, layer_dims
from gnnplan.simulator.workload.spec import ModelSpec

SAMPLE, FETCH, LOAD, FORWARD, TO_HOST = EVALUATION_PHASES


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
        rec: the rank's span recorder (module docstring); None records nothing.
        model_spec: the model (its widths give the ``eval_forward`` spans' FLOPs); required with ``rec``.
    """

    def __init__(self, data: TrainingData, topo: Topology, chunk_vertices: int = CHUNK_VERTICES,
                 rec: Recorder | None = None, model_spec: ModelSpec | None = None) -> None:
        if rec is not None and model_spec is None:
            raise ValueError("Evaluator: a recorder needs the model_spec its spans' FLOPs come from")
        self.data, self.topo, self.chunk = data, topo, chunk_vertices
        self.rec, self.model_spec = rec, model_spec
        share = data.shared.array  # the same maps on every worker
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

    def run(self, model: GNN, epoch: int = -1) -> Accuracy:
        """Accuracy of ``model`` on this rank's validation and test vertices (collective); ``epoch`` labels the
        spans."""
        correct = (self.logits(model, epoch).argmax(1) == self.data.labels[torch.from_numpy(self.mine)]).numpy()
        return Accuracy(int(correct[self.val_mask].sum()), int(self.val_mask.sum()),
                        int(correct[self.test_mask].sum()), int(self.test_mask.sum()))

    @torch.no_grad()
    def logits(self, model: GNN, epoch: int = -1) -> torch.Tensor:
        """The model's last-layer rows of this rank's vertices (``mine``, in id order; collective); ``epoch``
        labels the spans.

        Shapes:
            -> (len(mine), num_classes) float32 on the CPU.
        """
        was_training = model.training
        model.eval()
        rows: RowStore | None = None
        for layer in range(len(model.layers)):
            outs = [self._chunk(model, layer, c, rows, epoch) for c in range(self.num_chunks)]
            rows = RowStore(torch.cat(outs), self.position)
        model.train(was_training)
        assert rows is not None  # at least one layer (ModelSpec.num_layers >= 1)
        return rows.rows

    def _chunk(self, model: GNN, layer: int, index: int, rows: RowStore | None, epoch: int) -> torch.Tensor:
        dst = torch.from_numpy(np.ascontiguousarray(self.mine[index * self.chunk:(index + 1) * self.chunk]))
        src, _, blocks, sampled = self.sampler.sample(self.data.graph, dst)
        attach_edge_weights(blocks, self.data.edge_weight)
        t0 = now()
        fetch: PullStats | None = None
        if rows is None:
            h, loaded = self.data.store.load(src)
            fetch = loaded.fetch
            row_bytes, hits = loaded.row_bytes, loaded.num_hit
        elif self.topo.world_size == 1:
            h, row_bytes, hits = rows.gather(src), rows.row_bytes, 0
        else:
            h, fetch = rows.pull(src, self.rank_of[src])
            row_bytes, hits = rows.row_bytes, 0
        dev = self.topo.device
        block, h = blocks[0].to(dev), h.to(dev)
        t1 = now()
        out = model.apply_layer(layer, block, h)
        t2 = now()
        out = out.cpu()
        if self.rec is not None:
            self._record(epoch, layer * self.num_chunks + index, layer, blocks[0], sampled, (t0, t1, t2, now()),
                         fetch, row_bytes, hits, out.shape[1] * out.element_size())
        return out

    def _record(self, epoch: int, it: int, layer: int, block: Any, sampled: torch.Tensor,
                times: tuple[float, float, float, float], fetch: PullStats | None, row_bytes: int, hits: int,
                out_row_bytes: int) -> None:
        """One chunk's spans (module docstring); the forward span's FLOPs are counted when spans are read."""
        rec, spec = self.rec, self.model_spec
        assert rec is not None and spec is not None  # __init__ requires both
        n_src, n_dst, n_edges = block.num_src_nodes(), block.num_dst_nodes(), block.num_edges()
        remote = fetch.num_rows if fetch is not None else 0
        rec.add(SAMPLE, float(sampled[0]), float(sampled[1]), "sampler", epoch, it,
                num_input_vertices=n_src, num_sampled_edges=n_edges, num_sampler_calls=1)
        record_load(rec, (LOAD, FETCH), (times[0], times[1]), epoch, it, row_bytes,
                    (n_src, hits, n_src - hits - remote, remote), fetch)

        def forward() -> None:
            d = layer_dims(spec, self.data.feature_dim, self.data.num_classes)[layer]
            kernels = inference_layer_kernels(spec.arch, d, Block(n_src, n_dst, n_edges), layer == spec.num_layers - 1)
            flops = sum(k.flops for k in kernels)
            rec.add(FORWARD, times[1], times[2], "compute", epoch, it, flops=flops, layer=layer,
                    num_src_vertices=n_src, num_dst_vertices=n_dst, num_edges=n_edges)

        rec.defer(forward)
        if self.topo.device.type != "cpu":
            rec.add(TO_HOST, times[2], times[3], "pcie", epoch, it, nbytes=n_dst * out_row_bytes)
