"""Full-graph distributed training with hybrid dependency management (``neutronstar``).

Mechanism: Wang et al., "NeutronStar: Distributed GNN Training with Hybrid Dependency Management", SIGMOD 2022
(brief ../shared/papers/neutronstar.md). Every epoch is one full-graph step: each of W workers owns a vertex
range and all its in-edges and computes every layer for its vertices; a vertex's remote in-neighbours (its
*dependencies*) are resolved in one of two ways:

* **DepCache** (``mode=depcache``, §1.3): the worker replicates its whole L-hop in-neighbourhood and recomputes
  it every epoch (redundant compute, no per-layer communication);
* **DepComm** (``mode=depcomm``, §1.4): at every layer the owner sends each dependency's representation once
  per (vertex, worker) pair (master-mirror) and, in the backward pass, the worker returns the summed gradient
  (not at layer 1: raw features need none);
* **Hybrid** (``mode=hybrid``, §3, Algorithm 4): per dependency and layer, cache it (recompute its subtree) or
  communicate it, chosen once by a greedy on a cost model whose per-vertex, per-edge and per-byte costs come
  from this cluster's hardware model, within ``cache_budget_bytes``
  (:mod:`simulator.strategies.neutronstar.split`).

Notation: paper D_i^l -> remote in-neighbours; R_i^l / C_i^l -> cached / communicated dependencies of layer l
(``WorkerSets.replicated`` / ``communicated``); V_i^l (DepCache closure) -> ``replicated[l]`` plus V_i;
mirror -> a received row; ring slot -> ``s``.

Per epoch and worker (simulation on :class:`~simulator.hardware.model.HardwareModel`, costs in
:mod:`simulator.strategies.neutronstar.work`):

1. forward, l = 1..L: ``pack``, the rows this worker sends gathered into one buffer in device memory
   (:meth:`~simulator.hardware.model.HardwareModel.gpu_gather` of the bytes sent), then the ``exchange`` of
   h^(l-1) rows, received straight into the layer's input table at l = 1 and, at l >= 2, copied with ``X_l`` into
   it (``unpack``, a device copy of both). With ``ring`` (§4.3) slot s = 0..W-2 sends to worker
   (i+s+1) mod W and receives from (i-s-1) mod W, one slot after the other, so no two senders share a receiver;
   without it all messages start at once and share the receivers' NICs (incast). A message crosses the
   sender's PCIe (device-to-host), the network and the receiver's PCIe (host-to-device), one after the other
   (MPI sends from host memory, brief §1.9), or with ``network.gpudirect_rdma`` the network alone
   (:meth:`~simulator.hardware.model.HardwareModel.gpu_network`); between GPUs of one machine, NVLink or PCIe.
   Empty messages are not sent. With ``overlap`` (§4.3, "pipelining") the replica block (the cached subtrees,
   which need no received row) is computed while the exchange is in flight; then the master block.
2. backward, l = L..1: master block backward, then the gradients of the received rows go back to their owners
   (l >= 2; ``exchange``), overlapped with the replica block's backward when ``overlap`` is on; the owner adds
   the gradients that come back to the rows it sent (``unpack``, a device copy of their bytes). Until 2026-11-29
   the copies around an exchange were not priced (nor timed: the executor copied each buffer two to three times
   more, outside any span): on this machine's 2 x 1 probe DepComm on Cora spent 5.7 ms of a 29.7 ms epoch in
   them, predicted 15.4 ms.

Before its forward kernels a block gathers its source rows from the layer's table (``gather``, a device copy of
``num_src`` rows: DGL's block takes its source features as one matrix; the memory model counts the copy as the
block's inputs). Its backward (layer l >= 2: the gradient scattered back into the table) stays inside ``backward``.
3. ``all_reduce`` of the weight gradients (synchronous ring, hierarchical on multi-GPU machines, as ``dp``),
   ``optimizer`` (Adam), then ``iteration_overhead_s``.

Memory: :func:`simulator.strategies.neutronstar.work.memory_model`; DepCache runs out of GPU memory when the
replicated closure does not fit (a result, not an error).

Scale: when every worker's work (its rows received from each owner shifted with it) equals its image's on machine 0,
only machine 0's workers are simulated (:class:`~simulator.strategies.full_graph_run.FullGraphRun`,
:mod:`simulator.symmetry`); measured partitions are uneven, so they are simulated in full.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Generator
from dataclasses import replace
from typing import Any, Literal

import numpy as np
from pydantic import ConfigDict, Field

from gnnplan.simulator import symmetry
from gnnplan.simulator.hardware.collectives import all_reduce_link_bytes, intra_machine_link, staged_network
from gnnplan.simulator.hardware.phase_rules import PhaseRule
from gnnplan.simulator.hardware.spec import ClusterSpec
from gnnplan.simulator.result import LINKS, SimResult
from gnnplan.simulator.spec_model import SpecModel
from gnnplan.simulator.strategies import calibration_rules as rules
from gnnplan.simulator.strategies.base import PhaseProfile, SimContext, kernel_profile
from gnnplan.simulator.strategies.contract import check_workload
from gnnplan.simulator.strategies.full_graph_run import FullGraphRun
from gnnplan.simulator.strategies.neutronstar import dependencies as deps
from gnnplan.simulator.strategies.neutronstar.split import hybrid_sets, layer_widths, split_costs
from gnnplan.simulator.strategies.neutronstar.work import WorkerWork, layer_kernels, memory_model, worker_work
from gnnplan.simulator.strategies.window import busiest_phase_totals
from gnnplan.simulator.trace import Span
from gnnplan.simulator.workload.datasets import GraphData, load_dataset
from gnnplan.simulator.workload.model_cost import Kernel
from gnnplan.simulator.workload.proxy_pool import context_on, pooled
from gnnplan.simulator.workload.spec import MESSAGE_PASSING_ARCHS, WorkloadSpec

NAME = "neutronstar"
EXECUTOR = "gnnplan.executor.strategies.neutronstar"
SUPPORTS = ("full-graph",)
MODEL_ARCHS = MESSAGE_PASSING_ARCHS
NEEDS_SAMPLE_STATS = False
"""Full-graph: no sampled mini-batches; the dependency statistics are measured here."""
PHASES = ("forward", "backward", "gather", "pack", "exchange", "unpack", "all_reduce", "optimizer")
CALIBRATION: dict[str, PhaseRule] = {
    "exchange": rules.exchange_rule(ring_knob="ring"), **rules.compute_rules(),
    "pack": rules.device_copy_rule(), "unpack": rules.device_copy_rule(), "gather": rules.device_copy_rule(),
    "iteration": rules.iteration_rule(("forward", "backward", "all_reduce", "optimizer", "gather", "pack",
                                       "exchange", "unpack"), sampler_knob=None),
    "all_reduce": rules.all_reduce_rule()}
"""How calibration prices ``neutronstar``'s spans (the worker's path: forward, backward, the row copies and the
exchanges of every layer, all_reduce, optimizer)."""
MODES = ("depcache", "depcomm", "hybrid")


class Knobs(SpecModel):
    """The ``neutronstar`` strategy's knobs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["depcache", "depcomm", "hybrid"] = Field(
        default="hybrid", description="replicate every dependency, communicate every one, or Algorithm 4's split")
    ring: bool = Field(default=True, description="ring-scheduled exchange (slot s: send to i+s+1) or all at once")
    overlap: bool = Field(default=True, description="compute the cached part while the exchange is in flight")
    cache_budget_bytes: float | None = Field(
        default=None, gt=0, description="memory cap S for cached dependencies per worker; none = unlimited")
    partitioner: Literal["chunk", "metis"] = Field(
        default="chunk", description="contiguous vertex-id ranges balanced on degree (chunk) or METIS")


