"""The expected maximum of independent normal arrival times: when a synchronous collective releases.

A collective (an all-reduce, an ``all_to_all`` call, a migration step) completes only after its last participant
arrives. If participant ``i`` arrives at ``a_i + s_i Z_i`` (``Z_i`` independent standard normals: the noise of its
work since the previous collective), the collective releases at ``E[max_i (a_i + s_i Z_i)]``, which exceeds
``max_i a_i`` even when every ``a_i`` is equal: ``s e_N`` for N identical participants, with ``e_N`` the expected
maximum of N standard normals (``e_2 = 1/sqrt(pi) = 0.5642``, ``e_4 = 1.0294``, ``e_8 = 1.4236``; Tippett,
"On the extreme individuals and the range of samples taken from a normal population", Biometrika 17, 1925,
Table I). This is the synchronisation cost of stragglers that grows with the number of participants (Dean and
Barroso, "The tail at scale", CACM 56(2), 2013).

Computed exactly up to quadrature: ``E[M] = lo + integral_lo^hi (1 - F(t)) dt`` with ``F(t) = prod_i
Phi((t - a_i) / s_i)^{c_i}`` (``c_i`` identical copies of participant i; a participant with ``s_i = 0`` is a
step at ``a_i``), on :data:`GRID_POINTS` points from the latest of the certain arrivals and the
``a_i - 8.5 s_i`` (``F`` is below 1e-16 before: no kink lies inside) to the latest ``a_i + 8.5 s_i`` (``1 - F``
is below 1e-16 after), Simpson's rule.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.integrate import simpson
from scipy.special import ndtr

GRID_POINTS = 2001
"""Quadrature points: the integrand is smooth on the span, and Simpson's rule on 2001 points gives Tippett's
values to 1e-9 (tests/simulator/test_order_stats.py)."""

_SPAN_SDS = 8.5
"""Half-width of the quadrature span around each arrival, in standard deviations."""


def expected_max(means: Sequence[float], sds: Sequence[float], copies: Sequence[int] | None = None) -> float:
    """``E[max_i X_i]`` of independent ``X_i ~ N(means[i], sds[i]^2)``, each counted ``copies[i]`` times.

    Args:
        means: (n,) means (e.g. arrival times, seconds).
        sds: (n,) standard deviations >= 0, same unit.
        copies: (n,) integers >= 1, how many independent participants each entry stands for (default 1 each).

    Returns:
        The expected maximum; ``max(means)`` when every sd is 0.

    Raises:
        ValueError: empty input, lengths that differ, a negative or non-finite sd, or a copy count < 1.
    """
    a = np.asarray(means, dtype=float)
    s = np.asarray(sds, dtype=float)
    c = np.ones(len(a)) if copies is None else np.asarray(copies, dtype=float)
    if a.ndim != 1 or not len(a) or s.shape != a.shape or c.shape != a.shape:
        raise ValueError(f"expected_max: means, sds and copies must be equal-length, non-empty lists "
                         f"(got {a.shape}, {s.shape}, {c.shape})")
    if not (np.all(np.isfinite(s)) and np.all(s >= 0)):
        raise ValueError("expected_max: every sd must be finite and >= 0")
    if np.any(c < 1):
        raise ValueError("expected_max: every copy count must be >= 1")
    noisy = s > 0
    if not noisy.any():
        return float(a.max())
    # F(t) = P(max <= t) is ~0 below the latest of every participant's lowest plausible arrival and 1 - F(t)
    # is ~0 above the latest highest one
    fixed = a[~noisy]
    lo = float((a[noisy] - _SPAN_SDS * s[noisy]).max())
    if len(fixed):
        lo = max(lo, float(fixed.max()))
    hi = max(lo, float((a[noisy] + _SPAN_SDS * s[noisy]).max()))
    t = np.linspace(lo, hi, GRID_POINTS)
    log_cdf = np.zeros_like(t)
    for mean, sd, count in zip(a, s, c):
        if sd > 0:
            log_cdf += count * np.log(np.maximum(ndtr((t - mean) / sd), 1e-300))
        else:
            log_cdf += np.where(t >= mean, 0.0, -np.inf)
    tail = 1.0 - np.exp(log_cdf)
    return float(lo + simpson(tail, x=t))
