"""A card's structure fields measured on a graph (simulator/workload/card_structure.py): the bundled cards'
numbers reproduced, and the pieces they are made of."""

from __future__ import annotations

import numpy as np
import pytest

from gnnplan.simulator.workload import cards
from gnnplan.simulator.workload.card_measures import derived_card
from gnnplan.simulator.workload.card_structure import effective_number, louvain_levels, simple_edges
from gnnplan.simulator.workload.datasets import load_dataset


def _numbers(card: cards.Card) -> dict[str, object]:
    """Every sourced value of a card by its dotted field path."""
    out: dict[str, object] = {}

    def walk(node: object, prefix: str) -> None:
        if isinstance(node, dict) and set(node) == {"value", "source"}:
            out[prefix] = node["value"]
        elif isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{prefix}.{key}" if prefix else key)

    walk(card.model_dump(mode="json", exclude_none=True), "")
    return out


@pytest.mark.parametrize("name", ["cora", "citeseer"])
def test_a_card_derived_with_its_blocks_has_every_number_of_the_bundled_card(name: str) -> None:
    """``derived_card(..., communities="blocks")`` measures what the bundled card holds: all 27 sourced numbers
    (sizes, degree and training-degree histograms, components, the Louvain block model with its fine level,
    training vertices, bridges and the training vertices near them, assortativity, clustering over the graph and
    over its largest component) equal the shipped file's."""
    g = load_dataset(name)
    derived = derived_card(name, g.num_vertices, g.src, g.dst, g.feature_dim, g.num_classes,
                           (len(g.train_idx), len(g.val_idx), len(g.test_idx)), how=f"measured on {name}",
                           communities="blocks", train_idx=g.train_idx)
    shipped = _numbers(cards.load_card(name))
    assert len(shipped) == 27 and _numbers(derived) == shipped


def test_blocks_need_the_training_vertices_and_unknown_kinds_are_refused() -> None:
    g = load_dataset("cora")
    args = ("x", g.num_vertices, g.src, g.dst, g.feature_dim, g.num_classes, (140, 500, 1000))
    with pytest.raises(ValueError, match="needs train_idx"):
        derived_card(*args, communities="blocks")
    with pytest.raises(ValueError, match="'metis' is not one of labels, louvain, blocks"):
        derived_card(*args, communities="metis")


def test_louvain_levels_split_two_cliques_and_the_first_level_refines_the_last() -> None:
    """Two 6-cliques joined by one edge: the last level is the two cliques; the first level is at least as fine
    (every first-level community inside one last-level community), so its effective number is no smaller."""
    clique = [(i, j) for i in range(6) for j in range(6) if i < j]
    pairs = clique + [(i + 6, j + 6) for i, j in clique] + [(0, 6)]
    src = np.array([a for a, _ in pairs], dtype=np.int64)
    dst = np.array([b for _, b in pairs], dtype=np.int64)
    fine, last = louvain_levels(12, src, dst)
    assert sorted(np.bincount(last).tolist()) == [6, 6] and last[0] != last[6]
    assert len(set(last[:6].tolist())) == 1 and len(set(last[6:].tolist())) == 1
    assert all(len(set(last[fine == c].tolist())) == 1 for c in np.unique(fine))
    assert effective_number(fine) >= effective_number(last) == 2


def test_simple_edges_count_each_undirected_pair_once_without_loops() -> None:
    src = np.array([0, 1, 1, 2, 2, 3], dtype=np.int64)
    dst = np.array([1, 0, 1, 3, 3, 2], dtype=np.int64)  # 0-1 both ways, a loop at 1, 2-3 three times
    a, b = simple_edges(4, src, dst)
    assert sorted(zip(a.tolist(), b.tolist())) == [(0, 1), (2, 3)]


def test_triangles_in_blocks_of_rows_count_as_the_whole_product() -> None:
    """clustering.triangles forms A @ A a few rows at a time (a power-law graph's whole product does not fit):
    the counts equal the whole product's, whatever the block size, and a triangle is one per corner."""
    import scipy.sparse as sp

    from gnnplan.simulator.workload.clustering import _adjacency, triangles
    from gnnplan.simulator.workload.rmat import rmat_edges

    src, dst = rmat_edges(2000, 16_000, seed=3)
    adj = _adjacency(2000, src, dst)
    whole = np.asarray((adj @ adj).multiply(adj).sum(1)).ravel() / 2.0
    assert whole.sum() > 0
    for work in (1.0, 5e3, 1e12):  # one row per block, a few hundred, one block
        np.testing.assert_array_equal(triangles(adj, work), whole)
    tri = sp.csr_matrix(np.array([[0, 1, 1, 0], [1, 0, 1, 0], [1, 1, 0, 1], [0, 0, 1, 0]], dtype=np.float64))
    assert triangles(tri).tolist() == [1.0, 1.0, 1.0, 0.0]
