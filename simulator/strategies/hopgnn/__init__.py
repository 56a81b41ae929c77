"""HopGNN (``hopgnn``): feature-centric mini-batch training that moves the model to the features.

Source: Chen, He, Qu and Zhang, "HopGNN: Boosting Distributed GNN Training Efficiency via Feature-Centric Model
Migration", 2024 (mechanism brief ../shared/papers/hopgnn.md). Builds on the ``dp`` pipeline: the same global
mini-batches, the same sampler, all-reduce and optimizer. Knob ``seed_split``: ``owner`` gives model d exactly
``dp``'s worker-d batch (DistDGL's node_split prefers seeds owned by the worker's machine, so most of them are
already at home); ``random`` gives the paper's globally random per-model mini-batches (§5.1).

Terms (paper-private): a *micrograph* is the sampled L-hop computation graph of one seed vertex (sampled on its
home machine with the other seeds of its group); a seed's *home* is the machine owning its features; model d (the
replica that starts on worker d) visits the machines in *time steps* t = 0..M-1, at step t training the micrographs of
its seeds homed
on machine ``(m_d + t) mod M``; *pre-gathering* fetches, once per iteration, the deduplicated remote input
features of all micrographs a worker hosts; *merging* removes steps (their seeds join the same model's other
steps and run away from home). Notation: N servers -> M machines (``num_machines``), S -> ``num_steps``,
mg_d^s -> a micrograph group, R_micro / m_mg / |R_s| ->
:class:`~simulator.strategies.hopgnn.micrographs.MicrographStats`.

Per iteration and worker (simulated on :class:`~simulator.hardware.model.HardwareModel`):

1. ``sample``: the micrograph groups the worker hosts, sampled on its (home) machine, one sampler call per group
   (paper §5.1 steps 1-2; host core; inline or in sampler processes, then the trainer's hand-off
   ``host.sampler_handoff_s``). Every rank derives every model's batch from the shared seed schedule, so the
   redistribution of root ids needs no message (brief §1.9 step 4) and nothing else crosses the network before the
   pre-gather. Sampled edges: the groups' measured block sizes (:mod:`.micrographs`), so the loss of
   deduplication between groups (a vertex two groups reach is sampled twice) is charged.
2. ``pregather`` (knob ``pregather``): the local input rows of all hosted groups are gathered from host memory,
   then their distinct remote rows are pulled once (§5.2) as the executor pulls them (``RowStore.pull``, also with
   no remote row: three collective ``all_to_all`` calls, row counts, ids to each owner, rows back, each paying
   ``network.per_all_to_all_s`` after waiting for every worker, :data:`~.base.FETCH_COLLECTIVES`); the executor
   then holds both parts in one buffer, so with a pull every row is written once more (a second pass over the
   local rows' bytes and one over the pulled rows', priced as host gathers: :meth:`.run.HopRun._pregather`).
3. S steps: ``load`` (the group's rows: from the pre-gather buffer, or local gather + remote ``fetch`` per step without
   pre-gathering, the same collective pull, on every worker at every step; then host-to-device), ``forward``,
   ``backward`` (their kernels' launch cost ``gpu.kernel_overhead_s`` is paid per step, the per-step launches of §5.3),
   the framework's fixed cost ``iteration_overhead_s`` per step that trains a group ([inferred]: each such step is one
   forward/backward pass of the training loop; a step that only loads, as the naive variant's tour, or hosts nothing
   pays none; an iteration pays at least one: :attr:`~.work.HopWork.paid_steps`), then, except after the last step,
   ``migrate``: a barrier over all workers (§5.1 idle slots) and a ring shift of parameters and accumulated gradients
   (``2 P b_p`` bytes, ``P b_p`` without parameters).
4. ``all_reduce`` of the gradients in one call after the last step (the executor's flat all-reduce, not DDP's
   buckets: ``training.ddp_bucket_bytes`` does not apply; brief: "iteration end: all-reduce"), ``optimizer``.
   Knob ``sampler`` (``dgl`` / ``keyed``) is the executor's neighbour sampler; both are priced alike.

With ``micrograph = false`` the naive feature-centric variant is simulated instead
(:func:`~simulator.strategies.hopgnn.work.naive_work`; executed by
:class:`~gnnplan.executor.strategies.hopgnn.naive.NaiveTrainer` for sage, gcn and gin). ``num_steps = None``
predicts the merge controller's steady state: the hill climb of §5.3 (start at M, merge while the epoch time falls)
is followed, simulating the epoch time of each S it visits; ``merge_revert`` keeps the best S seen, else the first S
that did not improve. The controller's exploration epochs are not charged. ``controller_warmup_epochs`` only affects
the executor.

Window: every worker's measured work is its own, so every rank is simulated, except for a dataset card: its
statistics come from one proxy draw, so only one representative machine is simulated (:mod:`simulator.symmetry`),
running between two step barriers the measured work of the machine whose worker is slowest there
(:mod:`.rank_mean`, said in the result's ``estimated``). Without
sampler processes the first :data:`LOCKSTEP_ITERATIONS` iterations and the last are simulated first; when every
worker ends each iteration at the same instant, later iterations repeat the first and that short window is
extrapolated (:func:`window_run`); otherwise the window of :mod:`simulator.strategies.window`.

Memory: ``dp``'s model without a feature cache, plus the migration buffer (GPU) and the pre-gather buffer (host).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal

from pydantic import ConfigDict, Field

from gnnplan.simulator import symmetry
from gnnplan.simulator.hardware.collectives import all_reduce_link_bytes
from gnnplan.simulator.hardware.model import CUDA_CONTEXT_BYTES, FLOAT_BYTES
from gnnplan.simulator.hardware.phase_rules import PhaseRule
from gnnplan.simulator.hardware.pricing import iteration_fixed_s
from gnnplan.simulator.result import LINKS, SimResult
from gnnplan.simulator.spec_model import SpecModel
from gnnplan.simulator.strategies import calibration_rules as rules
from gnnplan.simulator.strategies.base import (
    FETCH_COLLECTIVES,
    FETCH_REQUEST_MESSAGES,
    MemoryEstimate,
    PhaseProfile,
    SimContext,
    minibatch_compute_profile,
    suggest_batch_size,
)
from gnnplan.simulator.strategies.contract import check_workload
from gnnplan.simulator.strategies.hopgnn import micrographs, rank_mean
from gnnplan.simulator.strategies.hopgnn.micrographs import MicrographStats
from gnnplan.simulator.strategies.hopgnn.run import PHASES, HopRun
from gnnplan.simulator.strategies.hopgnn.work import HopWork, hop_work, model_costs, naive_work
from gnnplan.simulator.strategies.host_memory import (
    feature_partition_bytes,
    vertex_maps_bytes,
    whole_graph_parts,
    worker_processes_bytes,
)
from gnnplan.simulator.strategies.inference_memory import with_evaluation
from gnnplan.simulator.strategies.inference_time import evaluation_block, evaluation_profiles, evaluation_time_s
from gnnplan.simulator.strategies.window import (
    IterationPlan,
    iteration_plan,
    phase_breakdown,
    place_window,
    steady_period_s,
)
from gnnplan.simulator.workload.inference import InferenceStats
from gnnplan.simulator.workload.model_cost import INDEX_BYTES, model_state_bytes
from gnnplan.simulator.workload.spec import MESSAGE_PASSING_ARCHS

NAME = "hopgnn"
EXECUTOR = "gnnplan.executor.strategies.hopgnn"
SUPPORTS = ("mini-batch",)
MODEL_ARCHS = MESSAGE_PASSING_ARCHS
NEEDS_SAMPLE_STATS = True
"""The models' mini-batches are ``dp``'s, sized by the measured mini-batch statistics."""
CALIBRATION: dict[str, PhaseRule] = {
    "fetch": rules.fetch_rule(FETCH_REQUEST_MESSAGES, FETCH_COLLECTIVES), "load": rules.load_rule(),
    **rules.compute_rules(), "sample": rules.sample_rule(),
    "iteration": rules.iteration_rule(("pregather", "load", "forward", "backward", "migrate", "all_reduce",
                                       "optimizer"), per_span_of="forward"),
    "all_reduce": rules.all_reduce_rule(), **rules.evaluation_rules()}
"""How calibration prices ``hopgnn``'s spans (the executor pulls rows with the same feature store as ``dp``: three
collective calls per pull); ``pregather`` (a local gather and such a pull in one span) and ``migrate`` are on the
trainer's path but not priced; the fixed framework cost
is paid once per step (module docstring, 4.); the evaluation is ``dp``'s."""


