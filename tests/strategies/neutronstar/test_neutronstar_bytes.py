"""The bytes every rank sends in an epoch (counted by executor.comm) equal the simulator's network bytes for
the same partition and mode; the trace has the spans the simulator predicts, and on machines of several workers
its exchange spans tell the bytes that cross machines apart as the simulator's do (calibration prices those)."""

from __future__ import annotations

import pytest
from neutronstar_workers import exchange_bytes, make_plan, make_workload, several

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
    # the evaluation after training is not traced: no span outside the trained epochs (2026-12-01: its forward's
    # spans were there at epoch -1, as training phases)
    assert {s.epoch for s in spans} == {0, 1}
    exchange = [s for s in spans if s.phase == "exchange" and s.epoch == 0]
    # forward at both layers, backward at layer 2 only (raw features need no gradient), on both ranks
    assert sorted((s.args["layer"], s.args["direction"]) for s in exchange) == \
        sorted([(1, "forward"), (2, "forward"), (2, "backward")] * 2)
    assert all(s.nbytes > 0 and s.stream == "network" for s in exchange)
    assert all(s.flops > 0 for s in spans if s.phase in ("forward", "backward"))
    for r in results:
        assert sum(a.val_total for a in r["acc"]) == 500 and sum(a.test_total for a in r["acc"]) == 1000


def test_exchange_spans_count_the_bytes_across_machines_as_the_simulator() -> None:
    # 2 machines x 2 workers: each rank exchanges with one peer of its machine and two of the other
    wl, knobs = make_workload("gcn"), {"mode": "depcomm", "ring": False, "overlap": False}
    measured = spawn(exchange_bytes, 4, (wl, knobs), gpus_per_machine=2)
    plan = make_plan(wl, 4, knobs, gpus_per_machine=2)
    result = simulate(plan.cluster, wl, "neutronstar", knobs)
    predicted = {(s.rank, s.args["layer"], s.args["direction"]): (s.args["network_bytes"],
                                                                  s.args["network_received_bytes"])
                 for s in result.spans if s.phase == "exchange" and s.epoch == 0}
    assert predicted and set(predicted) <= set(measured)
    for key, value in predicted.items():
        assert measured[key][:2] == pytest.approx(value, rel=1e-9), key
    # the bytes to the peer on the same machine are not among those that cross machines
    assert all(0 < across < sent and received > 0 for across, received, sent in measured.values())
