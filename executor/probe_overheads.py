"""``gnnplan probe``'s fixed-cost measurements and the ``priors`` block of the cluster it writes.

Calibration (:mod:`simulator.calibrate_fit`) regularises every fitted parameter toward a prior; this module
measures the priors of the fixed costs that only the executor's own calls reveal, each the way the executor pays
it, and adds them with their sources to the probe's cluster mapping (:func:`add_overheads`):

* ``host.sampler_handoff_s``: a trainer taking one sampled 2-layer mini-batch from a sampler process. The
  executor's own :class:`executor.sampling.BatchStream` with one sampler process (a PyTorch ``DataLoader``,
  ``prefetch_factor`` 2) samples batches of the probe's R-MAT graph; before each batch the trainer sleeps long
  enough for the batch to be ready, so the timed ``next()`` is the hand-off alone: the queue get and unpickling
  the blocks' tensors, each a shared-memory file descriptor fetched from the sender (torch.multiprocessing's
  ``file_descriptor`` strategy; torch/multiprocessing/reductions.py ``rebuild_storage_fd``). A batch that was
  not ready when asked for (the sampler process slowed by other load) counts from the end of its sampling, which
  the batch carries (``Batch.end_s``, CLOCK_MONOTONIC, shared by the machine's processes), so the wait for the
  sampling is not taken for the hand-off. Median over the batches after the first two.
* ``network.per_collective_s``, ``network.per_all_to_all_s``, ``network.ddp_per_bucket_s`` and the stragglers'
  ``jitter_s`` (not a prior: calibration keeps it): two spawned gloo processes, :mod:`executor.probe_collectives`.
* ``iteration_overhead_s``: the Python the executor's training loop runs per iteration outside its phase spans
  (:mod:`executor.strategies.dp` ``train_epoch``: the inline batch stream's step around the sampling itself,
  five span records, the loss sum of a detached scalar and the clock readings), timed over many iterations of
  exactly those calls.
* ``host.sampler_call_s`` (per sampler call), ``gpu.graph_op_overhead_s`` (per DGL message-passing call),
  ``host.split_items_per_s_per_core`` and ``host.split_call_s`` (gsplit's online split) and
  ``gpu.rng_elements_per_s`` (dropout's random draws): :mod:`executor.probe_calls`.

The ``priors`` block repeats the probe's measured value of every parameter calibration fits that the probe
measures (:data:`PRIOR_FIELDS`): the fields themselves change when a cluster is calibrated, the priors do not.
"""

from __future__ import annotations

import datetime
import functools
import statistics
import time
from typing import Any

import numpy as np
import torch

from gnnplan.executor.probe_calls import (
    CALL_SEEDS,
    DROPOUT_ELEMENTS,
    GRAPH_OP_DIMS,
    MIN_FIXED_S,
    SPLIT_SEEDS,
    dropout_elements_per_s,
    graph_op_overhead_s,
    sampler_call_s,
    split_costs,
)
from gnnplan.executor.probe_collectives import DDP_MODEL_DIMS, bucket_bytes, per_collective_s
from gnnplan.executor.probe_io import (
    COLLECTIVE_BLOCKS,
    COLLECTIVE_BUSY_S,
    COLLECTIVE_BYTES,
    COLLECTIVE_CALLS,
    jitter_source,
)
from gnnplan.executor.trace import Recorder, now

PRIOR_FIELDS = ("network.bandwidth_bytes_per_s", "network.latency_s", "network.per_collective_s",
                "network.per_all_to_all_s", "network.ddp_per_bucket_s",
                "pcie.bandwidth_bytes_per_s", "pcie.latency_s", "gpu.kernel_overhead_s", "gpu.backward_overhead_ratio",
                "host.sampling_edges_per_s_per_core", "host.sampler_handoff_s", "iteration_overhead_s",
                "host.row_index_s", "storage.concurrency", "host.sampler_call_s", "gpu.graph_op_overhead_s",
                "host.split_items_per_s_per_core", "host.split_call_s", "host.full_neighbour_sampling_ratio",
                "efficiency.gather_fraction")
"""The fitted parameters (:data:`simulator.calibrate_params.PARAMS`) ``gnnplan probe`` measures; the other
efficiencies are fractions of the probe's own roofline, 1 by construction, so their prior is the field's default
(``efficiency.gather_fraction`` is measured: :mod:`executor.probe`).
``host.row_index_s`` and ``storage.concurrency`` are measured by :mod:`executor.probe_constants`, which adds their
priors (:func:`set_priors`)."""

LOOP_GRAPH = (64, 4, (2, 2), 4)
"""The loop measurement's tiny batches: (R-MAT vertices, edge factor, fanouts, seeds)."""
LOOP_ITERATIONS = 300

