"""The one span schema shared by the simulator and the executor, and its Chrome-trace reading and writing.

Chrome trace event format (opens in Perfetto / chrome://tracing): complete events ``ph: "X"`` with ``ts`` and
``dur`` in microseconds, ``pid`` = rank, ``tid`` = stream, ``name`` = phase, ``args`` = {nbytes, flops, epoch,
iteration, ...}. Streams are named by ``thread_name`` metadata events (``ph: "M"``) so that ``tid`` stays an
integer, as the format requires. A top-level ``metadata`` object carries cluster, workload, strategy, knobs,
versions and measured results (DESIGN.md, "Traces").

Phases used by the mini-batch strategies: ``sample``, ``load`` (feature loading), ``forward``, ``backward``,
``all_reduce``, ``optimizer``; ``epoch`` spans wrap whole epochs, ``iteration`` spans whole iterations. An
executor's evaluation after each epoch (dp, hopgnn, gsplit: layer-wise inference) adds ``eval_sample``,
``eval_fetch``, ``eval_load``, ``eval_forward`` and on a GPU ``eval_to_host``, one per layer and chunk (iteration
``layer * chunks + chunk``), after the epoch's ``epoch`` span.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from gnnplan.simulator.errors import SpecError, one_line
from gnnplan.simulator.io import MAX_TRACE_BYTES, atomic_write_text, read_json
from gnnplan.simulator.limits import INT64_MAX, MAX_BLOCK_ITEMS, check_block

STREAMS = ("compute", "sampler", "pcie", "nvlink", "network", "storage", "host")
EVALUATION_PHASES = ("eval_sample", "eval_fetch", "eval_load", "eval_forward", "eval_to_host")
"""The phases of an executor's evaluation after each epoch (executor/evaluate.py), not part of the epoch's time."""
MAX_TRACE_US = 1.0e15
"""Largest ``ts`` and ``dur`` read, in microseconds (~32 years; a timeline beyond it is corrupt)."""
MAX_PID = 2**31 - 1
"""Largest ``pid``/``tid``: Chrome's trace viewer and Perfetto store them as 32-bit integers."""


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

    def on_rank(self, rank: int) -> Span:
        """This span on another rank, ``args`` shared: what ``dataclasses.replace(self, rank=rank)`` returns,
        built without the frozen dataclass's ``__init__`` (which sets each field through ``object.__setattr__``).
        A representative's spans are copied to every rank it stands for (:mod:`simulator.symmetry`): 45,000 copies
        for a 64-GPU dp window, 2.8x faster this way than through ``__init__`` (2026-12-01)."""
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy.__dict__["rank"] = rank
        return copy


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


class _Strict(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False, frozen=True)


class SpanArgs(_Strict):
    """``args`` of a complete event: the span's counters; further keys are kept as :attr:`Span.args`."""

    nbytes: float = Field(default=0.0, ge=0)
    flops: float = Field(default=0.0, ge=0)
    epoch: int = Field(default=-1, ge=-1, le=INT64_MAX)
    iteration: int = Field(default=-1, ge=-1, le=INT64_MAX)

    @field_validator("epoch", "iteration", mode="before")
    @classmethod
    def _whole(cls, value: Any) -> Any:
        """Indices are whole numbers (``2.0`` passes, ``1.5`` does not)."""
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value


class CompleteEvent(_Strict):
    """A Chrome complete event (``ph: "X"``): one span (module docstring)."""

    ph: Literal["X"]
    name: str = Field(min_length=1)
    pid: int = Field(ge=0, le=MAX_PID)
    tid: int | str
    ts: float = Field(ge=0, le=MAX_TRACE_US, description="start, microseconds")
    dur: float = Field(ge=0, le=MAX_TRACE_US, description="duration, microseconds")
    args: SpanArgs = SpanArgs()


class ThreadName(_Strict):
    """A ``thread_name`` metadata event naming stream ``tid`` of process ``pid``."""

    ph: Literal["M"]
    name: Literal["thread_name"]
    pid: int = Field(ge=0, le=MAX_PID)
    tid: int | str
    args: dict[Literal["name"], str]


