"""``gnnplan probe``'s per-call fixed costs of the sampling and message-passing libraries, which no per-edge rate
or per-kernel launch cost covers (cluster fields ``host.sampler_call_s`` and ``gpu.graph_op_overhead_s``):

* ``host.sampler_call_s``: one call of DGL's neighbour sampler per layer (``sample_neighbors`` + ``to_block``:
  Python dispatch, frontier and block construction). The executor's own :class:`executor.sampling.TimedSampler`
  samples batches of :data:`CALL_SEEDS` seeds of the probe's R-MAT graph on one thread, so few edges that their
  time at the measured ``host.sampling_edges_per_s_per_core`` is a small correction: per call, the median batch
  time minus its edges at that rate, divided by the layers.
* ``gpu.graph_op_overhead_s``: DGL's ``SAGEConv(8, 4, "mean")`` forward and backward on a tiny block (its
  aggregation is one ``update_all``, its gradient one more DGL call), each pass followed by a control pass: the
  same layer's dense kernels in plain torch (its weights; ``in > out``, so the projection of the sources first),
  with the aggregation a dense (destinations x sources) matmul, one kernel as the aggregation is. The median of
  the paired differences, divided by the two message-passing calls, is what a DGL call costs beyond a kernel's
  launch, timed on the same machine state as the launches it is set against. Until 2026-12-02 the pass's median
  time minus ``gpu.kernel_overhead_s`` for every kernel ``simulator.workload.model_cost`` lists (a separate
  measurement) was used: a difference of two similar numbers, it came out at 1e-6 (the floor), 24, 50, 171, 277
  and 330 us in six probes that day; the paired one gave 177-232 us in six runs of 50 pairs on one thread and
  184-221 us on two (this 2-core machine, DGL 1.1.3).

Both are at least :data:`MIN_FIXED_S` (a difference of timings). Source of the method: Hockney's alpha-beta
decomposition (Parallel Computing 20(3), 1994) of a call's time into a fixed part and a per-item part, the fixed
part measured where the per-item part is negligible.

* ``host.split_items_per_s_per_core`` and ``host.split_call_s``: ``gsplit``'s online split of a sampled batch
  (per layer: the owner lookup of the block's vertices and :func:`simulator.strategies.gsplit.split.layer_plan`,
  as :class:`executor.strategies.gsplit.batches.SplitSampler` runs it) on one thread, for batches of
  :data:`SPLIT_SEEDS` seeds of the probe's R-MAT graph split 2 ways at random: the per-item rate from the
  difference of the two sizes' median times over their difference in items (the block vertices of all layers,
  what the executor's trace counts as ``num_split_items``), the per-layer fixed part from the small batch's time
  minus its items at that rate.

A rate the roofline misses is measured here too:

* ``gpu.rng_elements_per_s``: the executor's dropout (``nn.Dropout(0.5)`` in training) draws one Bernoulli
  number per element, and on CPU that draw, not the memory traffic, bounds it (PyTorch's CPU ``bernoulli_``: ~40
  times the elementwise roofline on the development machine, 2026-11-23). Per element: the median time of a
  dropout of :data:`DROPOUT_ELEMENTS` float32 elements minus its memory-bound time (read, mask, write), over the
  elements.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from gnnplan.simulator.workload.dgl_seed import seed_dgl

MIN_FIXED_S = 1e-6
"""Floor of a measured fixed cost (seconds; every probe module's): a difference of two timings can come out at or
below 0 on a fast path; 1 us keeps a positive prior (calibration fits a parameter with a prior in log space)."""
CALL_SEEDS = 4
"""Seeds of the sampler-call batches (a few dozen edges per layer)."""
GRAPH_OP_DIMS = (8, 4)
"""Input and output width of the graph-op measurement's layer (``in > out``: DGL projects before aggregating)."""
SPLIT_SEEDS = (4, 512)
"""Seeds of the two batch sizes the split costs are measured on (:func:`split_costs`): a few dozen items per
layer, where the fixed part dominates, and a batch of thousands."""
DROPOUT_ELEMENTS = 1 << 18
"""Elements of the dropout-rate measurement (a 4096 x 64 hidden activation)."""


def sampler_call_s(num_vertices: int, edge_factor: int, fanouts: tuple[int, ...], edges_per_s: float,
                   num_batches: int) -> float:
    """Fixed seconds of one sampler call (module docstring).

    Args:
        num_vertices, edge_factor: the R-MAT graph (:mod:`simulator.workload.rmat`).
        fanouts: sampling fanouts (one call per entry).
        edges_per_s: the measured per-edge rate of one core.
        num_batches: timed batches (after one warm-up batch).
    """
    import dgl

    from gnnplan.executor.sampling import TimedSampler
    from gnnplan.simulator.workload.rmat import rmat_edges

    src, dst = rmat_edges(num_vertices, edge_factor * num_vertices, seed=0)
    g = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=num_vertices)
    sampler, rng = TimedSampler(list(fanouts)), np.random.default_rng(0)
    per_call = []
    seed_dgl(0)
    for i in range(num_batches + 1):
        seeds = torch.from_numpy(rng.choice(num_vertices, CALL_SEEDS, replace=False))
        start = time.perf_counter()
        _, _, blocks, _ = sampler.sample(g, seeds)
        elapsed = time.perf_counter() - start
        if i:
            edges = sum(int(b.num_edges()) for b in blocks)
            per_call.append((elapsed - edges / edges_per_s) / len(fanouts))
    return max(MIN_FIXED_S, float(np.median(per_call)))


