"""Memory of the evaluation that follows every training epoch, for the strategies whose executors evaluate by
layer-wise inference (dp, hopgnn, gsplit: executor/evaluate.py, as DGL's and DistDGL's GraphSAGE examples'
``SAGE.inference``), and a configuration's peak over training and evaluation.

Layer l (input width d_l, output width d_{l+1}) of one worker's evaluation holds, besides what stays from training
(``kept``: the framework, the model state, a feature cache, the graph structure, the feature partition, the
processes; each strategy names its own):

* on the device, one block of :func:`~simulator.workload.inference.inference_stats` (the rank with the most
  in-edges; its mean chunk): its input rows (sources x d_l floats), its structure (int64 ids, as a training
  block's: two per edge and one per source) and the layer's intermediate outputs (the forward kernels' outputs of
  :func:`~simulator.workload.model_cost.layer_kernels`, all counted: an upper bound of what is live at once);
* in host memory, the rank's rows of layer l (the previous layer's output, its vertices x d_l, from layer 1 on)
  and of layer l+1 twice (the chunks' outputs and their ``torch.cat``), and while a block's input rows are pulled
  from other ranks (layer 0 across machines, later layers across workers) :data:`PULL_BUFFERS` more copies of them.

On a CPU-only cluster the device parts are host memory too (:func:`.base.memory_estimate`). A machine's host holds
``gpus_per_machine`` such workers, each priced as the busiest rank [inferred: an upper bound when the machine's
ranks differ]. A configuration's peak is, per memory, the larger of its training and its evaluation peaks, and it
fits only when both do (:func:`peak_of_phases`). The full-graph and pre-propagation strategies (neutronstar, hongtu,
ppgnn) evaluate with their training forward pass without gradients, which holds no more than training does: they
have no evaluation term (measured: Cora neutronstar's evaluation peak equals its training peak, bench_memory.py,
2026-11-28).
"""

from __future__ import annotations

from collections.abc import Mapping

from gnnplan.simulator.strategies.base import MemoryEstimate, SimContext, memory_estimate
from gnnplan.simulator.units import FLOAT_BYTES, INDEX_BYTES
from gnnplan.simulator.workload.inference import InferenceStats, pulled_fraction
from gnnplan.simulator.workload.model_cost import Block, layer_dims, layer_kernels

__all__ = ["KEPT_GPU_PARTS", "PULL_BUFFERS", "inference_memory", "peak_of_phases", "with_evaluation"]

PULL_BUFFERS = 2
"""Copies of a block's input rows, beyond the block input itself, in host memory while they are pulled
(executor/features.py ``RowStore.pull``): the rows received from the other ranks (``all_to_all_single``'s output,
then reordered into the block input) and the rows this rank serves to them [inferred: as many, by symmetry of the
exchange]."""
KEPT_GPU_PARTS = ("framework reserve", "parameters, gradients and Adam state", "feature cache")
"""The device parts of a mini-batch strategy's training that stay through the evaluation (the batch's inputs,
activations and blocks are freed)."""


def inference_memory(ctx: SimContext, gpu_kept: Mapping[str, float], host_kept: Mapping[str, float],
                     stats: InferenceStats) -> MemoryEstimate:
    """The evaluation's peak memory per GPU and per machine (module docstring), the larger layer's per memory.

    Args:
        ctx: the simulation's inputs (cluster shape, model widths).
        gpu_kept, host_kept: bytes by part that stay from training through the evaluation, per GPU and per machine.
        stats: the inference block on the executor's partition of the vertices over the machines
            (:func:`simulator.workload.inference.inference_stats`).
    """
    cl, wl, sm = ctx.cluster, ctx.workload, ctx.summary
    block = Block(stats.src_vertices, stats.dst_vertices, stats.edges)
    layers = []
    for layer, d in enumerate(layer_dims(wl.model, sm.feature_dim, sm.num_classes)):
        input_bytes = stats.src_vertices * d.in_dim * FLOAT_BYTES
        outputs_bytes = FLOAT_BYTES * sum(k.out_elems for k in layer_kernels(wl.model.arch, d, block, "inference"))
        gpu = {**gpu_kept, "inference block inputs": input_bytes,
               "inference block structure": INDEX_BYTES * (2.0 * stats.edges + stats.src_vertices),
               "inference layer outputs": outputs_bytes}
        pulled = pulled_fraction(stats, layer, cl.num_machines, cl.num_gpus) is not None
        rows_bytes = stats.rank_vertices * FLOAT_BYTES * ((d.in_dim if layer else 0) + 2 * d.out_total)
        buffers_bytes = PULL_BUFFERS * input_bytes if pulled else 0.0
        host = {**host_kept, "inference rows and pull buffers": cl.gpus_per_machine * (rows_bytes + buffers_bytes)}
        layers.append(memory_estimate(cl, gpu, host, context=f"evaluation (layer {layer}): "))
    return _larger(layers)


def with_evaluation(ctx: SimContext, gpu: dict[str, float], host: dict[str, float], stats: InferenceStats,
                    training_only: str) -> MemoryEstimate:
    """A mini-batch strategy's peak over training (``gpu``, ``host``: bytes by part, per GPU and per machine) and
    the evaluation after it, which keeps the training parts named in :data:`KEPT_GPU_PARTS` and every host part
    but ``training_only`` (the training batches' buffers) and adds its own (:func:`inference_memory`)."""
    kept_gpu = {k: v for k, v in gpu.items() if k in KEPT_GPU_PARTS}
    kept_host = {k: v for k, v in host.items() if k != training_only}
    return peak_of_phases(memory_estimate(ctx.cluster, gpu, host), inference_memory(ctx, kept_gpu, kept_host, stats))


def peak_of_phases(training: MemoryEstimate, evaluation: MemoryEstimate) -> MemoryEstimate:
    """A configuration's peak: per memory the parts of the larger phase; feasible when both phases fit; the
    phases' peaks in ``phases`` (``simulate --json``'s ``peak_memory_phases``).

    Args:
        training, evaluation: the two phases' estimates (bytes by part, per GPU and per machine).
    """
    out = _larger([training, evaluation])
    phases = {"training": training.peak_memory_bytes, "evaluation": evaluation.peak_memory_bytes}
    return MemoryEstimate(out.gpu_parts, out.host_parts, out.feasible, out.reason, phases)


def _larger(estimates: list[MemoryEstimate]) -> MemoryEstimate:
    """Per memory the parts of the estimate that needs the most; feasible when every one is; their reasons."""
    gpu = max(estimates, key=lambda e: e.gpu_bytes)
    host = max(estimates, key=lambda e: e.host_bytes)
    reasons = list(dict.fromkeys(e.reason for e in estimates if not e.feasible))
    return MemoryEstimate(dict(gpu.gpu_parts), dict(host.host_parts), not reasons, "; ".join(reasons))
