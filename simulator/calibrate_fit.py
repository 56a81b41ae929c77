"""Calibration's solver: least squares in log space regularised toward measured priors, with uncertainties and flags.

:mod:`gnnplan.simulator.calibrate` turns traces into :class:`FitRow` objects (one measured duration, the priced
operation of :data:`~gnnplan.simulator.hardware.pricing.OPERATIONS` it is and the work it carries); this module
fits the cluster parameters :data:`PARAMS` to them. It knows no strategy either.

Variables. A parameter with a positive prior ``pi`` (the ``priors`` block of the cluster, else the cluster's own
value, e.g. what ``gnnplan probe`` measured) is fitted as ``x = log(value / pi)``, within ``1e4`` times either way
(and a field's own upper limit, 10 for an efficiency). A parameter whose starting value and prior are 0 (a fixed
cost the starting cluster does not model) has no prior: it is fitted linearly in milliseconds, ``>= 0``, flagged
``no prior``, and kept only when the traces alone determine it (its value above two standard deviations);
otherwise it keeps its starting value and the fit is repeated without it (without a prior nothing stops an
undetermined parameter, e.g. the per-kernel overhead beside an efficiency, from absorbing what another
parameter's prior holds back). Parameters no row's price depends on are not fitted and keep their value.

Residuals (all divided by their standard deviation, so the loss is a negative log posterior):

* data, one per row ``i`` of kind ``k`` (a trace and its phase): ``(predicted_i - measured_i) / s_k``, with
  ``s_k`` the kind's root-mean-square residual at the solution, in seconds (its noise; at least 1% of the kind's
  mean measured seconds). ``s_k`` and the parameters are found by alternating a fit at fixed ``s_k`` with
  re-estimating ``s_k``, at most :data:`MAX_ROUNDS` times, until no ``s_k`` moves by more than 5%. Source:
  feasible weighted least squares with variance re-estimated from the residuals, Carroll and Ruppert,
  "Transformation and Weighting in Regression", Chapman & Hall, 1988, §2.3.
* prior, one per log-space parameter: ``x / w``; ``w = PRIOR_WIDTH = log 3``: one standard deviation is
  a factor of 3 from the prior (the probe's micro-benchmarks time the same calls as the executor, but alone, on
  an idle machine, with other sizes), narrower for what the probe measures directly
  (:func:`~gnnplan.simulator.calibrate_params.prior_width`).

Solver: ``scipy.optimize.least_squares`` (trust-region reflective, bounded; Branch, Coleman and Li, SIAM J. Sci.
Comput. 21(1), 1999). A price may depend on a parameter only beyond a kink (``storage.concurrency`` matters only
below the requests a loader keeps in flight): such a parameter counts as informed when its rows move within 1-4
prior widths of its start, and a variable flat at its start starts at the best of those points (a coordinate scan
of the loss), since a local solver cannot leave a flat region. ``storage.concurrency`` stays >= 1 (its field's
limit). Uncertainty: the Gauss-Newton covariance ``(J^T J)^-1`` of the variables at the solution,
``J`` the Jacobian of all residuals; the data residuals are already divided by their kind's residual RMS, so this
is ``(J^T J)^-1`` scaled by the residual variance (Bates and Watts, "Nonlinear Regression Analysis and Its
Applications", Wiley, 1988, §2.3.1). A direction the residuals do not determine (a null singular vector of
``J``) gives its parameters an infinite uncertainty. Each parameter's share of information from the traces is
``1 - var / w**2`` (a posterior variance as wide as the prior: the traces added nothing).

Flags (:func:`flags_of`): ``at bound``, ``not informed`` (no row's price depends on it, or the traces carry less
than half of its information, so the value mostly restates the prior), ``beyond 3x of prior``, ``no prior``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from scipy.optimize import least_squares

from gnnplan.simulator.calibrate_params import PARAMS, PRIOR_WIDTH, get_param, overridden, prior_width, priors_of
from gnnplan.simulator.hardware.pricing import OPERATIONS
from gnnplan.simulator.hardware.spec import ClusterSpec

BEYOND_FACTOR = 3.0
"""A fitted value this many times its prior, or less than its inverse, is flagged ``beyond 3x of prior``."""
MAX_ROUNDS = 6
"""Alternations of fit and noise re-estimation (module docstring)."""
_LOG_RANGE = math.log(1e4)
_UPPER = {"efficiency.gather_fraction": 10.0, "efficiency.forward_fraction": 10.0,
          "efficiency.backward_fraction": 10.0, "efficiency.optimizer_fraction": 10.0,
          "gpu.backward_overhead_ratio": 10.0}  # ClusterSpec's le=10
_LOWER = {"storage.concurrency": 1.0}  # ClusterSpec's ge=1
_LINEAR_UNIT_S = 1e-3  # no-prior parameters are fitted in milliseconds
_LINEAR_MAX = 1e5
_LINEAR_START = 0.1  # 0.1 ms: trust-region reflective stalls on a start at a bound
_NOISE_FLOOR = 0.01
_NOISE_TOL = 0.05
_RIDGE = 1e-5  # keeps no-prior variables' normal equations regular
_INFORMED_SHARE = 0.5
_PROBE_STEP = 0.1
_SCAN_WIDTHS = (1.0, 2.0, 3.0, 4.0)  # prior widths probed for a parameter the rows depend on only beyond a kink
_FD_STEP = 1e-6  # forward-difference step of the Jacobian, relative to max(1, |x|)
EVALUATION_RATIOS = {"full_sampling": "host.full_neighbour_sampling_ratio", "inference": "efficiency.inference_ratio"}
"""The evaluation's priced operations (its spans, :func:`~gnnplan.simulator.strategies.calibration_rules.
evaluation_rules`) and the ratio of its own each fits. Their rows are priced at the training rates they scale
and inform those jointly with the training rows, but a parameter other than these ratios that no training row's
price depends on is not fitted from them alone (it keeps its value, flagged ``not informed``): the ratio and that
rate would trade against each other on a few large blocks, and the rate would then price training it was never
seen in. Measured on 2026-11-29 (Cora, 2 workers here): gsplit's split layers make no DGL call, so its
evaluation's spans alone set ``gpu.graph_op_overhead_s``, to 4.1x the probe's; dp predicted from that calibration
came out +37% (+19% from its training spans alone)."""
_AT_BOUND = 0.01  # within 1% (log space) or 0.01 ms (linear) of a bound
_DETERMINED_SDS = 2.0  # a no-prior parameter is fitted only when its value exceeds two standard deviations
_NULL_SV = 1e-3
"""Singular value of the normalised Jacobian below which a direction counts as undetermined: a standard deviation
above 1000 units (a factor e^1000, or 1 s for a no-prior fixed cost fitted in ms); a prior alone gives every
log-space direction at least 1 / PRIOR_WIDTH."""


@dataclass(frozen=True)
class FitRow:
    """One measured duration and how it is priced.

    Attributes:
        kind: the noise group (trace name and phase).
        trace: the trace's name.
        epoch: the span's epoch (held-out splits select rows by it).
        op: a key of :data:`~gnnplan.simulator.hardware.pricing.OPERATIONS`.
        work: the operation's keyword arguments (fixed: they never read a fitted parameter).
        measured_s: the measured seconds.
        shape: the trace's cluster at the starting parameters.
    """

    kind: str
    trace: str
    epoch: int
    op: str
    work: Mapping[str, float]
    measured_s: float
    shape: ClusterSpec = field(repr=False)


@dataclass
class FitResult:
    """A solved fit.

    Attributes:
        values: every parameter of :data:`PARAMS` after the fit (the starting value when not fitted).
        parameters: per parameter ``{prior, before, after, low, high, ratio_to_prior, num_rows, constrained,
            fitted, data_share, at_bound, flags}`` (``low``/``high``: the one-standard-deviation range;
            ``constrained``: some row's price depends on it; ``fitted``: its value is the fit's; a bound the
            traces do not determine is None).
        info: ``{cost, num_residuals, rounds, message, noise_s}`` (``noise_s``: each kind's ``s_k``).
    """

    values: dict[str, float]
    parameters: dict[str, dict[str, Any]]
    info: dict[str, Any]


class _Group(NamedTuple):
    """The rows of one trace shape and one priced operation (:class:`_Problem`).

    Attributes:
        shape: the trace's cluster at the starting parameters.
        op: a key of :data:`~gnnplan.simulator.hardware.pricing.OPERATIONS`.
        rows: the rows' indices among the problem's rows.
        works: the distinct work among them (:meth:`_Problem._distinct_work`).
        inverse: (len(rows),) int64, each row's index in ``works``.
    """

    shape: ClusterSpec
    op: str
    rows: list[int]
    works: list[Mapping[str, float]]
    inverse: np.ndarray


class _Problem:
    """The residuals of :class:`FitRow` objects as a function of the fitted variables (module docstring)."""

    def __init__(self, rows: Sequence[FitRow], start: ClusterSpec) -> None:
        self.rows = list(rows)
        self.before = {p: get_param(start, p) for p in PARAMS}
        self.prior = priors_of(start)
        self.width = {p: prior_width(p, p in start.priors) for p in PARAMS}
        self.measured = np.array([r.measured_s for r in self.rows])
        groups: dict[tuple[int, str], list[int]] = defaultdict(list)
        for i, r in enumerate(self.rows):
            groups[(id(r.shape), r.op)].append(i)
        self.groups = [_Group(self.rows[idx[0]].shape, op, idx, *self._distinct_work(idx))
                       for (_, op), idx in groups.items()]
        self.kinds = sorted({r.kind for r in self.rows})
        self.kind_index = np.array([self.kinds.index(r.kind) for r in self.rows])
        self.kind_mean_s = np.array([float(np.mean(np.abs(self.measured[self.kind_index == k])))
                                     for k in range(len(self.kinds))])
        self.floor = np.maximum(_NOISE_FLOOR * self.kind_mean_s, 1e-9)
        self.variables, self.rows_of = self._informed()

    def logged(self, p: str) -> bool:
        """Whether ``p`` is fitted in log space (it has a positive prior)."""
        return self.prior[p] > 0

    def values(self, x: np.ndarray) -> dict[str, float]:
        """Parameter values for variables ``x`` (the others at their starting value)."""
        out = dict(self.before)
        for p, xi in zip(self.variables, x):
            out[p] = self.prior[p] * math.exp(float(xi)) if self.logged(p) else float(xi) * _LINEAR_UNIT_S
        return out

    def x0(self) -> np.ndarray:
        """The variables at the starting values (no-prior ones at least 0.1 ms), strictly inside the bounds."""
        lo, hi = self.bounds()
        start = [math.log(max(self.before[p], 1e-300) / self.prior[p]) if self.logged(p)
                 else max(self.before[p] / _LINEAR_UNIT_S, _LINEAR_START) for p in self.variables]
        return np.clip(np.array(start, dtype=float), lo + 1e-9, hi - 1e-9)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper bounds of the variables (module docstring)."""
        lo = np.array([max(-_LOG_RANGE, math.log(_LOWER[p] / self.prior[p])) if p in _LOWER else
                       -_LOG_RANGE if self.logged(p) else 0.0 for p in self.variables])
        hi = np.array([min(_LOG_RANGE, math.log(_UPPER[p] / self.prior[p])) if p in _UPPER else
                       _LOG_RANGE if self.logged(p) else _LINEAR_MAX for p in self.variables])
        return lo, np.maximum(hi, lo + 1e-6)

    def predicted(self, values: Mapping[str, float], free: Sequence[str] | None = None) -> np.ndarray:
        """Every row's priced seconds at ``values``: each row on its trace's shape with only its operation's
        parameters among ``free`` (default: the fitted variables) replaced."""
        free = self.variables if free is None else free
        out = np.empty(len(self.rows))
        for group in self.groups:
            out[group.rows] = self._priced(group, values, free)
        return out

    def _distinct_work(self, idx: list[int]) -> tuple[list[Mapping[str, float]], np.ndarray]:
        """The distinct work of rows ``idx`` and, per row, the index of its own among them: rows of one shape and
        operation with equal work have equal prices (a simulated trace repeats its window's batches, a real one
        its full-graph layers), so each is priced once per evaluation."""
        works: list[Mapping[str, float]] = []
        seen: dict[Any, int] = {}
        inverse = []
        for i in idx:
            work = self.rows[i].work
            try:
                key: Any = tuple(sorted(work.items()))
                hash(key)
            except TypeError:  # an unhashable value: the row is priced on its own
                key = ("row", i)
            if key not in seen:
                seen[key] = len(works)
                works.append(work)
            inverse.append(seen[key])
        return works, np.array(inverse, dtype=np.int64)

    def _priced(self, group: _Group, values: Mapping[str, float], free: Sequence[str]) -> np.ndarray:
        """The priced seconds of one group's rows (each distinct work once)."""
        priced = OPERATIONS[group.op]
        cluster = overridden(group.shape, {p: values[p] for p in priced.params if p in free})
        return np.array([priced.seconds(cluster, **work) for work in group.works])[group.inverse]

    def residuals(self, x: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """Data residuals over each kind's noise, then the prior (or ridge) residuals."""
        data = (self.predicted(self.values(x)) - self.measured) / noise[self.kind_index]
        reg = [xi / self.width[p] if self.logged(p) else _RIDGE * xi for p, xi in zip(self.variables, x)]
        return np.concatenate([data, np.array(reg)])

    def jacobian(self, x: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """The Jacobian of :meth:`residuals` by forward differences, each variable's column re-pricing only the
        groups whose operation depends on it (a row informs its operation's parameters only)."""
        hi = self.bounds()[1]
        base = self.predicted(self.values(x))
        jac = np.zeros((len(self.rows) + len(x), len(x)))
        for j, p in enumerate(self.variables):
            step = _FD_STEP * max(1.0, abs(float(x[j])))
            step = step if x[j] + step <= hi[j] else -step
            moved = x.copy()
            moved[j] += step
            shifted = self.values(moved)
            for group in self.groups:
                if p in OPERATIONS[group.op].params:
                    idx = group.rows
                    change = self._priced(group, shifted, self.variables) - base[idx]
                    jac[idx, j] = change / step / noise[self.kind_index[idx]]
            jac[len(self.rows) + j, j] = 1.0 / self.width[p] if self.logged(p) else _RIDGE
        return jac

    def _informed(self) -> tuple[list[str], dict[str, int]]:
        """The parameters some row's price depends on, and how many rows each (a finite-difference probe); a
        parameter only evaluation rows depend on is not one, unless it is their own ratio
        (:data:`EVALUATION_RATIOS`)."""
        base = self.predicted(self.before, ())
        evaluation = np.array([r.op in EVALUATION_RATIOS for r in self.rows], dtype=bool)
        keep, counts = [], {}
        for p in PARAMS:
            changed, training = 0, 0
            for value in self._probe_values(p):
                moved = dict(self.before)
                moved[p] = value
                shifted = self.predicted(moved, (p,))
                moves = np.abs(shifted - base) > 1e-12 * np.abs(base) + 1e-18
                changed = max(changed, int(np.count_nonzero(moves)))
                training = max(training, int(np.count_nonzero(moves & ~evaluation)))
                if training or (changed and p in EVALUATION_RATIOS.values()):
                    break
            counts[p] = changed if training or p in EVALUATION_RATIOS.values() else 0
            if counts[p]:
                keep.append(p)
        return keep, counts

    def _probe_values(self, p: str) -> list[float]:
        """Values of ``p`` at which :meth:`_informed` looks for rows whose price moves: a step of
        :data:`_PROBE_STEP` (downward at an upper limit), then :data:`_SCAN_WIDTHS` prior widths either way
        within the limits (a price that depends on ``p`` only beyond a kink, e.g. ``storage.concurrency`` above
        the requests in flight)."""
        before = self.before[p]
        if before <= 0:
            return [_LINEAR_UNIT_S]
        up = before * math.exp(_PROBE_STEP)
        out = [up if up <= _UPPER.get(p, math.inf) else before * math.exp(-_PROBE_STEP)]
        for k in _SCAN_WIDTHS:
            out += [before * math.exp(sign * k * self.width[p]) for sign in (-1.0, 1.0)]
        return [v for v in out if _LOWER.get(p, 0.0) <= v <= _UPPER.get(p, math.inf)]

    def start(self, noise: np.ndarray) -> np.ndarray:
        """The solver's start: :meth:`x0`, except that a variable no row's price moves with at its start (a kink,
        see :meth:`_probe_values`) starts at the best of :data:`_SCAN_WIDTHS` prior widths either way (loss of
        :meth:`residuals`; a local solver cannot leave a flat region by itself)."""
        x, (lo, hi) = self.x0(), self.bounds()
        base = self.predicted(self.values(x))
        for j, p in enumerate(self.variables):
            if not self.logged(p):
                continue
            moved = x.copy()
            moved[j] += _FD_STEP if x[j] + _FD_STEP <= hi[j] else -_FD_STEP
            if np.any(self.predicted(self.values(moved)) != base):
                continue
            best, best_cost = x[j], float(np.sum(self.residuals(x, noise) ** 2))
            for k in _SCAN_WIDTHS:
                for sign in (-1.0, 1.0):
                    moved[j] = min(max(x[j] + sign * k * self.width[p], lo[j] + 1e-9), hi[j] - 1e-9)
                    cost = float(np.sum(self.residuals(moved, noise) ** 2))
                    if cost < best_cost:
                        best, best_cost = moved[j], cost
            x[j] = best
            base = self.predicted(self.values(x))
        return x


def fit(rows: Sequence[FitRow], start: ClusterSpec) -> FitResult:
    """Fit :data:`PARAMS` to ``rows`` starting from ``start`` (module docstring).

    Args:
        rows: the measured rows (at least one).
        start: the cluster the rows' shapes were taken from; its values start the fit and, without a
            ``priors`` entry, are the priors.

    Returns:
        The fitted values, the per-parameter report and a summary.
    """
    prob = _Problem(rows, start)
    while True:
        x, sol, noise, rounds = _solve(prob)
        variance = _variances(_posterior_jacobian(prob, sol.jac) if sol is not None else np.zeros((0, 0)),
                              len(prob.variables))
        undetermined = [p for i, p in enumerate(prob.variables)
                        if not prob.logged(p) and not x[i] > _DETERMINED_SDS * math.sqrt(variance[i])]
        if not undetermined:
            break
        prob.variables = [p for p in prob.variables if p not in undetermined]  # kept at their starting value
    lo, hi = prob.bounds()
    values = prob.values(x)
    parameters = {p: _parameter(prob, p, values[p], x, lo, hi, variance) for p in PARAMS}
    info = {"cost": float(sol.cost) if sol is not None else 0.0, "num_residuals": len(prob.rows),
            "rounds": rounds, "message": str(sol.message) if sol is not None else "nothing to fit",
            "noise_s": {k: float(s) for k, s in zip(prob.kinds, noise)}, "prior_width_factor": math.exp(PRIOR_WIDTH)}
    return FitResult(values, parameters, info)


def _solve(prob: _Problem) -> tuple[np.ndarray, Any, np.ndarray, int]:
    """Alternate the least-squares fit at fixed noise with re-estimating each kind's noise (module docstring).

    Returns:
        (variables, the last ``least_squares`` result or None when nothing is fitted, noise per kind, rounds).
    """
    noise = np.maximum(0.1 * prob.kind_mean_s, prob.floor)  # 10% of each kind's mean until re-estimated
    x, (lo, hi) = prob.start(noise), prob.bounds()
    sol: Any = None
    rounds = 0
    for rounds in range(1, MAX_ROUNDS + 1):
        if not prob.variables:
            break
        sol = least_squares(prob.residuals, x, jac=prob.jacobian, bounds=(lo, hi), args=(noise,), method="trf",
                            x_scale=1.0, tr_solver="lsmr")
        x = sol.x
        misfit = prob.predicted(prob.values(x)) - prob.measured
        rms = np.sqrt(np.bincount(prob.kind_index, misfit ** 2, len(prob.kinds)) /
                      np.bincount(prob.kind_index, minlength=len(prob.kinds)))
        new = np.maximum(rms, prob.floor)
        done = bool(np.all(np.abs(new / noise - 1.0) <= _NOISE_TOL))
        noise = new
        if done:
            break
    return x, sol, noise, rounds


def _posterior_jacobian(prob: _Problem, jac: Any) -> np.ndarray:
    """The Jacobian of the data and prior residuals (the ridge rows of no-prior variables left out: they only
    keep the solver's normal equations regular and are no information)."""
    keep = list(range(len(prob.rows))) + [len(prob.rows) + i for i, p in enumerate(prob.variables)
                                          if prob.logged(p)]
    return np.asarray(jac, dtype=float)[keep]


def _variances(jac: np.ndarray, n: int) -> np.ndarray:
    """Diagonal of ``(J^T J)^-1`` by SVD; infinite for variables in a direction ``J`` does not determine."""
    if n == 0 or jac.size == 0:
        return np.full(n, math.inf)
    _, sv, vt = np.linalg.svd(np.asarray(jac, dtype=float), full_matrices=False)
    null = sv <= _NULL_SV
    inv = np.where(null, 0.0, 1.0 / np.where(null, 1.0, sv) ** 2)
    var = (vt.T ** 2) @ inv
    undetermined = (np.abs(vt[null]) > 1e-6).any(axis=0) if null.any() else np.zeros(n, dtype=bool)
    return np.where(undetermined, math.inf, var)


def _parameter(prob: _Problem, p: str, value: float, x: np.ndarray, lo: np.ndarray, hi: np.ndarray,
               variance: np.ndarray) -> dict[str, Any]:
    """The report of one parameter (module docstring; flags by :func:`flags_of`)."""
    prior, before = prob.prior[p], prob.before[p]
    out: dict[str, Any] = {"prior": prior if prob.logged(p) else None, "before": before, "after": value,
                           "low": value, "high": value, "ratio_to_prior": value / prior if prior > 0 else None,
                           "num_rows": prob.rows_of[p], "constrained": prob.rows_of[p] > 0,
                           "fitted": p in prob.variables, "data_share": 0.0, "at_bound": False}
    if p in prob.variables:
        i = prob.variables.index(p)
        sd = math.sqrt(variance[i]) if math.isfinite(variance[i]) else math.inf
        if prob.logged(p):
            out["low"], out["high"] = value * math.exp(-sd), value * math.exp(sd) if sd < 700 else math.inf
            out["data_share"] = max(0.0, 1.0 - sd ** 2 / prob.width[p] ** 2) if math.isfinite(sd) else 0.0
        else:
            out["low"], out["high"] = max(0.0, value - sd * _LINEAR_UNIT_S), value + sd * _LINEAR_UNIT_S
            out["data_share"] = 1.0 if math.isfinite(sd) else 0.0
        out["at_bound"] = bool(min(x[i] - lo[i], hi[i] - x[i]) <= _AT_BOUND)
    out["low"], out["high"] = (v if math.isfinite(v) else None for v in (out["low"], out["high"]))  # JSON-safe
    out["flags"] = flags_of(out)
    return out


def flags_of(param: Mapping[str, Any]) -> list[str]:
    """The flags of a parameter report (module docstring), in a fixed order."""
    flags = []
    if param["at_bound"]:
        flags.append("at bound")
    if not param["fitted"] or param["data_share"] < _INFORMED_SHARE:
        flags.append("not informed")
    ratio = param["ratio_to_prior"]
    if ratio is not None and not (1.0 / BEYOND_FACTOR <= ratio <= BEYOND_FACTOR):
        flags.append("beyond 3x of prior")
    if param["prior"] is None:
        flags.append("no prior")
    return flags
