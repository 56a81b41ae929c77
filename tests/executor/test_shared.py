"""A machine's workers share its graph, GCN weights, owner map, labels and feature partition (executor/shared.py):
one copy per machine, the same values as one process builds, nothing left in /dev/shm, and the measured host
peak counts the shared pages once."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from shared_workers import (  # noqa: E402
    peak_without_shared,
    shared_objects,
    shared_vs_private,
    training_data,
)

from gnnplan.executor.launch import spawn  # noqa: E402
from gnnplan.executor.shared import SHM_DIR, resident_shared_bytes  # noqa: E402

MB = 2**20
CORA_VERTICES = 2708


def modelled_vertex_maps(strategy: str, arch: str, knobs: dict) -> float:
    """The int64 maps over all vertices a machine's workers share in the simulator's memory model of ``strategy``
    on Cora, 2 machines x 2 GPUs (its ``vertex maps (int64)`` part, less gsplit's maps each worker keeps)."""
    from gnnplan.simulator.api import simulate
    from gnnplan.simulator.hardware.spec import load_cluster
    from gnnplan.simulator.workload.spec import load_workload

    cluster = load_cluster("4x-a100-10gbe").model_copy(update={"num_machines": 2, "gpus_per_machine": 2})
    workload = load_workload("cora-sage")
    workload = workload.model_copy(update={"model": workload.model.model_copy(update={"arch": arch})})
    parts = simulate(cluster, workload, strategy, knobs).peak_memory_parts
    own = 2 * 2 if strategy == "gsplit" else 0  # gsplit's workers each keep their rows' and their cache's slots
    return parts["host"]["vertex maps (int64)"] / (8 * CORA_VERTICES) - own


def test_objects_are_one_copy_per_machine_and_leave_no_name() -> None:
    ranks = spawn(shared_objects, 2, ())["ranks"]
    for r in ranks:
        assert r["values_7"] == -1  # rank 0's write after sharing: one copy of the array
        assert r["values_sum"] == 3 * (999 * 1000 // 2) - 21
        assert r["same_edges"] and r["csc_edges"] == r["num_indices"] == 200_000
        assert r["left"] == []  # names removed once every rank attached
    attached = ranks[1]
    # rank 1 never built the graph: reading its COO and CSC arrays maps shared pages (3 int64 arrays of 200k)
    assert attached["resident_after"] - attached["resident_before"] >= 3 * 200_000 * 8
    assert not list(SHM_DIR.glob("gnnplan-*"))


@pytest.mark.parametrize(("preset", "cache_fraction"), [("cora-gcn", 0.2), ("citeseer-sage", 0.0)])
def test_shared_training_data_equals_each_rank_building_its_own(preset: str, cache_fraction: float) -> None:
    """Two ranks of one machine read the same values one process builds alone (in-process, one machine of one)."""
    from gnnplan.executor.launch import run_in_process

    shared = spawn(training_data, 2, (preset, cache_fraction))["ranks"]
    alone = run_in_process(training_data, (preset, cache_fraction))["ranks"][0]
    for r in shared:
        for key in ("src", "dst", "labels", "owner", "rows", "cache", "train"):
            np.testing.assert_array_equal(r[key], alone[key], err_msg=key)
        if alone["weights"] is None:
            assert r["weights"] is None
        else:
            np.testing.assert_array_equal(r["weights"], alone["weights"])
    assert shared[0]["num_nodes"] == alone["num_nodes"] and len(alone["rows"]) == alone["num_nodes"]
    assert not list(SHM_DIR.glob("gnnplan-*"))


def test_machine_peak_counts_shared_pages_once() -> None:
    """Every rank touches a shared 64 MiB array in a measured phase: counted, each rank's peak holds it; left out,
    it drops by what the rank maps (all 64 MiB), so a machine's sum keeps it once (on local rank 0)."""
    ranks = spawn(peak_without_shared, 2, ())["ranks"]
    for r in ranks:
        assert r["total_True"] == r["total_False"] == 8 * 2**20
        assert r["resident"] >= 64 * MB
        assert r["peak_True"] - r["peak_False"] == pytest.approx(r["resident"], abs=1 * MB)


def test_resident_shared_bytes_reads_only_this_packages_mappings(tmp_path: Path) -> None:
    smaps = tmp_path / "smaps"
    smaps.write_text(
        "7f00-7f10 rw-s 00000000 00:1a 123 /dev/shm/gnnplan-abc-m0-features.npy (deleted)\n"
        "Size:                 64 kB\nRss:                  40 kB\nPss:                  20 kB\n"
        "7f10-7f20 rw-s 00000000 00:1a 124 /dev/shm/other-thing\n"
        "Size:                 64 kB\nRss:                  64 kB\n"
        "7f20-7f30 r--p 00000000 08:01 125 /usr/lib/libtorch.so\n"
        "Rss:                 100 kB\n"
        "7f30-7f40 rw-s 00000000 00:1a 126 /dev/shm/gnnplan-abc-m0-graph_0_csc_indices\n"
        "Size:                 64 kB\nRss:                   8 kB\n")
    assert resident_shared_bytes(smaps) == (40 + 8) * 1024
    assert resident_shared_bytes(tmp_path / "missing") == 0


@pytest.mark.parametrize(("strategy", "arch", "knobs"), [
    ("dp", "gcn", {"cache_fraction": 0.2}),
    ("dp", "gcn", {"partitioner": "random", "graph_structure": "partitioned", "cache_fraction": 0.1}),
    ("dp", "sage", {"cache_fraction": 0.2, "cache_placement": "partitioned"}),
    ("hopgnn", "gcn", {"num_steps": 2}),
    ("gsplit", "gat", {"cache_fraction": 0.1}),
])
def test_training_is_the_same_with_shared_and_private_copies(strategy: str, arch: str, knobs: dict) -> None:
    """2 machines x 2 workers: every shared object (graph or part, GCN weights, owners, labels, features, the feature
    store's positions, cache slots or peer-cache maps, the evaluator's maps, gsplit's split) gives the same
    parameters and accuracy after 2 epochs as private copies, bit for bit; sharing maps pages, the fallback maps none
    and warns."""
    ranks = spawn(shared_vs_private, 4, (strategy, arch, knobs, 2), gpus_per_machine=2)["ranks"]
    arrays = ranks[0]["shared"]["arrays"]
    maps = [key for key, (dtype, shape) in arrays.items() if dtype == "int64" and tuple(shape) == (CORA_VERTICES,)]
    assert len(maps) == modelled_vertex_maps(strategy, arch, knobs), arrays  # what the memory model charges
    assert ranks[0]["private"]["arrays"] == {}
    for r in ranks:
        assert r["shared"]["accuracy"] == r["private"]["accuracy"]
        for a, b in zip(r["shared"]["params"], r["private"]["params"], strict=True):
            np.testing.assert_array_equal(a, b)
        assert r["shared"]["resident"] > 0 and r["shared"]["warnings"] == []
        assert r["private"]["resident"] == 0
        assert bool(r["private"]["warnings"]) == (r["rank"] % 2 == 0)  # local rank 0 warns, once per object
        assert all("each worker of the machine keeps its own copy" in w for w in r["private"]["warnings"])
    assert not list(SHM_DIR.glob("gnnplan-*"))
