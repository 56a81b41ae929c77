"""``gnnplan probe``'s fixed-cost measurements and the ``priors`` block of the cluster it writes.

Calibration (:mod:`simulator.calibrate_fit`) regularises every fitted parameter toward a prior; this module
measures the priors of the fixed costs that only the executor's own calls reveal, each the way the executor pays
it, and adds them with their sources to the probe's cluster mapping (:func:`add_overheads`):

* ``host.sampler_handoff_s``: a trainer taking one sampled 2-layer mini-batch from a sampler process. The
  executor's own :class:`executor.sampling.BatchStream` with one sampler process (a PyTorch ``DataLoader``,
  ``prefetch_factor`` 2) samples batches of the probe's R-MAT graph; before each batch the trainer sleeps long
  enough for the batch to be ready, so the timed ``next()`` is the hand-off alone: the queue get and unpickling
  the blocks' tensors, each a shared-memory file descriptor fetched from the sender (torch.multiprocessing's
  ``file_descriptor`` strategy; torch/multiprocessing/reductions.py ``rebuild_storage_fd``). Median over the
  batches after the first two.
* ``network.per_collective_s``: two spawned gloo processes on 127.0.0.1 time a 1 KiB float32 ``all_reduce``
  (:data:`executor.probe_io.COLLECTIVE_BYTES`: many elements per rank, as every collective of the executor; a
  one-element all-reduce is several times faster than any larger one), each call after 1 ms of compute, trimmed
  mean over 100 calls (:func:`executor.probe_io.collective_mean_s`, the measurement ``gnnplan probe --emulate``
  makes between machines: in training a collective follows compute, and an epoch pays the mean call, slow ones
  included; an 8-byte send/recv round trip's median is reported beside it); the fixed cost of the collective is
  the all-reduce minus what the simulator already charges for it, its ring's ``2 (W - 1)`` messages at the
  probe's ``network.latency_s`` and ``2 (W - 1) / W`` of its bytes at ``network.bandwidth_bytes_per_s`` (W = 2;
  ring all-reduce, Thakur, Rabenseifner and Gropp, IJHPCA 19(1), 2005, §4.5), at least 1 us. Before 2026-11-28
  the probe timed a one-element (8-byte) all-reduce: 0.13-0.21 ms a call against 1.3-1.6 ms for 16 B - 64 KiB
  (:data:`~executor.probe_io.COLLECTIVE_ELEMENTS`), so every collective the simulator priced was ~1 ms short.
* ``network.per_all_to_all_s``: the same, on a 1 KiB ``all_to_all_single`` (half to the other rank), minus its
  one message's latency and bytes: the fixed cost of each of a feature pull's three calls and of a gsplit
  shuffle. The two calls run different algorithms and are measured apart. After 1 ms of compute, two local
  processes, 200 calls (2026-11-28), the all-to-all took 0.31-0.51 ms against the all-reduce's 1.38-2.04 ms while
  gloo's event-loop thread spun beside them (before :mod:`executor.gloo_loop`), and the fetch rows of two what-if
  calibration traces then fitted a per-call cost of 0.39x and 0.47x the all-reduce's; with the loop thread in
  ``SCHED_IDLE`` three probes gave 0.30-0.48 ms against 0.32-0.47 ms.
* ``network.ddp_per_bucket_s``: in the same two processes, a DDP-wrapped model of :data:`DDP_MODEL_DIMS` (one
  gradient bucket) runs backward; the time from the bucket's launch on the LAST rank (the executor's
  :class:`~executor.ddp.GradientHook`, where its ``all_reduce`` span starts; the ranks share one host's monotonic
  clock) to backward's return, minus a plain ``all_reduce`` of the same bytes after the same backward (no DDP),
  timed from the last rank's call, is what DDP's reducer adds per bucket: trimmed means of
  :data:`~executor.probe_io.COLLECTIVE_CALLS` rounds, as the collective's own cost (the calls were bimodal while
  gloo's event-loop thread spun, before :mod:`executor.gloo_loop`, so a median of a few rounds flipped between
  modes). Both from the last rank, as calibration times a collective from
  the last rank's arrival: until then a rank waits for the other's backward, which the simulator's barrier
  already charges. Before 2026-11-28 the bucket was timed from the rank's own launch and compared with an
  all-reduce right after a barrier (medians of 21 rounds). With the two processes sharing the one core of an
  emulated machine that came out at 1.11 ms, while the 737 kB all-reduces of a calibration trace between two such
  machines cost their bytes at the probed rate plus 1.1 ms: one fixed cost, not two (``network.per_collective_s``,
  1.26 ms, and this). Timed from the last launch (medians of 100 rounds), a bucket took 0.68 ms against 1.39 ms for
  the plain all-reduce on one core and 0.91 against 1.55 ms on two; compared with the plain all-reduce after the
  same backward, both from the last rank (trimmed means of 21 rounds, three probes), DDP added 0.03-0.66 ms.
* ``iteration_overhead_s``: the Python the executor's training loop runs per iteration outside its phase spans
  (:mod:`executor.strategies.dp` ``train_epoch``: the inline batch stream's step around the sampling itself,
  five span records, the loss sum of a detached scalar and the clock readings), timed over many iterations of
  exactly those calls.
* ``host.sampler_call_s`` (per sampler call), ``gpu.graph_op_overhead_s`` (per DGL message-passing call),
  ``host.split_items_per_s_per_core`` and ``host.split_call_s`` (gsplit's online split) and
  ``gpu.rng_elements_per_s`` (dropout's random draws): :mod:`executor.probe_calls`.
* ``jitter_s`` (stragglers at collectives, :mod:`simulator.jitter`): in the same two processes, 240 all-reduces
  each after a fixed count of small matmuls (:func:`executor.probe_io.straggler_jitter`); not a prior (calibration
  keeps it, :mod:`simulator.calibrate`). On a CUDA machine the work is still the host's (its sampling and kernel
  launches share that noise); a GPU kernel's own timing noise is not measured. ``network.per_collective_s``'s
  calls follow a busy loop to a deadline, which a preemption delays only when it covers the deadline, so its mean
  holds little of this waiting.

The ``priors`` block repeats the probe's measured value of every parameter calibration fits that the probe
measures (:data:`PRIOR_FIELDS`): the fields themselves change when a cluster is calibrated, the priors do not.
"""

