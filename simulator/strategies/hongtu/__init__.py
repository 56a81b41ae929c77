"""Full-graph training with CPU data offloading, recomputation and deduplicated communication (``hongtu``).

Mechanism: Wang, Chen, Wong and He, "HongTu: Scalable Full-Graph GNN Training on Multiple GPUs", SIGMOD 2023
(brief ../shared/papers/hongtu.md). Every layer's vertex data (h^l, ∇h^l and the checkpoints) live in host
memory; the graph is cut in two levels, m partitions (one per GPU) of n destination-range chunks
(:mod:`.chunks`); batch j runs chunk (i, j) on every GPU i at once, layer by layer, and the intermediates are
not kept: the backward pass recomputes them, GCN from its cached aggregation output a^l (hybrid), GAT from its
reloaded neighbours (pure recomputation) (:mod:`.work`). Host-GPU neighbour traffic is deduplicated across GPUs
and reused across batches after a greedy reorganisation of the chunks that maximises both (Algorithm 4, which
lowers Eq. 4's communication cost) (:mod:`.dedup`). The epoch on
the hardware model is :mod:`.run`. One epoch = one full-graph gradient step; the weight gradients are
all-reduced once per epoch.

Notation: m -> number of GPUs (``ctx.num_workers``); n -> ``num_chunks``; G_ij, V_ij, N_ij, TU_j, T_ij -> as in
:mod:`.chunks` and :mod:`.dedup`; α_{mn} -> :func:`.chunks.replication_factor`; the paper's "GPU" is a worker.

Host memory is per machine (the NUMA domains of brief §1.2 become machines on a multi-machine cluster): a row
lives in the host of the machine of its level-1 owner GPU. The dedup levels ``gpu`` and ``reuse`` read only
local host rows (owner-based T_ij); ``none`` reads other machines' rows across the network, and GPU-GPU traffic
between machines takes PCIe, the network and PCIe (the network alone with ``network.gpudirect_rdma``).

Reorganisation (Algorithm 4) is applied at dedup ``gpu`` and ``reuse`` (always on in the paper's +P2P and +RU
configurations, brief §1.8); the simulated ``epoch`` span carries Eq. 4's volumes and its communication cost C
of one layer pass at the input width, beside the event-driven epoch.

Memory (:func:`.work.memory_model`): more chunks shrink every GPU's working set and raise α_{mn} (brief §6); a
configuration whose largest chunk does not fit a GPU is infeasible (a result), and the tuner constrains it out.
HongTu's rule is the fewest chunks that fit, and fewer chunks are faster where they fit, but the tuner samples
``num_chunks`` from :data:`CHUNK_CHOICES` beside the other knobs, so a short study may settle on more: a new
user's 30-trial study of Cora full-graph GCN on 4 A100s cut to 806 MB chose 16 chunks (7.16 ms) where 8 fit
(4.79 ms; 2026-12-01). Simulating the next smaller count checks it.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Literal

import numpy as np
from pydantic import ConfigDict, Field

from gnnplan.simulator.hardware.collectives import all_reduce_link_bytes, intra_machine_link, staged_network
from gnnplan.simulator.hardware.formulas import compute_time_s
from gnnplan.simulator.hardware.model import FLOAT_BYTES
from gnnplan.simulator.hardware.phase_rules import PhaseRule
from gnnplan.simulator.hardware.spec import ClusterSpec
from gnnplan.simulator.result import LINKS, SimResult
from gnnplan.simulator.spec_model import SpecModel
from gnnplan.simulator.strategies import calibration_rules as rules
from gnnplan.simulator.strategies.base import PhaseProfile, SimContext, kernel_profile
from gnnplan.simulator.strategies.contract import check_workload
from gnnplan.simulator.strategies.hongtu import chunks as ch
from gnnplan.simulator.strategies.hongtu import dedup
from gnnplan.simulator.strategies.hongtu.run import SCATTER_ADD_TOUCHES, EpochRun
from gnnplan.simulator.strategies.hongtu.work import (
    ChunkWork,
    chunk_work,
    host_parts,
    layer_widths,
    memory_model,
    optimizer_kernels,
)
from gnnplan.simulator.strategies.window import busiest_phase_totals
from gnnplan.simulator.trace import Span
from gnnplan.simulator.workload.cards import card_name
from gnnplan.simulator.workload.datasets import load_dataset
from gnnplan.simulator.workload.model_cost import param_count
from gnnplan.simulator.workload.proxy import for_card, proxy_scale
from gnnplan.simulator.workload.proxy_pool import medoid_context
from gnnplan.simulator.workload.spec import GeneratedSpec, WorkloadSpec

NAME = "hongtu"
EXECUTOR = "gnnplan.executor.strategies.hongtu"
SUPPORTS = ("full-graph",)
MODEL_ARCHS = ("gcn", "gat")
NEEDS_SAMPLE_STATS = False
"""Full-graph: the chunk statistics are measured here."""
PHASES = ("h2d", "exchange", "d2d", "forward", "backward", "d2h", "host_accumulate", "all_reduce", "optimizer")
CHUNK_CHOICES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
"""``num_chunks`` values the tuner tries (the paper's chunk counts are powers of two up to 64 per GPU, ×4 in its
Fig. 10 sweep: brief §4, §6)."""


def _scatter_add_work(row: Any) -> dict[str, float]:
    return {"traffic_bytes": SCATTER_ADD_TOUCHES * row.span.nbytes}


def _peer_work(row: Any) -> dict[str, float]:
    return {"nbytes": max(row.span.nbytes, rules.span_arg(row, "received_bytes"))}


def _exchange_work(row: Any) -> dict[str, float]:
    """A peer slot with a worker of another machine, priced on the bytes that cross the NIC shared with the
    machine's other GPUs' slots beside it (:func:`~simulator.strategies.calibration_rules.nic_work`). Until
    2026-11-29 every byte of the span was priced at the NIC's whole rate: a trace predicted on 2 machines x 2
    GPUs, calibrated on its own cluster, fitted the network 0.71x-1.20x."""
    return rules.nic_work(row) if "network_bytes" in row.span.args else _peer_work(row)


def _moving_s(row: Any) -> float:
    """A peer span's seconds without the barrier wait it starts with (``wait_s``)."""
    return float(row.span.dur_s - rules.span_arg(row, "wait_s"))


