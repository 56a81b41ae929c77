"""The ``estimated`` record of a result simulated from a dataset card: the card, its proxy
(:func:`simulator.workload.proxy.proxy_spec`), how each statistic a strategy reads was estimated on the proxy and
scaled to the card's size (the rules of :mod:`simulator.workload.proxy`), and where the proxy's community
structure comes from, with what a card without a block model was measured to do to the predictions
(benchmarks/bench_card_epoch.py ``--card-kind``).
"""

from __future__ import annotations

from typing import Any

from gnnplan.simulator.workload import proxy_pool
from gnnplan.simulator.workload.cards import Card, card_name, load_card
from gnnplan.simulator.workload.proxy import PROXY_SEED, proxy_draw, proxy_scale, proxy_spec
from gnnplan.simulator.workload.spec import SbmSpec


def estimated(card: str, statistics: dict[str, str], seed: int = PROXY_SEED,
              pooled_draws: int | None = None) -> dict[str, Any]:
    """The ``estimated`` field of a result simulated from a card: where the sizes come from, the proxy, and per
    statistic how it was estimated.

    Args:
        card: the card's name.
        statistics: statistic -> how it was estimated (one sentence).
        seed: the proxy's draw (:func:`proxy_draw`).
        pooled_draws: R when every statistic is the medoid of proxy draws 0 to R - 1
            (:mod:`simulator.workload.proxy_pool`; the proxy named is draw 0); None for one draw.
    """
    c = load_card(card)
    spec = proxy_spec(c, seed=seed)
    sc = proxy_scale(c, spec)
    out = {"card": card, "sizes": f"the card's, exact ({c.num_vertices.source})",
           "proxy": {"generator": "sbm (degree-corrected, simulator/workload/sbm.py)", "name": spec.name, "draw": seed,
                     "num_vertices": sc.proxy_vertices, "num_edges": sc.proxy_edges,
                     "vertex_factor": sc.vertex_factor, "edge_factor": sc.edge_factor,
                     "communities": proxy_communities(c, spec)},
           "statistics": dict(statistics)}
    if pooled_draws is not None:
        out["pooled"] = {"draws": pooled_draws, "how": POOLED_RULE}
    return out


def for_dataset(dataset: object, statistics: dict[str, str]) -> dict[str, Any] | None:
    """:func:`estimated` for a workload's ``dataset`` (a card reference: ``card:<name>`` pooled where its size asks,
    ``card:<name>@K`` one draw); None for a real or generated graph.

    Args:
        dataset: a workload's ``dataset`` field.
        statistics: statistic -> how it was estimated (:func:`strategy_statistics`; empty for the card alone).
    """
    name = card_name(dataset)
    if name is None:
        return None
    refs = proxy_pool.pooled_refs(dataset)
    return estimated(name, statistics, proxy_draw(dataset), None if refs is None else len(refs))


POOLED_RULE = ("the card is smaller than one proxy's 10^5 vertices, so its statistics were measured on proxy draws "
               "0 to R - 1 and each is the medoid of the R results, the one draw's nearest the draws' medians, "
               "except the summaries no prediction reads (the edge cut, hopgnn's locality fractions and dp share), "
               "each the draws' median (simulator/workload/proxy_pool.py; card:<name>@K names one draw)")
"""How a pooled card's statistics were estimated (the ``pooled`` record of :func:`estimated`)."""


