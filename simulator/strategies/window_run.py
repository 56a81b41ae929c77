"""The simulated epoch window of a data-parallel strategy (:class:`WindowRun`: ``dp``, ``ppgnn``, ``hopgnn``,
``gsplit``): the engine, the hardware model, every worker's spans and iteration ends, the synchronous step every
such strategy ends an iteration with, and its collectives (barrier, then the call). Which iterations the window
holds and how the rest is extrapolated: :mod:`simulator.strategies.window`.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from gnnplan.simulator import symmetry
from gnnplan.simulator.engine import Engine
from gnnplan.simulator.hardware import pricing
from gnnplan.simulator.hardware.formulas import Kernel, compute_time_s, fixed_time_s, roofline_line
from gnnplan.simulator.hardware.model import FLOAT_BYTES, HardwareModel
from gnnplan.simulator.hardware.spec import ClusterSpec
from gnnplan.simulator.strategies.base import SimContext
from gnnplan.simulator.strategies.ddp_buckets import BucketedBackward, ddp_buckets
from gnnplan.simulator.strategies.window import IterationPlan
from gnnplan.simulator.trace import Span
from gnnplan.simulator.workload.model_cost import ModelCost


class PassWork(Protocol):
    """The forward and backward pass of one training step (:class:`StepCompute`, hopgnn's ``StepWork``)."""

    @property
    def forward_s(self) -> float: ...

    @property
    def backward_s(self) -> float: ...

    @property
    def forward_flops(self) -> float: ...

    @property
    def backward_flops(self) -> float: ...


def idle(work: PassWork) -> bool:
    """Whether ``work`` is a slot with nothing to compute (no seconds, no FLOPs in either pass): hopgnn's step
    at which no micrograph group is hosted on the worker, where its executor runs no forward or backward."""
    return not (work.forward_s or work.backward_s or work.forward_flops or work.backward_flops)


class UpdateWork(Protocol):
    """What ends an iteration: the gradient all-reduce and the optimizer (:class:`StepCompute`, hopgnn's
    ``HopWork``)."""

    @property
    def gradient_bytes(self) -> float: ...

    @property
    def optimizer_s(self) -> float: ...

    @property
    def optimizer_flops(self) -> float: ...


@dataclass(frozen=True)
class StepCompute:
    """The compute of one worker's data-parallel training step: uncontended seconds and FLOPs of forward,
    backward and the optimizer, the bytes of the gradients it all-reduces (float32), and the part of the forward
    and backward seconds no batch size changes (``forward_fixed_s``, ``backward_fixed_s``: the kernels' and DGL
    calls' fixed costs, :func:`simulator.hardware.formulas.fixed_time_s`, and the roofline seconds the kernels pay
    whatever the batch, :func:`simulator.hardware.formulas.roofline_line`, at the phase's efficiency)."""

    forward_s: float
    backward_s: float
    optimizer_s: float
    forward_flops: float
    backward_flops: float
    optimizer_flops: float
    gradient_bytes: float
    forward_fixed_s: float = 0.0
    backward_fixed_s: float = 0.0

    @classmethod
    def of(cls, cost: ModelCost, cluster: ClusterSpec, smaller: ModelCost | None = None) -> StepCompute:
        """Price a model's kernels on ``cluster`` (:func:`simulator.hardware.formulas.compute_time_s` with the
        efficiency fraction of each phase); ``smaller``: the same model on a smaller batch, which places the
        roofline seconds a batch pays whatever its size (without it, none: the roofline grows in proportion)."""
        eff, gpu = cluster.efficiency, cluster.gpu

        def fixed(large: Sequence[Kernel], small: Sequence[Kernel] | None, fraction: float) -> float:
            line = roofline_line([large, small], gpu)[0] / fraction if small is not None else 0.0
            return fixed_time_s(large, gpu) + line

        return cls(compute_time_s(cost.forward, gpu, eff.forward_fraction),
                   compute_time_s(cost.backward, gpu, eff.backward_fraction),
                   compute_time_s(cost.optimizer, gpu, eff.optimizer_fraction),
                   sum(k.flops for k in cost.forward), sum(k.flops for k in cost.backward),
                   sum(k.flops for k in cost.optimizer), float(FLOAT_BYTES * cost.num_params),
                   fixed(cost.forward, smaller.forward if smaller else None, eff.forward_fraction),
                   fixed(cost.backward, smaller.backward if smaller else None, eff.backward_fraction))

    def passes_grown(self, factor: float) -> StepCompute:
        """This step with a batch ``factor`` times larger: the forward and backward FLOPs and their per-item
        seconds times ``factor`` [inferred: in proportion; the first layer's gather and dense product, the bulk
        of a sampled batch's work, are linear in the input vertices], their fixed seconds unchanged (the same
        kernels and DGL calls, the same weights read); the gradients and the optimizer step do not change (the
        model is the same)."""
        def grown(total_s: float, fixed_s: float) -> float:
            return fixed_s + (total_s - fixed_s) * factor
        return replace(self, forward_s=grown(self.forward_s, self.forward_fixed_s),
                       backward_s=grown(self.backward_s, self.backward_fixed_s),
                       forward_flops=self.forward_flops * factor, backward_flops=self.backward_flops * factor)


class WindowRun:
    """The simulated epoch window of a data-parallel strategy (``dp``, ``ppgnn``): the engine, the hardware
    model, the spans, every worker's iteration end times, and the step every such strategy ends its iteration
    with (:meth:`_step`). Subclasses add how a worker gets its batch.

    Args:
        ctx: the simulation's inputs.
        plan: the epoch's iterations and the simulated window.
        sampler_processes_per_worker: sampler processes beside each worker (their threads come out of its
            compute share on a CPU-only cluster, :class:`~simulator.hardware.model.HardwareModel`).
        rank_works: each rank's work, when the strategy's schedule is the same on every machine given equal
            work; if they are equal machine by machine, only machine 0's ranks run (:attr:`ranks`) on a folded
            hardware model (:mod:`simulator.symmetry`). None: every rank runs.
    """

    DDP = False
    """Whether the strategy's gradient all-reduces are DDP buckets (its executor trains with
    DistributedDataParallel): each then pays ``network.ddp_per_bucket_s`` (:func:`~.pricing.ddp_bucket_s`)."""
    GPU_SYMMETRIC = False
    """Whether every flow of the strategy's run is started by one rank's processes (its trainer, its sampler
    processes), none by a process of the machine as a whole: then, given equal work, the GPUs of a machine are
    folded too (:func:`simulator.symmetry.fold_gpus`)."""

    def __init__(self, ctx: SimContext, plan: IterationPlan, sampler_processes_per_worker: int = 0,
                 rank_works: Sequence[Any] | None = None) -> None:
        self.ctx, self.plan = ctx, plan
        self.engine = Engine(ctx.seed)
        self.hw = HardwareModel(ctx.cluster, self.engine, sampler_processes_per_worker)
        self.spans: list[Span] = []
        self.ends = [[0.0] * len(plan.window) for _ in range(ctx.num_workers)]
        self.represent, self.rendezvous = symmetry.simulated_ranks(self.engine, self.hw, ctx.cluster, rank_works,
                                                                   gpu_symmetric=self.GPU_SYMMETRIC)
        self.ranks = self.represent.ranks
        """The ranks simulated (those not simulated keep iteration ends of 0)."""

    def _events(self) -> list[list[Any]]:
        """One fresh event per simulated worker and window position (none for the others)."""
        simulated = set(self.ranks)
        return [[self.engine.event() for _ in self.plan.window] if rank in simulated else []
                for rank in range(self.ctx.num_workers)]

    def _span(self, rank: int, phase: str, start: float, stream: str, pos: int, nbytes: float = 0.0,
              flops: float = 0.0, **args: Any) -> None:
        self.spans.append(Span(rank, phase, start, self.engine.now - start, stream, nbytes, flops, 0,
                               self.plan.window[pos], args))

    def _collective(self, rank: int, key: Any, nbytes: float) -> Generator[Any, Any, float]:
        """Worker ``rank`` calls the ``all_to_all`` named ``key`` (one call of a pull, a shuffle): the call
        completes only when every worker has reached it, so the worker first waits for the slowest one (a
        barrier: :class:`~simulator.engine.Rendezvous`), then pays the call's fixed cost
        (:func:`~simulator.hardware.pricing.collective_s` of the ``nbytes`` it exchanges, an all-to-all:
        ``network.per_all_to_all_s``); the caller then sends the call's messages. Use with ``yield from``.

        Returns:
            The seconds this worker waited for the others.
        """
        arrived = self.engine.now
        yield self.rendezvous.wait(key, rank)
        waited = self.engine.now - arrived
        fixed_s = pricing.collective_s(self.ctx.cluster, nbytes, all_to_all=True)
        if fixed_s > 0:
            yield self.engine.timeout(fixed_s)
        return waited

    def _pull_rows(self, rank: int, key: Any, count_bytes: float, request_bytes: float, reply_bytes: float,
                   messages: Callable[[float, bool], list[Any]] | None = None) -> Generator[Any, Any, float]:
        """Worker ``rank`` pulls feature rows as the executor's ``RowStore.pull`` (executor/features.py): three
        ``all_to_all`` calls (:data:`~.base.FETCH_COLLECTIVES`: the row counts asked of every rank,
        ``count_bytes``; the int64 ids, ``request_bytes``; the rows back, ``reply_bytes``, all in bytes), each a
        :meth:`_collective` named ``(*key, call)`` followed by its messages: ``messages(nbytes, outward)``, the
        events of moving ``nbytes`` out to the holders (``outward``) or back from them; by default one message per
        other machine (equal shares, on the worker's NIC rail). Every worker must call it at the same ``key``,
        also with nothing to pull (the executor's pull is collective). Use with ``yield from``.

        Returns:
            The seconds this worker waited for the others at the three calls.
        """
        if messages is None:
            me = self.hw.machine_of(rank)
            owners = [m for m in range(self.ctx.cluster.num_machines) if m != me]
            share, rail = 1.0 / len(owners), self.hw.nic_of(rank)

            def messages(nbytes: float, outward: bool) -> list[Any]:
                return [self.hw.network(me, o, nbytes * share, rail=rail) if outward else
                        self.hw.network(o, me, nbytes * share, rail=rail) for o in owners]
        waited = 0.0
        for call, nbytes, outward in (("counts", count_bytes, True), ("ids", request_bytes, True),
                                      ("rows", reply_bytes, False)):
            waited += yield from self._collective(rank, (*key, call), nbytes)
            yield self.engine.all_of(messages(nbytes, outward))
        return waited

    def _step(self, rank: int, pos: int, work: StepCompute, start: float) -> Generator[Any, Any, None]:
        """Forward, backward, then :meth:`_update` of iteration ``pos`` (which began at ``start``): the
        :meth:`_final_step` of ``work``."""
        yield from self._final_step(rank, pos, work, work, start)

    def _final_step(self, rank: int, pos: int, passes: PassWork, update: UpdateWork,
                    start: float) -> Generator[Any, Any, None]:
        """The forward and backward pass that end iteration ``pos`` (which began at ``start``; e.g. hopgnn's last
        time step), then :meth:`_update` of ``update``. When its gradients fill several DDP buckets
        (:meth:`_ddp_buckets`), each bucket is all-reduced while backward goes on (:meth:`_backward_all_reduce`)
        and only the optimizer follows."""
        buckets = self._ddp_buckets(update.gradient_bytes)
        if buckets is None:
            yield from self._passes(rank, pos, passes)
            yield from self._update(rank, pos, update, start)
            return
        t0 = self.engine.now
        yield from self.hw.compute(rank, passes.forward_s)
        if not idle(passes):
            self._span(rank, "forward", t0, "compute", pos, flops=passes.forward_flops)
        yield from self._backward_all_reduce(rank, pos, passes, buckets)
        yield from self._optimizer(rank, pos, update, start)

    def _ddp_buckets(self, gradient_bytes: float) -> list[float] | None:
        """The DDP buckets of ``gradient_bytes`` (:func:`.ddp_buckets.ddp_buckets` with
        ``training.ddp_bucket_bytes``) when their all-reduces overlap backward: a strategy whose executor trains
        with DistributedDataParallel (:attr:`DDP`), several buckets and several workers. None otherwise: the
        all-reduce, if any, starts when backward ends (:meth:`_all_reduce`), as hopgnn's executor reduces its
        gradients in one call after the last time step (the brief's "iteration end: all-reduce"; before
        2026-11-30 its buckets were overlapped with the last step's backward, which nothing runs)."""
        buckets = ddp_buckets(gradient_bytes, self.ctx.workload.training.ddp_bucket_bytes)
        return buckets if self.DDP and len(buckets) > 1 and self.ctx.num_workers > 1 else None

    def _backward_all_reduce(self, rank: int, pos: int, work: PassWork, buckets: list[float],
                             **args: Any) -> Generator[Any, Any, None]:
        """Backward with DDP's bucketed gradient all-reduce overlapping it
        (:class:`~simulator.strategies.ddp_buckets.BucketedBackward`): backward runs in one segment per bucket, the end
        of segment k launches bucket k's all-reduce (once every worker has launched it: a collective), and the buckets
        are reduced one after the other. Spans: ``backward`` (all of it), one ``all_reduce_bucket`` per bucket, and
        ``all_reduce`` from the end of backward to the end of the last bucket: the part left on the critical path (its
        ``nbytes`` the whole gradient). An :func:`idle` slot records no ``backward``: its buckets launch at once,
        and are reduced one after the other, as the executor's are after a step with nothing to compute."""
        bucketed = BucketedBackward(self, rank, pos, buckets, work.backward_s)
        t0 = self.engine.now
        yield from bucketed.compute(work.backward_s)
        if not idle(work):
            self._span(rank, "backward", t0, "compute", pos, flops=work.backward_flops, **args)
        yield from bucketed.finish()

    def _bucket_all_reduces(self, rank: int, pos: int, buckets: list[float],
                            ready: list[Any]) -> Generator[Any, Any, None]:
        for k, nbytes in enumerate(buckets):
            yield ready[k]
            start = self.engine.now
            yield self.rendezvous.wait((pos, "bucket", k), rank)
            yield from self.hw.all_reduce(rank, nbytes, ddp=self.DDP)
            self._span(rank, "all_reduce_bucket", start, "network", pos, nbytes=nbytes, bucket=k)

    def _passes(self, rank: int, pos: int, work: PassWork, **args: Any) -> Generator[Any, Any, None]:
        """The forward and the backward pass of ``work`` on worker ``rank``'s compute, one span each; none for an
        :func:`idle` slot (hopgnn's step with no group hosted here), which the executors skip too."""
        if idle(work):
            return
        for phase, seconds, flops in (("forward", work.forward_s, work.forward_flops),
                                      ("backward", work.backward_s, work.backward_flops)):
            t0 = self.engine.now
            yield from self.hw.compute(rank, seconds)
            self._span(rank, phase, t0, "compute", pos, flops=flops, **args)

    def _update(self, rank: int, pos: int, work: UpdateWork, start: float) -> Generator[Any, Any, None]:
        """The synchronous gradient all-reduce, the optimizer and ``iteration_overhead_s`` that end iteration
        ``pos`` (which began at ``start``); records the spans and the iteration's end."""
        yield from self._all_reduce(rank, pos, work.gradient_bytes)
        yield from self._optimizer(rank, pos, work, start)

    def _optimizer(self, rank: int, pos: int, work: UpdateWork, start: float) -> Generator[Any, Any, None]:
        """The optimizer and ``iteration_overhead_s`` after the gradients are reduced; records the spans and the
        end of iteration ``pos`` (which began at ``start``)."""
        t0 = self.engine.now
        yield from self.hw.compute(rank, work.optimizer_s)
        self._span(rank, "optimizer", t0, "compute", pos, flops=work.optimizer_flops)
        yield self.engine.timeout(self.ctx.cluster.iteration_overhead_s)
        self._span(rank, "iteration", start, "host", pos)
        self.ends[rank][pos] = self.engine.now

    def _all_reduce(self, rank: int, pos: int, nbytes: float) -> Generator[Any, Any, None]:
        """Wait for every worker (synchronous DDP), then the hierarchical ring all-reduce of ``nbytes``; nothing
        to reduce with one worker."""
        start, many = self.engine.now, self.ctx.num_workers > 1
        straggled = self.rendezvous.straggled_s(rank)
        if many:
            yield self.rendezvous.wait(pos, rank)
            yield from self.hw.all_reduce(rank, nbytes, ddp=self.DDP)
        self._span(rank, "all_reduce", start, "network", pos, nbytes=nbytes if many else 0.0,
                   **self.rendezvous.straggler_args(rank, straggled))

    def _end_epoch(self, rank: int) -> None:
        """Record worker ``rank``'s ``epoch`` span (the window; :func:`place_window` stretches it); its args say
        how many machines a simulated machine stands for and how many GPUs of its machine a simulated GPU does
        (:mod:`simulator.symmetry`). When only representatives run, their iteration ends are copied to the ranks
        they stand for (the same GPU of every other machine, and the GPUs of :func:`~.symmetry.fold_gpus`' orbit:
        their schedule is the same, module docstring of :mod:`simulator.symmetry`), and so are their spans, unless
        :attr:`DEFER_IMAGES` leaves that to :meth:`with_images`."""
        args = {"machines_represented": self.represent.num_machines_represented,
                "gpus_represented": self.represent.gpus_represented}
        self.spans.append(Span(rank, "epoch", 0.0, self.engine.now, "host", epoch=0, args=args))
        if self.represent.folded:
            cluster = self.ctx.cluster
            for image in self.represent.images(rank, cluster.num_machines, cluster.gpus_per_machine):
                self.ends[image] = list(self.ends[rank])
            if not self.DEFER_IMAGES:
                self.spans.extend(self._copies([s for s in self.spans if s.rank == rank]))

    DEFER_IMAGES = False
    """Whether the simulated ranks' spans are copied to the ranks they stand for only by :meth:`with_images` (the
    strategy's ``simulate`` calls it on the spans :func:`place_window` laid out: the breakdown and the layout are
    the same on every copy, so they are computed once per simulated rank), not at :meth:`_end_epoch`."""

    def _copies(self, spans: list[Span]) -> Iterator[Span]:
        """``spans`` of one simulated rank on every rank it stands for."""
        if not spans:
            return
        cluster = self.ctx.cluster
        for image in self.represent.images(spans[0].rank, cluster.num_machines, cluster.gpus_per_machine):
            yield from (s.on_rank(image) for s in spans)

    def with_images(self, spans: list[Span]) -> list[Span]:
        """``spans`` of the simulated ranks followed by their copies on the ranks they stand for (with
        :attr:`DEFER_IMAGES`; otherwise :meth:`_end_epoch` has copied them: ``spans`` unchanged)."""
        if not (self.DEFER_IMAGES and self.represent.folded):
            return spans
        by_rank: dict[int, list[Span]] = {}
        for s in spans:
            by_rank.setdefault(s.rank, []).append(s)
        out = list(spans)
        for mine in by_rank.values():
            out.extend(self._copies(mine))
        return out
