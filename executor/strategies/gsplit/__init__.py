"""GSplit (``gsplit``) for real: split-parallel mini-batch training of GraphSAGE and GAT on N gloo workers.

The same strategy as :mod:`gnnplan.simulator.strategies.gsplit` (same ``NAME`` and ``Knobs``; terms in
:mod:`gnnplan.simulator.strategies.gsplit.split`). The graph is partitioned into one part per rank (knob
``split``); each rank keeps its partition's feature rows and caches the highest in-degree ones (``cache_fraction``).
Per iteration every rank

1. takes the iteration's global mini-batch of B seeds (the same on every rank), sampled and split by owner
   (:mod:`.batches`) — spans ``sample`` and ``split`` (in the sampler, inline or ahead in processes);
2. loads the features of its own layer-0 vertices: cache hits, then misses from its partition — ``load``;
3. runs its split of every layer with one shuffle per layer (:mod:`.layers`) — ``forward`` segments between
   ``shuffle`` spans (``nbytes`` = bytes sent; ``received_bytes``, ``intra_bytes`` / ``network_bytes`` = the
   larger of sent and received to ranks of its machine / of other machines; a shuffle span includes waiting for
   the slower splits, which the simulator shows apart as ``lockstep``); the loss is
   ``sum(cross-entropy of its own targets) / B``;
4. backward, the shuffles sending gradients back — ``backward`` segments between ``shuffle`` spans;
5. all-reduces the gradients with the project's DDP set-up (:func:`gnnplan.executor.ddp.data_parallel`: buckets
   of at most ``training.ddp_bucket_bytes``, each launched when backward has produced it, so with several they
   overlap backward and its shuffles; the loss is scaled by W so DDP's average is the sum, exactly the
   gradient of the global batch's mean loss) — ``all_reduce`` (from the last bucket's launch); then Adam —
   ``optimizer``.

Notation: g -> ``world_size`` (one split per rank), B -> ``batch_size``, P(v) -> ``owner``, C_i -> the cache of
:class:`~.batches.PartitionFeatures`, L -> layers.

FLOPs of ``forward`` / ``backward`` segments come from the simulator's kernels of the rank's split
(:func:`gnnplan.simulator.strategies.gsplit.work.segments`), so calibration compares like with like. Computing them
costs ~0.12 ms per iteration (Cora, 2 layers, an idle core), so the pass spans are recorded when the trace is read
(:meth:`gnnplan.executor.trace.Recorder.defer`), not between an iteration's all-reduce and its optimizer step,
where it was timed as part of the epoch (the measured gap there was 0.35 ms per iteration on the main job's trace
of 2026-11-28). The evaluation is ``dp``'s distributed layer-wise inference
(:class:`gnnplan.executor.evaluate.Evaluator`).
"""

from __future__ import annotations

import functools

import numpy as np
import torch
import torch.nn.functional as F

from gnnplan.executor import comm, ddp
from gnnplan.executor.assemble import load_training_data, rank0_first
from gnnplan.executor.data import PARTITION_SEED, Topology, input_features
from gnnplan.executor.evaluate import Accuracy, Evaluator
from gnnplan.executor.models import num_params
from gnnplan.executor.strategies.base import EpochStats, adam, seeded_gnn
from gnnplan.executor.strategies.gsplit.batches import (
    PartitionFeatures,
    SplitBatch,
    SplitSampler,
    SplitStream,
    machine_split_rows,
    split_slice,
)
from gnnplan.executor.strategies.gsplit.layers import LayerTensors, ShuffleLog, ShuffleRecord, ShuffleSpec, SplitNet
from gnnplan.executor.trace import Recorder, now
from gnnplan.simulator.plan import Plan
from gnnplan.simulator.strategies.base import batch_size_of
from gnnplan.simulator.strategies.gsplit import NAME, Knobs
from gnnplan.simulator.strategies.gsplit.split import global_batches
from gnnplan.simulator.strategies.gsplit.work import segments, split_cost
from gnnplan.simulator.units import FLOAT_BYTES
from gnnplan.simulator.workload.datasets import load_dataset
from gnnplan.simulator.workload.owners import partition_owners

__all__ = ["NAME", "Knobs", "Trainer"]


