"""How METIS's edge cut grows with the number of parts, on a real graph and on the proxy of a card that gives only
the graph's METIS cut at 8 parts (:mod:`gnnplan.simulator.workload.cut_fit`): the product's proxy (communities
mixed along a binary hierarchy, :func:`gnnplan.simulator.workload.degseq.hierarchy_levels`) against the same
communities mixed uniformly (the fit before 2026-11-30), fitted in the same run by the product's own fit
(:func:`~gnnplan.simulator.workload.cut_fit.best_mixing` over :data:`~gnnplan.simulator.workload.cut_fit.MU_GRID`).

The fit sees only the cut at 8 parts; every other column is held out from it. A what-if on a few machines prices
the cut at 2-4 parts, one on many machines at 16-32: a proxy whose cut does not grow with the parts gets both
wrong (hongtu's network bytes and the evaluation's remote sources; benchmarks/bench_card_epoch.py ``--card-kind
cut``). The real graph's cut is the median over ``--relabelings`` random relabelings (METIS's result depends on
the numbering); a proxy's over ``--draws`` draws (seeds 0..D-1; draw 0 is the product's default).

2026-11-30, 8 relabelings, 3 draws (medians; the proxies' error against the real graph's):

========  =====  ======  ==============  ==============
graph     parts  real    hierarchy       uniform
========  =====  ======  ==============  ==============
Cora      2      0.037   0.033 (-11%)    0.057 (+53%)
Cora      4      0.063   0.069 (+10%)    0.088 (+39%)
Cora      8      0.103   0.111 (+8%)     0.106 (+3%)     (fitted: 0.0997 at the shipped numbering)
Cora      16     0.137   0.126 (-8%)     0.112 (-18%)
Cora      32     0.190   0.151 (-21%)    0.119 (-37%)
CiteSeer  2      0.0069  0.013 (+94%)    0.017 (+141%)
CiteSeer  4      0.0135  0.028 (+103%)   0.027 (+100%)
CiteSeer  8      0.037   0.041 (+10%)    0.036 (-3%)     (fitted: 0.0367)
CiteSeer  16     0.067   0.050 (-25%)    0.046 (-32%)
CiteSeer  32     0.094   0.060 (-36%)    0.049 (-48%)
========  =====  ======  ==============  ==============

Cora's cut grows by about the same amount at every doubling, as the hierarchy's does; CiteSeer's doubles at every
doubling up to 16 parts, which neither mixing follows (its 438 connected components, which the derived card does
not carry, let METIS cut it very little at 2-4 parts [inferred]).

Run: ``python benchmarks/bench_cut_shape.py [--graphs cora citeseer] [--relabelings 8] [--draws 3]``
(about ten seconds here). Timings are not reported (an accuracy benchmark).
"""

from __future__ import annotations

import argparse
import os

import numpy as np

os.environ.setdefault("DGLBACKEND", "pytorch")

from gnnplan.simulator.workload import cut_fit  # noqa: E402
from gnnplan.simulator.workload.card_measures import derived_card, metis_cut_fraction  # noqa: E402
from gnnplan.simulator.workload.cards import Card, Communities, Sourced  # noqa: E402
from gnnplan.simulator.workload.datasets import generate_graph, load_dataset  # noqa: E402
from gnnplan.simulator.workload.proxy import DEFAULT_PROXY_VERTICES, planted_spec, proxy_spec  # noqa: E402

PARTS = (2, 4, 8, 16, 32)
RELABEL_SEED = 100
"""Relabeling k numbers the vertices by ``default_rng(RELABEL_SEED + k).permutation``."""


def real_cuts(name: str, relabelings: int) -> np.ndarray:
    """(relabelings, len(PARTS)) METIS cuts of real graph ``name`` under random renumberings."""
    g = load_dataset(name)
    rows = []
    for k in range(relabelings):
        perm = np.random.default_rng(RELABEL_SEED + k).permutation(g.num_vertices)
        rows.append([metis_cut_fraction(g.num_vertices, perm[g.src], perm[g.dst], p) for p in PARTS])
    return np.asarray(rows)


def proxy_cuts(spec, draws: int) -> np.ndarray:  # type: ignore[no-untyped-def]
    """(draws, len(PARTS)) METIS cuts of proxy ``spec`` at seeds 0..draws-1."""
    rows = []
    for seed in range(draws):
        g = generate_graph(spec.model_copy(update={"seed": seed}))
        rows.append([metis_cut_fraction(g.num_vertices, g.src, g.dst, p) for p in PARTS])
    return np.asarray(rows)


def uniform_spec(card: Card, k: int):  # type: ignore[no-untyped-def]
    """The card's proxy with ``k`` communities mixed uniformly, ``mu`` fitted to its cut as the product fits
    (the proxy at every grid ``mu``, cut by METIS, :func:`cut_fit.best_mixing`)."""
    n_p = min(card.num_vertices.value, DEFAULT_PROXY_VERTICES)
    parts = [int(p) for p, _ in card.metis_edge_cut.value]
    published = np.array([f for _, f in card.metis_edge_cut.value])

    def spec_at(mu: float):  # type: ignore[no-untyped-def]
        how = "bench_cut_shape: uniform mixing"
        trial = card.model_copy(update={"communities": Communities(num_communities=Sourced(value=k, source=how),
                                                                   mu=Sourced(value=mu, source=how))})
        return planted_spec(trial, n_p, 0, law_degrees=True)

    cuts = []
    for mu in cut_fit.MU_GRID:
        g = generate_graph(spec_at(mu))
        cuts.append([metis_cut_fraction(g.num_vertices, g.src, g.dst, p) for p in parts])
    mu, _ = cut_fit.best_mixing(np.asarray(cuts), published)
    return spec_at(mu)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graphs", nargs="*", default=["cora", "citeseer"], choices=["cora", "citeseer"])
    parser.add_argument("--relabelings", type=int, default=8)
    parser.add_argument("--draws", type=int, default=3)
    args = parser.parse_args()
    for name in args.graphs:
        g = load_dataset(name)
        card = derived_card(f"{name}-cut", g.num_vertices, g.src, g.dst, g.feature_dim, g.num_classes,
                            (len(g.train_idx), len(g.val_idx), len(g.test_idx)), communities="cut")
        hier = proxy_spec(card)
        flat = uniform_spec(card, hier.num_communities)
        real = real_cuts(name, args.relabelings)
        measured = {"hierarchy": proxy_cuts(hier, args.draws), "uniform": proxy_cuts(flat, args.draws)}
        print(f"\n== {name}: METIS edge cut by parts; published to the card: {card.metis_edge_cut.value[0][1]:g} at 8 "
              f"parts; hierarchy: {hier.num_communities} communities, mu {hier.mu:g}; uniform: mu {flat.mu:.4g}")
        print(f"{'parts':>5s} {'real (median, min-max)':>30s} " + " ".join(f"{k + ' (median; error)':>28s}"
                                                                          for k in measured))
        for j, parts in enumerate(PARTS):
            ref = float(np.median(real[:, j]))
            cells = []
            for rows in measured.values():
                m = float(np.median(rows[:, j]))
                cells.append(f"{m:.4f} ({rows[:, j].min():.4f}-{rows[:, j].max():.4f}) {100 * (m / ref - 1):+5.0f}%")
            print(f"{parts:>5d} {ref:>10.4f} ({real[:, j].min():.4f}-{real[:, j].max():.4f}) " + " ".join(
                f"{c:>28s}" for c in cells) + ("   <- fitted" if parts == 8 else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
