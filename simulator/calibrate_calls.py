"""How calibration reads a trace's spans of one phase into rows (:mod:`simulator.calibrate`, module docstring):
a rule's spans of one rank and iteration summed into one (``iteration_sum``), the spans of the same machine's other
ranks each span overlapped (what shared its host memory, PCIe switches and NICs), and one row per collective call
from every rank's span of it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import replace

from gnnplan.simulator.hardware.phase_rules import PhaseRule, SpanRow
from gnnplan.simulator.trace import Span


def row_spans(rule: PhaseRule, spans: list[Span]) -> list[Span]:
    """The spans of one phase, rank and iteration that become rows of ``rule`` (``per_call``: the candidates);
    ``iteration_sum`` adds them into one span (durations, bytes and FLOPs; ``args["num_spans"]`` their count)."""
    if rule.rows != "iteration_sum" or not spans:
        return spans
    first = spans[0]
    return [Span(first.rank, first.phase, first.start_s, sum(x.dur_s for x in spans), first.stream,
                 sum(x.nbytes for x in spans), sum(x.flops for x in spans), first.epoch, first.iteration,
                 {"num_spans": float(len(spans))})]


def span_key(s: Span) -> tuple[int, int, int, float]:
    return (s.rank, s.epoch, s.iteration, s.start_s)


def overlapping_peers(spans: Sequence[Span], gpus_per_machine: int) -> dict[tuple[int, int, int, float],
                                                                              tuple[Span, ...]]:
    """For every span (keyed by rank, epoch, iteration and start), the spans of the other ranks of its machine
    (ranks ``m * g .. m * g + g - 1`` on machine ``m``) that overlap it in time: ``spans`` are one phase's, so these
    are what shared the machine's host memory, PCIe switches and NICs with it (a rule with ``peers`` prices the
    sharing: :func:`~gnnplan.simulator.strategies.calibration_rules.load_rule`). Spans that only touch do not
    overlap. One sweep per machine over the spans sorted by start, ``O(n log n + overlaps)``."""
    by_machine: dict[int, list[Span]] = defaultdict(list)
    for s in spans:
        by_machine[s.rank // gpus_per_machine].append(s)
    out: dict[tuple[int, int, int, float], list[Span]] = defaultdict(list)
    for group in by_machine.values():
        group.sort(key=lambda x: x.start_s)
        active: list[Span] = []  # started, and not yet ended at the current span's start
        for s in group:
            active = [a for a in active if a.start_s + a.dur_s > s.start_s]
            for a in active:
                if a.rank != s.rank:
                    out[span_key(s)].append(a)
                    out[span_key(a)].append(s)
            active.append(s)
    return {k: tuple(v) for k, v in out.items()}


def with_machine_bytes(spans: list[SpanRow]) -> list[SpanRow]:
    """Every rank's span of one call with the arg ``machine_bytes``: the largest sum of one machine's ranks'
    bytes in it, what that machine's NICs carry (a rule may price the call by it:
    :func:`~gnnplan.simulator.strategies.calibration_rules.fetch_rule`)."""
    g = spans[0].shape.gpus_per_machine
    per_machine: dict[int, float] = {}
    for r in spans:
        per_machine[r.span.rank // g] = per_machine.get(r.span.rank // g, 0.0) + r.span.nbytes
    most = max(per_machine.values())
    return [replace(r, span=replace(r.span, args={**r.span.args, "machine_bytes": most})) for r in spans]


def call_row(spans: list[SpanRow], load: Callable[[SpanRow], float] | None = None) -> SpanRow:
    """One collective call's row from every rank's span of it (module docstring): the rank that moved the most
    bytes (``load``: what counts instead of its span's bytes), timed from the last rank's arrival (before it
    nothing could move) to its own end. A rank that sends more than it receives may end before its bytes arrive
    (TCP buffers them), so the fastest rank's span is not the busiest NIC's time; the busiest rank must wait for
    its bytes. Several ranks that moved the most (an
    all-reduce moves the same bytes on every rank) are timed to their mean end: which of them ends last is noise,
    and a late one delays its own next iteration by as much as a slower transfer would (its lateness at the next
    call is an arrival delay the straggler model, ``jitter_s``, waits for, from the last arrival, so it is not
    counted twice). Clocks that put that end before the last arrival fall back to the fastest rank's span."""
    def moved(r: SpanRow) -> float:
        return load(r) if load is not None else r.span.nbytes

    last = max(r.span.start_s for r in spans)
    most = max(moved(r) for r in spans)
    spans = with_machine_bytes(spans)
    tied = [r for r in spans if moved(r) == most]
    busiest = min(tied, key=lambda r: r.span.start_s + r.span.dur_s)
    # ranks that moved the same bytes (an all-reduce) finish in any order: a late one delays its next iteration
    # as much as a slow transfer would, so their mean end is the call's
    # a simulated span says how long it waited for the expected stragglers after the last arrival (a real trace
    # shows them as later arrivals, which ``last`` already leaves out)
    straggled = float(busiest.span.args.get("straggler_s", 0.0))
    dur = sum(r.span.start_s + r.span.dur_s for r in tied) / len(tied) - last - straggled
    if dur <= 0:
        fastest = min(spans, key=lambda r: r.span.dur_s)
        return replace(fastest, span=replace(fastest.span, nbytes=most))
    return replace(busiest, span=replace(busiest.span, start_s=last, dur_s=dur))
