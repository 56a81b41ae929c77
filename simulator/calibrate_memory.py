"""Calibration of the host memory model: ``host.process_bytes`` from the peak host memory runs measured.

Every strategy's host memory (``simulate --json`` ``peak_memory_bytes.host``, one machine) holds one
``host.process_bytes`` per worker process: the resident set of the Python, torch and DGL runtime and of what else
a training process holds beyond the model's data terms (the modules it imports, the allocator's retained heap,
the buffers of evaluation and communication). ``gnnplan probe`` measures it on a small training run
(:func:`executor.probe_constants.worker_process_bytes`, with :func:`samples` below); its value depends on the
machine, the software and, through those buffers, the graph. A run measures its training epochs'
peak (``results.peak_memory_bytes.host`` of its trace, :mod:`executor.memory`), so each trace implies the
per-process constant that makes the model meet it:

    implied = (measured - host(process_bytes = 0)) / copies,   copies = (host(P) - host(0)) / P

where ``host(x)`` is the simulator's host memory of the trace's plan with ``host.process_bytes = x`` (linear in
it; ``copies`` is the number of processes it counts per machine, read off the model rather than assumed, with
P = :data:`PROBE_BYTES`). The fit is the median of the traces' implied values (robust to one trace whose
allocator kept a large buffer resident). Its error is reported held out only: each configuration (strategy, knobs,
workload, cluster shape) is predicted with the median of the OTHER configurations' implied values, beside the
prediction before calibration; with one configuration nothing is held out and the report says so. Traces without
a measured peak (written before runs measured memory, or simulated) are listed and left out.

Source: the median as a robust location estimate (Huber and Ronchetti, "Robust Statistics", 2nd ed., Wiley, 2009,
§3.2); leave-one-out prediction error as :mod:`~gnnplan.simulator.calibrate_holdout`.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gnnplan.simulator.calibrate_holdout import configuration_key
from gnnplan.simulator.calibrate_params import overridden
from gnnplan.simulator.hardware.spec import ClusterSpec
from gnnplan.simulator.plan import Plan

PARAM = "host.process_bytes"
"""The cluster field this calibration fits (bytes per worker process; :mod:`simulator.hardware.spec`)."""
PROBE_BYTES = 1.0e9
"""The ``host.process_bytes`` at which the model is evaluated a second time to count its process copies (any
positive value does: the model is linear in it)."""

HostFn = Callable[[ClusterSpec, Plan], float]
"""The simulated peak host memory (bytes, one machine) of a plan on a cluster."""


@dataclass(frozen=True)
class MemorySample:
    """One trace's measured peak and what the model says about it.

    Attributes:
        name: the trace.
        plan: its plan.
        measured_bytes: its measured peak host memory (one machine).
        zero_bytes: the model's host memory with ``host.process_bytes = 0``.
        copies: the process copies the model counts per machine.
    """

    name: str
    plan: Plan
    measured_bytes: float
    zero_bytes: float
    copies: float

    @property
    def implied_bytes(self) -> float:
        """The per-process constant that makes the model equal the measured peak."""
        return (self.measured_bytes - self.zero_bytes) / self.copies

    def predicted(self, process_bytes: float) -> float:
        """The model's host memory (bytes, one machine) with ``host.process_bytes = process_bytes``."""
        return self.zero_bytes + self.copies * process_bytes


def measured_host_bytes(metadata: Mapping[str, Any]) -> float | None:
    """A trace's measured peak host memory (``results.peak_memory_bytes.host``), None when it has none."""
    peak = ((metadata.get("results") or {}).get("peak_memory_bytes") or {}).get("host")
    return float(peak) if isinstance(peak, (int, float)) and peak > 0 else None


