"""Wiring a card's configuration-model proxy (simulator/workload/degseq.py): the pool's membership tests, first
occurrences and merges by binary search and stable sort (:func:`~gnnplan.simulator.workload.degseq.in_sorted`,
:func:`~gnnplan.simulator.workload.degseq.first_of_each`, :func:`~gnnplan.simulator.workload.degseq.merged`, since
2026-11-30) against numpy's ``np.isin``, ``np.unique(return_index=True)`` and ``np.union1d`` (before; numpy 2 hashes
the keys), with the baseline measured in the same run on the same proxies.

Proxies: ogbn-products' card (mean degree 50.5, power-law degrees, no histogram) drawn from its power law's degrees
(:func:`gnnplan.simulator.workload.proxy.law_histogram`) as a card with a METIS edge cut is
(:mod:`gnnplan.simulator.workload.cut_fit`), at ``--vertices`` vertices, with one community and with 64 mixed
uniformly (mu 0.0108, the fit's before its mixing became hierarchical), and card:cora's (its block model, 2708
vertices). Both ways give the same edges (checked here on every proxy); the script prints each one's wiring time
and their ratio. 2026-11-30, 5 x 10^4 vertices, beside
another job on this 2-core machine: 54.41 s -> 1.67 s (32.5x) with one community, 21.77 s -> 6.08 s (3.6x) with
64, card:cora 0.72 s -> 0.56 s (1.3x); the same edges each time.

Run: ``python benchmarks/bench_degseq_wiring.py [--vertices 50000]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

os.environ.setdefault("DGLBACKEND", "pytorch")

from gnnplan.simulator.workload import degseq  # noqa: E402
from gnnplan.simulator.workload.cards import Communities, Sourced, load_card  # noqa: E402
from gnnplan.simulator.workload.proxy import planted_spec, proxy_spec  # noqa: E402

NUMPY_WAY = {"in_sorted": lambda keys, known: np.isin(keys, known),
             "first_of_each": lambda keys: np.unique(keys, return_index=True),
             "merged": lambda good, new: np.union1d(good, new)}
"""The calls the wiring made before 2026-11-30."""


def wired(spec: degseq.DegreeSequenceSpec, way: dict | None) -> tuple[float, tuple[np.ndarray, np.ndarray]]:  # type: ignore[type-arg]
    """Seconds to wire ``spec`` (:func:`degseq.degree_sequence_edges`) with ``way``'s helpers swapped in (None:
    the module's own), and the edges."""
    saved = {name: getattr(degseq, name) for name in NUMPY_WAY}
    try:
        for name, fn in (way or {}).items():
            setattr(degseq, name, fn)
        started = time.perf_counter()
        edges = degseq.degree_sequence_edges(spec)
        return time.perf_counter() - started, edges
    finally:
        for name, fn in saved.items():
            setattr(degseq, name, fn)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vertices", type=int, default=50_000, help="vertices of the ogbn-products proxies")
    args = parser.parse_args()
    products = load_card("ogbn-products")
    how = "bench_degseq_wiring: the fitted communities of ogbn-products' proxy"
    fitted = products.model_copy(update={"communities": Communities(num_communities=Sourced(value=64, source=how),
                                                                    mu=Sourced(value=0.0108, source=how))})
    specs = {f"ogbn-products law, 1 community, {args.vertices} vertices":
             planted_spec(products.model_copy(update={"communities": None}), args.vertices, 0, law_degrees=True),
             f"ogbn-products law, 64 communities, {args.vertices} vertices":
             planted_spec(fitted, args.vertices, 0, law_degrees=True),
             "card:cora (block model)": proxy_spec("cora")}
    print(f"{'proxy':52s} {'numpy (s)':>10s} {'now (s)':>10s} {'ratio':>7s} same edges")
    for label, spec in specs.items():
        before, old = wired(spec, NUMPY_WAY)
        after, new = wired(spec, None)
        same = all(np.array_equal(a, b) for a, b in zip(old, new))
        print(f"{label:52s} {before:10.2f} {after:10.2f} {before / after:6.1f}x {same}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
