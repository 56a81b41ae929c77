"""Where the fastest strategy changes along a rate axis, how sure the measurement is of it, and whether a
prediction orders strategies as measured: the analysis of :mod:`bench_whatif` (benchmarks/bench_whatif.py), kept
apart from its measuring and replaying. Rates are bytes/s; times seconds."""

from __future__ import annotations

import math

from measure import Measured


def winner_change(rates: list[float], times: dict[str, list[float]]) -> float | None:
    """The rate where the fastest strategy changes, log-interpolated on the difference of the two strategies
    that swap (the first change from the slowest rate up); None when one strategy wins everywhere."""
    names = list(times)
    winners = [min(names, key=lambda s: times[s][i]) for i in range(len(rates))]
    for i in range(1, len(rates)):
        if winners[i] != winners[i - 1]:
            a, b = winners[i - 1], winners[i]
            d0 = math.log(times[a][i - 1] / times[b][i - 1])
            d1 = math.log(times[a][i] / times[b][i])
            frac = d0 / (d0 - d1) if d0 != d1 else 0.5
            return math.exp(math.log(rates[i - 1]) + frac * (math.log(rates[i]) - math.log(rates[i - 1])))
    return None


CHANGE_DRAWS = 2000
"""Bootstrap resamples behind the measured winner-change rate's interval."""


def change_interval(rates: list[float], runs: dict[str, list[list[float]]], seed: int = 0) -> tuple[float, float]:
    """90% bootstrap interval (5th and 95th percentiles) of the measured winner-change rate: at every rate each
    strategy's runs resampled with replacement (:data:`CHANGE_DRAWS` times, ``numpy.random.default_rng(seed)``)
    and :func:`winner_change` of the resampled medians; a draw in which the winner never changes counts as
    ``inf`` (above the range).

    Shapes:
        rates: (n,) bytes/s ascending; runs: strategy -> n lists of run times (seconds), each non-empty.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(CHANGE_DRAWS):
        medians = {s: [float(np.median(rng.choice(r, len(r)))) for r in per_rate] for s, per_rate in runs.items()}
        change = winner_change(rates, medians)
        draws.append(math.inf if change is None else change)
    low, high = np.quantile(draws, [0.05, 0.95], method="inverted_cdf")  # an actual draw: inf stays inf
    return float(low), float(high)


def order_agrees(measured: dict[str, Measured], predicted: dict[str, float]) -> bool:
    """Whether every pair of strategies whose measured times differ by more than their run spread is ordered
    the same way by the prediction."""
    names = list(measured)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            ma, mb = measured[a], measured[b]
            margin = max(ma.spread * ma.median_s, mb.spread * mb.median_s)
            if abs(ma.median_s - mb.median_s) > margin and \
                    (ma.median_s < mb.median_s) != (predicted[a] < predicted[b]):
                return False
    return True


def rate_text(bandwidth: float | None) -> str:
    """A shaping rate in Mbit/s; None or ``inf``: no change within the range."""
    return "never (in range)" if bandwidth is None or math.isinf(bandwidth) else f"{bandwidth * 8 / 1e6:.0f} Mbit/s"