from __future__ import annotations

import copy
import datetime
import functools
import statistics
import time
from typing import Any, NamedTuple

import numpy as np
import torch

from gnnplan.executor.probe_calls import (
    CALL_SEEDS,
    DROPOUT_ELEMENTS,
    GRAPH_OP_DIMS,
    SPLIT_SEEDS,
    dropout_elements_per_s,
    graph_op_overhead_s,
    sampler_call_s,
    split_costs,
)
from gnnplan.executor.probe_io import (
    COLLECTIVE_BUSY_S,
    COLLECTIVE_BYTES,
    COLLECTIVE_CALLS,
    collective_mean_s,
    jitter_source,
    straggler_jitter,
)
from gnnplan.executor.trace import Recorder, now
from gnnplan.simulator.hardware.collectives import ring_all_reduce_time_s

PRIOR_FIELDS = ("network.bandwidth_bytes_per_s", "network.latency_s", "network.per_collective_s",
                "network.per_all_to_all_s", "network.ddp_per_bucket_s",
                "pcie.bandwidth_bytes_per_s", "pcie.latency_s", "gpu.kernel_overhead_s",
                "host.sampling_edges_per_s_per_core", "host.sampler_handoff_s", "iteration_overhead_s",
                "host.row_index_s", "storage.concurrency", "host.sampler_call_s", "gpu.graph_op_overhead_s",
                "host.split_items_per_s_per_core", "host.split_call_s")
"""The fitted parameters (:data:`simulator.calibrate_params.PARAMS`) ``gnnplan probe`` measures; the efficiencies
are fractions of the probe's own roofline, 1 by construction, so their prior is the field's default.
``host.row_index_s`` and ``storage.concurrency`` are measured by :mod:`executor.probe_constants`, which adds their
priors (:func:`set_priors`)."""

