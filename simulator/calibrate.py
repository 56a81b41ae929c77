"""Calibration: fit a cluster's effective parameters to measured spans with bounded least squares.

Each span kind constrains some parameters through the same priced operations the simulator uses
(:mod:`simulator.hardware.model`, :mod:`simulator.hardware.collectives`); for a trace recorded on ``m``
machines with ``g`` workers each:

* ``fetch``: ``3 * network.latency_s + g * nbytes / network.bandwidth_bytes_per_s`` (a count exchange, the
  ids and the rows back, as ``dp``'s pull; the ``g`` workers of a machine fetch at once and share its NIC).
* ``all_reduce``: hierarchical ring all-reduce of ``nbytes`` (the fastest rank of each iteration, so waiting
  for stragglers is excluded).
* ``load``: ``max(local gather, measured fetch) + pcie.latency_s + (local + remote bytes) / pcie bandwidth
  + hit bytes / (GPU memory bandwidth * gather_fraction)``; local gather = local bytes / (host memory
  bandwidth * gather_fraction).
* ``forward`` / ``backward`` / ``optimizer``, summed per worker and iteration (a full-graph strategy runs
  several blocks of different shape per phase): ``flops * r / efficiency + n * k * gpu.kernel_overhead_s`` for
  ``n`` spans, where ``r`` is the roofline seconds per FLOP and ``k`` the kernels per span of the phase over an
  epoch, from the strategy plug-in's
  ``compute_profile(ctx, knobs)`` (a mini-batch strategy without one computes ``dp``'s mini-batch model, so
  ``dp``'s profile serves; otherwise the compute spans are not used). The per-kernel overhead is not fitted:
  within one run the FLOPs barely vary, so it and the efficiency cannot be told apart.
* ``exchange`` (representations or gradients exchanged between machines, e.g. ``neutronstar``):
  ``steps * (network.latency_s + 2 pcie.latency_s) + max(sent, received) * (1 / network bandwidth + 2 / pcie
  bandwidth)``: every message crosses PCIe out, the network and PCIe in, as the strategy's simulation sends it;
  ``steps`` = W - 1 sequential ring steps when the plan's ``ring`` knob is on, else 1 (all peers at once).
  Only the network parameters are fitted to these spans (the PCIe legs are priced with the cluster's values):
  one span cannot tell its legs apart, and PCIe is determined by ``load`` spans.
* ``sample``: ``num_sampled_edges / host.sampling_edges_per_s_per_core`` (one core per sampler).
* ``iteration``: ``iteration_overhead_s`` = iteration time minus its phases on the trainer's path (load,
  forward, backward, all_reduce, optimizer, exchange, inline sample, and the wait for a prefetched sample);
  the starting point of the closure below.

Residuals are ``(predicted - measured) / mean measured duration of the span kind``, so the fit matches each
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import brentq, least_squares

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.collectives import hierarchical_all_reduce_time_s
from gnnplan.simulator.hardware.spec import ClusterSpec, cluster_from_dict, load_cluster
from gnnplan.simulator.plan import Plan
from gnnplan.simulator.result import SimResult
from gnnplan.simulator.strategies.base import PhaseProfile
from gnnplan.simulator.strategies.dp import FETCH_REQUEST_MESSAGES
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
_TRAINER_PHASES = ("load", "forward", "backward", "all_reduce", "optimizer", "exchange")
_COMPUTE_PHASES = ("forward", "backward", "optimizer")

SimulateFn = Callable[[ClusterSpec, Plan], SimResult]


@dataclass
class _Trace:
    name: str
    plan: Plan
    measured_epoch_s: float
    shape: ClusterSpec
    spans: list[Span]
    profile: dict[str, PhaseProfile] = field(default_factory=dict)


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


def _reshaped(cluster: ClusterSpec, plan: Plan) -> ClusterSpec:
    return cluster.model_copy(update={"num_machines": plan.cluster.num_machines,
                                      "gpus_per_machine": plan.cluster.gpus_per_machine})


def _default_simulate(cluster: ClusterSpec, plan: Plan) -> SimResult:
    from gnnplan.simulator.api import simulate

    return simulate(_reshaped(cluster, plan), plan.workload, plan.strategy, plan.knobs)


def _profile(trace: _Trace) -> dict[str, PhaseProfile]:
    """The compute profile of the trace's strategy on the trace's cluster shape (module docstring)."""
    from gnnplan.simulator.api import load_context
    from gnnplan.simulator.strategies import dp

    plan = trace.plan
    module, knobs, ctx = load_context(trace.shape, plan.workload, plan.strategy, plan.knobs)
    if hasattr(module, "compute_profile"):
        return dict(module.compute_profile(ctx, knobs))
    if ctx.stats is not None and plan.workload.training.mode == "mini-batch":
        return dp.compute_profile(ctx, dp.Knobs())
    return {}


def _load_trace(name: str, spans: list[Span], meta: Mapping[str, Any], cluster: ClusterSpec) -> _Trace:
    if "plan" not in meta:
        raise SpecError(f"calibrate: trace {name} has no 'plan' in its metadata (written by gnnplan run or "
                        "gnnplan simulate --trace?)")
    plan = Plan.model_validate(meta["plan"])
    results = meta.get("results", {}) or {}
    measured = results.get("epoch_time_s")
    if measured is None:
        epochs = [s.dur_s for s in spans if s.phase == "epoch"]
        measured = float(np.median(epochs)) if epochs else float("nan")
    return _Trace(name, plan, float(measured), _reshaped(cluster, plan), spans)


class _Model:
    """Residuals of every informative span as a function of the parameter vector."""

    def __init__(self, traces: list[_Trace], cluster: ClusterSpec) -> None:
        self.cluster = cluster
        self.before = {p: get_param(cluster, p) for p in PARAMS}
        # log-space parameters need a positive starting value (a latency may be 0 in a cluster file)
        self.x0_values = {p: v if p in _LINEAR else max(v, _MIN_START) for p, v in self.before.items()}
        self.rows: dict[str, list[tuple[_Trace, Span, dict[str, float]]]] = defaultdict(list)
        for t in traces:
            self._collect(t)

    def _collect(self, t: _Trace) -> None:
        by_key: dict[tuple[int, int, int], dict[str, list[Span]]] = defaultdict(lambda: defaultdict(list))
        for s in t.spans:
            by_key[(s.rank, s.epoch, s.iteration)][s.phase].append(s)
        inline = not t.plan.knobs.get("num_sampler_workers", 0)
        fastest_all_reduce: dict[tuple[int, int], Span] = {}
        multi = t.shape.num_gpus > 1
        for (rank, epoch, it), phases in by_key.items():
            fetch = sum(s.dur_s for s in phases.get("fetch", []))
            phases = {p: [s for s in spans if s.dur_s > 0] for p, spans in phases.items()}
            for s in phases.get("fetch", []):
                self.rows["fetch"].append((t, s, {}))
            for s in phases.get("exchange", []) if t.shape.num_machines > 1 else []:
                self.rows["exchange"].append((t, s, {}))
            for s in phases.get("load", []):
                self.rows["load"].append((t, s, {"fetch_s": fetch}))
            for phase in _COMPUTE_PHASES:
                spans = phases.get(phase, [])
                if spans:  # one row per iteration: the phase's spans may differ in seconds per FLOP
                    total = Span(rank, phase, spans[0].start_s, sum(x.dur_s for x in spans), epoch=epoch,
                                 iteration=it, flops=sum(x.flops for x in spans))
                    self.rows[phase].append((t, total, {"num_spans": float(len(spans))}))
            for s in phases.get("sample", []):
                self.rows["sample"].append((t, s, {}))
            for s in phases.get("all_reduce", []) if multi else []:
                key = (epoch, it)
                if key not in fastest_all_reduce or s.dur_s < fastest_all_reduce[key].dur_s:
                    fastest_all_reduce[key] = s
            for s in phases.get("iteration", []):
                gap = s.dur_s - sum(x.dur_s for p in _TRAINER_PHASES for x in phases.get(p, []))
                samples = phases.get("sample", [])
                if inline:
                    gap -= sum(x.dur_s for x in samples)
                elif samples:
                    gap -= min(max(0.0, max(x.end_s for x in samples) - s.start_s), s.dur_s)
                self.rows["iteration"].append((t, s, {"gap_s": gap}))
        for s in fastest_all_reduce.values():
            self.rows["all_reduce"].append((t, s, {}))
        if any(self.rows[p] for p in _COMPUTE_PHASES):
            t.profile = _profile(t)
            for p in _COMPUTE_PHASES:
                if p not in t.profile:
                    self.rows[p] = [row for row in self.rows[p] if row[0] is not t]

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
        v = self.values(x)
        out: list[float] = []
        for kind, rows in self.rows.items():
            if not rows:
                continue
            scale = max(float(np.mean([s.dur_s for _, s, _ in rows])), 1e-12)
            weight = 1.0 / math.sqrt(len(rows))
            for t, s, extra in rows:
                target = extra["gap_s"] if kind == "iteration" else s.dur_s
                out.append(weight * (self._predict(kind, v, t, s, extra) - target) / scale)
        return np.array(out)

    def residuals(self, x: np.ndarray) -> np.ndarray:
        ridge = _RIDGE * np.array([(xi - x0i) for xi, x0i in zip(x, self.x0())])
        return np.concatenate([self.data_residuals(x), ridge])

    def _predict(self, kind: str, v: dict[str, float], t: _Trace, s: Span, extra: dict[str, float]) -> float:
        shape = t.shape
        if kind == "fetch":
            return (FETCH_REQUEST_MESSAGES + 1) * v["network.latency_s"] + \
                shape.gpus_per_machine * s.nbytes / v["network.bandwidth_bytes_per_s"]
        if kind == "all_reduce":
            cl = shape.model_copy(update={"network": shape.network.model_copy(update={
                "bandwidth_bytes_per_s": v["network.bandwidth_bytes_per_s"], "latency_s": v["network.latency_s"]}),
                "pcie": shape.pcie.model_copy(update={"bandwidth_bytes_per_s": v["pcie.bandwidth_bytes_per_s"],
                                                      "latency_s": v["pcie.latency_s"]})})
            return hierarchical_all_reduce_time_s(s.nbytes, cl)
        if kind == "load":
            g = v["efficiency.gather_fraction"]
            local, remote, hit = (float(s.args.get(k, 0.0)) for k in ("local_bytes", "remote_bytes", "hit_bytes"))
            host = local / (shape.host.memory_bandwidth_bytes_per_s * g)
            copy = (v["pcie.latency_s"] + (local + remote) / v["pcie.bandwidth_bytes_per_s"]) if local + remote > 0 \
                else 0.0
            return max(host, extra["fetch_s"]) + copy + hit / (shape.gpu.memory_bandwidth_bytes_per_s * g)
        if kind in _COMPUTE_PHASES:
            prof = t.profile[kind]
            return s.flops * prof.seconds_per_flop / v[f"efficiency.{kind}_fraction"] + \
                extra["num_spans"] * prof.kernels_per_span * shape.gpu.kernel_overhead_s
        if kind == "exchange":
            steps = shape.num_gpus - 1 if t.plan.knobs.get("ring") else 1
            nbytes = max(s.nbytes, float(s.args.get("received_bytes", 0.0)))
            return steps * (v["network.latency_s"] + 2 * shape.pcie.latency_s) + \
                nbytes * (1 / v["network.bandwidth_bytes_per_s"] + 2 / shape.pcie.bandwidth_bytes_per_s)
        if kind == "sample":
            return float(s.args.get("num_sampled_edges", 0.0)) / v["host.sampling_edges_per_s_per_core"]
        return v["iteration_overhead_s"]


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
        predicted_epoch_time_s_before, predicted_epoch_time_s_after}}, and ``fit`` {cost, num_residuals, message}.

    Raises:
        SpecError: no traces, a trace without a plan, or no span that informs any parameter.
    """
    base = load_cluster(cluster)
    if not spans_by_trace:
        raise SpecError("calibrate: give at least one trace")
    traces = [_load_trace(name, list(spans), meta, base) for name, (spans, meta) in spans_by_trace.items()]
    model = _Model(traces, base)
    if not any(model.rows.values()):
        raise SpecError("calibrate: the traces hold no sample/load/fetch/forward/backward/all_reduce/iteration spans")
    after, constrained, fit_info = _fit(model)
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


