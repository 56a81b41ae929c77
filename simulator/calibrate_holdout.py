"""Held-out error of a calibration: predictions of epochs and configurations the fit did not see.

An error measured on the data a fit was made from says how well the fit reproduces them, not how well the
calibrated simulator predicts; :mod:`gnnplan.simulator.calibrate` therefore reports two held-out errors:

* epochs: every trace's measured epochs (:func:`split_epochs`: those ``gnnplan run`` measured) are split by
  parity, the even ones to fit, the odd ones held out; one fit on the fitting epochs of all traces predicts each
  trace's held-out epochs (the median of their epoch times; an epoch's time is its slowest rank's ``epoch``
  span, as ``gnnplan run`` reports it). A trace with a single measured epoch cannot be held out and says so. A
  measured epoch far from the run's typical one (:func:`transient_epochs`: a burst of other load on the machine,
  which no simulation prices) is fitted by no fit, this one or the final one, and reported; where odd it is still
  held out, since it was measured.
  With it, for a strategy that evaluates after each epoch (its simulation gives ``evaluation_time_s``) and a run
  that timed it (``results.epochs[].evaluation_time_s``), the held-out epochs' evaluation (the median of their
  evaluation times) against the same fit's prediction: the evaluation's spans (``eval_*``) of the fitting epochs
  are fitted, those of the held-out epochs are not.
* configurations (leave one configuration out): with traces of at least two configurations (strategy, knobs,
  workload and cluster shape), each configuration in turn is predicted by a fit on the traces of all others.

The predictions before calibration (the starting cluster) are reported beside them: they were not fitted to
anything either. Source: cross-validation (Hastie, Tibshirani and Friedman, "The Elements of Statistical
Learning", 2nd ed., Springer, 2009, §7.10).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.spec import ClusterSpec
from gnnplan.simulator.plan import Plan
from gnnplan.simulator.trace import Span
from gnnplan.simulator.wording import counted

WARMUP_EPOCHS = 1
"""Epochs at the start of a run of 3 or more epochs that calibration ignores (lazy initialisation, sampler
processes starting): the epochs ``gnnplan run`` leaves out of its measured epoch time."""
TRANSIENT_MADS = 3.0
"""A measured epoch whose time is further than this many scaled median absolute deviations (1.4826 x MAD, the
standard deviation of normal data) from the median of the run's measured epochs is a transient (a burst of other
load, a late warm-up) and no fit uses its spans (:func:`transient_epochs`). Source: the Hampel identifier with
threshold 3 (Hampel, "The influence curve and its role in robust estimation", J. Amer. Statist. Assoc. 69(346),
1974; Pearson, "Outliers in process modeling and identification", IEEE Trans. Control Syst. Technol. 10(1), 2002).
Measured on the main job's traces (2026-11-30): a dp run on Cora whose epochs 1-6 took 0.12-0.19 s against a
median of 0.053 s was predicted +31.6% off on its held-out epochs by a fit on all its even epochs, -0.4% with them
left out of the fit (the held-out median still over epochs 1, 3, ..., 29), its evaluation +26.9% -> +5.7%; five
other runs' (dp, hopgnn, gsplit) held-out errors moved by 0-2.1 points. Tried instead and not
kept: a Huber loss on every span (iteratively reweighted, c = 1.345 robust standard deviations): +31.6% -> +7.8%,
but it fits the typical span where an epoch is a sum of them, spans' slow tail included, and moved two other runs
from -2.6% to -6.7% and -7.6% to -12.5%."""
MIN_EPOCHS_FOR_TRANSIENTS = 5
"""Fewest measured epochs with a time among which :func:`transient_epochs` looks for transients (fewer give no
usable median absolute deviation)."""
MAD_SCALE = 1.4826
"""The MAD of normal data times this is its standard deviation (1 / Phi^-1(3/4))."""

EPOCH_PHASE = "epoch"

Selection = Mapping[str, Collection[int]]
"""Trace name -> the epochs of its spans a fit may use."""
FitFn = Callable[[Selection], ClusterSpec]
"""Fits the starting cluster to the selected epochs; raises SpecError when they price nothing."""
PredictFn = Callable[[ClusterSpec, Plan], float]
"""The simulated epoch time of a plan on a cluster."""
PredictEvaluationFn = Callable[[ClusterSpec, Plan], "float | None"]
"""The simulated evaluation time of a plan on a cluster (None: the strategy does not price one)."""


@dataclass(frozen=True)
class EpochSplit:
    """Which epochs of a trace calibration uses.

    Attributes:
        measured: the epochs every fit may use (the run's measured epochs: all but the warm-up when there are 3
            or more, and none a controller explored in; transients left out).
        fit: the epochs of the held-out fit (even ones but the run's first, its warm-up, which a run of 2 epochs
            measures; all measured ones when nothing can be held out).
        held_out: the epochs it predicts (odd ones, transients included: they were measured; empty when nothing
            can be held out).
        reason: why nothing is held out (None when something is).
        transient: the run's measured epochs no fit uses (:func:`transient_epochs`).
    """

    measured: tuple[int, ...]
    fit: tuple[int, ...]
    held_out: tuple[int, ...]
    reason: str | None = None
    transient: tuple[int, ...] = ()


class HeldOutTrace(Protocol):
    """What held-out evaluation reads of a loaded trace."""

    @property
    def name(self) -> str: ...

    @property
    def plan(self) -> Plan: ...

    @property
    def measured_epoch_s(self) -> float: ...

    @property
    def epoch_times_s(self) -> Mapping[int, float]: ...

    @property
    def split(self) -> EpochSplit: ...

    @property
    def evaluation_times_s(self) -> Mapping[int, float]: ...


def epoch_times_s(spans: Sequence[Span]) -> dict[int, float]:
    """Each epoch's time: the longest ``epoch`` span of that epoch over the ranks."""
    out: dict[int, float] = {}
    for s in spans:
        if s.phase == EPOCH_PHASE and s.epoch >= 0:
            out[s.epoch] = max(out.get(s.epoch, 0.0), s.dur_s)
    return out