class TraceFile(_Strict):
    """The top level of a Chrome trace: ``traceEvents`` (each a JSON object; complete and ``thread_name`` events
    are checked by :class:`CompleteEvent` and :class:`ThreadName`, others pass unread) and an optional free-form
    ``metadata`` object (plain, finite, bounded data: :func:`simulator.limits.check_block`)."""

    traceEvents: list[dict[str, Any]]  # noqa: N815 (the Chrome trace format's name)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("metadata")
    @classmethod
    def _plain(cls, value: dict[str, Any]) -> dict[str, Any]:
        check_block(value, max_items=10 * MAX_BLOCK_ITEMS)
        return value


def read_trace(path: str | Path) -> tuple[list[Span], dict[str, Any]]:
    """Read a Chrome trace written by :func:`write_trace` (by the simulator or the executor), checking it against
    the schema (:class:`TraceFile`, :class:`CompleteEvent`, :class:`ThreadName`; a ``plan`` in the metadata is
    validated as :class:`simulator.plan.Plan`).

    Returns:
        (spans sorted by start time, metadata).

    Raises:
        SpecError: the file is missing, larger than :data:`simulator.io.MAX_TRACE_BYTES`, not JSON, or breaks the
            schema; one line naming the file and the field (``trace t.json: traceEvents.3.ts: ...``).
    """
    p = Path(path)
    doc = read_json(p, "trace", MAX_TRACE_BYTES, kind="a Chrome trace (JSON)")
    where = f"trace {p.name}"
    if not isinstance(doc, dict):
        raise SpecError(f"{where}: not a Chrome trace: must hold a JSON object with traceEvents, got "
                        f"{type(doc).__name__}")
    return _from_document(doc, where)


def _from_document(doc: dict[str, Any], where: str) -> tuple[list[Span], dict[str, Any]]:
    """A Chrome-trace JSON object checked against the schema (:class:`TraceFile`, a ``plan`` in the metadata as a
    :class:`simulator.plan.Plan`): (spans sorted by start time, metadata); a one-line SpecError naming ``where``
    and the field otherwise."""
    try:
        top = TraceFile.model_validate(doc)
    except ValidationError as exc:
        raise SpecError(one_line(exc, where)) from None
    spans, names = _spans(top.traceEvents, where)
    spans = [_named(s, names) for s in spans]
    spans.sort(key=lambda s: (s.start_s, s.rank))
    _check_plan(top.metadata, where)
    return spans, dict(top.metadata)