def suggest(trial: Any, workload: Any, tune_batch_size: bool = False) -> Knobs:
    """The Optuna search space of ``neutronstar`` (parameter names ``neutronstar.<knob>``); the budget is
    searched only for Hybrid. ``tune_batch_size`` is ignored (full-graph: one step per epoch)."""
    mode = trial.suggest_categorical(f"{NAME}.mode", list(MODES))
    knobs: dict[str, Any] = {
        "mode": mode,
        "ring": trial.suggest_categorical(f"{NAME}.ring", [True, False]),
        "overlap": trial.suggest_categorical(f"{NAME}.overlap", [True, False]),
        "partitioner": trial.suggest_categorical(f"{NAME}.partitioner", ["chunk", "metis"]),
    }
    if mode == "hybrid":
        knobs["cache_budget_bytes"] = trial.suggest_categorical(f"{NAME}.cache_budget_bytes",
                                                                [None, 1.0e6, 1.0e7, 1.0e8, 1.0e9])
    return Knobs(**knobs)


# ------------------------------------------------------------------------------------- dependency split

def load_structure(workload: WorkloadSpec, num_workers: int,
                   partitioner: str) -> tuple[GraphData, deps.InGraph, np.ndarray]:
    """(dataset, training graph's in-neighbour CSR, owner worker of every vertex)."""
    graph = load_dataset(workload.dataset)
    in_graph = deps.training_graph(graph, workload.model.arch)
    return graph, in_graph, deps.owners(workload.dataset, graph, in_graph, num_workers, partitioner)


