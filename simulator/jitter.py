"""``jitter_s``, the stragglers' arrival variance per second of work, estimated from the arrival times of
collective calls (``gnnplan probe`` times them around fixed work: :func:`gnnplan.executor.probe_io.straggler_jitter`).

The model (the cluster field ``jitter_s``, simulated by :class:`~gnnplan.simulator.engine.Rendezvous`): a rank
that has worked ``T`` seconds since the previous collective released arrives ``sqrt(v T) Z`` late (``Z`` standard
normal, independent across ranks and calls), so a call whose ranks have worked ``T_r`` makes the mean rank wait
``E[max_r sqrt(v T_r) Z_r] = sqrt(v) g`` (:func:`~gnnplan.simulator.order_stats.expected_max`) beyond what the
deterministic schedule gives.

The measurement, per collective call: each rank's arrival ``a_r`` (the ranks share one monotonic clock) and
``T_r``, from the release of that rank's previous call (the last arrival at it) to ``a_r``. A rank's systematic
lateness at a call site (a site: calls of the same work, e.g. the probe's segments of one length) is its mean
offset from the call's mean arrival over the site's calls; it is removed, and of what remains the mean rank's
wait ``W`` is ``mean_r (max x - x_r)``. Sites with fewer than :data:`MIN_CALLS_PER_SITE` calls are left out (their
mean offsets would absorb the noise), and so is every rank's first call (no previous release).

The estimate is the least-squares fit of ``W = sqrt(v) g`` over the calls: ``sqrt(v) = sum W g / sum g^2``, with
its standard error from the residuals (ordinary least squares through the origin), and ``v`` its square. It is a
moment fit of the mean waits, which are what an epoch pays, not of the arrivals' spread: arrival noise on a shared
CPU is heavier-tailed than a normal, and its standard deviation would overstate the waits (on a main-job gsplit
trace here: mean wait / residual standard deviation 0.39-0.47 per call site, where a normal gives 0.56).

The square-root law, measured here (2026-11-28, two local gloo processes, 64 x 64 matmuls between 1 KiB
all-reduces, 400 calls): segments of 0.76, 2.1, 7.7 and 28 ms (a 37x range) gave mean waits of 0.066, 0.18, 0.28
and 0.53 ms, i.e. ``v`` of 1.8e-5, 4.6e-5, 3.2e-5 and 3.1e-5 s (a wait proportional to the segment would have
moved ``v`` 37x). A training trace's waits are not used: they also hold the variation of the work itself between
iterations (:mod:`simulator.calibrate`'s docstring: the same fit on the bench_whatif traces ranged from 1.5e-6 to
2.8e-4 s across strategies and network rates).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from gnnplan.simulator.order_stats import expected_max

MIN_CALLS_PER_SITE = 4
"""Calls a site needs before its ranks' systematic offsets are removed and its calls used."""


@dataclass(frozen=True)
class Call:
    """One collective call.

    Attributes:
        site: which calls are alike (same work before them; e.g. the probe's segment length).
        arrivals: rank -> arrival time (seconds, one clock for all ranks).
    """

    site: Hashable
    arrivals: Mapping[int, float]


@dataclass(frozen=True)
class JitterFit:
    """The estimate.

    Attributes:
        value_s: ``jitter_s`` (seconds of variance per second of work).
        low_s, high_s: one standard error either way, ``(sqrt(v) -+ se)^2`` with ``se`` the standard error of
            ``sqrt(v)`` (the fitted quantity).
        num_calls: calls the estimate used.
        mean_wait_s: their mean measured wait of the mean rank (seconds).
    """

    value_s: float
    low_s: float
    high_s: float
    num_calls: int
    mean_wait_s: float


def _waits(calls: Sequence[Call]) -> list[tuple[float, float]]:
    """(measured wait W, model factor g) of each usable call (module docstring)."""
    previous: dict[int, float] = {}  # rank -> release of its previous call
    by_site: dict[Hashable, list[tuple[dict[int, float], dict[int, float]]]] = defaultdict(list)
    for call in sorted(calls, key=lambda c: max(c.arrivals.values())):
        release = max(call.arrivals.values())
        worked = {r: a - previous[r] for r, a in call.arrivals.items() if r in previous}
        for r in call.arrivals:
            previous[r] = release
        if len(call.arrivals) >= 2 and len(worked) == len(call.arrivals) and all(t > 0 for t in worked.values()):
            by_site[call.site].append((dict(call.arrivals), worked))
    out = []
    for site_calls in by_site.values():
        ranks = sorted(site_calls[0][0])
        site_calls = [c for c in site_calls if sorted(c[0]) == ranks]
        if len(site_calls) < MIN_CALLS_PER_SITE:
            continue
        arr = np.array([[a[r] for r in ranks] for a, _ in site_calls])
        offsets = (arr - arr.mean(axis=1, keepdims=True)).mean(axis=0)
        x = arr - offsets
        waits = (x.max(axis=1, keepdims=True) - x).mean(axis=1)
        for wait, (_, worked) in zip(waits, site_calls):
            out.append((float(wait), expected_max([0.0] * len(ranks), [math.sqrt(worked[r]) for r in ranks])))
    return out


def estimate_jitter(calls: Sequence[Call]) -> JitterFit | None:
    """``jitter_s`` from the arrival times of collective calls (module docstring).

    Args:
        calls: the calls, any order, all on one clock.

    Returns:
        The estimate, or None when no call is usable (one rank, too few calls per site).
    """
    rows = _waits(calls)
    if not rows:
        return None
    w = np.array([r[0] for r in rows])
    g = np.array([r[1] for r in rows])
    ss = float((g ** 2).sum())
    if ss <= 0:
        return None
    root = max(0.0, float((w * g).sum()) / ss)
    dof = max(len(rows) - 1, 1)
    se_root = math.sqrt(float(((w - root * g) ** 2).sum()) / dof / ss)
    return JitterFit(value_s=root ** 2, low_s=max(0.0, root - se_root) ** 2, high_s=(root + se_root) ** 2,
                     num_calls=len(rows), mean_wait_s=float(w.mean()))
