"""Statistics without the graph: a card's proxy matches the card's degree summary, the scaling rules are exact,
and the card path runs through the simulator once (estimated statistics reported in the result)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from gnnplan.simulator.api import load_context, simulate
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.strategies import neutronstar
from gnnplan.simulator.workload import proxy, proxy_batch, proxy_estimated
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
    spec = proxy.proxy_spec(card)  # drawn from the card's degree histogram, whose zeros are the isolated ones
    assert card.degree.zero_fraction == 0.0144 and card.degree.in_degree_histogram.value[0][0] == 0
    g = load_dataset(spec)
    degrees = g.in_degrees()
    assert g.num_edges == card.loaded_edges  # the edges are the card's, carried by the connected vertices
    assert np.sum(degrees == 0) == 48
    assert len(np.unique(np.concatenate([g.src, g.dst]))) == 3327 - 48


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
    assert est["card"] == "cora" and set(est["statistics"]) == {"dataset_summary", "sample_stats",
                                                                   "inference_block"}
    assert est["proxy"]["num_vertices"] == 2708 and est["proxy"]["vertex_factor"] == 1.0
    blocks = len(load_card("cora").communities.block_sizes.value)
    assert est["proxy"]["communities"] == f"planted from the card: the {blocks} communities of its block model, " \
        f"mixing mu 0.128, the edges between them on 0.2849 of the vertices; {proxy_estimated.BLOCK_MODEL_EFFECT}"
    none = proxy_estimated.estimated("reddit", {})["proxy"]["communities"]
    assert none.startswith("none: the card gives no community") and none.endswith(proxy_estimated.NO_COMMUNITIES_EFFECT)
    assert proxy_estimated.estimated("ogbn-arxiv", {})["proxy"]["communities"] == (  # label classes and homophily only
        f"planted from the card: 40 communities of equal size mixed uniformly, mixing mu 0.345 (no block model); "
        f"{proxy_estimated.MIXING_ONLY_EFFECT}")
    real = simulate(CLUSTER, wl.model_copy(update={"dataset": "cora"}), "dp", knobs).to_json_dict()
    assert "estimated" not in real  # existing JSON keys unchanged for real graphs


def test_a_card_draw_is_the_proxy_at_that_seed() -> None:
    """``card:<name>@K`` loads the proxy drawn with seed K: draw 0 is the default one (same graph, same cache
    entries), another draw is another graph of the same card with its own entries, and a result says its draw."""
    base = proxy.proxy_spec("cora")
    assert proxy.card_proxy("card:cora") == proxy.card_proxy("card:cora@0") == base
    assert proxy.card_proxy("card:cora@5") == base.model_copy(update={"seed": 5})
    assert dataset_key("card:cora@0") == dataset_key("card:cora") != dataset_key("card:cora@5")
    first, other = load_dataset("card:cora"), load_dataset("card:cora@5")
    assert first.num_vertices == other.num_vertices == 2708 and len(first.src) == len(other.src)
    assert not np.array_equal(first.src, other.src)
    np.testing.assert_array_equal(load_dataset("card:cora@0").src, first.src)
    wl = workload_from_dict({"dataset": "card:cora@5", "model": {"arch": "sage", "num_layers": 2, "hidden_dim": 16},
                             "training": {"batch_size": 64, "fanouts": [5, 5]}})
    est = simulate(CLUSTER, wl, "dp", {"partitioner": "random"}).to_json_dict()["estimated"]
    assert est["card"] == "cora" and est["proxy"]["draw"] == 5 and est["proxy"]["name"] == proxy.card_proxy(
        "card:cora@5").name
    with pytest.raises(SpecError, match="names no dataset card"):
        proxy.card_proxy("cora")


def test_simulate_says_which_draw_of_which_card_it_estimated_on(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from gnnplan.autotune.cli import main

    path = tmp_path / "wl.yaml"
    path.write_text("dataset: card:cora@5\nmodel: {arch: sage, num_layers: 2, hidden_dim: 16}\n"
                    "training: {batch_size: 64, fanouts: [5, 5]}\n")
    assert main(["simulate", "--cluster", CLUSTER, "--workload", str(path), "--strategy", "dp"]) == 0
    out = capsys.readouterr().out
    assert "estimated on draw 5 of card cora's proxy (2,708 vertices; --json: estimated)" in out
    assert "proxy communities" in out and "planted from the card: the" in out
    assert main(["simulate", "--cluster", CLUSTER, "--workload", "cora-sage", "--strategy", "dp"]) == 0
    assert "estimated on draw" not in capsys.readouterr().out  # a real graph's statistics are measured


def test_simulate_over_proxy_draws_lists_each_draw_s_epoch_time(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """``simulate --proxy-draws 3`` on ``card:cora@5``: draws 5, 6 and 7, each the epoch time ``simulate`` gives
    on that draw alone; the table prints their range; a real graph has none (one-line error, exit 2)."""
    import json

    from gnnplan.autotune.cli import main

    path = tmp_path / "wl.yaml"
    path.write_text("dataset: card:cora@5\nmodel: {arch: sage, num_layers: 2, hidden_dim: 16}\n"
                    "training: {batch_size: 64, fanouts: [5, 5]}\n")
    argv = ["simulate", "--cluster", CLUSTER, "--workload", str(path), "--strategy", "dp", "--proxy-draws", "3"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    alone = [simulate(CLUSTER, workload_from_dict({**_yaml(path), "dataset": f"card:cora@{k}"}), "dp").epoch_time_s
             for k in (5, 6, 7)]
    assert out["proxy_draws"] == {"draws": [5, 6, 7], "epoch_time_s": alone}
    assert out["epoch_time_s"] == alone[0] and len(set(alone)) == 3  # the draws are different graphs
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "epoch time on single draws 5-7" in text and "median" in text and "pools the draws" not in text
    # a pooled card's headline is no draw's: the table says so rather than naming draw 0
    from gnnplan.autotune.report import simulation_table

    out["estimated"]["pooled"] = {"draws": 15, "how": "medoid"}
    console = Console(width=300, record=True)
    console.print(simulation_table(out))
    pooled = console.export_text()
    assert "estimated on the medoid of draws 0-14 of card cora's proxy (2,708 vertices each;" in pooled
    assert "the epoch time above pools the draws, so it need not lie in a few draws' range" in pooled
    assert main(["simulate", "--cluster", CLUSTER, "--workload", "cora-sage", "--strategy", "dp",
                 "--proxy-draws", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--proxy-draws: needs a dataset card" in err[0]
    assert main([*argv[:-1], "0"]) == 2 and "must be a positive integer" in capsys.readouterr().err


def _yaml(path: Path) -> dict[str, Any]:
    import yaml

    return yaml.safe_load(path.read_text())


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


def _cora_like_graph() -> object:
    """Cora with every degree below 16 (edges of the vertices above dropped), so its card's histogram is exact,
    and every vertex a training vertex (the card's uniform seeds)."""
    from gnnplan.simulator.workload.card_measures import derived_card

    g = load_dataset("cora")
    deg = g.in_degrees()
    keep = (deg[g.src] < 16) & (deg[g.dst] < 16)
    small = dataclasses_replace(g, src=g.src[keep], dst=g.dst[keep], train_idx=np.arange(g.num_vertices))
    card = derived_card("coralow", small.num_vertices, small.src, small.dst, 8, 7, (g.num_vertices, 0, 0))
    return small, card


def dataclasses_replace(obj: object, **changes: object) -> object:
    from dataclasses import replace

    return replace(obj, **changes)  # type: ignore[type-var]


def test_per_batch_rule_is_the_identity_when_the_proxy_is_the_graph() -> None:
    g, card = _cora_like_graph()
    rs = proxy_batch.batch_reach_scale(card, g, [10, 10], 32, num_parts=2, cut=0.05)
    assert np.allclose(rs.src_ratio, 1.0) and np.allclose(rs.edge_ratio, 1.0) and rs.remote_ratio == \
        pytest.approx(1.0)
    st = load_context(CLUSTER, workload_from_dict(
        {"dataset": "cora", "model": {"arch": "sage", "num_layers": 2, "hidden_dim": 16},
         "training": {"mode": "mini-batch", "batch_size": 256, "fanouts": [10, 10]}}), "dp",
        {"partitioner": "metis"})[2].sample
    same = proxy_batch.scale_sample_stats(st, card, g)  # card and graph agree: nothing moves (uniform seeds, exact)
    assert np.allclose(same.num_src_vertices, st.num_src_vertices)
    assert np.allclose(same.hit_fraction, st.hit_fraction) and np.allclose(same.remote_miss_fraction,
                                                                           st.remote_miss_fraction)
    assert np.allclose(same.worker_remote_fraction, st.worker_remote_fraction)  # and no worker's share moves
    assert np.allclose(same.machine_sent_ratio, st.machine_sent_ratio)


def test_per_batch_rule_grows_the_reach_of_a_small_proxy() -> None:
    """A card 20x larger than its proxy's graph (the same degree law): a batch reaches more distinct vertices,
    samples more edges at layer 0 (more distinct frontier vertices), and the split of its inputs still sums
    to 1."""
    g, card = _cora_like_graph()
    big = card.model_copy(update={"num_vertices": card.num_vertices.model_copy(update={"value": 20 * 2708}),
                                  "num_edges": card.num_edges.model_copy(update={"value": 20 * card.num_edges.value})})
    rs = proxy_batch.batch_reach_scale(big, g, [10, 10], 128)
    assert rs.src_ratio[0] > rs.src_ratio[1] > 1.0 and rs.edge_ratio[0] > 1.0
    # the seeds sample the same edges at any size (up to the histogram's 6-digit fractions)
    assert rs.edge_ratio[1] == pytest.approx(1.0, rel=1e-5) and rs.dst_ratio[1] == pytest.approx(1.0)
    st = load_context(CLUSTER, workload_from_dict(
        {"dataset": "cora", "model": {"arch": "sage", "num_layers": 2, "hidden_dim": 16},
         "training": {"mode": "mini-batch", "batch_size": 1024, "fanouts": [10, 10]}}), "dp",
        {"partitioner": "random"})[2].sample
    out = proxy_batch.scale_sample_stats(st, big, g)
    total = np.asarray(out.hit_fraction) + np.asarray(out.local_miss_fraction) + np.asarray(out.remote_miss_fraction)
    assert np.allclose(total, 1.0) and out.num_src_vertices[0] > st.num_src_vertices[0]
    assert out.edge_cut_fraction == st.edge_cut_fraction
    # every worker's share moves as the mean's: the input-weighted mean of the workers' shares stays the mean
    def weighted(stats: Any, field: str) -> np.ndarray:
        return np.average(np.asarray(getattr(stats, field)), axis=0, weights=stats.worker_input_ratio)

    for field, mean in (("worker_remote_fraction", "remote_miss_fraction"), ("worker_hit_fraction", "hit_fraction")):
        measured = weighted(st, field) / np.where(np.asarray(getattr(st, mean)) > 0, getattr(st, mean), 1.0)
        scaled = weighted(out, field) / np.where(np.asarray(getattr(out, mean)) > 0, getattr(out, mean), 1.0)
        assert np.allclose(scaled, measured, rtol=1e-9)


def test_proxy_scales_the_small_components_of_a_card() -> None:
    spec = proxy.proxy_spec("citeseer", 1664)  # half the vertices: half as many components of every size
    card = load_card("citeseer")
    want = {s: round(c * 1664 / 3327) for s, c in card.components.small_sizes.value}
    assert dict(spec.small_components) == {s: c for s, c in want.items() if c}
    least = sum((s - 1) * c for s, c in spec.small_components)
    assert least <= spec.small_component_edges <= card.components.small_edges.value
