"""A card's block model planted exactly: the microcanonical degree-corrected SBM with the card's block edge counts
(vectorised numpy).

A card's block model (``communities.block_sizes`` / ``block_edges``) gives, for every pair of communities c, c',
the edges m_cc' between them (inside c when c = c'). Its degree-corrected SBM (Karrer and Newman, Phys. Rev. E
83, 016107 (2011)) in the microcanonical form (Peixoto, "Nonparametric Bayesian inference of the microcanonical
stochastic block model", Phys. Rev. E 95, 012317 (2017), §II: the block edge counts are fixed, not Poisson means)
is realised here by (a *stub* is a half-edge, one of a vertex's ``degree`` edge ends still to be paired, as in
the configuration model: Molloy and Reed, Random Struct. Algorithms 6 (1995)):

1. **degrees to blocks** (:func:`assign_block_degrees`): the proxy's degree sequence is dealt to the blocks so
   that every block has its card size and, as nearly as the sequence allows, its card degree mass
   ``kappa_c = 2 m_cc + sum_c' m_cc'`` (the degree sum of the card's community; scaled to the sequence's sum):
   vertices in decreasing degree, each to the block with the largest remaining mass per remaining vertex slot
   (greedy largest-deficit, [inferred]: a planted community whose vertices carry more or fewer edge ends than
   the card's cannot hold its card edges, and the surplus of a random deal lands between communities);
2. **stub labels** (:mod:`simulator.workload.stub_labels`): the stubs of block c get a random permutation of the
   multiset of ``2 m_cc`` labels "inside c" and ``m_cc'`` labels "towards c'" (scaled to the block's stubs, largest
   remainders), so c sends as many stubs towards c' as c' sends towards c; if the card gives the share of its
   vertices holding an edge to another community (``communities.bridge_fraction``), the stubs leaving a block are
   a weighted sample of its stubs instead, concentrated on that share of its vertices
   (:func:`simulator.workload.stub_labels.concentrated_labels`);
3. **pairing**: stubs towards each other are paired block pair by block pair (the i-th of c towards c' with
   the i-th of c' towards c, both sides in random order); stubs inside a block are paired inside its nested fine
   communities first (a share ``(1 - fine_mu) / (1 - mu_c)`` of them, ``mu_c`` the block's card share of edge
   ends leaving it: the nested planted partition of
   :func:`simulator.workload.degseq.planted_configuration_edges`), the rest across fine communities inside the
   block. Repeated pairs are repaired by edge switching within the same block pair (Milo et al., arXiv
   cond-mat/0312028 (2003)), which keeps every block count, inside a block with :data:`SWITCH_DILUTION` times
   as many accepted edges as failed stubs (:func:`_switch_inside`); what still fails (a hub with nearly as many
   stubs inside its block as the block has vertices) is returned for the caller's cross pool.

Measured on the bundled graphs' cards (benchmarks/bench_proxy.py proxies; tests/simulator/test_proxy_degseq.py):
Cora's proxy has 658 edges between communities for the card's 649 and CiteSeer's 375 for 359 (the few failed stubs
of hubs; 673 and 363 with the cards' ``bridge_fraction``, 2026-11-29), the pair distributions overlapping 95%, where
the Binomial split of every vertex's stubs with the card's mixing and a random deal of degrees to communities put
985 and 533 there (a community's realised degree mass scattered 0.6-1.8x around the card's, and an over-full
community's surplus stubs, which cannot pair inside it, went across); the proxy's METIS edge cut came 30% and 145%
above the real graphs' (2 parts), 9% and 7% on the default draw of 2026-11-28 (benchmarks/bench_proxy.py). Its mean
over 16 draws was still 17% above on Cora (0.0426 against 0.0366, all 16 draws above) while the proxy's communities
met at 0.36 of its vertices, the real ones at 0.285; with the card's ``bridge_fraction`` planted the mean is 0.0366
(2026-11-29), and CiteSeer's METIS remote input fraction moved from 25% below to 2% below (means over the draws; one
draw still ranges 0.3-2.5x).

Not met (2026-11-30, draws 0 and 1): the fine communities' mixing. Of the edges of Cora's and CiteSeer's proxies
inside their largest component, 0.78-0.79 and 0.58-0.62 join two fine communities, for the cards' ``fine_mu`` of
0.477 and 0.358; 0.69-0.72 and 0.52-0.55 before the shaping (:mod:`simulator.workload.structure`, whose swaps keep
the communities' pair counts, not the fine ones'). Fine communities of equal size (Cora's 396 hold 6 vertices
each) cannot keep a hub's stubs inside, and what fails to pair inside a fine community pairs across. Nor does
anything inside a community follow the real graphs': METIS bisects a real Louvain community of 20 vertices or more
by cutting 0.082 (Cora) and 0.073 (CiteSeer) of its edges (edge-weighted over the communities), a proxy's by
0.13-0.15 (draws 0-2; a half-split with 5% of the inside edges across, planted, was 21-23% across after the pairing
and the shaping, and cut 0.12: not kept). Planting the block model of level 1 of the Louvain dendrogram instead
(122 and 146 communities, mixing 0.198 and 0.157, whose pair counts sum to the top level's) cut the proxies far
more than the real graphs (mean of draws 0-7 x 2 METIS seeds against 8 relabelings at 2, 4, 8 and 16 parts: Cora
+45%, +43%, +19%, +15%; CiteSeer +20%, +116%, +29%, -8%; 2026-11-30): not kept. Why, measured: the real graphs'
METIS parts are nearly unions of those level-1 communities (each community given its majority part: Cora's
2-part cut 0.0434 for METIS's 0.0373, CiteSeer's 4-part 0.0136 for 0.0132), but the same grouping of the proxy's
planted communities cuts 0.081-0.088 and 0.039-0.051 (draws 0-2), because small communities are not planted
exactly: Cora's proxy keeps 3,697-3,719 of the 4,068 edges inside them and puts 1,350-1,372 between them for
1,001 (its 29 top-level communities: 4,396-4,405 of 4,420 and 664-673 of 649); 3,813-3,829 inside before the
shaping, whose joining of the largest component moves an edge between community pairs for every piece that is a
whole community (:func:`simulator.workload.structure.connect_largest`). [inferred] The degree deal
(:func:`assign_block_degrees`) matches a community's degree mass, not what its size lets it hold inside: a
community of 3 vertices dealt degrees (8, 1, 1) cannot hold a triangle.

Nor are the planted communities one piece each, as Louvain's are (2026-12-01, CiteSeer): with the edges between
communities removed, the card's 36 Louvain communities of the real graph's largest component are 36 pieces, the 36
planted in draws 0-5 of its proxy 113-152 (104-146 vertices apart from their community's largest piece, attached
only by edges to other communities). Joining every piece to its community's largest by double-edge swaps that keep
the degrees and the community pair counts (as :func:`simulator.workload.structure.connect_largest` joins the largest
component) moved the METIS cuts past the real graph's instead of onto them (draws 0-9, median over 4 renumberings
each, METIS seed 0): 2 parts 0.0059 -> 0.0089 for 0.0067 (draw-to-draw coefficient of variation 0.26 -> 0.19), 8
parts 0.0314 -> 0.0431 for 0.0370. It did bring the proxies' Louvain mixing, measured as the card measures it, to
the card's (0.092-0.108 for 0.098, from 0.066-0.077), but whole, the planted communities are harder to cut inside
than the real ones (the bisection figures above), and planting their fine communities more apart did not reach
inside: with ``fine_mu`` 0.2 or 0.1 for the card's 0.358, the first Louvain level of the joined proxies still mixed
0.38-0.52 (0.43-0.50 as shipped), and METIS cut them as much. Not kept.

Nor is it the degree deal (2026-12-02, CiteSeer, draws 0-7, METIS seed 0): dealing every planted community the
real Louvain community's own degrees (an oracle no card holds) left hongtu's peer rows (mean 247 against 252 as
shipped, 286 measured) and the METIS cuts at 2, 4, 8 and 16 parts (0.0062, 0.0146, 0.0309, 0.0472 against 0.0064,
0.0171, 0.0317, 0.0484; the real graph's above) where they were. What does differ: 99 of the real largest
component's 359 edges between Louvain communities lie on a triangle, and 75 of its 1084 triangles span two or
more communities; on draws 0-2, each measured on its own Louvain communities, 44-47 of 241-284 and 25-36 of
975-1075. Closing triangles inside a planted community only with probability 0.1 per proposed swap (across
communities always; rounds run on until the card's clustering is met) took the peer rows to 277 and the 8-part
cut to 0.0358, but the 4-part cut to 0.0188, and did not raise those two triangle counts: no card statistic it
meets, not kept. Nor is it where the triangles sit by degree: the proxies close too many at degree 2 (local
clustering 0.34-0.37 against the real largest component's 0.26) and too few at degrees 6-9 (0.15 against 0.20);
closing triangles only at vertices whose degree bin is below the real graph's clustering spectrum (the 2.5K
model's degree-dependent clustering, Orsini et al. 2015; bins 2, 3, 4-5, 6-9, 10-19, 20+) met it within 0.03 but
moved the peer rows to 261 and the cuts to 0.0066, 0.0159, 0.0335, 0.0501 only: not kept.

How far a block model can take those peer rows (2026-12-02, CiteSeer; hongtu's 8-worker METIS statistic of
benchmarks/bench_proxy.py, medians): the real graph 286 (its 32 relabelings there). The real graph randomised by
double-edge swaps that keep its degrees, the card's Louvain block pair counts and each small component's edges inside
it, the block model's own null model: 273 (-4.5%), and with its clustering closed back to the card's
(:func:`simulator.workload.clustering.close_triangles`): 272.5 (-4.7%) (benchmarks/bench_proxy_null.py, 8 randomisations
each, where the product's estimate passes 85 of the 86 statistics and the nulls 78 and 81). A proxy as good as the real
graph's own null model would therefore sit about 5% low. The proxies (32 draws): the block model alone (no bridge share,
clustering, assortativity or fine communities) 264, and randomised as the real graph was, 280 for 270 before (24 draws
numbered without the permutation); as shipped 249. Taking one shaping away at a time: fine communities 257, clustering
264, bridge share 262, assortativity 251. Each moves the median by less than one draw's noise (the shipped proxy's
single draws 195-335). Over the 15 pooled draws the statistic's median is 242; the draw nearest it would be -15.4%, and
the medoid, draw 10, is 224. Two more tries, not kept. First, the bridge share dealt by the real graph's share of edge
ends out at each degree (the try recorded in :mod:`simulator.workload.stub_labels`, repeated): peer rows 306 over 8
draws, but the 2- and 4-part cuts +24% and +47%, and bench_proxy.py ``--skip-rmat`` 81 of 86. Second, because the real
graph's edges between heavily linked community pairs end on higher-degree vertices (median end degree 10 for pairs of 10
or more edges, 6 for single-edge pairs; Cora 7 and 5), a community's leaving labels were dealt heaviest pair first to
the edge ends of its highest-degree vertices among those leaving: peer rows 244-254 (16 draws), the 2-part cut
0.0048-0.0057 for 0.0070. What it was, found the same day: the proxies' largest component was closed to the whole
graph's average clustering, which the planted small components, holding fewer triangles than the real ones, left to it
to meet (0.184-0.191 against the real component's 0.170). Closed to its own clustering
(``clustering.largest_component``, :mod:`simulator.workload.structure`), the shipped proxy's peer rows have their median
over 16 draws at 286.5 and the estimate at 247 (-13.6%); the figures above are from before.
"""

