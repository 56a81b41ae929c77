"""What one ``neutronstar`` worker does per epoch, and its memory: from the dependency split to seconds and bytes.

Notation as :mod:`simulator.strategies.neutronstar`. Layer l of worker i computes two blocks of the same DGL
layer (:mod:`simulator.workload.model_cost` prices both):

* the *master* block: destinations V_i, their in-edges E_i, sources V_i plus every remote in-neighbour (each
  either cached or received) — the same at every layer;
* the *replica* block (l < L): destinations = the remote vertices whose h^(l) worker i recomputes (the cached
  subtrees; all of them under DepCache), their in-edges, sources = those vertices and their in-neighbours.

Layer 1 (index 0) needs no input gradient (raw features), as the executor's autograd. The loss kernels are
attributed to layer L's master block; the loss is priced over all owned vertices (the executor evaluates the
cross-entropy of the owned training vertices only: a negligible difference).

Memory per worker (bytes): framework reserve (GPU only), parameters + gradients + Adam state, the owned and
replicated raw features, received rows and their gradients, kernel outputs kept for backward (both blocks of
every layer, :attr:`ModelCost.activation_bytes`), the gathered block inputs (one index_select copy of every
block's source rows per layer), and block structure. Host per machine: a process reserve per worker plus its
partition (owned features and labels, in-edges as int64 pairs); on a CPU-only cluster the worker's "GPU" memory
is host memory too (:func:`simulator.strategies.base.memory_estimate`). The cached-dependency size checked against
``cache_budget_bytes`` is the one Algorithm 4
counts (:mod:`simulator.strategies.neutronstar.split`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gnnplan.simulator.hardware.formulas import compute_time_s
from gnnplan.simulator.hardware.model import CUDA_CONTEXT_BYTES, FLOAT_BYTES
from gnnplan.simulator.hardware.spec import ClusterSpec
from gnnplan.simulator.strategies.base import MemoryEstimate, memory_estimate
from gnnplan.simulator.strategies.neutronstar.dependencies import WorkerCounts
from gnnplan.simulator.strategies.neutronstar.split import EDGE_BYTES, layer_widths
from gnnplan.simulator.wording import bytes_text
from gnnplan.simulator.workload.model_cost import INDEX_BYTES, Block, Kernel, ModelCost, model_cost, model_state_bytes
from gnnplan.simulator.workload.spec import ModelSpec


@dataclass(frozen=True)
class LayerWork:
    """One worker's layer l: uncontended compute seconds and FLOPs of each block, and the rows it receives.

    Attributes:
        seconds: (master forward, master backward, replica forward, replica backward).
        flops: the same order.
        received_rows: per owner j, rows of h^(l-1) received from j in the forward pass (and gradients sent back
            to j in the backward pass when l >= 2).
        row_bytes: bytes of one row of h^(l-1).
        x_rows: rows of ``X_l`` (the owned vertices and the replicas of layer l - 1), which layer l >= 2 copies
            with the received rows into its input table ``T_l``.
        input_bytes: (master, replica) block's source rows gathered from the table before its forward kernels
            (bytes; 0 for a block without work).
    """

    seconds: tuple[float, float, float, float]
    flops: tuple[float, float, float, float]
    received_rows: tuple[int, ...]
    row_bytes: float
    x_rows: int
    input_bytes: tuple[float, float]


@dataclass(frozen=True)
class WorkerWork:
    """One worker's epoch."""

    layers: tuple[LayerWork, ...]
    optimizer_s: float
    optimizer_flops: float
    gradient_bytes: float
    master: ModelCost
    replica: ModelCost


def chains(counts: WorkerCounts, num_layers: int) -> tuple[list[Block], list[Block]]:
    """(master blocks, replica blocks), one per layer, input side first."""
    master = [Block(counts.num_owned + counts.num_remote, counts.num_owned, counts.num_owned_edges)] * num_layers
    replica = [Block(counts.replica_src[i], counts.num_replicated[i + 1] if i + 1 < num_layers else 0,
                     counts.replica_edges[i]) for i in range(num_layers)]
    return master, replica


def layer_kernels(cost: ModelCost, arch: str, layer: int, last: bool) -> tuple[list[Kernel], list[Kernel]]:
    """(forward, backward) kernels of layer index ``layer`` (+ the loss's when ``last``): one compute span each."""
    tags = (f"{arch}{layer}.",) + (("loss.",) if last else ())
    return [k for k in cost.forward if k.name.startswith(tags)], [k for k in cost.backward if k.name.startswith(tags)]


def _split(cost: ModelCost, arch: str, layer: int, last: bool, cluster: ClusterSpec) -> tuple[float, ...]:
    """(forward s, backward s, forward FLOPs, backward FLOPs) of layer index ``layer``'s kernels (+ the loss)."""
    fwd, bwd = layer_kernels(cost, arch, layer, last)
    eff = cluster.efficiency
    return (compute_time_s(fwd, cluster.gpu, eff.forward_fraction),
            compute_time_s(bwd, cluster.gpu, eff.backward_fraction),
            sum(k.flops for k in fwd), sum(k.flops for k in bwd))