HANDOFF_SEEDS_DIVISOR = 16
"""Hand-off batches have ``sampling_batch_size // 16`` seeds (32 with the full sizes: the main job's Cora batch
per worker); the cost is per tensor, and a 2-layer block list has the same tensors at any batch size."""


def _schedule(batches: list[np.ndarray], epoch: int) -> list[np.ndarray]:
    """A fixed seed schedule for :class:`~gnnplan.executor.sampling.BatchStream` (module-level: picklable)."""
    return batches


def sampler_handoff_s(num_vertices: int, edge_factor: int, fanouts: tuple[int, ...], batch_size: int,
                      num_batches: int, sampler: Any = None, wait_s: float | None = None) -> float:
    """Seconds a trainer spends taking one ready batch from a sampler process (module docstring).

    Args:
        num_vertices, edge_factor: the R-MAT graph (:mod:`simulator.workload.rmat`).
        fanouts: sampling fanouts (one block per entry).
        batch_size: seeds per batch.
        num_batches: batches taken (the first two are warm-up).
        sampler: the :class:`~gnnplan.executor.sampling.TimedSampler` the sampler process runs (default: DGL's
            neighbour sampler with ``fanouts``, as the executor's).
        wait_s: seconds the trainer sleeps before asking for each batch (default: 3 times an inline sampling
            plus 20 ms, enough for the batch to be ready).

    Returns:
        The median time of ``next()`` on the batch stream, counted from the end of the batch's sampling when
        that came later than the call.
    """
    import dgl

    from gnnplan.executor.sampling import BatchStream, TimedSampler, sample_inline
    from gnnplan.simulator.workload.rmat import rmat_edges

    src, dst = rmat_edges(num_vertices, edge_factor * num_vertices, seed=0)
    g = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=num_vertices)
    rng = np.random.default_rng(0)
    batches = [rng.choice(num_vertices, batch_size, replace=False) for _ in range(num_batches)]
    sampler = sampler if sampler is not None else TimedSampler(list(fanouts))
    sample_inline(g, sampler, batches[0])  # builds the graph's CSC format before the sampler process forks
    if wait_s is None:
        inline = sample_inline(g, sampler, batches[0])
        wait_s = 3.0 * (inline.end_s - inline.start_s) + 0.02
    stream = BatchStream(g, sampler, functools.partial(_schedule, batches), num_batches, 1)
    times = []
    try:
        batches_iter = stream.epoch(0)
        for _ in range(num_batches):
            time.sleep(wait_s)
            start = time.perf_counter()
            batch = next(batches_iter)
            times.append(time.perf_counter() - max(start, batch.end_s))
    finally:
        stream.close()
    return float(np.median(times[2:]))


def iteration_overhead_s(iterations: int, repeats: int) -> float:
    """Per-iteration seconds of the executor's training loop outside its phase spans (module docstring).

    The batches come from the executor's own inline :class:`~gnnplan.executor.sampling.BatchStream` over a tiny
    R-MAT graph (:data:`LOOP_GRAPH`); the time inside each batch's sampling window (the ``sample`` span) is
    subtracted, so its wrapper (seed conversion, thread settings, the batch record) counts and the sampling not.

    Args:
        iterations: loop iterations per timing.
        repeats: timings (the median is returned).
    """
    import dgl

    from gnnplan.executor.sampling import BatchStream, TimedSampler
    from gnnplan.simulator.workload.rmat import rmat_edges

    n, factor, fanouts, seeds = LOOP_GRAPH
    src, dst = rmat_edges(n, factor * n, seed=0)
    g = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=n)
    rng = np.random.default_rng(0)
    batches = [rng.choice(n, seeds, replace=False) for _ in range(iterations)]
    stream = BatchStream(g, TimedSampler(list(fanouts)), functools.partial(_schedule, batches), iterations, 0)
    rec, loss_sum, loss = Recorder(0, now()), torch.zeros((), dtype=torch.float64), torch.ones(())
    samples = []
    for _ in range(repeats + 1):  # the first timing is a warm-up
        sampling_s, start = 0.0, time.perf_counter()
        for it, batch in enumerate(stream.epoch(0)):
            t0 = now()
            sampling_s += batch.end_s - batch.start_s
            rec.add("sample", batch.start_s, batch.end_s, "sampler", 0, it, num_input_vertices=1, num_sampled_edges=1)
            rec.add("backward", t0, t0, "compute", 0, it, flops=1.0)
            rec.add("all_reduce", t0, t0, "network", 0, it, nbytes=1.0)
            loss_sum += loss.detach()
            t1 = now()
            rec.add("optimizer", t0, t1, "compute", 0, it, flops=1.0)
            rec.add("iteration", t0, t1, "host", 0, it)
        samples.append((time.perf_counter() - start - sampling_s) / iterations)
    return max(statistics.median(samples[1:]), MIN_FIXED_S)


