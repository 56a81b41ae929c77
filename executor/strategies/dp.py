"""Data-parallel mini-batch training (``dp``) for real: DGL sampling, distributed feature store, DDP.

The same strategy as :mod:`simulator.strategies.dp` (same ``NAME`` and ``Knobs``). Per epoch the training
vertices are shuffled with ``(training.seed, epoch)`` and split among workers
(:func:`simulator.workload.batches.split_epoch_seeds`: DistDGL's node_split, or with ``seed_split = random`` an even
cut of the shuffle, the HopGNN paper's DGL baseline); every worker takes ``batch_size // W`` seeds per iteration and
all workers run the same number of iterations (padding with empty batches). Per iteration a worker

1. samples blocks with DGL's ``NeighborSampler(fanouts)`` (inline, or ahead in ``num_sampler_workers``
   processes; ``sampler = keyed``: :class:`~executor.sampling_keyed.KeyedSampler`) — span ``sample``; with
   ``graph_structure = partitioned`` (DistDGL) each machine keeps only its vertices' in-edges and sends the other
   vertices of every layer to their owners, in the trainer
   (:class:`~executor.sampling_partitioned.PartitionedSampler`; the span's ``nbytes`` are the ids sent and edges
   received);
2. loads the input vertices' features from its cache, its machine's partition and remote owners — ``load``
   with the remote part ``fetch`` nested in it; with ``cache_placement = partitioned`` the machine's workers
   cache disjoint slices and rows in a peer's slice are pulled from it first (:class:`PeerCache`,
   ``peer_fetch``: bytes within the machine, counted in ``intra_machine_bytes``, not ``network_bytes``);
3. runs the model — ``forward``; the loss is ``sum(cross-entropy of its seeds) * W / B`` with ``B`` the global
   number of seeds of the iteration, so DDP's gradient averaging (divide by W) yields exactly the gradient of
   the global batch's mean loss even when workers hold different numbers of seeds;
4. backward — ``backward``, then DDP's gradient all-reduce — ``all_reduce`` (``nbytes`` = gradient bytes,
   ``num_buckets``); DDP's buckets hold at most ``training.ddp_bucket_bytes`` (:func:`executor.ddp.data_parallel`),
   each all-reduced as soon as backward has produced it, so with several buckets the all-reduce overlaps backward
   and the span is the part after it (from the last bucket's launch), as the simulator models. With one worker
   there is nothing to reduce: the model runs without the DDP wrapper (whose reducer costs ~10% of a small
   model's iteration) and the ``all_reduce`` span has zero length;
5. Adam (``lr``, ``weight_decay``) — ``optimizer``.

FLOPs on ``forward``/``backward``/``optimizer`` spans come from :func:`simulator.workload.model_cost.model_cost`
on the iteration's real block sizes, so calibration compares like with like.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import torch
import torch.nn.functional as F

from gnnplan.executor import comm, ddp
from gnnplan.executor.assemble import load_training_data
from gnnplan.executor.data import Topology, iteration_batches, rank_batches
from gnnplan.executor.evaluate import Accuracy, Evaluator
from gnnplan.executor.features import FeatureStore, LoadStats, PullStats, RowStore
from gnnplan.executor.models import attach_edge_weights, num_params
from gnnplan.executor.sampling import Batch, BatchStream, sample_inline
from gnnplan.executor.sampling_keyed import make_sampler
from gnnplan.executor.sampling_partitioned import PartitionedSampler
from gnnplan.executor.shared import SharedObjects, or_private
from gnnplan.executor.strategies.base import EpochStats, adam, seeded_gnn
from gnnplan.executor.trace import Recorder, defer_passes, now, record_load
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.plan import Plan
from gnnplan.simulator.strategies.base import batch_size_of
from gnnplan.simulator.strategies.dp import NAME, Knobs
from gnnplan.simulator.units import FLOAT_BYTES
from gnnplan.simulator.workload.batches import owner_split, random_split, split_epoch_seeds
from gnnplan.simulator.workload.datasets import load_dataset
from gnnplan.simulator.workload.model_cost import Block, model_cost
from gnnplan.simulator.workload.partition import cached_vertices

__all__ = ["NAME", "Knobs", "Trainer", "check_knobs"]


def check_knobs(knobs: Knobs, workload: object = None) -> None:
    """Reject knobs the executor cannot run (called by :func:`executor.runner.resolved_plan` before spawning).

    Raises:
        SpecError: ``graph_structure = partitioned`` with sampler processes: the executor samples a partitioned
            structure in the trainer, its requests to the owners being collectives
            (:mod:`executor.sampling_partitioned`); DistDGL's sampler processes calling RPC servers are simulated
            only.
    """
    if knobs.graph_structure == "partitioned" and knobs.num_sampler_workers > 0:
        raise SpecError("knobs.num_sampler_workers: with graph_structure=partitioned the executor samples in the "
                        f"trainer (collective requests to the owners); set it to 0 (got {knobs.num_sampler_workers}; "
                        "sampler processes on a partitioned structure are simulated only)")


class PeerCache:
    """``cache_placement = partitioned`` (Quiver): the machine's g workers cache disjoint slices of its
    ``g x cache_fraction`` hottest vertices (hotness rank k on local rank k mod g, as the simulator assumes); a row
    in any slice is pulled from its holder with :meth:`~gnnplan.executor.features.RowStore.pull`, the all_to_all
    of a remote fetch among the machine's ranks, standing in for a read of the peer's GPU memory over NVLink (the
    rows of the worker's own slice it gathers in place: outside the pull's own timing, ``PullStats``, but inside the
    trainer's ``peer_fetch`` span, which times the whole read).
    Construction is collective (the slice is read through the feature store).

    Args:
        store: the worker's feature store (without a replicated cache).
        dataset: ``workload.dataset`` (in-degrees rank the vertices).
        cache_fraction: fraction of all vertices each worker caches.
        topo: this worker's place.
        shared: the machine's shared objects (the holder and position maps are the same on its workers).
    """

    def __init__(self, store: FeatureStore, dataset: object, cache_fraction: float, topo: Topology,
                 shared: SharedObjects | None = None) -> None:
        g, n = topo.gpus_per_machine, len(store.owner)
        hot = cached_vertices(load_dataset(dataset).in_degrees(), min(1.0, g * cache_fraction))
        share = or_private(shared, topo).array  # the same maps on the machine's workers

        def holders() -> np.ndarray:
            holder = np.full(n, -1, dtype=np.int64)
            holder[hot] = np.arange(len(hot)) % g + topo.machine * g
            return holder

        def positions() -> np.ndarray:
            position = np.zeros(n, dtype=np.int64)
            position[hot] = np.arange(len(hot)) // g
            return position

        self.holder = torch.from_numpy(share("peer-holders", holders))
        self.rank = topo.rank
        self.slice = RowStore(store.load(torch.from_numpy(hot[topo.local_rank::g]))[0].cpu(),
                              torch.from_numpy(share("peer-positions", positions)))

    def load(self, ids: torch.Tensor) -> tuple[torch.Tensor, int, PullStats]:
        """Rows of cached vertices ``ids`` from their holders (collective).

        Shapes:
            ids: (k,) int64 -> rows (k, d) on the CPU.

        Returns:
            (rows, rows this worker holds itself, the pull's statistics).
        """
        holder = self.holder[ids]
        rows, pulled = self.slice.pull(ids, holder)
        return rows, int((holder == self.rank).sum()), pulled


class Trainer:
    """One rank of a ``dp`` run (construction is collective).

    Args:
        topo: this worker's place.
        plan: strategy ``dp``, its knobs and the workload.
        recorder: receives the spans.
    """

    def __init__(self, topo: Topology, plan: Plan, recorder: Recorder) -> None:
        self.topo, self.rec = topo, recorder
        self.workload = wl = plan.workload
        self.knobs = Knobs.model_validate(plan.knobs)
        self.per_iteration = batch_size_of(self.knobs, wl) // topo.world_size
        partitioned = self.knobs.cache_placement == "partitioned" and topo.gpus_per_machine > 1
        self.data = load_training_data(wl, self.knobs.partitioner, 0.0 if partitioned else self.knobs.cache_fraction,
                                       topo)
        self.peers = PeerCache(self.data.store, wl.dataset, self.knobs.cache_fraction, topo,
                               self.data.shared) if partitioned else None
        self.model = seeded_gnn(wl, self.data.feature_dim, self.data.num_classes, topo.device)
        self.net, self.hook = ddp.data_parallel(self.model, wl.training.ddp_bucket_bytes)
        self.gradient_bytes = FLOAT_BYTES * num_params(self.model)
        self.optimizer, self.optimizer_flops = adam(self.model, wl)
        self.sampler = make_sampler(self.knobs.sampler, wl.training.fanouts, wl.training.seed)
        evaluated = self.data
        if self.knobs.graph_structure == "partitioned":  # DistDGL: each machine samples its own vertices
            check_knobs(self.knobs)
            self.sampler = PartitionedSampler(self.data.graph, self.data.owner, topo, wl.training.fanouts,
                                              wl.training.seed if self.knobs.sampler == "keyed" else None,
                                              self.data.shared)
            part, ids = self.sampler.local_graph()  # the whole graph is dropped: only the part stays
            self.data = dataclasses.replace(self.data, graph=part)
            whole = self.data.edge_weight  # GCN's, by global edge id (the sampler's blocks carry global ids)
            weights = None if whole is None else torch.from_numpy(self.data.shared.array(
                "part-gcn-weights", lambda: whole[torch.from_numpy(ids)].numpy()))  # the part's, by its edge ids
            evaluated = dataclasses.replace(self.data, edge_weight=weights)
        d, seed = self.data, wl.training.seed
        schedule = functools.partial(rank_batches, d.train_idx, d.owner, topo.num_machines, topo.gpus_per_machine,
                                     seed, self.per_iteration, topo.rank, seed_split=self.knobs.seed_split)
        self.stream = BatchStream(d.graph, self.sampler, schedule, len(self.schedule(0)[1]),
                                  self.knobs.num_sampler_workers, seed)
        self.evaluator = Evaluator(evaluated, topo, rec=recorder, model_spec=wl.model)
        torch.manual_seed(wl.training.seed * 7919 + topo.rank)  # dropout masks differ between ranks

    def schedule(self, epoch: int) -> tuple[list[np.ndarray], list[int]]:
        """This rank's seed batches of an epoch and every iteration's global number of seeds."""
        topo, d = self.topo, self.data
        seeds = split_epoch_seeds(d.train_idx, d.owner, topo.num_machines, topo.gpus_per_machine,
                                  self.workload.training.seed, epoch, self.knobs.seed_split)
        mine, sizes = iteration_batches(seeds, self.per_iteration)
        return mine[topo.rank], sizes

    def train_epoch(self, epoch: int) -> EpochStats:
        """Train one epoch, recording spans (collective)."""
        sizes = self.schedule(epoch)[1]
        stream = self.stream.epoch(epoch)
        stats = EpochStats(num_iterations=len(sizes))
        sent, start = comm.traffic_mark(), now()
        loss_sum = torch.zeros((), dtype=torch.float64, device=self.topo.device)
        for it, size in enumerate(sizes):
            t0 = now()
            batch = next(stream)
            self.rec.add("sample", batch.start_s, batch.end_s, "sampler", epoch, it,
                         num_input_vertices=len(batch.input_nodes), num_sampled_edges=batch.num_sampled_edges,
                         num_sampler_calls=len(batch.blocks), **self._remote_sampling())
            loss_sum += self.step(batch, size, epoch, it, stats)
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

    def _remote_sampling(self) -> dict[str, int]:
        """The last batch's sampling exchange as span attributes (``graph_structure = partitioned``; as the
        simulator's ``sample`` span: ``nbytes`` = ids sent + edges received), else none."""
        if not isinstance(self.sampler, PartitionedSampler):
            return {}
        last = self.sampler.last
        return {"nbytes": last.request_bytes + last.reply_bytes, "num_remote_vertices": last.num_remote_vertices,
                "num_remote_edges": last.num_remote_edges}

    def step(self, batch: Batch, global_size: int, epoch: int = -1, it: int = -1,
             stats: EpochStats | None = None) -> torch.Tensor:
        """Load, forward, backward and gradient all-reduce of one batch (collective); no optimizer step.

        Args:
            batch: this rank's sampled batch (may have no seeds).
            global_size: seeds of this iteration summed over all ranks (> 0).
            epoch, it: span labels.
            stats: accumulates feature bytes and seeds if given.

        Returns:
            The summed cross-entropy of this rank's seeds (a detached scalar).
        """
        t0 = now()
        dev = self.topo.device
        x, loaded = self.load_features(batch.input_nodes, epoch, it)
        attach_edge_weights(batch.blocks, self.data.edge_weight)
        blocks = [b.to(dev) for b in batch.blocks] if dev.type != "cpu" else batch.blocks
        y = self.data.labels[batch.seeds].to(dev)
        t1 = now()
        self._record_load(loaded, t0, t1, epoch, it, stats, len(batch.seeds))
        self.hook.reset()
        ce = F.cross_entropy(self.net(blocks, x), y, reduction="sum")
        t2 = now()
        (ce * (self.topo.world_size / global_size)).backward()
        t3 = now()
        launched = self.hook.last_launch_s or t3  # the end of the backward computation
        sizes = [Block(b.num_src_nodes(), b.num_dst_nodes(), b.num_edges()) for b in blocks]
        defer_passes(self.rec, functools.partial(model_cost, self.workload.model, self.data.feature_dim,
                                                 self.data.num_classes, sizes), (t1, t2, launched), epoch, it)
        self.rec.add("all_reduce", launched, t3, "network", epoch, it, nbytes=self.gradient_bytes,
                     num_buckets=self.hook.num_buckets)
        return ce.detach()

    def load_features(self, ids: torch.Tensor, epoch: int = -1, it: int = -1) -> tuple[torch.Tensor, LoadStats]:
        """Features of ``ids`` from the feature store; with ``cache_placement = partitioned`` the rows in the
        machine's cache slices come from their holders first (span ``peer_fetch``, its bytes NVLink bytes), the
        rest from the store (collective)."""
        if self.peers is None:
            return self.data.store.load(ids)
        cached = self.peers.holder[ids] >= 0
        t0 = now()
        hot, own, pulled = self.peers.load(ids[cached])
        self.rec.add("peer_fetch", t0, now(), "nvlink", epoch, it, nbytes=pulled.request_bytes + pulled.reply_bytes,
                     num_peer_vertices=pulled.num_rows)
        rest, loaded = self.data.store.load(ids[~cached])
        x = torch.empty((len(ids), rest.shape[1]), device=rest.device)
        x[cached.to(x.device)] = hot.to(x.device)
        x[(~cached).to(x.device)] = rest
        return x, dataclasses.replace(loaded, num_input_vertices=len(ids), num_hit=own)

    def _record_load(self, loaded: LoadStats, t0: float, t1: float, epoch: int, it: int, stats: EpochStats | None,
                     num_seeds: int) -> None:
        hit, local, remote = record_load(self.rec, ("load", "fetch"), (t0, t1), epoch, it, loaded.row_bytes,
                                         (loaded.num_input_vertices, loaded.num_hit, loaded.num_local,
                                          loaded.num_remote), loaded.fetch)
        if stats is not None:
            stats.hit_bytes += hit
            stats.local_bytes += local
            stats.remote_bytes += remote
            stats.num_seeds += num_seeds

    def gradient(self, seeds: np.ndarray) -> dict[str, torch.Tensor]:
        """The averaged gradient of one global mini-batch with explicit seeds, by the training code path
        (collective; every rank passes the same ``seeds``, each takes its split of them).

        Args:
            seeds: (B,) int64 global batch, split among workers like an epoch's seeds (:func:`owner_split`, or
                :func:`random_split` with ``seed_split = random``).

        Returns:
            Parameter name -> gradient (CPU copies), identical on every rank.
        """
        topo = self.topo
        seeds = np.asarray(seeds, dtype=np.int64)
        parts = random_split(seeds, topo.world_size) if self.knobs.seed_split == "random" else \
            owner_split(seeds, self.data.owner, topo.num_machines, topo.gpus_per_machine)
        mine = parts[topo.rank]
        batch = sample_inline(self.data.graph, self.sampler, mine)
        self.optimizer.zero_grad()
        self.step(batch, len(seeds))
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
