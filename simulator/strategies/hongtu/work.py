"""What one HongTu GPU computes and holds per chunk: kernels of the forward and backward pass of a layer on one
chunk, and the memory of the worst (layer, pass, batch), from the batch counts of :mod:`.dedup`.

Notation as :mod:`simulator.strategies.hongtu`; d_l -> ``widths[l]`` (total width of h^l; GAT hidden layers
concatenate their heads), i = d_l and o = d_{l+1} for layer l; a chunk's block is (|N_ij| sources, |V_ij|
destinations, |E_ij| edges).

Intermediate-data policy by model type (brief §1.4; HongTu §4.2 chooses per model, not per tensor):

* GCN, recomputation-caching hybrid: the forward aggregates first (a^l = sum_u d_uv h^l_u, Eq. 2), then UPDATE
  (a^l W + b, ReLU, dropout); a^l is the checkpoint written to the host. The backward reloads a^l and
  recomputes UPDATE only, then back-propagates through it and, for l >= 1, through the aggregation
  (transposed SpMM over E_ij). Kernels follow the executor's order (aggregate, then the dense transform),
  priced with :mod:`simulator.workload.model_cost`'s conventions: an aggregation is one add per edge and
  feature reading a source row and an int64 index per edge; a GEMM 2 rows i o FLOPs (+ the bias), its backward
  twice that with the input gradient and once without (Kaplan et al., arXiv:2001.08361, §2.1).
* GAT, pure recomputation: the forward runs DGL's GATConv; the backward re-runs it and back-propagates (the
  kernels of :func:`simulator.workload.model_cost.model_cost` for that layer on that block).

Layer 0 needs no input gradient (∇h^0 is not computed: brief §1.5 allows skipping it). The loss and its
gradient are computed on the GPU for the chunk's rows right after the last layer's forward (where the paper
computes the loss is not stated, brief §9), so ∇h^L goes to the host in place of h^L.

Memory of one GPU (brief §1.10, "memory check per GPU"; bytes, float32 rows): the model state; the merged
transition/neighbour buffer and its gradient buffer, allocated once (brief §1.2, §1.7) with the most rows any batch
holds, for the widest layer (the gradient buffer: the widest layer l >= 1); staging copies of the rows loaded from
the host and exchanged with peers in one batch; the chunk's inputs, outputs and intermediates (its source rows, its
output and float32 dropout mask; in the backward pass also ∇h^{l+1}, the partial gradients of its sources and the
output of every recomputed kernel, which autograd keeps); and the chunk's index structure (a CSR and its transpose,
the source slots, the destinations: int64, and float32 edge weights). Host, per machine: h^l, ∇h^l and (GCN) a^l of
the machine's vertices for every layer, the topology at :data:`EDGE_BYTES` per in-edge, and a process reserve per
worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gnnplan.simulator.hardware.formulas import compute_time_s
from gnnplan.simulator.hardware.model import CUDA_CONTEXT_BYTES, FLOAT_BYTES
from gnnplan.simulator.hardware.spec import ClusterSpec
from gnnplan.simulator.strategies.base import MemoryEstimate, memory_estimate
from gnnplan.simulator.strategies.hongtu.dedup import BatchCounts
from gnnplan.simulator.workload.model_cost import (
    INDEX_BYTES,
    Block,
    Kernel,
    layer_dims,
    layer_param_count,
    model_cost,
    model_state_bytes,
)
from gnnplan.simulator.workload.spec import ModelSpec

EDGE_BYTES = 12.0
"""Host bytes per in-edge of the topology: an 8-byte index and a 4-byte weight. Source: brief §2, "Memory
accounting" ([inferred]: the paper does not state it)."""


def layer_widths(model: ModelSpec, feature_dim: int, num_classes: int) -> list[int]:
    """d_0 .. d_L: the total width of h^l (heads concatenated), d_L = num_classes."""
    dims = layer_dims(model, feature_dim, num_classes)
    return [d.in_dim for d in dims] + [dims[-1].out_total]


def _aggregate(name: str, edges: float, dst: float, width: int) -> Kernel:
    return Kernel(name, edges * width, FLOAT_BYTES * (edges + dst) * width + INDEX_BYTES * edges, sparse=True,
                  out_elems=dst * width)


def _elementwise(name: str, n: float, flops_per: float = 1.0, backward: bool = False) -> Kernel:
    return Kernel(name, n * flops_per, 2.0 * FLOAT_BYTES * n, out_elems=n, backward=backward)


