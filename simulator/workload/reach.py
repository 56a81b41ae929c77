"""Per-batch reach: the expected block sizes of a mini-batch sampled in the configuration model of a degree
sequence (occupancy of size-biased edge-end draws), the basis of the proxy's per-batch scaling rule
(:func:`simulator.workload.proxy_batch.batch_reach_scale`). Degree classes come from a card's log-binned histogram
(:func:`simulator.workload.degree_bins.degree_histogram`; each bin at its mean degree).
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class BatchReach:
    """Expected sizes of one worker's mini-batch blocks in an uncorrelated random graph (:func:`batch_reach`).

    Attributes:
        num_src, num_dst, num_edges: (L,) expected source vertices, destination vertices and sampled edges of
            every block, input side first (DGL's block order; ``num_dst[-1]`` is the batch size).
        degrees, counts: (C,) the degree classes and their vertex counts (whole graph).
        own_inputs, other_inputs: (C,) expected input vertices (layer-0 sources) of each class owned by the
            worker's part and by the other parts (``num_src[0]`` is their total).
    """

    num_src: np.ndarray
    num_dst: np.ndarray
    num_edges: np.ndarray
    degrees: np.ndarray
    counts: np.ndarray
    own_inputs: np.ndarray
    other_inputs: np.ndarray

    def band_inputs(self, fractions: np.ndarray, part: str = "all") -> np.ndarray:
        """(len(fractions) - 1,) expected input vertices among the vertices ranked ``[fractions[i] n,
        fractions[i + 1] n)`` by decreasing degree (the bands between two cache fractions of PaGraph's
        degree-ordered cache, :func:`simulator.workload.partition.cached_vertices`; a class straddling a
        boundary is split in proportion to its vertices), of the worker's part (``"own"``), the others
        (``"other"``) or both (``"all"``)."""
        inputs = {"own": self.own_inputs, "other": self.other_inputs,
                  "all": self.own_inputs + self.other_inputs}[part]
        order = np.argsort(-self.degrees, kind="stable")
        cum = np.concatenate([[0.0], np.cumsum(self.counts[order])]) / self.counts.sum()
        mass = np.concatenate([[0.0], np.cumsum(inputs[order])])  # input mass is piecewise linear in the rank
        return np.diff(np.interp(np.asarray(fractions, dtype=np.float64), cum, mass))


def batch_reach(degrees: np.ndarray, counts: np.ndarray, seed_share: np.ndarray, batch_size: float,
                fanouts: tuple[int, ...] | list[int], num_parts: int = 1, cut: float = 0.0) -> BatchReach:
    """Expected block sizes of one worker's mini-batch of ``batch_size`` seeds sampled with DGL's
    ``NeighborSampler`` (``fanouts`` input side first, -1 = every neighbour) in the configuration model of a
    degree sequence given by classes (graph symmetric: a vertex's in- and out-degree are its degree), whose
    vertices are split into ``num_parts`` equal parts with ``cut`` of the edges between parts; the seeds are
    the worker's part's training vertices (DistDGL ``node_split``).

    Layer by layer from the seeds: every frontier vertex of degree d samples ``min(d, f)`` of its edges
    (``k`` draws in all); an edge end lies at vertex u with probability ``p_u = d_u / D_part`` within the part
    it lands in (D_part = the part's degree sum; size-biased: Newman, Strogatz and Watts, Phys. Rev. E 64,
    026118 (2001), §II.A), independently for different edges, so u escapes all draws with probability
    ``(1 - p_u)^k`` and the expected number of distinct vertices reached is ``sum_u 1 - (1 - p_u)^k``: the
    occupancy (coupon-collector) count with unequal probabilities (Flajolet, Gardy and Thimonier, "Birthday
    paradox, coupon collectors, caching algorithms and self-organizing search", Discrete Appl. Math. 39, 207
    (1992), §4). A draw from a vertex of the worker's part leaves it with probability ``cut``; one from another
    part enters the worker's with probability ``cut / (P - 1)`` (a two-block stochastic block model with the
    partition's cut; a random partition, ``cut = (P - 1) / P``, is the unpartitioned graph up to the
    Poisson approximation ``(1 - P p)^(k / P) ~ (1 - p)^k``). A block's sources
    are its destinations and the vertices reached (DGL includes the destinations), so a vertex is a source
    with probability ``1 - (1 - P(destination)) (1 - p_u)^k``. Seeds are a uniform sample of the part's
    training vertices (``P = B * seed_share_c / (counts_c / P)`` in class c).

    The model ignores degree correlations, communities other than the parts, and short cycles (locally
    tree-like); a proxy's rules use only its ratio between two sizes
    (:func:`simulator.workload.proxy_batch.batch_reach_scale`), where those effects largely cancel.

    Args:
        degrees: (C,) float degree of every class (>= 0).
        counts: (C,) float vertices of every class (> 0).
        seed_share: (C,) share of the seeds in every class (sums to 1).
        batch_size: seeds B.
        fanouts: per block, input side first.
        num_parts: P, parts (machines) of the partition, >= 1.
        cut: fraction of edges between parts, in [0, 1 - 1/P] (ignored when P = 1).

    Returns:
        The :class:`BatchReach`.

    Raises:
        ValueError: mismatched shapes, no edges, a fanout that is 0 or below -1, or P < 1.
    """
    d = np.asarray(degrees, dtype=np.float64)
    c = np.asarray(counts, dtype=np.float64)
    s = np.asarray(seed_share, dtype=np.float64)
    if not d.shape == c.shape == s.shape or d.ndim != 1 or (d * c).sum() <= 0 or num_parts < 1:
        raise ValueError(f"batch_reach: need (C,) degrees, counts and seed shares with edges and >= 1 part, got "
                         f"{d.shape}, {c.shape}, {s.shape}, {num_parts} parts")
    if any(int(f) == 0 or int(f) < -1 for f in fanouts):
        raise ValueError(f"batch_reach: fanouts must be positive or -1, got {list(fanouts)}")
    parts = int(num_parts)
    leave = min(max(float(cut), 0.0), 1.0 - 1.0 / parts) if parts > 1 else 0.0
    enter = leave / (parts - 1) if parts > 1 else 0.0
    c_own, c_oth = c / parts, c * (parts - 1) / parts
    d_own, d_oth = float((d * c_own).sum()), float((d * c_oth).sum())
    log_own = np.log1p(-np.minimum(d / d_own, 1.0 - 1e-15))  # log(1 - p_u) per draw landing in the part
    log_oth = np.log1p(-np.minimum(d / d_oth, 1.0 - 1e-15)) if d_oth > 0 else np.zeros_like(d)
    own = np.minimum(1.0, batch_size * s / np.maximum(c_own, 1e-300))  # P(vertex is a frontier vertex)
    oth = np.zeros_like(d)
    src, dst, edges = [], [], []
    for f in reversed(list(fanouts)):
        take = d if int(f) == -1 else np.minimum(d, float(f))
        k_own, k_oth = float((c_own * own * take).sum()), float((c_oth * oth * take).sum())
        dst.append(float((c_own * own + c_oth * oth).sum()))
        edges.append(k_own + k_oth)
        into_own = k_own * (1.0 - leave) + k_oth * enter
        into_oth = k_own * leave + k_oth * (1.0 - enter)
        own = 1.0 - (1.0 - own) * np.exp(into_own * log_own)
        oth = 1.0 - (1.0 - oth) * np.exp(into_oth * log_oth)
        src.append(float((c_own * own + c_oth * oth).sum()))
    return BatchReach(np.asarray(src[::-1]), np.asarray(dst[::-1]), np.asarray(edges[::-1]), d, c,
                      c_own * own, c_oth * oth)


def histogram_classes(histogram: list[list[float]] | tuple[tuple[float, float], ...],
                      num_vertices: int) -> tuple[np.ndarray, np.ndarray]:
    """(degrees, counts) of a card histogram's bins at ``num_vertices`` vertices (each bin at its mean degree,
    the module docstring's convention), float64 (C,)."""
    h = np.asarray(histogram, dtype=np.float64)
    return h[:, 0], h[:, 1] / h[:, 1].sum() * num_vertices


def class_share(degrees: np.ndarray, histogram: list[list[float]] | tuple[tuple[float, float], ...] | None,
                counts: np.ndarray) -> np.ndarray:
    """(C,) share of a vertex subset (e.g. the training vertices, given by its own histogram; None = a uniform
    sample) in each of the classes ``degrees`` (a histogram row goes to the class of the nearest degree on a
    log scale, degree 0 to a class of degree 0 if there is one)."""
    if histogram is None:
        return counts / counts.sum()
    h = np.asarray(histogram, dtype=np.float64)
    logd = np.log1p(degrees)
    which = np.abs(np.log1p(h[:, 0])[:, None] - logd[None, :]).argmin(axis=1)
    share = np.bincount(which, weights=h[:, 1], minlength=len(degrees))
    return share / share.sum()
