"""DepComm, DepCache and Hybrid on 2 and 4 gloo workers compute the single-process full-graph loss and gradient
of GCN, GIN and GAT on Cora (tolerance 1e-5), whatever the exchange schedule, overlap and partitioner."""

from __future__ import annotations

import numpy as np
import pytest
from full_graph_reference import reference
from neutronstar_workers import make_workload, several

from gnnplan.executor.launch import spawn

ARCHS = (("gcn", {}), ("gin", {}), ("gat", {"num_heads": 2}))
TOL = 1e-5


def modes(num_workers: int) -> list[dict]:
    """Every mode; two Hybrid budgets: one that leaves raw features communicated, one that splits layer 2."""
    return [{"mode": "depcomm"},
            {"mode": "depcache", "ring": False},
            {"mode": "hybrid", "cache_budget_bytes": 1.0e6, "overlap": False, "partitioner": "metis"},
            {"mode": "hybrid", "cache_budget_bytes": 7.0e6 if num_workers == 2 else 8.0e6, "ring": False}]


def run(num_workers: int) -> list[tuple[str, dict, dict, float, dict]]:
    cases = [(make_workload(arch, **model), knobs) for arch, model in ARCHS for knobs in modes(num_workers)]
    results = spawn(several, num_workers, ([("gradients", (cases,))],))[0]
    refs = {arch: reference(make_workload(arch, **model)) for arch, model in ARCHS}
    return [(wl.model.arch, knobs, r, *refs[wl.model.arch]) for (wl, knobs), r in zip(cases, results)]


def check(rows: list, num_workers: int) -> None:
    worst = worst_loss = 0.0
    for arch, knobs, r, ref_loss, ref_grads in rows:
        label = f"{arch} {knobs}"
        assert r["rank_spread"] == 0.0, label  # every rank holds the same all-reduced gradient
        assert abs(r["loss"] - ref_loss) <= TOL, label
        worst_loss = max(worst_loss, abs(r["loss"] - ref_loss))
        assert sorted(r["grads"]) == sorted(ref_grads), label
        for name, g in ref_grads.items():
            assert np.abs(g).max() > 0, (label, name)
            np.testing.assert_allclose(r["grads"][name], g, rtol=0, atol=TOL, err_msg=f"{label} {name}")
            worst = max(worst, float(np.abs(r["grads"][name] - g).max()))
        received = r["received"]  # per rank, per layer: rows received
        assert len(received) == num_workers
        if knobs["mode"] == "depcomm":
            assert all(rows_l > 0 for rank in received for rows_l in rank), label
        elif knobs["mode"] == "depcache":
            assert all(rows_l == 0 for rank in received for rows_l in rank), label
        else:  # the budgets make Hybrid a real mix of cached and communicated dependencies
            total, remote = sum(map(sum, received)), sum(r["remote"]) * len(received[0])
            assert 0 < total < remote, label
    print(f"{num_workers} workers: largest |gradient - single-process gradient| = {worst:.3g}, "
          f"|loss - single-process loss| = {worst_loss:.3g}")


def test_two_workers_match_single_process() -> None:
    check(run(2), 2)


@pytest.mark.slow
def test_four_workers_match_single_process() -> None:
    check(run(4), 4)
