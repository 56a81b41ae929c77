"""Calibration: fit a cluster's physical parameters to measured spans, regularised toward measured priors, and
report the error of predictions the fit did not see.

Calibration knows no strategy. For each trace it looks up the strategy's plug-in in the registry
(:func:`~gnnplan.simulator.strategies.get_strategy`) and reads its ``CALIBRATION``: trace phase ->
:class:`~gnnplan.simulator.hardware.phase_rules.PhaseRule`, i.e. which priced operation of
:mod:`~gnnplan.simulator.hardware.pricing` a span of that phase is (the same functions the simulator's processes
use, with their formulas and sources) and the work it carries (shared rules:
:mod:`~gnnplan.simulator.strategies.calibration_rules`). Spans of positive duration become rows, per rule: one per
span, one per rank and iteration summing the phase's spans (compute phases: a full-graph strategy runs several
blocks of different shape per phase, priced with the plug-in's ``compute_profile``), or one row per iteration and
collective call (rule ``rows="per_call"``; the k-th span of the phase in a rank's iteration is the k-th call, e.g.
one row per shuffle of a layer): the span of the rank that moved the most bytes, timed from the last rank's arrival
to its end, so waiting for stragglers is excluded and the time is that of the busiest NIC (a rank that mostly sends
can end while its bytes are still in TCP buffers; the one that receives them cannot); a rule may require several
machines or workers (a network phase is empty on one). A row informs the parameters of its operation
(:data:`~gnnplan.simulator.hardware.pricing.OPERATIONS`, ``params``) that are among :data:`PARAMS`, and only those:
at trial parameter values the row is priced on the trace's cluster shape with just those fields replaced, so e.g. an
``exchange`` row moves the network parameters while its PCIe legs keep the cluster's values (one span cannot tell
its legs apart; PCIe is determined by ``load`` spans). A rule may take only some spans of its phase
(``PhaseRule.when``, e.g. the loads of one loader setting). A span phase the plug-in has no rule for is ignored and
listed in the report (``fit["unpriced_phases"]``; ``epoch`` spans give the measured epoch times).

Fixed costs are parameters of their own, each where it is paid: ``gpu.kernel_overhead_s`` per kernel (compute
rows), ``network.latency_s`` per message, ``network.per_collective_s`` per all-reduce call,
``network.per_all_to_all_s`` per ``all_to_all`` call (each of a fetch's three, a shuffle), ``host.sampler_handoff_s``
per batch a trainer takes from a sampler process and ``iteration_overhead_s`` per iteration (both from the
``iteration`` rows: an iteration's time minus its phases). Each is fitted in log space with a prior, the value
``gnnplan probe`` measured (the cluster's ``priors`` block, else its own value), so per-byte and per-edge rates
no longer absorb fixed Python costs, and a parameter the traces cannot tell from another (hand-off and
per-iteration overhead, on traces of one sampler setting) stays near its measurement. The solver, uncertainties
and flags (``at bound``, ``not informed``, ``beyond 3x of prior``, ``no prior``) are
:mod:`~gnnplan.simulator.calibrate_fit`'s.

Stragglers: ``jitter_s`` (the arrival noise the simulator's barriers wait for) is not fitted here but kept as
``gnnplan probe`` measured it with fixed work (:mod:`~gnnplan.simulator.jitter`). A real trace shows the stragglers
as ranks arriving at a collective at different times, which a call's row leaves out (it starts at the last
arrival); a predicted trace's collective span holds the expected straggler wait after the last arrival and says
how long (``straggler_s``, :meth:`~gnnplan.simulator.engine.Rendezvous.straggler_args`), which the row leaves out
too (before 2026-11-29 it did not: a dp prediction on a cluster of ``jitter_s`` 2e-4, calibrated on its own
cluster, fitted the all-to-all's fixed cost 3.2x). The waits at a trace's
collective calls also hold the variation of the work itself from one iteration to the next (dp's remote rows per
batch): estimated from the bench_whatif record's traces (rec27, 2026-11-28), the same model's parameter ranged
from 1.5e-6 (gsplit) to 2.8e-4 (dp at 100 Mbit/s, its fetch waits) across strategies and rates, so a value
fitted to one configuration's traces did not carry to the others (held-out MAPE 7.9% -> 9.2% when it did).

No closure: calibration used to solve ``iteration_overhead_s`` so the simulator reproduced the calibration
traces' epoch times, which made the in-sample error 0 by construction and moved every unmodelled second into a
per-iteration constant that scaled wrongly with the number of iterations. The ``iteration`` rows measure that
overhead directly; what remains unexplained shows in the held-out errors.

Epochs: those ``gnnplan run`` measured its epoch time on (``results.measured_epochs``): of a trace with 3 or more
epochs the first (warm-up) is left out, and so are the epochs in which hopgnn's merge controller tried a step
count it did not keep. The calibrated cluster is fitted on all remaining epochs of all traces; its report's errors are
held out (:mod:`~gnnplan.simulator.calibrate_holdout`): a fit on the even epochs predicts the odd ones, and with
several configurations each is predicted by a fit on the others. The only in-sample figure,
``traces[name]["fit_epoch_time_s"]``, is labelled a fit.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from gnnplan.simulator.calibrate_calls import call_row, overlapping_peers, row_spans, span_key
from gnnplan.simulator.calibrate_fit import FitResult, FitRow, fit
from gnnplan.simulator.calibrate_holdout import (
    EPOCH_PHASE,
    EpochSplit,
    configuration_key,
    epoch_times_s,
    evaluation_times_s,
    held_out_configurations,
    held_out_epochs,
    split_epochs,
)
from gnnplan.simulator.calibrate_memory import calibrate_memory, measured_host_bytes, with_process_bytes
from gnnplan.simulator.calibrate_params import PARAMS, get_param, priors_of, with_params
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.phase_rules import PhaseRule, SpanRow
from gnnplan.simulator.hardware.spec import ClusterSpec, load_cluster, runs_as
from gnnplan.simulator.plan import Plan, shaped_like
from gnnplan.simulator.result import SimResult
from gnnplan.simulator.strategies import get_strategy
from gnnplan.simulator.trace import EVALUATION_PHASES, Span, read_measured

__all__ = ["PARAMS", "calibrate", "calibrate_files", "get_param", "with_params"]

SimulateFn = Callable[[ClusterSpec, Plan], SimResult]


@dataclass
class _Trace:
    name: str
    plan: Plan
    measured_epoch_s: float
    shape: ClusterSpec
    spans: list[Span]
    plugin: ModuleType
    epoch_times_s: dict[int, float]
    split: EpochSplit
    evaluation_times_s: dict[int, float]
    device: str | None = None
    """What the run computed on (its results' ``device``; None in traces from before 2026-11-30)."""
    background: dict[str, Any] | None = None
    """What else ran on the machine during its measured epochs (results' ``background``, executor.run_load)."""


def _default_simulate(cluster: ClusterSpec, plan: Plan) -> SimResult:
    from gnnplan.simulator.api import simulate

    return simulate(shaped_like(cluster, plan), plan.workload, plan.strategy, plan.knobs)


def _profile(trace: _Trace) -> dict[str, Any]:
    """The plug-in's compute profile on the trace's cluster shape (module docstring)."""
    from gnnplan.simulator.api import load_context

    plan = trace.plan
    module, knobs, ctx = load_context(trace.shape, plan.workload, plan.strategy, plan.knobs)
    return dict(module.compute_profile(ctx, knobs))


def _load_trace(name: str, spans: list[Span], meta: Mapping[str, Any], cluster: ClusterSpec) -> _Trace:
    if "plan" not in meta:
        raise SpecError(f"TRACE {name}: no 'plan' in its metadata; give a trace written by gnnplan run")
    plan = Plan.model_validate(meta["plan"])
    results = meta.get("results", {}) or {}
    measured = results.get("epoch_time_s")
    if measured is None:
        epochs = [s.dur_s for s in spans if s.phase == EPOCH_PHASE]
        measured = float(np.median(epochs)) if epochs else float("nan")
    timed = epoch_times_s(spans)
    split = split_epochs({s.epoch for s in spans}, timed, results.get("measured_epochs"), timed)
    device = results.get("device")
    return _Trace(name, plan, float(measured), shaped_like(cluster, plan), spans, get_strategy(plan.strategy), timed,
                  split, evaluation_times_s(results), str(device) if device else None, results.get("background"))


def _collect(t: _Trace) -> tuple[list[FitRow], set[str]]:
    """One trace's rows (module docstring): per rank and iteration, each rule of the plug-in's ``CALIBRATION``
    in order, then the ``per_call`` rows; and the span phases no rule prices."""
    rules: Mapping[str, PhaseRule] = t.plugin.CALIBRATION
    unpriced = {s.phase for s in t.spans if s.phase not in rules and s.phase != EPOCH_PHASE}
    usable = {p: r for p, r in rules.items()
              if t.shape.num_machines >= r.min_machines and t.shape.num_gpus >= r.min_workers}
    # the evaluation numbers its chunks from 0 in every epoch as training numbers its iterations: apart, so that a
    # row's iteration holds the spans of one of them
    by_key: dict[tuple[int, int, int, bool], dict[str, list[Span]]] = defaultdict(lambda: defaultdict(list))
    for s in t.spans:
        by_key[(s.rank, s.epoch, s.iteration, s.phase in EVALUATION_PHASES)][s.phase].append(s)
    rows: list[tuple[str, PhaseRule, SpanRow]] = []
    calls: dict[tuple[str, int, int, int], list[SpanRow]] = defaultdict(list)  # every rank's span of a call
    peers = {phase: overlapping_peers([s for s in t.spans if s.phase == phase and s.dur_s > 0],
                                      t.shape.gpus_per_machine)
             for phase, rule in usable.items() if rule.peers}
    for (_, epoch, it, _), phases in by_key.items():
        iteration = {p: [s for s in spans if s.dur_s > 0] for p, spans in phases.items()}
        for phase, rule in usable.items():
            # the k-th span of a phase in a rank's iteration is the k-th call of that collective on every rank
            for call, s in enumerate(sorted(row_spans(rule, iteration.get(phase, [])), key=lambda x: x.start_s)):
                row = SpanRow(s, iteration, t.plan.knobs, t.shape,
                              peers=peers[phase].get(span_key(s), ()) if rule.peers else ())
                if not rule.applies(row):
                    continue
                key = (phase, epoch, it, call)
                if rule.rows != "per_call":
                    rows.append((phase, rule, row))
                else:
                    calls[key].append(row)
    rows += [(key[0], usable[key[0]], call_row(spans, usable[key[0]].call_load)) for key, spans in calls.items()]
    return _fit_rows(t, rows), unpriced


def calibration_rows(spans: Sequence[Span], meta: Mapping[str, Any],
                     cluster: ClusterSpec) -> tuple[list[FitRow], set[str]]:
    """The rows calibration fits for one trace (module docstring): each a priced operation, its work and the
    seconds the trace took (``FitRow``), and the span phases no rule prices. ``meta``: the trace's metadata
    (``plan`` needed); ``cluster``: the cluster the rows are shaped on.

    Raises:
        SpecError: the metadata has no plan.
    """
    return _collect(_load_trace("trace", list(spans), meta, cluster))


def _fit_rows(t: _Trace, rows: list[tuple[str, PhaseRule, SpanRow]]) -> list[FitRow]:
    """The rows as :class:`FitRow` objects, with the plug-in's compute profile for the rules that read it (rows
    of a phase the profile lacks are dropped)."""
    profile = _profile(t) if any(rule.profiled for _, rule, _ in rows) else {}
    out = []
    for phase, rule, row in rows:
        if rule.profiled:
            if phase not in profile:
                continue
            row = replace(row, profile=profile)
        out.append(FitRow(f"{t.name}:{phase}", t.name, row.span.epoch, rule.op, rule.work(row), rule.measured_s(row),
                          t.shape))
    return out


class _Calibration:
    """The loaded traces and their rows, fitted to any selection of epochs."""

    def __init__(self, traces: list[_Trace], base: ClusterSpec) -> None:
        self.traces, self.base = traces, base
        self.rows: list[FitRow] = []
        self.unpriced: set[str] = set()
        for t in traces:
            rows, unpriced = _collect(t)
            self.rows += rows
            self.unpriced |= unpriced

    def measured(self) -> dict[str, Collection[int]]:
        """Every trace's measured epochs (the warm-up left out)."""
        return {t.name: t.split.measured for t in self.traces}

    def fit(self, selection: Mapping[str, Collection[int]]) -> FitResult:
        """Fit the starting cluster to the rows of the selected epochs.

        Raises:
            SpecError: no row in the selection.
        """
        rows = [r for r in self.rows if r.trace in selection and r.epoch in selection[r.trace]]
        if not rows:
            raise SpecError("calibrate: the traces hold no span their strategies' CALIBRATION prices (phases seen "
                            f"without a rule: {', '.join(sorted(self.unpriced)) or 'none'})")
        return fit(rows, self.base)

    def fitted_cluster(self, selection: Mapping[str, Collection[int]]) -> ClusterSpec:
        """The starting cluster with the parameters fitted to the selected epochs (validated)."""
        result = self.fit(selection)
        return with_params(self.base, {p: v for p, v in result.values.items() if result.parameters[p]["fitted"]})


def calibrate(spans_by_trace: Mapping[str, tuple[Sequence[Span], Mapping[str, Any]]],
              cluster: str | Path | ClusterSpec, *,
              simulate_fn: SimulateFn | None = None) -> tuple[ClusterSpec, dict[str, Any]]:
    """Fit the cluster's parameters to measured spans and report held-out prediction errors.

    Args:
        spans_by_trace: trace name -> (spans, metadata) as returned by :func:`simulator.trace.read_trace`;
            metadata needs ``plan`` (a Plan dict) and should have ``results.epoch_time_s``.
        cluster: the cluster to start from (preset name, YAML path or spec); its ``priors`` (else its values) are
            the priors.
        simulate_fn: ``(cluster, plan) -> SimResult`` used for the predictions (default: re-simulate the plan
            with :func:`simulator.api.simulate`, with the trace's cluster shape).

    Returns:
        (calibrated cluster named ``<name>-calibrated`` with ``sources`` and ``priors`` updated, report). The
        report has ``parameters`` {path: {prior, before, after, low, high, ratio_to_prior, num_rows,
        constrained, fitted, data_share, at_bound, flags}} (:mod:`~gnnplan.simulator.calibrate_fit`), ``traces`` {name:
        {measured_epoch_time_s, predicted_epoch_time_s_before, fit_epoch_time_s (in-sample: a fit, not a
        prediction)}}, ``held_out`` {epochs, configurations} (:mod:`~gnnplan.simulator.calibrate_holdout`),
        ``fit`` {cost, num_residuals, rounds, message, noise_s, prior_width_factor, unpriced_phases} and
        ``memory``: ``host.process_bytes`` fitted to the traces' measured peak host memory, with its held-out
        errors (:func:`~gnnplan.simulator.calibrate_memory.calibrate_memory`; the calibrated cluster carries it
        when a trace measured its peak); ``busy`` {name: its ``results.background``}: the traces whose measured
        epochs other processes kept busy; ``other_machines`` {name: where it ran (:func:`ran_on`)}: the traces
        that did not run on the device ``cluster`` models (:func:`ran_here`: its recorded device, else its plan's
        GPU model; a run on this machine fitted into a catalogue preset: the fit moves that preset's parameters
        toward another machine's).

    Raises:
        SpecError: no traces, a trace without a plan or of an unknown strategy, or no span that informs any
            parameter.
    """
    base = load_cluster(cluster)
    if not spans_by_trace:
        raise SpecError("calibrate: give at least one trace")
    traces = [_load_trace(name, list(spans), meta, base) for name, (spans, meta) in spans_by_trace.items()]
    cal = _Calibration(traces, base)
    result = cal.fit(cal.measured())
    calibrated = _calibrated_cluster(base, result, [t.name for t in traces])
    simulate = simulate_fn or _default_simulate
    memory_fit, memory = calibrate_memory(
        [(t.name, t.plan, measured_host_bytes(spans_by_trace[t.name][1])) for t in traces], base,
        lambda cl, plan: float(simulate(cl, plan).peak_memory_bytes["host"]))
    if memory_fit is not None:
        calibrated = with_process_bytes(calibrated, memory_fit, list(memory["fit"]))

    simulated: dict[tuple[str, str], SimResult] = {}

    def simulate_once(cl: ClusterSpec, plan: Plan) -> SimResult:  # epoch and evaluation time from one simulation
        key = (cl.model_dump_json(), configuration_key(plan))
        if key not in simulated:
            simulated[key] = simulate(cl, plan)
        return simulated[key]

    def predict(cl: ClusterSpec, plan: Plan) -> float:
        return float(simulate_once(cl, plan).epoch_time_s)

    def predict_evaluation(cl: ClusterSpec, plan: Plan) -> float | None:
        return simulate_once(cl, plan).evaluation_time_s

    before = {t.name: predict(base, t.plan) for t in traces}
    evaluation_before = {t.name: predict_evaluation(base, t.plan) for t in traces}
    report: dict[str, Any] = {
        "cluster": calibrated.name, "parameters": result.parameters,
        "traces": {t.name: {"measured_epoch_time_s": t.measured_epoch_s,
                            "predicted_epoch_time_s_before": before[t.name],
                            "fit_epoch_time_s": predict(calibrated, t.plan)} for t in traces},
        "held_out": {"epochs": held_out_epochs(traces, cal.fitted_cluster, predict, before, predict_evaluation,
                                               evaluation_before),
                     "configurations": held_out_configurations(traces, cal.fitted_cluster, predict, before)},
        "fit": {**result.info, "unpriced_phases": sorted(cal.unpriced)},
        "memory": memory,
        "other_machines": {t.name: ran_on(t) for t in traces if not ran_here(t, base)},
        "busy": {t.name: t.background for t in traces if t.background and t.background.get("busy_epochs")},
    }
    return calibrated, report


def ran_on(t: _Trace) -> str:
    """Where trace ``t``'s run computed: its recorded device, else its plan's cluster and GPU model."""
    if t.device is not None:
        return f"{t.device} (its plan: {t.plan.cluster.name})"
    return f"{t.plan.cluster.name} ({t.plan.cluster.gpu.model})"


def ran_here(t: _Trace, base: ClusterSpec) -> bool:
    """Whether trace ``t``'s run computed on the kind of device ``base`` models: the recorded device names
    ``base``'s GPU model (a CPU run records the CPU's name, as the probe writes it), or without a record its plan's
    GPU model is ``base``'s."""
    if t.device is not None:
        return runs_as(t.device, base)
    return t.plan.cluster.gpu.model == base.gpu.model


def _calibrated_cluster(base: ClusterSpec, result: FitResult, names: list[str]) -> ClusterSpec:
    """The starting cluster with the fitted parameters, named ``<name>-calibrated``; ``sources`` name the traces
    and ``priors`` keep every fitted parameter's prior (module docstring)."""
    fitted = [p for p in PARAMS if result.parameters[p]["fitted"]]
    calibrated = with_params(base, {p: result.values[p] for p in fitted})
    sources = dict(base.sources)
    for p in fitted:
        flags = result.parameters[p]["flags"]
        sources[p] = f"calibrated from {', '.join(names)}" + (f" ({', '.join(flags)})" if flags else "")
    priors = dict(base.priors)
    priors.update({p: v for p, v in priors_of(base).items() if p in fitted and v > 0 and p not in priors})
    return calibrated.model_copy(update={"name": calibrated_name(base.name), "sources": sources, "priors": priors})


def calibrated_name(name: str) -> str:
    """The name of cluster ``name`` once calibrated: ``<name>-calibrated``, or ``name`` itself when it is a calibrated
    one already (calibrating it again refines it: not ``X-calibrated-calibrated``)."""
    return name if name.endswith("-calibrated") else f"{name}-calibrated"


def calibrate_files(paths: Sequence[str | Path], cluster: str | Path | ClusterSpec, *,
                    simulate_fn: SimulateFn | None = None, measured_only: bool = False
                    ) -> tuple[ClusterSpec, dict[str, Any]]:
    """:func:`calibrate` on Chrome-trace files (trace name = file name), read by :func:`simulator.trace.read_measured`.

    ``measured_only``: refuse predicted traces (the user-facing ``gnnplan calibrate`` does; a test that fits
    a simulation's own trace, whose answer is known, does not).

    Raises:
        SpecError: a missing, malformed or repeated trace file, a predicted one with ``measured_only``, or see
            :func:`calibrate`.
    """
    loaded = {}
    for p, trace in read_measured(paths, measured_only):
        name = Path(p).name
        if name in loaded:
            name = str(p)
        loaded[name] = trace
    return calibrate(loaded, cluster, simulate_fn=simulate_fn)