def worker_sets(cluster: ClusterSpec, workload: WorkloadSpec, knobs: Knobs, in_graph: deps.InGraph,
                owner: np.ndarray, rank: int, feature_dim: int, num_classes: int) -> deps.WorkerSets:
    """Worker ``rank``'s dependency split for ``knobs.mode`` (the executor calls this too)."""
    num_layers = workload.model.num_layers
    if knobs.mode == "depcomm":
        return deps.depcomm_sets(in_graph, owner, rank, num_layers)
    if knobs.mode == "depcache":
        return deps.depcache_sets(in_graph, owner, rank, num_layers)
    costs = split_costs(cluster, workload.model, feature_dim, num_classes)
    return hybrid_sets(in_graph, owner, rank, num_layers, costs, knobs.cache_budget_bytes)


def dependency_counts(ctx: SimContext, knobs: Knobs) -> list[deps.WorkerCounts]:
    """Every worker's set sizes, cached on disk
    (:func:`simulator.strategies.neutronstar.dependencies.cached_counts`); a small card's are the medoid of its
    proxy draws' (:mod:`simulator.workload.proxy_pool`)."""
    wl, cl, sm = ctx.workload, ctx.cluster, ctx.summary
    params: dict[str, Any] = {"self_loops": wl.model.arch in deps.SELF_LOOP_ARCHS, "num_layers": wl.model.num_layers,
                              "num_workers": ctx.num_workers, "partitioner": knobs.partitioner, "mode": knobs.mode}
    if knobs.mode == "hybrid":
        params["costs"] = split_costs(cl, wl.model, sm.feature_dim, sm.num_classes).rounded()
        params["budget_bytes"] = knobs.cache_budget_bytes
    pool = pooled(wl.dataset, lambda r: dependency_counts(context_on(ctx, r), knobs),
                  ("neutronstar", json.dumps(params, sort_keys=True)))  # the counts' inputs: their cache key's
    if pool is not None:
        return pool

    def build() -> list[deps.WorkerCounts]:
        _, in_graph, owner = load_structure(wl, ctx.num_workers, knobs.partitioner)
        kn = _proxy_budget(wl, knobs)
        return [deps.worker_counts(in_graph, owner, worker_sets(cl, wl, kn, in_graph, owner, r, sm.feature_dim,
                                                                sm.num_classes), ctx.num_workers)
                for r in range(ctx.num_workers)]

    return deps.cached_counts(wl.dataset, params, build)