def _sig(x: float) -> float:
    return float(f"{x:.4g}")


def add_overheads(data: dict[str, Any], sizes: Any, threads: int) -> dict[str, Any]:
    """Measure the fixed costs into a :func:`executor.probe.probe_machine` mapping, with their ``sources``, and
    add its ``priors`` block (module docstring).

    Args:
        data: the probe's cluster mapping (changed in place).
        sizes: the probe's :class:`executor.probe_host.Sizes`.
        threads: torch threads of one worker (the trainer side of the hand-off runs on them).

    Returns:
        ``data``.
    """
    from gnnplan.executor.probe_host import torch_threads

    batch = max(1, sizes.sampling_batch_size // HANDOFF_SEEDS_DIVISOR)
    num_batches = max(5, 3 * sizes.repeats)
    with torch_threads(threads):
        handoff = sampler_handoff_s(sizes.rmat_vertices, sizes.rmat_edge_factor, tuple(sizes.sampling_fanouts),
                                    batch, num_batches)
        loop = iteration_overhead_s(LOOP_ITERATIONS, sizes.repeats)
        graph_op = graph_op_overhead_s(10 * sizes.repeats)
        rng = dropout_elements_per_s(float(data["gpu"]["memory_bandwidth_bytes_per_s"]), 3 * sizes.repeats)
    with torch_threads(1):  # a sampler samples on one thread (executor.sampling)
        call = sampler_call_s(sizes.rmat_vertices, sizes.rmat_edge_factor, tuple(sizes.sampling_fanouts),
                              float(data["host"]["sampling_edges_per_s_per_core"]), num_batches)
        split_rate, split_call = split_costs(sizes.rmat_vertices, sizes.rmat_edge_factor,
                                             tuple(sizes.sampling_fanouts), num_batches)
    latency, bandwidth = float(data["network"]["latency_s"]), float(data["network"]["bandwidth_bytes_per_s"])
    costs = per_collective_s(sizes.message_repeats, latency, bandwidth)
    data["host"]["sampler_handoff_s"] = _sig(handoff)
    data["network"]["per_collective_s"] = _sig(costs.per_collective_s)
    data["network"]["per_all_to_all_s"] = _sig(costs.per_all_to_all_s)
    data["network"]["ddp_per_bucket_s"] = _sig(costs.ddp_per_bucket_s)
    data["iteration_overhead_s"] = _sig(loop)
    data["jitter_s"] = _sig(costs.jitter_s)
    data["host"]["sampler_call_s"] = _sig(call)
    data["host"]["split_items_per_s_per_core"] = _sig(split_rate)
    data["host"]["split_call_s"] = _sig(split_call)
    data["gpu"]["graph_op_overhead_s"] = _sig(graph_op)
    data["gpu"]["rng_elements_per_s"] = _sig(rng)
    date = datetime.date.today().isoformat()
    data["sources"].update({
        "host.sampler_handoff_s": (
            f"measured by gnnplan probe on {date}: median over {num_batches - 2} batches of the time a trainer on "
            f"{threads} thread(s) takes a ready {len(sizes.sampling_fanouts)}-layer batch ({batch} seeds, fanouts "
            f"{list(sizes.sampling_fanouts)}, R-MAT graph of {sizes.rmat_vertices} vertices) from one sampler "
            "process of executor.sampling.BatchStream (DataLoader queue get + unpickling shared-memory tensors)"),
        "network.per_collective_s": (
            f"measured by gnnplan probe on {date}: mean {COLLECTIVE_BYTES}-byte gloo all_reduce between 2 spawned "
            f"local processes, each call after {COLLECTIVE_BUSY_S:g} s of compute ({costs.all_reduce_s:.4g} s; "
            f"executor.probe_io.collective_means_s: {COLLECTIVE_BLOCKS} blocks of {COLLECTIVE_CALLS} calls in turn "
            "with the all-to-all's, 5% trimmed at each end; an 8-byte "
            f"message one way: {costs.one_way_s:.4g} s, median of {sizes.message_repeats} rounds) minus its ring's "
            f"2 messages at network.latency_s ({latency:.4g} s) and its bytes at network.bandwidth_bytes_per_s, at "
            f"least {MIN_FIXED_S:g} s"),
        "network.per_all_to_all_s": (
            f"measured by gnnplan probe on {date}: mean {COLLECTIVE_BYTES}-byte gloo all_to_all_single (half to "
            f"the other rank) between 2 spawned local processes, each call after {COLLECTIVE_BUSY_S:g} s of "
            f"compute ({costs.all_to_all_s:.4g} s; {COLLECTIVE_BLOCKS} blocks of {COLLECTIVE_CALLS} calls, 5% trimmed "
            "at each end) minus its "
            f"one message at network.latency_s and network.bandwidth_bytes_per_s, at least {MIN_FIXED_S:g} s"),
        "network.ddp_per_bucket_s": (
            f"measured by gnnplan probe on {date}: between 2 spawned local processes, a DDP model's one "
            f"gradient bucket ({bucket_bytes()} bytes: linear layers {DDP_MODEL_DIMS}) from its launch on the last "
            "rank to backward's return, minus a plain gloo all_reduce of the same bytes after the same backward "
            f"from the last rank's call, trimmed means (5% at each end) of {COLLECTIVE_CALLS} rounds, at least "
            f"{MIN_FIXED_S:g} s"),
        "jitter_s": f"measured by gnnplan probe on {date}: " + jitter_source(
            "2 spawned local processes", costs.jitter_s, costs.jitter_wait_s, costs.jitter_calls),
        "iteration_overhead_s": (
            f"measured by gnnplan probe on {date}: median over {sizes.repeats} timings of {LOOP_ITERATIONS} "
            "iterations of the executor's training-loop calls outside its phase spans (inline BatchStream step "
            f"minus its sampling window, 5 span records, a detached loss sum, clock readings) on {threads} "
            f"thread(s), at least {MIN_FIXED_S:g} s"),
        "host.sampler_call_s": (
            f"measured by gnnplan probe on {date}: median over {num_batches} batches of {CALL_SEEDS} seeds of "
            f"executor.sampling.TimedSampler (fanouts {list(sizes.sampling_fanouts)}, R-MAT graph of "
            f"{sizes.rmat_vertices} vertices) on one thread, minus their edges at "
            "host.sampling_edges_per_s_per_core, per layer (executor.probe_calls)"),
        "host.split_items_per_s_per_core": (
            f"measured by gnnplan probe on {date}: gsplit's online split (block_arrays + layer_plan per layer, as "
            f"executor.strategies.gsplit.batches.SplitSampler) of batches of {SPLIT_SEEDS[0]} and {SPLIT_SEEDS[1]} "
            f"seeds (fanouts {list(sizes.sampling_fanouts)}, R-MAT graph of {sizes.rmat_vertices} vertices, 2 "
            f"random splits) on one thread: the difference of their items over the difference of their median "
            f"times of {num_batches} batches each (executor.probe_calls.split_costs)"),
        "host.split_call_s": (
            f"measured by gnnplan probe on {date}: the median split time of {num_batches} batches of "
            f"{SPLIT_SEEDS[0]} seeds minus their items at host.split_items_per_s_per_core, per layer, at least "
            f"{MIN_FIXED_S:g} s (executor.probe_calls.split_costs)"),
        "gpu.graph_op_overhead_s": (
            f"measured by gnnplan probe on {date}: median over {10 * sizes.repeats} pairs of the time of a forward "
            f"+ backward pass of DGL SAGEConv{GRAPH_OP_DIMS} on a fresh tiny block minus that of the same dense "
            f"kernels in plain torch with a dense matmul for the aggregation, on {threads} thread(s), per DGL "
            "message-passing call (the aggregation and its gradient; executor.probe_calls.graph_op_overhead_s)"),
        "gpu.rng_elements_per_s": (
            f"measured by gnnplan probe on {date}: {DROPOUT_ELEMENTS} elements over the median of "
            f"{3 * sizes.repeats} torch.nn.Dropout(0.5) calls on {threads} thread(s) minus their memory-bound time "
            "at gpu.memory_bandwidth_bytes_per_s (executor.probe_calls)"),
        "priors": f"measured by gnnplan probe on {date}: the probe's values of the fields calibration fits "
                  f"({', '.join(PRIOR_FIELDS)}); calibration regularises toward them and keeps them"})
    return set_priors(data)


def set_priors(data: dict[str, Any]) -> dict[str, Any]:
    """Set the probe mapping's ``priors`` block to its values of the :data:`PRIOR_FIELDS` it holds.

    Returns:
        ``data`` (changed in place).
    """
    data["priors"] = {path: _field(data, path) for path in PRIOR_FIELDS if _field(data, path) is not None}
    return data


def _field(data: dict[str, Any], path: str) -> float | None:
    """A numeric value of the mapping by dotted path (None when absent)."""
    node: Any = data
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return float(node) if isinstance(node, int | float) and not isinstance(node, bool) else None
