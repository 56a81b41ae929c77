"""GSplit (``gsplit``): split-parallel mini-batch training: one mini-batch per iteration for all GPUs, split by
vertex owner so every vertex is loaded and computed once, at the price of one shuffle per layer and pass.

Source: Polisetty et al., "GSplit: Scaling Graph Neural Network Training on Large Graphs via Split-Parallelism",
arXiv 2303.13775 v1 (mechanism brief ../shared/papers/gsplit.md). Compared with ``dp`` (data parallelism: g
micro-batches of B/g seeds, sampled independently, whose overlapping samples are loaded and computed on several
GPUs).

Notation: g GPUs -> ``num_workers`` (splits, one per GPU of the whole cluster), B -> ``batch_size``, P(v) -> the
``split`` partition of the graph into g parts, C_i -> the feature cache of GPU i (``cache_fraction``), c ->
``cache_fraction``, L -> ``num_layers``. Terms (split, reference vertex, shuffle): :mod:`.split`.

Mechanism (brief §1.2-§1.6), per iteration:

1. a sampler of each machine samples the iteration's mini-batch of B seeds (the same batch on every machine,
   seeded by its seeds) and splits it online: every sampled vertex of every layer goes to the split of its
   owner, every edge to its source's split (GraphSAGE) or its destination's (GAT) [brief §1.4, §2.3];
2. GPU i loads its split's structure and the features of its owned layer-0 vertices that miss C_i, the
   highest in-degree vertices of its own partition (disjoint caches covering g c of the graph): a feature is
   loaded at most once, by its owner (brief §1.3);
3. per layer, the GPUs compute their split and exchange source-side rows in one shuffle, lockstep, forward;
   the gradients go back the same way backward (brief §1.5; GraphSAGE ships partial sums per (split,
   destination), GAT projected rows per (source, destination split), §1.6-§1.7);
4. the loss of each GPU's own targets is scaled by 1 / B, so the summed gradient is that of the global batch;
   gradients are all-reduced, then Adam (brief §1.2 step 4).

Beyond one machine [inferred; the paper has one host]: P has one part per GPU of the cluster, a machine's host
memory holds its GPUs' partitions, and shuffle messages between machines cross PCIe, the network and PCIe (the
network alone with ``network.gpudirect_rdma``).

Simulation: :mod:`.run` (the simpy window), :mod:`.work` (bytes, FLOPs, seconds and memory), :mod:`.stats`
(measured split statistics of the window's batches); spans ``sample``, ``split``, ``load``, ``forward``,
``lockstep``, ``shuffle``, ``backward``, ``all_reduce``, ``optimizer``, ``iteration``. For a dataset card on
several machines every GPU does the per-rank mean split, each shuffle at the busiest measured link's load
(:mod:`.rank_mean`: the statistics are one proxy partition's, where their imbalance sits is estimation noise),
so one representative machine is simulated (:mod:`gnnplan.simulator.symmetry`; the result's ``estimated`` says
so); measured splits of a real graph are simulated rank by rank.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Literal

import numpy as np
from pydantic import ConfigDict, Field

from gnnplan.simulator.hardware.phase_rules import PhaseRule, SpanRow
from gnnplan.simulator.hardware.pricing import iteration_fixed_s
from gnnplan.simulator.result import LINKS, SimResult
from gnnplan.simulator.spec_model import SpecModel
from gnnplan.simulator.strategies import calibration_rules as rules
from gnnplan.simulator.strategies.base import PhaseProfile, SimContext, kernel_profile, suggest_batch_size
from gnnplan.simulator.strategies.contract import check_workload as contract_check
from gnnplan.simulator.strategies.gsplit import rank_mean
from gnnplan.simulator.strategies.gsplit.run import PHASES, SplitRun
from gnnplan.simulator.strategies.gsplit.stats import SplitStats, split_stats
from gnnplan.simulator.strategies.gsplit.work import IterationWork, iteration_work, link_bytes, memory_model, segments
from gnnplan.simulator.strategies.inference_time import evaluation_block, evaluation_profiles, evaluation_time_s
from gnnplan.simulator.strategies.window import (
    IterationPlan,
    iteration_plan,
    phase_breakdown,
    place_window,
    steady_period_s,
    with_sampler_processes,
)
from gnnplan.simulator.workload.model_cost import Kernel
from gnnplan.simulator.workload.spec import WorkloadSpec

NAME = "gsplit"
EXECUTOR = "gnnplan.executor.strategies.gsplit"
SUPPORTS = ("mini-batch",)
MODEL_ARCHS = ("sage", "gat")
"""The paper's models (brief §4: GraphSage and GAT)."""
NEEDS_SAMPLE_STATS = False
"""``dp``'s per-worker statistics do not describe one global batch; :mod:`.stats` measures the splits."""
TRAINER_PHASES = ("load", "forward", "lockstep", "shuffle", "backward", "all_reduce", "optimizer")