class Knobs(SpecModel):
    """The ``hopgnn`` strategy's knobs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    micrograph: bool = Field(
        default=True, description="micrograph training; false = the naive feature-centric variant (paper §3.2)")
    pregather: bool = Field(
        default=True, description="fetch each iteration's remote features once, deduplicated (paper §5.2)")
    num_steps: int | None = Field(
        default=None, ge=1, le=1024,
        description="time steps per iteration after merging (capped at the machines); None = merge controller")
    merge_revert: bool = Field(
        default=True, description="controller: go back to the best step count after an unprofitable merge")
    controller_warmup_epochs: int = Field(
        default=1, ge=0, le=100,
        description="controller: epochs at M steps before the reference epoch (0 = the paper: epoch 0 is it)")
    migrate_parameters: bool = Field(
        default=True, description="a migration carries parameters and gradients (paper); false = gradients only")
    seed_split: Literal["owner", "random"] = Field(
        default="owner", description="models' mini-batches: owner = dp's split (dp's per-worker batches; with "
        "sampler=keyed also dp's samples); random = the paper's globally random mini-batches")
    partitioner: Literal["metis", "random"] = Field(
        default="metis", description="how vertices (and their features) are assigned to machines")
    num_sampler_workers: int = Field(
        default=0, ge=0, le=64, description="sampler processes per worker; 0 samples inline without overlap")
    batch_size: int | None = Field(
        default=None, ge=1, description="overrides training.batch_size (global seeds per iteration) if set")
    sampler: Literal["dgl", "keyed"] = Field(
        default="dgl",
        description="dgl: DGL's NeighborSampler at each home machine; keyed: each vertex's neighbours chosen by a "
                    "hash of (seed, epoch, iteration, layer, vertex) (executor.sampling_keyed), so the home "
                    "machines draw exactly dp's sample of the same batch (dp with sampler=keyed); slower, priced "
                    "like dgl by the simulator")


def suggest(trial: Any, workload: Any, tune_batch_size: bool = False) -> Knobs:
    """The Optuna search space of ``hopgnn`` (parameter names ``hopgnn.<knob>``). ``micrograph`` stays on: the
    naive feature-centric variant is the paper's ablation baseline (``--set micrograph=false``: simulated for every
    model, executed for sage, gcn and gin without sampler processes, executor.strategies.hopgnn.naive), not a
    configuration to plan.

    Args:
        trial: an ``optuna.Trial``.
        workload: the workload; its batch size centres the batch-size range when ``tune_batch_size``.
        tune_batch_size: whether the user allows changing the batch size.
    """
    knobs: dict[str, Any] = {
        "pregather": trial.suggest_categorical(f"{NAME}.pregather", [True, False]),
        "num_steps": trial.suggest_categorical(f"{NAME}.num_steps", [None, 1, 2, 4, 8]),
        "migrate_parameters": trial.suggest_categorical(f"{NAME}.migrate_parameters", [True, False]),
        "seed_split": trial.suggest_categorical(f"{NAME}.seed_split", ["owner", "random"]),
        "partitioner": trial.suggest_categorical(f"{NAME}.partitioner", ["metis", "random"]),
        "num_sampler_workers": trial.suggest_int(f"{NAME}.num_sampler_workers", 0, 4),
    }
    if tune_batch_size:
        knobs["batch_size"] = suggest_batch_size(trial, NAME, workload)
    return Knobs(**knobs)


def compute_profile(ctx: SimContext, knobs: Knobs) -> dict[str, PhaseProfile]:
    """Forward, backward and optimizer of the mean mini-batch (for calibration): the models compute ``dp``'s
    mini-batch, each step running all its kernels on the step's part of it (the knobs do not change them), and the
    evaluation's forward per layer and chunk."""
    return minibatch_compute_profile(ctx) | evaluation_profiles(ctx, knobs.partitioner)


