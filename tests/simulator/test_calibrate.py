"""Calibration: recover hidden cluster parameters from the simulator's own predicted traces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gnnplan.simulator import api
from gnnplan.simulator.calibrate import PARAMS, calibrate, calibrate_files, get_param, with_params
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.spec import load_cluster
from gnnplan.simulator.trace import Span

TRUE = {"network.bandwidth_bytes_per_s": 0.8e9, "network.latency_s": 5e-5, "pcie.bandwidth_bytes_per_s": 12e9,
        "pcie.latency_s": 1e-5, "efficiency.gather_fraction": 0.5, "efficiency.forward_fraction": 0.3,
        "efficiency.backward_fraction": 0.25, "efficiency.optimizer_fraction": 0.2,
        "host.sampling_edges_per_s_per_core": 1e7,
        "iteration_overhead_s": 2e-3}


def _traces(tmp_path: Path, cluster: Any) -> list[Path]:
    paths = []
    for name, knobs in (("a.json", {"cache_fraction": 0.0}),
                        ("b.json", {"cache_fraction": 0.3, "num_sampler_workers": 2})):
        result = api.simulate(cluster, "rmat100k-sage", "dp", knobs)
        meta = api.trace_metadata(cluster, "rmat100k-sage", "dp", result)
        paths.append(api.predicted_trace(result, tmp_path / name, meta))
    return paths


def test_calibration_recovers_hidden_parameters(fake_graphstats: list[dict[str, Any]], tmp_path: Path) -> None:
    start = load_cluster("4x-a100-10gbe")
    truth = with_params(start, TRUE)
    paths = _traces(tmp_path, truth)
    fitted, report = calibrate_files(paths, start)
    for p in PARAMS:
        assert report["parameters"][p]["constrained"], p
        assert get_param(fitted, p) == pytest.approx(TRUE[p], rel=0.02), p
        assert report["parameters"][p]["before"] == get_param(start, p)
    assert fitted.name == "4x-a100-10gbe-calibrated"
    assert fitted.sources["network.latency_s"] == "calibrated from a.json, b.json"
    assert fitted.sources["gpu.peak_flops_per_s"] == start.sources["gpu.peak_flops_per_s"]
    for name in ("a.json", "b.json"):
        row = report["traces"][name]
        assert row["predicted_epoch_time_s_after"] == pytest.approx(row["measured_epoch_time_s"], rel=0.01)
        assert abs(row["predicted_epoch_time_s_before"] / row["measured_epoch_time_s"] - 1) > 0.2


def test_parameters_the_traces_do_not_inform_stay(fake_graphstats: list[dict[str, Any]], tmp_path: Path) -> None:
    one = load_cluster("4x-a100-10gbe").model_copy(update={"num_machines": 1})
    truth = with_params(one, {"efficiency.forward_fraction": 0.4, "host.sampling_edges_per_s_per_core": 5e6})
    result = api.simulate(truth, "rmat100k-sage", "dp", {})
    path = api.predicted_trace(result, tmp_path / "one.json", api.trace_metadata(truth, "rmat100k-sage", "dp", result))
    fitted, report = calibrate_files([path], one)
    params = report["parameters"]
    # one machine, one GPU: no fetch and no all-reduce, so the network is not informed
    for p in ("network.bandwidth_bytes_per_s", "network.latency_s"):
        assert not params[p]["constrained"] and get_param(fitted, p) == get_param(one, p)
        assert p not in fitted.sources or "calibrated" not in fitted.sources[p]
    assert get_param(fitted, "efficiency.forward_fraction") == pytest.approx(0.4, rel=0.02)
    assert get_param(fitted, "host.sampling_edges_per_s_per_core") == pytest.approx(5e6, rel=1e-3)


def test_phases_without_a_rule_are_ignored_and_reported(fake_graphstats: list[dict[str, Any]]) -> None:
    cluster = load_cluster("4x-a100-10gbe")
    result = api.simulate(cluster, "rmat100k-sage", "dp", {})
    meta = api.trace_metadata(cluster, "rmat100k-sage", "dp", result)
    extra = [Span(s.rank, "checkpoint", s.start_s, 1.0, epoch=s.epoch, iteration=s.iteration, nbytes=1e9)
             for s in result.spans if s.phase == "load"]
    plain = calibrate({"t.json": (result.spans, meta)}, cluster, simulate_fn=lambda cl, plan: result)[1]
    mixed = calibrate({"t.json": (result.spans + extra, meta)}, cluster, simulate_fn=lambda cl, plan: result)[1]
    assert plain["fit"]["unpriced_phases"] == [] and mixed["fit"]["unpriced_phases"] == ["checkpoint"]
    assert mixed["parameters"] == plain["parameters"]
    with pytest.raises(SpecError, match="no span their strategies' CALIBRATION prices.*checkpoint"):
        calibrate({"t.json": (extra, meta)}, cluster)


def test_calibrate_rejects_traces_without_a_plan(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="no 'plan'"):
        calibrate({"x.json": ([], {})}, "4x-a100-10gbe")
    with pytest.raises(SpecError, match="at least one trace"):
        calibrate({}, "4x-a100-10gbe")
    with pytest.raises(SpecError, match="does not exist"):
        calibrate_files([tmp_path / "missing.json"], "4x-a100-10gbe")
