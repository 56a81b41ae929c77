"""A card's degree histogram and the proxy drawn from it: the histogram is exact for small degrees, the stratified
degree sequence keeps the mean and the tail's edge mass, and the planted-partition configuration model realises
the sequence (the bundled graphs' cards reproduce their in-degrees exactly)."""

from __future__ import annotations

import numpy as np
import pytest

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.workload import bridges, degree_bins, degseq, reach, small_components, train_split
from gnnplan.simulator.workload.card_measures import derived_card
from gnnplan.simulator.workload.cards import card_from_dict, load_card
from gnnplan.simulator.workload.datasets import load_dataset
from gnnplan.simulator.workload.proxy import proxy_scale, proxy_spec
from gnnplan.simulator.workload.sbm import community_starts


def test_histogram_bins_small_degrees_exactly_and_log_bins_the_tail() -> None:
    deg = np.array([0, 1, 1, 2, 15, 16, 17, 100, 101])
    rows = degree_bins.degree_histogram(deg)
    assert rows[:4] == [[0.0, pytest.approx(1 / 9, rel=1e-5)], [1.0, pytest.approx(2 / 9, rel=1e-5)],
                        [2.0, pytest.approx(1 / 9, rel=1e-5)], [15.0, pytest.approx(1 / 9, rel=1e-5)]]
    assert rows[4] == [16.5, pytest.approx(2 / 9, rel=1e-5)]  # bin [16, 20): 16 and 17
    assert rows[5] == [100.5, pytest.approx(2 / 9, rel=1e-5)]
    assert sum(m * f for m, f in rows) == pytest.approx(deg.mean(), rel=1e-5)


