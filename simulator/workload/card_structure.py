"""The structure fields of a dataset card measured on a graph in memory: what a proxy needs to partition like the
graph, beyond its sizes and degrees.

A card without this structure gives a proxy that METIS cuts far more than the real graph (benchmarks/
bench_card_epoch.py ``--card-kind``: on Cora and CiteSeer every evaluation came out high, 116% at the median, and
hongtu's network bytes up to 9.6x; with these fields, as the shipped cards have them, 3.3% and 1.1x; each card pooled
over 15 proxy draws, 2026-11-30; 7.9% and 1.1x on 2026-12-02, every evaluation within 10.4%, with the largest
component's own clustering). So a user who
holds a graph and wants to share it as a card, or to ask what-if questions of it on another machine, measures it
with :func:`structure_fields` (``gnnplan card``), which gives the same numbers the bundled Cora and CiteSeer cards
were measured with:

* ``components``: the connected components other than the largest (``[size, count]`` rows) and the edges inside
  them (:func:`simulator.workload.card_measures.component_summary`);
* ``communities`` of the largest component, from one seeded networkx Louvain run (Blondel et al., J. Stat. Mech.
  P10008 (2008); ``louvain_partitions``, whose last level is ``louvain_communities``'): their effective number
  (inverse Simpson index, Hill, Ecology 54, 427 (1973)) and mixing mu; the first level of the dendrogram as the
  fine communities (``fine_num_communities``, ``fine_mu``); the block model (``block_sizes``, ``block_edges``: the
  undirected simple edges between communities i <= j); the training vertices in each (``block_train``); the share
  of the component's vertices with an edge to another community (``bridge_fraction``,
  :func:`simulator.workload.bridges.bridge_share`) and of the training vertices in the communities at most one hop
  from such a vertex (``train_near_bridge_fraction``, :func:`simulator.workload.bridges.near_bridge_vertices`);
* ``degree.assortativity`` (Newman, PRL 89, 208701 (2002)) and ``clustering.average_clustering`` (Watts and
  Strogatz, Nature 393, 440 (1998)), with ``clustering.largest_component`` (the same over the largest component)
  when the graph has other components; ``split.train_in_degree_histogram``.

Louvain here is pure Python (networkx), and what limits the size of graph this measures: the whole structure of a
5 x 10^5-vertex R-MAT graph (edge factor 8) took 8 min with generating it, Louvain alone on the 2 x 10^6-vertex
one 65 min and 12 GB (2026-11-30, this 2-core machine).
"""

from __future__ import annotations

from typing import Any

import numpy as np

LOUVAIN_SEED = 0
"""Seed of the networkx Louvain run (the bundled cards' sources name seed 0)."""


