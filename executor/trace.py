"""A low-overhead span recorder for the executor, producing :class:`simulator.trace.Span` (the shared schema).

Times are :func:`now` readings (``time.perf_counter()``: CLOCK_MONOTONIC on Linux, so comparable across the
processes of one machine, e.g. sampler workers) taken by the caller; the recorder stores raw tuples and converts
them to spans relative to an origin only when asked. Every rank takes its origin right after a barrier, so
ranks' time lines line up to within the barrier's skew.

On a GPU, kernels run asynchronously: a host clock read right after a launch times the launch, not the kernel.
A worker on CUDA therefore calls :func:`synchronize_spans_on` with its device at start-up, and from then on every
:func:`now` reading first waits for the device's queued work (``torch.cuda.synchronize``), so each span ends when
its kernels have finished. On the CPU nothing is synchronised. Source: PyTorch docs, "CUDA semantics",
asynchronous execution ("use torch.cuda.synchronize() ... for time measurements").

Phases and streams follow common.md: ``sample`` (sampler), ``load`` (pcie), ``fetch`` (network, nested in
load), ``forward``/``backward``/``optimizer`` (compute), ``all_reduce`` (network), ``iteration``/``epoch``
(host); the evaluation's ``eval_*`` (executor/evaluate.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gnnplan.simulator.trace import Span, write_trace

_sync: Callable[[], None] | None = None


def now() -> float:
    """The clock every executor span is measured with: ``perf_counter()`` seconds, after waiting for the device's
    queued kernels when :func:`synchronize_spans_on` was called with a CUDA device."""
    if _sync is not None:
        _sync()
    return time.perf_counter()


def synchronize_spans_on(device: Any) -> bool:
    """Make :func:`now` wait for ``device``'s queued work before each reading when it is a CUDA device.

    Args:
        device: a ``torch.device`` or device string; anything but CUDA turns synchronisation off.

    Returns:
        Whether readings now synchronise.
    """
    global _sync
    import torch

    dev = torch.device(device)
    _sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else None
    return _sync is not None


class Recorder:
    """Collects one rank's spans.

    Args:
        rank: the rank spans belong to.
        origin_s: ``perf_counter()`` reading that becomes time 0 of the trace.
    """

    def __init__(self, rank: int, origin_s: float) -> None:
        self.rank = rank
        self.origin_s = origin_s
        self._rows: list[tuple[Any, ...]] = []
        self._deferred: list[Callable[[], None]] = []

    def add(self, phase: str, start_s: float, end_s: float, stream: str, epoch: int = -1, iteration: int = -1,
            nbytes: float = 0.0, flops: float = 0.0, **args: Any) -> None:
        """Record one span from two ``perf_counter()`` readings."""
        self._rows.append((phase, start_s, end_s, stream, epoch, iteration, nbytes, flops, args))

    def defer(self, record: Callable[[], None]) -> None:
        """Record spans later: ``record()`` (which calls :meth:`add` with clock readings taken earlier) runs when
        the spans are next read, so bookkeeping that costs time, such as a pass's FLOP count (the simulator's
        model cost, ~0.06-0.12 ms per call on Cora), stays out of the timed training loop."""
        self._deferred.append(record)

    def __len__(self) -> int:
        self._run_deferred()
        return len(self._rows)

    def _run_deferred(self) -> None:
        pending, self._deferred = self._deferred, []
        for record in pending:
            record()

    def spans(self) -> list[Span]:
        """The recorded spans (deferred ones included), times relative to the origin; deferred spans come after
        those recorded directly."""
        self._run_deferred()
        o = self.origin_s
        return [Span(self.rank, phase, start - o, max(0.0, end - start), stream, float(nbytes), float(flops),
                     epoch, iteration, args)
                for phase, start, end, stream, epoch, iteration, nbytes, flops, args in self._rows]


def defer_passes(rec: Recorder, cost: Callable[[], Any], times: tuple[float, float, float], epoch: int,
                 iteration: int, **forward_args: Any) -> None:
    """Record one pass's ``forward`` span (``times[0]`` to ``times[1]``) and ``backward`` span (to ``times[2]``)
    with the FLOPs of ``cost()`` (an object with ``forward_flops`` and ``backward_flops``, e.g. the simulator's
    :func:`~gnnplan.simulator.workload.model_cost.model_cost` of the batch's block sizes), when the spans are read
    (:meth:`Recorder.defer`): computing the cost took 0.06 ms a batch on Cora inside the forward span.

    Args:
        rec: the rank's recorder.
        cost: computes the pass's cost (called once, outside the timed loop).
        times: (forward start, forward end = backward start, backward end), ``perf_counter()`` seconds.
        epoch, iteration: the span's place.
        forward_args: further arguments of the forward span (e.g. ``num_seeds``).
    """
    def record() -> None:
        c = cost()
        rec.add("forward", times[0], times[1], "compute", epoch, iteration, flops=c.forward_flops, **forward_args)
        rec.add("backward", times[1], times[2], "compute", epoch, iteration, flops=c.backward_flops)

    rec.defer(record)


def record_load(rec: Recorder, phases: tuple[str, str], times: tuple[float, float], epoch: int, iteration: int,
                row_bytes: int, counts: tuple[int, int, int, int], fetch: Any = None,
                **load_args: Any) -> tuple[int, int, int]:
    """Record a feature load's span and, when it pulled rows from other ranks, the pull's span inside it (the
    schema both the trainers' ``load``/``fetch`` and the evaluation's ``eval_load``/``eval_fetch`` follow, as
    calibration reads them).

    Args:
        rec: the rank's recorder.
        phases: (load phase, fetch phase).
        times: the load's (start, end), ``perf_counter()`` seconds.
        epoch, iteration: the spans' place.
        row_bytes: bytes of one row.
        counts: rows (asked, cache hits, local misses, remote misses).
        fetch: the pull's :class:`~gnnplan.executor.features.PullStats` (``num_rows``, ``request_bytes``,
            ``reply_bytes``, ``start_s``, ``end_s``), or None when nothing was pulled.
        load_args: further arguments of the load span (e.g. hopgnn's ``step``).

    Returns:
        Bytes (hit, local, remote).
    """
    asked, hits, local, remote = counts
    hit_b, local_b, remote_b = hits * row_bytes, local * row_bytes, remote * row_bytes
    rec.add(phases[0], times[0], times[1], "pcie", epoch, iteration, nbytes=local_b + remote_b, hit_bytes=hit_b,
            local_bytes=local_b, remote_bytes=remote_b, num_input_vertices=asked, **load_args)
    if fetch is not None:  # a collective: every rank records its call
        rec.add(phases[1], fetch.start_s, fetch.end_s, "network", epoch, iteration,
                nbytes=fetch.reply_bytes + fetch.request_bytes, num_remote_vertices=fetch.num_rows)
    return hit_b, local_b, remote_b


def trace_path(trace_dir: str | Path, workload: str, strategy: str) -> Path:
    """A new file name ``<trace_dir>/<workload>-<strategy>-<YYYYmmdd-HHMMSS>.json`` (``-1``, ``-2``, ... appended
    if that name is taken)."""
    folder = Path(trace_dir)
    stem = f"{workload}-{strategy}-{time.strftime('%Y%m%d-%H%M%S')}"
    path, k = folder / f"{stem}.json", 0
    while path.exists():
        k += 1
        path = folder / f"{stem}-{k}.json"
    return path


def save(path: Path, spans: list[Span], metadata: dict[str, Any]) -> Path:
    """Write spans of all ranks (sorted by rank, then start) and metadata as one Chrome trace, atomically."""
    ordered = sorted(spans, key=lambda s: (s.rank, s.start_s))
    return write_trace(path, ordered, metadata)
