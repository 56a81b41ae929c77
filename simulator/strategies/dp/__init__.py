"""Data-parallel mini-batch training in the style of DGL/DistDGL (``dp``): the baseline strategy.

Per iteration, every worker (GPU) takes its share of the global mini-batch (seeds split by owner, DistDGL's
``node_split``; with ``seed_split = random`` an even cut of the epoch's shuffle, globally random mini-batches as the
HopGNN paper's DGL baseline takes them, §2 and Fig 3, so ~(M - 1) / M of a worker's inputs are remote; the
statistics are measured on the same batches, :func:`~simulator.workload.batches.split_epoch_seeds`), then:

1. samples an L-layer block list on the host CPU (DGL ``NeighborSampler``, fanouts input side first);
2. loads the input vertices' features: hits in its GPU feature cache (the ``cache_fraction`` highest-degree
   vertices, as PaGraph) cost a GPU-memory read; misses owned by its machine cross PCIe from host memory;
   misses owned by another machine cross that machine's NIC and then PCIe (DistDGL's KVStore pull);
3. runs forward and backward;
4. all-reduces the gradients (ring all-reduce, DDP).

With ``num_sampler_workers > 0`` sampling of the next iterations runs ahead of compute in separate
processes, as DGL's DataLoader prefetches; with 0 it runs inline. Feature loading stays in the training loop
(DistDGL's ``load_subtensor`` in examples/distributed/graphsage/node_classification.py).

Simulation (``simulate``), per worker and iteration, on :class:`~simulator.hardware.model.HardwareModel`:

* ``sample``: ``sum(num_edges)`` sampled edges on one host core of the worker's machine (a flow on the
  machine's cores, so samplers of co-located workers and, on a CPU-only cluster, compute compete for cores).
  With k sampler processes, iteration i is dispatched when the trainer takes batch ``i - 2k``: PyTorch
  DataLoader's default ``prefetch_factor=2`` per worker process (torch.utils.data.DataLoader docs), which
  DGL 1.1's ``dgl.dataloading.DataLoader`` inherits; sampler j handles iterations j, j+k, ... The trainer then
  takes the batch (``host.sampler_handoff_s``: queue get and unpickling, on one of its machine's cores).
  With ``graph_structure = partitioned`` (DistDGL) each machine holds only its partition's adjacency: layer by
  layer from the seeds outward, the destination vertices owned by other machines are sent to their owners
  (int64 ids, one request per owner), which sample them on their own cores and send back the sampled edges
  (source, destination and edge id, int64 each: DGL's ``SubgraphResponse``), while the local vertices are
  sampled at home (DistDGL issues the remote requests first, ``_distributed_access``); see
  :func:`remote_sampling`. Source: Zheng et al., "DistDGL", IA3 2020, §3.3 (distributed sampler);
  dgl/distributed/graph_services.py (DGL 1.1.3). That is the model with sampler processes (DistDGL's RPC to
  the owners' servers; simulated only). Sampled in the trainer (``num_sampler_workers = 0``) the exchange is
  the executor's (:class:`~gnnplan.executor.sampling_partitioned.PartitionedSampler`): per layer four collective
  ``all_to_all`` calls (request counts, ids, reply counts, edges), the worker sampling what the others asked of
  it before the replies and its own vertices after (:meth:`~.run.DpRun._exchange_layer`).
* ``load``, step after step as the executor's ``FeatureStore.load`` does it: with ``cache_placement = partitioned``
  (Quiver) the hits in peer GPUs' slices first, pulled as the executor's ``PeerCache`` does (``RowStore.pull``: three
  collective ``all_to_all`` calls, counts, ids to each peer and rows back over NVLink, PCIe through the host without
  it; :func:`cache_access`; span ``peer_fetch`` inside the load, as the executor's); the own cache's hits gathered on
  the GPU; local misses gathered from host memory; then remote misses pulled (``fetch``, as the executor's
  ``RowStore.pull``: three ``all_to_all`` calls over all workers, the row counts (one int64 to every rank of the other
  machines), the int64 ids to their owners, then the rows back; each call is a collective: it waits until every worker
  has called it, pays ``network.per_all_to_all_s``, then sends one message to each other machine, a flow through the
  worker's NIC and the owner's NIC on the same rail, owners equally loaded; the ``fetch`` span includes the waits,
  ``wait_s``, as the executor's does); then all misses cross PCIe host-to-device. The executor does not overlap the
  local gather with the pull (DistDGL's ``KVClient.pull`` would: it sends the remote requests before the local gather),
  so neither does this model.
* ``forward``, ``backward``: roofline time of the model's kernels (:mod:`simulator.workload.model_cost`)
  divided by ``efficiency.forward_fraction`` / ``backward_fraction``.
* ``all_reduce``: waits for every worker (synchronous DDP), then the hierarchical ring all-reduce of the
  gradients as flows: reduce-scatter over NVLink (PCIe without it), ring across machines on each GPU's shard,
  all-gather; its time without contention equals :func:`~simulator.hardware.collectives.hierarchical_all_reduce_time`.
* ``optimizer`` (Adam, roofline / ``efficiency.optimizer_fraction``), then ``iteration_overhead_s``.

Every machine runs the own work of the machine whose slowest worker takes longest
(:func:`~.work.slowest_machine_works`): with several workers each collective (a pull's calls, the all-reduce) waits
for the slowest one, and a partition can put the demand in one part and the rows it asks for in another. A
worker's work (:func:`~.work.worker_work`) is its own batch from the per-worker statistics
(``SampleStats.worker_ratios``, ``worker_access``): its sampled edges, cache / host / peer rows and passes, and the
rows it pulls, no fewer than the busiest other machine's NIC sends for one worker (``SampleStats.sent_ratio``).
Its batch then grows by how much larger each iteration's largest batch is than the most loaded worker's mean
(:func:`~.work.fluctuation`). The bytes counted per epoch stay the mean worker's.

Memory model (``memory_model``): per GPU = framework reserve + parameters, gradients and Adam state + the
batch's input features + activations and block structure + the feature cache; per machine host = graph
structure (every machine holds the whole graph, COO and CSC, with a self-loop per vertex for GCN and GAT
(:func:`..host_memory.structure_edges`), or with ``graph_structure = partitioned`` the in-edges of the vertices it
owns, the busiest machine's share of the edges (``inference.inference_stats``' ``machine_edge_fraction``: a
vertex-balanced partition can leave most of them on one machine, 0.96 of rmat100k's on 2 METIS parts), as a CSC
over all vertices with each edge's global id) + GCN's float32 edge weights (of the whole graph, and of the part) +
the machine's feature partition + the int64 maps over all vertices its workers share
(:func:`..host_memory.vertex_maps_bytes`: owner, label, the evaluator's rank and position; the feature store's positions
on several machines; the cache's slots, or the peer cache's holders and positions) + per worker a process reserve, its
sampler processes' private memory and sampler buffers (one batch per batch in flight);
on a CPU-only cluster the "GPU" part lives in host memory too. The evaluation after each epoch (layer-wise
inference) keeps the framework, model state, cache, graph, features and processes and adds its own blocks and rows
(:mod:`..inference_memory`); the peak is the larger phase's.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any, Literal

from pydantic import ConfigDict, Field

from gnnplan.simulator.hardware.collectives import all_reduce_link_bytes, intra_machine_link
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
from gnnplan.simulator.strategies.dp.run import DpRun
from gnnplan.simulator.strategies.dp.work import SAMPLED_EDGE_BYTES as SAMPLED_EDGE_BYTES
from gnnplan.simulator.strategies.dp.work import IterationWork, iteration_work, peer_cache
from gnnplan.simulator.strategies.dp.work import cache_access as cache_access
from gnnplan.simulator.strategies.dp.work import remote_sampling as remote_sampling
from gnnplan.simulator.strategies.host_memory import (
    GCN_WEIGHTS,
    feature_partition_bytes,
    gcn_weight_bytes,
    sparse_structure_bytes,
    structure_edges,
    vertex_maps_bytes,
    whole_graph_parts,
    worker_processes_bytes,
)
from gnnplan.simulator.strategies.inference_memory import with_evaluation
from gnnplan.simulator.strategies.inference_time import evaluation_block, evaluation_profiles, evaluation_time_s
from gnnplan.simulator.strategies.window import (
    PREFETCH_FACTOR,
    IterationPlan,
    iteration_plan,
    phase_breakdown,
    place_window,
    steady_period_s,
)
from gnnplan.simulator.workload.inference import InferenceStats
from gnnplan.simulator.workload.model_cost import INDEX_BYTES, ModelCost, model_state_bytes
from gnnplan.simulator.workload.spec import MESSAGE_PASSING_ARCHS

NAME = "dp"
EXECUTOR = "gnnplan.executor.strategies.dp"
SUPPORTS = ("mini-batch",)
MODEL_ARCHS = MESSAGE_PASSING_ARCHS
NEEDS_SAMPLE_STATS = True
"""Sizes of the sampled blocks come from the measured mini-batch statistics."""


class Knobs(SpecModel):
    """The ``dp`` strategy's knobs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cache_fraction: float = Field(
        default=0.0, ge=0, le=1,
        description="fraction of all vertices whose features each GPU caches, highest in-degree first")
    partitioner: Literal["metis", "random"] = Field(
        default="metis", description="how vertices (and their features) are assigned to machines")
    seed_split: Literal["owner", "random"] = Field(
        default="owner",
        description="workers' mini-batches: owner = DistDGL's node_split (a worker's seeds mostly its machine's "
                    "own vertices); random = globally random mini-batches, the DGL baseline of the HopGNN paper "
                    "(§2, Fig 3: ~(M - 1) / M of the input features remote); not searched by the tuner")
    num_sampler_workers: int = Field(
        default=0, ge=0, le=64, description="sampler processes per worker; 0 samples inline without overlap")
    batch_size: int | None = Field(
        default=None, ge=1, description="overrides training.batch_size (global seeds per iteration) if set")
    cache_placement: Literal["replicated", "partitioned"] = Field(
        default="replicated",
        description="replicated: every GPU caches the same hottest vertices (PaGraph); partitioned: the g GPUs "
                    "of a machine cache disjoint slices of the g x cache_fraction hottest, a peer's hit comes "
                    "over NVLink (Quiver)")
    graph_structure: Literal["replicated", "partitioned"] = Field(
        default="replicated",
        description="replicated: every machine holds the whole graph structure and samples locally; partitioned: "
                    "each machine holds its partition's adjacency (DistDGL), so sampling a vertex owned by another "
                    "machine sends a request there and receives the sampled edges (executed in the trainer: "
                    "num_sampler_workers=0; executor.sampling_partitioned)")
    sampler: Literal["dgl", "keyed"] = Field(
        default="dgl",
        description="dgl: DGL's NeighborSampler; keyed: each vertex's neighbours chosen by a hash of (seed, epoch, "
                    "iteration, layer, vertex) (executor.sampling_keyed), the same on every machine, so hopgnn "
                    "with keyed sampling computes dp's exact gradient; slower, priced like dgl by the simulator")


