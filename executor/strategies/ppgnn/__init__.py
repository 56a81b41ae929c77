"""Pre-propagation GNNs (``ppgnn``) for real: SGC / SIGN on stored hop matrices, data-parallel over workers.

The same strategy as :mod:`simulator.strategies.ppgnn` (same ``NAME`` and ``Knobs``). Set-up (collective):
the ranks pre-propagate the dataset together, each its row shard (or find it cached,
:func:`executor.strategies.ppgnn.preprop.prepropagated`); every rank then opens the matrices its model reads at
the knob's placement (``placement=None``: the paper's rule, evaluated by the simulator's memory model on the
plan's cluster) and builds its loader
(:mod:`executor.strategies.ppgnn.loaders`). Per epoch the training rows are ordered by ``reshuffle`` (seeded by
``(training.seed, epoch)``, the same order on every rank), cut into global batches of ``batch_size`` rows and
each batch split into W contiguous parts, one per rank. Per iteration a rank

1. loads its part — span ``load`` (stream pcie): ``nbytes`` = bytes brought to the device (0 when the matrices
   live on it), args ``hit_bytes`` (gathered on the device), ``local_bytes`` (from host memory or files),
   ``storage_bytes`` (read from files), ``num_requests``, ``num_matrices`` (M), ``num_input_vertices`` (rows);
   with double buffering the span is the producer thread's load, overlapping the previous iteration's compute;
   the ``baseline`` loader's DataLoader workers add a ``row_index`` span (stream loader, same args) from the start
   of the batch's per-row indexing to the end of its collate, in the worker process;
2. ``forward``: the loss is ``sum(cross-entropy of its rows) * W / B`` with ``B`` the global rows of the
   iteration, so DDP's averaging gives exactly the gradient of the global batch's mean loss;
3. ``backward`` and ``all_reduce`` (DDP, buckets of ``training.ddp_bucket_bytes``: the span runs from the last
   bucket's launch; zero length with one worker, which runs without DDP);
4. ``optimizer`` (Adam with ``training.lr`` and ``training.weight_decay``).

FLOPs on the compute spans come from :func:`simulator.strategies.ppgnn.cost.model_cost` for the batch's rows.
Evaluation: every rank predicts its share of the validation and test rows (no dropout).
"""

from __future__ import annotations

import functools

import numpy as np
import torch
import torch.nn.functional as F

from gnnplan.executor import comm, ddp
from gnnplan.executor.data import Topology
from gnnplan.executor.evaluate import Accuracy
from gnnplan.executor.strategies.base import EpochStats
from gnnplan.executor.strategies.ppgnn.loaders import HopSource, LoadedBatch, epoch_order, make_loader, worker_batches
from gnnplan.executor.strategies.ppgnn.models import build_model, loaded_hops
from gnnplan.executor.strategies.ppgnn.preprop import HopFiles, prepropagated
from gnnplan.executor.trace import Recorder, defer_passes, now
from gnnplan.simulator.plan import Plan
from gnnplan.simulator.strategies import ppgnn as plugin
from gnnplan.simulator.strategies.base import SimContext, batch_size_of
from gnnplan.simulator.strategies.contract import check_workload
from gnnplan.simulator.strategies.ppgnn import NAME, Knobs, resolved_placement
from gnnplan.simulator.strategies.ppgnn import cost as ppgnn_cost
from gnnplan.simulator.workload.graphstats import dataset_summary
from gnnplan.simulator.workload.model_cost import ADAM_FLOPS_PER_PARAM

__all__ = ["EVAL_ROWS", "NAME", "Knobs", "Trainer"]

EVAL_ROWS = 65536
"""Rows predicted at once during evaluation."""


def placement_of(plan: Plan, knobs: Knobs) -> str:
    """The knob's placement, or the paper's rule on the plan's cluster (simulator memory model)."""
    if knobs.placement is not None:
        return knobs.placement
    batch = batch_size_of(knobs, plan.workload)
    ctx = SimContext(plan.cluster, plan.workload, None, dataset_summary(plan.workload.dataset), batch)  # type: ignore[arg-type]
    return resolved_placement(ctx, knobs)


