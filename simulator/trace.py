"""The one span schema shared by the simulator and the executor, and its Chrome-trace reading and writing.

Chrome trace event format (opens in Perfetto / chrome://tracing): complete events ``ph: "X"`` with ``ts`` and
``dur`` in microseconds, ``pid`` = rank, ``tid`` = stream, ``name`` = phase, ``args`` = {nbytes, flops, epoch,
iteration, ...}. Streams are named by ``thread_name`` metadata events (``ph: "M"``) so that ``tid`` stays an
integer, as the format requires. A top-level ``metadata`` object carries cluster, workload, strategy, knobs,
versions and measured results (DESIGN.md, "Traces").

Phases used by the mini-batch strategies: ``sample``, ``load`` (feature loading), ``forward``, ``backward``,
``all_reduce``, ``optimizer``; ``epoch`` spans wrap whole epochs, ``iteration`` spans whole iterations.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.io import atomic_write_text

STREAMS = ("compute", "sampler", "pcie", "nvlink", "network", "storage", "host")


@dataclass(frozen=True)
class Span:
    """One timed piece of work on one rank.

    Attributes:
        rank: worker (pid in the trace).
        phase: what was done (``sample``, ``load``, ``forward``, ...).
        start_s: start, seconds from the trace origin.
        dur_s: duration in seconds.
        stream: where it ran (``compute``, ``pcie``, ``network``, ...).
        nbytes: bytes moved by the span (0 if none).
        flops: floating-point operations done by the span (0 if none).
        epoch: epoch index (-1 if not applicable).
        iteration: iteration index within the epoch (-1 if not applicable).
        args: further counters (e.g. ``num_input_vertices``, ``remote_bytes``).
    """

    rank: int
    phase: str
    start_s: float
    dur_s: float
    stream: str = "compute"
    nbytes: float = 0.0
    flops: float = 0.0
    epoch: int = -1
    iteration: int = -1
    args: dict[str, Any] = field(default_factory=dict)

    @property
    def end_s(self) -> float:
        """End time in seconds."""
        return self.start_s + self.dur_s


def _tid(stream: str, tids: dict[str, int]) -> int:
    if stream not in tids:
        tids[stream] = len(tids)
    return tids[stream]


def to_chrome(spans: list[Span], metadata: dict[str, Any], pid_offset: int = 0, label: str = "rank") -> dict[str, Any]:
    """Convert spans to a Chrome-trace JSON object (see module docstring).

    Args:
        spans: the spans.
        metadata: the top-level ``metadata`` object.
        pid_offset: added to every rank to form its ``pid`` (0 = pid is the rank).
        label: process names are ``f"{label} {rank}"``.
    """
    tids: dict[str, int] = {s: i for i, s in enumerate(STREAMS)}
    events: list[dict[str, Any]] = []
    used: set[tuple[int, str]] = set()
    for s in spans:
        tid = _tid(s.stream, tids)
        used.add((s.rank, s.stream))
        args = {"nbytes": s.nbytes, "flops": s.flops, "epoch": s.epoch, "iteration": s.iteration, **s.args}
        events.append({"ph": "X", "name": s.phase, "pid": s.rank + pid_offset, "tid": tid, "ts": s.start_s * 1e6,
                       "dur": s.dur_s * 1e6, "args": args})
    for rank, stream in sorted(used):
        events.append({"ph": "M", "name": "thread_name", "pid": rank + pid_offset, "tid": tids[stream],
                       "args": {"name": stream}})
    for rank in sorted({r for r, _ in used}):
        events.append({"ph": "M", "name": "process_name", "pid": rank + pid_offset,
                       "args": {"name": f"{label} {rank}"}})
    return {"traceEvents": events, "displayTimeUnit": "ms", "metadata": metadata}


def write_trace(path: str | Path, spans: list[Span], metadata: dict[str, Any]) -> Path:
    """Write spans and metadata as a Chrome trace, atomically.

    Returns:
        The path written.
    """
    return atomic_write_text(path, json.dumps(to_chrome(spans, metadata)))


def read_trace(path: str | Path) -> tuple[list[Span], dict[str, Any]]:
    """Read a Chrome trace written by :func:`write_trace` (by the simulator or the executor).

    Returns:
        (spans sorted by start time, metadata).

    Raises:
        SpecError: the file is missing or is not a Chrome trace.
    """
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"trace: file {str(p)!r} does not exist")
    try:
        doc = json.loads(p.read_text())
        events = doc["traceEvents"]
    except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError, RecursionError):
        raise SpecError(f"trace: {p} is not a Chrome trace JSON object with traceEvents") from None
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    spans = []
    for e in events:
        if e.get("ph") != "X":
            continue
        args = dict(e.get("args", {}))
        spans.append(Span(rank=int(e["pid"]), phase=str(e["name"]), start_s=float(e["ts"]) / 1e6,
                          dur_s=float(e["dur"]) / 1e6, stream=names.get((e["pid"], e["tid"]), str(e["tid"])),
                          nbytes=float(args.pop("nbytes", 0.0)), flops=float(args.pop("flops", 0.0)),
                          epoch=int(args.pop("epoch", -1)), iteration=int(args.pop("iteration", -1)), args=args))
    spans.sort(key=lambda s: (s.start_s, s.rank))
    return spans, dict(doc.get("metadata", {}))


def span_dict(s: Span) -> dict[str, Any]:
    """A span as a plain dict (for tables)."""
    return asdict(s)
