"""What every GPU does in one ``gsplit`` iteration: bytes, FLOPs and uncontended seconds, from measured splits.

Notation: g -> ``num_splits``, L -> ``num_layers``, s -> ``FLOAT_BYTES``, d -> ``feature_dim``, c ->
``cache_fraction``, F_i -> ``miss_bytes`` (brief §2.3), R_{i->j} / S_{i->j} -> ``SplitStats.rows``, m_l ->
:func:`.split.shuffle_width`.

Per split i of batch b (brief §2.3, "Per-iteration cost model" [inferred there]):

* load: F_i = (owned layer-0 vertices not in C_i) * d * s from host memory over PCIe, plus the split's structure
  (int64 ids of its edges and vertices, what ``dgl`` block structure costs in ``model_cost``); cache hits are
  gathered in GPU memory. Misses of the union of caches are loaded exactly once, by their owner.
* compute: the model's kernels on the split's blocks (owned sources, owned destinations, the edges it computes:
  at the source's owner for GraphSAGE, at the destination's owner for GAT), cut at the shuffles into L + 1
  forward and L + 1 backward segments (:func:`segments`). Receive-side sums of shuffled rows are not counted
  (one add per received row, small next to the aggregation) [inferred].
* shuffle of layer l: ``rows[i, j] * m_l * s`` bytes from i to j forward and the same bytes from j to i backward
  (gradients), one message per GPU pair (brief §1.5, coalescing).

The sampler samples one mini-batch (its sampled edges) and splits it: "check which offline partition it belongs
to and whether it is cached" for every sampled vertex of every layer (brief §1.4, paper §5.3; ``num_items`` per
batch; an edge follows its endpoint's split), priced at the sampler's per-edge rate per vertex [inferred: the
split is fused with sampling and visits each sampled vertex once, as the sampler visits each edge].
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from gnnplan.simulator.hardware.collectives import all_reduce_link_bytes, intra_machine_link
from gnnplan.simulator.hardware.formulas import compute_time_s
from gnnplan.simulator.hardware.model import CUDA_CONTEXT_BYTES
from gnnplan.simulator.hardware.spec import ClusterSpec
from gnnplan.simulator.result import LINKS
from gnnplan.simulator.strategies.base import MemoryEstimate, SimContext
from gnnplan.simulator.strategies.gsplit.split import shuffle_width
from gnnplan.simulator.strategies.gsplit.stats import SplitStats
from gnnplan.simulator.strategies.host_memory import (
    feature_partition_bytes,
    vertex_maps_bytes,
    whole_graph_parts,
    worker_processes_bytes,
)
from gnnplan.simulator.strategies.inference_memory import with_evaluation
from gnnplan.simulator.strategies.window import PREFETCH_FACTOR
from gnnplan.simulator.units import FLOAT_BYTES, INDEX_BYTES
from gnnplan.simulator.workload.inference import InferenceStats
from gnnplan.simulator.workload.model_cost import Block, Kernel, ModelCost, layer_dims, model_cost, model_state_bytes
from gnnplan.simulator.workload.spec import ModelSpec


def shuffle_widths(model: ModelSpec, feature_dim: int, num_classes: int) -> list[int]:
    """m_l of every layer (:func:`.split.shuffle_width`)."""
    return [shuffle_width(model.arch, d.in_dim, d.out_dim, d.num_heads)
            for d in layer_dims(model, feature_dim, num_classes)]


INDEX_OP_TRAFFIC = 3.0
"""Passes over a split aggregation's bytes when torch index operations run it, as the executor's split layers do
(:mod:`gnnplan.executor.strategies.gsplit.layers`: ``rows[gather_index]`` materialises one row per edge, read and
written, :data:`~gnnplan.simulator.hardware.formulas.GATHER_TRAFFIC`, and ``index_add`` reads it again into the
destinations), against the one pass of a fused SpMM [inferred from the executor's code]. Measured on 2026-11-29
(2-core Xeon VM, one thread): the gather and ``index_add`` of 33 k edges x 128 columns (an rmat100k-sage split's
first layer) took 8.4-12.1 ms, 0.35-0.5 GFLOP/s of aggregation, where ``torch.sparse.mm`` of the same edges took
1.3 ms and the probe's SpMM rate (``gpu.sparse_flops_per_s``, what a DGL aggregation is priced at) was 5.8
GFLOP/s; priced as memory traffic at this factor it is 4.7 ms at the probed copy rate before the phase's
fraction."""


def split_cost(model: ModelSpec, feature_dim: int, num_classes: int, src: np.ndarray, dst: np.ndarray,
               edges: np.ndarray) -> ModelCost:
    """The model's kernels on one split: per layer, its owned sources, owned destinations and computed edges;
    its aggregations are torch index operations, no DGL message-passing calls (``Kernel.graph_op`` false), priced
    as memory traffic (the roofline's bytes term, not ``gpu.sparse_flops_per_s``): :data:`INDEX_OP_TRAFFIC` times
    the bytes of the aggregation a fused kernel would move.

    Shapes:
        src, dst, edges: (L,) counts.
    """
    blocks = [Block(float(s), float(d), float(e)) for s, d, e in zip(src, dst, edges)]
    cost = model_cost(model, feature_dim, num_classes, blocks)

    def index_ops(k: Kernel) -> Kernel:
        if not k.sparse:
            return replace(k, graph_op=False)
        return replace(k, graph_op=False, sparse=False, nbytes=k.nbytes * INDEX_OP_TRAFFIC)

    return replace(cost, forward=tuple(map(index_ops, cost.forward)), backward=tuple(map(index_ops, cost.backward)))


def backward_shuffles(model: ModelSpec, feature_dim: int, num_classes: int) -> list[bool]:
    """Whether each layer's shuffle has a backward pass: not when it carries rows no parameter produced
    (GraphSAGE's layer 0 without ``fc_neigh`` before aggregation sums raw features, which need no gradient)."""
    dims = layer_dims(model, feature_dim, num_classes)
    return [not (model.arch == "sage" and layer == 0 and d.in_dim <= d.out_dim) for layer, d in enumerate(dims)]


def segments(cost: ModelCost, arch: str, num_layers: int,
             has_backward: Sequence[bool] | None = None) -> tuple[list[list[Kernel]], list[list[Kernel]]]:
    """Cut a split's kernels at the layers' shuffles.

    Forward segment l (0..L) runs before shuffle l (after shuffle l-1): layer l's source-side kernels (GraphSAGE:
    up to and including the partial aggregation; GAT: the projection) follow layer l-1's destination-side
    kernels; the last segment ends with the loss. A kernel of forward segment l has its gradient in backward
    segment L - l, which runs after backward shuffle l (backward segment 0 starts with the loss gradient); a
    layer without a backward shuffle (``has_backward[l]`` false, :func:`backward_shuffles`) joins the two
    backward segments around it.

    Returns:
        (forward segments: L + 1 kernel lists, backward segments: one more than the backward shuffles), in
        execution order.
    """
    forward: list[list[Kernel]] = [[] for _ in range(num_layers + 1)]
    where: dict[str, int] = {}
    for layer in range(num_layers):
        mine = [k for k in cost.forward if k.name.split(".")[0] == f"{arch}{layer}"]
        names = [k.name.split(".", 1)[1] for k in mine]
        cut = names.index("mean") + 1 if arch == "sage" else 1
        for i, k in enumerate(mine):
            where[k.name] = layer if i < cut else layer + 1
    for k in cost.forward:
        where.setdefault(k.name, num_layers)  # the loss
        forward[where[k.name]].append(k)
    backward: list[list[Kernel]] = [[] for _ in range(num_layers + 1)]
    for k in cost.backward:
        source = "loss.cross_entropy" if k.name == "loss.grad" else k.name.removesuffix(".grad")
        backward[num_layers - where[source]].append(k)
    joined = [backward[0]]
    for seg in range(1, num_layers + 1):  # segment seg follows the backward shuffle of layer L - seg
        if has_backward is None or has_backward[num_layers - seg]:
            joined.append(backward[seg])
        else:
            joined[-1] = joined[-1] + backward[seg]
    return forward, joined


@dataclass(frozen=True)
class SplitWork:
    """One GPU's work in one iteration.

    Attributes:
        num_input_vertices: owned layer-0 vertices; hit_bytes / miss_bytes: their features in / not in C_i.
        structure_bytes: the split's block structure copied to the GPU (0 when the "GPU" is the host CPU: the
            sampler built it in the worker's own memory).
        num_edges: edges the split computes (all layers).
        forward_s, backward_s: uncontended seconds of each segment (L + 1 each, execution order).
        forward_flops, backward_flops: FLOPs of each segment.
        cost: the split's model cost (memory sizes).
    """

    num_input_vertices: float
    hit_bytes: float
    miss_bytes: float
    structure_bytes: float
    num_edges: float
    forward_s: tuple[float, ...]
    backward_s: tuple[float, ...]
    forward_flops: tuple[float, ...]
    backward_flops: tuple[float, ...]
    cost: ModelCost


@dataclass(frozen=True)
class IterationWork:
    """Every GPU's work in one iteration (one measured batch).

    Attributes:
        batch: index of the batch in :class:`~.stats.SplitStats`.
        num_sampled_edges, num_items: sampler work: edges sampled, vertices the split looks up.
        splits: one :class:`SplitWork` per GPU.
        shuffle_bytes: (L, g, g) forward-shuffle bytes from i to j (0 on the diagonal); backward = transposed.
        has_backward: (L,) whether each layer's shuffle has a backward pass (:func:`backward_shuffles`).
        optimizer_s, optimizer_flops, gradient_bytes: Adam step and the all-reduced gradients (float32).
    """

    batch: int
    num_sampled_edges: float
    num_items: float
    splits: tuple[SplitWork, ...]
    shuffle_bytes: np.ndarray
    has_backward: tuple[bool, ...]
    optimizer_s: float
    optimizer_flops: float
    gradient_bytes: float


def split_work(cl: ClusterSpec, cost: ModelCost, arch: str, has_backward: Sequence[bool], inputs: float,
               hits: float, row_bytes: float, num_edges: float) -> SplitWork:
    """Price one split's segments on ``cl`` (:func:`~gnnplan.simulator.hardware.formulas.compute_time_s` with the
    phase's efficiency fraction)."""
    fwd, bwd = segments(cost, arch, len(has_backward), has_backward)
    eff = cl.efficiency
    return SplitWork(
        num_input_vertices=inputs, hit_bytes=hits * row_bytes, miss_bytes=(inputs - hits) * row_bytes,
        structure_bytes=0.0 if cl.gpu.is_host_cpu else cost.block_bytes, num_edges=num_edges,
        forward_s=tuple(compute_time_s(ks, cl.gpu, eff.forward_fraction) for ks in fwd),
        backward_s=tuple(compute_time_s(ks, cl.gpu, eff.backward_fraction) for ks in bwd),
        forward_flops=tuple(sum(k.flops for k in ks) for ks in fwd),
        backward_flops=tuple(sum(k.flops for k in ks) for ks in bwd), cost=cost)


def iteration_work(ctx: SimContext, stats: SplitStats, cache_fraction: float, batch: int) -> IterationWork:
    """Every GPU's work on measured batch ``batch`` (module docstring)."""
    cl, wl, sm = ctx.cluster, ctx.workload, ctx.summary
    arch, num_layers = wl.model.arch, wl.model.num_layers
    has_backward = backward_shuffles(wl.model, sm.feature_dim, sm.num_classes)
    row = sm.feature_dim * FLOAT_BYTES
    hits = stats.hits(cache_fraction, batch)
    edges = stats.edges(arch)[batch]                                               # (L, g)
    splits = []
    priced: dict[tuple[float, ...], SplitWork] = {}       # equal splits (e.g. the rank mean) priced once
    for i in range(stats.num_splits):
        src, dst, own = stats.split_src[batch, :, i], stats.split_dst[batch, :, i], edges[:, i]
        key = (*src.tolist(), *dst.tolist(), *own.tolist(), float(hits[i]))
        if key not in priced:
            cost = split_cost(wl.model, sm.feature_dim, sm.num_classes, src, dst, own)
            priced[key] = split_work(cl, cost, arch, has_backward, float(src[0]), float(hits[i]), row,
                                     float(own.sum()))
        splits.append(priced[key])
    widths = np.asarray(shuffle_widths(wl.model, sm.feature_dim, sm.num_classes), dtype=np.float64)
    rows = stats.rows(arch)[batch].astype(np.float64)                              # (L, g, g)
    shuffle = rows * widths[:, None, None] * FLOAT_BYTES
    for layer in range(num_layers):
        np.fill_diagonal(shuffle[layer], 0.0)
    opt = splits[0].cost.optimizer
    return IterationWork(batch, float(stats.num_edges[batch].sum()), float(stats.num_items[batch]), tuple(splits),
                         shuffle, tuple(has_backward), compute_time_s(opt, cl.gpu, cl.efficiency.optimizer_fraction),
                         sum(k.flops for k in opt), float(FLOAT_BYTES * splits[0].cost.num_params))


def link_bytes(cl: ClusterSpec, work: IterationWork) -> dict[str, float]:
    """Bytes all GPUs put on each link kind in one iteration: misses and structure over PCIe, shuffles (both
    directions) over NVLink (PCIe without it) inside a machine and the network across, the all-reduce."""
    out = {k: 0.0 for k in LINKS}
    g = cl.gpus_per_machine
    _, intra = intra_machine_link(cl)
    machine = np.arange(cl.num_gpus) // g
    same = machine[:, None] == machine[None, :]
    backward = np.asarray(work.has_backward, dtype=np.float64)[:, None, None]
    total = ((1.0 + backward) * work.shuffle_bytes).sum(axis=0)                   # forward (+ backward)
    out[intra] += float(total[same].sum())
    out["network"] += float(total[~same].sum())
    for s in work.splits:
        out["pcie"] += s.miss_bytes + s.structure_bytes
        for kind, nbytes in all_reduce_link_bytes(work.gradient_bytes, cl).items():
            out[kind] += nbytes
    return out


def split_sizes(model: ModelSpec, feature_dim: int, num_classes: int, src: np.ndarray, dst: np.ndarray,
                edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Activation bytes and structure bytes (:class:`~simulator.workload.model_cost.ModelCost`'s
    ``activation_bytes`` and ``block_bytes``) of many splits at once, without pricing each one.

    Both are linear in a split's per-layer counts (every kernel's output elements and the blocks' ids are counts
    times widths: :func:`~simulator.workload.model_cost.model_cost`), so they are evaluated at zero and at every
    unit count (3 L + 1 model costs) and combined; the largest split is checked against its direct evaluation
    (relative 1e-9), and every split is evaluated directly if it differs (a model cost no longer linear).

    Shapes:
        src, dst, edges: (n, L) counts of n splits -> (n,) activation bytes, (n,) structure bytes.
    """
    src, dst, edges = (np.asarray(a, dtype=np.float64) for a in (src, dst, edges))

    def direct(s: np.ndarray, d: np.ndarray, e: np.ndarray) -> np.ndarray:
        cost = split_cost(model, feature_dim, num_classes, s, d, e)
        return np.array([cost.activation_bytes, cost.block_bytes])

    counts = np.concatenate([src, dst, edges], axis=1)                            # (n, 3L)
    num_layers = src.shape[1]
    base = direct(*np.zeros((3, num_layers)))
    basis = np.eye(3 * num_layers).reshape(3 * num_layers, 3, num_layers)
    sizes = base + counts @ np.stack([direct(*unit) - base for unit in basis])      # (n, 2)
    if len(counts):
        big = int(np.argmax(counts.sum(axis=1)))
        check = direct(src[big], dst[big], edges[big])
        if not np.allclose(sizes[big], check, rtol=1e-9, atol=0.0):
            sizes = np.stack([direct(s, d, e) for s, d, e in zip(src, dst, edges)])
    return sizes[:, 0], sizes[:, 1]


def memory_model(ctx: SimContext, stats: SplitStats, cache_fraction: float, num_sampler_workers: int,
                 works: list[IterationWork], inferred: InferenceStats) -> MemoryEstimate:
    """Peak memory of a ``gsplit`` configuration and whether it fits.

    Per GPU (the largest measured split of any batch of ``works``, from ``stats``: the measured splits even when
    ``works`` are the per-rank mean of :mod:`.rank_mean`): framework reserve, parameters, gradients and Adam
    state, the owned input features, activations and split structure (:func:`split_sizes`), the shuffle buffers
    (sent plus received rows of a layer: twice the largest either), and the feature cache C_i
    (``min(c n, |P_i|)`` rows). Per machine: the whole graph structure (the sampler needs every vertex's
    neighbours), the features of its GPUs' splits, the machine's feature partition the evaluation reads its
    layer-0 rows from (executor/assemble.py, by the ``split`` partitioner over the machines), the int64 maps over
    all vertices (shared: :data:`..host_memory.VERTEX_MAPS`, the feature store's positions on several machines and the
    split of every vertex; each worker's own: its rows' and its cache's slots; :func:`..host_memory.vertex_maps_bytes`),
    one process per GPU, and the sampler's batches in flight (their block structure). The evaluation after each
    epoch keeps all but the sampler's batches and adds its blocks and rows (``inferred``: the inference block on
    the machines' partition by the ``split`` knob; :mod:`..inference_memory`); the peak is the larger phase's.
    """
    cl, wl, sm = ctx.cluster, ctx.workload, ctx.summary
    row = sm.feature_dim * FLOAT_BYTES
    batches = [w.batch for w in works]
    layers = range(wl.model.num_layers)

    def per_split(a: np.ndarray) -> np.ndarray:                                  # (n_b, L, g) -> (n_b g, L)
        return np.concatenate([a[b].T for b in batches]).astype(np.float64)

    src = per_split(stats.split_src)
    activation, structure = split_sizes(wl.model, sm.feature_dim, sm.num_classes, src,
                                        per_split(stats.split_dst), per_split(stats.edges(wl.model.arch)))
    widths = np.asarray(shuffle_widths(wl.model, sm.feature_dim, sm.num_classes), dtype=np.float64)
    sent = 0.0
    for b in batches:
        for layer in layers:
            rows = stats.rows(wl.model.arch)[b, layer].astype(np.float64) * widths[layer] * FLOAT_BYTES
            np.fill_diagonal(rows, 0.0)
            sent = max(sent, float(rows.sum(axis=1).max()), float(rows.sum(axis=0).max()))
    cached = min(math.floor(cache_fraction * sm.num_vertices + 1e-9), int(stats.partition_sizes.max()))
    gpu = {"framework reserve": 0.0 if cl.gpu.is_host_cpu else CUDA_CONTEXT_BYTES,
           "parameters, gradients and Adam state": model_state_bytes(works[0].splits[0].cost.num_params),
           "input features": float(src[:, 0].max()) * row,
           "activations": float(activation.max()),
           "split structure": float(structure.max()), "shuffle buffers": 2.0 * sent,
           "feature cache": cached * row}
    g = cl.gpus_per_machine
    owned = max(float(stats.partition_sizes[m * g:(m + 1) * g].sum()) for m in range(cl.num_machines))
    in_flight = PREFETCH_FACTOR * num_sampler_workers if num_sampler_workers else 1
    batch_structure = max(INDEX_BYTES * float((2 * stats.num_edges[b] + stats.num_src[b]).sum()) for b in batches)
    host = {**whole_graph_parts(sm, wl.model.arch),
            "features of the machine's splits": owned * row,
            "feature partition (the evaluation's layer-0 rows)": feature_partition_bytes(cl, sm),
            # the split of every vertex; each worker's rows' and cache's slots
            "vertex maps (int64)": vertex_maps_bytes(cl, sm.num_vertices, extra_shared_maps=1, per_worker_maps=2),
            "worker processes": worker_processes_bytes(cl, num_sampler_workers),
            "sampler batches in flight": in_flight * batch_structure}
    return with_evaluation(ctx, gpu, host, inferred, training_only="sampler batches in flight")
