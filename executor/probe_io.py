"""The probe's measurements of data movement: the alpha-beta fit, gloo ping-pong between two local processes,
the mean collective call and the stragglers' waits at it, and storage reads (``gnnplan probe``;
:mod:`executor.probe` assembles the cluster file from them).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.optimize
import torch


def fit_latency_bandwidth(sizes_bytes: Sequence[float], times_s: Sequence[float]) -> tuple[float, float]:
    """Fit the alpha-beta model ``t = latency_s + bytes / bandwidth_bytes_per_s`` to timings.

    Least squares on RELATIVE residuals ``(latency + bytes * inv_bw - t) / t`` (sizes span orders of
    magnitude, so plain residuals would ignore the small sizes that determine the latency), with both
    coefficients constrained to be non-negative (``scipy.optimize.nnls``).

    Source: Hockney, "The communication challenge for MPP", Parallel Computing 20(3), 1994 (the model).

    Args:
        sizes_bytes: message / transfer sizes, at least two distinct.
        times_s: measured time of each size, all positive.

    Returns:
        (latency_s, bandwidth_bytes_per_s).

    Raises:
        ValueError: mismatched or too few points, non-positive times, or times that do not grow with size.
    """
    x, t = np.asarray(sizes_bytes, dtype=float), np.asarray(times_s, dtype=float)
    if x.shape != t.shape or x.ndim != 1 or np.unique(x).size < 2:
        raise ValueError("fit_latency_bandwidth: need equally many sizes and times, at least two distinct sizes")
    if np.any(t <= 0) or np.any(x < 0):
        raise ValueError("fit_latency_bandwidth: times must be positive and sizes non-negative")
    design = np.stack([np.ones_like(x), x], axis=1) / t[:, None]
    (latency, inv_bw), _ = scipy.optimize.nnls(design, np.ones_like(t))
    if inv_bw <= 0:
        raise ValueError("fit_latency_bandwidth: times do not grow with size; no bandwidth can be fitted")
    return float(latency), float(1.0 / inv_bw)


def _ping_pong(topo: Any, emit: Any, sizes: Sequence[int], repeats: int) -> list[float]:
    """Rank program of :func:`network_latency_bandwidth` (:func:`ping_pong_times` of this rank)."""
    return ping_pong_times(topo.rank, sizes, repeats)


def ping_pong_times(rank: int, sizes: Sequence[int], repeats: int) -> list[float]:
    """Median one-way time (round trip / 2) per size between ranks 0 and 1 of the joined process group.

    Sizes are interleaved (every repeat runs all sizes), so a burst of load from other processes spoils one
    sample of several sizes, which the medians reject, rather than every sample of one size. The first round is
    a warm-up (connection set-up, allocation).

    Args:
        rank: this process's rank (0 or 1).
        sizes: message sizes in bytes.
        repeats: timed round trips per size.

    Returns:
        Seconds per size, in the order of ``sizes``.
    """
    from gnnplan.executor import comm

    first, second = (comm.send, comm.recv) if rank == 0 else (comm.recv, comm.send)
    bufs = [torch.zeros(size, dtype=torch.uint8) for size in sizes]
    times: list[list[float]] = [[] for _ in sizes]
    comm.barrier()
    for i in range(repeats + 1):  # the first round is a warm-up
        for buf, samples in zip(bufs, times):
            start = time.perf_counter()
            first(buf, 1 - rank)
            second(buf, 1 - rank)
            if i:
                samples.append((time.perf_counter() - start) / 2)
    return [float(np.median(samples)) for samples in times]


COLLECTIVE_BUSY_S = 0.001
"""Compute each rank does before each timed collective of :func:`collective_times_s` (a busy loop, seconds): in
training a collective follows compute, so the core goes from busy to waiting, as it does here."""
COLLECTIVE_CALLS = 100
"""Timed calls of each block of :func:`collective_means_s` (whatever the probe's size; ~0.2-0.5 s): a mean over a
slow quarter of the calls needs many."""
COLLECTIVE_BLOCKS = 4
"""Blocks of :data:`COLLECTIVE_CALLS` calls in which :func:`collective_means_s` times each kind of collective, the
all-reduce's and the all-to-all's in turn. One block's mean moves with the state of a shared machine: 2026-12-02,
this 2-core machine, the mean 1 KiB all-reduce after 1 ms of compute between two local processes took 0.48-5.35 ms
per block of 100 calls (4 spawns x 5 blocks; the means of a spawn's 5 blocks 1.86-3.09 ms), and three probes
timing one block each, within an hour, put ``network.per_collective_s`` at 0.16, 4.27 and 0.73 ms. Later, on a
calmer machine, benchmarks/bench_probe_collective.py (6 spawns, both estimators from the same calls) gave 0.66-1.55
ms from the first block alone and 0.58-0.85 ms from all 4 (max/min 2.35 -> 1.47; the first block was the slowest
in 4 of 6 spawns), and three probes with 4 blocks 0.25, 0.37 and 0.41 ms; a fourth, while the hypervisor took
1.4 s of CPU per 100 s from the idle machine (/proc/stat steal; 0.4 before), 4.48 ms: blocks average out a slow
minute, not a slow hour. Not what training pays: dp's 0.74 MB
all-reduces (DDP buckets) in three Cora runs that day took 2.0-2.4 ms on average from the last rank's arrival, so
a calibration still fits this cost (``gnnplan calibrate``)."""
COLLECTIVE_ELEMENTS = 256
"""float32 elements of :func:`collective_times_s`'s all-reduce (1 KiB; 128 per rank of two): many per rank, as in
every collective the executor makes. A one-element all-reduce is not representative: measured 2026-11-28 (trimmed
means of 100 calls after 1 ms of compute), an 8-byte float64 all-reduce took 0.13-0.21 ms between two local
processes and 0.18-0.36 ms between two emulated machines, while 16 B, 1 KiB and 64 KiB took 1.3-1.6 ms locally and
0.9-1.8 ms between the emulated machines (unshaped and at 1 Gbit/s, where 1 KiB is 8 us of transfer). Those figures
were measured while gloo's event-loop thread spun beside each call (before :mod:`executor.gloo_loop`); with it in
``SCHED_IDLE`` a 1 KiB all-reduce between two local processes took 0.32-0.47 ms (three probes, 2026-11-28)."""
COLLECTIVE_BYTES = 4 * COLLECTIVE_ELEMENTS
"""Bytes per rank of :func:`collective_times_s`'s all-reduce."""


def _busy_s(seconds: float) -> int:
    """Keep this core busy for ``seconds`` (reading the clock; no sleep, so the core never idles); returns the
    clock readings taken."""
    end, readings = time.perf_counter() + seconds, 1
    while time.perf_counter() < end:
        readings += 1
    return readings


def collective_times_s(repeats: int = COLLECTIVE_CALLS, all_to_all: bool = False) -> list[float]:
    """Seconds of each of ``repeats`` :data:`COLLECTIVE_BYTES` gloo ``all_reduce`` calls (float32) of the joined
    process group, each after :data:`COLLECTIVE_BUSY_S` of compute, after three untimed warm-ups. With
    ``all_to_all`` the call is an ``all_to_all_single`` of the same :data:`COLLECTIVE_ELEMENTS` per rank, an equal
    share to every rank (:func:`executor.comm.all_to_all_single`, as a feature pull and a gsplit shuffle call it).
    """
    from gnnplan.executor import comm

    value = torch.ones(COLLECTIVE_ELEMENTS, dtype=torch.float32)
    if all_to_all:
        splits = [len(part) for part in torch.tensor_split(value, comm.world_size())]
        received = torch.empty_like(value)

        def call() -> Any:
            return comm.all_to_all_single(received, value, splits, splits)
    else:
        def call() -> Any:
            return comm.all_reduce_(value)
    times = []
    comm.barrier()
    for i in range(repeats + 3):
        _busy_s(COLLECTIVE_BUSY_S)
        start = time.perf_counter()
        call()
        if i >= 3:
            times.append(time.perf_counter() - start)
    return times


TRIM_PROPORTION = 0.05
"""Share of a collective measurement's calls dropped at each end before the mean (:func:`trimmed_mean_s`): a rare
pause of the machine does not count, the slow mode of bimodal calls does."""


def trimmed_mean_s(times_s: Sequence[float]) -> float:
    """Mean of ``times_s`` (seconds) without the :data:`TRIM_PROPORTION` smallest and largest
    (:func:`scipy.stats.trim_mean`), in seconds.

    Raises:
        ValueError: ``times_s`` is empty.
    """
    import scipy.stats

    if len(times_s) == 0:
        raise ValueError("trimmed_mean_s: no times")
    return float(scipy.stats.trim_mean(times_s, TRIM_PROPORTION))


def collective_means_s(blocks: int = COLLECTIVE_BLOCKS, repeats: int = COLLECTIVE_CALLS) -> tuple[float, float]:
    """Mean seconds of a 1 KiB all-reduce and of a 1 KiB all-to-all call (:func:`collective_times_s`), each timed
    in ``blocks`` blocks of ``repeats`` calls, an all-reduce block and an all-to-all block in turn, so that a slow
    period of the machine falls on both alike; the mean over all of a kind's calls is trimmed
    (:func:`trimmed_mean_s`, 5% at each end) so that a rare pause does not count.

    The mean, not the median: an epoch sums its calls, so a per-call cost must be what a call costs on average
    (1 KiB calls between two local processes were bimodal, 0.57 ms median and 1.37 ms mean, while gloo's
    event-loop thread spun beside them, before :mod:`executor.gloo_loop`). Several blocks: one block's mean moves
    with the machine's state far more than its calls vary within it (:data:`COLLECTIVE_BLOCKS`).

    Returns:
        (all_reduce_s, all_to_all_s).

    Raises:
        ValueError: ``blocks`` or ``repeats`` below 1 (:func:`collective_blocks_s`).
    """
    reduce, exchange = collective_blocks_s(blocks, repeats)
    every_reduce = [t for block in reduce for t in block]
    every_exchange = [t for block in exchange for t in block]
    return trimmed_mean_s(every_reduce), trimmed_mean_s(every_exchange)


def collective_blocks_s(blocks: int = COLLECTIVE_BLOCKS, repeats: int = COLLECTIVE_CALLS
                        ) -> tuple[list[list[float]], list[list[float]]]:
    """The calls :func:`collective_means_s` averages, block by block: ``blocks`` blocks of ``repeats`` timed 1 KiB
    all-reduces and as many all-to-alls (:func:`collective_times_s`), an all-reduce block and an all-to-all block in
    turn (benchmarks/bench_probe_collective.py sets one block's mean against all of them).

    Returns:
        (all-reduce seconds per block, all-to-all seconds per block): each ``blocks`` lists of ``repeats`` seconds.

    Raises:
        ValueError: ``blocks`` or ``repeats`` below 1.
    """
    if blocks < 1 or repeats < 1:
        raise ValueError(f"blocks and repeats must be >= 1, got {blocks} and {repeats}")
    reduce: list[list[float]] = []
    exchange: list[list[float]] = []
    for _ in range(blocks):
        reduce.append(collective_times_s(repeats))
        exchange.append(collective_times_s(repeats, all_to_all=True))
    return reduce, exchange


JITTER_SEGMENTS_S = (0.0005, 0.002, 0.008)
"""Lengths of the fixed work :func:`straggler_jitter` does before its collectives, in turn (seconds on rank 0):
from a short layer's compute to a whole iteration's, so the square-root law of :mod:`simulator.jitter` is fitted
over the range training segments span."""
JITTER_CALLS = 240
"""Timed collectives of :func:`straggler_jitter` (~1 s), 80 per segment length."""
JITTER_MATMUL_DIM = 64
"""Side of the float32 matrices :func:`straggler_jitter` multiplies as its unit of work (a small kernel, as a
training step's are: a preempted unit delays the rank, unlike a busy loop that runs to a deadline)."""


def straggler_jitter(calls: int = JITTER_CALLS,
                     segments_s: Sequence[float] = JITTER_SEGMENTS_S) -> tuple[float, float, int]:
    """Measure ``jitter_s`` (:mod:`simulator.jitter`) in the joined process group: ``calls`` times, each rank does
    a fixed amount of work (``segments_s`` in turn, as a count of :data:`JITTER_MATMUL_DIM`-square matmuls timed on
    rank 0 and shared) and then a :data:`COLLECTIVE_BYTES` all-reduce, recording its arrival on the host's monotonic
    clock (every rank on one host, or in network namespaces of one host, reads the same clock); the arrivals are
    summed across ranks and the estimate fitted to the waits they imply (:func:`simulator.jitter.estimate_jitter`,
    each segment length a site). The first three calls are warm-up.

    Returns:
        (jitter_s, mean wait of the mean rank per call in seconds, calls used); (0.0, 0.0, 0) with one rank.
    """
    from gnnplan.executor import comm
    from gnnplan.simulator.jitter import Call, estimate_jitter

    world, rank = comm.world_size(), comm.rank()
    if world < 2:
        return 0.0, 0.0, 0
    torch.manual_seed(0)
    a, b = torch.randn(JITTER_MATMUL_DIM, JITTER_MATMUL_DIM), torch.randn(JITTER_MATMUL_DIM, JITTER_MATMUL_DIM)
    start = time.perf_counter()
    for _ in range(200):
        torch.mm(a, b)
    matmul_s = torch.tensor([(time.perf_counter() - start) / 200 if rank == 0 else 0.0], dtype=torch.float64)
    comm.all_reduce_(matmul_s)  # rank 0's time per matmul, shared: every rank does the same count
    units = [max(1, round(s / float(matmul_s))) for s in segments_s]
    value = torch.ones(COLLECTIVE_ELEMENTS, dtype=torch.float32)
    arrivals = torch.zeros(calls + 3, world, dtype=torch.float64)
    comm.barrier()
    for i in range(calls + 3):
        for _ in range(units[i % len(units)]):
            torch.mm(a, b)
        arrivals[i, rank] = time.perf_counter()
        comm.all_reduce_(value)
    comm.all_reduce_(arrivals)
    rows = arrivals.numpy()
    # the last warm-up call only releases the first timed one (a rank's first call has no previous release)
    fit = estimate_jitter([Call(i % len(units), {r: float(rows[i, r]) for r in range(world)})
                           for i in range(2, calls + 3)])
    return (0.0, 0.0, 0) if fit is None else (fit.value_s, fit.mean_wait_s, fit.num_calls)


def jitter_source(between: str, jitter_s: float, mean_wait_s: float, calls: int) -> str:
    """The ``sources`` method text of a :func:`straggler_jitter` measurement taken ``between`` two ranks (e.g.
    "2 spawned local processes")."""
    segments = ", ".join(f"{s * 1e3:g}" for s in JITTER_SEGMENTS_S)
    return (f"stragglers between {between}: {calls} gloo all_reduces of {COLLECTIVE_BYTES} bytes, each after a "
            f"fixed count of {JITTER_MATMUL_DIM}x{JITTER_MATMUL_DIM} matmuls ({segments} ms on rank 0, in turn); "
            f"the mean rank waited {mean_wait_s * 1e3:.3g} ms per call, fitted as sqrt(jitter_s * T) x the expected "
            f"maximum of the ranks' standard normals, T the work since the previous call released "
            f"(executor.probe_io.straggler_jitter, simulator.jitter): {jitter_s:.3g} s")


def network_latency_bandwidth(sizes: Sequence[int], repeats: int) -> tuple[float, float]:
    """gloo send/recv ping-pong between two spawned local processes over 127.0.0.1.

    Returns:
        (latency_s, bandwidth_bytes_per_s) fitted to the one-way times.
    """
    from gnnplan.executor.launch import spawn

    times = spawn(_ping_pong, 2, (list(sizes), repeats))
    return fit_latency_bandwidth(sizes, times)


def _drop_cache(fd: int) -> bool:
    """Ask the kernel to drop the file's clean pages; False where ``posix_fadvise`` does not exist."""
    if not hasattr(os, "posix_fadvise"):
        return False
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    return True


def storage_bandwidth_latency(folder: Path, sizes: Any) -> tuple[float, float, bool]:
    """Sequential read bandwidth and small-read latency of a temp file in ``folder``.

    The file is written, fsync'ed and its pages dropped from the page cache before each pass; bandwidth is the
    median over ``repeats`` sequential passes in ``storage_block_bytes`` reads; latency is the median of random
    4 KiB ``pread``s at distinct offsets (readahead off) minus 4 KiB / bandwidth.

    Args:
        folder: where the temporary file is written.
        sizes: the probe's :class:`executor.probe_host.Sizes` (``storage_block_bytes``, ``storage_file_bytes``,
            ``repeats``, ``storage_small_reads``).

    Returns:
        (bandwidth_bytes_per_s, latency_s, whether the page cache could be dropped).
    """
    folder.mkdir(parents=True, exist_ok=True)
    block = np.random.default_rng(0).integers(0, 256, sizes.storage_block_bytes, dtype=np.uint8).tobytes()
    buf = bytearray(sizes.storage_block_bytes)
    with tempfile.TemporaryFile(dir=folder) as fh:
        for _ in range(sizes.storage_file_bytes // len(block)):
            fh.write(block)
        fh.flush()
        os.fsync(fh.fileno())
        fd, passes, dropped = fh.fileno(), [], True
        for _ in range(sizes.repeats):
            dropped = _drop_cache(fd) and dropped
            start, offset = time.perf_counter(), 0
            while (got := os.preadv(fd, [buf], offset)) > 0:
                offset += got
            passes.append(offset / (time.perf_counter() - start))
        bandwidth = float(np.median(passes))
        _drop_cache(fd)
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        pages = sizes.storage_file_bytes // 4096
        small = []
        for page in np.random.default_rng(1).choice(pages, min(pages, sizes.storage_small_reads), replace=False):
            start = time.perf_counter()
            os.pread(fd, 4096, int(page) * 4096)
            small.append(time.perf_counter() - start)
    return bandwidth, max(0.0, float(np.median(small)) - 4096 / bandwidth), dropped