class Knobs(SpecModel):
    """The ``gsplit`` strategy's knobs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cache_fraction: float = Field(
        default=0.0, ge=0, le=1,
        description="fraction of all vertices whose features each GPU caches: the highest in-degree vertices of "
                    "its own partition (disjoint caches; together g x cache_fraction of the graph)")
    split: Literal["metis", "random"] = Field(
        default="metis", description="offline vertex-to-GPU partition the online split looks up (metis: min edge "
                                     "cut; random: balanced, an edge is local with probability 1/g)")
    num_sampler_workers: int = Field(
        default=0, ge=0, le=64,
        description="sampler processes per machine, each sampling and splitting whole mini-batches ahead of "
                    "training; 0 samples and splits inline")
    batch_size: int | None = Field(
        default=None, ge=1, description="overrides training.batch_size (seeds per iteration, all GPUs) if set")


def _shuffle_work(row: SpanRow) -> dict[str, float]:
    """A shuffle call's row (its rank with the most bytes across machines): the bytes inside the machine and
    across, those through the NIC it shares with the machine's other GPUs' shuffles beside it
    (:func:`~simulator.strategies.calibration_rules.contended_bytes`)."""
    own = rules.span_arg(row, "network_bytes")
    return {"intra_bytes": rules.span_arg(row, "intra_bytes"), "network_bytes": own,
            "nic_bytes": own + rules.contended_bytes(row, own, rules.arg_of("network_bytes"), rules.same_nic(row))}


CALIBRATION: dict[str, PhaseRule] = {
    "sample": rules.sample_rule(),
    "split": PhaseRule("split", lambda row: {"num_items": rules.span_arg(row, "num_split_items"),
                                             "num_calls": rules.span_arg(row, "num_sampler_calls")}),
    "load": rules.load_rule(nested=(), copied="structure_bytes"),
    "shuffle": PhaseRule("shuffle", _shuffle_work, rows="per_call", min_workers=2, peers=True,
                         call_load=lambda row: rules.span_arg(row, "network_bytes")),
    **rules.compute_rules(),
    "all_reduce": rules.all_reduce_rule(ddp=True),
    "iteration": rules.iteration_rule(TRAINER_PHASES, batch_phases=("sample", "split"), wait_for_batch=True),
    **rules.evaluation_rules(),
}
"""How calibration prices ``gsplit``'s spans: ``split`` is the priced ``split`` of the split's vertex lookups
(``num_split_items``) in one call per layer (``num_sampler_calls``), with its own parameters
(``host.split_items_per_s_per_core``, ``host.split_call_s``): priced as sampling until 2026-11-28, its rows and the
``sample`` rows pulled the shared sampler parameters apart (the main job's gsplit run on this machine: held-out
epochs -18.8% calibrated, -11.5% with the split rows left out of the fit); ``shuffle`` the priced ``shuffle`` of its
intra-machine and network bytes (one all-to-all call: ``network.per_all_to_all_s`` and the messages), one row per
shuffle call, timed from the last rank's arrival (an executor's shuffle span includes waiting for the slower
splits, which the simulator's barrier produces as ``lockstep``); ``load`` a feature load
whose structure bytes are copied without a gather."""


def suggest(trial: Any, workload: Any, tune_batch_size: bool = False) -> Knobs:
    """The Optuna search space of ``gsplit`` (parameter names ``gsplit.<knob>``).

    Args:
        trial: an ``optuna.Trial``.
        workload: the workload; its batch size centres the batch-size range when ``tune_batch_size``.
        tune_batch_size: whether the user allows changing the batch size.

    Returns:
        The knobs of this trial.
    """
    knobs: dict[str, Any] = {
        "cache_fraction": trial.suggest_float(f"{NAME}.cache_fraction", 0.0, 1.0),
        "split": trial.suggest_categorical(f"{NAME}.split", ["metis", "random"]),
        "num_sampler_workers": trial.suggest_int(f"{NAME}.num_sampler_workers", 0, 4),
    }
    if tune_batch_size:
        knobs["batch_size"] = suggest_batch_size(trial, NAME, workload)
    return Knobs(**knobs)


def check_workload(workload: WorkloadSpec) -> None:
    """Reject workloads ``gsplit`` cannot run (contract check: mini-batch, GraphSAGE or GAT).

    Raises:
        SpecError: training.mode or model.arch not supported.
    """
    contract_check(sys.modules[__name__], workload)


def stats_of(ctx: SimContext, knobs: Knobs) -> SplitStats:
    """The measured split statistics of this context (cached on disk; :func:`.stats.split_stats`)."""
    wl = ctx.workload
    return split_stats(wl.dataset, wl.training.fanouts, ctx.batch_size, ctx.num_workers, knobs.split,
                       self_loops=wl.model.arch == "gat", seed=wl.training.seed, partition_seed=ctx.seed,
                       num_train=ctx.summary.num_train)


def window_works(ctx: SimContext, knobs: Knobs) -> tuple[SplitStats, IterationPlan, list[IterationWork]]:
    """The statistics, the epoch's plan (one global batch per iteration) and the work of every window position."""
    stats = stats_of(ctx, knobs)
    plan = iteration_plan(ctx.summary.num_train, ctx.batch_size, 1)
    works = [iteration_work(ctx, stats, knobs.cache_fraction, pos) for pos in range(len(plan.window))]
    return stats, plan, works


