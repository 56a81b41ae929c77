"""dp's iteration lasts as long as its slowest worker's (``SampleStats.slowest_input_ratio``): with several workers
the simulated sampling, gathering and passes grow with the ratio, while the fetch (already the busiest NIC's) and
the bytes counted per epoch do not; one worker waits for nobody."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from sim_fixtures import RMAT_SUMMARY, make_stats

from gnnplan.simulator import api
from gnnplan.simulator.hardware.spec import ClusterSpec, load_cluster
from gnnplan.simulator.workload import graphstats

KNOBS = {"cache_fraction": 0.0}


def _cluster(machines: int) -> ClusterSpec:
    return load_cluster("local").model_copy(update={"num_machines": machines, "gpus_per_machine": 1})


def _simulate(monkeypatch: pytest.MonkeyPatch, machines: int, ratio: float) -> Any:
    def sample_stats(ref: Any, fanouts: tuple[int, ...], batch_size_per_worker: int, num_machines: int,
                     gpus_per_machine: int, partitioner: str, seed: int = 0) -> graphstats.SampleStats:
        stats = make_stats(num_machines, gpus_per_machine, batch_size_per_worker, partitioner, fanouts)
        return dataclasses.replace(stats, slowest_input_ratio=ratio)

    monkeypatch.setattr(graphstats, "sample_stats", sample_stats, raising=False)
    monkeypatch.setattr(graphstats, "dataset_summary", lambda ref: RMAT_SUMMARY, raising=False)
    return api.simulate(_cluster(machines), "rmat100k-sage", "dp", KNOBS)


def test_the_slowest_worker_sets_the_pace(monkeypatch: pytest.MonkeyPatch) -> None:
    even, slow = _simulate(monkeypatch, 2, 1.0), _simulate(monkeypatch, 2, 1.5)
    for phase in ("forward", "backward"):
        assert slow.breakdown_s[phase] == pytest.approx(1.5 * even.breakdown_s[phase], rel=1e-9)
    assert slow.breakdown_s["sample"] > even.breakdown_s["sample"]
    assert slow.breakdown_s["fetch"] == pytest.approx(even.breakdown_s["fetch"], rel=1e-9)
    assert slow.bytes_per_epoch == even.bytes_per_epoch
    assert slow.epoch_time_s > even.epoch_time_s


def test_one_worker_waits_for_nobody(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _simulate(monkeypatch, 1, 1.5).epoch_time_s == _simulate(monkeypatch, 1, 1.0).epoch_time_s
