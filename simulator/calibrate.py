"""Calibration: fit a cluster's effective parameters to measured spans with bounded least squares.

Calibration knows no strategy. For each trace it looks up the strategy's plug-in in the registry
(:func:`~gnnplan.simulator.strategies.get_strategy`) and reads its ``CALIBRATION``: trace phase ->
:class:`~gnnplan.simulator.hardware.pricing.PhaseRule`, i.e. which priced operation of
:mod:`~gnnplan.simulator.hardware.pricing` a span of that phase is (the same functions the simulator's processes
use, with their formulas and sources) and the work it carries (shared rules:
:mod:`~gnnplan.simulator.strategies.calibration_rules`). Spans of positive duration become rows, per rule: one
per span, one per rank and iteration summing the phase's spans (compute phases: a full-graph strategy runs several
blocks of different shape per phase, priced with the plug-in's ``compute_profile``), or the fastest rank's span
per iteration (a collective, so waiting for stragglers is excluded); a rule may require several machines or
workers (a network phase is empty on one). A row informs the parameters of its operation
(:data:`~gnnplan.simulator.hardware.pricing.OPERATIONS`, ``params``) that are among :data:`PARAMS`, and only
those: at trial parameter values the row is priced on the trace's cluster shape with just those fields replaced,
so e.g. an ``exchange`` row moves the network parameters while its PCIe legs keep the cluster's values (one span
cannot tell its legs apart; PCIe is determined by ``load`` spans). The per-kernel overhead is not fitted: within
one run the FLOPs barely vary, so it and the efficiency cannot be told apart. The ``iteration`` rule measures
``iteration_overhead_s`` as the iteration's time minus its phases on the strategy's trainer path and its
sampling, the starting point of the closure below. A span phase the plug-in has no rule for is ignored and
listed in the report (``fit["unpriced_phases"]``; ``epoch`` spans give the measured epoch time instead).

Residuals are ``(predicted - measured) / mean measured duration of the span kind`` (a kind is a trace phase,
its rows' durations summed spans for ``iteration_sum`` rules), so the fit matches each
kind's *mean* duration: an epoch is a sum of spans, and on a busy machine span times are skewed, so a
per-span relative or robust loss (which tracks the typical, median-like span) underpredicts sums. Each span
kind has equal total weight, the loss is plain least squares, and a small ridge on the log change of each
parameter keeps parameters that the traces do not determine where they were. Parameters whose data Jacobian
column is zero (no span informs them) are not changed; one the traces inform only weakly can still move far,
up to its bound (1e4 x its start), e.g. the network bandwidth of a latency-bound run: the report's ``after``
values show it. Source: ``scipy.optimize.least_squares`` (trust-region
reflective, bounded; Branch, Coleman and Li, SIAM J. Sci. Comput. 21(1), 1999).

Closure: the spans do not cover everything an iteration spends (Python between phases, waiting for a
prefetching sampler process, stragglers at a collective). After the span fit, ``iteration_overhead_s`` is
solved (Brent's method, ``scipy.optimize.brentq``) so that the calibrated simulator reproduces the measured
epoch times of the calibration traces (mean relative error 0; overhead >= 0); the per-phase parameters then
carry what changes between configurations, the overhead what does not.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from pydantic import BaseModel
from scipy.optimize import brentq, least_squares

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.pricing import PhaseRule, SpanRow
from gnnplan.simulator.hardware.spec import ClusterSpec, cluster_from_dict, load_cluster
from gnnplan.simulator.plan import Plan
from gnnplan.simulator.result import SimResult
from gnnplan.simulator.strategies import get_strategy
from gnnplan.simulator.trace import Span, read_trace

PARAMS = ("network.bandwidth_bytes_per_s", "network.latency_s", "pcie.bandwidth_bytes_per_s", "pcie.latency_s",
          "efficiency.gather_fraction", "efficiency.forward_fraction", "efficiency.backward_fraction",
          "efficiency.optimizer_fraction", "host.sampling_edges_per_s_per_core", "iteration_overhead_s")
_LINEAR = {"iteration_overhead_s": 1e-3}  # fitted directly, in units of 1 ms; the others in log space
_UPPER = {"efficiency.gather_fraction": 10.0, "efficiency.forward_fraction": 10.0,
          "efficiency.backward_fraction": 10.0, "efficiency.optimizer_fraction": 10.0}  # ClusterSpec's le=10
_LOG_RANGE = math.log(1e4)
_RIDGE = 1e-5
_MIN_START = 1e-7
_START_INSET = 0.1  # 0.1 ms for the overhead; log-space starts are interior already
_EPOCH_PHASE = "epoch"  # the trace's epoch spans: the measured epoch time of the closure, not a priced phase

SimulateFn = Callable[[ClusterSpec, Plan], SimResult]


@dataclass
class _Trace:
    name: str
    plan: Plan
    measured_epoch_s: float
    shape: ClusterSpec
    spans: list[Span]
    plugin: ModuleType


@dataclass(frozen=True)
class _Row:
    """One residual: a row of a trace, the rule pricing it and its measured seconds."""

    trace: _Trace
    rule: PhaseRule
    row: SpanRow
    measured_s: float


def get_param(cluster: ClusterSpec, path: str) -> float:
    """A numeric cluster field by dotted path (``"network.latency_s"``)."""
    obj: Any = cluster
    for part in path.split("."):
        obj = getattr(obj, part)
    return float(obj)


def with_params(cluster: ClusterSpec, values: Mapping[str, float]) -> ClusterSpec:
    """A copy of ``cluster`` with the dotted-path fields in ``values`` replaced (validated)."""
    data = cluster.to_yaml_dict()
    for path, value in values.items():
        node = data
        *parents, leaf = path.split(".")
        for part in parents:
            node = node[part]
        node[leaf] = float(value)
    return cluster_from_dict(data, where=f"cluster {cluster.name}")


def _overridden(model: BaseModel, values: Mapping[str, float]) -> Any:
    """A copy of a spec with the dotted-path fields in ``values`` replaced, without validation (nested
    ``model_copy``: cheap enough for every residual evaluation; the fit keeps values within their bounds)."""
    nested: dict[str, dict[str, float]] = defaultdict(dict)
    update: dict[str, Any] = {}
    for path, value in values.items():
        head, _, rest = path.partition(".")
        if rest:
            nested[head][rest] = value
        else:
            update[head] = value
    for head, sub in nested.items():
        update[head] = _overridden(getattr(model, head), sub)
    return model.model_copy(update=update)


def _reshaped(cluster: ClusterSpec, plan: Plan) -> ClusterSpec:
    return cluster.model_copy(update={"num_machines": plan.cluster.num_machines,
                                      "gpus_per_machine": plan.cluster.gpus_per_machine})


def _default_simulate(cluster: ClusterSpec, plan: Plan) -> SimResult:
    from gnnplan.simulator.api import simulate

    return simulate(_reshaped(cluster, plan), plan.workload, plan.strategy, plan.knobs)


def _profile(trace: _Trace) -> dict[str, Any]:
    """The plug-in's compute profile on the trace's cluster shape (module docstring)."""
    from gnnplan.simulator.api import load_context

    plan = trace.plan
    module, knobs, ctx = load_context(trace.shape, plan.workload, plan.strategy, plan.knobs)
    return dict(module.compute_profile(ctx, knobs))


def _load_trace(name: str, spans: list[Span], meta: Mapping[str, Any], cluster: ClusterSpec) -> _Trace:
    if "plan" not in meta:
        raise SpecError(f"calibrate: trace {name} has no 'plan' in its metadata (written by gnnplan run or "
                        "gnnplan simulate --trace?)")
    plan = Plan.model_validate(meta["plan"])
    results = meta.get("results", {}) or {}
    measured = results.get("epoch_time_s")
    if measured is None:
        epochs = [s.dur_s for s in spans if s.phase == _EPOCH_PHASE]
        measured = float(np.median(epochs)) if epochs else float("nan")
    return _Trace(name, plan, float(measured), _reshaped(cluster, plan), spans, get_strategy(plan.strategy))


def _row_spans(rule: PhaseRule, spans: list[Span]) -> list[Span]:
    """The spans of one phase, rank and iteration that become rows of ``rule`` (``fastest``: the candidates);
    ``iteration_sum`` adds them into one span (durations, bytes and FLOPs; ``args["num_spans"]`` their count)."""
    if rule.rows != "iteration_sum" or not spans:
        return spans
    first = spans[0]
    return [Span(first.rank, first.phase, first.start_s, sum(x.dur_s for x in spans), first.stream,
                 sum(x.nbytes for x in spans), sum(x.flops for x in spans), first.epoch, first.iteration,
                 {"num_spans": float(len(spans))})]


class _Model:
    """Residuals of every informative span as a function of the parameter vector."""

    def __init__(self, traces: list[_Trace], cluster: ClusterSpec) -> None:
        self.cluster = cluster
        self.before = {p: get_param(cluster, p) for p in PARAMS}
        # log-space parameters need a positive starting value (a latency may be 0 in a cluster file)
        self.x0_values = {p: v if p in _LINEAR else max(v, _MIN_START) for p, v in self.before.items()}
        self.rows: dict[str, list[_Row]] = defaultdict(list)
        self.unpriced: set[str] = set()
        for t in traces:
            self._collect(t)

    def _collect(self, t: _Trace) -> None:
        """Add one trace's rows (module docstring): per rank and iteration, each rule of the plug-in's
        ``CALIBRATION`` in order, then the ``fastest`` rows."""
        rules: Mapping[str, PhaseRule] = t.plugin.CALIBRATION
        self.unpriced.update(s.phase for s in t.spans if s.phase not in rules and s.phase != _EPOCH_PHASE)
        usable = {p: r for p, r in rules.items()
                  if t.shape.num_machines >= r.min_machines and t.shape.num_gpus >= r.min_workers}
        by_key: dict[tuple[int, int, int], dict[str, list[Span]]] = defaultdict(lambda: defaultdict(list))
        for s in t.spans:
            by_key[(s.rank, s.epoch, s.iteration)][s.phase].append(s)
        rows: list[tuple[str, PhaseRule, SpanRow]] = []
        fastest: dict[tuple[str, int, int], SpanRow] = {}
        for (_, epoch, it), phases in by_key.items():
            iteration = {p: [s for s in spans if s.dur_s > 0] for p, spans in phases.items()}
            for phase, rule in usable.items():
                for s in _row_spans(rule, iteration.get(phase, [])):
                    row = SpanRow(s, iteration, t.plan.knobs, t.shape)
                    key = (phase, epoch, it)
                    if rule.rows != "fastest":
                        rows.append((phase, rule, row))
                    elif key not in fastest or s.dur_s < fastest[key].span.dur_s:
                        fastest[key] = row
        rows += [(phase, usable[phase], row) for (phase, _, _), row in fastest.items()]
        self._add(t, rows)

    def _add(self, t: _Trace, rows: list[tuple[str, PhaseRule, SpanRow]]) -> None:
        """Keep a trace's rows, with the plug-in's compute profile for the rules that read it (rows of a phase
        the profile lacks are dropped)."""
        profile = _profile(t) if any(rule.profiled for _, rule, _ in rows) else {}
        for phase, rule, row in rows:
            if rule.profiled:
                if phase not in profile:
                    continue
                row = replace(row, profile=profile)
            self.rows[phase].append(_Row(t, rule, row, rule.measured_s(row)))

    def values(self, x: np.ndarray) -> dict[str, float]:
        """Parameter values for the fitting variables ``x``."""
        out = {}
        for p, xi in zip(PARAMS, x):
            out[p] = float(xi) * _LINEAR[p] if p in _LINEAR else self.x0_values[p] * math.exp(float(xi))
        return out

    def x0(self) -> np.ndarray:
        return np.array([self.x0_values[p] / _LINEAR[p] if p in _LINEAR else 0.0 for p in PARAMS])

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        lo = np.array([0.0 if p in _LINEAR else -_LOG_RANGE for p in PARAMS])
        hi = np.array([1e5 if p in _LINEAR else
                       min(_LOG_RANGE, math.log(_UPPER[p] / self.x0_values[p])) if p in _UPPER else _LOG_RANGE
                       for p in PARAMS])
        return lo, np.maximum(hi, lo + 1e-9)

    def data_residuals(self, x: np.ndarray) -> np.ndarray:
        """Weighted, scaled residuals of every row; a row is priced on its trace's shape with only its
        operation's parameters at the values of ``x`` (module docstring)."""
        v = self.values(x)
        shapes: dict[tuple[str, str], ClusterSpec] = {}
        out: list[float] = []
        for rows in self.rows.values():
            if not rows:
                continue
            scale = max(float(np.mean([r.row.span.dur_s for r in rows])), 1e-12)
            weight = 1.0 / math.sqrt(len(rows))
            for r in rows:
                key = (r.trace.name, r.rule.op)
                if key not in shapes:
                    shapes[key] = _overridden(r.trace.shape, {p: v[p] for p in r.rule.params if p in v})
                out.append(weight * (r.rule.predicted_s(r.row, shapes[key]) - r.measured_s) / scale)
        return np.array(out)

    def residuals(self, x: np.ndarray) -> np.ndarray:
        ridge = _RIDGE * np.array([(xi - x0i) for xi, x0i in zip(x, self.x0())])
        return np.concatenate([self.data_residuals(x), ridge])


