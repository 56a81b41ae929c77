"""Data-parallel mini-batch training in the style of DGL/DistDGL (``dp``): the baseline strategy.

Per iteration, every worker (GPU) takes its share of the global mini-batch (seeds split by owner, DistDGL's
``node_split``), then:

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
  dgl/distributed/graph_services.py (DGL 1.1.3).
* ``load``: local misses are gathered from host memory while remote misses are pulled (``fetch``, as the
  executor's ``RowStore.pull``: three ``all_to_all`` calls over all workers, the row counts (one int64 to every
  rank of the other machines), the int64 ids to their owners, then the rows back; each call is a collective: it
  waits until every worker has called it, pays ``network.per_collective_s``, then sends one message to each other
  machine, a flow through the worker's NIC and the owner's NIC on the same rail, owners equally loaded; the
  ``fetch`` span includes the waits, ``wait_s``, as the executor's does); then all
  misses cross PCIe host-to-device; cache hits are gathered on the GPU. With ``cache_placement =
  partitioned`` (Quiver) a hit in a peer GPU's slice comes from that peer (ids there, rows back over NVLink,
  PCIe through the host without it) while the misses load (:func:`cache_access`).
* ``forward``, ``backward``: roofline time of the model's kernels (:mod:`simulator.workload.model_cost`)
  divided by ``efficiency.forward_fraction`` / ``backward_fraction``.
* ``all_reduce``: waits for every worker (synchronous DDP), then the hierarchical ring all-reduce of the
  gradients as flows: reduce-scatter over NVLink (PCIe without it), ring across machines on each GPU's shard,
  all-gather; its time without contention equals :func:`~simulator.hardware.collectives.hierarchical_all_reduce_time`.
* ``optimizer`` (Adam, roofline / ``efficiency.optimizer_fraction``), then ``iteration_overhead_s``.

Memory model (``memory_model``): per GPU = framework reserve + parameters, gradients and Adam state + the
batch's input features + activations and block structure + the feature cache; per machine host = graph
structure (every machine holds the whole graph, or with ``graph_structure = partitioned`` its ``1/M`` share:
the in-edges and ids of the vertices it owns) + the machine's
feature partition and labels + per worker a process reserve and sampler buffers (one batch per batch in flight);
on a CPU-only cluster the "GPU" part lives in host memory too.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gnnplan.simulator.hardware.collectives import all_reduce_link_bytes, intra_machine_link
from gnnplan.simulator.hardware.model import CUDA_CONTEXT_BYTES, FLOAT_BYTES
from gnnplan.simulator.hardware.pricing import PhaseRule, iteration_fixed_s
from gnnplan.simulator.result import LINKS, SimResult
from gnnplan.simulator.strategies import calibration_rules as rules
from gnnplan.simulator.strategies.base import (
    FETCH_COLLECTIVES,
    FETCH_REQUEST_MESSAGES,
    PREFETCH_FACTOR,
    IterationPlan,
    MemoryEstimate,
    PhaseProfile,
    SimContext,
    StepCompute,
    WindowRun,
    iteration_plan,
    memory_estimate,
    minibatch_blocks,
    minibatch_compute_profile,
    minibatch_model_cost,
    phase_breakdown,
    place_window,
    steady_period_s,
    suggest_batch_size,
)
from gnnplan.simulator.strategies.contract import check_workload
from gnnplan.simulator.workload.model_cost import INDEX_BYTES, Block, ModelCost, model_state_bytes
from gnnplan.simulator.workload.spec import MESSAGE_PASSING_ARCHS

NAME = "dp"
EXECUTOR = "gnnplan.executor.strategies.dp"
SUPPORTS = ("mini-batch",)
MODEL_ARCHS = MESSAGE_PASSING_ARCHS
NEEDS_SAMPLE_STATS = True
"""Sizes of the sampled blocks come from the measured mini-batch statistics."""


class Knobs(BaseModel):
    """The ``dp`` strategy's knobs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cache_fraction: float = Field(
        default=0.0, ge=0, le=1,
        description="fraction of all vertices whose features each GPU caches, highest in-degree first")
    partitioner: Literal["metis", "random"] = Field(
        default="metis", description="how vertices (and their features) are assigned to machines")
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
                    "machine sends a request there and receives the sampled edges; simulated only (the executor "
                    "replicates the structure)")
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
    "fetch": rules.fetch_rule(FETCH_REQUEST_MESSAGES, FETCH_COLLECTIVES), "load": rules.load_rule(),
    **rules.compute_rules(),
    "sample": rules.sample_rule(),
    "iteration": rules.iteration_rule(("load", "forward", "backward", "all_reduce", "optimizer")),
    "all_reduce": rules.all_reduce_rule()}