def micrograph_stats(ctx: SimContext, knobs: Knobs) -> MicrographStats:
    """The measured micrograph statistics of this context (cached on disk)."""
    st = ctx.sample
    return micrographs.micrograph_stats(ctx.workload.dataset, st.fanouts, st.batch_size_per_worker,
                                        ctx.cluster.num_machines, ctx.cluster.gpus_per_machine, knobs.partitioner,
                                        seed=ctx.seed, seed_split=knobs.seed_split)


def iteration_works(ctx: SimContext, knobs: Knobs, mg: MicrographStats | None, plan: IterationPlan,
                    num_steps: int) -> tuple[list[HopWork], list[HopWork]]:
    """Every worker's work in a full iteration and in the (possibly partial) last one."""
    out = []
    for scale in (1.0, plan.last_fraction):
        if not knobs.micrograph:
            out.append([naive_work(ctx, r, scale) for r in range(ctx.num_workers)])
        else:
            assert mg is not None
            out.append([hop_work(ctx, mg, r, num_steps, knobs.migrate_parameters, scale)
                        for r in range(ctx.num_workers)])
    return out[0], out[1]


def link_bytes_per_epoch(ctx: SimContext, knobs: Knobs, plan: IterationPlan, full: list[HopWork],
                         last: list[HopWork] | float) -> dict[str, float]:
    """Bytes all workers send over each link kind in one epoch: pre-gather (or per-step fetch), migrations,
    all-reduce on the network; every group's input rows over PCIe. ``last``: the last iteration's works, or the
    fraction of a full batch it trains (the full works' row bytes scaled by it: :func:`~.work.hop_work` scales
    every row count linearly)."""
    out = {k: 0.0 for k in LINKS}
    multi = ctx.cluster.num_machines > 1
    final = (full, 1, last) if isinstance(last, float) else (last, 1, 1.0)
    for works, count, rows in ((full, plan.num_iterations - 1, 1.0), final):
        for w in works:
            remote = w.pregather_remote_rows if knobs.pregather else sum(s.remote_bytes for s in w.steps) / w.row_bytes
            migrations = len(w.steps) - 1 if knobs.micrograph else w.extra.get("naive_migrations", 0.0)
            net = rows * remote * (w.row_bytes + INDEX_BYTES) + migrations * w.migration_bytes
            out["network"] += count * (net if multi else 0.0)
            out["pcie"] += count * rows * sum(s.input_bytes for s in w.steps)
            for kind, nbytes in all_reduce_link_bytes(w.gradient_bytes, ctx.cluster).items():
                out[kind] += count * nbytes
    return out


