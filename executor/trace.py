"""A low-overhead span recorder for the executor, producing :class:`simulator.trace.Span` (the shared schema).

Times are ``time.perf_counter()`` readings (CLOCK_MONOTONIC on Linux, so comparable across the processes of
one machine, e.g. sampler workers) taken by the caller; the recorder stores raw tuples and converts them to
spans relative to an origin only when asked. Every rank takes its origin right after a barrier, so ranks'
time lines line up to within the barrier's skew. Recording never synchronises a device.

Phases and streams follow common.md: ``sample`` (sampler), ``load`` (pcie), ``fetch`` (network, nested in
load), ``forward``/``backward``/``optimizer`` (compute), ``all_reduce`` (network), ``iteration``/``epoch``
(host).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from gnnplan.simulator.trace import Span, write_trace

now = time.perf_counter
"""The clock every executor span is measured with."""


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

    def add(self, phase: str, start_s: float, end_s: float, stream: str, epoch: int = -1, iteration: int = -1,
            nbytes: float = 0.0, flops: float = 0.0, **args: Any) -> None:
        """Record one span from two ``perf_counter()`` readings."""
        self._rows.append((phase, start_s, end_s, stream, epoch, iteration, nbytes, flops, args))

    def __len__(self) -> int:
        return len(self._rows)

    def spans(self) -> list[Span]:
        """The recorded spans, times relative to the origin, in recording order."""
        o = self.origin_s
        return [Span(self.rank, phase, start - o, max(0.0, end - start), stream, float(nbytes), float(flops),
                     epoch, iteration, args)
                for phase, start, end, stream, epoch, iteration, nbytes, flops, args in self._rows]


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
