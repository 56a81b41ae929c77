"""Fixtures of the simulator tests: graph statistics are constructed, not measured (see sim_fixtures)."""

from __future__ import annotations

from typing import Any

import pytest
from sim_fixtures import RMAT_SUMMARY, fake_inference_stats, make_stats

from gnnplan.simulator.workload.graphstats import SampleStats


@pytest.fixture
def fake_graphstats(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Make ``simulator.api`` use :func:`make_stats`, :func:`fake_inference_stats` and :data:`RMAT_SUMMARY`; returns the
    calls' arguments (of ``sample_stats``)."""
    from gnnplan.simulator.workload import graphstats, inference

    calls: list[dict[str, Any]] = []

    def sample_stats(ref: Any, fanouts: tuple[int, ...], batch_size_per_worker: int, num_machines: int,
                     gpus_per_machine: int, partitioner: str, seed: int = 0,
                     seed_split: str = "owner") -> SampleStats:
        calls.append({"fanouts": fanouts, "batch_size_per_worker": batch_size_per_worker,
                      "num_machines": num_machines, "gpus_per_machine": gpus_per_machine,
                      "partitioner": partitioner, "seed": seed, "seed_split": seed_split})
        return make_stats(num_machines, gpus_per_machine, batch_size_per_worker, partitioner, fanouts)

    monkeypatch.setattr(graphstats, "sample_stats", sample_stats, raising=False)
    monkeypatch.setattr(graphstats, "dataset_summary", lambda ref: RMAT_SUMMARY, raising=False)
    monkeypatch.setattr(inference, "inference_stats", fake_inference_stats)
    return calls
