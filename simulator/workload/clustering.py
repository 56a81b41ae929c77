"""Clustering of a proxy graph: the average clustering coefficient of a graph, and degree-preserving triangle
closure that rewires a configuration-model proxy up to a card's published (or derived) coefficient.

Average clustering (Watts and Strogatz, Nature 393, 440 (1998)): ``C = (1/n) sum_i T_i / (d_i (d_i - 1) / 2)``
over every vertex of the undirected simple graph, ``T_i`` the triangles through i, vertices of degree < 2
counting 0 (networkx ``average_clustering`` with ``count_zeros=True``; SNAP's "Average clustering
coefficient"). A configuration model with communities has far fewer triangles than a citation or social graph
of the same degrees (Cora: 0.098 against 0.241), and triangles are what makes a sampled neighbourhood fold back
on itself: the neighbours of a seed's neighbours include its other neighbours.

Triangle closure (:func:`close_triangles`): the degree-preserving rewiring of Bansal, Khandelwal and Meyers,
"Exploring biological network structure with clustered random networks", BMC Bioinformatics 10, 405 (2009),
§Methods: pick a vertex v and two neighbours u, w that are not linked, a neighbour x of u and a neighbour y of w
(none of them v, u, w and x != y, x-y not linked), and replace the edges u-x and w-y with u-w and x-y; the
triangle u-v-w is closed and every degree kept. A swap is accepted when it adds more triangles than it removes
(common neighbours of the new pairs minus those of the removed ones, on the graph before the round) and only
when it keeps the multiset of degree-class pairs of its two edges (degree classes: the log bins of
:func:`simulator.workload.degree_bins.bin_edges`), so the joint degree distribution is kept (2K-preserving rewiring:
Mahadevan et al., SIGCOMM 2006; clustering targeted on top of it as in the 2.5K series of Orsini et al., Nat.
Commun. 6, 8627 (2015)): without it the closed pairs of neighbours are degree-biased and the rewiring links hubs
to hubs (Cora's card: twice the real graph's hub-to-hub edges); with ``groups`` (a proxy's planted communities)
it likewise keeps the community pair counts (the block model's edge counts stay exact). Swaps are proposed in
rounds of many at once; those that share an edge with another of the round are dropped, so the graph stays
simple. Rounds stop once the average
clustering reaches the target (the last round takes only as many swaps as the remaining gap needs, estimated
from the round's mean gain), when a round accepts none, or after :data:`MAX_ROUNDS`.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from gnnplan.simulator.workload.degree_bins import bin_edges

MAX_ROUNDS = 400
"""Rounds of :func:`close_triangles` at most."""
PROPOSALS_PER_VERTEX = 0.5
"""Swaps proposed per round, per vertex of the graph."""
TRIANGLE_WORK_PER_BLOCK = 2e7
"""Entries of ``A @ A`` :func:`triangles` forms at a time (~240 MB of CSR)."""


def _adjacency(num_vertices: int, src: np.ndarray, dst: np.ndarray) -> sp.csr_matrix:
    """(n, n) symmetric 0/1 CSR adjacency of the undirected simple graph (self-loops and repeats dropped)."""
    keep = src != dst
    a = sp.coo_matrix((np.ones(int(keep.sum()), dtype=np.float64), (src[keep], dst[keep])),
                      shape=(num_vertices, num_vertices)).tocsr()
    a = ((a + a.T) > 0).astype(np.float64).tocsr()
    a.sort_indices()
    return a


def triangles(adj: sp.csr_matrix, work_per_block: float = TRIANGLE_WORK_PER_BLOCK) -> np.ndarray:
    """(n,) float64 triangles through every vertex of a symmetric 0/1 adjacency A: the row sums of
    ``(A @ A) * A / 2``, formed a block of rows at a time.

    Row v of ``A @ A`` has at most ``sum_{u in N(v)} d_u`` entries, so the whole product of a power-law graph is
    ``sum_u d_u^2`` entries: 3.3 x 10^9 on an R-MAT graph of 5 x 10^5 vertices (edge factor 8), 25 GB, where the
    triangles are far fewer. Blocks of consecutive rows whose bound sums to at most ``work_per_block`` (a row above
    it alone) keep the memory to that many entries, with the same integer counts.
    """
    n = adj.shape[0]
    deg = np.diff(adj.indptr).astype(np.float64)
    reach = np.cumsum(np.asarray(adj @ deg).ravel())  # bound on the entries of rows 0..v of A @ A
    out = np.zeros(n, dtype=np.float64)
    start = 0
    while start < n:
        base = reach[start - 1] if start else 0.0
        stop = max(start + 1, int(np.searchsorted(reach, base + work_per_block, side="right")))
        block = adj[start:stop]
        out[start:stop] = np.asarray((block @ adj).multiply(block).sum(1)).ravel() / 2.0
        start = stop
    return out


def local_clustering(adj: sp.csr_matrix) -> np.ndarray:
    """(n,) float64 local clustering coefficient ``T_i / (d_i (d_i - 1) / 2)`` of every vertex of a symmetric
    0/1 adjacency (0 below degree 2; module docstring; ``T_i`` from :func:`triangles`)."""
    deg = np.diff(adj.indptr).astype(np.float64)
    tri = triangles(adj)
    pairs = deg * (deg - 1.0) / 2.0
    return np.where(pairs > 0, tri / np.maximum(pairs, 1.0), 0.0)


def average_clustering(num_vertices: int, src: np.ndarray, dst: np.ndarray) -> float:
    """The average clustering coefficient of a graph taken as undirected and simple (module docstring; equals
    networkx ``average_clustering(G)`` of the same graph).

    Shapes:
        src, dst: (E,) int64 edges (either or both directions listed).
    """
    return float(local_clustering(_adjacency(num_vertices, src, dst)).mean()) if num_vertices else 0.0


def _common(adj: sp.csr_matrix, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(k,) common neighbours of the vertex pairs (a[i], b[i])."""
    if len(a) == 0:
        return np.zeros(0)
    return np.asarray(adj[a].multiply(adj[b]).sum(1)).ravel()


