"""Statistics without the graph: a card's proxy matches the card's degree summary, the scaling rules are exact,
and the card path runs through the simulator once (estimated statistics reported in the result)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from gnnplan.simulator.api import load_context, simulate
from gnnplan.simulator.strategies import neutronstar
from gnnplan.simulator.workload import proxy
from gnnplan.simulator.workload.cards import load_card
from gnnplan.simulator.workload.datasets import dataset_key, load_dataset
from gnnplan.simulator.workload.spec import workload_from_dict

CLUSTER = "2x4-a100-nvlink3-200gbib"


@pytest.fixture
def small_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Proxies of 3,000 vertices (the per-process caches of card scales and keys emptied around the test)."""
    monkeypatch.setattr(proxy, "DEFAULT_PROXY_VERTICES", 3000)
    proxy.proxy_key.cache_clear()
    proxy._named_scale.cache_clear()
    yield
    proxy.proxy_key.cache_clear()
    proxy._named_scale.cache_clear()


def test_papers100m_proxy_is_degree_matched() -> None:
    card = load_card("ogbn-papers100M")
    spec = proxy.proxy_spec(card)
    assert spec.num_vertices == proxy.DEFAULT_PROXY_VERTICES and spec.permute_ids
    assert spec.mean_degree == pytest.approx(1_615_685_872 / 111_059_956)
    assert spec.degree_exponent == card.degree.exponent.value
    assert spec.mean_degree < spec.max_degree <= spec.num_vertices / 2
    assert spec.train_fraction == proxy.PROXY_MIN_TRAIN_FRACTION  # 1.1% published, raised for full batches
    scale = proxy.proxy_scale("ogbn-papers100M")
    assert scale.vertex_factor == pytest.approx(111_059_956 / 100_000)
    assert scale.edge_factor == pytest.approx(1_615_685_872 / (2 * round(100_000 * spec.mean_degree / 2)))


def test_proxy_max_degree_is_the_quantile_of_the_card_law() -> None:
    card = load_card("livejournal")  # published maximum in-degree 13,905
    assert proxy.card_max_degree(card) == 13905
    at_full = proxy.proxy_max_degree(card, card.num_vertices.value, 1)
    smaller = proxy.proxy_max_degree(card, 10_000, 1)
    assert at_full == 13905 and card.mean_in_degree * 1.5 <= smaller < 13905


def test_small_card_proxy_has_the_card_sizes() -> None:
    card = load_card("cora")
    g = load_dataset("card:cora")
    assert g.num_vertices == card.num_vertices.value and g.num_edges == card.loaded_edges
    assert not g.features_loaded and g.feature_dim == card.feature_dim.value
    assert dataset_key("card:cora").startswith("card-cora-")


def test_isolated_vertices_of_the_card_are_planted() -> None:
    card = load_card("citeseer")  # 48 of 3,327 vertices without edges
    spec = proxy.proxy_spec(card)
    assert spec.isolated_fraction == card.degree.zero_fraction == 0.0144
    g = load_dataset(spec)
    degrees = g.in_degrees()
    assert g.num_edges == card.loaded_edges  # the edges are the card's, carried by the connected vertices
    assert np.mean(degrees == 0) >= spec.isolated_fraction
    assert len(np.unique(np.concatenate([g.src, g.dst]))) <= spec.connected_vertices


@dataclass(frozen=True)
class _Counts:
    vertices: int
    per_owner: tuple[tuple[int, ...], ...]
    edges: float
    sizes: np.ndarray
    fraction: float


def test_scale_counts_is_exact() -> None:
    scale = proxy.ProxyScale("x", num_vertices=1000, num_edges=9000, proxy_vertices=100, proxy_edges=1000)
    c = _Counts(7, ((1, 2), (3, 4)), 10.0, np.array([1, 2], dtype=np.int64), 0.25)
    out = proxy.scale_counts(c, scale, ("vertices", "per_owner", "sizes"), ("edges",))
    assert out.vertices == 70 and out.per_owner == ((10, 20), (30, 40)) and out.edges == 90.0
    assert out.sizes.tolist() == [10, 20] and out.sizes.dtype == np.int64 and out.fraction == 0.25
    with pytest.raises(TypeError, match="no field 'nope'"):
        proxy.scale_counts(c, scale, ("nope",))
    assert proxy.for_card("cora", c, ("vertices",)) is c  # a real graph: unchanged


def test_card_path_reports_what_was_estimated() -> None:
    wl = workload_from_dict({"dataset": "card:cora", "model": {"arch": "sage", "num_layers": 2, "hidden_dim": 16},
                             "training": {"batch_size": 64, "fanouts": [5, 5]}})
    knobs = {"partitioner": "random"}
    result = simulate(CLUSTER, wl, "dp", knobs)
    est = result.to_json_dict()["estimated"]
    assert est["card"] == "cora" and set(est["statistics"]) == {"dataset_summary", "sample_stats"}
    assert est["proxy"]["num_vertices"] == 2708 and est["proxy"]["vertex_factor"] == 1.0
    real = simulate(CLUSTER, wl.model_copy(update={"dataset": "cora"}), "dp", knobs).to_json_dict()
    assert "estimated" not in real  # existing JSON keys unchanged for real graphs


def test_full_graph_counts_scale_to_the_card(small_proxies: None) -> None:
    card = load_card("ogbn-arxiv")
    wl = workload_from_dict({"dataset": "ogbn-arxiv", "model": {"arch": "sage", "num_layers": 2, "hidden_dim": 16},
                             "training": {"mode": "full-graph"}})
    kn = neutronstar.Knobs(mode="depcomm", partitioner="chunk")
    _, _, ctx = load_context(CLUSTER, wl, "neutronstar", kn)
    assert set(ctx.estimated["statistics"]) == {"dataset_summary", "dependency_counts"}
    counts = neutronstar.dependency_counts(ctx, kn)
    scale = proxy.proxy_scale("ogbn-arxiv")
    assert scale.proxy_vertices == 3000
    # every vertex and every in-edge is owned once: the scaled sums are the card's sizes up to per-worker rounding
    assert abs(sum(c.num_owned for c in counts) - card.num_vertices.value) <= len(counts)
    assert abs(sum(c.num_owned_edges for c in counts) - card.loaded_edges) <= len(counts)
    remote = sum(c.num_remote for c in counts)
    assert 0 < remote <= 8 * card.num_vertices.value