MIN_FIXED_S = 1e-6
"""Floor of a measured fixed cost: a difference of two timings can come out at or below 0 on a fast path; 1 us
keeps a positive prior (calibration fits a parameter with a prior in log space)."""

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
                      num_batches: int) -> float:
    """Seconds a trainer spends taking one ready batch from a sampler process (module docstring).

    Args:
        num_vertices, edge_factor: the R-MAT graph (:mod:`simulator.workload.rmat`).
        fanouts: sampling fanouts (one block per entry).
        batch_size: seeds per batch.
        num_batches: batches taken (the first two are warm-up).

    Returns:
        The median time of ``next()`` on the batch stream with the batch already sampled.
    """
    import dgl

    from gnnplan.executor.sampling import BatchStream, TimedSampler, sample_inline
    from gnnplan.simulator.workload.rmat import rmat_edges

    src, dst = rmat_edges(num_vertices, edge_factor * num_vertices, seed=0)
    g = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=num_vertices)
    rng = np.random.default_rng(0)
    batches = [rng.choice(num_vertices, batch_size, replace=False) for _ in range(num_batches)]
    sampler = TimedSampler(list(fanouts))
    sample_inline(g, sampler, batches[0])  # builds the graph's CSC format before the sampler process forks
    inline = sample_inline(g, sampler, batches[0])
    wait_s = 3.0 * (inline.end_s - inline.start_s) + 0.02
    stream = BatchStream(g, sampler, functools.partial(_schedule, batches), num_batches, 1)
    times = []
    try:
        batches_iter = stream.epoch(0)
        for _ in range(num_batches):
            time.sleep(wait_s)
            start = time.perf_counter()
            next(batches_iter)
            times.append(time.perf_counter() - start)
    finally:
        stream.close()
    return float(np.median(times[2:]))


DDP_MODEL_DIMS = (1433, 128, 7)
"""The linear layers whose gradients the DDP measurement reduces (184k parameters, 0.74 MB: one bucket; the sizes
of a 2-layer model on Cora)."""


def _collective_rank(topo: Any, emit: Any, repeats: int) -> tuple[float, ...]:
    """Rank program of :func:`per_collective_s`: median one-way 8-byte message time, the mean 1 KiB all-reduce
    and all-to-all after compute (:func:`executor.probe_io.collective_mean_s`, as ``gnnplan probe --emulate``
    times them between machines), a DDP bucket's time from the last launch and a plain all-reduce of the same
    bytes (:func:`_ddp_bucket_times`), and the stragglers' ``jitter_s`` with its mean wait and calls
    (:func:`executor.probe_io.straggler_jitter`)."""
    from gnnplan.executor import comm

    peer = 1 - topo.rank
    first, second = (comm.send, comm.recv) if topo.rank == 0 else (comm.recv, comm.send)
    buf = torch.zeros(1, dtype=torch.float64)
    one_way = []
    comm.barrier()
    for i in range(repeats + 3):  # three warm-up rounds
        start = time.perf_counter()
        first(buf, peer)
        second(buf, peer)
        if i >= 3:
            one_way.append((time.perf_counter() - start) / 2.0)
    reduce = collective_mean_s()
    exchange = collective_mean_s(all_to_all=True)
    ddp, flat = _ddp_bucket_times(COLLECTIVE_CALLS)  # means of bimodal calls: as many rounds as the collective
    jitter, wait, calls = straggler_jitter()
    return float(np.median(one_way)), reduce, exchange, ddp, flat, jitter, wait, calls


def _bucket_bytes() -> int:
    """Bytes of the DDP measurement's gradient (float32 weights and biases of :data:`DDP_MODEL_DIMS`)."""
    a, b, c = DDP_MODEL_DIMS
    return 4 * (a * b + b + b * c + c)


