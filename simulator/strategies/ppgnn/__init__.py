"""Pre-propagation GNNs with optimised data loading (``ppgnn``): SGC and SIGN trained on stored hop matrices.

Mechanism: Yue, Deng and Zhang, "Graph Learning at Scale: Characterizing and Optimizing Pre-Propagation GNNs",
MLSys 2025 (brief /work/shared/papers/ppgnn.md). Aggregation happens once, before training: R sparse-dense
products ``X_r = B X_{r-1}`` store the labelled rows of X, BX, .., B^R X. Training is data-parallel
mini-batch SGD over independent rows; each step first *loads* the batch's rows of the M matrices it reads
(M = 1 for SGC, R + 1 for SIGN), then runs a dense model, then all-reduces gradients (several workers).

Notation: ``R`` = ``hops``; ``M`` matrices per row; ``s = 4 F`` bytes per row and matrix; ``b`` rows of one
worker's batch; ``B_b = b M s``; a *chunk* is ``chunk_size`` rows contiguous in storage (SGD-CR, brief
§1.4(d)) and a *run* a maximal contiguous stretch of a batch; ``n_r`` runs per batch: ``b`` under random
reshuffling, ``1 + (b - 1) / chunk_size`` expected under chunk reshuffling (a chunk boundary falls between two
consecutive positions with probability 1 / chunk_size).

Per-batch loading work and memory: :mod:`simulator.strategies.ppgnn.work` (brief §2.4, §1.5).

Compute: roofline time of :mod:`simulator.strategies.ppgnn.cost`'s kernels / efficiency fractions; all_reduce:
synchronous hierarchical ring of the gradients (as ``dp``); then Adam and ``iteration_overhead_s``.
Pre-propagation (one-off, ``breakdown_s["preprocess"]``, not in the epoch time): R SpMMs sharded by rows over
the workers, each exchanging the rows its shard reads from the others per hop, on the GPUs if every shard fits
their memory, else in host memory (:mod:`simulator.strategies.ppgnn.preprop`).

The paper's placement rule (§1.5): GPU if the input fits, else host memory, else SSD; ``placement=None``
applies it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Generator, Mapping
from typing import Any

from gnnplan.simulator.hardware import pricing
from gnnplan.simulator.hardware.phase_rules import PhaseRule
from gnnplan.simulator.result import SimResult
from gnnplan.simulator.strategies.base import PhaseProfile, SimContext, kernel_profile, suggest_batch_size
from gnnplan.simulator.strategies.contract import check_workload
from gnnplan.simulator.strategies.ppgnn import calibration as ppgnn_calibration
from gnnplan.simulator.strategies.ppgnn import cost as ppgnn_cost
from gnnplan.simulator.strategies.ppgnn.knobs import Knobs
from gnnplan.simulator.strategies.ppgnn.preprop import MACHINE_PAIR_NOTE, simulate_preprocess
from gnnplan.simulator.strategies.ppgnn.work import (
    BASELINE_WORKERS,
    PLACEMENT_ORDER,
    PREFETCH_FACTOR,
    LoadWork,
    StepWork,
    batch_rows,
    link_bytes_per_epoch,
    memory_model,
    resolved_placement,
    step_work,
)
from gnnplan.simulator.strategies.window import (
    IterationPlan,
    phase_breakdown,
    place_window,
    steady_period_s,
    with_sampler_processes,
)
from gnnplan.simulator.strategies.window_run import WindowRun

NAME = "ppgnn"
EXECUTOR = "gnnplan.executor.strategies.ppgnn"
SUPPORTS = ("mini-batch",)
MODEL_ARCHS = ppgnn_cost.PP_ARCHS
NEEDS_SAMPLE_STATS = False
"""This strategy uses no sampled-block statistics (only the dataset summary)."""
PHASES = ("load", "forward", "backward", "all_reduce", "optimizer")
CALIBRATION: Mapping[str, PhaseRule] = ppgnn_calibration.CALIBRATION
"""How calibration prices ``ppgnn``'s spans: loads and the baseline's DataLoader workers' ``row_index`` spans as
batch loads (per-row indexing, storage reads, gather, copy), so they inform ``host.row_index_s`` and
``storage.concurrency`` (:mod:`.calibration`)."""


def suggest(trial: Any, workload: Any, tune_batch_size: bool = False) -> Knobs:
    """The Optuna search space of ``ppgnn`` (parameter names ``ppgnn.<knob>``). ``hops`` is not searched: it
    changes the model (and its accuracy), so it stays at the default unless set by the user."""
    knobs: dict[str, Any] = {
        "placement": trial.suggest_categorical(f"{NAME}.placement", list(PLACEMENT_ORDER)),
        "loader": trial.suggest_categorical(f"{NAME}.loader", ["baseline", "fused", "double_buffer"]),
        "reshuffle": trial.suggest_categorical(f"{NAME}.reshuffle", ["random", "chunk"]),
    }
    if tune_batch_size:
        knobs["batch_size"] = suggest_batch_size(trial, NAME, workload)
    return Knobs(**knobs)


def compute_profile(ctx: SimContext, knobs: Knobs) -> dict[str, PhaseProfile]:
    """Forward, backward and optimizer of a full batch, one span each per iteration (for calibration)."""
    rows, _, _ = batch_rows(ctx, knobs)
    sm, gpu = ctx.summary, ctx.cluster.gpu
    cost = ppgnn_cost.model_cost(ctx.workload.model, sm.feature_dim, sm.num_classes, knobs.hops, rows)
    return {"forward": kernel_profile([cost.forward], gpu), "backward": kernel_profile([cost.backward], gpu),
            "optimizer": kernel_profile([cost.optimizer], gpu)}


# ---------------------------------------------------------------------------------------------- simulation

def simulate(ctx: SimContext, knobs: Knobs) -> SimResult:
    """Simulate one epoch of ``ppgnn`` (module docstring) and return the ``simulate --json`` result with spans.

    ``breakdown_s`` also holds ``preprocess`` (the one-off pre-propagation, not part of ``epoch_time_s``).

    Raises:
        SpecError: a workload this strategy cannot run (not mini-batch, or not an SGC / SIGN model).
    """
    started = time.perf_counter()
    check_workload(sys.modules[__name__], ctx.workload)
    placement = resolved_placement(ctx, knobs)
    full_rows, last_rows, num = batch_rows(ctx, knobs)
    plan = with_sampler_processes(IterationPlan(num, max(1, ctx.batch_size // ctx.num_workers), last_rows / full_rows,
                                                ()), 0)
    full, last = step_work(ctx, knobs, placement, full_rows), step_work(ctx, knobs, placement, last_rows)
    memory = memory_model(ctx, knobs, placement)
    common: dict[str, Any] = {
        "strategy": NAME, "knobs": knobs.model_dump(), "num_iterations": num,
        "bytes_per_epoch": link_bytes_per_epoch(ctx, num, full, last), **memory.result_fields()}
    if not memory.feasible:
        return SimResult.infeasible(memory.reason, sim_wall_s=time.perf_counter() - started, **common)
    run = _Run(ctx, knobs, plan, full, last)
    run.execute()
    ends = [max(run.ends[r][pos] for r in range(ctx.num_workers)) for pos in range(len(plan.window))]
    period = steady_period_s(ends, plan)
    epoch = ends[-1] + plan.extrapolated * period
    breakdown = phase_breakdown(run.spans, plan, PHASES)
    breakdown["overhead"] = num * ctx.cluster.iteration_overhead_s
    pre = simulate_preprocess(ctx, knobs.hops)
    breakdown["preprocess"] = pre.seconds
    return SimResult(feasible=True, epoch_time_s=epoch, iteration_time_s=epoch / num, breakdown_s=breakdown,
                     spans=run.with_images(place_window(run.spans, plan, period)),
                     sim_wall_s=time.perf_counter() - started, notes=[MACHINE_PAIR_NOTE] if pre.by_machine_pair else [],
                     **common)


class _Run(WindowRun):
    """One simulated epoch window: per worker a trainer and, depending on the loader, producer processes."""

    DEFER_IMAGES = True  # simulate copies the laid-out spans (WindowRun.with_images)
    GPU_SYMMETRIC = True  # every flow is a trainer's, its prefetcher's or its row workers' (symmetry.fold_gpus)

    def __init__(self, ctx: SimContext, knobs: Knobs, plan: IterationPlan, full: StepWork, last: StepWork) -> None:
        # every worker loads and computes the same batches: one representative machine (simulator.symmetry)
        super().__init__(ctx, plan, rank_works=[(full, last)] * ctx.num_workers)
        self.knobs = knobs
        self.works = [last if it == plan.num_iterations - 1 else full for it in plan.window]
        self.ready, self.asked = self._events(), self._events()

    def execute(self) -> None:
        """Run every simulated worker's processes to the end of the window."""
        background = self.knobs.loader == "double_buffer" or (
            self.knobs.loader == "baseline" and resolved_placement(self.ctx, self.knobs) != "gpu")
        for rank in self.ranks:
            self.engine.process(self._trainer(rank, background))
            if self.knobs.loader == "double_buffer":
                self.engine.process(self._prefetcher(rank))
            elif background:
                for j in range(BASELINE_WORKERS):
                    self.engine.process(self._row_worker(rank, j))
        self.engine.run()

    def _row_worker(self, rank: int, j: int) -> Generator[Any, Any, None]:
        """A baseline DataLoader worker process: per-row indexing (and storage reads) of its batches."""
        depth = PREFETCH_FACTOR * BASELINE_WORKERS
        for pos in range(j, len(self.plan.window), BASELINE_WORKERS):
            if pos >= depth:
                yield self.asked[rank][pos - depth]
            work, start = self.works[pos].load, self.engine.now
            yield self.hw.host_work(self.hw.machine_of(rank), work.row_index_core_s)
            yield from self._storage(rank, work)
            self._span(rank, "row_index", start, "loader", pos, storage_bytes=work.storage_bytes,
                       local_bytes=work.nbytes, num_requests=work.num_requests, num_matrices=work.num_matrices,
                       num_input_vertices=work.rows)
            self.ready[rank][pos].succeed()

    def _prefetcher(self, rank: int) -> Generator[Any, Any, None]:
        """The double buffer's producer: loads batch i into slot i % 2 once batch i - 2's slot is free."""
        for pos in range(len(self.plan.window)):
            if pos >= 2:
                yield self.asked[rank][pos - 1]
            yield from self._load(rank, pos, self.engine.now)
            self.ready[rank][pos].succeed()

    def _storage(self, rank: int, work: LoadWork) -> Generator[Any, Any, None]:
        if work.storage_bytes <= 0:
            return
        yield self.hw.storage_read(rank, work.storage_bytes, work.storage_latency_s, work.storage_direct)

    def _load(self, rank: int, pos: int, start: float, inline: bool = True) -> Generator[Any, Any, None]:
        """The loading path run by the trainer (or the prefetcher): per-row indexing and storage reads unless
        DataLoader workers did them (``inline=False``), host gather, PCIe copy, device gather; records the
        ``load`` span from ``start``."""
        hw, cl, work = self.hw, self.ctx.cluster, self.works[pos].load
        machine = hw.machine_of(rank)
        if inline:
            if work.row_index_core_s:
                yield hw.host_work(machine, work.row_index_core_s)
            yield from self._storage(rank, work)
        gather_s = pricing.host_gather_s(cl, work.host_gather_bytes)
        if cl.gpu.is_host_cpu:  # gather and "device" copy are torch ops on the worker's threads, like compute
            copy_s = work.pcie_latency_s + pricing.bandwidth_s(cl.pcie, work.pcie_bytes) if work.pcie_bytes else 0.0
            yield from hw.compute(rank, gather_s + copy_s)
        else:
            if work.host_gather_bytes:  # the machine's gathers and copies share its host memory (and uplinks)
                yield hw.host_gather(work.host_gather_bytes, rank)
            yield hw.transfer(hw.host_to_gpu_path(rank), work.pcie_bytes, work.pcie_latency_s)
        if work.gpu_gather_bytes:
            yield from hw.gpu_gather(rank, work.gpu_gather_bytes)
        on_device = work.gpu_gather_bytes > 0
        self._span(rank, "load", start, "pcie", pos, nbytes=0.0 if on_device else work.nbytes,
                   hit_bytes=work.nbytes if on_device else 0.0, local_bytes=0.0 if on_device else work.nbytes,
                   remote_bytes=0.0, storage_bytes=work.storage_bytes, num_requests=work.num_requests,
                   num_matrices=work.num_matrices, num_input_vertices=work.rows)

    def _trainer(self, rank: int, background: bool) -> Generator[Any, Any, None]:
        for pos, work in enumerate(self.works):
            start = self.engine.now
            self.asked[rank][pos].succeed()
            if self.knobs.loader == "double_buffer":
                yield self.ready[rank][pos]
            else:
                if background:
                    yield self.ready[rank][pos]
                yield from self._load(rank, pos, start, inline=not background)
            yield from self._step(rank, pos, work.compute, start)
        self._end_epoch(rank)
