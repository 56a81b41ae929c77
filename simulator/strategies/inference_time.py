"""Time of the evaluation that follows every training epoch, for the strategies whose executors evaluate by
layer-wise inference (dp, hopgnn, gsplit: executor/evaluate.py, DGL's and DistDGL's ``SAGE.inference``): the
``evaluation_time_s`` of ``simulate --json``, not part of ``epoch_time_s`` (``run --json`` measures both apart).

The rank with the most in-edges (:func:`~simulator.workload.graphstats.inference_stats`) runs, for each of the L
layers, ``ceil(rank vertices / chunk destinations)`` chunks (every rank runs as many: collectives inside), each one
step after step as the executor's ``Evaluator._chunk`` does, priced by the pricing layer
(:mod:`simulator.hardware.pricing`):

1. sample the chunk's block with all in-neighbours on one host core (:func:`~.pricing.sampling_s`, one call);
2. load its input rows (width d_l): the sources another machine owns (layer 0: feature rows) or another rank
   computed (later layers: the previous layer's rows) are pulled over the network in three all-to-all calls
   (:func:`~.pricing.feature_fetch_s`, the executor's ``RowStore.pull``), the rest gathered from host memory, then
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
from gnnplan.simulator.strategies.base import FETCH_REQUEST_MESSAGES, SimContext
from gnnplan.simulator.units import FLOAT_BYTES
from gnnplan.simulator.workload import graphstats
from gnnplan.simulator.workload.model_cost import Block, layer_dims, layer_kernels

__all__ = ["PULL_COLLECTIVES", "evaluation_time_s"]

PULL_COLLECTIVES = 3
"""``all_to_all_single`` calls of one pull (executor/features.py ``RowStore.pull``: counts, ids, rows)."""


def evaluation_time_s(ctx: SimContext, partitioner: str) -> float:
    """Seconds of one evaluation (module docstring) on the machine partition ``partitioner``.

    Raises:
        SpecError: the inference statistics cannot be measured (the dataset cannot be loaded).
    """
    cl, wl, sm = ctx.cluster, ctx.workload, ctx.summary
    inf = graphstats.inference_stats(wl.dataset, cl.num_machines, cl.gpus_per_machine, partitioner, seed=ctx.seed)
    chunks = max(1, math.ceil(inf.rank_vertices / max(inf.dst_vertices, 1.0)))
    block = Block(inf.src_vertices, inf.dst_vertices, inf.edges)
    total = 0.0
    for layer, d in enumerate(layer_dims(wl.model, sm.feature_dim, sm.num_classes)):
        rows = inf.src_vertices * d.in_dim * FLOAT_BYTES
        pulled = cl.num_machines > 1 if layer == 0 else cl.num_gpus > 1
        share = (inf.remote_fraction if layer == 0 else inf.other_rank_fraction) if pulled else 0.0
        fetch = pricing.feature_fetch_s(cl, share * rows, FETCH_REQUEST_MESSAGES, cl.gpus_per_machine,
                                        PULL_COLLECTIVES) if pulled else 0.0
        load = pricing.feature_load_s(cl, (1.0 - share) * rows, share * rows, 0.0, fetch)
        compute = compute_time_s(layer_kernels(wl.model.arch, d, block, "inference"), cl.gpu,
                                 cl.efficiency.forward_fraction)
        back = pricing.gpu_to_host_s(cl, inf.dst_vertices * d.out_total * FLOAT_BYTES)
        total += chunks * (pricing.sampling_s(cl, inf.edges, num_calls=1.0) + load + compute + back)
    return total
