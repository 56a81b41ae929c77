"""The bytes every rank sends in an epoch (counted by executor.comm) equal the simulator's network bytes for
the same partition and mode; the trace has the spans the simulator predicts."""

from __future__ import annotations

import pytest
from neutronstar_workers import make_plan, make_workload, several

from gnnplan.executor.launch import spawn
from gnnplan.simulator.api import simulate

KNOBS = ({"mode": "depcomm"}, {"mode": "depcomm", "ring": False, "overlap": False}, {"mode": "depcache"},
         {"mode": "hybrid", "cache_budget_bytes": 1.0e6, "partitioner": "metis"},
         {"mode": "hybrid", "cache_budget_bytes": 7.0e6})


@pytest.fixture(scope="module")
def measured():  # type: ignore[no-untyped-def]
    wl = make_workload("gcn")
    calls = [("epoch_bytes", (wl, knobs)) for knobs in KNOBS]
    return wl, spawn(several, 2, (calls,))


def test_bytes_per_epoch_equal_prediction(measured) -> None:  # type: ignore[no-untyped-def]
    wl, results = measured
    seen = set()
    for knobs, r in zip(KNOBS, results):
        plan = make_plan(wl, 2, knobs)
        predicted = simulate(plan.cluster, wl, "neutronstar", knobs).bytes_per_epoch["network"]
        print(f"{knobs}: measured {r['bytes']} B/epoch, predicted {predicted:.0f} B/epoch")
        assert r["bytes"] == [predicted, predicted], knobs
        seen.add(predicted)
    assert len(seen) == len(KNOBS) - 1  # ring and all_to_all move the same bytes; the modes differ


def test_trace_has_exchange_and_compute_spans(measured) -> None:  # type: ignore[no-untyped-def]
    wl, results = measured
    spans = results[0]["spans"]  # depcomm, 2 epochs, 2 ranks
    phases = {s.phase for s in spans}
    assert {"exchange", "forward", "backward", "all_reduce", "optimizer", "iteration", "epoch"} <= phases
    exchange = [s for s in spans if s.phase == "exchange" and s.epoch == 0]
    # forward at both layers, backward at layer 2 only (raw features need no gradient), on both ranks
    assert sorted((s.args["layer"], s.args["direction"]) for s in exchange) == \
        sorted([(1, "forward"), (2, "forward"), (2, "backward")] * 2)
    assert all(s.nbytes > 0 and s.stream == "network" for s in exchange)
    assert all(s.flops > 0 for s in spans if s.phase in ("forward", "backward"))
    for r in results:
        assert sum(a.val_total for a in r["acc"]) == 500 and sum(a.test_total for a in r["acc"]) == 1000
