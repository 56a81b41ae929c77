"""The simulated epoch window of ``hopgnn``: one trainer process per worker (plus sampler processes), steps with
barriers and ring migrations (mechanism and terms: :mod:`simulator.strategies.hopgnn`).

Notation: S (time steps) -> ``len(work.steps)``, M -> ``num_machines``.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from gnnplan.simulator.strategies.base import SimContext
from gnnplan.simulator.strategies.hopgnn.work import HopWork, StepWork
from gnnplan.simulator.strategies.window import PREFETCH_FACTOR, IterationPlan
from gnnplan.simulator.strategies.window_run import WindowRun
from gnnplan.simulator.trace import Span
from gnnplan.simulator.workload.model_cost import INDEX_BYTES

PHASES = ("sample", "pregather", "load", "fetch", "forward", "backward", "migrate", "all_reduce", "optimizer")


class HopRun(WindowRun):
    """One simulated epoch window, on the data-parallel window run of :mod:`simulator.strategies.window_run` (its
    engine, hardware model, spans, rendezvous, gradient all-reduce, optimizer and per-iteration overhead).

    Args:
        ctx: the context.
        num_sampler_workers: sampler processes per worker (0 = inline).
        pregather: pre-gather once per iteration (else fetch per step).
        plan: the epoch's iterations.
        full, last: every worker's work in a full and in the last iteration.
        images: when only the representative machine runs, copy its spans to every other machine's GPUs at the
            end (:meth:`~simulator.strategies.window_run.WindowRun._end_epoch`); False leaves that to the caller
            (:func:`simulator.symmetry.machine_images`; the iteration ends are copied either way). Ends,
            breakdowns and epoch times are the same without the copies: every image's spans are its original's.
        pulls: whether the pre-gather pulls remote rows (the executor's collective pull); False for the naive
            variant, whose machines read only their local rows.
    """

    def __init__(self, ctx: SimContext, num_sampler_workers: int, pregather: bool, plan: IterationPlan,
                 full: list[HopWork], last: list[HopWork], images: bool = True, pulls: bool = True) -> None:
        # per-rank measured work: one representative machine only if it is the same on every machine
        super().__init__(ctx, plan, num_sampler_workers, rank_works=list(zip(full, last)))
        self.pregather, self.k, self.images, self.pulls = pregather, num_sampler_workers, images, pulls
        self.works = [last if it == plan.num_iterations - 1 else full for it in plan.window]
        self.ready, self.taken = self._events(), self._events()

    def execute(self) -> None:
        """Run every simulated worker's processes to the end of the window."""
        for rank in self.ranks:
            self.engine.process(self._trainer(rank))
            for j in range(self.k):
                self.engine.process(self._sampler(rank, j))
        self.engine.run()

    def _end_epoch(self, rank: int) -> None:
        if self.images or not self.represent.folded:
            super()._end_epoch(rank)
            return
        args = {"machines_represented": self.represent.num_machines_represented}
        self.spans.append(Span(rank, "epoch", 0.0, self.engine.now, "host", epoch=0, args=args))
        for image in range(rank + self.ctx.cluster.gpus_per_machine, self.ctx.num_workers,
                           self.ctx.cluster.gpus_per_machine):
            self.ends[image] = list(self.ends[rank])

    def _sample(self, rank: int, pos: int) -> Generator[Any, Any, None]:
        work, start = self.works[pos][rank], self.engine.now
        calls = float(sum(len(step.blocks) for step in work.steps))  # one sampler call per group and layer
        yield self.hw.sample(self.hw.machine_of(rank), work.num_sampled_edges, calls)
        self._span(rank, "sample", start, "sampler", pos, num_sampled_edges=work.num_sampled_edges,
                   num_sampler_calls=calls)

    def _sampler(self, rank: int, j: int) -> Generator[Any, Any, None]:
        depth = PREFETCH_FACTOR * self.k
        for pos in range(j, len(self.plan.window), self.k):
            if pos >= depth:
                yield self.taken[rank][pos - depth]
            yield from self._sample(rank, pos)
            self.ready[rank][pos].succeed()

    def _trainer(self, rank: int) -> Generator[Any, Any, None]:
        for pos in range(len(self.plan.window)):
            work, start = self.works[pos][rank], self.engine.now
            if self.k:
                yield self.ready[rank][pos]
                self.taken[rank][pos].succeed()
                yield from self.hw.sampler_handoff(rank)
            else:
                yield from self._sample(rank, pos)
            if self.pregather:
                yield from self._pregather(rank, pos, work)
            paid = work.paid_steps
            for k, step in enumerate(work.steps):
                yield from self._load(rank, pos, k, work, step)
                if k == len(work.steps) - 1:  # the last step's passes, then the all-reduce and optimizer
                    yield from self._final_step(rank, pos, step, work, start)
                    break
                yield from self._passes(rank, pos, step)
                if k in paid:  # a framework step; the last one _update pays
                    yield self.engine.timeout(self.ctx.cluster.iteration_overhead_s)
                yield from self._migrate(rank, pos, k, work)
            else:  # no step
                yield from self._update(rank, pos, work, start)
        self._end_epoch(rank)

    def _pull(self, rank: int, key: Any, rows: float, row_bytes: float) -> Generator[Any, Any, float]:
        """Pull ``rows`` rows from the other machines as the executor's ``RowStore.pull`` (collective: every
        worker calls it, also with no rows): :meth:`~.window_run.WindowRun._pull_rows` with one int64 count per
        worker of every other machine, the ids and the rows. Returns the seconds waited for the others."""
        cl = self.ctx.cluster
        count_bytes = INDEX_BYTES * cl.gpus_per_machine * (cl.num_machines - 1)
        return (yield from self._pull_rows(rank, key, count_bytes, rows * INDEX_BYTES, rows * row_bytes))

    def _pregather(self, rank: int, pos: int, work: HopWork) -> Generator[Any, Any, None]:
        """The executor's ``pregather``: the local rows gathered from the machine's partition, then the remote
        ones in one collective pull (on a cluster of 2+ machines). With the pull the executor assembles the buffer
        from the two parts (:func:`executor.strategies.hopgnn.exchange.pregather`: ``rows[local] = ...``, then
        ``rows[~local] = pulled``), so each row is written once more: a second pass over the local rows' bytes
        before the pull and one over the remote rows' after it, priced as gathers. (Its ``torch.unique`` over the
        groups' inputs is not priced.) Without the pull the gathered rows are the buffer."""
        start, waited = self.engine.now, 0.0
        local = work.pregather_local_rows * work.row_bytes
        if self.pulls and self.ctx.cluster.num_machines > 1:
            yield self.hw.host_gather(2.0 * local, rank)
            waited = yield from self._pull(rank, (pos, "pregather"), work.pregather_remote_rows, work.row_bytes)
            yield self.hw.host_gather(work.pregather_remote_rows * work.row_bytes, rank)
        else:
            yield self.hw.host_gather(local, rank)
        nbytes = work.pregather_remote_rows * (work.row_bytes + INDEX_BYTES)
        self._span(rank, "pregather", start, "network", pos, nbytes=nbytes,
                   num_remote_vertices=work.pregather_remote_rows, wait_s=waited)

    def _load(self, rank: int, pos: int, k: int, work: HopWork, step: StepWork) -> Generator[Any, Any, None]:
        """Gather the step's input rows (pre-gathered, or the local ones and then the fetched ones, one after
        the other as the executor's ``FeatureStore.load``) and copy them to the GPU. The span's ``local_bytes``
        and ``remote_bytes`` are what the load gathered locally and fetched, as the executor records them: with
        pre-gathering every input row is local (gathered from the buffer), nothing fetched."""
        hw, start = self.hw, self.engine.now
        if self.pregather:
            yield hw.host_gather(step.input_bytes, rank)
            local, remote = step.input_bytes, 0.0
        else:
            yield hw.host_gather(step.local_bytes, rank)
            if self.ctx.cluster.num_machines > 1:  # collective: also with no remote row
                yield from self._fetch(rank, pos, k, step, work.row_bytes)
            local, remote = step.local_bytes, step.remote_bytes
        yield hw.host_to_gpu(rank, step.input_bytes)
        self._span(rank, "load", start, "pcie", pos, nbytes=step.input_bytes, local_bytes=local,
                   remote_bytes=remote, num_seeds=step.num_seeds)

    def _fetch(self, rank: int, pos: int, k: int, step: StepWork, row_bytes: float) -> Generator[Any, Any, None]:
        start, straggled = self.engine.now, self.rendezvous.straggled_s(rank)
        rows = step.remote_bytes / row_bytes
        waited = yield from self._pull(rank, (pos, "fetch", k), rows, row_bytes)
        self._span(rank, "fetch", start, "network", pos, nbytes=rows * (row_bytes + INDEX_BYTES),
                   num_remote_vertices=rows, wait_s=waited, **self.rendezvous.straggler_args(rank, straggled))

    def _migrate(self, rank: int, pos: int, k: int, work: HopWork) -> Generator[Any, Any, None]:
        start, m = self.engine.now, self.ctx.cluster.num_machines
        yield self.rendezvous.wait(("step", pos, k), rank)
        me = self.hw.machine_of(rank)
        if m > 1:
            yield self.hw.network(me, (me + 1) % m, work.migration_bytes)
        self._span(rank, "migrate", start, "network", pos, nbytes=work.migration_bytes if m > 1 else 0.0, step=k)