def checked_trace(name: Any, trace: Any) -> tuple[list[Span], dict[str, Any]]:
    """A trace held in memory, ``(spans, metadata)`` as :func:`read_trace` returns it, checked as a file of it
    would be: :class:`Span` objects and a metadata mapping, then the Chrome JSON they make
    (:func:`to_chrome`) read back against the schema. The Python API's ``calibrate({name: (spans, metadata)})``
    fitted whatever it was given, a simulated trace included, or failed inside with a TypeError (2026-12-01).

    Returns:
        (spans sorted by start time, metadata), as :func:`read_trace`.

    Raises:
        SpecError: ``name`` not a string, ``trace`` not such a pair, or it breaks the schema (one line naming it).
    """
    if not isinstance(name, str) or not name:
        raise SpecError(f"traces: a trace's name must be a non-empty string (got {name!r})")
    where = f"trace {name}"
    if not isinstance(trace, (tuple, list)) or len(trace) != 2 or not isinstance(trace[1], dict) or \
            not isinstance(trace[0], list) or not all(isinstance(x, Span) for x in trace[0]):
        raise SpecError(f"{where}: must be (spans, metadata): a list of Span and a mapping, as read_trace returns")
    try:
        doc = json.loads(json.dumps(to_chrome(trace[0], trace[1]), allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise SpecError(f"{where}: not a trace a file could hold ({exc})") from None
    return _from_document(doc, where)


SOURCES = {"simulator": "gnnplan simulate --trace", "executor": "gnnplan run"}
"""The ``source`` a trace's metadata names, and the command that writes such a trace."""


def check_source(meta: dict[str, Any], want: str, what: str) -> None:
    """Refuse a trace whose metadata names another ``source`` than ``want`` (a trace without one is accepted):
    a predicted trace given where a measured one is read, or the reverse.

    Raises:
        SpecError: one line naming ``what`` (the argument), the trace's source and the command that writes the kind
            wanted.
    """
    found = meta.get("source", want)
    if found != want:
        raise SpecError(f"{what}: this trace was written by the {found}, not the {want}; give a trace of "
                        f"{SOURCES.get(want, want)}")


def check_same_run(predicted: dict[str, Any], measured: dict[str, Any], what: str) -> None:
    """Refuse a predicted trace of another configuration than the measured one: their metadata's ``strategy``,
    the dataset of their ``workload``, the strategy's knobs (with their defaults filled in) and the worker count
    (at the top level or in its ``plan``) must agree where both give them (the cluster may differ: a prediction on a
    calibrated copy of the cluster the run used).

    Raises:
        SpecError: one line naming ``what`` and the two values.
    """
    def of(meta: dict[str, Any], key: str) -> Any:
        plan: dict[str, Any] = meta["plan"] if isinstance(meta.get("plan"), dict) else {}
        workload: dict[str, Any] = meta["workload"] if isinstance(meta.get("workload"), dict) else \
            plan.get("workload") or {}
        if key == "workload.dataset":
            return workload.get("dataset")
        return meta.get(key, plan.get(key))

    pairs = {key: (of(predicted, key), of(measured, key)) for key in ("strategy", "workload.dataset", "num_workers")}
    strategy = pairs["strategy"][0] or pairs["strategy"][1]
    knobs = [_full_knobs(strategy, of(meta, "knobs")) for meta in (predicted, measured)]
    if knobs[0] is not None and knobs[1] is not None:
        pairs |= {f"knobs.{k}": (knobs[0][k], knobs[1].get(k)) for k in knobs[0]}
    for name, (a, b) in pairs.items():
        if a is not None and b is not None and a != b:
            raise SpecError(f"{what}: its {name} is {a!r}, the measured trace's {b!r}; compare a prediction with "
                            "a run of the same configuration")


def _full_knobs(strategy: Any, knobs: Any) -> dict[str, Any] | None:
    """``knobs`` of ``strategy`` with the defaults filled in (a trace may list only the knobs its plan set); None
    when either is missing or they do not validate (the trace's reader reports that)."""
    if not isinstance(strategy, str) or not isinstance(knobs, dict):
        return None
    from gnnplan.simulator.api import coerce_knobs

    try:
        return coerce_knobs(strategy, knobs).model_dump(mode="json")
    except SpecError:
        return None


def read_measured(paths: Sequence[str | Path], measured_only: bool = True
                  ) -> list[tuple[str | Path, tuple[list[Span], dict[str, Any]]]]:
    """Read the traces of a calibration, each once: a trace given twice (the same file, or a copy with the same
    bytes), or two traces holding the same epochs, would be fitted through the copy while "held out"; with
    ``measured_only`` a predicted trace (metadata ``source`` ``simulator``) is refused, as no measurement.

    Returns:
        (path as given, (spans, metadata)) per trace, in order.

    Raises:
        SpecError: a missing or malformed trace, one given twice, one that repeats another's epochs (a resumed
            run's trace and the trace of the run it continued: :func:`epoch_fingerprints`), or (``measured_only``)
            one the simulator wrote (naming it).
    """
    seen: dict[Any, str | Path] = {}
    epochs_seen: dict[str, tuple[str | Path, int]] = {}
    out = []
    for p in paths:
        path = Path(p)
        for key in (path.resolve(), hashlib.sha1(path.read_bytes()).hexdigest() if path.is_file() else None):
            if key is not None and key in seen:
                again = "given twice" if str(p) == str(seen[key]) else f"{str(seen[key])!r} again"
                raise SpecError(f"TRACE: {str(p)!r} is {again}; give each trace once")
            seen[key] = p
        trace = read_trace(p)
        if measured_only:
            check_source(trace[1], "executor", f"TRACE {p}")
        prints = epoch_fingerprints(trace[0])
        repeated = sorted((epoch, epochs_seen[h]) for epoch, h in prints.items() if h in epochs_seen)
        if repeated:
            other = repeated[0][1][0]
            mine = [e for e, (q, _) in repeated if q == other]
            raise SpecError(f"TRACE: {str(p)!r} repeats {_epoch_list(mine)} of {str(other)!r} (a run resumed "
                            "from a checkpoint carries the epochs before it); give each run once, by its last trace")
        epochs_seen.update({h: (p, epoch) for epoch, h in prints.items()})
        out.append((p, trace))
    return out


def epoch_fingerprints(spans: Sequence[Span]) -> dict[int, str]:
    """Per epoch index of ``spans``, a digest of every span of that epoch (rank, phase, stream, start, duration,
    bytes, FLOPs, iteration): two traces sharing one are the same measurement, as a run resumed from a checkpoint
    repeats the earlier epochs' spans (:mod:`executor.checkpoint`); two runs never time every span alike."""
    by_epoch: dict[int, list[tuple[Any, ...]]] = {}
    for s in spans:
        if s.epoch >= 0:
            by_epoch.setdefault(s.epoch, []).append((s.rank, s.phase, s.stream, s.start_s, s.dur_s, s.nbytes,
                                                     s.flops, s.iteration))
    return {epoch: hashlib.sha1(repr(sorted(rows)).encode()).hexdigest() for epoch, rows in by_epoch.items()}


def _epoch_list(epochs: list[int]) -> str:
    """``epoch 3`` or ``epochs 0-4`` (a contiguous run) or ``epochs 0, 2, 5``."""
    if len(epochs) == 1:
        return f"epoch {epochs[0]}"
    if epochs == list(range(epochs[0], epochs[-1] + 1)):
        return f"epochs {epochs[0]}-{epochs[-1]}"
    return "epochs " + ", ".join(map(str, epochs))


def _spans(events: list[dict[str, Any]], where: str) -> tuple[list[Span], dict[tuple[int, str], str]]:
    """The spans of the complete events (stream = raw tid until named) and the thread names, validated."""
    spans: list[Span] = []
    names: dict[tuple[int, str], str] = {}
    for i, e in enumerate(events):
        try:
            if e.get("ph") == "X":
                ev = CompleteEvent.model_validate(e)
                a = ev.args
                extra = dict(a.model_extra or {})
                spans.append(Span(rank=ev.pid, phase=ev.name, start_s=ev.ts / 1e6, dur_s=ev.dur / 1e6,
                                  stream=f"\0{ev.tid}", nbytes=a.nbytes, flops=a.flops, epoch=a.epoch,
                                  iteration=a.iteration, args=extra))
            elif e.get("ph") == "M" and e.get("name") == "thread_name":
                tn = ThreadName.model_validate(e)
                names[(tn.pid, str(tn.tid))] = tn.args["name"]
        except ValidationError as exc:
            raise SpecError(one_line(exc, f"{where}: traceEvents.{i}")) from None
    return spans, names


def _named(span: Span, names: dict[tuple[int, str], str]) -> Span:
    """The span with its raw ``\0<tid>`` stream replaced by the thread's name (or the tid when unnamed)."""
    from dataclasses import replace

    tid = span.stream[1:]
    return replace(span, stream=names.get((span.rank, tid), tid))


def _check_plan(metadata: dict[str, Any], where: str) -> None:
    """A ``plan`` in the metadata must be a valid :class:`simulator.plan.Plan` (calibration rebuilds it)."""
    if "plan" not in metadata:
        return
    from gnnplan.simulator.plan import Plan

    try:
        Plan.model_validate(metadata["plan"])
    except ValidationError as exc:
        raise SpecError(one_line(exc, f"{where}: metadata.plan")) from None


def span_dict(s: Span) -> dict[str, Any]:
    """A span as a plain dict (for tables)."""
    return asdict(s)
