"""Dataset cards: every shipped card is valid and sourced, the bundled graphs' cards match their files, card names
resolve as workload datasets, and the degree estimators recover known exponents."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.io import read_yaml
from gnnplan.simulator.workload import card_measures, cards
from gnnplan.simulator.workload.assortativity import assortativity
from gnnplan.simulator.workload.clustering import average_clustering
from gnnplan.simulator.workload.datasets import load_dataset, resolve_dataset
from gnnplan.simulator.workload.graphstats import dataset_summary
from gnnplan.simulator.workload.sbm import expected_degrees
from gnnplan.simulator.workload.spec import workload_from_dict

REQUIRED = ("ogbn-arxiv", "ogbn-products", "ogbn-papers100M", "reddit", "com-orkut", "livejournal", "friendster",
            "it-2004", "web-google", "pokec", "igb-medium", "igb-large", "cora", "citeseer")


def test_required_cards_are_shipped_and_valid() -> None:
    names = cards.card_names()
    assert set(REQUIRED) <= set(names)
    for name in names:
        card = cards.load_card(name)
        assert card.name == name
        assert card.loaded_edges >= card.num_edges.value
        assert sum(p.value for p in (card.split.train, card.split.valid, card.split.test)) <= card.num_vertices.value


def _numbers_without_source(node: object, path: str = "") -> list[str]:
    """Paths of numbers in a card's YAML that are not the ``value`` of a ``{value, source}`` mapping."""
    bad = []
    if isinstance(node, dict):
        sourced = "value" in node and isinstance(node.get("source"), str) and len(node["source"]) >= 3
        for key, child in node.items():
            if key == "value" and sourced:
                continue
            bad += _numbers_without_source(child, f"{path}.{key}")
    elif isinstance(node, list):
        for i, child in enumerate(node):
            bad += _numbers_without_source(child, f"{path}[{i}]")
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        bad.append(path)
    return bad


@pytest.mark.parametrize("name", REQUIRED)
def test_every_number_has_a_source(name: str) -> None:
    data = read_yaml(cards.CARD_DIR / f"{name}.yaml", "card")
    assert _numbers_without_source(data) == []


@pytest.mark.parametrize("name", ["cora", "citeseer"])
def test_bundled_graph_cards_match_the_files(name: str) -> None:
    card, g = cards.load_card(name), load_dataset(name)
    assert card.num_vertices.value == g.num_vertices
    assert card.loaded_edges == g.num_edges
    assert card.feature_dim.value == g.feature_dim and card.num_classes.value == g.num_classes
    assert (card.split.train.value, card.split.valid.value, card.split.test.value) == \
        (len(g.train_idx), len(g.val_idx), len(g.test_idx))
    degrees = g.in_degrees()
    assert card.degree.max_in_degree.value == degrees.max()
    assert card.degree.exponent.value == round(card_measures.moment_exponent(degrees[degrees > 0]), 3)
    assert card.degree.zero_fraction == round(float(np.mean(degrees == 0)), 4)
    rows, small_edges, _ = card_measures.component_summary(g.num_vertices, g.src, g.dst)
    assert (card.components.small_sizes.value, card.components.small_edges.value) == \
        ([tuple(r) for r in rows], small_edges)
    largest = card_measures.largest_component(g.num_vertices, g.src, g.dst)
    k, mu = card_measures.louvain_communities(*largest)  # the communities of the largest component
    assert (card.communities.num_communities.value, card.communities.mu.value) == (k, round(mu, 4))
    assert card.communities.block_train.value == card_measures.louvain_train_counts(g.num_vertices, g.src, g.dst,
                                                                                   g.train_idx)
    assert card.communities.bridge_fraction.value == round(card_measures.louvain_bridge_fraction(
        g.num_vertices, g.src, g.dst), 4)
    assert card.communities.train_near_bridge_fraction.value == round(
        card_measures.louvain_train_near_bridge_fraction(g.num_vertices, g.src, g.dst, g.train_idx), 4)
    assert card.degree.assortativity.value == round(assortativity(g.num_vertices, g.src, g.dst), 4)
    assert card.clustering.average_clustering.value == round(average_clustering(g.num_vertices, g.src, g.dst), 4)
    assert card.clustering.largest_component.value == round(average_clustering(*largest), 4)


