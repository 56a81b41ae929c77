"""``gnnplan probe``'s collective measurements between two spawned gloo processes: the fixed costs of an
all-reduce, an all-to-all and a DDP bucket, and the stragglers' ``jitter_s`` (:func:`per_collective_s`;
:mod:`executor.probe_overheads` adds them with their sources to the probe's cluster mapping).

* ``network.per_collective_s``: two spawned gloo processes on 127.0.0.1 time a 1 KiB float32 ``all_reduce``
  (:data:`executor.probe_io.COLLECTIVE_BYTES`: many elements per rank, as every collective of the executor; a
  one-element all-reduce is several times faster than any larger one), each call after 1 ms of compute, trimmed
  mean over 4 blocks of 100 calls, in turn with the all-to-all's blocks (:func:`executor.probe_io.collective_means_s`;
  one block's mean moved 0.5-5.4 ms on this machine, 2026-12-02), the measurement ``gnnplan probe --emulate``
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
* ``jitter_s`` (stragglers at collectives, :mod:`simulator.jitter`): in the same two processes, 240 all-reduces
  each after a fixed count of small matmuls (:func:`executor.probe_io.straggler_jitter`); not a prior (calibration
  keeps it, :mod:`simulator.calibrate`). On a CUDA machine the work is still the host's (its sampling and kernel
  launches share that noise); a GPU kernel's own timing noise is not measured. ``network.per_collective_s``'s
  calls follow a busy loop to a deadline, which a preemption delays only when it covers the deadline, so its mean
  holds little of this waiting.
"""

from __future__ import annotations

import copy
import time
from typing import Any, NamedTuple

import numpy as np
import torch

from gnnplan.executor.probe_calls import MIN_FIXED_S
from gnnplan.executor.probe_io import (
    COLLECTIVE_BYTES,
    COLLECTIVE_CALLS,
    collective_means_s,
    straggler_jitter,
    trimmed_mean_s,
)
from gnnplan.simulator.hardware.collectives import ring_all_reduce_time_s

DDP_MODEL_DIMS = (1433, 128, 7)
"""The linear layers whose gradients the DDP measurement reduces (184k parameters, 0.74 MB: one bucket; the sizes
of a 2-layer model on Cora)."""


def _collective_rank(topo: Any, emit: Any, repeats: int) -> tuple[float, ...]:
    """Rank program of :func:`per_collective_s`: median one-way 8-byte message time, the mean 1 KiB all-reduce
    and all-to-all after compute (:func:`executor.probe_io.collective_means_s`, as ``gnnplan probe --emulate``
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
    reduce, exchange = collective_means_s()
    ddp, flat = _ddp_bucket_times(COLLECTIVE_CALLS)  # means of bimodal calls: as many rounds as the collective
    jitter, wait, calls = straggler_jitter()
    return float(np.median(one_way)), reduce, exchange, ddp, flat, jitter, wait, calls


def bucket_bytes() -> int:
    """Bytes of the DDP measurement's gradient (float32 weights and biases of :data:`DDP_MODEL_DIMS`)."""
    a, b, c = DDP_MODEL_DIMS
    return 4 * (a * b + b + b * c + c)


def _ddp_bucket_times(repeats: int) -> tuple[float, float]:
    """Trimmed mean seconds (:func:`executor.probe_io.trimmed_mean_s`, as the collectives'), over interleaved
    rounds after three warm-ups, of a DDP model's one gradient bucket (:class:`executor.ddp.GradientHook`, as the
    executor's ``all_reduce`` span starts) from its launch on the last rank to the return of ``backward``, and of
    a plain ``all_reduce`` of the same bytes after the same backward without DDP, from the last rank's call to its
    return (collective: every rank calls it). The ranks share one host's monotonic clock; the start times are
    max-reduced after the timed call."""
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
    return trimmed_mean_s(bucket), trimmed_mean_s(flat)


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
    """The fixed costs of a gloo all-reduce and all-to-all between two local processes, DDP's per bucket and the
    stragglers' ``jitter_s`` (module docstring).

    Args:
        repeats: timed rounds of the one-way message.
        latency_s: the modelled latency of one message (``network.latency_s``, seconds).
        bandwidth_bytes_per_s: the modelled rate between the processes (``network.bandwidth_bytes_per_s``).

    Returns:
        The :class:`CollectiveCosts`.

    Raises:
        executor.monitor.WorkerError: a spawned process raised, died or stopped responding.
    """
    from gnnplan.executor.launch import spawn

    one_way, reduce, exchange, ddp, flat, jitter, wait, calls = spawn(_collective_rank, 2, (repeats,))
    return CollectiveCosts(collective_fixed_s(reduce, latency_s, bandwidth_bytes_per_s),
                           all_to_all_fixed_s(exchange, latency_s, bandwidth_bytes_per_s), one_way, reduce, exchange,
                           max(ddp - flat, MIN_FIXED_S), jitter, wait, int(calls))


def collective_fixed_s(all_reduce_s: float, latency_s: float, bandwidth_bytes_per_s: float) -> float:
    """A collective's fixed cost (seconds) from :func:`executor.probe_io.collective_means_s`'s all-reduce between
    two ranks (:data:`~executor.probe_io.COLLECTIVE_BYTES` each; ``all_reduce_s`` seconds): its time minus what the
    simulator already charges for it, the ring all-reduce of those bytes at ``latency_s`` and
    ``bandwidth_bytes_per_s`` (:func:`simulator.hardware.collectives.ring_all_reduce_time_s`, W = 2: two messages
    and the bytes once; Thakur, Rabenseifner and Gropp, IJHPCA 19(1), 2005, §4.5), at least :data:`MIN_FIXED_S`."""
    ring = ring_all_reduce_time_s(COLLECTIVE_BYTES, 2, bandwidth_bytes_per_s, latency_s)
    return max(all_reduce_s - ring, MIN_FIXED_S)


def all_to_all_fixed_s(all_to_all_s: float, latency_s: float, bandwidth_bytes_per_s: float) -> float:
    """An all-to-all call's fixed cost (seconds) from :func:`executor.probe_io.collective_means_s`'s all-to-all
    between two ranks (``all_to_all_s`` seconds; each rank keeps half of its
    :data:`~executor.probe_io.COLLECTIVE_BYTES` and sends the other half): its time minus what the simulator
    already charges for it, one message of those bytes at ``latency_s`` and ``bandwidth_bytes_per_s`` (a pull's or
    a shuffle's message to each other machine), at least :data:`MIN_FIXED_S`."""
    return max(all_to_all_s - latency_s - COLLECTIVE_BYTES / 2 / bandwidth_bytes_per_s, MIN_FIXED_S)
