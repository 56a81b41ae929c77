"""Calibration of host.process_bytes from measured peak host memory (simulator.calibrate_memory): the traces'
implied per-process constant, its median, held-out errors per configuration, and the calibrated cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gnnplan.simulator import api
from gnnplan.simulator.calibrate import calibrate
from gnnplan.simulator.calibrate_memory import calibrate_memory, measured_host_bytes
from gnnplan.simulator.hardware.spec import ClusterSpec, load_cluster
from gnnplan.simulator.plan import Plan
from gnnplan.simulator.trace import read_trace
from gnnplan.simulator.workload.spec import load_workload

MB = 1e6
CLUSTER = load_cluster("local")
CLUSTER = CLUSTER.model_copy(update={"host": CLUSTER.host.model_copy(update={"process_bytes": 300 * MB})})
"""The bundled preset with a per-process constant of 300 MB (the figures below are written against it)."""


def _plan(cache_fraction: float) -> Plan:
    return Plan(strategy="dp", knobs={"cache_fraction": cache_fraction}, num_workers=2,
                cluster=CLUSTER.model_copy(update={"num_machines": 2}), workload=load_workload("cora-sage"))


PLANS = {"a": _plan(0.0), "b": _plan(0.1), "c": _plan(0.2)}
DATA = {"a": 40 * MB, "b": 60 * MB, "c": 90 * MB}  # the model's data terms per machine
COPIES = {"a": 1.0, "b": 2.0, "c": 1.0}             # worker processes the model counts per machine


def host(cluster: ClusterSpec, plan: Plan) -> float:
    """A host memory model linear in host.process_bytes, as every strategy's is."""
    name = next(n for n, p in PLANS.items() if p.knobs == plan.knobs)
    return DATA[name] + COPIES[name] * cluster.host.process_bytes


def test_the_implied_constant_is_recovered_and_predicts_the_held_out_configurations() -> None:
    truth = 350 * MB
    traces = [(n, PLANS[n], DATA[n] + COPIES[n] * truth) for n in PLANS]
    fitted, report = calibrate_memory(traces, CLUSTER, host)
    assert fitted == pytest.approx(truth) and report["after"] == fitted
    assert report["before"] == CLUSTER.host.process_bytes == 300 * MB
    assert report["implied_bytes"] == pytest.approx({n: truth for n in PLANS})
    for n in PLANS:  # the model read off by two simulations: host = zero_bytes + copies x process_bytes
        assert (report["fit"][n]["zero_bytes"], report["fit"][n]["copies"]) == pytest.approx((DATA[n], COPIES[n]))
    rows = {r["trace"]: r for r in report["held_out"]["rows"]}
    for n in PLANS:  # each configuration from the other two: the same constant, so exact
        measured = DATA[n] + COPIES[n] * truth
        assert rows[n]["predicted_bytes"] == pytest.approx(measured) and rows[n]["error_fraction"] == pytest.approx(0)
        assert rows[n]["predicted_before_bytes"] == pytest.approx(DATA[n] + COPIES[n] * 300 * MB)
        assert rows[n]["error_before_fraction"] == pytest.approx((COPIES[n] * (300 - 350) * MB) / measured)
        assert rows[n]["fitted_on_traces"] == 2


def test_the_median_resists_one_trace_and_the_held_out_row_shows_it() -> None:
    measured = {"a": DATA["a"] + 350 * MB, "b": DATA["b"] + 2 * 360 * MB, "c": DATA["c"] + 500 * MB}
    fitted, report = calibrate_memory([(n, PLANS[n], measured[n]) for n in PLANS], CLUSTER, host)
    assert fitted == pytest.approx(360 * MB)  # median of 350, 360, 500
    rows = {r["trace"]: r for r in report["held_out"]["rows"]}
    assert rows["c"]["predicted_bytes"] == pytest.approx(DATA["c"] + 355 * MB)  # median of a and b only
    assert rows["c"]["error_fraction"] == pytest.approx((DATA["c"] + 355 * MB) / measured["c"] - 1)


def test_traces_without_a_peak_are_listed_and_one_configuration_holds_nothing_out() -> None:
    fitted, report = calibrate_memory([("a", PLANS["a"], None), ("a2", PLANS["a"], DATA["a"] + 320 * MB),
                                       ("a3", PLANS["a"], DATA["a"] + 340 * MB)], CLUSTER, host)
    assert fitted == pytest.approx(330 * MB) and report["not_measured"] == ["a"]
    assert report["held_out"] == {"rows": [], "reason": "one configuration: nothing to hold out"}
    assert report["fit"]["a2"]["fit_host_bytes"] == pytest.approx(DATA["a"] + 330 * MB)
    none, empty = calibrate_memory([("a", PLANS["a"], None)], CLUSTER, host)
    assert none is None and empty["after"] is None
    assert empty["held_out"]["reason"] == "no trace measured its peak host memory"


@pytest.mark.parametrize(("results", "value"), [
    ({"peak_memory_bytes": {"gpu": None, "host": 4.5e8}}, 4.5e8), ({"peak_memory_bytes": {"host": None}}, None),
    ({}, None), ({"peak_memory_bytes": {"host": "x"}}, None), ({"peak_memory_bytes": {"host": 0}}, None)])
def test_a_traces_measured_peak(results: dict[str, Any], value: float | None) -> None:
    assert measured_host_bytes({"results": results}) == value


def test_calibrate_carries_the_fit_into_the_calibrated_cluster(tmp_path: Path) -> None:
    """On simulator-made traces of two configurations, the measured peaks set 10 MB above the model's per
    process: the calibrated cluster's host.process_bytes is the fit, its source names the traces, its prior the
    value before, and the simulator with it reproduces a third configuration's peak."""
    cluster = CLUSTER.model_copy(update={"num_machines": 2})
    loaded = {}
    for name, knobs in (("a.json", {"cache_fraction": 0.0}), ("b.json", {"cache_fraction": 0.3})):
        result = api.simulate(cluster, "cora-sage", "dp", knobs)
        meta = api.trace_metadata(cluster, "cora-sage", "dp", result)
        copies = 1.0  # one worker process per machine (gpus_per_machine = 1)
        peak = result.peak_memory_bytes["host"] + copies * 10 * MB
        meta["results"] = {"epoch_time_s": result.epoch_time_s, "peak_memory_bytes": {"gpu": None, "host": peak}}
        loaded[name] = read_trace(api.predicted_trace(result, tmp_path / name, meta))
    calibrated, report = calibrate(loaded, cluster)
    assert report["memory"]["after"] == pytest.approx(310 * MB)
    assert calibrated.host.process_bytes == pytest.approx(310 * MB)
    assert calibrated.priors["host.process_bytes"] == 300 * MB
    assert "a.json" in calibrated.sources["host.process_bytes"]
    third = api.simulate(calibrated, "cora-sage", "dp", {"cache_fraction": 0.6}).peak_memory_bytes["host"]
    assert third == pytest.approx(api.simulate(cluster, "cora-sage", "dp", {"cache_fraction": 0.6})
                                  .peak_memory_bytes["host"] + 10 * MB)
    del loaded["b.json"][1]["results"]["peak_memory_bytes"]
    del loaded["a.json"][1]["results"]["peak_memory_bytes"]
    plain, plain_report = calibrate(loaded, cluster)
    assert plain.host.process_bytes == cluster.host.process_bytes and plain_report["memory"]["after"] is None