def test_proxy_degrees_keep_the_sequence_at_full_size_and_the_mass_when_smaller() -> None:
    rng = np.random.default_rng(5)
    deg = np.minimum(rng.zipf(2.3, 20_000), 5_000)
    rows = degree_bins.degree_histogram(deg)
    full = degree_bins.proxy_degrees(rows, len(deg), len(deg), np.random.default_rng(0))
    small_bulk = np.sort(deg)[deg.size // 2]
    assert np.sort(full)[deg.size // 2] == small_bulk and abs(int(full.sum()) - int(deg.sum())) <= 0.002 * deg.sum()
    small = degree_bins.proxy_degrees(rows, len(deg), 1_000, np.random.default_rng(0))
    assert len(small) == 1_000 and small.sum() % 2 == 0
    assert small.mean() == pytest.approx(deg.mean(), rel=0.01)
    top = np.sort(deg)[::-1][:20].mean()  # the 20 largest of 20,000 become the proxy's largest of 1,000
    assert small.max() == pytest.approx(top, rel=0.05)


@pytest.mark.parametrize("name", ["cora", "citeseer"])
def test_card_proxy_reproduces_the_bundled_in_degrees(name: str) -> None:
    real = np.sort(load_dataset(name).in_degrees())
    spec = proxy_spec(name)
    assert isinstance(spec, degseq.DegreeSequenceSpec) and spec.num_vertices == len(real)
    got = np.sort(load_dataset(f"card:{name}").in_degrees())
    # one bin per degree below 16: the same counts, up to the few stubs that bring the sum to the card's edges
    low = degree_bins.EXACT_DEGREES
    diff = np.abs(np.bincount(got[got < low], minlength=low) - np.bincount(real[real < low], minlength=low))
    assert diff.sum() <= 10  # Cora: 4 stubs off the histogram's rounded sum, CiteSeer: 4
    assert got.sum() == pytest.approx(real.sum(), rel=1e-3)
    assert real.max() - 1 <= got.max() <= real.max()  # the parity fix may take one stub off the largest
    assert proxy_scale(name).proxy_edges == got.sum() == load_card(name).loaded_edges


def test_planted_configuration_model_is_simple_symmetric_and_mixes_as_asked() -> None:
    deg = degree_bins.proxy_degrees(load_card("cora").degree.in_degree_histogram.value, 2708, 2708,
                               np.random.default_rng(1))
    starts = community_starts(2708, 8)
    src, dst = degseq.planted_configuration_edges(deg, starts, mu=0.2, seed=3)
    assert np.array_equal(np.bincount(dst, minlength=2708), deg)  # every stub paired
    assert not np.any(src == dst) and len(np.unique(src * 2708 + dst)) == len(src)
    assert np.array_equal(np.sort(src * 2708 + dst), np.sort(dst * 2708 + src))
    comm = np.searchsorted(starts, np.arange(2708), side="right") - 1
    assert np.mean(comm[src] != comm[dst]) == pytest.approx(0.2, abs=0.02)
    again = degseq.planted_configuration_edges(deg, starts, mu=0.2, seed=3)
    assert np.array_equal(again[0], src) and np.array_equal(again[1], dst)


def test_derived_card_carries_a_valid_histogram_and_a_bad_one_is_one_line() -> None:
    g = load_dataset("cora")
    card = derived_card("c", g.num_vertices, g.src, g.dst, 8, 7, (10, 10, 10))
    assert card.degree.in_degree_histogram.value == [tuple(r) for r in degree_bins.degree_histogram(g.in_degrees())]
    data = card.model_dump()
    data["degree"]["in_degree_histogram"]["value"] = [[3.0, 0.5], [1.0, 0.5]]  # not in increasing degree
    with pytest.raises(SpecError, match="in_degree_histogram") as exc:
        card_from_dict(data)
    assert "\n" not in str(exc.value)


def test_batch_reach_is_the_occupancy_count_of_size_biased_draws() -> None:
    """One block, fanout above every degree: each seed samples all its edges, whose other ends are size-biased
    draws; the expected distinct vertices reached (Monte Carlo over 4,000 batches) is the closed form."""
    rng = np.random.default_rng(0)
    deg = np.minimum(rng.zipf(2.2, 3_000), 200).astype(np.float64)
    values, counts = np.unique(deg, return_counts=True)
    r = reach.batch_reach(values, counts.astype(float), counts / counts.sum(), 50, [1000])
    k = r.num_edges[0]
    assert r.num_dst[0] == pytest.approx(50) and k == pytest.approx(50 * deg.mean(), rel=1e-12)
    p = deg / deg.sum()
    seeds_in = 50 / len(deg)  # every vertex is a seed with this probability
    draws = rng.choice(len(deg), size=(4_000, int(round(k))), p=p)
    seed_hit = rng.random((4_000, len(deg))) < seeds_in
    hit = seed_hit.copy()
    np.put_along_axis(hit, draws, True, axis=1)
    assert hit.sum(1).mean() == pytest.approx(r.num_src[0], rel=0.01)
    # the closed form itself: sum over vertices of 1 - (1 - P(seed)) (1 - p_u)^k
    assert r.num_src[0] == pytest.approx(np.sum(1 - (1 - seeds_in) * (1 - p) ** k), rel=1e-9)


def test_batch_reach_random_partition_is_the_unpartitioned_graph_and_a_tight_one_stays_home() -> None:
    values, counts = np.array([1.0, 2, 5, 40]), np.array([5000.0, 3000, 1500, 50])
    share = counts / counts.sum()
    one = reach.batch_reach(values, counts, share, 64, [10, 5])
    rand = reach.batch_reach(values, counts, share, 64, [10, 5], num_parts=4, cut=0.75)
    # equal up to the Poisson approximation (1 - 4p)^(k/4) ~ (1 - p)^k of the four parts' escape probabilities
    assert np.allclose(one.num_src, rand.num_src, rtol=1e-3) and np.allclose(one.num_edges, rand.num_edges,
                                                                               rtol=1e-3)
    assert rand.other_inputs.sum() / rand.num_src[0] == pytest.approx(0.75 * (1 - 64 / rand.num_src[0]), rel=0.02)
    home = reach.batch_reach(values, counts, share, 64, [10, 5], num_parts=4, cut=0.0)
    assert home.other_inputs.sum() == 0.0 and home.num_src[0] < one.num_src[0]  # a quarter of the graph: overlap
    with pytest.raises(ValueError, match="fanouts"):
        reach.batch_reach(values, counts, share, 64, [0])


def test_small_components_have_the_sizes_and_edges_asked_for() -> None:
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    rows = [(1, 3), (2, 5), (4, 2), (9, 1)]
    a, b, deg = small_components.small_component_edges(rows, 4 + 6 + 8 + 5, np.random.default_rng(2))
    n = 3 + 10 + 8 + 9
    assert len(deg) == n and len(a) == 23 and np.all(a < b) and len(set(zip(a, b))) == 23
    g = sp.coo_matrix((np.ones(len(a)), (a, b)), shape=(n, n))
    _, label = connected_components(g, directed=False)
    assert sorted(np.bincount(label).tolist()) == [1, 1, 1, 2, 2, 2, 2, 2, 4, 4, 9]
    assert np.array_equal(deg, np.bincount(np.concatenate([a, b]), minlength=n))
    with pytest.raises(ValueError, match="num_edges"):
        small_components.small_component_edges(rows, 4 + 6 + 8 - 1, np.random.default_rng(2))


def test_citeseer_proxy_plants_its_small_components() -> None:
    card = load_card("citeseer")
    g = load_dataset("card:citeseer")
    rows, _, largest = derived_components(g)
    outside = 1.0 - largest.mean()
    assert outside == pytest.approx(card.components.num_small_vertices / card.num_vertices.value, abs=0.03)
    have = dict(rows)
    assert all(have.get(size, 0) >= count for size, count in card.components.small_sizes.value)  # all planted
    assert g.num_edges == card.loaded_edges  # the largest component takes the remaining stubs


def derived_components(g: object) -> tuple[list[list[int]], int, np.ndarray]:
    from gnnplan.simulator.workload.card_measures import component_summary

    return component_summary(g.num_vertices, g.src, g.dst)  # type: ignore[attr-defined]


def test_components_that_cannot_hold_their_edges_are_one_line() -> None:
    data = load_card("citeseer").model_dump()
    data["components"]["small_edges"]["value"] = 10
    with pytest.raises(SpecError, match="small_edges") as exc:
        card_from_dict(data)
    assert "\n" not in str(exc.value)


def test_block_model_puts_inter_community_edges_where_the_card_does() -> None:
    """Cora's card: the Louvain block model of its largest component (sums to that component's edges); with the
    degrees dealt to the communities by their card degree mass, the proxy plants the card's block edge counts
    (microcanonical DC-SBM, simulator/workload/blockmodel.py): the card's 649 edges between communities scaled to
    this sequence's sum (the whole graph's histogram on the largest component's vertices: 620.5), 634 planted
    (the few stubs a hub could not pair inside go across), overlap of the pair distributions > 0.93, where
    uniform mixing would give 0.53 (and the Binomial split with a random deal of the degrees gave ~0.7)."""
    from gnnplan.simulator.workload import blockmodel

    card = load_card("cora")
    sizes, rows = card.communities.block_sizes.value, card.communities.block_edges.value
    assert sum(sizes) == card.num_vertices.value - card.components.num_small_vertices
    assert sum(m for _, _, m in rows) == card.num_edges.value // 2 - card.components.small_edges.value
    k = len(sizes)
    m = degseq.block_matrix(rows, k)
    starts = degseq.block_starts(sizes, sum(sizes))
    assert np.array_equal(np.diff(starts), sizes)
    rng = np.random.default_rng(0)
    deg = degree_bins.proxy_degrees(card.degree.in_degree_histogram.value, 2708, sum(sizes), rng)
    deg = blockmodel.assign_block_degrees(deg, starts, blockmodel.block_degree_mass(m), rng,
                                          blockmodel.block_inside_share(m))
    comm = np.searchsorted(starts, np.arange(len(deg)), side="right") - 1
    mass = np.bincount(comm, weights=deg, minlength=k)
    assert np.allclose(mass / mass.sum(), blockmodel.block_degree_mass(m) / blockmodel.block_degree_mass(m).sum(),
                       atol=0.002)  # every community its card share of the edge ends
    src, dst = degseq.planted_configuration_edges(deg, starts, 0.128, seed=1, block_edges=m)
    assert np.array_equal(np.bincount(dst, minlength=len(deg)), deg)  # every stub placed, simple graph
    assert len(np.unique(src * len(deg) + dst)) == len(src) and not np.any(src == dst)
    inter = comm[src] != comm[dst]
    card_inter = (m.sum() - np.trace(m)) / 2 * deg.sum() / blockmodel.block_degree_mass(m).sum()  # at this sum
    assert card_inter <= inter.sum() / 2 <= 1.03 * card_inter  # 634 of 620.5
    got = np.zeros((k, k))
    np.add.at(got, (comm[src[inter]], comm[dst[inter]]), 1.0)
    want = m - np.diag(np.diag(m))
    overlap = np.minimum(got / got.sum(), want / want.sum()).sum()
    uniform = np.outer(sizes, sizes) * (1 - np.eye(k))
    assert overlap > 0.93 and np.minimum(uniform / uniform.sum(), want / want.sum()).sum() < 0.55


def _cora_blocks() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cora's card block model on a degree sequence dealt to its communities: (degrees, starts, block matrix)."""
    from gnnplan.simulator.workload import blockmodel

    card = load_card("cora")
    sizes, rows = card.communities.block_sizes.value, card.communities.block_edges.value
    m = degseq.block_matrix(rows, len(sizes))
    starts = degseq.block_starts(sizes, sum(sizes))
    rng = np.random.default_rng(0)
    deg = degree_bins.proxy_degrees(card.degree.in_degree_histogram.value, 2708, sum(sizes), rng)
    deg = blockmodel.assign_block_degrees(deg, starts, blockmodel.block_degree_mass(m), rng,
                                          blockmodel.block_inside_share(m))
    return deg, starts, m


def _holders(labels: np.ndarray, deg: np.ndarray, starts: np.ndarray) -> float:
    owner = np.repeat(np.arange(len(deg)), deg)
    comm = np.searchsorted(starts, owner, side="right") - 1
    held = np.zeros(len(deg), dtype=bool)
    held[owner[labels != comm]] = True
    return float(held.mean())


def test_leaving_stubs_concentrate_on_the_cards_share_of_vertices_with_the_block_counts_kept() -> None:
    """stub_labels.concentrated_labels: the same stubs towards every block as the random deal (the block model stays
    exact), on fewer vertices: Cora's card says 0.285 of its vertices hold an edge to another community, where a
    random deal of the same stubs reaches ~0.36; a share above the random deal's is the random deal."""
    from gnnplan.simulator.workload import stub_labels

    deg, starts, m = _cora_blocks()
    counts = m + np.diag(np.diag(m))
    k = len(starts) - 1
    per_block = np.add.reduceat(deg, starts[:-1])
    plain = stub_labels.random_labels(counts, per_block, np.random.default_rng(1))
    owner_block = np.repeat(np.searchsorted(starts, np.arange(len(deg)), side="right") - 1, deg)

    def table(labels: np.ndarray) -> np.ndarray:
        out = np.zeros((k, k), dtype=np.int64)
        np.add.at(out, (owner_block, labels), 1)
        return out

    random_share = _holders(plain, deg, starts)
    assert random_share > 0.34
    for target in (0.285, 0.2):
        labels = stub_labels.concentrated_labels(counts, deg, starts, target, np.random.default_rng(1))
        assert np.array_equal(table(labels), table(plain))  # every block sends the same stubs to every block
        assert abs(_holders(labels, deg, starts) - target) < 0.01
    labels = stub_labels.concentrated_labels(counts, deg, starts, 0.9, np.random.default_rng(1))
    assert np.array_equal(table(labels), table(plain)) and _holders(labels, deg, starts) == pytest.approx(
        random_share, abs=0.02)


def test_a_card_proxy_meets_its_bridge_fraction_after_shaping() -> None:
    """The shaping after the planting (structure.shape: connectivity, assortativity, triangles) spreads the edges
    between communities over more vertices; the proxy is rewired from a lower planted share until the graph meets
    the card's (degseq._meeting_bridge_fraction). Without the card's share the proxy holds them on ~0.36."""
    spec = proxy_spec("cora")
    n_small = sum(size * count for size, count in spec.small_components)
    community = degseq.range_labels(degseq.block_starts(spec.block_sizes, spec.num_vertices - n_small),
                                    spec.num_vertices)
    src, dst = degseq.degree_sequence_edges(spec)
    assert abs(bridges.bridge_share(src, dst, community) - spec.bridge_fraction) <= degseq.BRIDGE_TOLERANCE
    plain = degseq.degree_sequence_edges(spec.model_copy(update={"bridge_fraction": None}))
    assert bridges.bridge_share(*plain, community) > spec.bridge_fraction + 0.02


def test_near_bridge_vertices_are_the_bridges_and_their_neighbours_inside_communities() -> None:
    """A path 0-1-2-3-4-5 whose communities are {0, 1, 2} and {3, 4}, 5 in none: the bridges are 2 and 3 (the
    edge 4-5 makes none), one hop from them 1 and 4 as well; 0 is two hops away and 5 is outside."""
    src, dst = np.array([0, 1, 2, 3, 4]), np.array([1, 2, 3, 4, 5])
    community = np.array([0, 0, 0, 1, 1, -1])
    assert bridges.bridge_vertices(src, dst, community).tolist() == [False, False, True, True, False, False]
    assert bridges.near_bridge_vertices(src, dst, community).tolist() == [False, True, True, True, True, False]


def test_near_tilt_gives_the_expected_share_and_one_when_it_cannot_tilt() -> None:
    """Two communities of 4 vertices, 1 and 2 of them near a boundary, equal weights, 2 draws each: untilted the
    expected share near is (1/4 + 2/4) / 2 = 0.375; the tilt beta solving (beta/(beta+3) + 2 beta/(2 beta+2)) / 2
    = 0.6 makes it 0.6, and a community with no vertex on one side leaves nothing to tilt."""
    weight, near = np.ones(8), np.array([1, 0, 0, 0, 1, 1, 0, 0], dtype=bool)
    members = [np.arange(4), np.arange(4, 8)]
    beta = train_split.near_tilt(weight, near, members, np.array([2, 2]), 0.6)
    assert (beta / (beta + 3) + 2 * beta / (2 * beta + 2)) / 2 == pytest.approx(0.6, abs=1e-9)
    assert train_split.near_tilt(weight, near, members, np.array([2, 2]), 0.375) == pytest.approx(1.0, abs=1e-9)
    assert train_split.near_tilt(weight, np.ones(8, dtype=bool), members, np.array([2, 2]), 0.2) == 1.0


def test_citeseer_proxy_puts_its_training_vertices_as_near_the_boundaries_as_the_card() -> None:
    """CiteSeer's Planetoid training vertices sit nearer its communities' boundaries (0.675 of those inside
    them within one hop of a bridge) than degree-matched draws of its proxy do (0.53, 0.48); the tilted draw, redrawn
    aiming past the target while a draw without replacement falls short, comes within 0.015 of the card on draws 0
    and 1, with the training vertices per community and the validation and test sizes as before."""
    from gnnplan.simulator.workload.blockmodel import proxy_block_of

    for draw in (0, 1):
        spec = proxy_spec("citeseer", seed=draw)
        g = load_dataset(spec)
        block = proxy_block_of(spec)
        near = bridges.near_bridge_vertices(g.src, g.dst, block)
        inside = g.train_idx[block[g.train_idx] >= 0]
        assert abs(float(near[inside].mean()) - spec.train_near_bridge_fraction) < 0.015
        plain = load_dataset(spec.model_copy(update={"train_near_bridge_fraction": None}))
        assert np.array_equal(g.src, plain.src) and np.array_equal(g.dst, plain.dst)  # only the split differs
        assert float(near[plain.train_idx[block[plain.train_idx] >= 0]].mean()) < spec.train_near_bridge_fraction - 0.08
        assert np.array_equal(np.bincount(block[g.train_idx] + 1), np.bincount(block[plain.train_idx] + 1))
        assert (len(g.val_idx), len(g.test_idx)) == (len(plain.val_idx), len(plain.test_idx))


def test_edge_factor_counts_the_edges_the_configuration_model_realises() -> None:
    """Cora's hubs (up to 168 in-edges) in a 300-vertex proxy leave 4 edge ends without a distinct partner: the
    proxy's edge count, and so the factor its edge counts are scaled by, is the generated graph's, not the degree
    sum."""
    g = load_dataset("cora")
    card = derived_card("c", g.num_vertices, g.src, g.dst, 8, 7, (10, 10, 10))
    spec = proxy_spec(card, num_vertices=300)
    degree_sum = 2 * round(spec.num_vertices * spec.mean_degree / 2)
    realised = load_dataset(spec).num_edges
    assert (degree_sum, realised) == (1170, 1166)
    scale = proxy_scale(card, spec)
    assert scale.proxy_edges == realised
    assert scale.edge_factor == card.loaded_edges / 1166


def test_hierarchical_mixing_spreads_the_leaving_ends_evenly_over_the_levels() -> None:
    """8 communities: 3 levels of a binary hierarchy, each taking mu / 3 of the edge ends; a pair of communities
    meets at the level of the highest bit in which their numbers differ."""
    comm = np.repeat(np.arange(8), 4)
    levels = degseq.hierarchy_levels(comm, 0.3)
    assert [share for _, share in levels] == pytest.approx([0.3, 0.2, 0.1])
    for level, (group, _) in enumerate(levels):
        np.testing.assert_array_equal(group, comm >> level)
    deg = degree_bins.proxy_degrees(load_card("cora").degree.in_degree_histogram.value, 2708, 2708,
                                    np.random.default_rng(1))
    starts = community_starts(2708, 8)
    src, dst = degseq.planted_configuration_edges(deg, starts, mu=0.3, seed=3, hierarchical=True)
    assert not np.any(src == dst) and len(np.unique(src * 2708 + dst)) == len(src)
    assert np.array_equal(np.sort(src * 2708 + dst), np.sort(dst * 2708 + src))
    c = np.searchsorted(starts, np.arange(2708), side="right") - 1
    apart = c[src] ^ c[dst]
    meet = np.where(apart > 0, np.floor(np.log2(np.maximum(apart, 1))).astype(np.int64) + 1, 0)
    share = np.bincount(meet, minlength=4) / len(src)
    assert share[0] == pytest.approx(0.7, abs=0.02)
    assert share[1:] == pytest.approx([0.1, 0.1, 0.1], abs=0.02)
    flat = degseq.planted_configuration_edges(deg, starts, mu=0.3, seed=3)
    flat_apart = c[flat[0]] ^ c[flat[1]]  # uniform over the 7 other communities: 1, 2 and 4 of them per level
    flat_meet = np.bincount(np.floor(np.log2(np.maximum(flat_apart, 1))).astype(np.int64)[flat_apart > 0] + 1,
                            minlength=4) / len(flat[0])
    assert flat_meet[1:] == pytest.approx([0.3 / 7, 0.6 / 7, 1.2 / 7], abs=0.02)