def calibrate(spans_by_trace: Mapping[str, tuple[Sequence[Span], Mapping[str, Any]]],
              cluster: str | Path | ClusterSpec, *,
              simulate_fn: SimulateFn | None = None) -> tuple[ClusterSpec, dict[str, Any]]:
    """Fit the cluster's effective parameters to measured spans.

    Args:
        spans_by_trace: trace name -> (spans, metadata) as returned by :func:`simulator.trace.read_trace`;
            metadata needs ``plan`` (a Plan dict) and should have ``results.epoch_time_s``.
        cluster: the cluster to start from (preset name, YAML path or spec).
        simulate_fn: ``(cluster, plan) -> SimResult`` used for the before/after predictions (default: re-simulate
            the plan with :func:`simulator.api.simulate`, with the trace's cluster shape).

    Returns:
        (calibrated cluster named ``<name>-calibrated`` with ``sources`` updated, report). The report has
        ``parameters`` {path: {before, after, constrained, num_spans}}, ``traces`` {name: {measured_epoch_time_s,
        predicted_epoch_time_s_before, predicted_epoch_time_s_after}}, and ``fit`` {cost, num_residuals, message,
        unpriced_phases (span phases no plug-in rule prices, ignored), closure (when the overhead was solved)}.

    Raises:
        SpecError: no traces, a trace without a plan or of an unknown strategy, or no span that informs any
            parameter.
    """
    base = load_cluster(cluster)
    if not spans_by_trace:
        raise SpecError("calibrate: give at least one trace")
    traces = [_load_trace(name, list(spans), meta, base) for name, (spans, meta) in spans_by_trace.items()]
    model = _Model(traces, base)
    if not any(model.rows.values()):
        raise SpecError("calibrate: the traces hold no span their strategies' CALIBRATION prices (phases seen "
                        f"without a rule: {', '.join(sorted(model.unpriced)) or 'none'})")
    after, constrained, fit_info = _fit(model)
    fit_info["unpriced_phases"] = sorted(model.unpriced)
    names = ", ".join(t.name for t in traces)
    calibrated = with_params(base, {p: v for p, v in after.items() if constrained[p]})
    if constrained["iteration_overhead_s"]:
        after["iteration_overhead_s"] = _close_overhead(traces, calibrated, simulate_fn or _default_simulate)
        calibrated = with_params(calibrated, {"iteration_overhead_s": after["iteration_overhead_s"]})
        fit_info["closure"] = "iteration_overhead_s solved so the calibration traces' epoch times are reproduced"
    sources = dict(base.sources)
    sources.update({p: f"calibrated from {names}" for p in PARAMS if constrained[p]})
    name = base.name if base.name.endswith("-calibrated") else f"{base.name}-calibrated"
    calibrated = calibrated.model_copy(update={"name": name, "sources": sources})
    counts = _span_counts(model)
    report: dict[str, Any] = {
        "cluster": name,
        "parameters": {p: {"before": model.before[p], "after": after[p], "constrained": constrained[p],
                           "num_spans": counts.get(p, 0)} for p in PARAMS},
        "traces": _predictions(traces, base, calibrated, simulate_fn or _default_simulate),
        "fit": fit_info,
    }
    return calibrated, report


