"""A card's small connected components, planted beside the largest as separate pieces of a proxy
(:func:`simulator.workload.degseq.degree_sequence_edges`): random labelled trees with the card's extra edges
(:func:`small_component_edges`), whose vertices take from the proxy's degree sequence the degrees nearest to
those their trees give them (:func:`remove_nearest`).
"""

from __future__ import annotations

import numpy as np


def small_component_edges(sizes: tuple[tuple[int, int], ...] | list[list[int]], num_edges: int,
                          rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Separate connected components of the given sizes (rows ``[size, count]``) with ``num_edges`` undirected
    edges in all: each a uniform random labelled tree (decoded from a uniform Prüfer sequence: Prüfer, Arch.
    Math. Phys. 27, 742 (1918)), and the edges beyond the trees' ``sum (s - 1)`` added between random
    non-adjacent pairs of the components of 3 or more vertices (a component drawn in proportion to its free
    pairs). Vertices are numbered component by component from 0.

    Returns:
        (a, b, degrees): (e,) int64 ends of every undirected edge (a < b) and (S,) int64 degree of every vertex,
        S = sum of size x count.

    Raises:
        ValueError: ``num_edges`` outside [sum (s - 1), sum s (s - 1) / 2].
    """
    import heapq

    comp = [int(size) for size, count in sizes for _ in range(int(count))]
    least, most = sum(s - 1 for s in comp), sum(s * (s - 1) // 2 for s in comp)
    if not least <= num_edges <= most:
        raise ValueError(f"small_component_edges: need {least} <= num_edges <= {most}, got {num_edges}")
    edges: list[tuple[int, int]] = []
    first = 0
    starts = []
    for s in comp:
        starts.append(first)
        if s == 2:
            edges.append((first, first + 1))
        elif s > 2:
            code = rng.integers(0, s, s - 2)
            degree = np.bincount(code, minlength=s) + 1
            leaves = [int(v) for v in np.flatnonzero(degree == 1)]
            heapq.heapify(leaves)
            for v in code.tolist():
                leaf = heapq.heappop(leaves)
                edges.append((first + min(leaf, v), first + max(leaf, v)))
                degree[v] -= 1
                if degree[v] == 1:
                    heapq.heappush(leaves, v)
            u, w = heapq.heappop(leaves), heapq.heappop(leaves)
            edges.append((first + min(u, w), first + max(u, w)))
        first += s
    have = set(edges)
    free = np.array([s * (s - 1) // 2 - (s - 1) for s in comp], dtype=np.float64)
    for _ in range(num_edges - least):
        c = int(rng.choice(len(comp), p=free / free.sum()))
        while True:
            u, w = sorted(int(x) for x in rng.choice(comp[c], 2, replace=False))
            if (starts[c] + u, starts[c] + w) not in have:
                break
        have.add((starts[c] + u, starts[c] + w))
        edges.append((starts[c] + u, starts[c] + w))
        free[c] -= 1
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    deg = np.bincount(e.ravel(), minlength=first).astype(np.int64)
    return e[:, 0], e[:, 1], deg


def remove_nearest(deg: np.ndarray, take: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``deg`` ((n,) int64 degree sequence) without one entry per value of ``take`` ((S,) int64, S <= n), each the
    nearest still there (ties at random), in a random order: the degrees the small components' vertices take
    from a proxy's sequence."""
    pool = np.sort(deg[rng.permutation(len(deg))], kind="stable")
    keep = np.ones(len(pool), dtype=bool)
    for value, count in zip(*np.unique(take, return_counts=True)):
        idx = np.flatnonzero(keep)
        order = idx[np.argsort(np.abs(pool[idx] - value), kind="stable")]
        keep[order[:count]] = False
    return pool[keep][rng.permutation(int(keep.sum()))]