def suggest(trial: Any, workload: Any, tune_batch_size: bool = False) -> Knobs:
    """The Optuna search space of ``dp`` (parameter names ``dp.<knob>``).

    Args:
        trial: an ``optuna.Trial`` (duck-typed: ``suggest_float``, ``suggest_categorical``, ``suggest_int``).
        workload: the :class:`~simulator.workload.spec.WorkloadSpec`; its batch size is the centre of the
            batch-size range when ``tune_batch_size`` is set.
        tune_batch_size: whether the user allows changing the batch size.

    Returns:
        The knobs of this trial.
    """
    knobs: dict[str, Any] = {
        "cache_fraction": trial.suggest_float(f"{NAME}.cache_fraction", 0.0, 1.0),
        "partitioner": trial.suggest_categorical(f"{NAME}.partitioner", ["metis", "random"]),
        "num_sampler_workers": trial.suggest_int(f"{NAME}.num_sampler_workers", 0, 4),
        "cache_placement": trial.suggest_categorical(f"{NAME}.cache_placement", ["replicated", "partitioned"]),
    }
    if tune_batch_size:
        knobs["batch_size"] = suggest_batch_size(trial, NAME, workload)
    return Knobs(**knobs)


# ---------------------------------------------------------------------------------------------- simulation

PHASES = ("sample", "load", "fetch", "forward", "backward", "all_reduce", "optimizer")
CALIBRATION: dict[str, PhaseRule] = {
    "fetch": rules.fetch_rule(FETCH_REQUEST_MESSAGES, FETCH_COLLECTIVES),
    "load": rules.load_rule(nested=("fetch", "peer_fetch")), **rules.compute_rules(),
    "sample": rules.sample_rule(),
    "iteration": rules.iteration_rule(("load", "forward", "backward", "all_reduce", "optimizer")),
    "all_reduce": rules.all_reduce_rule(ddp=True), **rules.evaluation_rules()}