def worker_work(cluster: ClusterSpec, model: ModelSpec, feature_dim: int, num_classes: int,
                counts: WorkerCounts) -> WorkerWork:
    """Price one worker's epoch (module docstring)."""
    num_layers = model.num_layers
    widths = layer_widths(model, feature_dim, num_classes)
    master_blocks, replica_blocks = chains(counts, num_layers)
    master = model_cost(model, feature_dim, num_classes, master_blocks)
    replica = model_cost(model, feature_dim, num_classes, replica_blocks)
    layers = []
    for i in range(num_layers):
        last = i == num_layers - 1
        mf, mb, mff, mbf = _split(master, model.arch, i, last, cluster)
        # a layer without replicas runs no replica block (the executor builds none: blocks.py), so it pays no
        # kernel's fixed cost either
        rf, rb, rff, rbf = _split(replica, model.arch, i, False, cluster) if replica_blocks[i].num_dst else (0.0,) * 4
        row = float(FLOAT_BYTES * widths[i])
        inputs = (master_blocks[i].num_src * row, replica_blocks[i].num_src * row if rf > 0 else 0.0)
        layers.append(LayerWork((mf, mb, rf, rb), (mff, mbf, rff, rbf), counts.received[i], row,
                                counts.num_owned + counts.num_replicated[i], inputs))
    fraction = getattr(cluster.efficiency, "optimizer_fraction", 1.0)
    return WorkerWork(tuple(layers), compute_time_s(master.optimizer, cluster.gpu, fraction),
                      sum(k.flops for k in master.optimizer), float(FLOAT_BYTES * master.num_params), master, replica)


def cached_bytes(counts: WorkerCounts, widths: list[int]) -> float:
    """Bytes of the cached dependencies (replicated rows, replicas' in-edges), as Algorithm 4 counts them."""
    rows = sum(n * FLOAT_BYTES * widths[k] for k, n in enumerate(counts.num_replicated))
    return float(rows + EDGE_BYTES * sum(counts.replica_edges))


def worker_memory(cluster: ClusterSpec, widths: list[int], counts: WorkerCounts,
                  work: WorkerWork) -> tuple[dict[str, float], dict[str, float]]:
    """(GPU parts, host parts) of one worker (module docstring)."""
    num_layers = len(work.layers)
    received = sum(sum(layer.received_rows) * layer.row_bytes * (2 if i else 1) for i, layer in enumerate(work.layers))
    master_blocks, replica_blocks = chains(counts, num_layers)
    inputs = sum((m.num_src + r.num_src) * FLOAT_BYTES * widths[i]
                 for i, (m, r) in enumerate(zip(master_blocks, replica_blocks)))
    gpu = {"framework reserve": 0.0 if cluster.gpu.is_host_cpu else CUDA_CONTEXT_BYTES,
           "parameters, gradients and Adam state": model_state_bytes(work.master.num_params),
           "owned and replicated features": (counts.num_owned + counts.num_replicated[0]) * FLOAT_BYTES * widths[0],
           "received rows and gradients": received,
           "activations": work.master.activation_bytes + work.replica.activation_bytes,
           "block inputs": inputs, "blocks": work.master.block_bytes + work.replica.block_bytes}
    host = {"worker process": cluster.host.process_bytes,
            "partition (features, labels, in-edges)": counts.num_owned * (FLOAT_BYTES * widths[0] + INDEX_BYTES)
            + counts.num_owned_edges * 2 * INDEX_BYTES}
    return gpu, host


def memory_model(cluster: ClusterSpec, widths: list[int], counts: list[WorkerCounts], works: list[WorkerWork],
                 budget_bytes: float | None, mode: str) -> tuple[MemoryEstimate, float]:
    """Peak memory of the most loaded worker and machine (:func:`simulator.strategies.base.memory_estimate`) and
    the largest worker's cached-dependency bytes; also infeasible when DepCache's cached dependencies exceed
    ``budget_bytes`` (Hybrid stays within it by construction)."""
    per = [worker_memory(cluster, widths, c, w) for c, w in zip(counts, works)]
    gpu = max((p[0] for p in per), key=lambda parts: sum(parts.values()))
    worst_host = max((p[1] for p in per), key=lambda parts: sum(parts.values()))
    estimate = memory_estimate(cluster, gpu, {k: v * cluster.gpus_per_machine for k, v in worst_host.items()})
    cache = max(cached_bytes(c, widths) for c in counts)
    if mode == "depcache" and budget_bytes is not None and cache > budget_bytes:
        over = f"cached dependencies need {bytes_text(cache)}, over cache_budget_bytes {bytes_text(budget_bytes)}"
        estimate = replace(estimate, feasible=False, reason="; ".join(r for r in (estimate.reason, over) if r))
    return estimate, cache
