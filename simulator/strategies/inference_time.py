"""Time of the evaluation that follows every training epoch, for the strategies whose executors evaluate by
layer-wise inference (dp, hopgnn, gsplit: executor/evaluate.py, DGL's and DistDGL's ``SAGE.inference``): the
``evaluation_time_s`` of ``simulate --json``, not part of ``epoch_time_s`` (``run --json`` measures both apart).

The rank with the most in-edges (:func:`~simulator.workload.inference.inference_stats`) runs, for each of the L
layers, ``ceil(rank vertices / chunk destinations)`` chunks (every rank runs as many: collectives inside), each one
step after step as the executor's ``Evaluator._chunk`` does, priced by the pricing layer
(:mod:`simulator.hardware.pricing`):

1. sample the chunk's block with all in-neighbours on one host core (:func:`~.pricing.sampling_s`, one call);
2. load its input rows (width d_l): the sources another machine owns (layer 0: feature rows) or another rank
   computed (later layers: the previous layer's rows) are pulled over the network in three all-to-all calls
   (:func:`~.pricing.feature_fetch_s`, the executor's ``RowStore.pull``; :data:`.base.FETCH_COLLECTIVES`;
   :func:`~simulator.workload.inference.pulled_fraction`), the rest gathered from host memory, then
   all copied to the device (:func:`~.pricing.feature_load_s`);
3. the layer's forward kernels on the block (:func:`~simulator.workload.model_cost.layer_kernels`, at the
   calibrated forward efficiency, :func:`~simulator.hardware.formulas.compute_time_s`), and the output rows copied
   back to host memory (:func:`~.pricing.gpu_to_host_s`).

[inferred: no step overlaps another, as in the executor, and the rows another rank of the same machine computed
are priced as network pulls (gloo moves them through the loopback here; NCCL over NVLink or PCIe on a GPU
machine would be faster).] Full-graph and pre-propagation strategies evaluate with their training forward pass;
they do not report an evaluation time.

Accuracy (benchmarks/bench_evaluation.py, 2026-11-28, 2 workers, cluster calibrated on the other configurations'
traces, whose training spans alone are fitted): Cora and CiteSeer with dp, hopgnn and gsplit -35% to +4% on the
bundled ``local`` preset (-22% to -1% on a freshly probed one); rmat100k dp +186% (+118%). The rates come from
small training batches: per edge, DGL's sampler and aggregation ran ~3x faster on a 16384-vertex full-neighbour
block of rmat100k (sampling: 36 M edges/s on one call, against 11-19 M/s in the presets), so on large graphs this
estimate is high, an upper bound rather than a forecast.
"""

from __future__ import annotations

import math

from gnnplan.simulator.hardware import pricing
from gnnplan.simulator.hardware.formulas import compute_time_s
from gnnplan.simulator.strategies.base import FETCH_COLLECTIVES, FETCH_REQUEST_MESSAGES, SimContext
from gnnplan.simulator.units import FLOAT_BYTES
from gnnplan.simulator.workload.inference import InferenceStats, pulled_fraction
from gnnplan.simulator.workload.model_cost import Block, layer_dims, layer_kernels

__all__ = ["evaluation_time_s"]


def evaluation_time_s(ctx: SimContext, stats: InferenceStats) -> float:
    """Seconds of one evaluation (module docstring).

    Args:
        ctx: the simulation's inputs (cluster with its calibrated rates, model widths).
        stats: the inference block on the executor's partition of the vertices over the machines
            (:func:`simulator.workload.inference.inference_stats`).
    """
    cl, wl, sm = ctx.cluster, ctx.workload, ctx.summary
    chunks = max(1, math.ceil(stats.rank_vertices / max(stats.dst_vertices, 1.0)))
    block = Block(stats.src_vertices, stats.dst_vertices, stats.edges)
    total_s = 0.0
    for layer, d in enumerate(layer_dims(wl.model, sm.feature_dim, sm.num_classes)):
        rows_bytes = stats.src_vertices * d.in_dim * FLOAT_BYTES
        share = pulled_fraction(stats, layer, cl.num_machines, cl.num_gpus)
        pulled = share or 0.0
        fetch_s = 0.0 if share is None else pricing.feature_fetch_s(
            cl, pulled * rows_bytes, FETCH_REQUEST_MESSAGES, cl.gpus_per_machine, FETCH_COLLECTIVES)
        load_s = pricing.feature_load_s(cl, (1.0 - pulled) * rows_bytes, pulled * rows_bytes, 0.0, fetch_s)
        compute_s = compute_time_s(layer_kernels(wl.model.arch, d, block, "inference"), cl.gpu,
                                   cl.efficiency.forward_fraction)
        back_s = pricing.gpu_to_host_s(cl, stats.dst_vertices * d.out_total * FLOAT_BYTES)
        total_s += chunks * (pricing.sampling_s(cl, stats.edges, num_calls=1.0) + load_s + compute_s + back_s)
    return total_s
