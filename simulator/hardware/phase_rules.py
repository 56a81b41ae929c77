"""How calibration prices the spans of a trace phase: :class:`PhaseRule` (which priced operation of
:data:`~gnnplan.simulator.hardware.pricing.OPERATIONS` a phase is, and the work one span carries) and
:class:`SpanRow` (what a rule sees of one measured span). A strategy's ``CALIBRATION`` maps its trace phases to
rules (:mod:`gnnplan.simulator.strategies.contract`); :mod:`gnnplan.simulator.calibrate` turns the rows into
residuals and prices them through the same functions the simulation uses."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from gnnplan.simulator.hardware.pricing import OPERATIONS
from gnnplan.simulator.hardware.spec import ClusterSpec
from gnnplan.simulator.trace import Span


@dataclass(frozen=True)
class SpanRow:
    """What a :class:`PhaseRule` sees of one measured span.

    Attributes:
        span: the span (for ``rows="iteration_sum"``, one span summing the phase's spans of the iteration:
            durations, FLOPs and bytes added, ``args["num_spans"]`` their count).
        iteration: the spans of positive duration of the same rank, epoch and iteration, by phase: training's
            or the evaluation's (its ``eval_*`` spans number its chunks from 0 as well; they are kept apart).
        knobs: the plan's knob values.
        shape: the trace's cluster (its machines x GPUs) at the starting parameters. A rule's ``work`` reads its
            shape (and parameters calibration does not fit), never a fitted parameter: calibration prices the
            work at each trial's parameters by passing that cluster to :meth:`PhaseRule.predicted_s`.
        profile: the strategy's compute profile (``compute_profile``) on that shape, by phase (filled for the
            rules with ``profiled``).
        peers: the spans of the same phase on the machine's other ranks that overlap this one in time, what
            shares the machine's host memory, PCIe switches and NICs while it runs (filled for the rules with
            ``peers``; calibration's ``overlapping_peers``).
    """

    span: Span
    iteration: Mapping[str, Sequence[Span]]
    knobs: Mapping[str, Any]
    shape: ClusterSpec
    profile: Mapping[str, Any] = field(default_factory=dict)
    peers: Sequence[Span] = ()


@dataclass(frozen=True)
class PhaseRule:
    """How calibration prices the spans of one trace phase.

    Attributes:
        op: a key of :data:`OPERATIONS`.
        work: the operation's keyword arguments for one row (its ``cluster`` is supplied by calibration).
        rows: ``each`` span is a row; ``iteration_sum``: the phase's spans of one rank and iteration summed
            into one row; ``per_call``: per iteration and call (the k-th span of the phase in a rank's iteration),
            one row from every rank's span of it: the rank that moved the most bytes, from the last rank's
            arrival to its end (a collective, so waiting for stragglers is excluded; calibration's
            ``calibrate_calls.call_row``).
        target: the measured seconds the prediction is compared with (default: the span's duration).
        min_machines: rows are used only for traces with at least this many machines (e.g. 2 for a network
            phase that is empty on one machine).
        min_workers: likewise in workers.
        profiled: ``work`` reads ``row.profile[phase]``: calibration computes the plug-in's compute profile for
            the trace and drops the rows of a phase the profile lacks.
        when: rows are made only of the spans for which this returns true (default: all), e.g. the spans of one
            loader setting whose duration is the priced work alone.
        peers: ``work`` reads ``row.peers`` (rows ``each`` or ``per_call``): calibration finds, for every span, the
            spans of its phase the machine's other ranks ran at the same time.
        call_load: for ``per_call`` rows, what makes a rank of the call the busiest (default: the span's bytes).
        contains: phases whose spans lie inside this phase's spans (dp's ``load`` waits for its ``fetch``): a
            report must not add their times to this phase's (:func:`nested_phases`).
    """

    op: str
    work: Callable[[SpanRow], dict[str, float]]
    rows: Literal["each", "iteration_sum", "per_call"] = "each"
    target: Callable[[SpanRow], float] | None = None
    min_machines: int = 1
    min_workers: int = 1
    profiled: bool = False
    when: Callable[[SpanRow], bool] | None = None
    peers: bool = False
    call_load: Callable[[SpanRow], float] | None = None
    contains: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.op not in OPERATIONS:
            raise ValueError(f"op: unknown priced operation {self.op!r}; allowed: {', '.join(OPERATIONS)}")
        if self.rows not in ("each", "iteration_sum", "per_call"):
            raise ValueError(f"rows: unknown row kind {self.rows!r}; allowed: each, iteration_sum, per_call")
        if self.peers and self.rows == "iteration_sum":
            raise ValueError("peers: a row summing an iteration's spans has no spans beside it; rows must be 'each' "
                             "or 'per_call'")

    @property
    def params(self) -> tuple[str, ...]:
        """The cluster parameters (dotted paths) this rule's spans inform: its operation's."""
        return OPERATIONS[self.op].params

    def applies(self, row: SpanRow) -> bool:
        """Whether ``row`` becomes a calibration row (:attr:`when`)."""
        return self.when is None or bool(self.when(row))

    def measured_s(self, row: SpanRow) -> float:
        """The measured seconds of a row."""
        return self.target(row) if self.target is not None else row.span.dur_s

    def predicted_s(self, row: SpanRow, cluster: ClusterSpec | None = None) -> float:
        """The priced seconds of a row on ``cluster`` (default ``row.shape``; calibration passes the shape with
        the trial's values of :attr:`params`)."""
        return OPERATIONS[self.op].seconds(row.shape if cluster is None else cluster, **self.work(row))


def nested_phases(calibration: Mapping[str, PhaseRule]) -> dict[str, str]:
    """Inner phase -> the phase whose spans contain it (:attr:`PhaseRule.contains` of a strategy's
    ``CALIBRATION``)."""
    return {inner: outer for outer, rule in calibration.items() for inner in rule.contains}
