"""The structure a card's proxy takes from the card beyond its degrees: degree correlations (assortativity
rewiring), clustering (triangle closure), and training vertices placed by community."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.workload import assortativity, blockmodel, clustering, degree_bins, degseq
from gnnplan.simulator.workload.cards import card_from_dict, load_card
from gnnplan.simulator.workload.datasets import load_dataset
from gnnplan.simulator.workload.proxy import proxy_spec


def _graph(seed: int = 0) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """A 600-vertex planted-partition configuration graph of Cora's degree histogram in 4 communities."""
    n = 600
    deg = degree_bins.proxy_degrees(load_card("cora").degree.in_degree_histogram.value, 2708, n,
                               np.random.default_rng(seed))
    starts = degseq.community_starts(n, 4)
    src, dst = degseq.planted_configuration_edges(deg, starts, 0.15, seed=seed)
    return n, src, dst, np.searchsorted(starts, np.arange(n), side="right") - 1


def _pair_counts(label: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    m = int(label.max()) + 1
    return np.bincount(np.minimum(label[src], label[dst]) * m + np.maximum(label[src], label[dst]), minlength=m * m)


def _nx(n: int, src: np.ndarray, dst: np.ndarray) -> nx.Graph:
    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from(zip(src.tolist(), dst.tolist()))
    return g


def test_measures_equal_networkx() -> None:
    g = nx.karate_club_graph()
    a = np.array([e[0] for e in g.edges()])
    b = np.array([e[1] for e in g.edges()])
    src, dst = np.concatenate([a, b]), np.concatenate([b, a])
    assert clustering.average_clustering(34, src, dst) == pytest.approx(nx.average_clustering(g), abs=1e-12)
    assert assortativity.assortativity(34, src, dst) == pytest.approx(nx.degree_assortativity_coefficient(g),
                                                                      abs=1e-12)


def test_triangle_closure_reaches_the_target_and_keeps_degrees_communities_and_degree_pairs() -> None:
    n, src, dst, comm = _graph()
    before = clustering.average_clustering(n, src, dst)
    assert before < 0.07  # a configuration model has few triangles (0.055 here)
    s2, d2 = clustering.close_triangles(n, src, dst, 0.2, np.random.default_rng(1), groups=comm)
    after = clustering.average_clustering(n, s2, d2)
    assert 0.2 <= after <= 0.21 and after == pytest.approx(nx.average_clustering(_nx(n, s2, d2)), abs=1e-12)
    assert np.array_equal(np.bincount(d2, minlength=n), np.bincount(dst, minlength=n))  # degrees
    assert len(np.unique(s2 * n + d2)) == len(s2) and not np.any(s2 == d2)  # simple
    assert np.array_equal(_pair_counts(comm, s2, d2), _pair_counts(comm, src, dst))  # community pair counts
    deg = np.bincount(dst, minlength=n)
    cls = np.searchsorted(degree_bins.bin_edges(int(deg.max())), deg, side="right") - 1
    assert np.array_equal(_pair_counts(cls, s2, d2), _pair_counts(cls, src, dst))  # joint degree distribution


def test_triangle_closure_measured_on_part_of_the_graph_reaches_the_target_there() -> None:
    """``measured_on``: the target is the average over those vertices (a proxy's largest component), not over all."""
    n, src, dst, comm = _graph()
    part = comm < 2  # two of the four communities
    s2, d2 = clustering.close_triangles(n, src, dst, 0.2, np.random.default_rng(1), groups=comm, movable=part,
                                        measured_on=part)
    local = clustering.local_clustering(clustering._adjacency(n, s2, d2))
    assert 0.2 <= local[part].mean() <= 0.21
    assert local.mean() < 0.16  # the other half closed no wedge of its own
    assert np.array_equal(np.bincount(d2, minlength=n), np.bincount(dst, minlength=n))
    assert np.array_equal(_pair_counts(comm, s2, d2), _pair_counts(comm, src, dst))


@pytest.mark.parametrize("target", [-0.15, 0.05])  # from -0.063 both ways
def test_assortativity_rewiring_reaches_the_target_and_keeps_degrees_and_communities(target: float) -> None:
    n, src, dst, comm = _graph(1)
    s2, d2 = assortativity.rewire_assortativity(n, src, dst, target, np.random.default_rng(2), groups=comm)
    assert assortativity.assortativity(n, s2, d2) == pytest.approx(target, abs=0.005)
    assert np.array_equal(np.bincount(d2, minlength=n), np.bincount(dst, minlength=n))
    assert len(np.unique(s2 * n + d2)) == len(s2) and not np.any(s2 == d2)
    assert np.array_equal(_pair_counts(comm, s2, d2), _pair_counts(comm, src, dst))


def test_cora_proxy_has_the_cards_correlations_clustering_and_training_communities() -> None:
    card, spec = load_card("cora"), proxy_spec("cora")
    g = load_dataset("card:cora")
    assert spec.assortativity == card.degree.assortativity.value == -0.0659
    assert assortativity.assortativity(g.num_vertices, g.src, g.dst) == pytest.approx(-0.0659, abs=0.002)
    # clustering: the largest component reaches the card's own average for it (its small components keep what they
    # were planted with, fewer triangles than Cora's: 0.105 for 0.275), so the whole graph's comes out below 0.2407
    from gnnplan.simulator.workload.card_measures import largest_component

    assert spec.largest_component_clustering == card.clustering.largest_component.value == 0.2376
    assert clustering.average_clustering(*largest_component(g.num_vertices, g.src, g.dst)) == pytest.approx(
        0.2376, abs=0.003)
    assert clustering.average_clustering(g.num_vertices, g.src, g.dst) < 0.2376
    # training vertices: each community's card share of the proxy's 677 (largest remainders), the rest outside
    counts = np.asarray(spec.block_train, dtype=np.float64)
    assert counts.sum() == card.split.train.value == 140 and counts[-1] == 140 - 122
    exact = counts / counts.sum() * len(g.train_idx)
    block = blockmodel.proxy_block_of(spec)
    got = np.bincount(block[g.train_idx] + 1, minlength=len(counts))  # -1 (outside) first
    got = np.concatenate([got[1:], got[:1]])
    assert np.all(np.abs(got - exact) < 1.0) and got.sum() == len(g.train_idx)
    assert np.all(got[counts == 0] == 0)


@pytest.mark.parametrize("name", ["cora", "citeseer"])
def test_card_proxy_has_exactly_the_cards_components(name: str) -> None:
    """Random pairing inside a community cuts a few pieces off the largest component (CiteSeer: 26, mostly pairs
    of degree-1 vertices), and rewiring may cut more; they are joined back (blockmodel.connect_largest in
    structure.shape), so the proxy's components are the card's: the largest one and the small ones as listed."""
    from gnnplan.simulator.workload.card_measures import component_summary

    card, g = load_card(name), load_dataset(f"card:{name}")
    rows, small_edges, largest = component_summary(g.num_vertices, g.src, g.dst)
    assert [tuple(r) for r in rows] == [tuple(r) for r in card.components.small_sizes.value]
    assert small_edges == card.components.small_edges.value
    assert int(largest.sum()) == card.num_vertices.value - card.components.num_small_vertices


@pytest.mark.parametrize(("path", "value", "message"), [
    (("communities", "block_train"), [1, 2], "block_train needs block_sizes, one count"),
    (("clustering", "average_clustering"), 1.2, "average_clustering must be in"),
    (("clustering", "largest_component"), -0.1, "largest_component must be in"),
    (("degree", "assortativity"), -1.0, "assortativity must be in"),
])
def test_invalid_structure_fields_are_one_line(path: tuple[str, str], value: object, message: str) -> None:
    data = load_card("cora").model_dump()
    data[path[0]][path[1]]["value"] = value
    with pytest.raises(SpecError, match=message) as exc:
        card_from_dict(data)
    assert "\n" not in str(exc.value)


def test_triangle_closure_on_a_graph_whose_swaps_all_fail_returns_it_unchanged() -> None:
    """A path 0-1-2 and disjoint edges: the one wedge's swaps all fail (the ends' other neighbour is the centre),
    which left scipy's adjacency lookup empty index arrays and raised (a card edited to few edges, 2026-12-01)."""
    pairs = [(0, 1), (1, 2)] + [(i, i + 1) for i in range(3, 40, 2)]
    src = np.array([a for a, b in pairs] + [b for a, b in pairs])
    dst = np.array([b for a, b in pairs] + [a for a, b in pairs])
    s, d = clustering.close_triangles(41, src, dst, 0.5, np.random.default_rng(0))
    order = np.lexsort((dst, src))
    assert (s == src[order]).all() and (d == dst[order]).all()
