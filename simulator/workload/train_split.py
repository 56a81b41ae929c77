"""A degree-sequence proxy's training vertices redrawn so that their in-degrees follow the card's training-degree
histogram (``split.train_in_degree_histogram``: a split chosen by label or popularity is not a uniform sample, e.g.
Planetoid's 20 per class) and, if the card gives them, its training vertices per community of its block model
(``communities.block_train``) and their share near the communities' boundaries
(``communities.train_near_bridge_fraction``), with the proxy's validation and test sizes kept."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from gnnplan.simulator.workload.bridges import near_bridge_vertices, near_share
from gnnplan.simulator.workload.degree_bins import bin_edges
from gnnplan.simulator.workload.degseq import DegreeSequenceSpec


def degree_matched_train(spec: DegreeSequenceSpec, degrees: np.ndarray, train: np.ndarray, rest: np.ndarray,
                         graph_edges: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Training vertices whose in-degrees follow ``spec.train_degree_histogram``: as many as ``train`` holds,
    drawn without replacement with weight ``p_train(bin) / p_proxy(bin)`` of their degree's bin
    (:func:`~.degree_bins.bin_edges`; importance weights, so the drawn set's bin shares are the card's), and the other
    vertices of ``train`` and ``rest`` (validation then test, in a seeded random order) to refill the rest. With
    ``spec.block_train`` (the card's training vertices per community of its block model, then outside the
    largest component) the draw is stratified: each community, and the small components together, get their
    card share of the training vertices (largest remainders), drawn inside with the same degree weights; with
    ``spec.train_near_bridge_fraction`` and ``graph_edges`` as well, the weights of the communities' vertices near a
    boundary (:func:`simulator.workload.bridges.near_bridge_vertices` of the block model) are tilted by one factor
    (:func:`near_tilt`) so that the share of the communities' draws among them comes within :data:`NEAR_TOLERANCE`
    of the card's (at most :data:`NEAR_ROUNDS` draws, the closest kept).

    Shapes:
        degrees: (n,) int64; train: (a,) int64 ids; rest: (r,) int64 ids of the validation and test vertices;
        graph_edges: the proxy graph's (E,) int64 src and dst, or None (no near-boundary share drawn for).

    Returns:
        (new train ids sorted, the r vertices that take the validation and test places in order).
    """
    rng = np.random.default_rng((spec.seed, 4))
    n = len(degrees)
    if spec.train_degree_histogram is None and spec.block_train is None:
        return train, rest
    weight = np.ones(n)
    if spec.train_degree_histogram is not None:
        h = np.asarray(spec.train_degree_histogram, dtype=np.float64)
        edges = bin_edges(max(float(degrees.max()), float(h[:, 0].max())))
        want = np.bincount(np.searchsorted(edges, h[:, 0], side="right") - 1, weights=h[:, 1], minlength=len(edges))
        which = np.searchsorted(edges, degrees, side="right") - 1
        have = np.bincount(which, minlength=len(edges)) / n
        weight = np.where(have[which] > 0, want[which] / np.maximum(have[which], 1e-300), 0.0)
    a = len(train)
    if spec.block_train is None:
        new_train = _draw(rng, np.arange(n), weight, a)
    else:
        from gnnplan.simulator.workload.blockmodel import proxy_block_of

        stratum = proxy_block_of(spec)  # -1: outside the largest component, the card's last count
        counts = np.asarray(spec.block_train, dtype=np.float64)
        exact = counts / max(counts.sum(), 1.0) * a
        quota = np.floor(exact).astype(np.int64)
        quota[np.argsort(-(exact - quota), kind="stable")[: a - int(quota.sum())]] += 1
        members_of = [np.flatnonzero(stratum == (c if c < len(quota) - 1 else -1)) for c in range(len(quota))]
        target = spec.train_near_bridge_fraction if graph_edges is not None else None
        mask = np.zeros(n, dtype=bool) if graph_edges is None or target is None else \
            near_bridge_vertices(*graph_edges, stratum)
        aim, best, best_miss = target, None, np.inf
        for _ in range(NEAR_ROUNDS if target is not None else 1):
            rng = np.random.default_rng((spec.seed, 4))  # every round draws afresh from the same stream
            tilted = weight if aim is None else weight * np.where(
                mask, near_tilt(weight, mask, members_of[:-1], quota[:-1], aim), 1.0)
            picks = np.sort(np.concatenate([_draw(rng, m, tilted[m], min(int(q), len(m)))
                                            for m, q in zip(members_of, quota)]))
            miss = 0.0 if target is None else near_share(mask, stratum, picks, target) - target
            if abs(miss) < best_miss:
                best, best_miss = (picks, rng), abs(miss)
            if abs(miss) <= NEAR_TOLERANCE or aim is None:
                break
            aim = min(1.0, max(0.0, aim - miss))  # the draw without replacement falls short: aim past the target
        assert best is not None
        new_train, rng = best
    pool = np.setdiff1d(np.concatenate([train, rest]), new_train)
    return new_train, rng.permutation(pool)[:len(rest)]