def test_published_sizes_of_papers100m() -> None:
    card = cards.load_card("ogbn-papers100M")
    assert (card.num_vertices.value, card.num_edges.value, card.feature_dim.value, card.num_classes.value) == \
        (111_059_956, 1_615_685_872, 128, 172)
    assert card.edge_direction.value == "directed" and card.loaded_edges == 1_615_685_872
    products = cards.load_card("ogbn-products")
    assert products.edge_direction.value == "undirected" and products.loaded_edges == 2 * 61_859_140


def test_card_names_resolve_as_datasets() -> None:
    assert cards.card_name("cora") is None  # the bundled real graph
    assert cards.card_name("card:cora") == "cora"
    assert cards.card_name("ogbn-papers100M") == "ogbn-papers100M"
    assert cards.card_name("no-such-graph") is None
    assert resolve_dataset("ogbn-papers100M") == "ogbn-papers100M"
    wl = workload_from_dict({"dataset": "ogbn-papers100M", "model": {"arch": "sage", "num_layers": 2,
                                                                      "hidden_dim": 8}})
    assert wl.dataset == "ogbn-papers100M"
    with pytest.raises(SpecError, match="unknown card 'nope'; allowed: .*ogbn-papers100M"):
        resolve_dataset("card:nope")
    with pytest.raises(SpecError, match="neither a preset .* a card"):
        resolve_dataset("no-such-graph")


def test_a_draw_suffix_names_the_card_and_its_proxy_draw() -> None:
    assert (cards.card_name("card:cora@3"), cards.card_draw("card:cora@3")) == ("cora", 3)
    assert (cards.card_name("ogbn-arxiv@12"), cards.card_draw("ogbn-arxiv@12")) == ("ogbn-arxiv", 12)
    assert (cards.card_name("card:ogbn-arxiv"), cards.card_draw("card:ogbn-arxiv")) == ("ogbn-arxiv", None)
    assert cards.card_name("cora@3") is None and cards.card_draw("cora@3") is None  # the real graph has no draws
    assert cards.card_draw("cora") is None and cards.card_name("no-such-graph@1") is None
    assert resolve_dataset("card:ogbn-arxiv@2") == "card:ogbn-arxiv@2"
    for bad in ("card:cora@x", "card:cora@-1", "ogbn-arxiv@", "card:cora@1.5", "card:cora@1@2", "card:cora@٣",
                "card:cora@4294967296"):  # the last: a seed past numpy's range, a pydantic dump before 2026-12-01
        with pytest.raises(SpecError, match=r"^workload.dataset: .*: the proxy draw after '@' must be an integer "
                                            r"from 0 to 2\*\*32 - 1, the proxy's seed \(card:<name>@<K>\), got "):
            resolve_dataset(bad)
    assert cards.card_draw("card:cora@4294967295") == 2**32 - 1
    with pytest.raises(SpecError, match="unknown card 'nope'"):
        resolve_dataset("card:nope@1")


def test_summary_of_a_card_is_its_published_sizes_without_loading() -> None:
    s = dataset_summary("ogbn-papers100M")
    assert (s.num_vertices, s.num_edges, s.feature_dim, s.num_classes, s.num_train, s.num_val, s.num_test) == \
        (111_059_956, 1_615_685_872, 128, 172, 1_207_179, 125_265, 214_338)


def test_an_invalid_card_names_the_field(tmp_path: Path) -> None:
    data = read_yaml(cards.CARD_DIR / "cora.yaml", "card")
    data["split"]["train"]["value"] = 5000
    with pytest.raises(SpecError, match=r"^card x: split: train >= 1.*got \(5000, 500, 1000\)"):
        cards.card_from_dict(data, where="card x")
    data = read_yaml(cards.CARD_DIR / "cora.yaml", "card")
    data["num_vertices"]["source"] = ""
    with pytest.raises(SpecError, match="num_vertices.source"):
        cards.card_from_dict(data, where="card x")
    data = read_yaml(cards.CARD_DIR / "cora.yaml", "card")
    for k in ("block_sizes", "block_edges", "block_train"):
        del data["communities"][k]
    del data["communities"]["train_near_bridge_fraction"]
    with pytest.raises(SpecError, match="bridge_fraction needs block_sizes") as exc:
        cards.card_from_dict(data, where="card x")
    assert "\n" not in str(exc.value)
    data = read_yaml(cards.CARD_DIR / "citeseer.yaml", "card")
    del data["communities"]["block_train"]
    with pytest.raises(SpecError, match=r"train_near_bridge_fraction needs block_train and lies in \[0, 1\]"):
        cards.card_from_dict(data, where="card x")


