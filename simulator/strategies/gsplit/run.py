"""The simulated epoch window of ``gsplit``: per machine a sampler that samples and splits one mini-batch per
iteration, per GPU a trainer that runs the split in lockstep with every other GPU.

Notation: g -> ``gpus_per_machine`` (GPUs sharing a sampler), W -> ``num_workers`` (= splits), L -> layers.

Per iteration (brief §1.2, §1.5, §2.3):

* ``sample`` and ``split`` (stream ``sampler``, on the machine's first GPU's time line): one mini-batch for all
  GPUs, then the online split, on one host core each (:meth:`~gnnplan.simulator.hardware.model.HardwareModel.sample`
  with the sampled edges in one call per layer, ``host.sampler_call_s``; then
  :func:`~gnnplan.simulator.hardware.pricing.split_s` of the split's vertex lookups, one call per layer,
  ``host.split_call_s``). With ``num_sampler_workers`` k > 0, k sampler
  processes per machine run ahead (sampler j takes iterations j, j + k, ...), at most ``PREFETCH_FACTOR * k``
  batches ahead of the trainers; with 0 the first GPU's trainer samples inline and the others wait for it.
* ``load``: host gather of the split's misses, one host-to-device copy of misses and structure, GPU gather of
  cache hits.
* forward: segment l on the GPU, then shuffle l, one collective call
  (:meth:`~gnnplan.simulator.strategies.window_run.WindowRun._collective`): ``lockstep`` (wait until every GPU reaches
  it: the slowest split sets the pace; the executor cannot tell this wait from the exchange, its ``shuffle``
  spans hold both) and ``shuffle`` l: the call's fixed cost (``network.per_all_to_all_s``), then all GPU pairs'
  messages at once, one per pair, over NVLink
  (:meth:`~gnnplan.simulator.hardware.model.HardwareModel.gpu_to_gpu`, PCIe through the host without it) inside
  a machine and device-to-host, network, host-to-device across machines (the network alone with GPUDirect RDMA:
  :meth:`~gnnplan.simulator.hardware.model.HardwareModel.gpu_network`); a GPU goes on when its own messages
  (sent and received) have arrived. After the last shuffle the last segment and the loss.
* backward: the same in reverse, gradients flowing back along each pair (j to i).
* ``all_reduce`` of the gradients (after every GPU arrives), ``optimizer``, ``iteration_overhead_s``. When the
  gradients fill several DDP buckets (``training.ddp_bucket_bytes``), bucket k's all-reduce starts once backward
  has produced it (:class:`~gnnplan.simulator.strategies.ddp_buckets.BucketedBackward`, over the backward segments and
  their shuffles) and ``all_reduce`` is the part after backward.

With sampler processes every trainer takes its machine's split batch from them (``host.sampler_handoff_s``,
host work on one of the machine's cores) before it loads.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from gnnplan.simulator import symmetry
from gnnplan.simulator.hardware import pricing
from gnnplan.simulator.strategies.base import SimContext
from gnnplan.simulator.strategies.ddp_buckets import BucketedBackward
from gnnplan.simulator.strategies.gsplit.work import IterationWork
from gnnplan.simulator.strategies.window import PREFETCH_FACTOR, IterationPlan
from gnnplan.simulator.strategies.window_run import WindowRun
from gnnplan.simulator.trace import Span

PHASES = ("sample", "split", "load", "forward", "lockstep", "shuffle", "backward", "all_reduce", "optimizer")


class SplitRun(WindowRun):
    """One simulated epoch window (module docstring).

    Args:
        ctx: the context.
        plan: the epoch's iterations (one global mini-batch per iteration).
        works: the work of each window position.
        num_sampler_workers: sampler processes per machine (0 = inline on the machine's first GPU).
    """

    DDP = True  # the executor trains with DistributedDataParallel (executor.ddp.data_parallel), as dp's does
    DEFER_IMAGES = True  # gsplit.simulate copies the laid-out spans (WindowRun.with_images)

    def __init__(self, ctx: SimContext, plan: IterationPlan, works: list[IterationWork],
                 num_sampler_workers: int) -> None:
        super().__init__(ctx, plan, num_sampler_workers,
                         rank_works=rank_works(works, ctx.num_workers, ctx.cluster.gpus_per_machine))
        self.works, self.k = works, num_sampler_workers
        self.g, self.w = ctx.cluster.gpus_per_machine, ctx.num_workers
        n, machines = len(plan.window), ctx.cluster.num_machines
        self.ready = [[self.engine.event() for _ in range(n)] for _ in range(machines)]
        self.taken = [[self.engine.event() for _ in range(n)] for _ in range(machines)]
        self.messages: dict[tuple[Any, ...], Any] = {}
        self.sent: dict[tuple[Any, ...], list[list[float]]] = {}
        self.bundles: dict[tuple[Any, ...], list[list[Any]]] = {}

    def execute(self) -> None:
        """Run every simulated trainer and its machine's samplers to the end of the window."""
        g = self.ctx.cluster.gpus_per_machine
        for rank in self.ranks:
            self.engine.process(self._trainer(rank))
        for machine in sorted({rank // g for rank in self.ranks}):
            for j in range(self.k):
                self.engine.process(self._sampler(machine * g, j))
        self.engine.run()

    def _sample(self, leader: int, pos: int) -> Generator[Any, Any, None]:
        work, machine = self.works[pos], self.hw.machine_of(leader)
        calls = float(len(work.has_backward))                          # one sampler call per layer
        start = self.engine.now
        yield self.hw.sample(machine, work.num_sampled_edges, calls)
        self._span(leader, "sample", start, "sampler", pos, num_sampled_edges=work.num_sampled_edges,
                   num_sampler_calls=calls)
        start = self.engine.now
        yield self.hw.host_work(machine, pricing.split_s(self.ctx.cluster, work.num_items, calls))  # per layer
        self._span(leader, "split", start, "sampler", pos, num_split_items=work.num_items, num_sampler_calls=calls)
        self.ready[machine][pos].succeed()

    def _sampler(self, leader: int, j: int) -> Generator[Any, Any, None]:
        machine, depth = self.hw.machine_of(leader), PREFETCH_FACTOR * self.k
        for pos in range(j, len(self.plan.window), self.k):
            if pos >= depth:
                yield self.taken[machine][pos - depth]
            yield from self._sample(leader, pos)

    def _trainer(self, rank: int) -> Generator[Any, Any, None]:
        g = self.ctx.cluster.gpus_per_machine
        machine, local = divmod(rank, g)
        for pos, work in enumerate(self.works):
            start = self.engine.now
            if self.k == 0 and local == 0:
                yield from self._sample(rank, pos)
            yield self.ready[machine][pos]
            if local == 0 and self.k:
                self.taken[machine][pos].succeed()
            if self.k:
                yield from self.hw.sampler_handoff(rank)
            yield from self._load(rank, pos, work)
            bucketed = yield from self._passes(rank, pos, work, self._ddp_buckets(work.gradient_bytes))
            if bucketed is None:
                yield from self._all_reduce(rank, pos, work.gradient_bytes)
            else:  # the DDP buckets' all-reduces overlapped backward; wait for the last one
                yield from bucketed.finish()
            yield from self._optimizer(rank, pos, work, start)
        self._end_epoch(rank)

    def _load(self, rank: int, pos: int, work: IterationWork) -> Generator[Any, Any, None]:
        split, start = work.splits[rank], self.engine.now
        yield self.hw.host_gather(split.miss_bytes, rank)
        yield self.hw.host_to_gpu(rank, split.miss_bytes + split.structure_bytes)
        yield from self.hw.gpu_gather(rank, split.hit_bytes)
        self._span(rank, "load", start, "pcie", pos, nbytes=split.miss_bytes + split.structure_bytes,
                   hit_bytes=split.hit_bytes, local_bytes=split.miss_bytes, remote_bytes=0.0,
                   structure_bytes=split.structure_bytes, num_input_vertices=split.num_input_vertices)

    def _passes(self, rank: int, pos: int, work: IterationWork,
                buckets: list[float] | None = None) -> Generator[Any, Any, BucketedBackward | None]:
        """Forward segments with the shuffles of layers 0..L-1 between them, then backward segments with the
        backward shuffles of the layers that have one, L-1..0. With ``buckets`` (several DDP buckets,
        :meth:`~simulator.strategies.window_run.WindowRun._ddp_buckets`) each bucket's all-reduce starts once the
        backward segments so far have produced it, overlapping the rest of backward and its shuffles; returns
        that :class:`~simulator.strategies.ddp_buckets.BucketedBackward` (None without buckets)."""
        split, num_layers = work.splits[rank], len(work.has_backward)
        backward = [layer for layer in reversed(range(num_layers)) if work.has_backward[layer]]
        bucketed = None
        for phase, seconds, flops, layers in (("forward", split.forward_s, split.forward_flops, range(num_layers)),
                                              ("backward", split.backward_s, split.backward_flops, backward)):
            if phase == "backward" and buckets is not None:
                bucketed = BucketedBackward(self, rank, pos, buckets, float(sum(seconds)))
            for seg, (seg_s, seg_flops) in enumerate(zip(seconds, flops)):
                t0 = self.engine.now
                if bucketed is not None:
                    yield from bucketed.compute(seg_s)
                else:
                    yield from self.hw.compute(rank, seg_s)
                self._span(rank, phase, t0, "compute", pos, flops=seg_flops, segment=seg)
                if seg < len(layers):
                    yield from self._shuffle(rank, pos, work, layers[seg], phase)
        return bucketed

    def _shuffle(self, rank: int, pos: int, work: IterationWork, layer: int,
                 phase: str) -> Generator[Any, Any, None]:
        t0, g = self.engine.now, self.ctx.cluster.gpus_per_machine
        fwd = work.shuffle_bytes[layer]
        # one all-to-all call: wait for every GPU (the lockstep), then the call's fixed cost
        waited = yield from self._collective(rank, ("shuffle", pos, layer, phase), float(fwd.sum()))
        t1 = t0 + waited
        self.spans.append(Span(rank, "lockstep", t0, waited, "host", 0.0, 0.0, 0, self.plan.window[pos],
                               {"layer": layer, "direction": phase}))
        out = fwd[rank] if phase == "forward" else fwd[:, rank]                      # bytes to each peer
        back = fwd[:, rank] if phase == "forward" else fwd[rank]                     # bytes from each peer
        peers = [p for p in range(self.ctx.num_workers) if p != rank]
        key = (pos, layer, phase)
        if key not in self.sent:                                   # sent[i][j]: bytes from GPU i to GPU j
            self.sent[key] = (fwd if phase == "forward" else fwd.T).tolist()
        sent = self.sent[key]
        if self.represent.folded:
            waits = self._folded(key, sent)[rank]
        else:
            waits = [self._message(key + (rank, p), rank, p, sent) for p in peers]
            waits += [self._message(key + (p, rank), p, rank, sent) for p in peers]
        yield self.engine.all_of(waits)
        intra = [p for p in peers if p // g == rank // g]
        across = [p for p in peers if p // g != rank // g]
        self._span(rank, "shuffle", t1, "network" if across else "nvlink", pos, nbytes=float(out.sum()),
                   received_bytes=float(back.sum()), layer=layer, direction=phase,
                   intra_bytes=max(float(out[intra].sum()), float(back[intra].sum())),
                   network_bytes=max(float(out[across].sum()), float(back[across].sum())))

    def _message(self, key: tuple[Any, ...], src: int, dst: int, sent: list[list[float]]) -> Any:
        """The event of one pair's message (``sent[src][dst]`` bytes); the first GPU that needs it starts it (both
        start it at the same simulated time, so the order is irrelevant)."""
        if key not in self.messages:
            self.messages[key] = self._send(src, dst, sent[src][dst], 1)
        return self.messages[key]

    def _folded(self, key: tuple[Any, ...], sent: list[list[float]]) -> list[list[Any]]:
        """When only machine 0 runs (:mod:`simulator.symmetry`): start every message of shuffle ``key`` that
        machine 0's GPUs send, and return, per local GPU, the events of the messages it waits for (started at the
        first call; every GPU calls at the same simulated time).

        A message a GPU of machine 0 receives from GPU ``l'`` of machine m is the image, under the shift that
        takes the sender to machine 0, of the message ``l'`` sends to the same GPU of machine ``M - m``: the same
        bytes, started at the same time. So GPU ``l`` waits for what it sends, what machine 0's GPUs send it, and
        what they send to GPU ``l`` of every other machine. The messages from one GPU to the same GPU of machines
        1..M-1 cross the same (folded) resources; those with equal bytes are identical flows, started as one
        with their count (:meth:`~simulator.fluid.FluidScheduler.start`), which gives each its own max-min share
        exactly, as separate flows would."""
        if key not in self.bundles:
            g, w = self.g, self.w
            waits: list[list[Any]] = [[] for _ in range(g)]
            for src in range(g):
                row = sent[src]
                for dst in range(g):                                 # on machine 0: NVLink (or PCIe)
                    if dst != src:
                        event = self._send(src, dst, row[dst], 1)
                        waits[src].append(event)
                        waits[dst].append(event)
                for local in range(g):                               # to GPU `local` of machines 1..M-1
                    counts: dict[float, int] = {}
                    for dst in range(g + local, w, g):
                        counts[row[dst]] = counts.get(row[dst], 0) + 1
                    for nbytes, count in counts.items():
                        event = self._send(src, g + local, nbytes, count)
                        waits[src].append(event)
                        waits[local].append(event)
            self.bundles[key] = waits
        return self.bundles[key]

    def _send(self, src: int, dst: int, nbytes: float, count: int) -> Any:
        """Start ``count`` identical messages of ``nbytes`` from ``src`` to ``dst`` (the others to GPUs whose
        resources are the same as ``dst``'s) and return the event of their arrival."""
        hw = self.hw
        if nbytes <= 0:
            return self.engine.event().succeed()
        if hw.machine_of(src) == hw.machine_of(dst):
            return hw.gpu_to_gpu(src, dst, nbytes, count=count)
        # staged: device-to-host, network, host-to-device one after the other (pricing.exchange_s); the NICs alone
        # with GPUDirect RDMA, or on a CPU-only cluster (rows already in host memory)
        return hw.gpu_network(src, dst, nbytes, store_and_forward=True, count=count)


def rank_works(works: list[IterationWork], num_workers: int, gpus_per_machine: int) -> list[tuple[Any, ...]]:
    """Each rank's work in the window, for :func:`simulator.symmetry.representatives`: per window position its
    split and, per layer, the bytes it sends to and receives from every GPU in the forward shuffle, the peers
    counted from its own machine's first GPU (entry k is about GPU ``(m g + k) mod W`` for a GPU of machine m),
    so a rank's work equals its image's exactly when the schedule is the image's shifted by whole machines."""
    out = []
    for rank in range(num_workers):
        offset = -(rank // gpus_per_machine) * gpus_per_machine
        out.append(tuple((w.splits[rank],
                          tuple(symmetry.shift_peers(layer[rank].tolist(), offset) for layer in w.shuffle_bytes),
                          tuple(symmetry.shift_peers(layer[:, rank].tolist(), offset) for layer in w.shuffle_bytes))
                         for w in works))
    return out