def _gemm(name: str, rows: float, i: int, o: int, factor: float = 1.0, backward: bool = False) -> Kernel:
    flops = 2.0 * rows * i * o + rows * o
    return Kernel(name, factor * flops, factor * FLOAT_BYTES * (rows * i + i * o + rows * o + o), gemm=True,
                  out_elems=rows * o, backward=backward)


def gcn_kernels(layer: int, i: int, o: int, b: Block, last: bool) -> tuple[list[Kernel], list[Kernel]]:
    """(forward, backward) kernels of GCN layer ``layer`` on one chunk (hybrid policy, module docstring). The
    gradients of the update and of the loss are autograd's (``Kernel.backward``); the aggregation's gradient is
    the executor's own call on the transposed matrix (``ops.gcn_input_grad``), dispatched like a forward kernel."""
    tag = f"gcn{layer}"
    v, e = b.num_dst, b.num_edges
    update = [_gemm(f"{tag}.weight", v, i, o)]
    tail = [_elementwise(f"{tag}.relu", v * o), _elementwise(f"{tag}.dropout", v * o, 2.0)] if not last else \
        [_elementwise("loss.cross_entropy", v * o, 4.0), _elementwise("loss.grad", v * o, backward=True)]
    forward = [_aggregate(f"{tag}.aggregate", e, v, i)] + update + tail
    grads = [_gemm(f"{tag}.weight.grad", v, i, o, 2.0 if layer else 1.0, backward=True)]
    if not last:
        grads = [_elementwise(f"{tag}.dropout.grad", v * o, backward=True),
                 _elementwise(f"{tag}.relu.grad", v * o, backward=True)] + grads
    if layer:
        grads.append(_aggregate(f"{tag}.aggregate.grad", e, b.num_src, i))
    recompute = update + (tail if not last else [])
    return forward, recompute + grads


def gat_kernels(model: ModelSpec, feature_dim: int, num_classes: int, layer: int,
                b: Block) -> tuple[list[Kernel], list[Kernel]]:
    """(forward, backward) kernels of GAT layer ``layer`` on one chunk: the backward re-runs the forward (pure
    recomputation); the loss and its gradient belong to the last layer's forward."""
    blocks = [b if k == layer else Block(0.0, 0.0, 0.0) for k in range(model.num_layers)]
    cost = model_cost(model, feature_dim, num_classes, blocks)
    tag = f"gat{layer}."
    fwd = [k for k in cost.forward if k.name.startswith(tag)]
    loss = [k for k in (*cost.forward, *cost.backward) if k.name.startswith("loss.")] \
        if layer == model.num_layers - 1 else []
    return fwd + loss, fwd + [k for k in cost.backward if k.name.startswith(tag)]


def chunk_kernels(model: ModelSpec, widths: Sequence[int], feature_dim: int, num_classes: int, layer: int,
                  c: BatchCounts) -> tuple[list[Kernel], list[Kernel]]:
    """(forward, backward) kernels of layer ``layer`` on the chunk counted by ``c``."""
    block = Block(float(c.num_src), float(c.num_dst), float(c.num_edges))
    if model.arch == "gcn":
        return gcn_kernels(layer, widths[layer], widths[layer + 1], block, layer == model.num_layers - 1)
    return gat_kernels(model, feature_dim, num_classes, layer, block)


@dataclass(frozen=True)
class ChunkWork:
    """Uncontended compute of one chunk at one layer.

    Attributes:
        seconds: (forward, backward).
        flops: (forward, backward).
        kernels: (forward kernels, backward kernels).
    """

    seconds: tuple[float, float]
    flops: tuple[float, float]
    kernels: tuple[tuple[Kernel, ...], tuple[Kernel, ...]]


def chunk_work(cluster: ClusterSpec, model: ModelSpec, widths: Sequence[int], feature_dim: int, num_classes: int,
               layer: int, c: BatchCounts) -> ChunkWork:
    """Price one chunk's layer with :func:`~simulator.hardware.formulas.compute_time_s`."""
    fwd, bwd = chunk_kernels(model, widths, feature_dim, num_classes, layer, c)
    eff = cluster.efficiency
    return ChunkWork((compute_time_s(fwd, cluster.gpu, eff.forward_fraction),
                      compute_time_s(bwd, cluster.gpu, eff.backward_fraction)),
                     (sum(k.flops for k in fwd), sum(k.flops for k in bwd)), (tuple(fwd), tuple(bwd)))


def optimizer_kernels(model: ModelSpec, feature_dim: int, num_classes: int) -> tuple[Kernel, ...]:
    """Adam's kernels over the (replicated) parameters."""
    blocks = [Block(0.0, 0.0, 0.0)] * model.num_layers
    return model_cost(model, feature_dim, num_classes, blocks).optimizer