def _proxy_budget(workload: WorkloadSpec, knobs: Knobs) -> Knobs:
    """On a dataset card's proxy, the cache budget of a worker shrinks with its vertices (``budget /
    vertex_factor``), so the greedy caches the share of dependencies the full-size worker could; unchanged for
    any other dataset (:mod:`simulator.workload.proxy`)."""
    from gnnplan.simulator.workload import cards, proxy

    name = cards.card_name(workload.dataset)
    if name is None or knobs.cache_budget_bytes is None:
        return knobs
    budget = knobs.cache_budget_bytes / proxy.proxy_scale(name).vertex_factor
    return knobs.model_copy(update={"cache_budget_bytes": budget})


# ---------------------------------------------------------------------------------------------- simulation

def link_bytes_per_epoch(cluster: ClusterSpec, works: list[WorkerWork]) -> dict[str, float]:
    """Bytes all workers send over each link kind in one epoch: the exchanges (forward rows, backward
    gradients for l >= 2; across machines each also crosses PCIe twice when staged through host memory, not
    with GPUDirect RDMA: :func:`~simulator.hardware.collectives.staged_network`) and the gradient all-reduce."""
    out = {k: 0.0 for k in LINKS}
    g, staged = cluster.gpus_per_machine, staged_network(cluster)
    _, intra = intra_machine_link(cluster)
    for rank, work in enumerate(works):
        for i, layer in enumerate(work.layers):
            for owner, rows in enumerate(layer.received_rows):
                if owner == rank or not rows:
                    continue
                nbytes = rows * layer.row_bytes * (2 if i else 1)
                if owner // g == rank // g:
                    out[intra] += nbytes
                else:
                    out["network"] += nbytes
                    out["pcie"] += 2 * nbytes if staged else 0.0
        for kind, nbytes in all_reduce_link_bytes(work.gradient_bytes, cluster).items():
            out[kind] += nbytes
    return out


def compute_profile(ctx: SimContext, knobs: Knobs) -> dict[str, PhaseProfile]:
    """Per phase, the kernels of every (worker, layer, block) compute span of an epoch and the optimizer's (for
    calibration; a block the simulation gives no seconds, a layer without replicas, records no span)."""
    wl, sm, gpu = ctx.workload, ctx.summary, ctx.cluster.gpu
    spans: dict[str, list[list[Kernel]]] = {"forward": [], "backward": []}
    works = [worker_work(ctx.cluster, wl.model, sm.feature_dim, sm.num_classes, c)
             for c in dependency_counts(ctx, knobs)]
    for w in works:
        for i, lw in enumerate(w.layers):
            for first, (part, cost) in ((0, ("master", w.master)), (2, ("replica", w.replica))):
                fwd, bwd = layer_kernels(cost, wl.model.arch, i, part == "master" and i == wl.model.num_layers - 1)
                spans["forward"] += [fwd] if lw.seconds[first] > 0 else []
                spans["backward"] += [bwd] if lw.seconds[first + 1] > 0 else []
    return {**{p: kernel_profile(ks, gpu) for p, ks in spans.items()},
            "optimizer": kernel_profile([list(w.master.optimizer) for w in works], gpu)}


def simulate(ctx: SimContext, knobs: Knobs) -> SimResult:
    """Simulate one full-graph epoch of ``neutronstar`` (module docstring).

    Returns:
        The result (one iteration per epoch); infeasible (out of memory, or DepCache over the cache budget)
        with a reason and infinite times.

    Raises:
        SpecError: a workload this strategy cannot run.
    """
    started = time.perf_counter()
    check_workload(sys.modules[__name__], ctx.workload)
    cl, wl, sm = ctx.cluster, ctx.workload, ctx.summary
    counts = dependency_counts(ctx, knobs)
    works = [worker_work(cl, wl.model, sm.feature_dim, sm.num_classes, c) for c in counts]
    widths = layer_widths(wl.model, sm.feature_dim, sm.num_classes)
    memory, _ = memory_model(cl, widths, counts, works, knobs.cache_budget_bytes, knobs.mode)
    common: dict[str, Any] = {
        "strategy": NAME, "knobs": knobs.model_dump(), "num_iterations": 1,
        "bytes_per_epoch": link_bytes_per_epoch(cl, works), **memory.result_fields()}
    if not memory.feasible:
        return SimResult.infeasible(memory.reason, sim_wall_s=time.perf_counter() - started, **common)
    run = _Run(ctx, knobs, works)
    run.execute()
    epoch = max(run.ends)
    breakdown = busiest_phase_totals(run.spans, PHASES)
    breakdown["overhead"] = cl.iteration_overhead_s
    return SimResult(feasible=True, epoch_time_s=epoch, iteration_time_s=epoch, breakdown_s=breakdown,
                     spans=run.spans, sim_wall_s=time.perf_counter() - started, **common)


