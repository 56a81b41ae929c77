"""Degree-corrected stochastic block model (DC-SBM) with communities laid out in vertex-id order (vectorised numpy).

Source: Karrer and Newman, "Stochastic blockmodels and community structure in networks", Phys. Rev. E 83,
016107 (2011): edge u-v appears with rate theta_u theta_v omega_{c(u) c(v)}; here omega puts a fraction
``1 - mu`` of every community's edge ends inside it and spreads the rest over the other communities in
proportion to their degree mass (the planted-partition form, with ``mu`` the mixing parameter of the LFR
benchmark: Lancichinetti, Fortunato and Radicchi, Phys. Rev. E 78, 046110 (2008), §II). Expected degrees
theta follow a power law P(k) ~ k^-gamma between a lower cut-off solved from the mean degree and ``max_degree``
(the LFR degree model, ibid.). Realised degrees scatter (Poisson) around theta and hubs lose a few repeated pairs,
so an exponent fitted to them lies a few percent above gamma (measured in tests/workload/test_generators.py).

Notation: theta_u -> ``theta``, kappa_c (a community's degree mass) -> ``hi - lo`` of the cumulative theta in
:func:`_draw`, mu -> ``mu``, gamma -> ``exponent`` (``SbmSpec.degree_exponent``), K -> ``num_communities``.

Why not a library: networkx's ``stochastic_block_model`` is not degree-corrected and draws every vertex pair
(O(n^2)) or loops in Python; networkx's ``LFR_benchmark_graph`` is pure Python and takes minutes at 10^5
vertices; graspologic's DC-SBM builds a dense n x n matrix; igraph's ``SBM`` has no degree correction; NetworKit's
C++ ``LFRGenerator`` needs 6-11 s for 10^5 vertices on the one thread that makes it reproducible, would add a
12 MB compiled dependency, and numbers communities arbitrarily. This module draws 10^5 vertices with 10^6 edges
in < 1 s and 10^6 with 10^7 in ~15 s (one core), reproducibly by seed, with community c holding the contiguous ids
``[starts[c], starts[c + 1])``.

Edges are drawn as two pools with fixed sizes, ``round((1 - mu) m)`` intra-community and the rest
inter-community, each topped up after removing self-loops and duplicates, so the measured intra-community edge
fraction is ``1 - mu`` up to rounding and the graph has exactly ``m = num_vertices * mean_degree / 2``
undirected edges (unless a pool cannot hold that many distinct pairs: :func:`sbm_edges` raises).
"""

from __future__ import annotations

import math

import numpy as np

MAX_ROUNDS = 64
"""Top-up rounds before giving up on a pool (each draws the missing edges again, with 5% to spare)."""


def community_starts(num_vertices: int, num_communities: int) -> np.ndarray:
    """(K + 1,) int64 first id of every community and ``num_vertices``: K near-equal contiguous ranges."""
    return (np.arange(num_communities + 1, dtype=np.int64) * num_vertices) // num_communities


def communities(num_vertices: int, num_communities: int) -> np.ndarray:
    """(n,) int64 community of every vertex (contiguous id ranges, :func:`community_starts`)."""
    starts = community_starts(num_vertices, num_communities)
    return np.searchsorted(starts, np.arange(num_vertices), side="right").astype(np.int64) - 1


def powerlaw_min_degree(mean_degree: float, exponent: float, max_degree: float) -> float:
    """The lower cut-off x of a continuous power law p(k) ~ k^-exponent on [x, max_degree] with the given mean.

    Source: mean of the truncated Pareto distribution with shape a = exponent - 1,
    E[k] = a / (a - 1) * x^a * (x^(1-a) - M^(1-a)) / (1 - (x / M)^a) (a != 1).

    Raises:
        ValueError: no cut-off in (0, max_degree) gives that mean (mean >= max_degree, or exponent <= 1).
    """
    a = exponent - 1.0
    if a <= 0 or a == 1.0 or not 0 < mean_degree < max_degree:
        raise ValueError(f"sbm: need exponent > 1 (not 2) and 0 < mean_degree < max_degree, got exponent "
                         f"{exponent}, mean_degree {mean_degree}, max_degree {max_degree}")

    def mean(x: float) -> float:
        return a / (a - 1) * x ** a * (x ** (1 - a) - max_degree ** (1 - a)) / (1 - (x / max_degree) ** a) - mean_degree

    from scipy.optimize import brentq  # imported on use: 0.3 s of every worker's start-up otherwise

    return float(brentq(mean, 1e-9 * max_degree, max_degree * (1 - 1e-12)))


def expected_degrees(num_vertices: int, mean_degree: float, exponent: float, max_degree: float,
                     rng: np.random.Generator) -> np.ndarray:
    """(n,) float64 expected degrees theta drawn from the truncated power law (inverse CDF), in random order.

    Source: LFR degree model (module docstring); inverse CDF of the truncated Pareto distribution.
    """
    x = powerlaw_min_degree(mean_degree, exponent, max_degree)
    a = exponent - 1.0
    u = rng.random(num_vertices)
    lo, hi = x ** -a, max_degree ** -a
    return (lo - u * (lo - hi)) ** (-1.0 / a)


