"""Communities fitted to a published METIS edge cut (simulator/workload/cut_fit.py): the fit's arithmetic, a
card with only a cut whose proxy METIS then cuts as published, and what results say about it."""

from __future__ import annotations

import numpy as np
import pytest

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.workload import cut_fit, proxy, proxy_estimated
from gnnplan.simulator.workload.card_measures import derived_card, metis_cut_fraction
from gnnplan.simulator.workload.cards import card_from_dict, write_card
from gnnplan.simulator.workload.datasets import generate_graph, load_dataset
from gnnplan.simulator.workload.spec import workload_from_dict


def test_best_mixing_meets_a_published_cut_on_the_interpolated_curve() -> None:
    grid = np.asarray(cut_fit.MU_GRID)
    cuts = (0.01 + 0.5 * grid)[:, None]
    mu, fitted = cut_fit.best_mixing(cuts, np.array([0.11]))
    assert mu == pytest.approx(0.2, abs=4e-4) and fitted[0] == pytest.approx(0.11, rel=2e-3)
    dipped = cuts.copy()
    dipped[6, 0] = 0.05  # one draw's noise at mu 0.3: the running maximum keeps the curve non-decreasing
    assert cut_fit.best_mixing(dipped, np.array([0.11]))[0] == pytest.approx(0.2, abs=4e-4)
    # two rows, the second cut twice the first: the least-squares compromise in log space meets their geometric mean
    two = np.stack([0.01 + 0.5 * grid, 0.02 + grid], axis=1)
    mu2, fitted2 = cut_fit.best_mixing(two, np.array([0.11, 0.242]))
    assert mu2 == pytest.approx((np.sqrt(0.11 * 0.121) - 0.01) / 0.5, abs=4e-4)
    assert fitted2[1] == pytest.approx(2 * fitted2[0], rel=1e-9)
    below = cut_fit.best_mixing(cuts, np.array([0.001]))  # below the grid's least cut: its first point
    assert below[0] == 0.0


def test_a_card_with_only_a_metis_cut_gets_a_proxy_metis_cuts_as_published() -> None:
    g = load_dataset("cora")
    split = (len(g.train_idx), len(g.val_idx), len(g.test_idx))
    card = derived_card("cora-cut", g.num_vertices, g.src, g.dst, g.feature_dim, g.num_classes, split,
                        communities="cut")
    published = metis_cut_fraction(g.num_vertices, g.src, g.dst, 8)
    assert card.metis_edge_cut.value == [(8, round(published, 5))] and card.communities is None
    spec = proxy.proxy_spec(card)
    assert spec.num_communities == cut_fit.COMMUNITIES_PER_PART[0] * 8 and 0.0 < spec.mu < 0.3
    fitted = generate_graph(spec)
    assert metis_cut_fraction(fitted.num_vertices, fitted.src, fitted.dst, 8) == pytest.approx(published, rel=0.1)
    # mixed along a hierarchy, the proxy is cut less at fewer parts, as Cora is (0.037 at 2 parts: 0.37 of its cut
    # at 8), where communities mixed uniformly were cut 0.057 (0.57 of it)
    assert spec.hierarchical_mixing
    assert metis_cut_fraction(fitted.num_vertices, fitted.src, fitted.dst, 2) < 0.45 * published
    bare = derived_card("cora-none", g.num_vertices, g.src, g.dst, g.feature_dim, g.num_classes, split)
    plain = generate_graph(proxy.proxy_spec(bare))
    assert metis_cut_fraction(plain.num_vertices, plain.src, plain.dst, 8) > 2.5 * published
    fit = cut_fit.fitted_mixing(card, proxy.DEFAULT_PROXY_VERTICES)
    assert (fit["k"], fit["mu"], fit["parts"]) == (spec.num_communities, spec.mu, [8])
    assert len(fit["cuts"]) == len(cut_fit.MU_GRID) and fit["fitted"][0] == pytest.approx(published, rel=0.02)
    assert proxy.proxy_spec(card, seed=3).mu == spec.mu  # every draw plants the same fit


