"""Time of the evaluation that follows every training epoch, for the strategies whose executors evaluate by
layer-wise inference (dp, hopgnn, gsplit: executor/evaluate.py, DGL's and DistDGL's ``SAGE.inference``): the
``evaluation_time_s`` of ``simulate --json``, not part of ``epoch_time_s`` (``run --json`` measures both apart).

The rank with the most in-edges (:func:`~simulator.workload.inference.inference_stats`) runs, for each of the L
layers, ``ceil(rank vertices / chunk destinations)`` chunks (every rank runs as many: collectives inside), each one
step after step as the executor's ``Evaluator._chunk`` does, priced by the pricing layer
(:mod:`simulator.hardware.pricing`):

1. sample the chunk's block with all in-neighbours on one host core (:func:`~.pricing.full_sampling_s`, one call,
   at the full-neighbour rate: ``host.sampling_edges_per_s_per_core`` times ``host.full_neighbour_sampling_ratio``);
2. load its input rows (width d_l): the sources another machine owns (layer 0: feature rows) or another rank
   computed (later layers: the previous layer's rows) are pulled over the network in three all-to-all calls
   (:func:`~.pricing.feature_fetch_s`, the executor's ``RowStore.pull``; :data:`.base.FETCH_COLLECTIVES`;
   :func:`~simulator.workload.inference.pulled_fraction`), the rest gathered from host memory, then
   all copied to the device (:func:`~.pricing.feature_load_s`);
3. the layer's forward kernels on the block (:func:`~simulator.workload.model_cost.inference_layer_kernels`, at
   :func:`~.pricing.inference_fraction`: the forward efficiency times ``efficiency.inference_ratio``,
   :func:`~simulator.hardware.formulas.compute_time_s`), and the output rows copied back to host memory
   (:func:`~.pricing.gpu_to_host_s`; on a CPU-only cluster, where ``.cpu()`` copies nothing, it stands for the
   copy of every chunk's rows into the layer's row table, the executor's ``torch.cat``, at the same rate).

The executor traces each step (executor/evaluate.py: ``eval_sample``, ``eval_fetch``, ``eval_load``,
``eval_forward``, on a GPU ``eval_to_host``); calibration fits the two ratios to the ``eval_sample`` and
``eval_forward`` spans (:func:`~.calibration_rules.evaluation_rules`, each layer's spans with that layer's
kernels, :func:`evaluation_profiles`) and reports the evaluation of held-out epochs
(:mod:`simulator.calibrate_holdout`). ``gnnplan probe`` measures the sampling ratio
(:func:`executor.probe_host.sampling_rates`: 2.95 on the 2-core development machine, 2026-11-29).

[inferred: no step overlaps another, as in the executor, and the rows another rank of the same machine computed
are priced as network pulls (gloo moves them through the loopback here; NCCL over NVLink or PCIe on a GPU
machine would be faster).] Full-graph and pre-propagation strategies evaluate with their training forward pass;
they do not report an evaluation time.

Accuracy: benchmarks/bench_evaluation.py (see its docstring for the figures). The ratios are single numbers:
fitted on the evaluations of large blocks (rmat100k's ~0.9 M edges per chunk) they predict other large ones, but
they overstate the gain for blocks of a training batch's size (Cora's, CiteSeer's ~5 k edges per chunk), whose
evaluation is dominated by the loads and the ranks' waits at each chunk's pull, which are priced at training's
rates.
"""

from __future__ import annotations

import math

from gnnplan.simulator.hardware import pricing
from gnnplan.simulator.hardware.formulas import compute_time_s
from gnnplan.simulator.strategies.base import (
    FETCH_COLLECTIVES,
    FETCH_REQUEST_MESSAGES,
    PhaseProfile,
    SimContext,
    kernel_profile,
)
from gnnplan.simulator.trace import EVALUATION_PHASES
from gnnplan.simulator.units import FLOAT_BYTES
from gnnplan.simulator.workload import inference
from gnnplan.simulator.workload.inference import InferenceStats, pulled_fraction
from gnnplan.simulator.workload.model_cost import Block, Kernel, LayerDims, inference_layer_kernels, layer_dims

__all__ = ["EVALUATION_COMPUTE_PHASE", "evaluation_block", "evaluation_profiles", "evaluation_time_s",
           "layer_profile_key"]