def proxy_communities(card: Card, spec: SbmSpec) -> str:
    """Where the proxy's community structure comes from, and how far that lets its partition-dependent statistics
    be trusted, in one sentence (the ``communities`` of :func:`estimated`).

    A card without communities gives a proxy without any: a partitioner then finds only the locality of such a
    graph (ogbn-papers100M's proxy, 4 METIS parts: edge cut 0.47 against 0.75 for a random partition, hopgnn's
    micrograph locality 0.31, 2026-11-28), whatever the real graph's is. A card with only a number of communities
    and their mixing gets equal communities mixed uniformly; one with only a published METIS edge cut, equal
    communities mixed along a binary hierarchy so METIS cuts the proxy as much (:mod:`simulator.workload.cut_fit`).
    What each does to a prediction is measured by benchmarks/bench_card_epoch.py ``--card-kind`` on Cora and CiteSeer
    (:data:`NO_COMMUNITIES_EFFECT`, :data:`MIXING_ONLY_EFFECT`, :data:`CUT_FIT_EFFECT`); what a block model
    gives, by bench_card_epoch and bench_proxy on the same graphs, is :data:`BLOCK_MODEL_EFFECT`."""
    if card.communities is None and card.metis_edge_cut is not None and spec.num_communities > 1:
        from gnnplan.simulator.workload.cut_fit import fitted_mixing

        fit = fitted_mixing(card, spec.num_vertices)
        rows = ", ".join(f"{p} parts {f:g}" for p, f in card.metis_edge_cut.value)
        got = ", ".join(f"{f:.3g}" for f in fit["fitted"])
        return (f"fitted to the card's METIS edge cut ({rows}): {spec.num_communities} communities of equal size "
                f"mixed along a binary hierarchy, mixing mu {spec.mu:g}, which METIS cuts {got} "
                f"(simulator/workload/cut_fit.py); {CUT_FIT_EFFECT}")
    if card.communities is None or spec.num_communities <= 1:
        return ("none: the card gives no community structure, so partition-dependent statistics (METIS remote "
                "inputs, hopgnn's micrograph locality, gsplit's local edges) are those of a graph without "
                f"communities; {NO_COMMUNITIES_EFFECT}")
    blocks = getattr(spec, "block_sizes", None)
    if not blocks:
        return (f"planted from the card: {spec.num_communities} communities of equal size mixed uniformly, mixing "
                f"mu {spec.mu:g} (no block model); {MIXING_ONLY_EFFECT}")
    bridges = getattr(spec, "bridge_fraction", None)
    held = f", the edges between them on {bridges:g} of the vertices" if bridges is not None else ""
    return (f"planted from the card: the {len(blocks)} communities of its block model, mixing mu {spec.mu:g}{held}; "
            f"{BLOCK_MODEL_EFFECT}")


def community_caveat(ref: object) -> str | None:
    """:func:`proxy_communities` of the card ``ref`` names (``card:<name>[@K]``) when its proxy has no block model
    (the card gives no communities, or only their number and mixing), whose partition-dependent statistics are
    biased (:data:`NO_COMMUNITIES_EFFECT`, :data:`MIXING_ONLY_EFFECT`); None for a card with a block model or a
    dataset that is not a card. ``whatif`` prints it under its table."""
    name = card_name(ref)
    if name is None:
        return None
    c = load_card(name)
    spec = proxy_spec(c, seed=proxy_draw(str(ref)))
    return None if getattr(spec, "block_sizes", None) else proxy_communities(c, spec)


BLOCK_MODEL_EFFECT = ("on Cora and CiteSeer, whose cards have a block model, 36 of 36 epoch times and network byte "
                      "counts came within 15% of the real graph's predictions (max 10.2% and 9.9%) and 18 of 18 "
                      "evaluation times (max 10.4%) (benchmarks/bench_card_epoch.py), and 86 of 86 statistics within "
                      "15% of the real graph's (max 13.6%, CiteSeer's hongtu peer rows; benchmarks/bench_proxy.py) "
                      "(2026-12-02, each card pooled over 15 proxy draws)")
"""What a card with a block model did to the predictions and statistics of Cora and CiteSeer against their real
graphs (the docstrings of benchmarks/bench_card_epoch.py and :mod:`simulator.workload.proxy_pool`): the accuracy a
card derived with ``gnnplan card --structure louvain`` can expect, measured on the only two graphs bundled."""
NO_COMMUNITIES_EFFECT = ("METIS cuts such a graph more than a real one: on Cora and CiteSeer a card without "
                         "communities put the evaluation's time 116% high (median over 18 predictions) and hongtu's "
                         "network bytes up to 9.6x (benchmarks/bench_card_epoch.py --card-kind none, 2026-11-30, "
                         "each card pooled over 15 proxy draws)")