def evaluation_times_s(results: Mapping[str, Any]) -> dict[int, float]:
    """Each epoch's evaluation time as ``gnnplan run`` measured it (the slowest rank's wall time of the evaluation
    after the epoch: ``results.epochs[].evaluation_time_s`` of an executor trace's metadata); epochs without one
    (a simulated trace, a strategy that does not time it) are absent."""
    out: dict[int, float] = {}
    for record in results.get("epochs") or ():
        if isinstance(record, Mapping) and isinstance(record.get("evaluation_time_s"), (int, float)):
            out[int(record.get("epoch", -1))] = float(record["evaluation_time_s"])
    return out


def transient_epochs(times: Mapping[int, float]) -> tuple[int, ...]:
    """The epochs of ``times`` (epoch -> seconds, a run's measured epochs) further than :data:`TRANSIENT_MADS`
    scaled MADs from their median; none among fewer than :data:`MIN_EPOCHS_FOR_TRANSIENTS`, or when the MAD is 0
    (at least half the epochs equal: a simulated trace)."""
    if len(times) < MIN_EPOCHS_FOR_TRANSIENTS:
        return ()
    median = statistics.median(times.values())
    spread = MAD_SCALE * statistics.median(abs(t - median) for t in times.values())
    return tuple(sorted(e for e, t in times.items() if spread > 0 and abs(t - median) > TRANSIENT_MADS * spread))


