"""dp's fetch ends when the busiest NIC is done (``SampleStats.remote_busiest_ratio``): the simulated fetch grows
with the ratio while the bytes counted stay the average, and calibration on such a trace still recovers the
network bandwidth (its fetch rows carry the busiest NIC's bytes)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from sim_fixtures import RMAT_SUMMARY, make_stats

from gnnplan.simulator import api
from gnnplan.simulator.calibrate import calibrate_files, with_params
from gnnplan.simulator.hardware.spec import ClusterSpec, load_cluster
from gnnplan.simulator.workload import graphstats
from gnnplan.simulator.workload.graphstats import CACHE_GRID

KNOBS = {"cache_fraction": 0.0}


def _cluster() -> ClusterSpec:
    """The CPU ``local`` preset as 2 machines x 1 worker (no PCIe staging: the NIC alone carries a fetch), its
    collectives' fixed cost at 1 us, so that the rows dominate a fetch at cache 0 (the preset's 1.06 ms per call
    would be most of it)."""
    cluster = load_cluster("local")
    network = cluster.network.model_copy(update={"per_collective_s": 1e-6, "per_all_to_all_s": 1e-6})
    return cluster.model_copy(update={"num_machines": 2, "gpus_per_machine": 1, "network": network})


def _use_ratio(monkeypatch: pytest.MonkeyPatch, ratio: float) -> None:
    def sample_stats(ref: Any, fanouts: tuple[int, ...], batch_size_per_worker: int, num_machines: int,
                     gpus_per_machine: int, partitioner: str, seed: int = 0) -> graphstats.SampleStats:
        stats = make_stats(num_machines, gpus_per_machine, batch_size_per_worker, partitioner, fanouts)
        return dataclasses.replace(stats, remote_busiest_ratio=(ratio,) * len(CACHE_GRID))

    monkeypatch.setattr(graphstats, "sample_stats", sample_stats, raising=False)
    monkeypatch.setattr(graphstats, "dataset_summary", lambda ref: RMAT_SUMMARY, raising=False)


def _fetch(monkeypatch: pytest.MonkeyPatch, ratio: float) -> tuple[float, float]:
    _use_ratio(monkeypatch, ratio)
    result = api.simulate(_cluster(), "rmat100k-sage", "dp", KNOBS)
    return result.breakdown_s["fetch"], result.bytes_per_epoch["network"]


def test_fetch_grows_with_the_busiest_ratio_and_bytes_do_not(monkeypatch: pytest.MonkeyPatch) -> None:
    base, base_bytes = _fetch(monkeypatch, 1.0)
    double, double_bytes = _fetch(monkeypatch, 2.0)
    triple, _ = _fetch(monkeypatch, 3.0)
    assert double > 1.5 * base  # the rows dominate a fetch at cache 0
    assert triple - double == pytest.approx(double - base, rel=1e-9)  # linear in the busiest NIC's bytes
    assert double_bytes == base_bytes


def test_calibration_recovers_the_bandwidth_of_a_busy_fetch(monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    _use_ratio(monkeypatch, 2.0)
    truth = _cluster()
    result = api.simulate(truth, "rmat100k-sage", "dp", KNOBS)
    trace = api.predicted_trace(result, tmp_path / "busy.json",
                                api.trace_metadata(truth, "rmat100k-sage", "dp", result))
    start = with_params(truth, {"network.bandwidth_bytes_per_s": 2.0 * truth.network.bandwidth_bytes_per_s})
    fitted, report = calibrate_files([trace], start)
    assert report["parameters"]["network.bandwidth_bytes_per_s"]["fitted"]
    assert fitted.network.bandwidth_bytes_per_s == pytest.approx(truth.network.bandwidth_bytes_per_s, rel=0.05)
