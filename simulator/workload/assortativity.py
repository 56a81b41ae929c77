"""Degree correlations of a proxy graph: Newman's degree assortativity coefficient, and the degree-preserving
rewiring that moves a configuration-model proxy to a card's coefficient.

Assortativity (Newman, "Assortative mixing in networks", Phys. Rev. Lett. 89, 208701 (2002), Eq. 4): over the M
undirected edges (j_e, k_e the degrees of their ends),
``r = [M^-1 sum j k - (M^-1 sum (j + k) / 2)^2] / [M^-1 sum (j^2 + k^2) / 2 - (M^-1 sum (j + k) / 2)^2]``
(networkx ``degree_assortativity_coefficient`` of the undirected graph). With the degrees fixed, only ``S = sum
j k`` changes, so r is affine in S. A configuration model pairs stubs at random, r ~ 0 (slightly negative for a
simple graph with hubs); citation graphs are disassortative (Cora: -0.066): hubs link to small vertices more than
to each other, so fewer of a sampled neighbourhood's second hop are hubs.

Rewiring (:func:`rewire_assortativity`): the degree-preserving swap of Xulvi-Brunet and Sokolov, "Reshuffling
scale-free networks: from random to assortative", Phys. Rev. E 70, 066102 (2004), §II: two edges a-b, c-d with
four distinct ends are replaced by the pairing of their ends that lowers S (largest degree with smallest, the
middle two together) or raises it (the two largest together, the two smallest together), whichever moves r
towards the target; with ``groups`` (a proxy's planted communities) only swaps that keep the multiset of
community pairs of the two edges (the block model's edge counts stay exact). Swaps are proposed in rounds (every
movable edge in one proposal, edges paired at random); a round drops swaps that would add an existing or repeated edge
and takes, in random order, only as many as the remaining gap in S needs. Rounds stop at the target, when a
round finds no swap, or after :data:`MAX_ROUNDS`.
"""

from __future__ import annotations

import numpy as np

MAX_ROUNDS = 200
"""Rounds of :func:`rewire_assortativity` at most."""


def assortativity(num_vertices: int, src: np.ndarray, dst: np.ndarray) -> float:
    """Newman's degree assortativity r of a graph taken as undirected and simple (module docstring).

    Shapes:
        src, dst: (E,) int64 edges (either or both directions listed).

    Returns:
        r in [-1, 1]; 0 for a graph whose degrees do not vary.
    """
    a, b = _undirected(num_vertices, src, dst)
    deg = np.bincount(np.concatenate([a, b]), minlength=num_vertices).astype(np.float64)
    return _r(deg, float(np.sum(deg[a] * deg[b])), a, b)