from __future__ import annotations

import numpy as np

from gnnplan.simulator.workload.degseq import (
    REPAIR_ROUNDS,
    DegreeSequenceSpec,
    _pool_edges,
    _union,
    block_starts,
)
from gnnplan.simulator.workload.stub_labels import concentrated_labels, random_labels


def block_inside_share(block_edges: np.ndarray) -> np.ndarray:
    """(K,) share ``2 m_cc / kappa_c`` of every block's edge ends that stay inside it (0 for an empty block)."""
    m = np.asarray(block_edges, dtype=np.float64)
    mass = block_degree_mass(m)
    return np.where(mass > 0, 2.0 * np.diag(m) / np.maximum(mass, 1e-300), 0.0)


def block_degree_mass(block_edges: np.ndarray) -> np.ndarray:
    """(K,) float64 degree mass ``kappa_c = 2 m_cc + sum_{c' != c} m_cc'`` of every block of a (K, K) symmetric
    block edge-count matrix (diagonal: undirected edges inside)."""
    m = np.asarray(block_edges, dtype=np.float64)
    return np.diag(m) + m.sum(1)


def assign_block_degrees(degrees: np.ndarray, starts: np.ndarray, mass: np.ndarray, rng: np.random.Generator,
                         inside: np.ndarray | None = None) -> np.ndarray:
    """``degrees`` rearranged so that block c (ids ``[starts[c], starts[c + 1])``) holds degrees summing to
    nearly ``mass[c]`` scaled to ``degrees.sum()`` (module docstring, step 1); within a block in random order.
    A vertex only goes to a block with room for its degree whose size allows its expected stubs inside,
    ``degree x inside[c]``, to meet distinct partners in at most half the block's vertices (else a hub pairs
    with the same vertices again and again and its stubs end up between communities; on the real graphs the
    hubs' inside edges reach 35-43% of their community: Cora's 168-degree hub in a community of 356), while any
    block still has such room.

    Shapes:
        degrees: (n,) int64; starts: (K + 1,) int64 (starts[-1] = n); mass: (K,) float >= 0; inside: (K,) share
        of each block's edge ends inside it (None: 1).

    Returns:
        (n,) int64, a permutation of ``degrees``.
    """
    d = np.asarray(degrees, dtype=np.int64)
    slots = np.diff(np.asarray(starts, dtype=np.int64))
    k = len(slots)
    share = np.ones(k) if inside is None else np.asarray(inside, dtype=np.float64)
    half = (slots.astype(np.float64) - 1.0) / 2.0  # half a block's other vertices
    target = np.asarray(mass, dtype=np.float64) / max(float(np.sum(mass)), 1e-300) * float(d.sum())
    order = np.lexsort((rng.random(len(d)), -d))
    have = np.zeros(k)
    left = slots.copy()
    block_of = np.empty(len(d), dtype=np.int64)
    # one vertex at a time, but a run of equal degrees goes to one block for as long as the one-at-a-time rule
    # would keep choosing it (the bulk of a sparse graph is a few degree values over most vertices)
    sd = d[order]
    neg = -sd  # increasing, for searchsorted
    pos = 0
    while pos < len(sd):
        value = float(sd[pos])
        end = int(np.searchsorted(neg, neg[pos], side="right"))
        room = target - have
        # its stubs fit the block's remaining mass, and its expected stubs inside at most half the block's vertices
        fits = (left > 0) & (room >= value) & (value * share <= half)
        if not fits.any():
            fits = (left > 0) & (room >= min(value, room[left > 0].max()))
        need = np.where(fits, room / np.maximum(left, 1), -np.inf)
        c = int(np.argmax(need))
        second = float(np.partition(need, -2)[-2]) if k > 1 else -np.inf
        take = int(min(left[c], end - pos))
        if value > second and np.isfinite(second):  # c stays the neediest for 1 + (R - s L) / (v - s) more
            take = min(take, 1 + int((target[c] - have[c] - second * left[c]) // (value - second)))
        take = max(take, 1)
        block_of[order[pos: pos + take]] = c
        left[c] -= take
        have[c] += take * value
        pos += take
    out = np.empty_like(d)
    for c in range(k):
        mine = d[block_of == c]
        out[starts[c]: starts[c + 1]] = mine[rng.permutation(len(mine))]
    return out


def bipartite_pairs(stubs: np.ndarray, pair: np.ndarray, side: np.ndarray, rng: np.random.Generator
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pair edge ends (stubs) across two sides: within every ``pair`` group, the i-th end of side 0 (in random
    order) with the i-th of side 1, so no pair has both ends on one side (the configuration model's uniform
    matching restricted to a bipartite block; Molloy and Reed 1995, as :mod:`simulator.workload.degseq`).

    Args:
        stubs: (m,) int64 vertex of every edge end.
        pair: (m,) int64 group of every end (ends pair only inside their group).
        side: (m,) int64 0 or 1, the side of every end.
        rng: random generator (the order within each side).

    Returns:
        ((2, p) int64 the pairs' vertices, side 0 first; (p,) int64 each pair's group; (r,) int64 the ends left
        over where a group's sides are unequal).
    """
    order = np.lexsort((rng.random(len(stubs)), side, pair))
    st, pr, sd = stubs[order], pair[order], side[order]
    run = pr * 2 + sd
    first = np.concatenate([[True], run[1:] != run[:-1]]) if len(run) else np.zeros(0, dtype=bool)
    rank = np.arange(len(st)) - np.maximum.accumulate(np.where(first, np.arange(len(st)), 0))
    order2 = np.lexsort((sd, rank, pr))
    st, pr, sd, rank = st[order2], pr[order2], sd[order2], rank[order2]
    lead = np.concatenate([(pr[1:] == pr[:-1]) & (rank[1:] == rank[:-1]) & (sd[:-1] == 0), [False]]) \
        if len(st) else np.zeros(0, dtype=bool)
    idx = np.flatnonzero(lead)
    used = np.zeros(len(st), dtype=bool)
    used[idx] = used[idx + 1] = True
    return np.stack([st[idx], st[idx + 1]]), pr[idx], st[~used]


def _cross_edges(stubs: np.ndarray, to: np.ndarray, comm: np.ndarray, n: int, k: int, rng: np.random.Generator
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Stubs of block ``comm[stub]`` pointing to block ``to`` paired block pair by block pair, repeated pairs
    repaired by switching with random accepted edges of the same pair (module docstring). Returns the sorted
    distinct keys ``min * n + max`` and the stubs left over."""
    good = np.empty(0, dtype=np.int64)
    good_pair = np.empty(0, dtype=np.int64)
    pool, pool_to = stubs, to
    left = np.empty(0, dtype=np.int64)
    for _ in range(REPAIR_ROUNDS + 1):
        if len(pool) < 2:
            left = np.concatenate([left, pool])
            break
        c = comm[pool]
        pair = np.minimum(c, pool_to) * k + np.maximum(c, pool_to)
        pairs, pr, rest = bipartite_pairs(pool, pair, (c > pool_to).astype(np.int64), rng)
        left = np.concatenate([left, rest])
        a, b = np.minimum(pairs[0], pairs[1]), np.maximum(pairs[0], pairs[1])
        key = a * n + b
        ok = ~np.isin(key, good)
        _, first_at = np.unique(key, return_index=True)
        once = np.zeros(len(key), dtype=bool)
        once[first_at] = True
        ok &= once
        good = np.concatenate([good, key[ok]])
        good_pair = np.concatenate([good_pair, pr[ok]])
        bad = ~ok
        if not bad.any():
            pool = np.empty(0, dtype=np.int64)
            break
        # break as many accepted edges of each failing block pair as it has bad pairs, and pair again
        nbad = np.bincount(pr[bad], minlength=k * k)
        rank_key = rng.random(len(good))
        order = np.lexsort((rank_key, good_pair))
        gp = good_pair[order]
        first = np.concatenate([[True], gp[1:] != gp[:-1]]) if len(gp) else np.zeros(0, dtype=bool)
        rank = np.arange(len(gp)) - np.maximum.accumulate(np.where(first, np.arange(len(gp)), 0))
        drop = order[rank < nbad[gp]]
        broken = good[drop]
        keep = np.ones(len(good), dtype=bool)
        keep[drop] = False
        good, good_pair = good[keep], good_pair[keep]
        ends = np.concatenate([pairs[0][bad], pairs[1][bad], broken // n, broken % n])
        # every end points to the block at the other end of its pair (the pair's blocks are the ends' blocks)
        other = np.concatenate([comm[pairs[1][bad]], comm[pairs[0][bad]], comm[broken % n], comm[broken // n]])
        pool, pool_to = ends, other
    left = np.concatenate([left, pool])
    return np.sort(good), left


SWITCH_ROUNDS = 8
"""Rounds of :func:`_switch_inside`."""
SWITCH_DILUTION = 4
"""Accepted edges of its block broken per stub left over, per round of :func:`_switch_inside`."""


def _switch_inside(keys: np.ndarray, left: np.ndarray, comm: np.ndarray, n: int, rng: np.random.Generator
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Stubs left over inside their blocks (a hub's repeated pairs) switched with ``SWITCH_DILUTION`` x as many
    random accepted edges of the same block and paired again inside it, for up to ``SWITCH_ROUNDS`` rounds
    (edge switching, Milo et al. 2003: the hub's stubs are a small share of the re-paired pool, so they meet
    distinct partners). Returns the keys (sorted) and the stubs still left."""
    for _ in range(SWITCH_ROUNDS):
        if len(left) < 2:
            break
        block = comm[keys // n]
        want = np.bincount(comm[left], minlength=int(comm.max()) + 1) * SWITCH_DILUTION
        order = np.lexsort((rng.random(len(keys)), block))
        b = block[order]
        first = np.concatenate([[True], b[1:] != b[:-1]]) if len(b) else np.zeros(0, dtype=bool)
        rank = np.arange(len(b)) - np.maximum.accumulate(np.where(first, np.arange(len(b)), 0))
        drop = order[rank < want[b]]
        keep = np.ones(len(keys), dtype=bool)
        keep[drop] = False
        pool = np.concatenate([left, keys[drop] // n, keys[drop] % n])
        good, left = _pool_edges(pool, comm, None, n, keys[keep], rng)
        keys = _union([keys[keep], good])
    return keys, left


def plant_blocks(degrees: np.ndarray, starts: np.ndarray, block_edges: np.ndarray, rng: np.random.Generator,
                 fine_starts: np.ndarray | None = None, fine_mu: float = 0.0,
                 bridge_fraction: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The block model's edges on vertices with the given degrees (module docstring, steps 2 and 3).

    Args:
        degrees: (n,) int64, dealt to the blocks already (:func:`assign_block_degrees`).
        starts: (K + 1,) int64 first id of every block and n.
        block_edges: (K, K) symmetric edge counts (diagonal: inside).
        rng: random generator.
        fine_starts: (F + 1,) int64 nested fine communities (every ``starts`` value among them), or None.
        fine_mu: fraction of edge ends leaving their fine community.
        bridge_fraction: share of the vertices the stubs leaving their block sit on
            (:func:`~simulator.workload.stub_labels.concentrated_labels`), or None: each stub leaves with its
            block's share (:func:`~simulator.workload.stub_labels.random_labels`).

    Returns:
        (keys, left): sorted distinct keys ``min * n + max`` of the planted undirected edges, and the stubs
        (vertex ids, one per stub) that found no partner of their kind.
    """
    d = np.asarray(degrees, dtype=np.int64)
    n, k = len(d), len(starts) - 1
    ids = np.arange(n, dtype=np.int64)
    comm = (np.searchsorted(starts, ids, side="right") - 1).astype(np.int64)
    m = np.asarray(block_edges, dtype=np.float64)
    counts = m + np.diag(np.diag(m))  # row c: 2 m_cc inside, m_cc' towards c'
    stubs = np.repeat(ids, d)  # in block order (ids are contiguous per block)
    to = (random_labels(counts, np.bincount(comm, weights=d, minlength=k).astype(np.int64), rng)
          if bridge_fraction is None else concentrated_labels(counts, d, starts, bridge_fraction, rng))
    inside = to == comm[stubs]
    keys: list[np.ndarray] = []
    leftover: list[np.ndarray] = []
    inner = stubs[inside]
    if fine_starts is not None and len(fine_starts) > len(starts):
        mass = block_degree_mass(m)
        leave = np.where(mass > 0, (mass - 2.0 * np.diag(m)) / np.maximum(mass, 1e-300), 0.0)
        stay = np.clip((1.0 - np.maximum(fine_mu, leave)) / np.maximum(1.0 - leave, 1e-12), 0.0, 1.0)
        fine = (np.searchsorted(fine_starts, ids, side="right") - 1).astype(np.int64)
        mask = rng.random(len(inner)) < stay[comm[inner]]
        good, left = _pool_edges(inner[mask], fine, None, n, np.empty(0, dtype=np.int64), rng)
        keys.append(good)
        good, left = _pool_edges(np.concatenate([inner[~mask], left]), comm, fine, n, _union(keys), rng)
        keys.append(good)
        inner = left
    good, left = _pool_edges(inner, comm, None, n, _union(keys), rng)
    keys.append(good)
    inside_keys, left = _switch_inside(_union(keys), left, comm, n, rng)
    keys = [inside_keys]
    leftover.append(left)
    cross, left = _cross_edges(stubs[~inside], to[~inside], comm, n, k, rng)
    keys.append(cross)
    leftover.append(left)
    return _union(keys), np.concatenate(leftover)


def proxy_block_of(spec: DegreeSequenceSpec) -> np.ndarray:
    """(n,) int64 community of the block model of every vertex of a proxy graph with a block model, in the
    graph's vertex ids (after ``permute_ids``); -1 for the vertices of the small components planted beside the
    largest (:func:`simulator.workload.degseq.degree_sequence_edges` lays the largest out first, communities in
    :func:`~simulator.workload.degseq.block_starts` ranges).

    Raises:
        ValueError: the spec has no block model.
    """
    from gnnplan.simulator.workload.datasets import _id_permutation

    if not spec.block_sizes:
        raise ValueError(f"proxy_block_of: {spec.name} has no block model")
    n_small = sum(size * count for size, count in spec.small_components or ())
    n_big = spec.num_vertices - n_small
    starts = block_starts(spec.block_sizes, n_big)
    block = np.full(spec.num_vertices, -1, dtype=np.int64)
    block[:n_big] = np.searchsorted(starts, np.arange(n_big), side="right") - 1
    if spec.permute_ids:  # vertex v becomes perm[v]
        out = np.empty_like(block)
        out[_id_permutation(spec)] = block
        return out
    return block