def memory_model(ctx: SimContext, knobs: Knobs, full: list[HopWork], inferred: InferenceStats) -> MemoryEstimate:
    """Peak memory of the busiest worker over training and the evaluation after it (:mod:`..inference_memory`;
    the evaluation keeps the framework, model state, graph, features and processes; ``inferred``: its block on the
    knobs' partition), and whether it fits."""
    cl, sm = ctx.cluster, ctx.summary
    cost = model_costs(ctx)
    row = sm.feature_dim * FLOAT_BYTES
    biggest = max((s.input_bytes for w in full for s in w.steps), default=0.0)
    gpu = {"framework reserve": 0.0 if cl.gpu.is_host_cpu else CUDA_CONTEXT_BYTES,
           "parameters, gradients and Adam state": model_state_bytes(cost.num_params),
           "migration buffer": full[0].migration_bytes, "input features": biggest,
           "activations": cost.activation_bytes, "blocks": cost.block_bytes}
    buffer = max((w.pregather_remote_rows + w.pregather_local_rows) * row for w in full) if knobs.pregather else 0.0
    host = {**whole_graph_parts(sm, ctx.workload.model.arch), "feature partition": feature_partition_bytes(cl, sm),
            "vertex maps (int64)": vertex_maps_bytes(cl, sm.num_vertices),
            "worker processes": worker_processes_bytes(cl, knobs.num_sampler_workers),
            "sampler and pre-gather buffers": cl.gpus_per_machine * (cost.block_bytes + buffer)}
    return with_evaluation(ctx, gpu, host, inferred, training_only="sampler and pre-gather buffers")


LOCKSTEP_ITERATIONS = 3
"""Full iterations of the short window tried first when the trainers sample inline (:func:`window_run`)."""
LOCKSTEP_REL_TOL = 1e-9
"""Relative slack on "every worker ends iteration p at (p + 1) times the first iteration's end" (floating point)."""


def in_lockstep(ends: list[list[float]], num_full: int) -> bool:
    """Whether every worker ends each of the first ``num_full`` iterations at the same time, one period D apart:
    ``|ends[r][p] - (p + 1) D| <= 1e-9 (p + 1) D`` for every rank r and p < ``num_full``, D the latest end of
    iteration 0.

    Args:
        ends: per rank, the end time of each window position (seconds).
        num_full: leading positions to check.
    """
    period = max(e[0] for e in ends)
    return period > 0 and all(abs(e[p] - (p + 1) * period) <= LOCKSTEP_REL_TOL * (p + 1) * period
                              for e in ends for p in range(num_full))