"""How calibration prices ``dp``'s spans (the trainer's path: load, which holds the fetch, forward, backward,
all_reduce, optimizer; sampling inline or prefetched by ``num_sampler_workers`` processes)."""


@dataclass(frozen=True)
class IterationWork:
    """What one worker does in one iteration: counts, bytes, FLOPs and uncontended compute seconds."""

    num_input_vertices: float
    num_sampled_edges: float
    hit_bytes: float
    local_bytes: float
    remote_bytes: float
    num_remote_vertices: float
    request_bytes: float
    compute: StepCompute
    peer_bytes: float = 0.0
    """Feature rows hit in a peer GPU's cache slice, served over NVLink (``cache_placement = partitioned``)."""
    peer_request_bytes: float = 0.0
    """The int64 ids of those rows, sent to the peers first."""
    count_bytes: float = 0.0
    """The row counts a pull sends first over the network: one int64 to every rank of the other machines."""
    remote_sampling: tuple[tuple[float, float, float], ...] = ()
    """Per sampled layer, seeds outward (``graph_structure = partitioned``): (sampled edges of local vertices,
    sampled edges of remote vertices, vertices sent to their owners); empty when the structure is
    replicated or on one machine."""

    @property
    def sample_request_bytes(self) -> float:
        """The int64 ids of the remotely owned vertices sent to their owners in one iteration."""
        return sum(v for _, _, v in self.remote_sampling) * INDEX_BYTES

    @property
    def sample_reply_bytes(self) -> float:
        """The sampled edges sent back: source, destination and edge id, int64 each (DGL's SubgraphResponse)."""
        return sum(e for _, e, _ in self.remote_sampling) * SAMPLED_EDGE_BYTES


SAMPLED_EDGE_BYTES = 3 * INDEX_BYTES
"""Bytes of one sampled edge in a DistDGL sampling response: global source, destination and edge id, int64 each
(``SubgraphResponse(global_src, global_dst, global_eids)``, dgl/distributed/graph_services.py, DGL 1.1.3)."""


def remote_sampling(ctx: SimContext, blocks: list[Block]) -> tuple[tuple[float, float, float], ...]:
    """Per layer, seeds outward, what sampling a partitioned structure does at home and remotely:
    (local sampled edges, remote sampled edges, remote vertices).

    A block's destination vertices owned by another machine are sampled there. The seeds are the worker's own
    (DistDGL ``node_split``). For the inner layers the fraction owned elsewhere comes from the partition
    statistics: the input vertices' remote fraction ``r`` (``SampleStats.access(0)``, no cache) counts the seeds
    as local, so a non-seed vertex is remote with ``r' = r n_in / (n_in - seeds)``
    ([inferred]: inner layers are treated like the input layer; being closer to the seeds, they are slightly
    more local, so this errs toward more traffic). Sampled edges of a remote vertex: the block's mean per
    destination vertex.
    """
    if ctx.cluster.num_machines == 1:
        return ()  # one machine holds the whole structure: nothing is remote
    seeds, n_in = blocks[-1].num_dst, blocks[0].num_src
    remote = ctx.sample.access(0.0)[2]
    inner = min(1.0, remote * n_in / (n_in - seeds)) if n_in > seeds else 0.0
    out = []
    for layer, b in reversed(list(enumerate(blocks))):
        vertices = 0.0 if layer == len(blocks) - 1 else inner * max(0.0, b.num_dst - seeds)
        edges = b.num_edges * vertices / b.num_dst if b.num_dst > 0 else 0.0
        out.append((b.num_edges - edges, edges, vertices))
    return tuple(out)