class _Run(FullGraphRun):
    """One simulated epoch: a process per worker (:class:`~simulator.strategies.full_graph_run.FullGraphRun`)."""

    def __init__(self, ctx: SimContext, knobs: Knobs, works: list[WorkerWork]) -> None:
        g = ctx.cluster.gpus_per_machine

        def same(a: WorkerWork, b: WorkerWork, shift: int) -> bool:  # rows received name owners: shift them
            layers = tuple(replace(lw, received_rows=symmetry.shift_peers(lw.received_rows, shift * g))
                           for lw in b.layers)
            return a == replace(b, layers=layers)

        # one representative machine when every worker's work is its image's on machine 0 (simulator.symmetry)
        super().__init__(ctx.cluster, len(works), ctx.seed, rank_works=works, same=same)
        self.ctx, self.knobs, self.works = ctx, knobs, works
        self._received = [[w.layers[i].received_rows for w in works] for i in range(len(works[0].layers))]
        """Per layer index, per worker, rows received from each owner (``LayerWork.received_rows``)."""

    def _worker(self, rank: int) -> Generator[Any, Any, None]:
        num_layers = len(self.works[rank].layers)
        for layer in range(1, num_layers + 1):
            yield from self._layer(rank, layer, "forward")
        for layer in range(num_layers, 0, -1):
            yield from self._layer(rank, layer, "backward")
        yield from self._all_reduce(rank)
        work, t0 = self.works[rank], self.engine.now
        yield from self.hw.compute(rank, work.optimizer_s)
        self._span(rank, "optimizer", t0, "compute", flops=work.optimizer_flops)
        yield self.engine.timeout(self.ctx.cluster.iteration_overhead_s)
        self._span(rank, "iteration", 0.0, "host")
        self.spans.append(Span(rank, "epoch", 0.0, self.engine.now, "host", epoch=0))
        self.ends[rank] = self.engine.now

    def _compute(self, rank: int, layer: int, phase: str, part: str) -> Generator[Any, Any, None]:
        lw = self.works[rank].layers[layer - 1]
        index = (0 if part == "master" else 2) + (0 if phase == "forward" else 1)
        if lw.seconds[index] <= 0:
            return
        if phase == "forward":
            yield from self._copy(rank, layer, "gather", lw.input_bytes[0 if part == "master" else 1])
        t0 = self.engine.now
        yield from self.hw.compute(rank, lw.seconds[index])
        self._span(rank, phase, t0, "compute", flops=lw.flops[index], layer=layer, part=part)

    def _layer(self, rank: int, layer: int, phase: str) -> Generator[Any, Any, None]:
        if phase == "backward":
            yield from self._compute(rank, layer, phase, "master")
        exchange = None
        if phase == "forward" or layer >= 2:
            if phase == "forward":
                yield from self._copy(rank, layer, "pack", self._sent_bytes(rank, layer))
            exchange = self.engine.process(self._exchange(rank, layer, phase))
        if exchange is not None and not self.knobs.overlap:
            yield exchange
        yield from self._compute(rank, layer, phase, "replica")
        if exchange is not None:
            yield exchange
            if layer >= 2:
                yield from self._copy(rank, layer, "unpack", self._unpacked_bytes(rank, layer, phase))
        if phase == "forward":
            yield from self._compute(rank, layer, phase, "master")

    def _sent_bytes(self, rank: int, layer: int) -> float:
        """Bytes of the rows worker ``rank`` sends in layer ``layer``'s forward exchange."""
        return sum(self._sizes(rank, layer, "forward")[0])

    def _unpacked_bytes(self, rank: int, layer: int, phase: str) -> float:
        """What layer ``layer`` >= 2 copies after its exchange: forward, ``X_l`` and the received rows into the
        table ``T_l`` (nothing when no row came); backward, the gradients that came back for the rows sent."""
        if phase == "backward":
            return self._sent_bytes(rank, layer)
        received = sum(self._sizes(rank, layer, "forward")[1])
        lw = self.works[rank].layers[layer - 1]
        return lw.x_rows * lw.row_bytes + received if received > 0 else 0.0

    def _copy(self, rank: int, layer: int, phase: str, nbytes: float) -> Generator[Any, Any, None]:
        """A row copy in device memory (``pack`` / ``unpack`` around an exchange, a block's ``gather``), when it
        has bytes: :meth:`~simulator.hardware.model.HardwareModel.gpu_gather` of them."""
        if nbytes <= 0:
            return
        t0 = self.engine.now
        yield from self.hw.gpu_gather(rank, nbytes)
        self._span(rank, phase, t0, "compute", nbytes=nbytes, layer=layer)

    def _sizes(self, rank: int, layer: int, phase: str) -> tuple[list[float], list[float]]:
        """(bytes sent to each worker, bytes received from each) in one exchange."""
        row = self.works[rank].layers[layer - 1].row_bytes
        received = self._received[layer - 1]
        mine_in = [rows * row for rows in received[rank]]
        mine_out = [received[p][rank] * row for p in range(self.num_workers)]
        return (mine_out, mine_in) if phase == "forward" else (mine_in, mine_out)

    def _exchange(self, rank: int, layer: int, phase: str) -> Generator[Any, Any, None]:
        send, recv = self._sizes(rank, layer, phase)
        t0, w = self.engine.now, self.num_workers
        key = (layer, phase)
        # an empty message is not sent (module docstring) and no receiver waits for it: no process for it
        if self.knobs.ring:
            for s in range(w - 1):
                dst, src = (rank + s + 1) % w, (rank - s - 1) % w
                waits = [self.engine.process(self._message(key, rank, dst, send[dst]))] if send[dst] > 0 else []
                if recv[src] > 0:
                    waits.append(self._arrival(key, src, rank))
                if waits:
                    yield self.engine.all_of(waits)
        else:
            waits = [self.engine.process(self._message(key, rank, p, send[p])) for p in range(w)
                     if p != rank and send[p] > 0]
            waits += [self._arrival(key, p, rank) for p in range(w) if p != rank and recv[p] > 0]
            yield self.engine.all_of(waits)
        sent = sum(b for p, b in enumerate(send) if p != rank)
        received = sum(b for p, b in enumerate(recv) if p != rank)
        g = self.ctx.cluster.gpus_per_machine
        away = [p // g != rank // g for p in range(w)]
        self._span(rank, "exchange", t0, "network", nbytes=sent, layer=layer, direction=phase,
                   received_bytes=received, network_bytes=sum(b for b, a in zip(send, away, strict=True) if a),
                   network_received_bytes=sum(b for b, a in zip(recv, away, strict=True) if a))

    def _all_reduce(self, rank: int) -> Generator[Any, Any, None]:
        start, nbytes = self.engine.now, self.works[rank].gradient_bytes
        straggled = self.rendezvous.straggled_s(rank)
        yield self.rendezvous.wait("all_reduce", rank)
        yield from self.hw.all_reduce(rank, nbytes)
        self._span(rank, "all_reduce", start, "network", nbytes=nbytes,
                   **self.rendezvous.straggler_args(rank, straggled))