"""What a card without communities did to the predictions of Cora and CiteSeer (bench_card_epoch's docstring)."""
MIXING_ONLY_EFFECT = ("on Cora and CiteSeer such a card put the evaluation's time 75% high (median over 18 "
                      "predictions; hongtu's network bytes up to 7.7x) with the label classes' number and mixing, 32% "
                      "(up to 2.2x) with the Louvain communities' (benchmarks/bench_card_epoch.py --card-kind labels, "
                      "louvain, 2026-11-30, each card pooled over 15 proxy draws)")
"""What a card with a number of communities and their mixing but no block model did to the predictions of Cora and
CiteSeer (bench_card_epoch's docstring)."""
CUT_FIT_EFFECT = ("on Cora and CiteSeer a card with only their METIS edge cut at 8 parts put the evaluation's time "
                  "17.2% off (median over 18 predictions, max 49%; 116% without the cut) and hongtu's network bytes "
                  "up to 1.3x; with only a power law for the degrees besides, as ogbn-products' card, 7.4% (max 37%, "
                  "network bytes up to 1.5x) (benchmarks/bench_card_epoch.py --card-kind cut, law-cut, 2026-11-30, "
                  "each card pooled over 15 proxy draws)")
"""What a card with only a METIS edge cut did to the predictions of Cora and CiteSeer (bench_card_epoch's
docstring): the cut at 8 parts is what the fit met; every compared prediction is held out from it."""


SAMPLE_STATS_RULE = ("measured on the proxy by graphstats.sample_stats (DGL NeighborSampler, the same fanouts, "
                     "seeds per worker, cluster shape and partitioner); per-batch vertex and edge counts, the cache "
                     "hit curve, local/remote input fractions and the edge cut are kept as measured "
                     "(size-invariant rule)")
INFERENCE_RULE = ("the evaluation's layer-wise inference block (simulator/workload/inference.py) measured on the "
                  "proxy by inference.inference_stats with chunks holding the fraction of the vertices a chunk "
                  "holds at the card's size; its rank, destination, source and edge counts x the card's vertices "
                  "over the proxy's (extensive rule at a fixed chunk fraction), its fractions kept")
STRATEGY_STATISTICS = {
    "dp": {"inference_block": INFERENCE_RULE},
    "neutronstar": {"dependency_counts": "measured on the proxy by neutronstar.dependencies (same partitioner, "
                                         "workers and mode); vertex counts x vertex_factor, edge counts x "
                                         "edge_factor (extensive rule)"},
    "hongtu": {"chunk_counts": "chunks, neighbour sets and deduplicated transfers measured on the proxy by "
                               "hongtu.chunks / hongtu.dedup; row counts x vertex_factor, edge counts x edge_factor, "
                               "owned vertices and edges per machine likewise (extensive rule)"},
    "hopgnn": {"micrograph_stats": "measured on the proxy by hopgnn.micrographs (same batches and partition); "
                                   "per-iteration counts and micrograph locality fractions kept (size-invariant "
                                   "rule)", "inference_block": INFERENCE_RULE},
    "gsplit": {"split_stats": "measured on the proxy by gsplit.stats; per-batch split sizes, cross-split edges and "
                              "shuffle rows kept (size-invariant rule), partition sizes x vertex_factor",
               "inference_block": INFERENCE_RULE},
}
"""What each strategy measures beyond the sample statistics, and how its card estimate is obtained."""


def strategy_statistics(strategy: str, needs_sample_stats: bool) -> dict[str, str]:
    """Statistic -> how it is estimated from a card, for one strategy (the ``statistics`` of :func:`estimated`)."""
    out = {"dataset_summary": "the card's sizes (exact: the source of each is in the card)"}
    if needs_sample_stats:
        out["sample_stats"] = SAMPLE_STATS_RULE
    out.update(STRATEGY_STATISTICS.get(strategy, {}))
    return out