TILT_RANGE = 20.0
"""Largest |log| of :func:`near_tilt`'s factor: a share beyond what e^20 reaches is as near as it gets."""
NEAR_ROUNDS = 4
"""Draws at most of :func:`degree_matched_train` with a near-boundary share: :func:`near_tilt` aims at the expected
share of draws with replacement, which a community with few vertices near a boundary falls short of, so each round
aims past the target by the last round's miss (a fixed-point step) and the closest round is kept. CiteSeer's proxy
(target 0.675): 0.639-0.659 in one round on draws 0-2, 0.666-0.686 with the rounds on draws 0-3."""
NEAR_TOLERANCE = 0.01
"""Miss of the near-boundary share at which :func:`degree_matched_train` stops drawing again."""


def near_tilt(weight: np.ndarray, near: np.ndarray, members_of: list[np.ndarray], quota: np.ndarray,
              target: float) -> float:
    """The factor ``beta`` on the draw weights of the vertices near a boundary that makes the expected share of
    them among the stratified draw ``target``: community c's ``quota[c]`` draws land near with probability
    ``beta W_near(c) / (beta W_near(c) + W_far(c))`` (the weights summed over its members near a boundary and
    the others; a draw with replacement, so a community with few vertices near a boundary falls short of it
    without replacement), the quota-weighted mean of which rises with ``beta``; it is found by bisection on
    ``log beta`` in [-:data:`TILT_RANGE`, :data:`TILT_RANGE`] (gnnplan's own rule: one factor, as
    ``block_train`` already fixes each community's count).

    Shapes:
        weight: (n,) float64 draw weights; near: (n,) bool; members_of: the C communities' (m_c,) int64 vertex ids;
        quota: (C,) int64 draws per community; target: in [0, 1] -> beta > 0 (1 when no community has vertices
        both near a boundary and not).
    """
    w_near = np.array([weight[m[near[m]]].sum() for m in members_of], dtype=np.float64)
    w_far = np.array([weight[m[~near[m]]].sum() for m in members_of], dtype=np.float64)
    q = np.asarray(quota, dtype=np.float64)
    both = (w_near > 0) & (w_far > 0) & (q > 0)
    if not both.any():
        return 1.0
    fixed = float((q * (w_near > 0) * (w_far == 0)).sum())  # communities all near a boundary: near whatever beta

    def share(log_beta: float) -> float:
        b = np.exp(log_beta)
        p = b * w_near[both] / (b * w_near[both] + w_far[both])
        return (float((q[both] * p).sum()) + fixed) / float(q.sum())

    lo, hi = -TILT_RANGE, TILT_RANGE
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if share(mid) < target else (lo, mid)
    return float(np.exp(0.5 * (lo + hi)))


def _draw(rng: np.random.Generator, ids: np.ndarray, weight: np.ndarray, count: int) -> np.ndarray:
    """``count`` of ``ids`` without replacement with probability in proportion to ``weight`` (uniformly among
    the rest once too few have a positive weight), sorted."""
    if count <= 0 or len(ids) == 0:
        return np.empty(0, dtype=np.int64)
    w = np.asarray(weight, dtype=np.float64)
    if np.count_nonzero(w) < count:  # too few vertices in the card's bins: the rest uniformly
        w = w + 1e-9
    return np.sort(rng.choice(ids, count, replace=False, p=w / w.sum())).astype(np.int64)


def with_degree_matched_train(spec: DegreeSequenceSpec, g: Any) -> Any:
    """``g`` (a :class:`simulator.workload.datasets.GraphData`) with its training vertices redrawn by
    :func:`degree_matched_train` when the spec has a training-degree histogram or training vertices per community
    (validation and test keep their sizes; the vertices near a boundary are those of ``g``'s edges), else ``g``
    itself."""
    if spec.train_degree_histogram is None and spec.block_train is None:
        return g
    rest = np.concatenate([g.val_idx, g.test_idx])
    train, rest = degree_matched_train(spec, g.in_degrees(), g.train_idx, rest, (g.src, g.dst))
    nv = len(g.val_idx)
    return dataclasses.replace(g, train_idx=train, val_idx=np.sort(rest[:nv]), test_idx=np.sort(rest[nv:]))