"""How calibration prices ``dp``'s spans (the trainer's path: load, which holds the fetch, forward, backward,
all_reduce, optimizer; sampling inline or prefetched by ``num_sampler_workers`` processes) and its evaluation's."""


def partitioned_structure_bytes(num_vertices: float, part_edges: float) -> float:
    """Bytes of a machine's part of a partitioned structure as the executor holds it: a CSC over all vertices of the
    part's in-edges (:func:`~..host_memory.sparse_structure_bytes`: offsets, in-neighbours, edge ids) and each edge's
    global id, int64 (executor/sampling_partitioned.py ``_partition_graph`` and ``local_structure``)."""
    return sparse_structure_bytes(num_vertices, part_edges, ("csc",)) + part_edges * INDEX_BYTES


def memory_model(ctx: SimContext, knobs: Knobs, cost: ModelCost, stats: InferenceStats) -> MemoryEstimate:
    """Peak memory of a ``dp`` configuration (module docstring) and whether it fits the cluster; ``stats``: the
    inference block on the knobs' partition (:func:`simulator.workload.inference.inference_stats`)."""
    cl, sm = ctx.cluster, ctx.summary
    row = sm.feature_dim * FLOAT_BYTES
    n_in = ctx.sample.num_src_vertices[0]
    cached = math.floor(knobs.cache_fraction * sm.num_vertices + 1e-9)
    gpu = {"framework reserve": 0.0 if cl.gpu.is_host_cpu else CUDA_CONTEXT_BYTES,
           "parameters, gradients and Adam state": model_state_bytes(cost.num_params),
           "input features": n_in * row, "activations": cost.activation_bytes, "blocks": cost.block_bytes,
           "feature cache": cached * row}
    in_flight = PREFETCH_FACTOR * knobs.num_sampler_workers if knobs.num_sampler_workers else 1
    arch = ctx.workload.model.arch
    graph = whole_graph_parts(sm, arch)
    if knobs.graph_structure == "partitioned":  # the busiest machine's in-edges as a CSC over all vertices
        loops = structure_edges(sm, arch) - sm.num_edges  # GCN's and GAT's self-loops: 1 / M of them per machine
        mine = sm.num_edges * stats.machine_edge_fraction + loops / cl.num_machines
        weights = graph.pop(GCN_WEIGHTS, 0.0) + gcn_weight_bytes(arch, mine)  # the part's, beside the whole graph's
        graph = {"graph structure (the machine's part: CSC and global edge ids, int64)":
                 partitioned_structure_bytes(sm.num_vertices, mine), **({GCN_WEIGHTS: weights} if weights else {})}
    peer = peer_cache(knobs, cl)
    cache_maps = 2 if peer else 1 if cached > 0 else 0  # the peer cache's holders and positions, or cache slots
    host = {**graph, "feature partition": feature_partition_bytes(cl, sm),
            "vertex maps (int64)": vertex_maps_bytes(cl, sm.num_vertices, cache_maps),
            "worker processes": worker_processes_bytes(cl, knobs.num_sampler_workers),
            "sampler buffers": cl.gpus_per_machine * in_flight * (cost.block_bytes + n_in * row)}
    return with_evaluation(ctx, gpu, host, stats, training_only="sampler buffers")