class Trainer:
    """One rank of a ``ppgnn`` run (construction is collective).

    Args:
        topo: this worker's place.
        plan: strategy ``ppgnn``, its knobs and the workload.
        recorder: receives the spans.
    """

    def __init__(self, topo: Topology, plan: Plan, recorder: Recorder) -> None:
        self.topo, self.rec = topo, recorder
        self.workload = wl = plan.workload
        check_workload(plugin, wl)
        self.knobs = knobs = Knobs.model_validate(plan.knobs)
        self.batch_size = batch_size_of(knobs, wl)
        # several ranks propagate their row shards together (executor.strategies.ppgnn.preprop_shards)
        self.files: HopFiles = prepropagated(wl.dataset, knobs.hops, sharded=topo.world_size > 1)
        self.placement = placement_of(plan, knobs)
        self.source = HopSource(self.files, loaded_hops(wl.model.arch, knobs.hops), self.placement, topo.device)
        max_rows = -(-self.batch_size // topo.world_size)
        self.loader = make_loader(knobs.loader, self.source, max_rows, knobs.reshuffle)
        self.labels = torch.from_numpy(self.files.labels())
        torch.manual_seed(wl.training.seed)
        self.model = build_model(wl.model, self.files.feature_dim, self.files.num_classes, knobs.hops).to(topo.device)
        self.net, self.hook = ddp.data_parallel(self.model, wl.training.ddp_bucket_bytes)
        self.num_params = sum(p.numel() for p in self.model.parameters())
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=wl.training.lr,
                                          weight_decay=wl.training.weight_decay)
        torch.manual_seed(wl.training.seed * 7919 + topo.rank)  # dropout masks differ between ranks

    def schedule(self, epoch: int) -> tuple[list[np.ndarray], list[int]]:
        """This rank's rows per iteration of an epoch and every iteration's global number of rows."""
        k = self.knobs
        order = epoch_order(self.files.num_train, k.reshuffle, k.chunk_size or self.batch_size,
                            self.workload.training.seed, epoch)
        return worker_batches(order, self.batch_size, self.topo.rank, self.topo.world_size)

    def train_epoch(self, epoch: int, max_iterations: int | None = None) -> EpochStats:
        """Train one epoch, recording spans (collective).

        Args:
            epoch: epoch index (seeds the order).
            max_iterations: stop after this many iterations (benchmarks of slow loaders); None = all.
        """
        mine, sizes = self.schedule(epoch)
        if max_iterations is not None:
            mine, sizes = mine[:max_iterations], sizes[:max_iterations]
        stats = EpochStats(num_iterations=len(sizes))
        sent, start = comm.traffic_mark(), now()
        loss_sum = torch.zeros((), dtype=torch.float64)
        stream = self.loader.batches(mine)
        for it, size in enumerate(sizes):
            t0 = now()
            batch = next(stream)
            self._record_load(batch, epoch, it, stats)
            loss_sum += self.step(batch, size, epoch, it)
            t1 = now()
            self.optimizer.step()
            self.optimizer.zero_grad()
            t2 = now()
            self.rec.add("optimizer", t1, t2, "compute", epoch, it, flops=ADAM_FLOPS_PER_PARAM * self.num_params)
            self.rec.add("iteration", t0, t2, "host", epoch, it)
        stream.close()
        end = now()
        self.rec.add("epoch", start, end, "host", epoch)
        stats.epoch_s, stats.loss_sum = end - start, float(loss_sum)
        stats.network_bytes, stats.intra_machine_bytes = comm.traffic_since(sent)
        return stats

    def _record_load(self, batch: LoadedBatch, epoch: int, it: int, stats: EpochStats) -> None:
        on_device = self.placement == "gpu"
        storage = batch.nbytes if self.placement == "ssd" else 0
        m = self.source.num_matrices
        if batch.index_s is not None:
            self.rec.add("row_index", *batch.index_s, "loader", epoch, it, storage_bytes=storage,
                         local_bytes=batch.nbytes, num_requests=batch.num_requests, num_matrices=m,
                         num_input_vertices=len(batch.rows))
        self.rec.add("load", batch.start_s, batch.end_s, "pcie", epoch, it, nbytes=0 if on_device else batch.nbytes,
                     hit_bytes=batch.nbytes if on_device else 0, local_bytes=0 if on_device else batch.nbytes,
                     remote_bytes=0, storage_bytes=storage, num_requests=batch.num_requests, num_matrices=m,
                     num_input_vertices=len(batch.rows))
        stats.hit_bytes += batch.nbytes if on_device else 0
        stats.local_bytes += 0 if on_device else batch.nbytes
        stats.num_seeds += len(batch.rows)

    def step(self, batch: LoadedBatch, global_size: int, epoch: int = -1, it: int = -1) -> torch.Tensor:
        """Forward, backward and gradient all-reduce of one loaded batch (collective); no optimizer step.

        Returns:
            The summed cross-entropy of this rank's rows (a detached scalar).
        """
        t1 = now()
        y = self.labels[torch.from_numpy(batch.rows)].to(self.topo.device)
        self.hook.reset()
        ce = F.cross_entropy(self.net(batch.xs), y, reduction="sum")
        t2 = now()
        (ce * (self.topo.world_size / global_size)).backward()
        t3 = now()
        launched = self.hook.last_launch_s or t3  # the end of the backward computation
        defer_passes(self.rec, functools.partial(ppgnn_cost.model_cost, self.workload.model, self.files.feature_dim,
                                                 self.files.num_classes, self.knobs.hops, len(batch.rows)),
                     (t1, t2, launched), epoch, it)
        self.rec.add("all_reduce", launched, t3, "network", epoch, it, nbytes=4 * self.num_params,
                     num_buckets=self.hook.num_buckets)
        return ce.detach().double().cpu()

    @torch.no_grad()
    def evaluate(self, epoch: int = -1) -> Accuracy:
        """Validation / test accuracy counts of this rank's share of the rows (collective-free); not traced
        (``epoch`` unused)."""
        was_training = self.model.training
        self.model.eval()
        f, rank, world = self.files, self.topo.rank, self.topo.world_size
        counts = []
        for first, stop in ((f.num_train, f.num_train + f.num_val), (f.num_train + f.num_val, f.num_rows)):
            mine = np.array_split(np.arange(first, stop), world)[rank]
            correct = 0
            for a in range(0, len(mine), EVAL_ROWS):
                lo, hi = int(mine[a]), int(mine[min(a + EVAL_ROWS, len(mine)) - 1]) + 1
                pred = self.model(self.source.rows(lo, hi)).argmax(1).cpu()
                correct += int((pred == self.labels[lo:hi]).sum())
            counts += [correct, len(mine)]
        self.model.train(was_training)
        return Accuracy(*counts)

    def close(self) -> None:
        """Release the loader's threads and the files."""
        self.loader.close()
        self.source.close()