def _undirected(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) of every undirected simple edge once, a < b."""
    keep = src != dst
    key = np.unique(np.minimum(src[keep], dst[keep]) * n + np.maximum(src[keep], dst[keep]))
    return key // n, key % n


def _moments(deg: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[float, float, int]:
    """(mean of (j + k) / 2, mean of (j^2 + k^2) / 2, M) over the edges: fixed by the degrees."""
    m = len(a)
    first = float(np.sum(deg[a] + deg[b])) / (2.0 * m)
    second = float(np.sum(deg[a] ** 2 + deg[b] ** 2)) / (2.0 * m)
    return first, second, m


def _r(deg: np.ndarray, s: float, a: np.ndarray, b: np.ndarray) -> float:
    if len(a) == 0:
        return 0.0
    first, second, m = _moments(deg, a, b)
    var = second - first ** 2
    return float((s / m - first ** 2) / var) if var > 0 else 0.0


def rewire_assortativity(num_vertices: int, src: np.ndarray, dst: np.ndarray, target: float,
                         rng: np.random.Generator, groups: np.ndarray | None = None,
                         movable: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The graph rewired by degree-preserving swaps until its assortativity reaches ``target`` (module docstring).

    Args:
        num_vertices: n.
        src, dst: (E,) int64 both directions of every undirected edge (a simple graph).
        target: assortativity coefficient to reach, in (-1, 1).
        rng: random generator.
        groups: (n,) int64 community of every vertex whose pair counts every swap keeps, or None.
        movable: (n,) bool vertices whose edges may be swapped (None: all; a proxy's largest component, whose
            small components stay as planted); r is still over all edges.

    Returns:
        (src, dst) int64 both directions of every edge, sorted by (src, dst); the same degrees.
    """
    n = num_vertices
    a, b = _undirected(n, src, dst)
    deg = np.bincount(np.concatenate([a, b]), minlength=n).astype(np.float64)
    first, second, m = _moments(deg, a, b) if len(a) else (0.0, 0.0, 0)
    s = float(np.sum(deg[a] * deg[b]))
    s_target = (target * (second - first ** 2) + first ** 2) * m
    for _ in range(MAX_ROUNDS):
        gap = s_target - s
        if m < 2 or abs(gap) <= 1e-4 * max(abs(s), 1.0):
            break
        pool = np.arange(m) if movable is None else np.flatnonzero(movable[a] & movable[b])
        order = pool[rng.permutation(len(pool))]
        i, j = order[: len(pool) // 2], order[len(pool) // 2: 2 * (len(pool) // 2)]
        ends = np.stack([a[i], b[i], a[j], b[j]], axis=1)
        by_deg = np.take_along_axis(ends, np.argsort(deg[ends] + rng.random(ends.shape) * 1e-3, axis=1), axis=1)
        lo, mid1, mid2, hi = by_deg.T
        if gap < 0:  # disassortative: largest with smallest, the middle two together
            p, q, x, y = hi, lo, mid1, mid2
        else:  # assortative: the two largest together, the two smallest together
            p, q, x, y = hi, mid2, mid1, lo
        delta = deg[p] * deg[q] + deg[x] * deg[y] - deg[a[i]] * deg[b[i]] - deg[a[j]] * deg[b[j]]
        ok = np.sign(delta) == np.sign(gap)
        ok &= (ends[:, 0] != ends[:, 2]) & (ends[:, 0] != ends[:, 3]) & (ends[:, 1] != ends[:, 2]) & \
            (ends[:, 1] != ends[:, 3])
        if groups is not None:  # the new pairs as a swap of the old: (p, q) and (x, y) from (a_i, b_i), (a_j, b_j)
            old = np.sort(np.stack([_pair(groups[a[i]], groups[b[i]], groups),
                                    _pair(groups[a[j]], groups[b[j]], groups)]), axis=0)
            new = np.sort(np.stack([_pair(groups[p], groups[q], groups), _pair(groups[x], groups[y], groups)]),
                          axis=0)
            ok &= (old == new).all(0)
        new_pq = np.minimum(p, q) * n + np.maximum(p, q)
        new_xy = np.minimum(x, y) * n + np.maximum(x, y)
        present = np.sort(a * n + b)
        ok &= ~_member(new_pq, present) & ~_member(new_xy, present)
        idx = np.flatnonzero(ok)
        if len(idx) == 0:
            break
        # added edges must be distinct across the round (removed ones are: every edge is in one proposal)
        both = np.concatenate([new_pq[idx], new_xy[idx]])
        _, inv, cnt = np.unique(both, return_inverse=True, return_counts=True)
        single = (cnt[inv].reshape(2, -1) == 1).all(0)
        idx = idx[single]
        if len(idx) == 0:
            break
        idx = idx[rng.permutation(len(idx))]
        take = int(np.searchsorted(np.cumsum(np.abs(delta[idx])), abs(gap), side="left")) + 1
        idx = idx[:take]
        keep = np.ones(m, dtype=bool)
        keep[i[idx]] = False
        keep[j[idx]] = False
        key = np.concatenate([a[keep] * n + b[keep], new_pq[idx], new_xy[idx]])
        key = np.sort(key)
        a, b = key // n, key % n
        s += float(np.sum(delta[idx]))
    both = np.sort(np.concatenate([a * n + b, b * n + a]))
    return both // n, both % n


def _pair(x: np.ndarray, y: np.ndarray, label: np.ndarray) -> np.ndarray:
    m = int(label.max(initial=0)) + 1
    return np.minimum(x, y) * m + np.maximum(x, y)


def _member(keys: np.ndarray, sorted_keys: np.ndarray) -> np.ndarray:
    """(k,) bool: every key is in ``sorted_keys``."""
    pos = np.minimum(np.searchsorted(sorted_keys, keys), max(len(sorted_keys) - 1, 0))
    return sorted_keys[pos] == keys if len(sorted_keys) else np.zeros(len(keys), dtype=bool)