def test_results_from_a_cut_card_say_their_communities_were_fitted(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GNNPLAN_HOME", str(tmp_path))
    g = load_dataset("citeseer")
    card = derived_card("citeseer-cut", g.num_vertices, g.src, g.dst, g.feature_dim, g.num_classes,
                        (len(g.train_idx), len(g.val_idx), len(g.test_idx)), communities="cut")
    write_card(card)
    sentence = proxy_estimated.community_caveat("card:citeseer-cut")
    assert sentence.startswith(f"fitted to the card's METIS edge cut (8 parts {card.metis_edge_cut.value[0][1]:g}): "
                               f"32 communities of equal size mixed along a binary hierarchy, mixing mu")
    assert sentence.endswith(proxy_estimated.CUT_FIT_EFFECT)
    from gnnplan.simulator.api import simulate

    wl = workload_from_dict({"dataset": "card:citeseer-cut", "model": {"arch": "sage", "num_layers": 2,
                                                                       "hidden_dim": 16},
                             "training": {"batch_size": 64, "fanouts": [5, 5]}})
    est = simulate("2x4-a100-nvlink3-200gbib", wl, "dp", {"partitioner": "random"}).to_json_dict()["estimated"]
    assert est["proxy"]["communities"] == sentence


@pytest.mark.parametrize("rows", [[[1, 0.1]], [[8, 0.0]], [[8, 1.0]], [[8, 0.1], [4, 0.05]], []])
def test_a_bad_metis_edge_cut_is_refused_naming_the_field(rows: list) -> None:
    data = {"name": "x", "description": "x", "num_vertices": {"value": 1000, "source": "pub"},
            "num_edges": {"value": 5000, "source": "pub"}, "edge_direction": {"value": "undirected", "source": "pub"},
            "feature_dim": {"value": 8, "source": "pub"}, "num_classes": {"value": 3, "source": "pub"},
            "split": {k: {"value": 100, "source": "pub"} for k in ("train", "valid", "test")},
            "degree": {"max_in_degree": {"value": None, "source": "pub"}, "exponent": {"value": 2.5, "source": "pub"}},
            "metis_edge_cut": {"value": rows, "source": "pub"}}
    with pytest.raises(SpecError, match="metis_edge_cut"):
        card_from_dict(data, where="card x")


def test_fewer_communities_per_part_when_the_proxy_cannot_be_cut_as_little(tmp_path, monkeypatch) -> None:
    """A proxy whose hubs outgrow small communities is cut more at mu = 0 than published: the fit tries fewer
    communities per part (a stand-in cut: its floor falls with the community count), and the first that can be
    cut as little is planted."""
    monkeypatch.setenv("GNNPLAN_CACHE", str(tmp_path))
    g = load_dataset("cora")
    card = derived_card("cora-cut", g.num_vertices, g.src, g.dst, g.feature_dim, g.num_classes,
                        (len(g.train_idx), len(g.val_idx), len(g.test_idx)), communities="cut")
    published = card.metis_edge_cut.value[0][1]
    tried: list[int] = []

    def stand_in(card, k, mu, parts, proxy_vertices):  # noqa: ANN001, ANN202
        tried.append(k)
        return published * k / 16 + mu  # floor: 2x the published at 32 communities, 1x at 16, 0.5x at 8

    monkeypatch.setattr(cut_fit, "proxy_cut", stand_in)
    fit = cut_fit.fitted_mixing(card, 1000)
    assert (fit["k"], fit["communities_per_part"]) == (16, 2) and tried[:2] == [32, 16] and set(tried[2:]) == {16}
    assert fit["mu"] == pytest.approx(0.0, abs=4e-4) and fit["fitted"][0] == pytest.approx(published, rel=1e-6)
    assert (tmp_path / "cut_fits").is_dir()  # kept: a second call does not fit again
    tried.clear()
    assert cut_fit.fitted_mixing(card, 1000) == fit and not tried