def _ddp_bucket_times(repeats: int) -> tuple[float, float]:
    """Trimmed mean seconds (5% at each end, as :func:`executor.probe_io.collective_mean_s`), over interleaved
    rounds after three warm-ups, of a DDP model's one gradient bucket (:class:`executor.ddp.GradientHook`, as the
    executor's ``all_reduce`` span starts) from its launch on the last rank to the return of ``backward``, and of
    a plain ``all_reduce`` of the same bytes after the same backward without DDP, from the last rank's call to its
    return (collective: every rank calls it). The ranks share one host's monotonic clock; the start times are
    max-reduced after the timed call."""
    import scipy.stats

    from gnnplan.executor import comm, ddp

    torch.manual_seed(0)
    a, b, c = DDP_MODEL_DIMS
    model = torch.nn.Sequential(torch.nn.Linear(a, b), torch.nn.ReLU(), torch.nn.Linear(b, c))
    plain = copy.deepcopy(model)
    net, hook = ddp.data_parallel(model)
    x, y = torch.randn(64, a), torch.randint(0, c, (64,))
    flat_grad = torch.zeros(sum(p.numel() for p in model.parameters()))

    def since_last(start: float, end: float) -> float:
        return max(end - comm.max_over_ranks(start), 0.0)

    bucket, flat = [], []
    for i in range(repeats + 3):
        comm.barrier()
        hook.reset()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        returned = time.perf_counter()
        ddp_s = since_last(hook.last_launch_s or returned, returned)
        comm.barrier()
        torch.nn.functional.cross_entropy(plain(x), y).backward()
        start = time.perf_counter()
        comm.all_reduce_(flat_grad)
        flat_s = since_last(start, time.perf_counter())
        if i >= 3:
            bucket.append(ddp_s)
            flat.append(flat_s)
    return float(scipy.stats.trim_mean(bucket, 0.05)), float(scipy.stats.trim_mean(flat, 0.05))


class CollectiveCosts(NamedTuple):
    """What :func:`per_collective_s` measured (seconds)."""

    per_collective_s: float
    """An all-reduce's fixed cost (:func:`collective_fixed_s`), at least :data:`MIN_FIXED_S`."""
    per_all_to_all_s: float
    """An all-to-all's fixed cost (:func:`all_to_all_fixed_s`), at least :data:`MIN_FIXED_S`."""
    one_way_s: float
    """One-way 8-byte message (median)."""
    all_reduce_s: float
    """The mean :data:`~executor.probe_io.COLLECTIVE_BYTES` all-reduce after compute."""
    all_to_all_s: float
    """The mean :data:`~executor.probe_io.COLLECTIVE_BYTES` all-to-all after compute."""
    ddp_per_bucket_s: float
    """DDP's per bucket: a bucket's time from the last launch minus a plain all-reduce of its bytes, at least
    :data:`MIN_FIXED_S`."""
    jitter_s: float
    """The stragglers' arrival variance per second of work (:func:`executor.probe_io.straggler_jitter`)."""
    jitter_wait_s: float
    """The mean wait per all-reduce behind it."""
    jitter_calls: int
    """The calls it was fitted to."""


def per_collective_s(repeats: int, latency_s: float, bandwidth_bytes_per_s: float) -> CollectiveCosts:
    """The fixed costs of a gloo all-reduce and all-to-all between two local processes, and DDP's per bucket
    (module docstring).

    Args:
        repeats: timed rounds of the one-way message.
        latency_s: the modelled latency of one message (``network.latency_s``).
        bandwidth_bytes_per_s: the modelled rate between the processes (``network.bandwidth_bytes_per_s``).
    """
    from gnnplan.executor.launch import spawn

    one_way, reduce, exchange, ddp, flat, jitter, wait, calls = spawn(_collective_rank, 2, (repeats,))
    return CollectiveCosts(collective_fixed_s(reduce, latency_s, bandwidth_bytes_per_s),
                           all_to_all_fixed_s(exchange, latency_s, bandwidth_bytes_per_s), one_way, reduce, exchange,
                           max(ddp - flat, MIN_FIXED_S), jitter, wait, int(calls))


