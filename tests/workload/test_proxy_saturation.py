"""A card without a degree histogram keeps its proxy's per-batch counts; the note says when a batch's
neighbourhood overlaps itself on the proxy (simulator.workload.proxy_batch.saturation_note), from the card's
degree law at its size (simulator.workload.proxy_batch.card_law_histogram)."""

from __future__ import annotations

import re

import pytest

from gnnplan.simulator.workload import proxy, proxy_batch
from gnnplan.simulator.workload.cards import load_card
from gnnplan.simulator.workload.reach import histogram_classes


def test_the_law_histogram_at_the_card_s_size_is_the_law_drawn() -> None:
    """The analytic histogram has the law's connected mean and the share of each degree the draws give (ogbn-arxiv's
    card, 169,343 vertices, drawn in full by proxy.law_histogram)."""
    card = load_card("ogbn-arxiv")
    n = card.num_vertices.value
    exact, drawn = proxy_batch.card_law_histogram(card), proxy.law_histogram(card, n)
    deg_e, cnt_e = histogram_classes(exact, n)
    deg_d, cnt_d = histogram_classes(drawn, n)
    assert cnt_e.sum() == pytest.approx(n, rel=1e-9)
    connected = cnt_e[deg_e > 0].sum()
    assert (deg_e * cnt_e).sum() / connected == pytest.approx(card.connected_mean_in_degree, rel=0.02)
    assert (deg_e * cnt_e).sum() == pytest.approx((deg_d * cnt_d).sum(), rel=0.02)
    for d in (1, 2, 5, 10):
        assert cnt_e[deg_e == d].sum() == pytest.approx(cnt_d[deg_d == d].sum(), rel=0.05), d


def test_the_note_names_the_overlap_where_the_proxy_is_too_small() -> None:
    note = proxy_batch.saturation_note("card:ogbn-products", (10, 10, 10), 256)
    assert note is not None and note.startswith("card ogbn-products: its per-batch counts are measured on its proxy")
    ratio = float(re.search(r"reaches ([0-9.]+)x as many", note).group(1))  # type: ignore[union-attr]
    assert 2.0 < ratio < 10.0
    # a small batch stays a small part of the proxy; a card with a histogram is scaled, not noted; a real graph
    assert proxy_batch.saturation_note("card:ogbn-products", (5, 5), 64) is None
    assert proxy_batch.saturation_note("card:cora", (10, 10), 64) is None
    assert proxy_batch.saturation_note("cora", (10, 10), 64) is None


def test_more_hops_overlap_more() -> None:
    two = proxy_batch._saturation("ogbn-products", (10, 10), 256)
    three = proxy_batch._saturation("ogbn-products", (10, 10, 10), 256)
    assert two is not None and three is not None and 1.0 < two < three