def _pick_neighbour(adj: sp.csr_matrix, v: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(k,) a uniformly random neighbour of every v (v must have degree >= 1)."""
    deg = np.diff(adj.indptr)[v]
    return adj.indices[adj.indptr[v] + np.floor(rng.random(len(v)) * deg).astype(np.int64)]


def _once(keys: np.ndarray, per_swap: int) -> np.ndarray:
    """(k,) bool: every one of a swap's ``per_swap`` keys (columns of ``keys`` (k, per_swap)) occurs once in the
    whole (k, per_swap) array."""
    flat = keys.ravel()
    _, inverse, counts = np.unique(flat, return_inverse=True, return_counts=True)
    return (counts[inverse].reshape(-1, per_swap) == 1).all(1)


def _same_pairs(label: np.ndarray, u: np.ndarray, w: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(k,) bool: the swap u-x, w-y -> u-w, x-y keeps the multiset of unordered ``label`` pairs of its two
    edges."""
    lu, lw, lx, ly = label[u], label[w], label[x], label[y]
    m = int(label.max(initial=0)) + 1

    def pair(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.minimum(a, b) * m + np.maximum(a, b)

    old = np.sort(np.stack([pair(lu, lx), pair(lw, ly)]), axis=0)
    new = np.sort(np.stack([pair(lu, lw), pair(lx, ly)]), axis=0)
    return (old == new).all(0)


def close_triangles(num_vertices: int, src: np.ndarray, dst: np.ndarray, target: float, rng: np.random.Generator,
                    groups: np.ndarray | None = None, movable: np.ndarray | None = None,
                    measured_on: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The graph rewired by degree-preserving triangle closure until its average clustering reaches ``target``
    (module docstring).

    Args:
        num_vertices: n.
        src, dst: (E,) int64 both directions of every undirected edge (a simple graph).
        target: average clustering coefficient to reach, in [0, 1).
        rng: random generator.
        groups: (n,) int64 community of every vertex whose pair counts every swap keeps, or None.
        movable: (n,) bool vertices whose edges may be rewired (None: all): a swap's wedge is centred on one, and
            its other vertices are then in the same connected component (a proxy's largest component, whose
            small components stay as planted).
        measured_on: (n,) bool vertices the average clustering ``target`` is taken over (None: all): a proxy's
            largest component when its card gives that component's own average
            (``clustering.largest_component``).

    Returns:
        (src, dst) int64 both directions of every edge, sorted by (src, dst); the same degrees.
    """
    n = num_vertices
    adj = _adjacency(n, src, dst)
    deg = np.diff(adj.indptr)
    over = np.ones(n, dtype=bool) if measured_on is None else np.asarray(measured_on, dtype=bool)
    counted = max(int(over.sum()), 1)

    def average(a: sp.csr_matrix) -> float:  # the average clustering over the measured vertices
        return float(local_clustering(a)[over].sum()) / counted

    current = average(adj)
    degree_class = np.searchsorted(bin_edges(int(deg.max(initial=1))), deg, side="right") - 1
    candidates = np.flatnonzero((deg >= 2) & (True if movable is None else movable))
    proposals = max(16, int(PROPOSALS_PER_VERTEX * n))
    for _ in range(MAX_ROUNDS):
        if current >= target or len(candidates) == 0:
            break
        v = candidates[rng.integers(0, len(candidates), proposals)]
        u = _pick_neighbour(adj, v, rng)
        w = _pick_neighbour(adj, v, rng)
        ok = (u != w) & (deg[u] >= 2) & (deg[w] >= 2)
        v, u, w = v[ok], u[ok], w[ok]
        x, y = _pick_neighbour(adj, u, rng), _pick_neighbour(adj, w, rng)
        ok = (x != v) & (x != w) & (y != v) & (y != u) & (x != y)
        if not ok.any():  # scipy's adj[u, w] on empty index arrays is no array (a sparse graph of few wedges)
            continue
        ok &= np.asarray(adj[u, w]).ravel() == 0
        ok &= np.asarray(adj[x, y]).ravel() == 0
        ok &= _same_pairs(degree_class, u, w, x, y)  # the joint degree distribution is kept (2K-preserving)
        if groups is not None:  # and the community pair counts
            ok &= _same_pairs(groups, u, w, x, y)
        u, v, w, x, y = u[ok], v[ok], w[ok], x[ok], y[ok]
        gain = _common(adj, u, w) + _common(adj, x, y) - _common(adj, u, x) - _common(adj, w, y)
        good = gain > 0
        u, w, x, y, gain = u[good], w[good], x[good], y[good], gain[good]

        def key(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            return np.minimum(a, b) * n + np.maximum(a, b)

        keys = np.stack([key(u, x), key(w, y), key(u, w), key(x, y)], axis=1)
        alone = _once(keys, 4)
        u, w, x, y, gain = u[alone], w[alone], x[alone], y[alone], gain[alone]
        if len(u) == 0:
            break
        # each swap adds ~gain triangles to u, w and their common neighbours: take only as many as the gap needs
        pairs = np.maximum(deg * (deg - 1) / 2.0, 1.0)
        per_swap = float(np.mean(gain * (1.0 / pairs[u] + 1.0 / pairs[w] + 1.0 / pairs[x] + 1.0 / pairs[y])) / 2.0)
        need = (target - current) * counted / max(per_swap, 1e-12)
        take = int(min(len(u), max(1, np.ceil(need))))
        u, w, x, y = u[:take], w[:take], x[:take], y[:take]
        drop = sp.coo_matrix((np.ones(4 * take), (np.concatenate([u, x, w, y]), np.concatenate([x, u, y, w]))),
                             shape=(n, n)).tocsr()
        add = sp.coo_matrix((np.ones(4 * take), (np.concatenate([u, w, x, y]), np.concatenate([w, u, y, x]))),
                            shape=(n, n)).tocsr()
        adj = (adj - drop + add).tocsr()
        adj.eliminate_zeros()
        adj.sort_indices()
        current = average(adj)
    coo = sp.triu(adj, 1).tocoo()
    a, b = coo.row.astype(np.int64), coo.col.astype(np.int64)
    both = np.sort(np.concatenate([a * n + b, b * n + a]))
    return both // n, both % n
