"""Communities fitted to a published METIS edge cut: the community structure of a proxy whose card gives none but
says how much METIS cuts the graph (``metis_edge_cut``, rows ``[parts, fraction]``).

What a partitioner can keep local decides every partition-dependent statistic (METIS remote inputs, the
evaluation's remote sources, hongtu's peer rows, gsplit's local edges). A proxy without communities has only the
locality of a random graph with the card's degrees, which METIS cuts far more than a real graph
(:data:`simulator.workload.proxy_estimated.NO_COMMUNITIES_EFFECT`). Papers and partitioning logs publish a graph's
METIS edge cut far more often than its community structure, so the proxy plants ``k`` equal communities (the
planted partition of :func:`simulator.workload.proxy.proxy_spec`), whose edge ends leaving a community spread
evenly over the levels of a binary hierarchy of the communities (:func:`simulator.workload.degseq.hierarchy_levels`:
METIS then cuts more at every doubling of the parts, as it cuts real graphs, where communities mixed uniformly are
cut nearly as much at 2 parts as at 32), and chooses the mixing ``mu`` at which METIS cuts the proxy as the card
says:

1. ``k = c x`` the largest published ``parts`` (at most a community of 16 proxy vertices) for ``c`` the first of
   :data:`COMMUNITIES_PER_PART` at which METIS cuts the proxy without mixing (``mu = 0``) no more than published:
   more communities than parts, so METIS can keep each whole and the cut follows ``mu`` [inferred; fitted at 8
   parts with the communities mixed uniformly (before the hierarchy, 2026-11-30), 2, 4 and 8 communities per part
   gave cuts within 10% of each other at 2-16 parts on Cora, within 30% on CiteSeer], but large enough to hold
   the proxy's hubs (a proxy keeps the card's degrees at a fraction of its vertices: ogbn-products' proxy has hubs
   of up to 20,555 edges in 10^5 vertices, and with 4 communities per part of 64, 390 vertices each, METIS cut
   0.29 of its edges at ``mu = 0``, against the published 0.135; with one per part, 0.12);
2. the proxy (draw :data:`~simulator.workload.proxy.PROXY_SEED`) is generated at every ``mu`` of :data:`MU_GRID`
   and partitioned by the product's METIS (:func:`simulator.workload.partition.partition`, seed 0) into each
   published number of parts; each row's cut as a function of ``mu`` is made non-decreasing (its running
   maximum: a cut grows with the edges between communities, and a draw's noise must not make the fit
   ambiguous) and interpolated linearly;
3. ``mu`` is the value on a fine grid that minimises the summed squared log ratio of the interpolated cuts to the
   published ones (one row: the ``mu`` that meets it, within the grid's span).

The fit (``k``, ``mu``, and the cuts measured at every grid point) is kept in the cache
(``<cache>/cut_fits/<digest>.json``, keyed by the card, the proxy size and :data:`CUT_FIT_FORMAT`); it takes one
proxy generation and METIS run per grid point and per community count tried (ogbn-products' 10^5-vertex proxy,
mean degree 50: 14 proxies, 182 s to 4 min on this 2-core machine beside other work, 2026-11-30; a progress bar on a
terminal). Every draw of the card's proxy uses the same ``k`` and ``mu``.

What this does to predictions, against the real graph's (a card of Cora and CiteSeer with only their METIS cut
at 8 parts, benchmarks/bench_card_epoch.py ``--card-kind cut``), is :data:`CUT_FIT_EFFECT` in
:mod:`simulator.workload.proxy_estimated`.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache

import numpy as np
from tqdm import tqdm

from gnnplan.simulator.io import atomic_write_json
from gnnplan.simulator.paths import cache_dir
from gnnplan.simulator.workload.cards import Card, Communities, Sourced

CUT_FIT_FORMAT = 4
"""Version of the fit; part of its cache key (2: cards without a degree histogram drawn from their power law's
degrees, :func:`simulator.workload.proxy.law_histogram`; 3: fewer communities per part when the proxy cannot be
cut as little with more; 4: the communities mixed along a binary hierarchy)."""
COMMUNITIES_PER_PART = (4, 2, 1)
"""Planted communities per part of the largest published cut, tried in turn (module docstring, step 1)."""
MU_GRID = (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
"""Mixing values the proxy is generated and cut at (module docstring, step 2)."""
FINE_STEPS = 2001
"""Points of the fine grid over ``MU_GRID``'s span the fitted ``mu`` is chosen on (step 3)."""


def with_fitted_communities(card: Card, proxy_vertices: int) -> Card:
    """``card`` with ``communities`` fitted to its ``metis_edge_cut`` (module docstring), each source saying so;
    ``card`` itself when it has communities or no published cut.

    Args:
        card: the card.
        proxy_vertices: vertices of the proxy the fit generates (the proxy the caller will draw).
    """
    if card.communities is not None or card.metis_edge_cut is None:
        return card
    fit = fitted_mixing(card, proxy_vertices)
    rows = ", ".join(f"{p} parts: {f:g}" for p, f in card.metis_edge_cut.value)
    how = (f"derived: fitted so METIS cuts the proxy as the card's metis_edge_cut ({rows}; "
           f"{card.metis_edge_cut.source}), simulator/workload/cut_fit.py")
    return card.model_copy(update={"communities": Communities(num_communities=Sourced(value=fit["k"], source=how),
                                                              mu=Sourced(value=fit["mu"], source=how))})