def test_tail_exponent_recovers_a_discrete_power_law() -> None:
    rng = np.random.default_rng(0)
    degrees = np.floor(rng.pareto(1.5, 20000) + 1).astype(np.int64) * 3  # P(d) ~ d^-2.5 above 3
    gamma, d_min = card_measures.tail_exponent(degrees)
    assert abs(gamma - 2.5) < 0.1 and d_min >= 3


def test_moment_exponent_recovers_the_generating_law() -> None:
    rng = np.random.default_rng(1)
    theta = expected_degrees(50000, 8.0, 2.7, 400.0, rng)
    degrees = rng.poisson(theta)
    assert abs(card_measures.moment_exponent(degrees, 400.0) - 2.7) < 0.05


def test_a_card_file_is_parsed_once_per_version_and_each_load_is_its_own_card(monkeypatch: pytest.MonkeyPatch
                                                                              ) -> None:
    """A study loads its card in every trial: the YAML is parsed once per process and file version
    (``cards._card_mapping``), and each :func:`cards.load_card` still returns a freshly validated card, so a caller
    changing one cannot change the next."""
    calls: list[Path] = []

    def counting(path: str | Path, what: str) -> dict:  # type: ignore[type-arg]
        calls.append(Path(path))
        return read_yaml(path, what)

    cards._card_mapping.cache_clear()
    monkeypatch.setattr(cards, "read_yaml", counting)
    first, second = cards.load_card("cora"), cards.load_card("cora")
    assert calls == [cards.CARD_DIR / "cora.yaml"]
    assert first == second and first is not second
    cards.load_card("citeseer")
    assert len(calls) == 2


