"""``dp``'s simulated epoch window: a trainer process per worker plus its sampler processes (the package docstring
gives the phases, their order and sources)."""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from gnnplan.simulator.strategies.base import SimContext
from gnnplan.simulator.strategies.dp.work import SAMPLED_EDGE_BYTES, IterationWork, peer_cache, slowest_machine_works
from gnnplan.simulator.strategies.window import PREFETCH_FACTOR, IterationPlan
from gnnplan.simulator.strategies.window_run import WindowRun
from gnnplan.simulator.workload.model_cost import INDEX_BYTES

if TYPE_CHECKING:
    from gnnplan.simulator.strategies.dp import Knobs


class DpRun(WindowRun):
    """One simulated epoch window of ``dp``: a trainer process per worker plus its sampler processes."""

    DDP = True  # the executor trains with DistributedDataParallel (executor.ddp.data_parallel)
    GPU_SYMMETRIC = True  # every flow is a trainer's or its sampler processes' (simulator.symmetry.fold_gpus)
    DEFER_IMAGES = True  # dp.simulate copies the laid-out spans (WindowRun.with_images)

    def __init__(self, ctx: SimContext, knobs: Knobs, plan: IterationPlan, full: IterationWork,
                 last: IterationWork) -> None:
        # every machine runs the slowest machine's own work (work.slowest_machine_works): one representative
        # machine suffices (simulator.symmetry)
        rank_works = slowest_machine_works(ctx, knobs, full, last)
        super().__init__(ctx, plan, knobs.num_sampler_workers, rank_works=rank_works)
        self.knobs = knobs
        self.works = [[lst if it == plan.num_iterations - 1 else fl for it in plan.window] for fl, lst in rank_works]
        """Per rank, the work of each window position."""
        self.ready, self.taken = self._events(), self._events()

    def execute(self) -> None:
        """Run every simulated worker's processes to the end of the window."""
        for rank in self.ranks:
            self.engine.process(self._trainer(rank))
            for j in range(self.knobs.num_sampler_workers):
                self.engine.process(self._sampler(rank, j))
        self.engine.run()

    def _sample(self, rank: int, pos: int) -> Generator[Any, Any, None]:
        work, start, waited = self.works[rank][pos], self.engine.now, 0.0
        if work.remote_sampling and not self.knobs.num_sampler_workers:  # in the trainer, as the executor does
            for layer, (local_edges, remote_edges, remote_vertices) in enumerate(work.remote_sampling):
                waited += yield from self._exchange_layer(rank, (pos, "sample", layer), local_edges, remote_edges,
                                                          remote_vertices)
        elif work.remote_sampling:
            for local_edges, remote_edges, remote_vertices in work.remote_sampling:
                yield from self._sample_layer(rank, local_edges, remote_edges, remote_vertices)
        else:  # one sampler call per layer
            yield self.hw.sample(self.hw.machine_of(rank), work.num_sampled_edges, self._num_layers())
        extra = {"wait_s": waited} if work.remote_sampling and not self.knobs.num_sampler_workers else {}
        self._span(rank, "sample", start, "sampler", pos, num_input_vertices=work.num_input_vertices,
                   num_sampled_edges=work.num_sampled_edges, num_sampler_calls=self._num_layers(),
                   nbytes=work.sample_request_bytes + work.sample_reply_bytes, **extra)

    def _exchange_layer(self, rank: int, key: Any, local_edges: float, remote_edges: float,
                        remote_vertices: float) -> Generator[Any, Any, float]:
        """One layer on a partitioned structure sampled in the trainer, as the executor's
        :class:`~gnnplan.executor.sampling_partitioned.PartitionedSampler` does it: four collective ``all_to_all``
        calls (:meth:`_collective`, each followed by one message per other machine, equal shares, on the worker's
        NIC rail): the request counts (one int64 to every rank of the other machines), the ids, then, after this
        worker has sampled what the others asked of it (as many edges as it asked of them: the machines are
        alike), the reply counts and the edges back; then its own vertices, sampled at home. Use with
        ``yield from``.

        Returns:
            The seconds this worker waited for the others at the four calls.
        """
        hw, me = self.hw, self.hw.machine_of(rank)
        owners = [m for m in range(self.ctx.cluster.num_machines) if m != me]
        share, rail, waited = 1.0 / len(owners), hw.nic_of(rank), 0.0
        counts = INDEX_BYTES * self.ctx.cluster.gpus_per_machine * len(owners)
        calls = (("counts", counts, True), ("ids", remote_vertices * INDEX_BYTES, True),
                 ("reply counts", counts, True), ("edges", remote_edges * SAMPLED_EDGE_BYTES, False))
        for call, nbytes, outward in calls:
            if call == "reply counts":  # serve the others' requests
                yield hw.sample(me, remote_edges, 1.0)
            waited += yield from self._collective(rank, (*key, call), nbytes)
            yield self.engine.all_of(hw.network(me, o, nbytes * share, rail=rail) if outward else
                                     hw.network(o, me, nbytes * share, rail=rail) for o in owners)
        yield hw.sample(me, local_edges, 1.0)
        return waited

    def _num_layers(self) -> float:
        """Sampler calls per batch: one per layer (``host.sampler_call_s`` each)."""
        return float(len(self.ctx.workload.training.fanouts))

    def _sample_layer(self, rank: int, local_edges: float, remote_edges: float,
                      remote_vertices: float) -> Generator[Any, Any, None]:
        """One layer on a partitioned structure in a sampler process (DistDGL's RPC, simulated only): requests to
        every other machine (equal shares), which sample there and reply with the edges, while the local vertices
        are sampled at home."""
        hw, me = self.hw, self.hw.machine_of(rank)
        owners = [m for m in range(self.ctx.cluster.num_machines) if m != me]
        parts = [hw.sample(me, local_edges, 1.0)]
        if remote_vertices > 0:
            share = 1.0 / len(owners)
            parts += [self.engine.process(self._remote_sample(rank, o, remote_vertices * share,
                                                              remote_edges * share)) for o in owners]
        yield self.engine.all_of(parts)

    def _remote_sample(self, rank: int, owner: int, vertices: float, edges: float) -> Generator[Any, Any, None]:
        me, rail = self.hw.machine_of(rank), self.hw.nic_of(rank)
        yield self.hw.network(me, owner, vertices * INDEX_BYTES, rail=rail)
        yield self.hw.sample(owner, edges)
        yield self.hw.network(owner, me, edges * SAMPLED_EDGE_BYTES, rail=rail)

    def _sampler(self, rank: int, j: int) -> Generator[Any, Any, None]:
        k = self.knobs.num_sampler_workers
        depth = PREFETCH_FACTOR * k
        for pos in range(j, len(self.plan.window), k):
            if pos >= depth:
                yield self.taken[rank][pos - depth]
            yield from self._sample(rank, pos)
            self.ready[rank][pos].succeed()

    def _trainer(self, rank: int) -> Generator[Any, Any, None]:
        for pos, work in enumerate(self.works[rank]):
            start = self.engine.now
            if self.knobs.num_sampler_workers:
                yield self.ready[rank][pos]
                self.taken[rank][pos].succeed()
                yield from self.hw.sampler_handoff(rank)
            else:
                yield from self._sample(rank, pos)
            yield from self._load(rank, pos, work)
            yield from self._step(rank, pos, work.compute, start)
        self._end_epoch(rank)

    def _load(self, rank: int, pos: int, work: IterationWork) -> Generator[Any, Any, None]:
        """The batch's input rows, step after step (module docstring, ``load``)."""
        hw, start = self.hw, self.engine.now
        if peer_cache(self.knobs, self.ctx.cluster):
            yield from self._peers(rank, pos, work)  # every iteration, as the executor's PeerCache pulls
        yield from hw.gpu_gather(rank, work.hit_bytes)
        yield hw.host_gather(work.local_bytes, rank)
        if work.remote_bytes > 0:
            yield from self._fetch(rank, pos, work)
        yield hw.host_to_gpu(rank, work.local_bytes + work.remote_bytes)
        self._span(rank, "load", start, "pcie", pos, nbytes=work.local_bytes + work.remote_bytes,
                   hit_bytes=work.hit_bytes, local_bytes=work.local_bytes, remote_bytes=work.remote_bytes,
                   peer_bytes=work.peer_bytes, num_input_vertices=work.num_input_vertices)

    def _peers(self, rank: int, pos: int, work: IterationWork) -> Generator[Any, Any, None]:
        """Rows in the peers' cache slices (``partitioned``), pulled as the executor's ``PeerCache`` pulls them:
        ``RowStore.pull`` over all workers (:meth:`_pull_rows`: three ``all_to_all`` calls, counts, ids, rows back,
        each waiting for every worker and paying ``network.per_all_to_all_s``), whose messages go to and from the
        machine's other GPUs over NVLink (PCIe through the host without it), each peer serving an equal share.
        Every worker calls it in every iteration, also with nothing to pull (the pull is collective).
        Span ``peer_fetch`` inside the load, its waits included (``wait_s``), as the executor records it. Until
        2026-11-29 the ids and rows were copies alone: on this machine's probed 1 x 2 cluster dp with a partitioned
        cache measured 4.0 ms per peer pull (gloo among the two local processes) against 0.24 ms predicted."""
        g = self.ctx.cluster.gpus_per_machine
        peers = [self.hw.machine_of(rank) * g + p for p in range(g) if p != rank % g]

        def copies(nbytes: float, outward: bool) -> list[Any]:
            share = nbytes / len(peers)
            return [] if nbytes <= 0 else [self.hw.gpu_to_gpu(rank, p, share) if outward else
                                           self.hw.gpu_to_gpu(p, rank, share) for p in peers]
        start = self.engine.now
        count_bytes = INDEX_BYTES * (self.ctx.num_workers - 1)  # one int64 to every other worker, as the executor's
        waited = yield from self._pull_rows(rank, (pos, "peer_fetch"), count_bytes, work.peer_request_bytes,
                                            work.peer_bytes, messages=copies)
        self._span(rank, "peer_fetch", start, "nvlink", pos, nbytes=work.peer_request_bytes + work.peer_bytes,
                   num_peer_vertices=work.peer_request_bytes / INDEX_BYTES, wait_s=waited)

    def _fetch(self, rank: int, pos: int, work: IterationWork) -> Generator[Any, Any, None]:
        """The remote pull as the executor's ``RowStore.pull`` (:meth:`~.window_run.WindowRun._pull_rows`: three
        collective ``all_to_all`` calls, counts, ids and rows back), of the rows the worker's work pulls (its own,
        or the busiest other NIC's share where that is larger: :func:`~.work.worker_work`). The span covers the
        waits too (``wait_s``), as the executor's span does."""
        start, straggled = self.engine.now, self.rendezvous.straggled_s(rank)
        waited = yield from self._pull_rows(rank, (pos, "fetch"), work.count_bytes, work.request_bytes,
                                            work.remote_bytes)
        self._span(rank, "fetch", start, "network", pos,
                   nbytes=work.remote_bytes + work.request_bytes + work.count_bytes,
                   num_remote_vertices=work.num_remote_vertices, wait_s=waited,
                   **self.rendezvous.straggler_args(rank, straggled))