_INFORMS = {"fetch": ("network.bandwidth_bytes_per_s", "network.latency_s"),
            "all_reduce": ("network.bandwidth_bytes_per_s", "network.latency_s", "pcie.bandwidth_bytes_per_s",
                           "pcie.latency_s"),
            "load": ("pcie.bandwidth_bytes_per_s", "pcie.latency_s", "efficiency.gather_fraction"),
            "forward": ("efficiency.forward_fraction",), "backward": ("efficiency.backward_fraction",),
            "optimizer": ("efficiency.optimizer_fraction",),
            "exchange": ("network.bandwidth_bytes_per_s", "network.latency_s"),
            "sample": ("host.sampling_edges_per_s_per_core",), "iteration": ("iteration_overhead_s",)}


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
    counts: dict[str, int] = defaultdict(int)
    for kind, rows in model.rows.items():
        for p in _INFORMS.get(kind, ()):
            counts[p] += len(rows)
    return counts


def _predictions(traces: list[_Trace], before: ClusterSpec, after: ClusterSpec,
                 simulate_fn: SimulateFn) -> dict[str, dict[str, float]]:
    out = {}
    for t in traces:
        out[t.name] = {"measured_epoch_time_s": t.measured_epoch_s,
                       "predicted_epoch_time_s_before": float(simulate_fn(before, t.plan).epoch_time_s),
                       "predicted_epoch_time_s_after": float(simulate_fn(after, t.plan).epoch_time_s)}
    return out