def fitted_mixing(card: Card, proxy_vertices: int) -> dict:  # type: ignore[type-arg]
    """The fit of ``card``'s ``metis_edge_cut`` on a proxy of ``proxy_vertices`` vertices: ``{"k", "mu", "parts",
    "published", "grid", "cuts", "fitted"}`` (``cuts``: per grid ``mu``, the proxy's cut at each published
    ``parts``; ``fitted``: the interpolated cuts at the fitted ``mu``), read from the cache when kept.

    Raises:
        ValueError: the card gives no ``metis_edge_cut``.
    """
    if card.metis_edge_cut is None:
        raise ValueError(f"card {card.name!r} gives no metis_edge_cut to fit")
    card_json = card.model_dump_json()
    text = f"{card_json}|{proxy_vertices}|{CUT_FIT_FORMAT}|{MU_GRID}|{COMMUNITIES_PER_PART}"
    return _fit(card_json, hashlib.sha1(text.encode()).hexdigest()[:16], proxy_vertices)


@lru_cache(maxsize=32)
def _fit(card_json: str, digest: str, proxy_vertices: int) -> dict:  # type: ignore[type-arg]
    path = cache_dir() / "cut_fits" / f"{digest}.json"
    if path.is_file():
        return json.loads(path.read_text())
    card = Card.model_validate_json(card_json)
    assert card.metis_edge_cut is not None
    parts = [int(p) for p, _ in card.metis_edge_cut.value]
    published = np.array([float(f) for _, f in card.metis_edge_cut.value])
    n_p = min(card.num_vertices.value, proxy_vertices)
    bar = tqdm(total=len(MU_GRID) + len(COMMUNITIES_PER_PART) - 1, unit="proxy", disable=None, leave=False,
               desc=f"card {card.name}: communities fitted to its METIS edge cut")  # on a terminal only

    def cut_at(k: int, mu: float) -> list[float]:
        bar.update()
        return [proxy_cut(card, k, mu, p, proxy_vertices) for p in parts]

    for per in COMMUNITIES_PER_PART:  # the most communities per part whose proxy METIS can cut as little
        k = max(2, min(per * max(parts), n_p // 16))
        floor = cut_at(k, MU_GRID[0])
        if all(f <= c for f, c in zip(floor, published)):
            break
    cuts = np.array([floor] + [cut_at(k, mu) for mu in MU_GRID[1:]])
    bar.close()
    mu, fitted = best_mixing(cuts, published)
    out = {"card": card.name, "k": k, "communities_per_part": per, "mu": round(mu, 5), "parts": parts,
           "published": published.tolist(), "grid": list(MU_GRID), "cuts": cuts.round(6).tolist(),
           "fitted": [round(f, 6) for f in fitted]}
    atomic_write_json(path, out)
    return out


def best_mixing(cuts: np.ndarray, published: np.ndarray) -> tuple[float, list[float]]:
    """The ``mu`` minimising the summed squared log ratio of the interpolated cuts to ``published`` (module
    docstring, step 3), and the interpolated cuts there.

    Args:
        cuts: (len(MU_GRID), R) the proxy's cut at each grid ``mu`` and published row.
        published: (R,) the published cut fractions.
    """
    grid = np.asarray(MU_GRID)
    fine = np.linspace(grid[0], grid[-1], FINE_STEPS)
    mono = np.maximum.accumulate(np.maximum(cuts, 1e-9), axis=0)
    curves = np.stack([np.interp(fine, grid, mono[:, r]) for r in range(cuts.shape[1])], axis=1)
    loss = (np.log(curves / published[None, :]) ** 2).sum(axis=1)
    best = int(np.argmin(loss))
    return float(fine[best]), [float(c) for c in curves[best]]


def proxy_cut(card: Card, k: int, mu: float, parts: int, proxy_vertices: int) -> float:
    """The fraction of edges METIS (:func:`simulator.workload.partition.partition`, seed 0) cuts into ``parts`` on
    the card's proxy (:func:`simulator.workload.proxy.planted_spec`, draw
    :data:`~simulator.workload.proxy.PROXY_SEED`, as :func:`~simulator.workload.proxy.proxy_spec` draws a card with
    fitted communities) with ``k`` equal communities mixed by ``mu``; the graph is generated in memory and not
    cached."""
    from gnnplan.simulator.workload.card_measures import metis_cut_fraction
    from gnnplan.simulator.workload.datasets import generate_graph
    from gnnplan.simulator.workload.proxy import PROXY_SEED, planted_spec

    how = "derived: a trial of simulator/workload/cut_fit.py"
    trial = card.model_copy(update={"communities": Communities(num_communities=Sourced(value=k, source=how),
                                                               mu=Sourced(value=mu, source=how))})
    n_p = min(card.num_vertices.value, proxy_vertices)
    g = generate_graph(planted_spec(trial, n_p, PROXY_SEED, law_degrees=True, hierarchical=True))
    return metis_cut_fraction(g.num_vertices, g.src, g.dst, parts)
