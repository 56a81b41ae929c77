"""Constructed graph statistics and cluster shapes shared by the simulator tests (no graph is measured)."""

from __future__ import annotations

from typing import Any

import numpy as np

from gnnplan.simulator.hardware.spec import ClusterSpec, load_cluster
from gnnplan.simulator.workload.graphstats import CACHE_GRID, DatasetSummary, SampleStats
from gnnplan.simulator.workload.inference import CHUNK_VERTICES, InferenceStats

RMAT_SUMMARY = DatasetSummary("rmat-test", num_vertices=100_000, num_edges=3_200_000, feature_dim=128,
                              num_classes=16, num_train=10_000, num_val=5_000, num_test=10_000)


def make_inference(num_machines: int = 4, gpus_per_machine: int = 1, partitioner: str = "metis") -> InferenceStats:
    """Constructed inference-block statistics of :data:`RMAT_SUMMARY` (as ``inference.inference_stats`` returns):
    a rank's even share, chunks of ``CHUNK_VERTICES``, 3.5 sources per destination (capped at every vertex) and
    the mean in-degree per destination, an even share of the edges per machine, half of the sources a random pick
    would put on other machines (ranks) there; a random partition reaches 20% more sources than METIS."""
    n = RMAT_SUMMARY.num_vertices
    share = n / (num_machines * gpus_per_machine)
    dst = min(float(CHUNK_VERTICES), share)
    src = min(float(n), dst * 3.5 * (1.2 if partitioner == "random" else 1.0))
    workers = num_machines * gpus_per_machine
    return InferenceStats(share, dst, src, dst * RMAT_SUMMARY.num_edges / n, 1.0 / num_machines,
                          0.5 * (num_machines - 1) / num_machines, 0.5 * (workers - 1) / workers)


def fake_inference_stats(ref: Any, num_machines: int, gpus_per_machine: int, partitioner: str,
                         seed: int = 0) -> InferenceStats:
    """:func:`make_inference` with ``inference.inference_stats``' signature: what tests patch in for it."""
    return make_inference(num_machines, gpus_per_machine, partitioner)


def make_stats(num_machines: int = 4, gpus_per_machine: int = 1, batch_size_per_worker: int = 256,
               partitioner: str = "metis", fanouts: tuple[int, ...] = (10, 10)) -> SampleStats:
    """Plausible per-worker statistics of a 2-layer [10, 10] batch on a power-law graph.

    Hit rate grows as sqrt(cache fraction) (reaching 1 at 1); of the misses, a share (M-1)/M * 0.8 is remote
    (0 on one machine), the rest local.
    """
    grid = np.array(CACHE_GRID)
    hit = np.sqrt(grid)
    remote_share = 0.8 * (num_machines - 1) / num_machines
    remote = (1.0 - hit) * remote_share
    local = 1.0 - hit - remote
    seeds = float(batch_size_per_worker)
    return SampleStats(
        fanouts=tuple(fanouts), batch_size_per_worker=batch_size_per_worker, num_machines=num_machines,
        gpus_per_machine=gpus_per_machine, partitioner=partitioner,
        num_src_vertices=(60.0 * seeds, 9.0 * seeds), num_dst_vertices=(9.0 * seeds, seeds),
        num_edges=(80.0 * seeds, 9.5 * seeds), cache_fractions=tuple(CACHE_GRID), hit_fraction=tuple(hit),
        local_miss_fraction=tuple(local), remote_miss_fraction=tuple(remote), edge_cut_fraction=0.35)


def shaped(preset: str, machines: int, gpus: int, **network: Any) -> ClusterSpec:
    """Preset ``preset`` resized to ``machines`` x ``gpus``, with ``network`` fields replaced."""
    cl = load_cluster(preset)
    update: dict[str, Any] = {"num_machines": machines, "gpus_per_machine": gpus}
    if network:
        update["network"] = cl.network.model_copy(update=network)
    return cl.model_copy(update=update)


def represented(result: Any) -> set[int]:
    """The ``machines_represented`` of a result's epoch spans (1: the representative fast path)."""
    return {s.args["machines_represented"] for s in result.spans if s.phase == "epoch"}


def assert_same(fast: Any, full: Any, rel: float, memory: bool = False) -> None:
    """The fast path's epoch, breakdown and bytes (and with ``memory`` its peak memory) equal the full
    simulation's (within ``rel``)."""
    import pytest

    assert fast.epoch_time_s == pytest.approx(full.epoch_time_s, rel=rel)
    for phase, seconds in full.breakdown_s.items():
        assert fast.breakdown_s[phase] == pytest.approx(seconds, rel=rel, abs=1e-15), phase
    assert fast.bytes_per_epoch == full.bytes_per_epoch
    assert not memory or fast.peak_memory_bytes == full.peak_memory_bytes