def cache_access(ctx: SimContext, knobs: Knobs) -> tuple[float, float, float, float]:
    """(own cache hit, local miss, remote miss, peer hit) fractions of a worker's input vertices.

    ``replicated`` (PaGraph): every GPU caches the ``cache_fraction`` hottest vertices. ``partitioned`` (Quiver):
    the machine's g GPUs cache disjoint slices of the ``g x cache_fraction`` hottest (vertex of hotness rank k on
    GPU k mod g, as the executor places them), so of the machine's hits 1/g are in the worker's own slice and
    (g - 1)/g in a peer's [inferred: a worker's inputs are independent of a vertex's rank mod g].

    Source: brief gsplit.md §2.2 and §7 (PaGraph: per-GPU caches overlap; Quiver: no overlap, a local miss that
    hits a peer's cache is a GPU-to-GPU load).
    """
    g = ctx.cluster.gpus_per_machine
    if knobs.cache_placement == "replicated" or g == 1:
        hit, local, remote = ctx.sample.access(knobs.cache_fraction)
        return hit, local, remote, 0.0
    hit, local, remote = ctx.sample.access(min(1.0, g * knobs.cache_fraction))
    return hit / g, local, remote, hit * (g - 1) / g


def iteration_work(ctx: SimContext, knobs: Knobs, scale: float = 1.0) -> tuple[IterationWork, ModelCost]:
    """One worker's work in an iteration whose seeds are ``scale`` times a full batch.

    Returns:
        (the work, the model's kernels and memory sizes for this batch).
    """
    cl = ctx.cluster
    blocks = minibatch_blocks(ctx, scale)
    cost = minibatch_model_cost(ctx, blocks)
    hit, local, remote, peer = cache_access(ctx, knobs)
    if cl.num_machines == 1:
        local, remote = local + remote, 0.0
    n_in = blocks[0].num_src
    row = ctx.summary.feature_dim * FLOAT_BYTES
    work = IterationWork(
        num_input_vertices=n_in, num_sampled_edges=sum(b.num_edges for b in blocks),
        hit_bytes=hit * n_in * row, local_bytes=local * n_in * row, remote_bytes=remote * n_in * row,
        num_remote_vertices=remote * n_in, request_bytes=remote * n_in * INDEX_BYTES,
        count_bytes=INDEX_BYTES * cl.gpus_per_machine * (cl.num_machines - 1) if remote > 0 else 0.0,
        compute=StepCompute.of(cost, cl), peer_bytes=peer * n_in * row, peer_request_bytes=peer * n_in * INDEX_BYTES,
        remote_sampling=remote_sampling(ctx, blocks) if knobs.graph_structure == "partitioned" else ())
    return work, cost