def split_epochs(epochs: Collection[int], timed: Collection[int],
                 run_measured: Collection[int] | None = None, times: Mapping[int, float] | None = None
                 ) -> EpochSplit:
    """The epochs of a trace to fit and to hold out (module docstring).

    Args:
        epochs: the epochs its spans belong to (negative values ignored).
        timed: the epochs with an ``epoch`` span (a held-out epoch needs its measured time).
        run_measured: the epochs the run measured its results on (``results.measured_epochs`` of the trace's
            metadata: besides the warm-up, ``gnnplan run`` leaves out the epochs a controller explored other
            configurations in, :func:`executor.runner.summarise`); None (a trace without it): all but the first
            :data:`WARMUP_EPOCHS` when there are 3 or more.
        times: epoch -> its time in seconds (:func:`epoch_times_s`); the measured epochs' transients
            (:func:`transient_epochs`) are fitted by no fit. None: no epoch is a transient.

    Returns:
        The split; with fewer than 2 measured epochs, or no timed odd one, nothing is held out.
    """
    ordered = sorted({e for e in epochs if e >= 0})
    measured = tuple(ordered[WARMUP_EPOCHS:] if len(ordered) >= 3 else ordered)
    if run_measured is not None:
        settled = set(run_measured)
        measured = tuple(e for e in ordered if e in settled) or measured
    transient = transient_epochs({e: times[e] for e in measured if e in times}) if times else ()
    usable = tuple(e for e in measured if e not in transient)
    if len(measured) < 2:
        return EpochSplit(measured, measured, (), f"{len(measured)} epoch: cannot be held out")
    fit = tuple(e for e in usable if e % 2 == 0 and e != ordered[0])  # never the run's first epoch, its warm-up
    held = tuple(e for e in measured if e % 2 == 1 and e in timed)
    if held and not fit and ordered[0] in usable:
        return EpochSplit(usable, usable, (), f"{len(ordered)} epochs: the one to fit on would be epoch "
                          f"{ordered[0]}, the warm-up; run 3 or more for a held-out error", transient)
    if not fit or not held:
        return EpochSplit(usable, usable, (), "no timed epoch to hold out (no epoch spans)", transient)
    return EpochSplit(usable, fit, held, None, transient)


def _transient(t: HeldOutTrace) -> dict[str, Any]:
    measured = sorted(set(t.split.measured) | set(t.split.transient))
    return {"epochs": list(t.split.transient), "times_s": [t.epoch_times_s[e] for e in t.split.transient],
            "median_s": statistics.median(t.epoch_times_s[e] for e in measured if e in t.epoch_times_s)}


def configuration_key(plan: Plan) -> str:
    """What makes two traces the same configuration: strategy, knobs, workload and cluster shape."""
    return json.dumps([plan.strategy, plan.knobs, plan.workload.to_yaml_dict(), plan.cluster.num_machines,
                       plan.cluster.gpus_per_machine], sort_keys=True, default=str)


def configuration_label(plan: Plan) -> str:
    """A short name of a configuration for people."""
    knobs = " ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in plan.knobs.items()
                     if v is not None)
    return (f"{plan.strategy} {knobs} [{plan.workload.name or plan.workload.dataset_name}, {plan.cluster.num_machines}x"
            f"{plan.cluster.gpus_per_machine}]").replace("  ", " ")


def _error(predicted: float, measured: float) -> float:
    return predicted / measured - 1.0 if measured > 0 else float("nan")