EVALUATION_COMPUTE_PHASE = EVALUATION_PHASES[3]
"""``eval_forward``: the executor's span of one chunk's layer (executor/evaluate.py), a phase of the compute
profile."""


def evaluation_block(ctx: SimContext, partitioner: str) -> InferenceStats:
    """The evaluation's inference block on ``partitioner``'s partition of the vertices over the cluster's machines
    (:func:`simulator.workload.inference.inference_stats`, cached; the partitioner seed is the workload's).

    Raises:
        SpecError: a partitioner out of range, or the dataset cannot be loaded.
    """
    cl = ctx.cluster
    return inference.inference_stats(ctx.workload.dataset, cl.num_machines, cl.gpus_per_machine, partitioner,
                                     seed=ctx.seed)


def _layer_kernels(ctx: SimContext, stats: InferenceStats, dims: list[LayerDims]) -> list[list[Kernel]]:
    """Every layer's forward kernels on the mean chunk's block (:func:`~simulator.workload.model_cost.
    inference_layer_kernels`: the layer's and, after a hidden layer, its activation; tag ``inference``), the
    layers' widths ``dims`` (:func:`~simulator.workload.model_cost.layer_dims`)."""
    block = Block(stats.src_vertices, stats.dst_vertices, stats.edges)
    return [inference_layer_kernels(ctx.workload.model.arch, d, block, i == len(dims) - 1) for i, d in enumerate(dims)]


def _dims(ctx: SimContext) -> list[LayerDims]:
    """The model's layer widths on the dataset."""
    return layer_dims(ctx.workload.model, ctx.summary.feature_dim, ctx.summary.num_classes)


def layer_profile_key(layer: int) -> str:
    """The compute profile's key of the evaluation's layer ``layer`` (``eval_forward/<layer>``)."""
    return f"{EVALUATION_COMPUTE_PHASE}/{layer}"


def evaluation_profiles(ctx: SimContext, partitioner: str) -> dict[str, PhaseProfile]:
    """How an ``eval_forward`` span's time depends on the cluster (:class:`~.base.PhaseProfile`), for calibration:
    per layer (:func:`layer_profile_key`: an input layer is mostly dense products, a deeper one mostly its
    aggregation) and, under ``eval_forward``, the mean over the layers, on the inference block of
    ``partitioner``'s partition (:func:`evaluation_block`)."""
    kernels, gpu = _layer_kernels(ctx, evaluation_block(ctx, partitioner), _dims(ctx)), ctx.cluster.gpu
    return {EVALUATION_COMPUTE_PHASE: kernel_profile(kernels, gpu),
            **{layer_profile_key(i): kernel_profile([ks], gpu) for i, ks in enumerate(kernels)}}


def evaluation_time_s(ctx: SimContext, stats: InferenceStats) -> float:
    """Seconds of one evaluation (module docstring).

    Args:
        ctx: the simulation's inputs (cluster with its calibrated rates, model widths).
        stats: the inference block on the executor's partition of the vertices over the machines
            (:func:`simulator.workload.inference.inference_stats`).
    """
    cl, dims = ctx.cluster, _dims(ctx)
    chunks = max(1, math.ceil(stats.rank_vertices / max(stats.dst_vertices, 1.0)))
    kernels = _layer_kernels(ctx, stats, dims)
    sample_s = pricing.full_sampling_s(cl, stats.edges, num_calls=1.0)  # every layer samples the same block
    total_s = 0.0
    for layer, d in enumerate(dims):
        rows_bytes = stats.src_vertices * d.in_dim * FLOAT_BYTES
        share = pulled_fraction(stats, layer, cl.num_machines, cl.num_gpus)
        pulled = share or 0.0
        fetch_s = 0.0 if share is None else pricing.feature_fetch_s(
            cl, pulled * rows_bytes, FETCH_REQUEST_MESSAGES, cl.gpus_per_machine, FETCH_COLLECTIVES)
        load_s = pricing.feature_load_s(cl, (1.0 - pulled) * rows_bytes, pulled * rows_bytes, 0.0, fetch_s)
        compute_s = compute_time_s(kernels[layer], cl.gpu, pricing.inference_fraction(cl))
        back_s = pricing.gpu_to_host_s(cl, stats.dst_vertices * d.out_total * FLOAT_BYTES)
        total_s += chunks * (sample_s + load_s + compute_s + back_s)
    return total_s