def split_costs(num_vertices: int, edge_factor: int, fanouts: tuple[int, ...], num_batches: int
                ) -> tuple[float, float]:
    """(items per second of one core, fixed seconds per layer) of ``gsplit``'s online split (module docstring).

    Args:
        num_vertices, edge_factor: the R-MAT graph (:mod:`simulator.workload.rmat`).
        fanouts: sampling fanouts (one split call per layer).
        num_batches: timed batches of each size (after one warm-up batch).
    """
    import dgl

    from gnnplan.simulator.strategies.gsplit.split import layer_plan
    from gnnplan.simulator.strategies.gsplit.stats import block_arrays
    from gnnplan.simulator.workload.rmat import rmat_edges

    src, dst = rmat_edges(num_vertices, edge_factor * num_vertices, seed=0)
    g = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=num_vertices)
    sampler, rng = dgl.dataloading.NeighborSampler(list(fanouts)), np.random.default_rng(0)
    owner = rng.integers(0, 2, num_vertices).astype(np.int64)
    seed_dgl(0)
    medians = []
    for size in SPLIT_SEEDS:
        times, items = [], []
        for i in range(num_batches + 1):
            seeds = torch.from_numpy(rng.choice(num_vertices, min(size, num_vertices), replace=False))
            blocks = sampler.sample_blocks(g, seeds)[2]
            start = time.perf_counter()
            arrays = [block_arrays(b) for b in blocks]
            for ids, nd, u, v in arrays:
                layer_plan("sage", 0, owner[ids], nd, u, v, 2)
            if i:
                times.append(time.perf_counter() - start)
                items.append(sum(len(ids) for ids, _, _, _ in arrays))
        medians.append((float(np.median(times)), float(np.median(items))))
    (t_small, n_small), (t_large, n_large) = medians
    rate = (n_large - n_small) / max(t_large - t_small, MIN_FIXED_S)
    return rate, max(MIN_FIXED_S, (t_small - n_small / rate) / len(fanouts))


def graph_op_overhead_s(repeats: int) -> float:
    """Fixed seconds of one DGL message-passing call beyond its kernel's launch (module docstring), on the calling
    thread pool.

    Args:
        repeats: timed pairs of passes, DGL's layer and its dense control (after three warm-up pairs).

    Returns:
        The median paired difference over the two message-passing calls of a pass, at least :data:`MIN_FIXED_S`.
    """
    import dgl

    graph = dgl.graph((torch.arange(8) % 6, torch.arange(8) % 4), num_nodes=6)
    torch.manual_seed(0)
    conv = dgl.nn.SAGEConv(GRAPH_OP_DIMS[0], GRAPH_OP_DIMS[1], "mean")
    num_dst = 4
    num_src = dgl.to_block(graph, torch.arange(num_dst)).num_src_nodes()
    mean = torch.full((num_dst, num_src), 1.0 / num_src)  # the control's aggregation
    differences = []
    for i in range(repeats + 3):
        block = dgl.to_block(graph, torch.arange(num_dst))  # a fresh block, as every sampled batch is
        h = torch.randn(num_src, GRAPH_OP_DIMS[0], requires_grad=True)
        start = time.perf_counter()
        conv(block, h).sum().backward()
        layer_s = time.perf_counter() - start
        x = torch.randn(num_src, GRAPH_OP_DIMS[0], requires_grad=True)
        start = time.perf_counter()
        (conv.fc_self(x[:num_dst]) + mean @ conv.fc_neigh(x)).sum().backward()  # the same kernels, no DGL call
        control_s = time.perf_counter() - start
        if i >= 3:
            differences.append(layer_s - control_s)
    return max(MIN_FIXED_S, float(np.median(differences)) / 2.0)  # the aggregation and its gradient


def dropout_elements_per_s(memory_bandwidth_bytes_per_s: float, repeats: int) -> float:
    """Random numbers per second of the executor's dropout mask (module docstring), on the calling thread pool.

    Args:
        memory_bandwidth_bytes_per_s: the probe's memory bandwidth of one worker (prices the elementwise part).
        repeats: timed dropouts (after two warm-up ones).
    """
    x = torch.randn(DROPOUT_ELEMENTS)
    dropout = torch.nn.Dropout(0.5).train()
    times = []
    for i in range(repeats + 2):
        start = time.perf_counter()
        dropout(x)
        if i >= 2:
            times.append(time.perf_counter() - start)
    streamed_s = 3 * 4 * DROPOUT_ELEMENTS / memory_bandwidth_bytes_per_s  # read x, write mask and output
    return DROPOUT_ELEMENTS / max(float(np.median(times)) - streamed_s, MIN_FIXED_S)