def pipelined(plan: IterationPlan, works: list[IterationWork],
              num_sampler_workers: int) -> tuple[IterationPlan, list[IterationWork]]:
    """The plan whose window holds the pipeline of ``num_sampler_workers`` sampler processes per machine
    (:func:`~gnnplan.simulator.strategies.window.window_shape`) and its work per window position: the measured
    positions' own (``works``, one per position of ``plan``'s window, :mod:`.stats`), and for the iterations the
    longer window adds, the measured full iterations' in turn (iteration i the (i mod m)-th of the m measured:
    each is one random batch of the epoch, so another is as good a sample of it)."""
    longer = with_sampler_processes(plan, num_sampler_workers)
    if longer.window == plan.window:
        return longer, works
    measured = dict(zip(plan.window, works, strict=True))
    full = [measured[it] for it in plan.window[:-1]] or works
    return longer, [measured.get(it, full[it % len(full)]) for it in longer.window]


def link_bytes_per_epoch(ctx: SimContext, plan: IterationPlan, works: list[IterationWork]) -> dict[str, float]:
    """Bytes of the epoch per link kind: the window's iterations plus the extrapolated ones at the mean of the
    window's last full iterations."""
    per = [link_bytes(ctx.cluster, w) for w in works]
    steady = per[:plan.head][-plan.steady_iterations:] or per
    return {k: sum(p[k] for p in per) + plan.extrapolated * float(np.mean([p[k] for p in steady])) for k in LINKS}