def window_run(ctx: SimContext, knobs: Knobs, plan: IterationPlan, full: list[HopWork],
               last: list[HopWork], images: bool = True) -> tuple[HopRun, IterationPlan]:
    """Simulate the epoch's window; returns the run and the plan whose window it simulated.

    Without sampler processes a worker carries nothing from one iteration into the next (its sampling, pulls,
    steps, all-reduce and optimizer all end before its next iteration starts), so when every worker ends an
    iteration at the same instant the cluster is in the state it started the epoch in, shifted in time (the
    model is time-invariant): every later full iteration repeats the first. The first
    :data:`LOCKSTEP_ITERATIONS` iterations and the last are simulated first; when they run in lockstep
    (:func:`in_lockstep`) that short window is the result (its steady period, breakdown and the last iteration's
    start are those of the full window, up to rounding), else the plan's window (:mod:`simulator.strategies.window`:
    up to ``MAX_WINDOW_ITERATIONS``) is simulated. ``images``: see :class:`~.run.HopRun`.
    """
    pregather = knobs.pregather or not knobs.micrograph
    if knobs.num_sampler_workers == 0 and len(plan.window) > LOCKSTEP_ITERATIONS + 1:
        short = replace(plan, window=tuple(range(LOCKSTEP_ITERATIONS)) + (plan.num_iterations - 1,))
        run = HopRun(ctx, 0, pregather, short, full, last, images, knobs.micrograph)
        run.execute()
        if in_lockstep(run.ends, LOCKSTEP_ITERATIONS):
            return run, short
    run = HopRun(ctx, knobs.num_sampler_workers, pregather, plan, full, last, images, knobs.micrograph)
    run.execute()
    return run, plan


def simulate_steps(ctx: SimContext, knobs: Knobs, mg: MicrographStats | None, num_steps: int,
                   slowest: bool = False, images: bool = True, inferred: InferenceStats | None = None) -> SimResult:
    """Simulate one epoch with a fixed number of steps (``num_steps`` <= M; ignored by the naive variant).
    ``slowest``: simulate the representative machine of :func:`.rank_mean.slowest_machine_works` (a dataset
    card); bytes per link and memory still come from every rank's work. ``images`` False: when a
    representative machine was simulated, the spans are its GPUs' only (:func:`complete_spans` adds the rest;
    times and breakdown are the same). ``inferred``: the evaluation's inference block
    (:func:`~..inference_time.evaluation_block`; read here when not given: :func:`simulate` reads it once for every
    S it tries)."""
    started = time.perf_counter()
    plan = iteration_plan(ctx.summary.num_train, ctx.batch_size, ctx.num_workers, knobs.num_sampler_workers)
    slowest = slowest and knobs.micrograph
    if slowest:  # every rank's full iteration; the last one's bytes scale with its rows
        assert mg is not None
        full = [hop_work(ctx, mg, r, num_steps, knobs.migrate_parameters) for r in range(ctx.num_workers)]
        last: list[HopWork] = []
    else:
        full, last = iteration_works(ctx, knobs, mg, plan, num_steps)
    inferred = inferred or evaluation_block(ctx, knobs.partitioner)
    memory = memory_model(ctx, knobs, full, inferred)
    common: dict[str, Any] = {
        "strategy": NAME, "knobs": knobs.model_dump(), "num_iterations": plan.num_iterations,
        "bytes_per_epoch": link_bytes_per_epoch(ctx, knobs, plan, full, float(plan.last_fraction) if slowest else last),
        **memory.result_fields(),
        "evaluation_time_s": evaluation_time_s(ctx, inferred)}
    if not memory.feasible:
        return SimResult.infeasible(memory.reason, sim_wall_s=time.perf_counter() - started, **common)
    if slowest:
        assert mg is not None
        full, last = rank_mean.slowest_machine_works(ctx, mg, full, knobs.pregather, knobs.num_sampler_workers == 0,
                                                     knobs.migrate_parameters, plan.last_fraction)
    run, plan = window_run(ctx, knobs, plan, full, last, images)
    ends = [max(run.ends[r][pos] for r in range(ctx.num_workers)) for pos in range(len(plan.window))]
    period = steady_period_s(ends, plan)
    epoch = ends[-1] + plan.extrapolated * period
    breakdown = phase_breakdown(run.spans, plan, PHASES)
    breakdown["overhead"] = plan.num_iterations * iteration_fixed_s(
        ctx.cluster, steps=full[0].num_overhead_steps, handoffs=float(knobs.num_sampler_workers > 0))
    return SimResult(feasible=True, epoch_time_s=epoch, iteration_time_s=epoch / plan.num_iterations,
                     breakdown_s=breakdown, spans=place_window(run.spans, plan, period),
                     sim_wall_s=time.perf_counter() - started, **common)