def held_out_epochs(traces: Sequence[HeldOutTrace], fit_fn: FitFn, predict: PredictFn,
                    before_s: Mapping[str, float], predict_evaluation: PredictEvaluationFn | None = None,
                    evaluation_before_s: Mapping[str, float | None] | None = None) -> dict[str, Any]:
    """Fit on the fitting epochs of every trace and predict each trace's held-out epochs.

    Args:
        traces: the loaded traces.
        fit_fn: fits the starting cluster to a selection of epochs.
        predict: simulated epoch time of a plan on a cluster.
        before_s: each trace's prediction on the starting cluster.
        predict_evaluation: simulated evaluation time of a plan on a cluster (module docstring); None: no
            evaluation rows.
        evaluation_before_s: each trace's evaluation time on the starting cluster (with ``predict_evaluation``).

    Returns:
        ``{rows: [{trace, fit_epochs, held_out_epochs, measured_epoch_time_s, predicted_before_s,
        error_before_fraction, predicted_s, error_fraction, evaluation}], not_held_out: {trace: reason},
        transient: {trace: {epochs, times_s, median_s}}}`` (``transient``: the epochs no fit used,
        :func:`transient_epochs`, their times and the median of the run's measured epochs);
        ``evaluation``: ``{measured_s, predicted_before_s, error_before_fraction, predicted_s, error_fraction}``
        of the held-out epochs' evaluation, or None (not timed, or not priced).
    """
    out: dict[str, Any] = {"rows": [], "not_held_out": {t.name: t.split.reason for t in traces if t.split.reason},
                           "transient": {t.name: _transient(t) for t in traces if t.split.transient}}
    held = [t for t in traces if t.split.held_out]
    if not held:
        return out
    try:
        fitted = fit_fn({t.name: t.split.fit for t in traces})
    except SpecError as exc:
        out["not_held_out"].update({t.name: f"the fitting epochs price nothing: {exc}" for t in held})
        return out
    for t in held:
        measured = statistics.median(t.epoch_times_s[e] for e in t.split.held_out)
        predicted = predict(fitted, t.plan)
        out["rows"].append({"trace": t.name, "fit_epochs": list(t.split.fit), "held_out_epochs": list(t.split.held_out),
                            "measured_epoch_time_s": measured, "predicted_before_s": before_s[t.name],
                            "error_before_fraction": _error(before_s[t.name], measured), "predicted_s": predicted,
                            "error_fraction": _error(predicted, measured),
                            "evaluation": _held_out_evaluation(t, (evaluation_before_s or {}).get(t.name), fitted,
                                                               predict_evaluation)})
    return out


def _held_out_evaluation(t: HeldOutTrace, before: float | None, fitted: ClusterSpec,
                         predict_evaluation: PredictEvaluationFn | None) -> dict[str, float] | None:
    """The held-out epochs' evaluation against its prediction before calibration (``before``) and after the fit."""
    timed = [t.evaluation_times_s[e] for e in t.split.held_out if e in t.evaluation_times_s]
    if predict_evaluation is None or before is None or not timed:
        return None
    after = predict_evaluation(fitted, t.plan)
    if after is None:
        return None
    measured = statistics.median(timed)
    return {"measured_s": measured, "predicted_before_s": before, "error_before_fraction": _error(before, measured),
            "predicted_s": after, "error_fraction": _error(after, measured)}


def held_out_configurations(traces: Sequence[HeldOutTrace], fit_fn: FitFn, predict: PredictFn,
                            before_s: Mapping[str, float]) -> dict[str, Any]:
    """Leave one configuration out: predict each configuration's measured epoch time from a fit on all others.

    Returns:
        ``{rows: [{configuration, traces, measured_epoch_time_s, predicted_before_s, error_before_fraction,
        predicted_s, error_fraction}], reason}`` (``reason``: why there are no rows, else None).
    """
    groups: dict[str, list[HeldOutTrace]] = {}
    for t in traces:
        groups.setdefault(configuration_key(t.plan), []).append(t)
    if len(groups) < 2:
        return {"rows": [], "reason": f"{counted(len(traces), 'trace')} of one configuration: none to leave out"}
    rows = []
    for key, group in groups.items():
        others = {t.name: t.split.measured for k, g in groups.items() if k != key for t in g}
        try:
            fitted = fit_fn(others)
        except SpecError:
            continue
        measured = statistics.median(t.measured_epoch_s for t in group)
        predicted = statistics.median(predict(fitted, t.plan) for t in group)
        before = statistics.median(before_s[t.name] for t in group)
        rows.append({"configuration": configuration_label(group[0].plan), "traces": [t.name for t in group],
                     "measured_epoch_time_s": measured, "predicted_before_s": before,
                     "error_before_fraction": _error(before, measured), "predicted_s": predicted,
                     "error_fraction": _error(predicted, measured)})
    return {"rows": rows, "reason": None if rows else "no other configuration's spans price anything"}