def simulate(ctx: SimContext, knobs: Knobs) -> SimResult:
    """Simulate one epoch of ``gsplit`` (module docstring) and return the ``simulate --json`` result with spans.

    Returns:
        The result; a configuration that does not fit in memory has ``feasible=False``, a reason, infinite times.

    Raises:
        SpecError: a workload this strategy cannot run.
    """
    started = time.perf_counter()
    check_workload(ctx.workload)
    stats = stats_of(ctx, knobs)
    plan = iteration_plan(ctx.summary.num_train, ctx.batch_size, 1)
    estimated, simulated = ctx.estimated, stats
    if rank_mean.applies(ctx):  # a card: every GPU at the mean split, one representative machine (rank_mean)
        simulated = rank_mean.rank_mean_stats(stats, ctx.cluster.gpus_per_machine)
        if estimated is not None:
            statistics = dict(estimated.get("statistics", {}))
            statistics["split_stats"] = f"{statistics.get('split_stats', 'measured on the proxy')}; {rank_mean.NOTE}"
            estimated = {**estimated, "statistics": statistics}
    works = [iteration_work(ctx, simulated, knobs.cache_fraction, pos) for pos in range(len(plan.window))]
    plan, works = pipelined(plan, works, knobs.num_sampler_workers)
    # memory: the largest measured split; bytes: the mean keeps every total over GPUs and link kinds
    inferred = evaluation_block(ctx, knobs.split)
    memory = memory_model(ctx, stats, knobs.cache_fraction, knobs.num_sampler_workers, works, inferred)
    sim_works = works
    if simulated is not stats:  # each shuffle at its busiest measured link's load (rank_mean.busiest_shuffles)
        sim_works = rank_mean.busiest_shuffles(works, stats, ctx.workload.model.arch, ctx.cluster.gpus_per_machine)
    common: dict[str, Any] = {
        "strategy": NAME, "knobs": knobs.model_dump(), "num_iterations": plan.num_iterations,
        "bytes_per_epoch": link_bytes_per_epoch(ctx, plan, works), **memory.result_fields(),
        "evaluation_time_s": evaluation_time_s(ctx, inferred)}
    if not memory.feasible:
        return SimResult.infeasible(memory.reason, sim_wall_s=time.perf_counter() - started, estimated=estimated,
                                    **common)
    run = SplitRun(ctx, plan, sim_works, knobs.num_sampler_workers)
    run.execute()
    ends = [max(run.ends[r][pos] for r in range(ctx.num_workers)) for pos in range(len(plan.window))]
    period = steady_period_s(ends, plan)
    epoch = ends[-1] + plan.extrapolated * period
    breakdown = phase_breakdown(run.spans, plan, PHASES)
    breakdown["overhead"] = plan.num_iterations * iteration_fixed_s(
        ctx.cluster, handoffs=float(knobs.num_sampler_workers > 0))
    return SimResult(feasible=True, epoch_time_s=epoch, iteration_time_s=epoch / plan.num_iterations,
                     breakdown_s=breakdown, spans=run.with_images(place_window(run.spans, plan, period)),
                     sim_wall_s=time.perf_counter() - started, estimated=estimated, **common)


def compute_profile(ctx: SimContext, knobs: Knobs) -> dict[str, PhaseProfile]:
    """Per compute phase, seconds per FLOP and kernels per span over every split's segments of the window's
    batches (one span per segment, as the executor records them), the optimizer's, and the evaluation's forward
    per layer and chunk (for calibration)."""
    _, _, works = window_works(ctx, knobs)
    arch, num_layers, gpu = ctx.workload.model.arch, ctx.workload.model.num_layers, ctx.cluster.gpu
    spans: dict[str, list[list[Kernel]]] = {"forward": [], "backward": []}
    for w in works:
        for s in w.splits:
            fwd, bwd = segments(s.cost, arch, num_layers, w.has_backward)
            spans["forward"] += fwd
            spans["backward"] += bwd
    optimizer = [list(works[0].splits[0].cost.optimizer)]
    return {**{p: kernel_profile(ks, gpu) for p, ks in spans.items()}, "optimizer": kernel_profile(optimizer, gpu),
            **evaluation_profiles(ctx, knobs.split)}
