"""Calibration on ppgnn traces: the loaders' spans inform the per-row indexing cost (``host.row_index_s``) and the
storage device's concurrency (``storage.concurrency``); held-out epochs and configurations are predicted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from calibration_traces import epochs_trace

from gnnplan.simulator import api
from gnnplan.simulator.calibrate import calibrate_files, get_param, with_params
from gnnplan.simulator.hardware import pricing
from gnnplan.simulator.hardware.phase_rules import SpanRow
from gnnplan.simulator.hardware.spec import ClusterSpec, load_cluster
from gnnplan.simulator.strategies.ppgnn.calibration import CALIBRATION

WORKLOAD = "cora-sign"  # with fake_graphstats: the R-MAT test summary (10 000 training rows, 128 features)
TRUE = {"host.row_index_s": 2e-5, "storage.concurrency": 2.5}
"""The preset says 6 us per row and 32 requests at once (an NVMe drive); the truth is a slower loader and a disk
that serves 2.5 requests at once, below the fused loader's 4 I/O threads."""
KNOBS = {"fused_ssd.json": {"placement": "ssd", "loader": "fused", "batch_size": 2000},
         "baseline_host.json": {"placement": "host", "loader": "baseline", "batch_size": 2000},
         "double_buffer_ssd.json": {"placement": "ssd", "loader": "double_buffer", "batch_size": 2000}}


def _start() -> ClusterSpec:
    return load_cluster("4x-a100-10gbe").model_copy(update={"num_machines": 2})


def _traces(tmp_path: Path, truth: ClusterSpec, names: list[str], epochs: tuple[float, ...] = ()) -> list[Path]:
    paths = []
    for name in names:
        result = api.simulate(truth, WORKLOAD, "ppgnn", KNOBS[name])
        if epochs:
            paths.append(epochs_trace(result, truth, WORKLOAD, tmp_path / name, epochs))
        else:
            meta = api.trace_metadata(truth, WORKLOAD, "ppgnn", result)
            paths.append(api.predicted_trace(result, tmp_path / name, meta))
    return paths


def test_storage_reads_are_served_at_the_device_concurrency() -> None:
    cl = with_params(_start(), {"storage.concurrency": 2.5, "storage.latency_s": 1e-4})
    bw = cl.storage.bandwidth_bytes_per_s
    # 4 in flight, 2.5 served at once: 100 reads take 100 latencies / 2.5
    assert pricing.storage_reads_s(cl, 8192.0, 100, in_flight=4) == pytest.approx(100 * 1e-4 / 2.5 + 8192 / bw)
    # two readers with one request each: each gets min(2, 2.5) / 2 = 1 slot
    assert pricing.storage_reads_s(cl, 0.0, 100, in_flight=1, sharers=2) == pytest.approx(100 * 1e-4)
    assert pricing.storage_reads_s(cl, 0.0, 100, in_flight=1) == pytest.approx(100 * 1e-4)
    assert pricing.row_indexing_s(cl, 1000) == pytest.approx(1000 * cl.host.row_index_s)
    assert pricing.batch_load_s(cl) == 0.0


def test_ppgnn_traces_recover_row_index_and_concurrency(fake_graphstats: list[dict[str, Any]],
                                                        tmp_path: Path) -> None:
    start = _start()
    truth = with_params(start, TRUE)
    paths = _traces(tmp_path, truth, ["fused_ssd.json", "baseline_host.json"])
    fitted, report = calibrate_files(paths, start)
    params = report["parameters"]
    for p, value in TRUE.items():
        assert get_param(fitted, p) == pytest.approx(value, rel=0.01), p
        assert params[p]["data_share"] > 0.9 and params[p]["high"] / params[p]["low"] < 1.1, p
    assert params["host.row_index_s"]["flags"] == ["beyond 3x of prior"]  # 3.3 x the preset's 6 us
    assert params["storage.concurrency"]["flags"] == ["beyond 3x of prior"]  # 32 -> 2.5
    assert fitted.sources["storage.concurrency"] == "calibrated from fused_ssd.json, baseline_host.json " \
                                                    "(beyond 3x of prior)"
    assert report["fit"]["unpriced_phases"] == []
    for row in report["traces"].values():
        assert row["fit_epoch_time_s"] == pytest.approx(row["measured_epoch_time_s"], rel=0.005)
        assert row["predicted_epoch_time_s_before"] < 0.9 * row["measured_epoch_time_s"]


def test_baseline_workers_spans_price_the_row_indexing_and_the_load_only_the_copy(
        fake_graphstats: list[dict[str, Any]]) -> None:
    truth = with_params(_start(), TRUE)
    result = api.simulate(truth, WORKLOAD, "ppgnn", KNOBS["baseline_host.json"])
    index = [s for s in result.spans if s.phase == "row_index"]
    assert index and all(s.stream == "loader" for s in index)
    span = index[0]
    rows_matrices = span.args["num_input_vertices"] * span.args["num_matrices"]
    assert span.args["num_requests"] == rows_matrices and span.args["num_matrices"] == 3  # SIGN, hops 2
    assert span.dur_s == pytest.approx(rows_matrices * 2e-5, rel=1e-9)  # one core per DataLoader worker
    load = next(s for s in result.spans if s.phase == "load" and (s.rank, s.iteration) == (span.rank, span.iteration))
    rule = CALIBRATION["load"]
    row = SpanRow(load, {"row_index": [span], "load": [load]}, KNOBS["baseline_host.json"], truth)
    assert rule.applies(row) and rule.work(row) == {"copy_bytes": load.args["local_bytes"], "copy_messages": 3.0}
    assert rule.measured_s(row) == pytest.approx(rule.predicted_s(row), rel=1e-9)  # the copy after the wait
    assert rule.measured_s(row) < load.dur_s
    without = SpanRow(load, {"load": [load]}, KNOBS["baseline_host.json"], truth)
    assert not rule.applies(without)  # a trace without the workers' spans cannot tell the wait from the copy


def test_held_out_epochs_and_configurations(fake_graphstats: list[dict[str, Any]], tmp_path: Path) -> None:
    start = _start()
    truth = with_params(start, TRUE)
    names = list(KNOBS)
    # epoch 0 is warm-up; epoch 2 (fitted) runs at the truth, epoch 1 (held out) 10% slower
    _, report = calibrate_files(_traces(tmp_path, truth, names, epochs=(2.0, 1.1, 1.0)), start)
    for row in report["held_out"]["epochs"]["rows"]:
        truth_s = api.simulate(truth, WORKLOAD, "ppgnn", KNOBS[row["trace"]]).epoch_time_s
        assert row["measured_epoch_time_s"] == pytest.approx(1.1 * truth_s, rel=1e-9)
        assert row["predicted_s"] == pytest.approx(truth_s, rel=0.01), row["trace"]
    loco = {r["traces"][0]: r for r in report["held_out"]["configurations"]["rows"]}
    assert set(loco) == set(names)
    # the double buffer's storage reads are predicted from the fused loader's concurrency and the compute of
    # both; the baseline's row indexing only the baseline shows, so without it its epoch is predicted short
    assert abs(loco["double_buffer_ssd.json"]["error_fraction"]) < 0.02
    assert abs(loco["double_buffer_ssd.json"]["error_before_fraction"]) > 0.1
    assert loco["baseline_host.json"]["error_fraction"] < -0.1