def _fit(model: _Model) -> tuple[dict[str, float], dict[str, bool], dict[str, Any]]:
    """Solve the bounded least-squares problem; parameters with a zero data-Jacobian column keep their value.

    Returns:
        (parameter values after the fit, whether each was constrained by the data, fit summary).
    """
    lo, hi = model.bounds()
    # start strictly inside the bounds (trust-region reflective stalls on a start at a bound, e.g. 0 overhead)
    x0 = np.clip(model.x0(), lo + _START_INSET, hi)
    fit = least_squares(model.residuals, x0, bounds=(lo, hi), loss="linear", x_scale=1.0)
    jac = fit.jac[: len(model.data_residuals(fit.x))]
    norms = np.linalg.norm(jac, axis=0) if jac.size else np.zeros(len(PARAMS))
    informed = norms > 1e-8 * max(float(norms.max(initial=0.0)), 1e-300)
    constrained = {p: bool(informed[i]) for i, p in enumerate(PARAMS)}
    fitted = model.values(fit.x)
    after = {p: fitted[p] if constrained[p] else model.before[p] for p in PARAMS}
    return after, constrained, {"cost": float(fit.cost), "num_residuals": int(jac.shape[0]),
                                "message": str(fit.message)}


def calibrate_files(paths: Sequence[str | Path], cluster: str | Path | ClusterSpec, *,
                    simulate_fn: SimulateFn | None = None) -> tuple[ClusterSpec, dict[str, Any]]:
    """:func:`calibrate` on Chrome-trace files (trace name = file name).

    Raises:
        SpecError: a missing or malformed trace file, or see :func:`calibrate`.
    """
    loaded = {}
    for p in paths:
        name = Path(p).name
        if name in loaded:
            name = str(p)
        loaded[name] = read_trace(p)
    return calibrate(loaded, cluster, simulate_fn=simulate_fn)


