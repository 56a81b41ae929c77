"""Where a graph's communities meet: the vertices with an edge to another community (bridges), the vertices at most
one hop from one, and their shares. A card's ``communities.bridge_fraction`` is the bridges' share of the largest
component's vertices and ``communities.train_near_bridge_fraction`` the share of its training vertices near a bridge
(measured by :mod:`simulator.workload.card_structure` and :mod:`simulator.workload.card_measures`); a proxy is wired
to meet the first (:mod:`simulator.workload.degseq`) and draws its training vertices to meet the second
(:mod:`simulator.workload.train_split`).

A community label of -1 marks a vertex in none (a small component beside the largest): it is never a bridge, never
near one, and its edges make no bridge.
"""

from __future__ import annotations

import numpy as np


def bridge_vertices(src: np.ndarray, dst: np.ndarray, community: np.ndarray) -> np.ndarray:
    """(n,) bool: the vertices in a community with an edge to a vertex of another community.

    Shapes:
        src, dst: (E,) int64 edges (either direction; both ends are marked); community: (n,) int64 community of
        every vertex, -1 for a vertex in none.
    """
    a, b = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    across = (community[a] >= 0) & (community[b] >= 0) & (community[a] != community[b])
    held = np.zeros(len(community), dtype=bool)
    held[a[across]] = held[b[across]] = True
    return held


def bridge_share(src: np.ndarray, dst: np.ndarray, community: np.ndarray) -> float:
    """Share of the vertices in a community that are bridges (:func:`bridge_vertices`): a card's
    ``communities.bridge_fraction`` (:func:`simulator.workload.card_measures.louvain_bridge_fraction` on a graph's
    Louvain communities, ``degseq._meeting_bridge_fraction`` on a proxy's planted ones).

    Shapes:
        src, dst: (E,) int64 edges; community: (n,) int64, -1 for a vertex in none (counted neither way) -> a
        fraction in [0, 1] (0 when no vertex is in a community).
    """
    return near_share(bridge_vertices(src, dst, community), community, np.flatnonzero(community >= 0), 0.0)


def near_bridge_vertices(src: np.ndarray, dst: np.ndarray, community: np.ndarray) -> np.ndarray:
    """(n,) bool: the vertices in a community at most one hop from a bridge (:func:`bridge_vertices`: a bridge
    itself or a neighbour of one): the vertices at most two hops from another community, which a two-layer
    sampled neighbourhood of theirs can reach.

    Shapes:
        src, dst: (E,) int64 edges (either direction); community: (n,) int64, -1 for a vertex in none.
    """
    a, b = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    bridge = bridge_vertices(a, b, community)
    near = bridge.copy()
    near[b[bridge[a]]] = near[a[bridge[b]]] = True
    return near & (community >= 0)


def near_share(marked: np.ndarray, community: np.ndarray, vertices: np.ndarray, empty: float) -> float:
    """Share of ``vertices`` inside a community (``community >= 0``) that are ``marked``: with
    :func:`near_bridge_vertices` and the training vertices, a card's ``communities.train_near_bridge_fraction``.

    Shapes:
        marked: (n,) bool; community: (n,) int64; vertices: (k,) int64 ids -> a fraction in [0, 1], ``empty``
        when none of ``vertices`` is inside a community.
    """
    ids = np.asarray(vertices, dtype=np.int64)
    inside = ids[community[ids] >= 0]
    return float(marked[inside].mean()) if len(inside) else empty
