"""What every strategy's ``simulate(ctx, knobs)`` receives, and helpers shared by the mini-batch strategies (which
iterations of an epoch are simulated: :mod:`simulator.strategies.window`; the simulated window of a data-parallel
strategy itself: :mod:`simulator.strategies.window_run`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gnnplan.simulator import symmetry
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.formulas import Kernel, backward_kernel_count, roofline_line
from gnnplan.simulator.hardware.spec import ClusterSpec, GpuSpec
from gnnplan.simulator.strategies.window import iteration_plan
from gnnplan.simulator.wording import bytes_text
from gnnplan.simulator.workload.cards import card_name
from gnnplan.simulator.workload.graphstats import DatasetSummary, SampleStats
from gnnplan.simulator.workload.model_cost import Block, ModelCost, model_cost
from gnnplan.simulator.workload.spec import WorkloadSpec

FETCH_REQUEST_MESSAGES = 2
"""Messages before the rows come back in a pull of remote feature rows (``dp``'s fetch, ``hopgnn``'s pulls): the
count exchange and the ids (executor/features.py ``RowStore.pull``: three ``all_to_all_single`` calls in all;
DistDGL's KVStore pull, Zheng et al., IA3 2020, §3.2, sends the ids in one request)."""
FETCH_COLLECTIVES = 3
"""Collective calls of one pull of remote feature rows in the executor (executor/features.py ``RowStore.pull``):
an ``all_to_all_single`` of the row counts asked of every rank, one of the int64 ids, one of the rows back. Every
rank takes part in each (also with nothing to ask for), so each call waits for the slowest rank and pays
``network.per_all_to_all_s``."""


@dataclass(frozen=True)
class SimContext:
    """Inputs of one simulation.

    Attributes:
        cluster: the hardware.
        workload: dataset, model and training settings.
        stats: per-worker mini-batch statistics measured for this cluster shape and partitioner; None for a
            strategy with ``NEEDS_SAMPLE_STATS = False`` (full-graph and pre-propagation strategies).
        summary: dataset sizes.
        batch_size: global seeds per iteration actually used (a strategy knob may override the workload's).
        seed: seed of the engine's RNG.
        estimated: for a dataset card (``workload.dataset`` names one), which statistics were estimated on its
            synthetic proxy and how (:func:`simulator.workload.proxy_estimated.estimated`); None for a real graph.
    """

    cluster: ClusterSpec
    workload: WorkloadSpec
    stats: SampleStats | None
    summary: DatasetSummary
    batch_size: int
    seed: int = 0
    estimated: dict[str, Any] | None = None

    @property
    def num_workers(self) -> int:
        """W = machines x GPUs per machine."""
        return self.cluster.num_gpus

    @property
    def sample(self) -> SampleStats:
        """The mini-batch statistics, for strategies that declared they need them.

        Raises:
            SpecError: the context was built without them (``NEEDS_SAMPLE_STATS = False``).
        """
        if self.stats is None:
            raise SpecError("workload: this strategy needs mini-batch sampling statistics, which were not measured")
        return self.stats


@dataclass(frozen=True)
class PhaseProfile:
    """How one compute phase's span time depends on the cluster (used by :mod:`simulator.calibrate`):
    ``span seconds = (roofline_fixed_s + flops * seconds_per_flop) / efficiency + kernel_launches(kernels_per_span,
    backward_kernels_per_span) + graph_ops_per_span * gpu.graph_op_overhead_s + random_elems_per_span /
    gpu.rng_elements_per_s`` (:func:`~gnnplan.simulator.hardware.formulas.kernel_launches`).

    Attributes:
        seconds_per_flop: roofline seconds per FLOP of the phase's kernels (efficiency 1, no overhead).
        kernels_per_span: kernels one span of the phase runs (mean over the phase's spans).
        graph_ops_per_span: of those, DGL message-passing calls (``Kernel.graph_op``).
        backward_kernels_per_span: of those, gradient kernels autograd runs (``Kernel.backward``).
        random_elems_per_span: random numbers one span draws (``Kernel.random_elems``).
        roofline_fixed_s: roofline seconds a span pays whatever its FLOPs (a mini-batch's kernels on a smaller
            batch: :func:`~simulator.hardware.formulas.roofline_line`); 0 for a profile in proportion to FLOPs.
    """

    seconds_per_flop: float
    kernels_per_span: float
    graph_ops_per_span: float = 0.0
    random_elems_per_span: float = 0.0
    roofline_fixed_s: float = 0.0
    backward_kernels_per_span: float = 0.0


def kernel_profile(spans: Sequence[Sequence[Kernel]], gpu: GpuSpec,
                   line_through: Sequence[Sequence[Kernel]] = ()) -> PhaseProfile:
    """The :class:`PhaseProfile` of a phase whose spans run the given kernel lists (one list per span): counts per
    span are the spans' means, and the roofline seconds lie on the least-squares line through the spans' (and
    ``line_through``'s: the same kernels on other batch sizes, not spans of the phase) roofline seconds against
    their FLOPs (:func:`~simulator.hardware.formulas.roofline_line`), so a span is priced at its own size. Until
    2026-11-29 every span was priced at the spans' mean seconds per FLOP, and a trace the simulator predicted on
    machines of 4 GPUs, calibrated on its own cluster, fitted dp's forward fraction up to 1.24x and gsplit's
    1.44x (partial batches and GPUs' splits of other sizes priced off their roofline)."""
    intercept, slope = roofline_line([*spans, *line_through], gpu)
    n = max(len(spans), 1)
    graph_ops = sum(1 for ks in spans for k in ks if getattr(k, "graph_op", False))
    drawn = sum(getattr(k, "random_elems", 0.0) for ks in spans for k in ks)
    backward = sum(backward_kernel_count(ks) for ks in spans)
    return PhaseProfile(slope, sum(len(ks) for ks in spans) / n, graph_ops / n, drawn / n, intercept, backward / n)


def minibatch_blocks(ctx: SimContext, scale: float = 1.0) -> list[Block]:
    """One worker's sampled mini-batch (the mean blocks of ``ctx.sample``, input side first) whose seeds are
    ``scale`` times a full batch."""
    st = ctx.sample
    return [Block(s, d, e).scaled(scale) for s, d, e in zip(st.num_src_vertices, st.num_dst_vertices, st.num_edges)]


def minibatch_model_cost(ctx: SimContext, blocks: Sequence[Block]) -> ModelCost:
    """The workload's model on ``blocks``: what every mini-batch strategy (``dp``, ``hopgnn``) computes."""
    return model_cost(ctx.workload.model, ctx.summary.feature_dim, ctx.summary.num_classes, blocks)


SMALLER_BATCH_FRACTION = 0.5
"""Size of the second mini-batch, as a fraction of the mean one's seeds, whose kernels place the line of a batch's
roofline seconds against its FLOPs
(:func:`~simulator.hardware.formulas.roofline_line`)."""


def minibatch_compute_profile(ctx: SimContext) -> dict[str, PhaseProfile]:
    """Forward, backward and optimizer of the mean mini-batch, one span each per iteration (the calibration
    profile of a strategy computing :func:`minibatch_model_cost` on :func:`minibatch_blocks`); forward and backward
    on the line through the mean batch and one of :data:`SMALLER_BATCH_FRACTION` its size (the last, partial batch, a
    larger one, hopgnn's micrographs: each priced at its own FLOPs on it)."""
    cost, gpu = minibatch_model_cost(ctx, minibatch_blocks(ctx)), ctx.cluster.gpu
    small = minibatch_model_cost(ctx, minibatch_blocks(ctx, SMALLER_BATCH_FRACTION))
    return {"forward": kernel_profile([cost.forward], gpu, line_through=[small.forward]),
            "backward": kernel_profile([cost.backward], gpu, line_through=[small.backward]),
            "optimizer": kernel_profile([cost.optimizer], gpu)}


@dataclass(frozen=True)
class MemoryEstimate:
    """Peak memory per GPU and per machine's host, by part, and whether it fits the cluster; ``phases``: each
    phase's ``{gpu, host}`` peak where the parts are the larger of several (training and evaluation,
    :func:`simulator.strategies.inference_memory.peak_of_phases`), else None."""

    gpu_parts: dict[str, float]
    host_parts: dict[str, float]
    feasible: bool
    reason: str
    phases: dict[str, dict[str, float]] | None = None

    @property
    def gpu_bytes(self) -> float:
        """Peak bytes on one GPU."""
        return sum(self.gpu_parts.values())

    @property
    def host_bytes(self) -> float:
        """Peak bytes in one machine's host memory."""
        return sum(self.host_parts.values())

    @property
    def peak_memory_bytes(self) -> dict[str, float]:
        """The ``simulate --json`` ``peak_memory_bytes`` object."""
        return {"gpu": self.gpu_bytes, "host": self.host_bytes}

    def result_fields(self) -> dict[str, Any]:
        """The ``simulate --json`` memory keys: ``peak_memory_bytes``, ``peak_memory_parts`` (per memory, the
        bytes by part of the peak: per GPU and per machine's host) and, where phases are priced apart,
        ``peak_memory_phases``."""
        out: dict[str, Any] = {"peak_memory_bytes": self.peak_memory_bytes,
                               "peak_memory_parts": {"gpu": dict(self.gpu_parts), "host": dict(self.host_parts)}}
        if self.phases is not None:
            out["peak_memory_phases"] = self.phases
        return out


def memory_estimate(cluster: ClusterSpec, gpu_parts: dict[str, float], host_parts: dict[str, float],
                    context: str = "") -> MemoryEstimate:
    """Compare a configuration's memory parts with one GPU's and one host's capacity.

    On a CPU-only cluster (``gpu.is_host_cpu``) the workers' "GPU" memory lives in host memory, so it is added
    to the host parts (once per worker of the machine).

    Args:
        cluster: the cluster (``gpu.memory_bytes``, ``host.memory_bytes``).
        gpu_parts, host_parts: bytes by part, per GPU and per machine.
        context: prefix of the reason (e.g. ``"host placement: "``).

    Returns:
        The estimate; ``reason`` names each memory that overflows, by how much and its three largest parts.
    """
    host = dict(host_parts)
    if cluster.gpu.is_host_cpu:
        host["workers' model memory (CPU-only)"] = cluster.gpus_per_machine * sum(gpu_parts.values())
    reasons = []
    budgets = (("GPU", gpu_parts, cluster.gpu.memory_bytes), ("host", host, cluster.host.memory_bytes))
    for what, parts, budget in budgets:
        need = sum(parts.values())
        if need > budget:
            top = ", ".join(f"{k} {bytes_text(parts[k])}" for k in sorted(parts, key=lambda k: -parts[k])[:3])
            reasons.append(f"{context}out of {what} memory: needs {bytes_text(need)} of {bytes_text(budget)} (over "
                           f"by {bytes_text(need - budget)}; largest parts: {top})")
    return MemoryEstimate(dict(gpu_parts), host, not reasons, "; ".join(reasons))


def batch_size_of(knobs: Any, workload: WorkloadSpec) -> int:
    """The global batch size (seeds, or rows for pre-propagation models, per iteration over all workers) a
    configuration trains with: its ``batch_size`` knob where the strategy has one and it is set, else the workload's
    ``training.batch_size``. The one rule the simulator, the tuner and the executors share (``knobs``: the
    strategy's knobs, their mapping as a plan or a result holds them, or None)."""
    value = knobs.get("batch_size") if isinstance(knobs, Mapping) else getattr(knobs, "batch_size", None)
    return int(value or workload.training.batch_size)


def oversized_batch_note(workload: WorkloadSpec, num_workers: int, knobs: Any = None,
                         num_train: int | None = None) -> str | None:
    """A note when a mini-batch configuration's global batch (:func:`batch_size_of`) holds more seeds than the
    dataset has training vertices, else None: the batch is then the whole training set (each worker's share in as
    few iterations as :func:`iteration_plan` gives; the executors' samplers do the same), and a larger number
    changes nothing. Reads the dataset's sizes (:func:`~simulator.workload.graphstats.dataset_summary`, cached).

    Args:
        workload: the workload (its dataset, mode and ``training.batch_size``).
        num_workers: the workers (ranks) the global batch is split over.
        knobs: the strategy's knobs or their mapping (a ``batch_size`` knob overrides the workload's), or None.
        num_train: the dataset's training vertices when the caller has them (a simulation context's
            ``summary``): no dataset is read then (a card's or an R-MAT graph's summary builds the graph:
            seconds in a fresh process).

    Raises:
        SpecError: the dataset cannot be resolved or loaded.
    """
    from gnnplan.simulator.workload.graphstats import dataset_summary

    if workload.training.mode != "mini-batch":
        return None
    batch = batch_size_of(knobs, workload)
    if num_train is None:
        num_train = dataset_summary(workload.dataset).num_train
    if batch <= num_train or batch < num_workers:
        return None
    plan = iteration_plan(num_train, batch, num_workers)
    share = math.ceil(num_train / num_workers)
    return (f"the batch size {batch} is larger than the dataset's {num_train} training vertices: an epoch is "
            f"{plan.num_iterations} iteration{'s' if plan.num_iterations > 1 else ''} in which "
            + ("the worker takes all of them" if num_workers == 1 else
               f"each of the {num_workers} workers takes its share of them (at most {share})")
            + (f"; {num_workers - num_train} of the workers get none" if num_workers > num_train else "")
            + ", and a larger batch size changes nothing")


def suggest_batch_size(trial: Any, strategy: str, workload: WorkloadSpec) -> int:
    """The tuner's batch-size choice (parameter ``<strategy>.batch_size``) when the user allows changing it:
    the workload's batch size B and B/4, B/2, 2B, 4B (at least 1), as a categorical so studies over
    strategies share the same grid.

    Args:
        trial: an ``optuna.Trial`` (duck-typed: ``suggest_categorical``).
        strategy: the plug-in's ``NAME``.
        workload: the workload whose ``training.batch_size`` is the centre.
    """
    base = workload.training.batch_size
    choices = sorted({max(1, base // 4), max(1, base // 2), base, base * 2, base * 4})
    return int(trial.suggest_categorical(f"{strategy}.batch_size", choices))


def folds_proxy_ranks(ctx: SimContext) -> bool:
    """Whether a strategy that measures per-rank statistics on a card's proxy simulates one representative machine
    from them (``gsplit.rank_mean``, ``hopgnn.rank_mean``): the dataset is a card (its per-rank differences are
    those of one proxy partition), the cluster has several machines (else nothing to fold), and the fast path is
    on (not inside :func:`gnnplan.simulator.symmetry.disabled`)."""
    return card_name(ctx.workload.dataset) is not None and ctx.cluster.num_machines > 1 and symmetry.enabled()