def collective_fixed_s(all_reduce_s: float, latency_s: float, bandwidth_bytes_per_s: float) -> float:
    """A collective's fixed cost (seconds) from :func:`executor.probe_io.collective_mean_s`'s all-reduce between
    two ranks (:data:`~executor.probe_io.COLLECTIVE_BYTES` each; ``all_reduce_s`` seconds): its time minus what the
    simulator already charges for it, the ring all-reduce of those bytes at ``latency_s`` and
    ``bandwidth_bytes_per_s`` (:func:`simulator.hardware.collectives.ring_all_reduce_time_s`, W = 2: two messages
    and the bytes once; Thakur, Rabenseifner and Gropp, IJHPCA 19(1), 2005, §4.5), at least :data:`MIN_FIXED_S`."""
    ring = ring_all_reduce_time_s(COLLECTIVE_BYTES, 2, bandwidth_bytes_per_s, latency_s)
    return max(all_reduce_s - ring, MIN_FIXED_S)


def all_to_all_fixed_s(all_to_all_s: float, latency_s: float, bandwidth_bytes_per_s: float) -> float:
    """An all-to-all call's fixed cost (seconds) from :func:`executor.probe_io.collective_mean_s`'s all-to-all
    between two ranks (``all_to_all_s`` seconds; each rank keeps half of its
    :data:`~executor.probe_io.COLLECTIVE_BYTES` and sends the other half): its time minus what the simulator
    already charges for it, one message of those bytes at ``latency_s`` and ``bandwidth_bytes_per_s`` (a pull's or
    a shuffle's message to each other machine), at least :data:`MIN_FIXED_S`."""
    return max(all_to_all_s - latency_s - COLLECTIVE_BYTES / 2 / bandwidth_bytes_per_s, MIN_FIXED_S)


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
        sizes: the probe's :class:`executor.probe.Sizes`.
        threads: torch threads of one worker (the trainer side of the hand-off runs on them).

    Returns:
        ``data``.
    """
    from gnnplan.executor.probe import torch_threads

    batch = max(1, sizes.sampling_batch_size // HANDOFF_SEEDS_DIVISOR)
    num_batches = max(5, 3 * sizes.repeats)
    with torch_threads(threads):
        handoff = sampler_handoff_s(sizes.rmat_vertices, sizes.rmat_edge_factor, tuple(sizes.sampling_fanouts),
                                    batch, num_batches)
        loop = iteration_overhead_s(LOOP_ITERATIONS, sizes.repeats)
        graph_op = graph_op_overhead_s(float(data["gpu"]["kernel_overhead_s"]), 10 * sizes.repeats)
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
            f"executor.probe_io.collective_mean_s: {COLLECTIVE_CALLS} calls, 5% trimmed at each end; an 8-byte "
            f"message one way: {costs.one_way_s:.4g} s, median of {sizes.message_repeats} rounds) minus its ring's "
            f"2 messages at network.latency_s ({latency:.4g} s) and its bytes at network.bandwidth_bytes_per_s, at "
            f"least {MIN_FIXED_S:g} s"),
        "network.per_all_to_all_s": (
            f"measured by gnnplan probe on {date}: mean {COLLECTIVE_BYTES}-byte gloo all_to_all_single (half to "
            f"the other rank) between 2 spawned local processes, each call after {COLLECTIVE_BUSY_S:g} s of "
            f"compute ({costs.all_to_all_s:.4g} s; {COLLECTIVE_CALLS} calls, 5% trimmed at each end) minus its "
            f"one message at network.latency_s and network.bandwidth_bytes_per_s, at least {MIN_FIXED_S:g} s"),
        "network.ddp_per_bucket_s": (
            f"measured by gnnplan probe on {date}: between 2 spawned local processes, a DDP model's one "
            f"gradient bucket ({_bucket_bytes()} bytes: linear layers {DDP_MODEL_DIMS}) from its launch on the last "
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
            f"measured by gnnplan probe on {date}: median of {10 * sizes.repeats} forward + backward passes of "
            f"DGL SAGEConv{GRAPH_OP_DIMS} on a fresh tiny block on {threads} thread(s), minus gpu.kernel_overhead_s "
            "per kernel simulator.workload.model_cost lists for them, per DGL message-passing call "
            "(executor.probe_calls)"),
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