def _close_overhead(traces: list[_Trace], cluster: ClusterSpec, simulate_fn: SimulateFn) -> float:
    """The ``iteration_overhead_s`` at which the simulated epoch times of ``traces`` have mean relative error 0
    (module docstring, "Closure"); 0 when the simulator is already slower than measured without overhead.

    Source: Brent's root finder (``scipy.optimize.brentq``; Brent, "Algorithms for Minimization without
    Derivatives", 1973, ch. 4); the epoch time is non-decreasing in the overhead, so the root is unique.
    """
    measured = [t for t in traces if math.isfinite(t.measured_epoch_s) and t.measured_epoch_s > 0]
    if not measured:
        return cluster.iteration_overhead_s

    def error(overhead_s: float) -> float:
        cl = with_params(cluster, {"iteration_overhead_s": overhead_s})
        return float(np.mean([simulate_fn(cl, t.plan).epoch_time_s / t.measured_epoch_s - 1.0 for t in measured]))

    if error(0.0) >= 0.0:
        return 0.0
    high = max(t.measured_epoch_s for t in measured)  # one iteration's overhead cannot exceed a whole epoch
    while error(high) < 0.0:
        high *= 2.0
    return float(brentq(error, 0.0, high, xtol=1e-7, rtol=1e-6))


def _span_counts(model: _Model) -> dict[str, int]:
    """Rows informing each parameter (a row informs its operation's parameters)."""
    counts: dict[str, int] = defaultdict(int)
    for rows in model.rows.values():
        for r in rows:
            for p in r.rule.params:
                counts[p] += 1
    return counts


def _predictions(traces: list[_Trace], before: ClusterSpec, after: ClusterSpec,
                 simulate_fn: SimulateFn) -> dict[str, dict[str, float]]:
    out = {}
    for t in traces:
        out[t.name] = {"measured_epoch_time_s": t.measured_epoch_s,
                       "predicted_epoch_time_s_before": float(simulate_fn(before, t.plan).epoch_time_s),
                       "predicted_epoch_time_s_after": float(simulate_fn(after, t.plan).epoch_time_s)}
    return out
