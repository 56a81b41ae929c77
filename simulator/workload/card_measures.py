"""Card values measured on a graph in memory: the tail and moment exponents of its degrees, its connected
components, its Louvain communities and block model, and a whole :class:`~.cards.Card` derived from it (for graphs
without a published card, and to check a proxy against the graph it stands for: benchmarks/bench_proxy.py).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gnnplan.simulator.workload.cards import Card, card_from_dict

CUT_PARTS = (8,)
"""Numbers of parts a derived card's METIS edge cut is measured at (``communities="cut"``): one figure, as a paper
or a partitioning log publishes (benchmarks/bench_card_epoch.py ``--card-kind cut`` measures what it is worth)."""


def tail_exponent(degrees: np.ndarray, min_tail: int = 50) -> tuple[float, int]:
    """Power-law exponent of the tail of a degree sequence and the cut-off where the tail starts.

    Source: Clauset, Shalizi and Newman, "Power-law distributions in empirical data", SIAM Rev. 51, 661 (2009):
    the discrete maximum-likelihood approximation of eq. 3.7, gamma = 1 + k [sum ln(d_i / (d_min - 1/2))]^-1
    over the k degrees d_i >= d_min, with d_min chosen to minimise the Kolmogorov-Smirnov distance between the
    tail and the fitted law (§3.3). Candidates d_min are the distinct degrees with at least ``min_tail`` degrees
    at or above them.

    Args:
        degrees: (n,) int degrees (zeros are ignored).
        min_tail: smallest tail that is fitted.

    Returns:
        (gamma, d_min).

    Raises:
        ValueError: fewer than ``min_tail`` positive degrees.
    """
    d = np.sort(np.asarray(degrees)[np.asarray(degrees) > 0]).astype(np.float64)
    if len(d) < min_tail:
        raise ValueError(f"tail_exponent: need at least {min_tail} positive degrees, got {len(d)}")
    best = (math.inf, 2.5, 1)
    for d_min in np.unique(d):
        tail = d[d >= d_min]
        if len(tail) < min_tail:
            break
        gamma = 1.0 + len(tail) / float(np.sum(np.log(tail / (d_min - 0.5))))
        # KS distance between the empirical tail CDF and the continuous-approximation CDF of the fitted law
        emp = np.arange(1, len(tail) + 1) / len(tail)
        model = 1.0 - (tail / (d_min - 0.5)) ** (1.0 - gamma)
        ks = float(np.max(np.abs(emp - model)))
        if ks < best[0]:
            best = (ks, gamma, int(d_min))
    return float(best[1]), best[2]


def moment_exponent(degrees: np.ndarray, max_degree: float | None = None) -> float:
    """The exponent gamma of the truncated power law that the proxy draws expected degrees from
    (:func:`simulator.workload.sbm.expected_degrees`: lower cut-off solved from the mean, upper ``max_degree``)
    whose size-biased mean E[theta^2] / E[theta] matches the degree sequence's E[d^2] / E[d] - 1.

    The size-biased mean is the mean degree of a vertex reached over an edge, which sets how a sampled
    neighbourhood grows (Newman, Strogatz and Watts, Phys. Rev. E 64, 026118 (2001), §II.A: the mean excess
    degree); the ``- 1`` removes the Poisson scatter of realised around expected degrees (E[d^2] = E[theta^2] +
    E[theta] for d ~ Poisson(theta)).

    Args:
        degrees: (n,) int degrees.
        max_degree: upper cut-off (default: the largest degree).

    Returns:
        gamma in [1.05, 6] (not 2); the bound that comes closest when no exponent matches exactly.
    """
    from scipy.optimize import brentq

    from gnnplan.simulator.workload.sbm import powerlaw_min_degree

    d = np.asarray(degrees, dtype=np.float64)
    mean = float(d.mean())
    cap = float(max_degree if max_degree is not None else d.max())
    target = float((d ** 2).mean() / mean) - 1.0

    def size_biased(gamma: float) -> float:
        a = gamma - 1.0
        try:
            x = powerlaw_min_degree(mean, gamma, cap)
        except ValueError:  # no lower cut-off gives this mean: the law is heavier than the sequence
            return math.inf
        if abs(a - 2.0) < 1e-9:
            second = a * x ** a * math.log(cap / x) / (1.0 - (x / cap) ** a)
        else:
            second = a / (2.0 - a) * x ** a * (cap ** (2.0 - a) - x ** (2.0 - a)) / (1.0 - (x / cap) ** a)
        return second / mean - target

    lo, hi = 1.05, 6.0
    f_lo, f_hi = size_biased(lo), size_biased(hi)
    if f_lo > 0 and f_hi > 0 or f_lo < 0 and f_hi < 0:
        return lo if abs(f_lo) < abs(f_hi) else hi
    # the mean of the truncated law has no closed form at gamma = 2 (sbm.powerlaw_min_degree): step around it
    for a_, b_ in ((lo, 1.999), (2.001, hi)):
        fa, fb = size_biased(a_), size_biased(b_)
        if (fa >= 0) != (fb >= 0):
            return float(brentq(size_biased, a_, b_, xtol=1e-4))
    return 2.001


def derived_card(name: str, num_vertices: int, src: np.ndarray, dst: np.ndarray, feature_dim: int,
                 num_classes: int, split: tuple[int, int, int], labels: np.ndarray | None = None,
                 how: str = "measured on the graph", communities: str | None = None,
                 train_idx: np.ndarray | None = None, cut_parts: tuple[int, ...] = CUT_PARTS) -> Card:
    """A card whose every number is measured on a graph in memory (for graphs without a published card, and to
    check a proxy against the graph it stands for: benchmarks/bench_proxy.py).

    The degree summary is the largest in-degree, :func:`moment_exponent` of the positive in-degrees, the
    fraction of vertices without in-edges and the log-binned in-degree histogram. Communities:
    ``"labels"`` takes the label classes, ``mu`` the fraction of edges whose ends have different labels
    (1 - edge homophily; Zhu et al., "Beyond Homophily in Graph Neural Networks", NeurIPS 2020, §2);
    ``"louvain"`` :func:`louvain_communities`; ``"blocks"`` the whole structure the bundled cards carry
    (:func:`simulator.workload.card_structure.structure_fields`: components, the Louvain block model with its
    fine level, training vertices and bridges, assortativity, clustering, the training vertices' in-degree
    histogram); ``"cut"`` no communities but the graph's METIS edge cut at ``cut_parts`` (``metis_edge_cut``, to
    which the proxy fits its communities: :mod:`simulator.workload.cut_fit`); None plants none.

    Args:
        name: the card's name.
        num_vertices: n.
        src, dst: (E,) int64 directed edges as loaded (``edge_direction`` = ``directed``).
        feature_dim, num_classes: feature width and classes.
        split: (train, valid, test) vertex counts.
        labels: (n,) int64 class per vertex (-1 = unlabelled; edges touching one are left out of ``mu``).
        how: what the numbers were measured on (goes into every ``source``).
        communities: ``"labels"``, ``"louvain"``, ``"blocks"``, ``"cut"`` or None.
        train_idx: (k,) int64 training vertices (``"blocks"`` only).
        cut_parts: the numbers of parts the METIS cut is measured at (``"cut"`` only).

    Raises:
        ValueError: ``"blocks"`` without ``train_idx``, or another value of ``communities``.
    """
    from gnnplan.simulator.workload.degree_bins import degree_histogram

    deg = np.bincount(dst, minlength=num_vertices)
    gamma = moment_exponent(deg[deg > 0])
    src_text = f"derived: {how}"
    data: dict = {  # type: ignore[type-arg]
        "name": name, "description": f"derived card of {name}",
        "num_vertices": {"value": int(num_vertices), "source": src_text},
        "num_edges": {"value": int(len(src)), "source": src_text},
        "edge_direction": {"value": "directed", "source": f"{src_text} (edges as loaded)"},
        "feature_dim": {"value": int(feature_dim), "source": src_text},
        "num_classes": {"value": int(num_classes), "source": src_text},
        "split": {k: {"value": int(v), "source": src_text} for k, v in zip(("train", "valid", "test"), split)},
        "degree": {"max_in_degree": {"value": float(deg.max()), "source": f"{src_text}: largest in-degree"},
                   "exponent": {"value": round(gamma, 3),
                                "source": f"{src_text}: moment_exponent of the positive in-degrees"},
                   "zero_in_degree_fraction": {"value": round(float(np.mean(deg == 0)), 4),
                                               "source": f"{src_text}: vertices without in-edges"},
                   "in_degree_histogram": {"value": degree_histogram(deg),
                                           "source": f"{src_text}: degree_bins.degree_histogram of the in-degrees"}},
    }
    if communities == "labels" and labels is not None:
        keep = (labels[src] >= 0) & (labels[dst] >= 0)
        mu = float(np.mean(labels[src[keep]] != labels[dst[keep]])) if keep.any() else 0.0
        k = int(len(np.unique(labels[labels >= 0])))
        data["communities"] = {"num_communities": {"value": k, "source": f"{src_text}: label classes"},
                               "mu": {"value": round(mu, 4), "source": f"{src_text}: 1 - edge homophily"}}
    elif communities == "blocks":
        if train_idx is None:
            raise ValueError("derived_card: communities 'blocks' needs train_idx")
        from gnnplan.simulator.workload.card_structure import structure_fields

        fields = structure_fields(num_vertices, src, dst, train_idx, how)
        data["degree"]["assortativity"] = fields["assortativity"]
        data["split"]["train_in_degree_histogram"] = fields["train_in_degree_histogram"]
        data["clustering"] = fields["clustering"]
        for key in ("communities", "components"):
            if fields[key] is not None:
                data[key] = fields[key]
    elif communities == "louvain":
        k, mu = louvain_communities(num_vertices, src, dst)
        data["communities"] = {
            "num_communities": {"value": k, "source": f"{src_text}: effective number (inverse Simpson index) of "
                                                      "the Louvain communities (networkx, seed 0)"},
            "mu": {"value": round(mu, 4), "source": f"{src_text}: fraction of edges between Louvain communities"}}
    elif communities == "cut":
        rows = [[p, round(metis_cut_fraction(num_vertices, src, dst, p), 5)] for p in cut_parts]
        data["metis_edge_cut"] = {"value": rows, "source": f"{src_text}: fraction of the edges METIS (seed 0) cuts "
                                                           "into each number of parts"}
    elif communities is not None and communities != "labels":
        raise ValueError(f"derived_card: communities {communities!r} is not one of labels, louvain, blocks, cut, "
                         "None")
    return card_from_dict(data, where=f"card {name}")


def metis_cut_fraction(num_vertices: int, src: np.ndarray, dst: np.ndarray, parts: int) -> float:
    """The fraction of the edges ``(src, dst)`` whose ends METIS (:func:`simulator.workload.partition.partition`,
    seed 0, the partition every strategy's statistics use) puts in different parts of ``parts``."""
    from gnnplan.simulator.workload.partition import partition

    owner = partition(src, dst, num_vertices, parts, "metis", 0)
    return float(np.mean(owner[src] != owner[dst]))


def component_summary(num_vertices: int, src: np.ndarray, dst: np.ndarray
                      ) -> tuple[list[list[int]], int, np.ndarray]:
    """The connected components of a graph taken as undirected (scipy ``connected_components``): rows ``[size,
    count]`` of the components other than the largest (increasing size; a card's ``components.small_sizes``),
    the undirected edges inside them (``components.small_edges``; repeated pairs and self-loops counted once)
    and the (num_vertices,) bool mask of the largest component."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    a = sp.coo_matrix((np.ones(len(src)), (src, dst)), shape=(num_vertices, num_vertices)).tocsr()
    a = ((a + a.T) > 0).astype(np.int8)
    _, label = connected_components(a, directed=False)
    size = np.bincount(label)
    largest = int(size.argmax())
    counts = np.bincount(np.delete(size, largest)) if len(size) > 1 else np.zeros(1, dtype=np.int64)
    rows = [[int(s), int(c)] for s, c in enumerate(counts) if c]
    upper = sp.triu(a, 1).tocoo()
    return rows, int(np.sum(label[upper.row] != largest)), label == largest


def largest_component(num_vertices: int, src: np.ndarray, dst: np.ndarray
                      ) -> tuple[int, np.ndarray, np.ndarray]:
    """(vertices, src, dst) of the largest connected component (:func:`component_summary`), renumbered
    0..n_c - 1 in id order."""
    keep = component_summary(num_vertices, src, dst)[2]
    new = np.full(num_vertices, -1, dtype=np.int64)
    new[keep] = np.arange(int(keep.sum()))
    inside = keep[src] & keep[dst]
    return int(keep.sum()), new[src[inside]], new[dst[inside]]


def louvain_blocks(num_vertices: int, src: np.ndarray, dst: np.ndarray, seed: int = 0
                   ) -> tuple[list[int], list[list[int]]]:
    """The block model of a graph's Louvain communities (the same networkx run as :func:`louvain_communities`):
    the vertices of every community and rows ``[i, j, m_ij]`` (i <= j, m_ij >= 1) of the undirected simple
    edges between communities i and j (inside i when i = j): a card's ``communities.block_sizes`` and
    ``block_edges``."""
    g, comm, k = _louvain(num_vertices, src, dst, seed)
    a, b = np.array([e for e in g.edges() if e[0] != e[1]], dtype=np.int64).reshape(-1, 2).T
    ca, cb = np.minimum(comm[a], comm[b]), np.maximum(comm[a], comm[b])
    m = np.bincount(ca * k + cb, minlength=k * k).reshape(k, k)
    rows = [[int(i), int(j), int(m[i, j])] for i, j in zip(*np.nonzero(m))]
    return np.bincount(comm, minlength=k).tolist(), rows


def louvain_of_largest(num_vertices: int, src: np.ndarray, dst: np.ndarray, seed: int = 0
                       ) -> tuple[np.ndarray, np.ndarray, int]:
    """(keep, comm, K): the (n,) bool mask of the largest connected component, the (n,) int64 Louvain community
    of every vertex (-1 outside it; the networkx run of :func:`louvain_blocks` on :func:`largest_component`, so
    the same community numbers) and the number of communities."""
    keep = component_summary(num_vertices, src, dst)[2]
    _, inner, k = _louvain(*largest_component(num_vertices, src, dst), seed)
    comm = np.full(num_vertices, -1, dtype=np.int64)
    comm[keep] = inner
    return keep, comm, k


def _louvain(num_vertices: int, src: np.ndarray, dst: np.ndarray, seed: int) -> tuple[Any, np.ndarray, int]:
    """(networkx graph, (n,) int64 Louvain community of every vertex, number of communities): one networkx
    ``louvain_communities`` run (seeded) on the undirected graph of the edges."""
    import networkx as nx

    g = nx.Graph()
    g.add_nodes_from(range(num_vertices))
    g.add_edges_from(zip(src.tolist(), dst.tolist()))
    comm = np.zeros(num_vertices, dtype=np.int64)
    groups = nx.community.louvain_communities(g, seed=seed)
    for i, members in enumerate(groups):
        comm[list(members)] = i
    return g, comm, len(groups)


def louvain_train_counts(num_vertices: int, src: np.ndarray, dst: np.ndarray, train_idx: np.ndarray,
                         seed: int = 0) -> list[int]:
    """Training vertices in each of the Louvain communities of a graph's largest connected component, in the
    order of :func:`louvain_blocks` on that component (:func:`largest_component`; the same networkx run): a card's
    ``communities.block_train``. A split chosen by label (Planetoid: 20 per class) is not spread over the
    communities in proportion to their size, and a partitioner that keeps communities whole then gives its parts
    unequal shares of the seeds.

    Measured, and the limit of this count (2026-11-28, bench_proxy's 2-part METIS remote input fraction, median over
    128 relabelings; the real graphs' training vertices redrawn, same count, degree bins kept): redrawn inside each
    of these communities it moves from 0.055 to 0.042 on CiteSeer and from 0.125 to 0.147 on Cora; redrawn inside
    the communities of level 1 of the Louvain dendrogram (networkx ``louvain_partitions``, level 0 the finest: 146
    and 122 communities) it stays (0.057, 0.137). So where the seeds sit inside a community matters to the parts'
    shares as well. A proxy that plants that level (its sizes, mixing and training counts) did not come closer,
    though: the CiteSeer proxy's remote fraction stayed at a mean of 0.037 over 16 draws (0.038 without it), and the
    real graphs' statistics within 15% per draw fell from a median of 62 to 61.5 of 66 (the proxy's communities are
    wired at random inside, so METIS does not cut along them as it cuts the real ones). Without this count the
    median is 60."""
    _, comm, k = louvain_of_largest(num_vertices, src, dst, seed)
    inside = comm[np.asarray(train_idx, dtype=np.int64)]
    return np.bincount(inside[inside >= 0], minlength=k).tolist()


def louvain_bridge_fraction(num_vertices: int, src: np.ndarray, dst: np.ndarray, seed: int = 0) -> float:
    """Fraction of the vertices of a graph's largest connected component with an edge to another of its Louvain
    communities (the networkx run of :func:`louvain_blocks` on :func:`largest_component`): a card's
    ``communities.bridge_fraction``. With the edges between communities fixed (``mu``, ``block_edges``) it says
    how they are spread over the communities' vertices: on the bundled graphs 0.285 (Cora) and 0.187 (CiteSeer)
    of the vertices hold them, 1.8 each on average, where the same edges dealt to random edge ends reach 0.36 and
    0.24 (a vertex's stubs leaving with the community's share independently), so real communities meet at fewer
    vertices, and METIS cuts fewer edges between them (proxy.py, stub_labels.concentrated_labels).

    Shapes:
        src, dst: (E,) int64 edges as loaded -> a fraction in [0, 1] (:func:`simulator.workload.bridges.bridge_share`).
    """
    from gnnplan.simulator.workload.bridges import bridge_share

    _, comm, _ = louvain_of_largest(num_vertices, src, dst, seed)
    return bridge_share(src, dst, comm)


def louvain_train_near_bridge_fraction(num_vertices: int, src: np.ndarray, dst: np.ndarray, train_idx: np.ndarray,
                                       seed: int = 0) -> float:
    """Fraction of the training vertices inside the Louvain communities of a graph's largest connected component
    (the networkx run of :func:`louvain_blocks` on :func:`largest_component`) that are at most one hop from a
    vertex with an edge to another of those communities (:func:`simulator.workload.bridges.near_bridge_vertices`):
    a card's ``communities.train_near_bridge_fraction``, which the proxy's training vertices follow
    (:mod:`simulator.workload.train_split`).

    On the bundled graphs (2026-11-30): CiteSeer's Planetoid training vertices 0.675 (54 of the 80 in its largest
    component), where vertices of the same in-degrees in that component are at 0.564 (a split chosen by label sits
    nearer the communities' boundaries); Cora's 0.787 against 0.782. The seeds near a boundary are where the
    remote inputs of the seeds a machine owns come from in a 2-part METIS partition: CiteSeer's proxy without this
    share had half the real graph's, with it two thirds (benchmarks/bench_proxy_bias.py: the remote input fraction
    against the share of spilled seeds, a line's intercept over 32 relabelings and over 16 draws x 4 METIS seeds,
    0.024 real, 0.011 without, 0.017 with; the spill itself 0.029, 0.026, 0.023; "without" counted METIS seed 0's
    partition twice, "with" uses seeds 0, 2, 3 and 4). The proxy's draw realises
    0.666-0.686 of CiteSeer's 0.675 on draws 0-3 (:func:`simulator.workload.train_split.degree_matched_train`).

    Shapes:
        src, dst: (E,) int64 edges as loaded; train_idx: (k,) int64 -> a fraction in [0, 1] (0 when no training
        vertex is in the largest component).
    """
    from gnnplan.simulator.workload.bridges import near_bridge_vertices, near_share

    _, comm, _ = louvain_of_largest(num_vertices, src, dst, seed)
    return near_share(near_bridge_vertices(src, dst, comm), comm, train_idx, 0.0)


def louvain_communities(num_vertices: int, src: np.ndarray, dst: np.ndarray, seed: int = 0) -> tuple[int, float]:
    """(effective number of communities, mixing mu) of a graph's Louvain communities.

    Communities: networkx ``louvain_communities`` (Blondel et al., J. Stat. Mech. P10008 (2008)) on the
    undirected simple graph. The effective number is the inverse Simpson index ``1 / sum_c (n_c / n)^2`` (Hill,
    Ecology 54, 427 (1973)), so many tiny communities (isolated pairs) count as little as they weigh; mu is the
    fraction of edges whose ends lie in different communities (the LFR mixing parameter). Pure Python: meant for
    graphs up to ~10^6 edges.
    """
    import networkx as nx

    g = nx.Graph()
    g.add_nodes_from(range(num_vertices))
    g.add_edges_from(zip(src.tolist(), dst.tolist()))
    comm = np.zeros(num_vertices, dtype=np.int64)
    for i, members in enumerate(nx.community.louvain_communities(g, seed=seed)):
        comm[list(members)] = i
    from gnnplan.simulator.workload.card_structure import effective_number

    k = effective_number(comm)
    mu = float(np.mean(comm[src] != comm[dst])) if len(src) else 0.0
    return (k, mu) if k > 1 else (1, 0.0)