def controller_note(steps: int, num_machines: int, times: dict[int, float]) -> str:
    """What the merge controller chose (``num_steps`` unset), for a result's ``notes``: the step count it settled
    on, the epoch time of every S it simulated, and what S = 1 means."""
    tried = ", ".join(f"S={s} {t * 1e3:.4g} ms" for s, t in sorted(times.items(), reverse=True))
    what = ("every model trains all its seeds on its own machine, no migration: dp with pre-gathering"
            if steps == 1 else f"{num_machines - steps} of the {num_machines - 1} migrations merged away")
    return (f"the merge controller settled on num_steps={steps} of {num_machines} ({what}; epochs tried: {tried}); "
            f"set num_steps to fix it")


def controller_steps(times: dict[int, float], num_machines: int, revert: bool) -> int:
    """The step count the merge controller settles on given each S's epoch time (§5.3 hill climbing).

    Args:
        times: epoch time per S in 1..M.
        num_machines: M (the controller starts there).
        revert: after an unprofitable merge, go back to the best S (else keep the unprofitable one).
    """
    s = num_machines
    while s > 1 and times[s - 1] < times[s]:
        s -= 1
    return s if revert or s == 1 else s - 1


def simulate(ctx: SimContext, knobs: Knobs) -> SimResult:
    """Simulate one epoch of ``hopgnn`` (module docstring) and return the ``simulate --json`` result.

    Raises:
        SpecError: a workload this strategy cannot run.
    """
    started = time.perf_counter()
    check_workload(sys.modules[__name__], ctx.workload)
    m = ctx.cluster.num_machines
    inferred = evaluation_block(ctx, knobs.partitioner)
    if not knobs.micrograph:
        return simulate_steps(ctx, knobs, None, m, inferred=inferred)
    measured = micrograph_stats(ctx, knobs)
    slowest = rank_mean.applies(ctx)
    results: dict[int, SimResult] = {}

    def run(num_steps: int) -> SimResult:  # spans of other machines are copied for the chosen S only
        if num_steps not in results:
            results[num_steps] = simulate_steps(ctx, knobs, measured, num_steps, slowest, images=False,
                                                inferred=inferred)
        return results[num_steps]

    if knobs.num_steps is not None:
        result = run(min(knobs.num_steps, m))
    else:
        times = _EpochTimes(lambda s: run(s).epoch_time_s)
        steps = controller_steps(times, m, knobs.merge_revert)
        result = run(steps)
        result.notes = [*result.notes, controller_note(steps, m, dict(times))]
    complete_spans(result, ctx.cluster.gpus_per_machine, ctx.num_workers)
    if slowest and ctx.estimated is not None:
        stats = dict(ctx.estimated.get("statistics", {}))
        stats["micrograph_stats"] = "; ".join(x for x in (stats.get("micrograph_stats"), rank_mean.NOTE) if x)
        result.estimated = {**ctx.estimated, "statistics": stats}
    result.sim_wall_s = time.perf_counter() - started
    return result


def complete_spans(result: SimResult, gpus_per_machine: int, num_workers: int) -> None:
    """Give every GPU its spans when ``result`` (of :func:`simulate_steps` with ``images=False``) holds only a
    representative machine's: each simulated span is copied to the same GPU of every other machine
    (:func:`~simulator.symmetry.machine_images`); nothing to do for a full simulation."""
    ranks = {s.rank for s in result.spans}
    if ranks and max(ranks) < gpus_per_machine < num_workers:
        result.spans = symmetry.machine_images(result.spans, gpus_per_machine, num_workers)


class _EpochTimes(dict[int, float]):
    """Epoch time per step count S, simulated on first use: the controller's hill climb visits only some S and
    settles where it would with every S simulated."""

    def __init__(self, epoch_time_s: Callable[[int], float]) -> None:
        super().__init__()
        self.epoch_time_s = epoch_time_s

    def __missing__(self, num_steps: int) -> float:
        value = self[num_steps] = self.epoch_time_s(num_steps)
        return value