CALIBRATION: dict[str, PhaseRule] = {
    "h2d": PhaseRule("host_to_gpu", lambda row: {"nbytes": row.span.nbytes}),
    "d2h": PhaseRule("gpu_to_host", lambda row: {"nbytes": row.span.nbytes}),
    "exchange": PhaseRule("exchange", _exchange_work, target=_moving_s, min_machines=2, peers=True),
    "d2d": PhaseRule("gpu_to_gpu", _peer_work, target=_moving_s, min_workers=2),
    "host_accumulate": PhaseRule("host_memory_traffic", _scatter_add_work),
    **rules.compute_rules(),
    "all_reduce": rules.all_reduce_rule(),
    "iteration": rules.iteration_rule(PHASES, sampler_knob=None)}
"""How calibration prices ``hongtu``'s spans: host-to-GPU loads, GPU-to-host writes, one peer message per span
(the larger of sent and received bytes; across machines PCIe out, network, PCIe in, or the network alone with
GPUDirect RDMA, on the bytes that cross the NIC shared with the machine's other GPUs' slots: :func:`_exchange_work`,
:func:`~simulator.hardware.pricing.exchange_s`; compared with the span's
time after its barrier wait ``wait_s``, while the iteration's gap keeps the wait out too), the CPU's gradient
accumulation as a host-memory scatter touching 3 bytes per gradient byte, compute, all-reduce, and the fixed
iteration cost."""