def memory_model(ctx: SimContext, knobs: Knobs, cost: ModelCost) -> MemoryEstimate:
    """Peak memory of a ``dp`` configuration (module docstring) and whether it fits the cluster."""
    cl, sm = ctx.cluster, ctx.summary
    row = sm.feature_dim * FLOAT_BYTES
    n_in = ctx.sample.num_src_vertices[0]
    cached = math.floor(knobs.cache_fraction * sm.num_vertices + 1e-9)
    gpu = {"framework reserve": 0.0 if cl.gpu.is_host_cpu else CUDA_CONTEXT_BYTES,
           "parameters, gradients and Adam state": model_state_bytes(cost.num_params),
           "input features": n_in * row, "activations": cost.activation_bytes, "blocks": cost.block_bytes,
           "feature cache": cached * row}
    in_flight = PREFETCH_FACTOR * knobs.num_sampler_workers if knobs.num_sampler_workers else 1
    per_worker = cl.host.process_bytes + in_flight * (cost.block_bytes + n_in * row)
    share = cl.num_machines if knobs.graph_structure == "partitioned" else 1
    host = {"graph structure (COO + CSC, int64)":
            (4.0 * sm.num_edges / share + sm.num_vertices / share + 1) * INDEX_BYTES,
            "feature partition and labels": math.ceil(sm.num_vertices / cl.num_machines) * (row + INDEX_BYTES),
            "worker processes and sampler buffers": cl.gpus_per_machine * per_worker}
    return memory_estimate(cl, gpu, host)


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
    plan = iteration_plan(ctx.summary.num_train, ctx.batch_size, ctx.num_workers)
    full, cost = iteration_work(ctx, knobs)
    last, _ = iteration_work(ctx, knobs, plan.last_fraction)
    memory = memory_model(ctx, knobs, cost)
    common: dict[str, Any] = {
        "strategy": NAME, "knobs": knobs.model_dump(), "num_iterations": plan.num_iterations,
        "bytes_per_epoch": link_bytes_per_epoch(ctx, plan, full, last),
        "peak_memory_bytes": memory.peak_memory_bytes}
    if not memory.feasible:
        return SimResult.infeasible(memory.reason, sim_wall_s=time.perf_counter() - started, **common)
    run = _Run(ctx, knobs, plan, full, last)
    run.execute()
    ends = [max(run.ends[r][pos] for r in range(ctx.num_workers)) for pos in range(len(plan.window))]
    period = steady_period_s(ends, plan)
    epoch = ends[-1] + plan.extrapolated * period
    breakdown = phase_breakdown(run.spans, plan, PHASES)
    breakdown["overhead"] = plan.num_iterations * iteration_fixed_s(ctx.cluster,
                                                                    handoffs=float(knobs.num_sampler_workers > 0))
    return SimResult(feasible=True, epoch_time_s=epoch, iteration_time_s=epoch / plan.num_iterations,
                     breakdown_s=breakdown, spans=place_window(run.spans, plan, period),
                     sim_wall_s=time.perf_counter() - started, **common)


def compute_profile(ctx: SimContext, knobs: Knobs) -> dict[str, PhaseProfile]:
    """Forward, backward and optimizer of the mean mini-batch, one span each per iteration (for calibration;
    the knobs do not change the model)."""
    return minibatch_compute_profile(ctx)


