"""A card's log-binned degree histogram and the proxy degree sequence drawn from it (vectorised numpy); the
configuration model that wires the sequence is :mod:`simulator.workload.degseq`.

Degree histogram (:func:`degree_histogram`): the in-degrees of a graph as ``[mean degree of the bin, fraction of
vertices]`` rows in increasing degree, one bin per degree up to :data:`EXACT_DEGREES` and log-spaced bins of
ratio :data:`BIN_RATIO` above (log binning: Newman, "Power laws, Pareto distributions and Zipf's law",
Contemp. Phys. 46, 323 (2005), §2). Within a bin every vertex is taken at the bin's mean, so the histogram keeps
the mean degree exactly and the second moment to within ``(ratio - 1)^2 / 12`` (~0.3%) of the graph's.

Proxy degree sequence (:func:`proxy_degrees`): ``n_p`` vertices standing for the ``n`` of the histogram in
degree order; proxy vertex i is the i-th stratum of ``n / n_p`` vertices and takes their mean degree (randomised
rounding). Stratified sampling keeps the mean exactly and the tail's share of edge ends (what a sampled
neighbourhood meets, Newman, Strogatz and Watts, Phys. Rev. E 64, 026118 (2001), §II.A): the largest hubs of
the full graph are averaged into the proxy's largest vertex instead of being lost above its ``1 - 1/n_p``
quantile. At ``n_p = n`` it is the histogram itself.
"""

from __future__ import annotations

import numpy as np

EXACT_DEGREES = 16
"""Degrees 0..15 get a bin each (the bulk of a sparse graph, where min(d, fanout) is decided)."""
BIN_RATIO = 2.0 ** 0.25
"""Ratio of consecutive log bins above :data:`EXACT_DEGREES` (4 bins per octave)."""


def bin_edges(max_degree: float) -> np.ndarray:
    """(B + 1,) float64 lower edges of the histogram's bins up to past ``max_degree``: 0, 1, ..., 16, then
    ``ceil(previous x BIN_RATIO)`` (bin b holds degrees in ``[edges[b], edges[b + 1])``)."""
    top = max(float(max_degree) + 1.0, EXACT_DEGREES + 1.0)
    edges = [float(x) for x in range(EXACT_DEGREES + 1)]
    while edges[-1] < top:
        edges.append(max(edges[-1] + 1.0, float(np.ceil(edges[-1] * BIN_RATIO))))
    return np.asarray(edges)


def degree_histogram(degrees: np.ndarray) -> list[list[float]]:
    """The log-binned histogram of a degree sequence (module docstring).

    Args:
        degrees: (n,) int degrees, n >= 1.

    Returns:
        Rows ``[mean degree of the bin, fraction of vertices]`` for the non-empty bins, in increasing degree;
        means rounded to 4 significant digits, fractions to 6 (the fractions sum to 1 up to that rounding).
    """
    d = np.asarray(degrees, dtype=np.int64)
    edges = bin_edges(int(d.max()))
    which = np.searchsorted(edges, d, side="right") - 1
    counts = np.bincount(which, minlength=len(edges))
    sums = np.bincount(which, weights=d.astype(np.float64), minlength=len(edges))
    rows = []
    for c, s in zip(counts, sums):
        if c:
            rows.append([float(f"{s / c:.4g}"), float(f"{c / len(d):.6g}")])
    return rows


def proxy_degrees(histogram: list[list[float]], num_vertices: int, proxy_vertices: int,
                  rng: np.random.Generator, total: int | None = None) -> np.ndarray:
    """(n_p,) int64 degree sequence of ``proxy_vertices`` vertices standing for the ``num_vertices`` of
    ``histogram`` (stratified: module docstring), in random order, with an even sum: ``total`` when given (the
    card's exact edge count at the proxy's size; the histogram's rounded bin means come within ~0.1% of it, and
    the difference is spread over vertices drawn in proportion to their degree, one stub (edge end) each).

    Raises:
        ValueError: an empty histogram, or ``proxy_vertices`` outside [1, num_vertices].
    """
    if not histogram or not 1 <= proxy_vertices <= num_vertices:
        raise ValueError(f"proxy_degrees: need a histogram and 1 <= proxy_vertices <= num_vertices, got "
                         f"{len(histogram)} rows, {proxy_vertices} of {num_vertices}")
    h = np.asarray(histogram, dtype=np.float64)
    mean_deg, frac = h[:, 0], h[:, 1] / h[:, 1].sum()
    # vertices in decreasing degree: cumulative count (in units of the full graph) and cumulative degree mass
    order = np.argsort(-mean_deg, kind="stable")
    count = np.concatenate([[0.0], np.cumsum(frac[order])]) * num_vertices
    mass = np.concatenate([[0.0], np.cumsum(frac[order] * mean_deg[order])]) * num_vertices
    bounds = np.arange(proxy_vertices + 1) * (num_vertices / proxy_vertices)
    stratum_mass = np.diff(np.interp(bounds, count, mass))  # degree mass is piecewise linear in the count
    mean = stratum_mass / (num_vertices / proxy_vertices)
    base = np.floor(mean)
    deg = (base + (rng.random(proxy_vertices) < mean - base)).astype(np.int64)
    deg = np.minimum(deg, proxy_vertices - 1)
    want = int(deg.sum()) - int(deg.sum()) % 2 if total is None else int(total)
    return adjust_total(deg, want, rng)[rng.permutation(proxy_vertices)]


def adjust_total(deg: np.ndarray, want: int, rng: np.random.Generator) -> np.ndarray:
    """A copy of ``deg`` ((n,) int64 degrees) with its sum moved to ``want`` (even) one half-edge at a time on
    vertices drawn in proportion to their degree (none emptied, none above n - 1; each vertex at most once while
    there are enough vertices with room)."""
    deg = deg.copy()
    n = len(deg)
    diff = int(want) - int(deg.sum())
    if diff > 0:
        room = np.where(deg < n - 1, deg, 0)
        pick = rng.choice(n, diff, replace=bool(diff > np.count_nonzero(room)), p=room / room.sum())
        np.add.at(deg, pick, 1)
    while diff < 0:  # in rounds of one half-edge per vertex of degree >= 2: none emptied, none below 1
        room = np.where(deg >= 2, deg, 0)
        free = int(np.count_nonzero(room))
        if free == 0:
            raise ValueError(f"{int(want)} edge ends are fewer than the {np.count_nonzero(deg)} vertices with edges "
                             "need (one each)")
        step = min(-diff, free)
        deg[rng.choice(n, step, replace=False, p=room / room.sum())] -= 1
        diff += step
    return deg