def link_bytes_per_epoch(ctx: SimContext, plan: IterationPlan, full: IterationWork,
                         last: IterationWork) -> dict[str, float]:
    """Bytes all workers send over each link kind in one epoch (features, id requests, remote sampling and
    all-reduce)."""
    out = {k: 0.0 for k in LINKS}
    collective = all_reduce_link_bytes(full.compute.gradient_bytes, ctx.cluster)
    for work, count in ((full, plan.num_iterations - 1), (last, 1)):
        out["pcie"] += count * (work.local_bytes + work.remote_bytes)
        out["network"] += count * (work.remote_bytes + work.request_bytes + work.count_bytes + work.sample_request_bytes
                                   + work.sample_reply_bytes)
        out[intra_machine_link(ctx.cluster)[1]] += count * (work.peer_bytes + work.peer_request_bytes)
        for kind, nbytes in collective.items():
            out[kind] += count * nbytes
    return {k: v * ctx.num_workers for k, v in out.items()}


def simulate(ctx: SimContext, knobs: Knobs) -> SimResult:
    """Simulate one epoch of ``dp`` (module docstring) and return the ``simulate --json`` result with spans.

    Args:
        ctx: cluster, workload and measured statistics.
        knobs: this strategy's knobs.

    Returns:
        The result; an infeasible configuration has ``feasible=False``, a reason, and infinite times.

    Raises:
        SpecError: a workload this strategy cannot run (not mini-batch, or a model without message passing).
    """
    started = time.perf_counter()
    check_workload(sys.modules[__name__], ctx.workload)
    plan = iteration_plan(ctx.summary.num_train, ctx.batch_size, ctx.num_workers, knobs.num_sampler_workers)
    full, cost = iteration_work(ctx, knobs)
    last, _ = iteration_work(ctx, knobs, plan.last_fraction)
    inferred = evaluation_block(ctx, knobs.partitioner)
    memory = memory_model(ctx, knobs, cost, inferred)
    common: dict[str, Any] = {
        "strategy": NAME, "knobs": knobs.model_dump(), "num_iterations": plan.num_iterations,
        "bytes_per_epoch": link_bytes_per_epoch(ctx, plan, full, last),
        **memory.result_fields(),
        "evaluation_time_s": evaluation_time_s(ctx, inferred)}
    if not memory.feasible:
        return SimResult.infeasible(memory.reason, sim_wall_s=time.perf_counter() - started, **common)
    run = DpRun(ctx, knobs, plan, full, last)
    run.execute()
    ends = [max(run.ends[r][pos] for r in range(ctx.num_workers)) for pos in range(len(plan.window))]
    period = steady_period_s(ends, plan)
    epoch = ends[-1] + plan.extrapolated * period
    breakdown = phase_breakdown(run.spans, plan, PHASES)
    breakdown["overhead"] = plan.num_iterations * iteration_fixed_s(ctx.cluster,
                                                                    handoffs=float(knobs.num_sampler_workers > 0))
    return SimResult(feasible=True, epoch_time_s=epoch, iteration_time_s=epoch / plan.num_iterations,
                     breakdown_s=breakdown, spans=run.with_images(place_window(run.spans, plan, period)),
                     sim_wall_s=time.perf_counter() - started, **common)


def compute_profile(ctx: SimContext, knobs: Knobs) -> dict[str, PhaseProfile]:
    """Forward, backward and optimizer of the mean mini-batch, one span each per iteration, and the evaluation's
    forward per layer and chunk (for calibration; the knobs do not change the model)."""
    return minibatch_compute_profile(ctx) | evaluation_profiles(ctx, knobs.partitioner)