def _draw(cum: np.ndarray, starts: np.ndarray, comm_of: np.ndarray, m: int, intra: bool,
          rng: np.random.Generator) -> np.ndarray:
    """``m`` candidate edges as keys ``min * n + max``: u ~ theta; v ~ theta inside (intra) / outside u's community.

    Shapes:
        cum: (n + 1,) cumulative theta starting at 0; starts: (K + 1,); comm_of: (n,).
    """
    n, total = len(comm_of), cum[-1]
    # sorted queries search faster (cache); the draws are i.i.d., so their order carries nothing
    u = np.minimum(np.searchsorted(cum, np.sort(rng.random(m)) * total, side="right") - 1, n - 1)
    c = comm_of[u]
    lo, hi = cum[starts[c]], cum[starts[c + 1]]
    r = rng.random(m)
    if intra:
        pos = lo + r * (hi - lo)
    else:
        pos = r * (total - (hi - lo))
        pos = np.where(pos >= lo, pos + (hi - lo), pos)
    v = np.minimum(np.searchsorted(cum, pos, side="right") - 1, n - 1)
    keep = u != v
    a, b = np.minimum(u[keep], v[keep]), np.maximum(u[keep], v[keep])
    return a * n + b


def sbm_edges(num_vertices: int, num_communities: int, mu: float, mean_degree: float, exponent: float,
              max_degree: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Draw a simple, symmetric DC-SBM graph (module docstring).

    Args:
        num_vertices: n >= 2.
        num_communities: K in [1, n]; K = 1 has no inter-community edges (mu must then be 0).
        mu: mixing parameter in [0, 1): fraction of inter-community edges.
        mean_degree: target mean degree (undirected edges m = round(n * mean_degree / 2)).
        exponent: power-law exponent gamma of the expected degrees (> 1, not 2).
        max_degree: largest expected degree.
        seed: RNG seed (the result is a pure function of the arguments).

    Returns:
        (src, dst), int64 arrays listing both directions of every undirected edge, sorted by (src, dst),
        without self-loops or duplicates.

    Raises:
        ValueError: invalid arguments, or a pool of edges that cannot be filled (too dense communities).
    """
    if num_vertices < 2 or not 1 <= num_communities <= num_vertices or not 0 <= mu < 1:
        raise ValueError("sbm: need num_vertices >= 2, 1 <= num_communities <= num_vertices and 0 <= mu < 1")
    if num_communities == 1 and mu > 0:
        raise ValueError("sbm: one community has no inter-community edges; mu must be 0")
    rng = np.random.default_rng(seed)
    theta = expected_degrees(num_vertices, mean_degree, exponent, max_degree, rng)
    cum = np.concatenate([[0.0], np.cumsum(theta)])
    starts = community_starts(num_vertices, num_communities)
    comm_of = communities(num_vertices, num_communities)
    m = round(num_vertices * mean_degree / 2)
    m_intra = round((1 - mu) * m)
    keys = [_fill(cum, starts, comm_of, want, intra, rng) for intra, want in ((True, m_intra), (False, m - m_intra))]
    key = np.concatenate(keys)  # the pools are disjoint (same / different communities), each without repeats
    a, b = key // num_vertices, key % num_vertices
    both = np.sort(np.concatenate([key, b * num_vertices + a]))
    return both // num_vertices, both % num_vertices


def _fill(cum: np.ndarray, starts: np.ndarray, comm_of: np.ndarray, want: int, intra: bool,
          rng: np.random.Generator) -> np.ndarray:
    """``want`` distinct edge keys of one pool (sorted), drawn in rounds until enough distinct ones exist; a
    surplus is dropped uniformly at random (so no vertex range is favoured)."""
    if want == 0:
        return np.empty(0, dtype=np.int64)
    seen = np.empty(0, dtype=np.int64)
    for _ in range(MAX_ROUNDS):
        drawn = _draw(cum, starts, comm_of, int((want - len(seen)) * 1.05) + 16, intra, rng)
        seen = _sorted_unique(np.concatenate([seen, drawn]))
        if len(seen) >= want:
            return seen[np.sort(rng.choice(len(seen), want, replace=False))] if len(seen) > want else seen
    kind = "intra" if intra else "inter"
    raise ValueError(f"sbm: could not draw {want} distinct {kind}-community edges (communities too small for the "
                     f"mean degree; use fewer communities or a lower mean_degree)")


def _sorted_unique(keys: np.ndarray) -> np.ndarray:
    """Sorted distinct values (sort-based: numpy 2's hash-based ``np.unique`` is slower on 10^7 int64 keys)."""
    s = np.sort(keys)
    return s[np.concatenate([[True], s[1:] != s[:-1]])] if len(s) else s


def default_max_degree(num_vertices: int, num_communities: int, mean_degree: float) -> float:
    """The expected-degree cap used when none is given: sqrt(mean_degree x community size) x 2, at most the
    community size and at least twice the mean.

    Source: [inferred] the structural cut-off k_max ~ sqrt(<k> n) of uncorrelated scale-free networks (Boguna,
    Pastor-Satorras and Vespignani, Eur. Phys. J. B 38, 205 (2004)), taken per community because a vertex's
    intra-community edges must fit in its community; the factor 2 keeps a visible tail while pairs repeat rarely.
    """
    size = num_vertices / num_communities
    return float(max(2.0 * mean_degree, min(size, 2.0 * math.sqrt(mean_degree * size))))