class Trainer:
    """One rank of a ``gsplit`` run (construction is collective).

    Args:
        topo: this worker's place.
        plan: strategy ``gsplit``, its knobs and the workload.
        recorder: receives the spans.
    """

    def __init__(self, topo: Topology, plan: Plan, recorder: Recorder) -> None:
        self.topo, self.rec = topo, recorder
        self.workload = wl = plan.workload
        self.knobs = Knobs.model_validate(plan.knobs)
        self.batch_size = batch_size_of(self.knobs, wl)
        self.data = load_training_data(wl, self.knobs.split, 0.0, topo)
        graph = load_dataset(wl.dataset)
        owners = rank0_first(lambda: partition_owners(wl.dataset, topo.world_size, self.knobs.split, PARTITION_SEED,
                                                      graph=graph))
        self.owner = self.data.shared.array("split-owners", lambda: owners)  # one per machine
        ranks = range(topo.machine * topo.gpus_per_machine, (topo.machine + 1) * topo.gpus_per_machine)
        # the machine's splits' rows, once per machine: only its local rank 0 reads the whole feature matrix, on a
        # fresh load (``graph`` would keep the matrix it caches alive until the end of this constructor)
        rows = self.data.shared.array("split-features", lambda: machine_split_rows(
            input_features(load_dataset(wl.dataset), wl.dataset), self.owner, ranks))
        self.features = PartitionFeatures(rows[split_slice(self.owner, ranks, topo.rank)], self.owner,
                                          graph.in_degrees(), topo.rank, self.knobs.cache_fraction, topo.device)
        seed = wl.training.seed
        self.model = seeded_gnn(wl, self.data.feature_dim, self.data.num_classes, topo.device)
        self.net, self.hook = ddp.data_parallel(SplitNet(self.model), wl.training.ddp_bucket_bytes)
        self.optimizer, self.optimizer_flops = adam(self.model, wl)
        self.gradient_bytes = FLOAT_BYTES * num_params(self.model)
        schedule = functools.partial(global_batches, self.data.train_idx, self.batch_size, seed)
        self.sampler = SplitSampler(self.data.graph, wl.training.fanouts, self.owner, topo.rank, topo.world_size,
                                    wl.model.arch, seed)
        self.stream = SplitStream(self.sampler, schedule, len(schedule(0)), self.knobs.num_sampler_workers)
        self.evaluator = Evaluator(self.data, topo, rec=recorder, model_spec=wl.model)
        torch.manual_seed(seed * 7919 + topo.rank)  # dropout masks differ between ranks

    def train_epoch(self, epoch: int) -> EpochStats:
        """Train one epoch, recording spans (collective)."""
        stream = self.stream.epoch(epoch)
        stats = EpochStats(num_iterations=len(self.stream.keys))
        sent, start = comm.traffic_mark(), now()
        loss_sum = torch.zeros((), dtype=torch.float64)
        for it in range(stats.num_iterations):
            t0 = now()
            batch = next(stream)
            loss_sum += self.step(batch, epoch, it, stats)
            t1 = now()
            self.optimizer.step()
            self.optimizer.zero_grad()
            t2 = now()
            self.rec.add("optimizer", t1, t2, "compute", epoch, it, flops=self.optimizer_flops)
            self.rec.add("iteration", t0, t2, "host", epoch, it)
        end = now()
        self.rec.add("epoch", start, end, "host", epoch)
        stats.epoch_s, stats.loss_sum = end - start, float(loss_sum)
        stats.network_bytes, stats.intra_machine_bytes = comm.traffic_since(sent)
        return stats

    def step(self, batch: SplitBatch, epoch: int = -1, it: int = -1, stats: EpochStats | None = None) -> torch.Tensor:
        """Load, forward, backward and gradient all-reduce of this rank's split (collective); no optimizer step.

        Returns:
            The summed cross-entropy of this rank's targets (a detached scalar).
        """
        self._record_batch(batch, epoch, it)
        dev, t0 = self.topo.device, now()
        x, hits, misses = self.features.load(batch.input_ids)
        layers = [LayerTensors.of(p, dev) for p in batch.layers]
        y = self.data.labels[torch.from_numpy(batch.target_ids)].to(dev)
        t1 = now()
        row = self.features.row_bytes
        structure = 0 if dev.type == "cpu" else sum(int(t.numel()) * t.element_size() for p in layers for t in (
            p.send_index, p.gather_index, p.scatter_index, p.degree))
        self.rec.add("load", t0, t1, "pcie", epoch, it, nbytes=misses * row + structure, hit_bytes=hits * row,
                     local_bytes=misses * row, remote_bytes=0, structure_bytes=structure,
                     num_input_vertices=len(batch.input_ids))
        log = ShuffleLog()
        specs = [ShuffleSpec(i, p.send_counts.tolist(), p.recv_counts.tolist(), log)
                 for i, p in enumerate(batch.layers)]
        self.hook.reset()
        ce = F.cross_entropy(self.net(layers, specs, x), y, reduction="sum")
        t2 = now()
        (ce * (self.topo.world_size / batch.num_seeds)).backward()
        t3 = now()
        launched = self.hook.last_launch_s or t3  # the end of the backward computation
        self.rec.add("all_reduce", launched, t3, "network", epoch, it, nbytes=self.gradient_bytes,
                     num_buckets=self.hook.num_buckets)
        sizes = [(len(p.own_src), p.num_own_dst, p.num_edges) for p in batch.layers]  # not the batch: deferred
        self.rec.defer(functools.partial(self._record_passes, sizes, log.records, (t1, t2, launched), epoch, it))
        if stats is not None:
            stats.hit_bytes += hits * row
            stats.local_bytes += misses * row
            stats.num_seeds += len(batch.target_ids)
        return ce.detach()

    def _record_batch(self, batch: SplitBatch, epoch: int, it: int) -> None:
        calls = len(batch.layers)  # one sampler call and one split call per layer
        self.rec.add("sample", batch.sample_start_s, batch.sample_end_s, "sampler", epoch, it,
                     num_sampled_edges=batch.num_sampled_edges, num_sampler_calls=calls)
        self.rec.add("split", batch.split_start_s, batch.split_end_s, "sampler", epoch, it,
                     num_split_items=batch.num_items, num_input_vertices=len(batch.input_ids),
                     num_edges=sum(p.num_edges for p in batch.layers), num_sampler_calls=calls)

    def _record_passes(self, sizes: list[tuple[int, int, int]], records: list[ShuffleRecord],
                       times: tuple[float, float, float], epoch: int, it: int) -> None:
        """Forward and backward segments between the shuffles, and the ``shuffle`` spans; ``sizes``: per layer the
        rank's (source vertices, destination vertices, edges) of its split (kept instead of the batch, whose
        arrays a deferred record would hold until the trace is read)."""
        wl, sm = self.workload, self.data
        cost = split_cost(wl.model, sm.feature_dim, sm.num_classes, *(np.array(c) for c in zip(*sizes)))
        has_backward = [any(r.layer == layer for r in _by_direction(records, "backward"))
                        for layer in range(wl.model.num_layers)]
        fwd_kernels, bwd_kernels = segments(cost, wl.model.arch, wl.model.num_layers, has_backward)
        t1, t2, t3 = times
        for phase, lo, hi, kernels in (("forward", t1, t2, fwd_kernels), ("backward", t2, t3, bwd_kernels)):
            mine = _by_direction(records, phase)
            bounds = [lo] + [x for r in mine for x in (r.start_s, r.end_s)] + [hi]
            for seg, ks in enumerate(kernels):
                self.rec.add(phase, bounds[2 * seg], bounds[2 * seg + 1], "compute", epoch, it,
                             flops=sum(k.flops for k in ks), segment=seg)
        g, me = self.topo.gpus_per_machine, self.topo.rank
        for r in records:
            intra = [p for p in range(len(r.sent)) if p // g == me // g]
            across = [p for p in range(len(r.sent)) if p // g != me // g]
            self.rec.add("shuffle", r.start_s, r.end_s, "network" if across else "nvlink", epoch, it,
                         nbytes=sum(r.sent), received_bytes=sum(r.received), layer=r.layer, direction=r.direction,
                         intra_bytes=max(sum(r.sent[p] for p in intra), sum(r.received[p] for p in intra)),
                         network_bytes=max(sum(r.sent[p] for p in across), sum(r.received[p] for p in across)))

    def gradient(self, seeds: np.ndarray) -> dict[str, torch.Tensor]:
        """The gradient of one global mini-batch with explicit seeds by the training code path (collective: every
        rank passes the same ``seeds``).

        Returns:
            Parameter name -> gradient (CPU copies), identical on every rank.
        """
        self.optimizer.zero_grad()
        self.step(self.sampler(np.asarray(seeds, dtype=np.int64)))
        grads = {n: p.grad.detach().cpu().clone() for n, p in self.model.named_parameters() if p.grad is not None}
        self.optimizer.zero_grad()
        return grads

    def evaluate(self, epoch: int = -1) -> Accuracy:
        """Validation / test accuracy counts of this rank's vertices (collective), by traced layer-wise inference
        (:class:`~gnnplan.executor.evaluate.Evaluator`; ``epoch`` labels its spans)."""
        return self.evaluator.run(self.model, epoch)

    def close(self) -> None:
        """Stop the sampler processes."""
        self.stream.close()


def _by_direction(records: list[ShuffleRecord], direction: str) -> list[ShuffleRecord]:
    return [r for r in records if r.direction == direction]