class Knobs(SpecModel):
    """The ``hongtu`` strategy's knobs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    num_chunks: int = Field(default=1, ge=1, le=4096,
                            description="n: chunks per GPU partition = batches per layer pass (brief §6)")
    dedup: Literal["none", "gpu", "reuse"] = Field(
        default="reuse", description="host-GPU dedup: none (Baseline), gpu (+P2P inter-GPU), reuse (+RU intra-GPU)")
    partitioner: Literal["metis", "chunk"] = Field(
        default="metis", description="level-1 partitioner: METIS (the paper) or contiguous vertex-id ranges (chunk)")


def suggest(trial: Any, workload: Any, tune_batch_size: bool = False) -> Knobs:
    """The Optuna search space of ``hongtu`` (parameter names ``hongtu.<knob>``); ``tune_batch_size`` is
    ignored (full-graph: one step per epoch)."""
    return Knobs(num_chunks=trial.suggest_categorical(f"{NAME}.num_chunks", list(CHUNK_CHOICES)),
                 dedup=trial.suggest_categorical(f"{NAME}.dedup", list(dedup.DEDUP_LEVELS)),
                 partitioner=trial.suggest_categorical(f"{NAME}.partitioner", list(ch.PARTITIONERS)))


# ------------------------------------------------------------------------------------------- partitioning

@dataclass(frozen=True)
class Layout:
    """The two-level partition of a dataset for m GPUs and n chunks (the executor builds on it too).

    Attributes:
        csr: the training graph; owner: (|V|,) level-1 owner GPU of every vertex.
        chunks: ``chunks[i][a]`` in range order; reorganised: Algorithm 4's placement.
        volumes: Eq. 4's volumes of the range placement and of the reorganised one (brief §2).
    """

    csr: ch.InCSR
    owner: np.ndarray
    chunks: list[list[ch.Chunk]]
    reorganised: list[list[int]]
    volumes: tuple[dedup.Volumes, dedup.Volumes]


def chunks_problem(num_vertices: int, num_gpus: int, num_chunks: int) -> str | None:
    """Why ``num_chunks`` chunks per GPU cannot be cut from ``num_vertices`` on ``num_gpus`` (more chunks than a
    GPU's share of the vertices leaves chunks empty: Cora at 4,000 took 17 s to price them, 2026-12-01), or None."""
    per_gpu = num_vertices // num_gpus
    if num_chunks <= per_gpu:
        return None
    from gnnplan.simulator.wording import counted

    return (f"num_chunks={num_chunks} is more chunks than a GPU's ~{per_gpu} vertices ({num_vertices} on "
            f"{counted(num_gpus, 'GPU')}); at most {per_gpu}")


@lru_cache(maxsize=8)
def layout(ref: str | GeneratedSpec, num_parts: int, num_chunks: int, partitioner: str) -> Layout:
    """The partition and the reorganisation of ``ref`` (cached in this process; both architectures share the
    self-loop rule, so the graph does not depend on the model)."""
    graph = load_dataset(ref)
    csr = ch.training_csr(graph, "gcn")
    owner = ch.level1_owner(ref, graph, csr, num_parts, partitioner)
    chunks = ch.two_level_chunks(csr, owner, num_parts, num_chunks)
    reorg = dedup.reorganise(chunks, csr.num_vertices)
    identity = dedup.identity_placement(num_parts, num_chunks)
    vols = (dedup.volumes(dedup.placed(chunks, identity), owner), dedup.volumes(dedup.placed(chunks, reorg), owner))
    return Layout(csr, owner, chunks, reorg, vols)


def slots(workload: WorkloadSpec, knobs: Knobs, num_parts: int) -> tuple[Layout, list[list[ch.Chunk]]]:
    """(the layout, ``slots[i][j]`` = the chunk GPU i runs in batch j): the range order at ``dedup=none``, else
    Algorithm 4's placement (module docstring)."""
    lay = layout(workload.dataset, num_parts, knobs.num_chunks, knobs.partitioner)
    if knobs.dedup == "none":
        return lay, dedup.placed(lay.chunks, dedup.identity_placement(num_parts, knobs.num_chunks))
    return lay, dedup.placed(lay.chunks, lay.reorganised)


def batch_counts(ctx: SimContext, knobs: Knobs) -> list[list[dedup.BatchCounts]]:
    """Every GPU's :class:`~.dedup.BatchCounts` in every batch; a small card's are its medoid draw's
    (:func:`counted_context`)."""
    drawn = counted_context(ctx, knobs)
    if drawn is not ctx:
        return batch_counts(drawn, knobs)
    lay, placed = slots(ctx.workload, knobs, ctx.num_workers)
    counts = dedup.batch_counts(placed, lay.owner, knobs.dedup, ctx.cluster.gpus_per_machine)
    ref = ctx.workload.dataset  # a dataset card's proxy counts, scaled to the card (simulator/workload/proxy.py)
    if card_name(ref) is None:
        return counts
    return [[for_card(ref, c, dedup.CARD_VERTEX_FIELDS, dedup.CARD_EDGE_FIELDS) for c in row] for row in counts]


def counted_context(ctx: SimContext, knobs: Knobs) -> SimContext:
    """``ctx``; for a small card pooled over proxy draws, the context of the draw whose batch counts are the
    medoid of the draws' (:func:`simulator.workload.proxy_pool.medoid_context`), chosen once per process for these
    counts' inputs: the GPUs, the GPUs per machine and the knobs (all three of them count)."""
    key = ("hongtu", ctx.num_workers, ctx.cluster.gpus_per_machine, knobs.num_chunks, knobs.partitioner, knobs.dedup)
    return medoid_context(ctx, lambda c: batch_counts(c, knobs), key)


# ---------------------------------------------------------------------------------------------- simulation

def _works(ctx: SimContext, counts: list[list[dedup.BatchCounts]]) -> list[list[list[ChunkWork]]]:
    wl, sm = ctx.workload, ctx.summary
    widths = layer_widths(wl.model, sm.feature_dim, sm.num_classes)
    return [[[chunk_work(ctx.cluster, wl.model, widths, sm.feature_dim, sm.num_classes, layer, c)
              for layer in range(wl.model.num_layers)] for c in row] for row in counts]


def transfer_totals(arch: str, level: str, widths: list[int],
                    counts: list[list[dedup.BatchCounts]]) -> dict[str, float]:
    """Bytes of one epoch, summed over GPUs, by path: ``host_to_gpu`` (rows read from a host, a remote one at
    ``none`` included), ``gpu_to_host`` (rows written to a host, remote gradient writes at ``none`` included),
    ``peer`` (GPU-GPU rows), ``reuse`` (rows used again in place) and ``accumulated`` (gradient bytes the hosts'
    CPUs add). Source: brief §1.9 (what moves where per layer and batch; float32 rows, [inferred] widths)."""
    out = dict.fromkeys(("host_to_gpu", "gpu_to_host", "peer", "reuse", "accumulated"), 0.0)
    fetches, remote_host = 1 + (arch == "gat"), level == "none"
    for row in counts:
        for c in row:
            for layer in range(len(widths) - 1):
                d = FLOAT_BYTES * widths[layer]
                outputs = FLOAT_BYTES * c.num_dst * (widths[layer + 1] + (arch == "gcn") * widths[layer])
                pulled, pushed = sum(c.pull_rows) * d, (layer > 0) * sum(c.push_rows) * d
                flushed = (layer > 0) * c.flush_rows * d + remote_host * pushed
                out["host_to_gpu"] += fetches * (c.load_rows * d + remote_host * pulled) + outputs
                out["gpu_to_host"] += outputs + flushed
                out["peer"] += (not remote_host) * (fetches * pulled + pushed)
                out["reuse"] += fetches * c.reused_rows * d
                out["accumulated"] += flushed
    return out


def link_bytes_per_epoch(cluster: ClusterSpec, arch: str, widths: list[int], counts: list[list[dedup.BatchCounts]],
                         gradient_bytes: float) -> dict[str, float]:
    """Bytes all GPUs move over each link kind in one epoch: host loads and writes on PCIe; GPU-GPU rows sent
    within a machine on its intra-machine link once (NVLink, or PCIe peer to peer without it: bytes sent, the
    convention of :func:`~simulator.hardware.collectives.all_reduce_link_bytes` and of the executor's count), across
    machines on the network (and PCIe twice when staged through host memory, not with GPUDirect RDMA:
    :func:`~simulator.hardware.collectives.staged_network`); the gradient all-reduce."""
    out = {k: 0.0 for k in LINKS}
    totals = transfer_totals(arch, "gpu", widths, counts)  # host loads and writes, peer rows apart
    out["pcie"] = totals["host_to_gpu"] + totals["gpu_to_host"]
    _, intra = intra_machine_link(cluster)
    g, staged = cluster.gpus_per_machine, staged_network(cluster)
    for rank, row in enumerate(counts):
        for c in row:
            for layer in range(len(widths) - 1):
                d = FLOAT_BYTES * widths[layer]
                sent = (1 + (arch == "gat")) * np.array(c.pull_rows) + (layer > 0) * np.array(c.push_rows)
                for peer, rows in enumerate(sent):
                    same = peer // g == rank // g
                    out[intra if same else "network"] += rows * d
                    out["pcie"] += 2 * rows * d if (not same and staged) else 0.0
    if cluster.num_gpus > 1:
        for kind, nbytes in all_reduce_link_bytes(gradient_bytes, cluster).items():
            out[kind] += cluster.num_gpus * nbytes
    return out


def compute_profile(ctx: SimContext, knobs: Knobs) -> dict[str, PhaseProfile]:
    """Per phase, the kernels of every (GPU, batch, layer) compute span of an epoch and the optimizer's (for
    calibration)."""
    wl, sm, gpu = ctx.workload, ctx.summary, ctx.cluster.gpu
    works = [w for row in _works(ctx, batch_counts(ctx, knobs)) for ws in row for w in ws]
    opt = list(optimizer_kernels(wl.model, sm.feature_dim, sm.num_classes))
    return {"forward": kernel_profile([list(w.kernels[0]) for w in works], gpu),
            "backward": kernel_profile([list(w.kernels[1]) for w in works], gpu),
            "optimizer": kernel_profile([opt] * ctx.num_workers, gpu)}


def simulate(ctx: SimContext, knobs: Knobs) -> SimResult:
    """Simulate one full-graph epoch of ``hongtu`` (module docstring).

    Returns:
        The result (one iteration per epoch); infeasible (a chunk does not fit a GPU, or the vertex data do not
        fit the hosts) with a reason and infinite times.

    Raises:
        SpecError: a workload this strategy cannot run.
    """
    started = time.perf_counter()
    check_workload(sys.modules[__name__], ctx.workload)
    cl, wl, sm = ctx.cluster, ctx.workload, ctx.summary
    too_many = chunks_problem(sm.num_vertices, ctx.num_workers, knobs.num_chunks)
    if too_many:
        return SimResult.infeasible(too_many, strategy=NAME, knobs=knobs.model_dump(), num_iterations=1,
                                    sim_wall_s=time.perf_counter() - started)
    # a small card pooled over proxy draws: its counts, the placement's volumes and the hosts' rows all from the
    # draw whose counts are the medoid (simulator/workload/proxy_pool.py)
    drawn = counted_context(ctx, knobs)
    counts = batch_counts(drawn, knobs)
    works = _works(ctx, counts)
    widths = layer_widths(wl.model, sm.feature_dim, sm.num_classes)
    gradient_bytes = float(FLOAT_BYTES * param_count(wl.model, sm.feature_dim, sm.num_classes))
    estimate, where = memory_model(cl, wl.model, widths, counts, works, _host_parts(drawn, knobs, widths))
    common: dict[str, Any] = {
        "strategy": NAME, "knobs": knobs.model_dump(), "num_iterations": 1,
        "bytes_per_epoch": link_bytes_per_epoch(cl, wl.model.arch, widths, counts, gradient_bytes),
        **estimate.result_fields()}
    if not estimate.feasible:
        reason = estimate.reason if "GPU" not in estimate.reason else f"{estimate.reason} at {where}"
        return SimResult.infeasible(f"{reason} with num_chunks={knobs.num_chunks}",
                                    sim_wall_s=time.perf_counter() - started, **common)
    opt = optimizer_kernels(wl.model, sm.feature_dim, sm.num_classes)
    run = EpochRun(cl, wl.model.arch, knobs.dedup, counts, works, widths,
                   (compute_time_s(opt, cl.gpu, cl.efficiency.optimizer_fraction), sum(k.flops for k in opt)),
                   gradient_bytes, seed=ctx.seed)
    run.execute()
    epoch = max(run.ends)
    run.spans = [_with_eq4(s, drawn, knobs) if s.phase == "epoch" else s for s in run.spans]
    breakdown = busiest_phase_totals(run.spans, PHASES)
    breakdown["overhead"] = cl.iteration_overhead_s
    return SimResult(feasible=True, epoch_time_s=epoch, iteration_time_s=epoch, breakdown_s=breakdown,
                     spans=run.spans, sim_wall_s=time.perf_counter() - started, **common)


def _with_eq4(span: Span, ctx: SimContext, knobs: Knobs) -> Span:
    """The ``epoch`` span with Eq. 4's volumes (rows) and cost C (seconds, one layer pass at the input width) of
    the placement simulated, and α_{mn}."""
    lay = layout(ctx.workload.dataset, ctx.num_workers, knobs.num_chunks, knobs.partitioner)
    vol = lay.volumes[0 if knobs.dedup == "none" else 1]
    cost = dedup.communication_cost_s(ctx.cluster, vol, FLOAT_BYTES * ctx.summary.feature_dim)
    return replace(span, args={**span.args, "v_ori": vol.v_ori, "v_p2p": vol.v_p2p, "v_ru": vol.v_ru,
                               "eq4_cost_s": cost, "alpha": ch.replication_factor(lay.chunks, lay.csr.num_vertices)})


def _host_parts(ctx: SimContext, knobs: Knobs, widths: list[int]) -> dict[str, float]:
    """Host memory of the machine owning the most rows (:func:`.work.host_parts`)."""
    lay = layout(ctx.workload.dataset, ctx.num_workers, knobs.num_chunks, knobs.partitioner)
    g = ctx.cluster.gpus_per_machine
    machine = lay.owner // g
    vertices = np.bincount(machine, minlength=ctx.cluster.num_machines)
    edges = np.bincount(machine, weights=lay.csr.in_degrees, minlength=ctx.cluster.num_machines)
    biggest = int(np.argmax(vertices + edges))
    owned_vertices, owned_edges = int(vertices[biggest]), int(edges[biggest])
    name = card_name(ctx.workload.dataset)
    if name is not None:  # a dataset card's proxy: owned rows scale to the card (simulator/workload/proxy.py)
        scale = proxy_scale(name)
        owned_vertices = round(owned_vertices * scale.vertex_factor)
        owned_edges = round(owned_edges * scale.edge_factor)
    return host_parts(ctx.workload.model, widths, owned_vertices, owned_edges, g, ctx.cluster.host.process_bytes)