def louvain_levels(num_vertices: int, src: np.ndarray, dst: np.ndarray, seed: int = LOUVAIN_SEED
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The first and the last level of the Louvain dendrogram of a graph taken as undirected and simple.

    Args:
        num_vertices: n.
        src, dst: (E,) int64 edges (either direction; self-loops and repeats do not count).
        seed: networkx's seed; the last level equals ``louvain_communities(g, seed=seed)`` of the same graph.

    Returns:
        ((n,) int64 community of every vertex at the first level, the same at the last level), numbered in the
        order networkx lists the communities.
    """
    import networkx as nx

    g = nx.Graph()
    g.add_nodes_from(range(num_vertices))
    g.add_edges_from(zip(src.tolist(), dst.tolist()))
    levels = list(nx.community.louvain_partitions(g, seed=seed))
    out = []
    for groups in (levels[0], levels[-1]):
        comm = np.zeros(num_vertices, dtype=np.int64)
        for i, members in enumerate(groups):
            comm[list(members)] = i
        out.append(comm)
    return out[0], out[1]


def simple_edges(num_vertices: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) with a < b: every undirected pair of distinct vertices joined by an edge in either direction, once."""
    import scipy.sparse as sp

    keep = src != dst
    a, b = np.minimum(src[keep], dst[keep]), np.maximum(src[keep], dst[keep])
    m = sp.coo_matrix((np.ones(len(a), dtype=np.int8), (a, b)), shape=(num_vertices, num_vertices)).tocsr()
    m.sum_duplicates()
    upper = m.tocoo()
    return upper.row.astype(np.int64), upper.col.astype(np.int64)


def effective_number(community: np.ndarray) -> int:
    """Inverse Simpson index ``1 / sum_c (n_c / n)^2`` of a (n,) community assignment, rounded (>= 1)."""
    share = np.bincount(community) / len(community)
    return max(1, int(round(1.0 / float(np.sum(share ** 2)))))


def structure_fields(num_vertices: int, src: np.ndarray, dst: np.ndarray, train_idx: np.ndarray, how: str,
                     seed: int = LOUVAIN_SEED) -> dict[str, Any]:
    """The structure fields of a card (module docstring) as card YAML data, each with its ``source``.

    Args:
        num_vertices: n.
        src, dst: (E,) int64 edges as loaded.
        train_idx: (k,) int64 training vertices.
        how: what the numbers were measured on (goes into every ``source``).
        seed: the Louvain run's seed.

    Returns:
        ``{"components": ..., "communities": ..., "assortativity": ..., "clustering": ...,
        "train_in_degree_histogram": ...}``: ``components`` None when the graph is connected, ``communities`` None
        when Louvain finds one community in the largest component.
    """
    from gnnplan.simulator.workload.assortativity import assortativity
    from gnnplan.simulator.workload.bridges import bridge_share, near_bridge_vertices, near_share
    from gnnplan.simulator.workload.card_measures import component_summary, largest_component
    from gnnplan.simulator.workload.clustering import average_clustering
    from gnnplan.simulator.workload.degree_bins import degree_histogram

    text = f"derived: {how}"
    rows, small_edges, keep = component_summary(num_vertices, src, dst)
    n_c, src_c, dst_c = largest_component(num_vertices, src, dst)
    fine, comm = louvain_levels(n_c, src_c, dst_c, seed)
    a, b = simple_edges(n_c, src_c, dst_c)
    k = int(comm.max()) + 1
    lo, hi = np.minimum(comm[a], comm[b]), np.maximum(comm[a], comm[b])
    pairs = np.bincount(lo * k + hi, minlength=k * k).reshape(k, k)
    whole = np.full(num_vertices, -1, dtype=np.int64)
    whole[keep] = comm
    inside = whole[np.asarray(train_idx, dtype=np.int64)]
    in_deg = np.bincount(dst, minlength=num_vertices)
    louvain = f"networkx Louvain communities (seed {seed}) of the largest connected component ({n_c} vertices)"
    communities, k_eff = None, effective_number(comm)
    if k_eff > 1:
        communities = {
            "num_communities": {"value": k_eff,
                                "source": f"{text}: effective number (inverse Simpson index) of the {louvain}"},
            "mu": {"value": round(float(np.mean(comm[src_c] != comm[dst_c])), 4),
                   "source": f"{text}: fraction of the largest component's edges between those communities"},
            "fine_num_communities": {"value": effective_number(fine),  # a refinement of the last level: >= it
                                     "source": f"{text}: effective number of the communities of the first level of "
                                               "that Louvain dendrogram (louvain_partitions)"},
            "fine_mu": {"value": round(float(np.mean(fine[src_c] != fine[dst_c])), 4),
                        "source": f"{text}: fraction of the largest component's edges between those first-level "
                                  "communities"},
            "block_sizes": {"value": np.bincount(comm, minlength=k).tolist(),
                            "source": f"{text}: vertices of each of the {louvain}"},
            "block_edges": {"value": [[int(i), int(j), int(pairs[i, j])] for i, j in zip(*np.nonzero(pairs))],
                            "source": f"{text}: [i, j, undirected edges between those communities i and j (inside i "
                                      "when i = j)]"},
            "block_train": {"value": np.bincount(inside[inside >= 0], minlength=k).tolist(),
                            "source": f"{text}: training vertices in each of those communities"},
            "bridge_fraction": {"value": round(bridge_share(src, dst, whole), 4),
                                "source": f"{text}: fraction of the largest component's vertices with an edge to "
                                          "another of those communities"}}
        if (inside >= 0).any():
            near = near_share(near_bridge_vertices(src, dst, whole), whole, train_idx, 0.0)
            communities["train_near_bridge_fraction"] = {
                "value": round(near, 4),
                "source": f"{text}: fraction of the training vertices in those communities at most one hop from a "
                          "vertex with an edge to another of them"}
    components = {"small_sizes": {"value": rows, "source": f"{text}: [size, count] of the connected components "
                                                          "other than the largest"},
                  "small_edges": {"value": small_edges, "source": f"{text}: undirected edges inside those components"}}
    return {
        "components": components if rows else None,
        "communities": communities,
        "assortativity": {"value": round(assortativity(num_vertices, src, dst), 4),
                          "source": f"{text}: degree assortativity of the undirected simple graph"},
        "clustering": {"average_clustering": {"value": round(average_clustering(num_vertices, src, dst), 4),
                                              "source": f"{text}: average clustering coefficient (vertices of degree "
                                                        "< 2 count 0)"},
                       **({"largest_component": {"value": round(average_clustering(n_c, src_c, dst_c), 4),
                                                 "source": f"{text}: the same over the largest connected component's "
                                                           f"{n_c} vertices"}} if rows else {})},
        "train_in_degree_histogram": {"value": degree_histogram(in_deg[np.asarray(train_idx, dtype=np.int64)]),
                                      "source": f"{text}: degree_bins.degree_histogram of the training vertices' "
                                                "in-degrees"},
    }