def chunk_memory(model: ModelSpec, widths: Sequence[int], counts: list[list[BatchCounts]], rank: int, j: int,
                 layer: int, backward: bool, work: ChunkWork) -> dict[str, float]:
    """GPU bytes by part of worker ``rank`` in batch j of one layer pass (module docstring): every part the
    pass holds at some point, added up.

    Args:
        model: the model; widths: d_0 .. d_L; counts: ``counts[i][j]``.
        rank, j, layer, backward: where.
        work: the chunk's kernels at that layer.
    """
    c, i, o = counts[rank][j], widths[layer], widths[layer + 1]
    gat, last = model.arch == "gat", layer == model.num_layers - 1
    fetch, grads = not backward or gat, backward and layer > 0
    served = sum(row[j].pull_rows[rank] for row in counts)
    pushed_here = sum(row[j].push_rows[rank] for row in counts)
    cap = max(x.buffer_rows for x in counts[rank])
    staging = fetch * (c.load_rows + sum(c.pull_rows) + served) + grads * (sum(c.push_rows) + pushed_here
                                                                            + c.flush_rows)
    sources = c.num_src if gat else c.num_dst
    chunk = sources * i + c.num_dst * o * (1 + (not last))
    if backward:
        recomputed = [k for k in work.kernels[1] if not k.name.endswith(".grad")]
        chunk += c.num_dst * o + grads * c.num_src * i + sum(k.out_elems for k in recomputed)
    indices = (2 * c.num_edges + 2 * c.num_src + 2 * c.num_dst + 2 + c.load_rows + sum(c.pull_rows) + served
               + sum(c.push_rows) + pushed_here + 2 * c.flush_rows + c.buffer_rows + gat * 2 * c.num_edges)
    return {"vertex buffer": FLOAT_BYTES * cap * max(widths[:-1]),
            "gradient buffer": FLOAT_BYTES * cap * max(widths[1:-1], default=0),
            "transfer staging": FLOAT_BYTES * staging * i,
            "chunk inputs, outputs and intermediates": FLOAT_BYTES * chunk,
            "chunk index structure": INDEX_BYTES * indices + FLOAT_BYTES * 2 * c.num_edges}


def host_parts(model: ModelSpec, widths: Sequence[int], owned_vertices: int, owned_edges: int, workers: int,
               process_bytes: float) -> dict[str, float]:
    """Host bytes by part of one machine holding ``owned_vertices`` rows of every layer (module docstring)."""
    layers = model.num_layers
    checkpoints = sum(widths[:layers]) if model.arch == "gcn" else 0
    return {"vertex data h^l and gradients": FLOAT_BYTES * owned_vertices * (sum(widths[:layers]) + sum(widths[1:])),
            "checkpoints a^l": FLOAT_BYTES * owned_vertices * checkpoints,
            "topology": EDGE_BYTES * owned_edges, "worker processes": process_bytes * workers}


def memory_model(cluster: ClusterSpec, model: ModelSpec, widths: Sequence[int], counts: list[list[BatchCounts]],
                 works: list[list[list[ChunkWork]]], host: dict[str, float]) -> tuple[MemoryEstimate, str]:
    """Peak GPU memory over every worker, layer, pass and batch, and the largest machine's host memory.

    Args:
        cluster: the hardware; model: the model; widths: d_0 .. d_L.
        counts: ``counts[i][j]``; works: ``works[i][j][l]``; host: the host parts of the largest machine.

    Returns:
        (the estimate, where the GPU peak is: ``"worker i, batch j, layer l forward"``).
    """
    num_params = sum(layer_param_count(model.arch, d) for d in layer_dims(model, widths[0], widths[-1]))
    state = {"framework reserve": 0.0 if cluster.gpu.is_host_cpu else CUDA_CONTEXT_BYTES,
             "parameters, gradients and Adam state": model_state_bytes(num_params)}
    best: dict[str, float] = {}
    where = ""
    for rank, row in enumerate(works):
        for j, per_layer in enumerate(row):
            for layer, work in enumerate(per_layer):
                for backward in (False, True):
                    parts = chunk_memory(model, widths, counts, rank, j, layer, backward, work)
                    if not best or sum(parts.values()) > sum(best.values()):
                        best = parts
                        where = f"worker {rank}, batch {j}, layer {layer} {'backward' if backward else 'forward'}"
    return memory_estimate(cluster, {**state, **best}, host), where