def samples(traces: Sequence[tuple[str, Plan, float | None]], base: ClusterSpec,
            host: HostFn) -> tuple[list[MemorySample], list[str]]:
    """The traces with a measured peak as :class:`MemorySample` (two simulations each), and the names of those
    without one (or whose model counts no process, which cannot inform the parameter).

    Args:
        traces: ``(name, plan, measured peak host bytes of one machine or None)`` per trace.
        base: the cluster the model is evaluated on (its other fields as they are).
        host: the simulated peak host memory of a plan on a cluster (bytes, one machine).
    """
    out, skipped = [], []
    for name, plan, measured in traces:
        if measured is None:
            skipped.append(name)
            continue
        zero_bytes = host(overridden(base, {PARAM: 0.0}), plan)
        copies = (host(overridden(base, {PARAM: PROBE_BYTES}), plan) - zero_bytes) / PROBE_BYTES
        if copies <= 0:
            skipped.append(name)
            continue
        out.append(MemorySample(name, plan, measured, zero_bytes, copies))
    return out, skipped


def with_process_bytes(cluster: ClusterSpec, value: float, names: Sequence[str]) -> ClusterSpec:
    """``cluster`` with the fitted ``host.process_bytes``, its source naming the traces and its prior kept."""
    out = overridden(cluster, {PARAM: value})
    sources = {**cluster.sources, PARAM: f"calibrated from the peak host memory of {', '.join(names)}"}
    priors = {PARAM: float(cluster.host.process_bytes), **cluster.priors}
    return out.model_copy(update={"sources": sources, "priors": priors})


def _row(s: MemorySample, before: float, after: float, fitted_on: int) -> dict[str, Any]:
    predicted_before, predicted = s.predicted(before), s.predicted(after)
    return {"trace": s.name, "measured_host_bytes": s.measured_bytes, "predicted_before_bytes": predicted_before,
            "error_before_fraction": predicted_before / s.measured_bytes - 1.0, "predicted_bytes": predicted,
            "error_fraction": predicted / s.measured_bytes - 1.0, "fitted_on_traces": fitted_on}


def calibrate_memory(traces: Sequence[tuple[str, Plan, float | None]], base: ClusterSpec,
                     host: HostFn) -> tuple[float | None, dict[str, Any]]:
    """Fit ``host.process_bytes`` to the traces' measured peak host memory (module docstring).

    Args:
        traces: (name, plan, measured peak host bytes or None) per trace.
        base: the cluster calibration starts from (its ``host.process_bytes`` is the value before).
        host: the simulated peak host memory of a plan on a cluster.

    Returns:
        (fitted value, or None when no trace measured its peak; report ``{parameter, before, after,
        implied_bytes {trace: bytes}, fit {trace: {measured_host_bytes, fit_host_bytes (in-sample: a fit, not
        a prediction), zero_bytes, copies (the model: host = zero_bytes + copies x process_bytes)}},
        held_out {rows: [...], reason}, not_measured [names]}``). Held-out rows:
        ``{trace, measured_host_bytes, predicted_before_bytes, error_before_fraction, predicted_bytes,
        error_fraction, fitted_on_traces}``.
    """
    found, skipped = samples(traces, base, host)
    before = float(base.host.process_bytes)
    report: dict[str, Any] = {"parameter": PARAM, "before": before, "after": None, "implied_bytes": {}, "fit": {},
                              "held_out": {"rows": [], "reason": None}, "not_measured": skipped}
    if not found:
        report["held_out"]["reason"] = "no trace measured its peak host memory"
        return None, report
    fitted = statistics.median(s.implied_bytes for s in found)
    report["after"] = fitted
    report["implied_bytes"] = {s.name: s.implied_bytes for s in found}
    report["fit"] = {s.name: {"measured_host_bytes": s.measured_bytes, "fit_host_bytes": s.predicted(fitted),
                              "zero_bytes": s.zero_bytes, "copies": s.copies} for s in found}
    keys = {s.name: configuration_key(s.plan) for s in found}
    if len(set(keys.values())) < 2:
        report["held_out"]["reason"] = "one configuration: nothing to hold out"
        return fitted, report
    for s in found:
        others = [o.implied_bytes for o in found if keys[o.name] != keys[s.name]]
        report["held_out"]["rows"].append(_row(s, before, statistics.median(others), len(others)))
    return fitted, report


__all__ = ["PARAM", "MemorySample", "calibrate_memory", "measured_host_bytes", "samples", "with_process_bytes"]