def test_a_card_written_to_the_users_folder_is_a_dataset_and_reads_back_as_written(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A card measured on a graph (``card_measures.derived_card``) and written with :func:`cards.write_card` lands
    in ``$GNNPLAN_HOME/cards``, is listed, loads back equal, and is simulated from its proxy like a shipped card;
    a shipped card round-trips too (block model, components and all)."""
    from gnnplan.simulator.api import simulate
    from gnnplan.simulator.hardware.spec import load_cluster

    monkeypatch.setenv("GNNPLAN_HOME", str(tmp_path / "home"))
    g = load_dataset("cora")
    card = card_measures.derived_card("user-cora-copy", g.num_vertices, g.src, g.dst, g.feature_dim,
                                      g.num_classes, (len(g.train_idx), len(g.val_idx), len(g.test_idx)),
                                      labels=g.labels, communities="labels")
    path = cards.write_card(card)
    assert path == tmp_path / "home" / "cards" / "user-cora-copy.yaml"
    assert "user-cora-copy" in cards.card_names() and cards.card_path("user-cora-copy") == path
    assert cards.load_card("user-cora-copy") == card
    assert cards.card_name("user-cora-copy") == "user-cora-copy"
    shipped = cards.load_card("citeseer")
    copied = cards.write_card(shipped)  # the user's copy now replaces the shipped file
    assert cards.card_path("citeseer") == copied and cards.load_card("citeseer") == shipped
    wl = workload_from_dict({"dataset": "card:user-cora-copy", "model": {"arch": "sage", "num_layers": 2,
                                                                        "hidden_dim": 16},
                             "training": {"mode": "mini-batch", "batch_size": 64, "fanouts": [5, 5]}})
    result = simulate(load_cluster("4x-a100-10gbe"), wl, "dp")
    assert result.feasible and result.estimated is not None and result.estimated["card"] == "user-cora-copy"
    assert result.estimated["proxy"]["num_vertices"] == g.num_vertices


def test_a_users_card_replaces_a_shipped_one_of_its_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GNNPLAN_HOME", str(tmp_path))
    data = read_yaml(cards.CARD_DIR / "cora.yaml", "card")
    data["description"] = "the user's own cora card"
    (tmp_path / "cards").mkdir()
    (tmp_path / "cards" / "cora.yaml").write_text(__import__("yaml").safe_dump(data))
    assert cards.card_path("cora") == tmp_path / "cards" / "cora.yaml"
    assert cards.load_card("cora").description == "the user's own cora card"
    assert cards.card_names().count("cora") == 1


def test_a_card_name_that_is_not_a_plain_file_name_or_not_its_files_is_refused(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GNNPLAN_HOME", str(tmp_path))
    (tmp_path / "cards").mkdir()
    outside = tmp_path / "outside.yaml"
    outside.write_text((cards.CARD_DIR / "cora.yaml").read_text())
    assert cards.card_path("../outside") is None
    with pytest.raises(SpecError, match="unknown card '../outside'"):
        cards.load_card("../outside")
    bad = cards.load_card("cora").model_copy(update={"name": "../cora"})
    with pytest.raises(SpecError, match=r"^card name: '../cora' must be letters, digits, '.', '_' or '-'"):
        cards.write_card(bad)
    (tmp_path / "cards" / "other.yaml").write_text((cards.CARD_DIR / "cora.yaml").read_text())
    with pytest.raises(SpecError, match=r"name: 'cora' must be the file's name 'other'") as err:
        cards.load_card("other")
    assert "\n" not in str(err.value)


def test_a_written_card_reads_back_as_it_was_with_its_unpublished_numbers(tmp_path: Path) -> None:
    """``write_card`` keeps a number given as not published (``max_in_degree: {value: null, source}``) and leaves
    out the optional fields a card does not give."""
    products = cards.load_card("ogbn-products")
    path = cards.write_card(products.model_copy(update={"name": "copy"}), tmp_path)
    text = path.read_text()
    assert "value: null" in text and "communities" not in text
    again = cards.card_from_dict(yaml.safe_load(text), where=str(path))
    assert again.model_copy(update={"name": products.name}) == products


def test_a_card_with_fewer_edges_than_its_figures_need_names_num_edges() -> None:
    """A card edited below the edges its components and vertices need is refused at num_edges (its proxy's degree
    sequence had negative degrees: 'workload.dataset: n < 0'); between that and the card's own count the proxy is
    drawn with every vertex of the largest component keeping an edge."""
    data = read_yaml(cards.CARD_DIR / "cora.yaml", "card")
    data["num_edges"]["value"] = 2800
    with pytest.raises(SpecError, match=r"^card x: num_edges: 2800 is too few for the card's other figures: the "
                                        r"small components' edges \(both directions\) and the largest component's "
                                        r"vertices \(one each\) need at least 2903 loaded edges, got 2800$"):
        cards.card_from_dict(data, where="card x")
    data["num_edges"]["value"] = 4000
    card = cards.card_from_dict(data, where="card x")
    assert card.least_loaded_edges()[0] == 2903 <= card.loaded_edges
    del data["components"]
    data["num_edges"]["value"] = 2707
    with pytest.raises(SpecError, match=r"its vertices with in-edges \(one each\) need at least 2708"):
        cards.card_from_dict(data, where="card x")


def test_fewer_edge_ends_are_taken_one_per_vertex_per_round_and_never_empty_a_vertex() -> None:
    from gnnplan.simulator.workload.degree_bins import adjust_total

    deg = np.array([1, 2, 2, 3, 8, 1], dtype=np.int64)
    out = adjust_total(deg, 8, np.random.default_rng(0))  # 17 -> 8: more than one round of the five with room
    assert out.sum() == 8 and out.min() >= 1 and (out <= deg).all()
    with pytest.raises(ValueError, match="5 edge ends are fewer than the 6 vertices with edges need"):
        adjust_total(deg, 5, np.random.default_rng(0))
    same = adjust_total(deg, 15, np.random.default_rng(1))  # one round: the draw of before, unchanged
    rng = np.random.default_rng(1)
    room = np.where(deg >= 2, deg, 0)
    expected = deg.copy()
    np.add.at(expected, rng.choice(6, 2, replace=False, p=room / room.sum()), -1)
    assert (same == expected).all()