class _Run(WindowRun):
    """One simulated epoch window of ``dp``: a trainer process per worker plus its sampler processes."""

    def __init__(self, ctx: SimContext, knobs: Knobs, plan: IterationPlan, full: IterationWork,
                 last: IterationWork) -> None:
        # every worker does the same work: one representative machine suffices (simulator.symmetry)
        super().__init__(ctx, plan, knobs.num_sampler_workers, rank_works=[(full, last)] * ctx.num_workers)
        self.knobs = knobs
        self.works = [last if it == plan.num_iterations - 1 else full for it in plan.window]
        self.ready, self.taken = self._events(), self._events()

    def execute(self) -> None:
        """Run every simulated worker's processes to the end of the window."""
        for rank in self.ranks:
            self.engine.process(self._trainer(rank))
            for j in range(self.knobs.num_sampler_workers):
                self.engine.process(self._sampler(rank, j))
        self.engine.run()

    def _sample(self, rank: int, pos: int) -> Generator[Any, Any, None]:
        work, start = self.works[pos], self.engine.now
        if work.remote_sampling:
            for local_edges, remote_edges, remote_vertices in work.remote_sampling:
                yield from self._sample_layer(rank, local_edges, remote_edges, remote_vertices)
        else:  # one sampler call per layer
            yield self.hw.sample(self.hw.machine_of(rank), work.num_sampled_edges, self._num_layers())
        self._span(rank, "sample", start, "sampler", pos, num_input_vertices=work.num_input_vertices,
                   num_sampled_edges=work.num_sampled_edges, num_sampler_calls=self._num_layers(),
                   nbytes=work.sample_request_bytes + work.sample_reply_bytes)

    def _num_layers(self) -> float:
        """Sampler calls per batch: one per layer (``host.sampler_call_s`` each)."""
        return float(len(self.ctx.workload.training.fanouts))

    def _sample_layer(self, rank: int, local_edges: float, remote_edges: float,
                      remote_vertices: float) -> Generator[Any, Any, None]:
        """One layer on a partitioned structure: requests to every other machine (equal shares), which sample
        there and reply with the edges, while the local vertices are sampled at home."""
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
        for pos, work in enumerate(self.works):
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
        hw, start = self.hw, self.engine.now
        parts = [hw.host_gather(work.local_bytes, rank)]
        if work.remote_bytes > 0:
            parts.append(self.engine.process(self._fetch(rank, pos, work)))
        if work.peer_bytes > 0:
            parts.append(self.engine.process(self._peers(rank, work)))
        yield self.engine.all_of(parts)
        yield hw.host_to_gpu(rank, work.local_bytes + work.remote_bytes)
        yield from hw.gpu_gather(rank, work.hit_bytes)
        self._span(rank, "load", start, "pcie", pos, nbytes=work.local_bytes + work.remote_bytes,
                   hit_bytes=work.hit_bytes, local_bytes=work.local_bytes, remote_bytes=work.remote_bytes,
                   peer_bytes=work.peer_bytes, num_input_vertices=work.num_input_vertices)

    def _peers(self, rank: int, work: IterationWork) -> Generator[Any, Any, None]:
        """Rows in the peers' cache slices (``partitioned``): the ids to every peer of the machine, then the rows
        back over NVLink (PCIe through the host without it), each peer serving an equal share."""
        g = self.ctx.cluster.gpus_per_machine
        peers = [self.hw.machine_of(rank) * g + p for p in range(g) if p != rank % g]

        def one(peer: int) -> Generator[Any, Any, None]:
            yield self.hw.gpu_to_gpu(rank, peer, work.peer_request_bytes / len(peers))
            yield self.hw.gpu_to_gpu(peer, rank, work.peer_bytes / len(peers))

        yield self.engine.all_of([self.engine.process(one(p)) for p in peers])

    def _fetch(self, rank: int, pos: int, work: IterationWork) -> Generator[Any, Any, None]:
        """The remote pull as the executor's ``RowStore.pull``: its three ``all_to_all`` calls (counts, ids, rows
        back; :data:`~.base.FETCH_COLLECTIVES`), each a collective (:meth:`~.base.WindowRun._collective`: the wait
        for every worker, then the call's fixed cost) followed by one message per other machine (equal shares,
        the worker's NIC rail). The span covers the waits too (``wait_s``), as the executor's span does."""
        start, me = self.engine.now, self.hw.machine_of(rank)
        owners = [m for m in range(self.ctx.cluster.num_machines) if m != me]
        share, rail, waited = 1.0 / len(owners), self.hw.nic_of(rank), 0.0
        for call, nbytes, outward in (("counts", work.count_bytes, True), ("ids", work.request_bytes, True),
                                      ("rows", work.remote_bytes, False)):
            waited += yield from self._collective(rank, (pos, "fetch", call), nbytes)
            yield self.engine.all_of(self.hw.network(me, o, nbytes * share, rail=rail) if outward else
                                     self.hw.network(o, me, nbytes * share, rail=rail) for o in owners)
        self._span(rank, "fetch", start, "network", pos,
                   nbytes=work.remote_bytes + work.request_bytes + work.count_bytes,
                   num_remote_vertices=work.num_remote_vertices, wait_s=waited)
