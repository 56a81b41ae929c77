"""Graph statistics: exact block sizes and cache splits on a hand-made graph, partition quality on Cora, the
disk cache (warm calls neither sample nor load the graph nor import DGL), and determinism."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gnnplan.simulator.workload import graphstats, owners
from gnnplan.simulator.workload.graphstats import CACHE_GRID, DatasetSummary, SampleStats

ROOT = Path(__file__).resolve().parents[2]

# Hand-made directed graph (src -> dst), 7 vertices. In-neighbours: 0 <- {1, 2}, 1 <- {2}, 2 <- {3, 4},
# 3 <- {0}, 4 <- {}, 5 <- {6}, 6 <- {5}. In-degrees 2, 1, 2, 1, 0, 1, 1.
EDGES = [(1, 0), (2, 0), (2, 1), (3, 2), (4, 2), (0, 3), (6, 5), (5, 6)]
NUM_VERTICES = 7
TRAIN = [0, 5]


def _write_csv_gz(path: Path, rows: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as fh:
        fh.write("".join(f"{r}\n" for r in rows))


@pytest.fixture
def tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The hand-made graph as an OGB raw-layout folder, with a private statistics cache."""
    monkeypatch.setenv("GNNPLAN_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "tiny"
    raw = folder / "raw"
    _write_csv_gz(raw / "edge.csv.gz", [f"{s},{d}" for s, d in EDGES])
    _write_csv_gz(raw / "node-feat.csv.gz", [f"{v}.0,1.0" for v in range(NUM_VERTICES)])
    _write_csv_gz(raw / "node-label.csv.gz", [str(v % 2) for v in range(NUM_VERTICES)])
    _write_csv_gz(raw / "num-node-list.csv.gz", [str(NUM_VERTICES)])
    _write_csv_gz(raw / "num-edge-list.csv.gz", [str(len(EDGES))])
    split = folder / "split" / "hand"
    _write_csv_gz(split / "train.csv.gz", [str(v) for v in TRAIN])
    _write_csv_gz(split / "valid.csv.gz", ["1"])
    _write_csv_gz(split / "test.csv.gz", ["2", "3"])
    return str(folder)


@pytest.fixture
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GNNPLAN_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_dataset_summary(tiny: str) -> None:
    assert graphstats.dataset_summary(tiny) == DatasetSummary("tiny", 7, 8, 2, 2, 2, 1, 2)
    assert graphstats.dataset_summary("cora") == DatasetSummary("cora", 2708, 10556, 1433, 7, 140, 500, 1000)


def test_full_neighbourhood_blocks_match_hand_computed_sizes(tiny: str) -> None:
    # One worker, batches of one seed: seed 0 and seed 5 (one batch each per epoch).
    # Seed 0: layer-2 block dst {0}, src {0, 1, 2}, edges 2; layer-1 block dst {0, 1, 2},
    #         src {0, 1, 2, 3, 4}, edges 2 + 1 + 2 = 5.
    # Seed 5: layer-2 block dst {5}, src {5, 6}, edges 1; layer-1 block dst {5, 6}, src {5, 6}, edges 2.
    s = graphstats.sample_stats(tiny, [-1, -1], 1, 1, 1, "random", num_batches=4)
    assert s.num_dst_vertices == (2.5, 1.0)
    assert s.num_src_vertices == (3.5, 2.5)
    assert s.num_edges == (3.5, 1.5)
    assert s.edge_cut_fraction == 0.0
    # In-degree order (ties to the lower id): 0, 2, 1, 3, 5, 6, 4. floor(c * 7) cached vertices.
    # Input sets {0,1,2,3,4} and {5,6} (7 inputs per pair of batches).
    expected_hits = {0.0: 0, 0.2: 1, 0.3: 2, 0.5: 3, 0.75: 5, 1.0: 7}
    for c, hits in expected_hits.items():
        hit, local, remote = s.access(c)
        assert hit == pytest.approx(hits / 7, abs=1e-12)
        assert local == pytest.approx(1 - hits / 7, abs=1e-12)
        assert remote == 0.0


def test_larger_batch_than_seeds_takes_what_there_is(tiny: str) -> None:
    # Both training vertices in one batch: dst {0, 5}, src {0, 1, 2, 5, 6}; then all 7 vertices.
    s = graphstats.sample_stats(tiny, [-1, -1], 64, 1, 1, "random", num_batches=2)
    assert s.num_dst_vertices == (5.0, 2.0)
    assert s.num_src_vertices == (7.0, 5.0)
    assert s.num_edges == (7.0, 3.0)


def test_two_machines_split_inputs_by_owner(tiny: str) -> None:
    from gnnplan.simulator.workload.partition import partition

    src, dst = np.array([a for a, _ in EDGES]), np.array([b for _, b in EDGES])
    owner = partition(src, dst, NUM_VERTICES, 2, "random", seed=2)
    assert owner.tolist() == [1, 0, 0, 1, 0, 0, 1]  # the premise of the hand computation below
    s = graphstats.sample_stats(tiny, [-1, -1], 1, 2, 1, "random", seed=2, num_batches=3)
    # split_seeds: machine 1 owns seed 0, machine 0 owns seed 5; each keeps its own.
    # Seed 0 on machine 1: inputs {0, 1, 2, 3, 4}, remote {1, 2, 4}. Seed 5 on machine 0: inputs {5, 6},
    # remote {6}. Cut edges: 1->0, 2->0, 3->2, 6->5, 5->6 (5 of 8).
    assert s.num_src_vertices == (3.5, 2.5)
    assert s.remote_miss_fraction[0] == pytest.approx(4 / 7, abs=1e-12)
    assert s.local_miss_fraction[0] == pytest.approx(3 / 7, abs=1e-12)
    assert s.edge_cut_fraction == 5 / 8
    # At cache fraction 0.5 vertices {0, 2, 1} are cached: remote misses {4} and {6}, local misses {3}, {5}.
    assert s.access(0.5) == pytest.approx((3 / 7, 2 / 7, 2 / 7), abs=1e-12)
    # Each iteration machine 1 receives 3 rows (1, 2, 4) that machine 0 sends, machine 0 receives 1 (6): the busiest
    # NIC moves 3 rows, the average machine receives 2. At 0.5 both receive and send one row.
    assert s.remote_busiest_ratio[0] == 1.5
    assert s.busiest_ratio(0.0) == 1.5 and s.busiest_ratio(0.5) == 1.0
    # Every iteration the worker of machine 1 loads 5 input vertices and that of machine 0 loads 2: the slowest
    # worker has 5 / 3.5 of the mean.
    assert s.slowest_input_ratio == pytest.approx(10 / 7, rel=1e-12)
    # Per worker: worker 0 (seed 5) loads 2 inputs and samples 1 + 2 edges, worker 1 (seed 0) 5 and 2 + 5.
    assert s.worker_ratios(0) == pytest.approx((4 / 7, 3 / 5), rel=1e-12)
    assert s.worker_ratios(1) == pytest.approx((10 / 7, 7 / 5), rel=1e-12)
    assert s.worker_access(0, 0.0) == pytest.approx((0.0, 1 / 2, 1 / 2), abs=1e-12)  # {5} local, {6} remote
    assert s.worker_access(1, 0.0) == pytest.approx((0.0, 2 / 5, 3 / 5), abs=1e-12)  # {0, 3} local
    assert s.worker_access(1, 0.5) == pytest.approx((3 / 5, 1 / 5, 1 / 5), abs=1e-12)  # {0, 1, 2} hit, {4} remote
    # Machine 0 sends rows 1, 2 and 4 every iteration, machine 1 row 6; the mean worker loads 3.5 inputs.
    assert (s.sent_ratio(0, 0.0), s.sent_ratio(1, 0.0)) == pytest.approx((6 / 7, 2 / 7), rel=1e-12)
    assert (s.sent_ratio(0, 0.5), s.sent_ratio(1, 0.5)) == pytest.approx((2 / 7, 2 / 7), rel=1e-12)
    assert graphstats.sample_stats(tiny, [-1, -1], 1, 2, 1, "random", seed=2, num_batches=3) == s  # the cache's copy
    one = graphstats.sample_stats(tiny, [-1, -1], 1, 1, 1, "random", num_batches=2)
    assert set(one.remote_busiest_ratio) == {1.0}  # nothing remote on one machine
    assert one.slowest_input_ratio == 1.0  # one worker waits for nobody
    assert one.worker_ratios(0) == (1.0, 1.0) and one.worker_access(0, 0.5) == pytest.approx(one.access(0.5))


def _check_fractions(s: SampleStats) -> None:
    assert s.cache_fractions == CACHE_GRID
    for h, loc, r in zip(s.hit_fraction, s.local_miss_fraction, s.remote_miss_fraction):
        assert h + loc + r == pytest.approx(1.0, abs=1e-12)
        assert min(h, loc, r) >= 0.0
    assert s.hit_fraction[0] == 0.0 and s.hit_fraction[-1] == 1.0
    assert list(s.hit_fraction) == sorted(s.hit_fraction)


@pytest.mark.parametrize("partitioner", ["metis", "random"])
def test_cora_fractions_are_consistent(private_cache: Path, partitioner: str) -> None:
    s = graphstats.sample_stats("cora", (10, 10), 32, 2, 1, partitioner)
    _check_fractions(s)
    assert s.num_dst_vertices[-1] == 32.0
    assert s.num_src_vertices[1] == s.num_dst_vertices[0]
    assert s.remote_miss_fraction[0] > 0.0
    assert s.num_edges[1] <= 32 * 10


def test_one_machine_has_no_remote_vertices(private_cache: Path) -> None:
    s = graphstats.sample_stats("cora", (10, 10), 16, 1, 2, "metis")
    _check_fractions(s)
    assert s.remote_miss_fraction == (0.0,) * len(CACHE_GRID)
    assert s.edge_cut_fraction == 0.0


def test_metis_cuts_fewer_edges_and_remote_vertices_than_random(private_cache: Path) -> None:
    metis = graphstats.sample_stats("cora", (10, 10), 32, 2, 1, "metis")
    rand = graphstats.sample_stats("cora", (10, 10), 32, 2, 1, "random")
    assert metis.edge_cut_fraction < rand.edge_cut_fraction
    assert metis.remote_miss_fraction[0] < rand.remote_miss_fraction[0]
    assert rand.edge_cut_fraction == pytest.approx(0.5, abs=0.05)  # random halves: about half the edges cut


def test_warm_call_reads_the_cache(private_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = graphstats.sample_stats("cora", (5, 5), 32, 2, 1, "metis", seed=1)
    summary = graphstats.dataset_summary("cora")

    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("a warm call must not sample or load the graph")

    monkeypatch.setattr(graphstats, "sample_batches", fail)
    monkeypatch.setattr(graphstats, "load_dataset", fail)
    monkeypatch.setattr(owners, "partition", fail)   # the partition is cached beside the statistics (owners.py)
    monkeypatch.setattr(owners, "load_dataset", fail)
    assert graphstats.sample_stats("cora", [5, 5], 32, 2, 1, "metis", seed=1) == first
    assert graphstats.dataset_summary("cora") == summary
    with pytest.raises(AssertionError):  # any other parameter is a different cache entry
        graphstats.sample_stats("cora", (5, 5), 32, 2, 1, "metis", seed=2)


def test_damaged_cache_entry_is_measured_again(private_cache: Path) -> None:
    first = graphstats.sample_stats("cora", (5,), 16, 1, 1, "random")
    (entry,) = (private_cache / "stats").rglob("sample-*.json")
    entry.write_text("{not json")
    assert graphstats.sample_stats("cora", (5,), 16, 1, 1, "random") == first


def test_warm_call_in_a_new_process_imports_neither_dgl_nor_pymetis(private_cache: Path) -> None:
    graphstats.sample_stats("cora", (10, 10), 32, 2, 1, "metis")
    code = ("import sys\nfrom gnnplan.simulator.workload import graphstats as g\n"
            "g.dataset_summary('cora'); g.sample_stats('cora', (10, 10), 32, 2, 1, 'metis')\n"
            "print(sorted(m for m in ('dgl', 'pymetis', 'torch') if m in sys.modules))")
    env = {**os.environ, "GNNPLAN_CACHE": str(private_cache), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_cold_runs_are_deterministic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    results = []
    for run in range(2):
        monkeypatch.setenv("GNNPLAN_CACHE", str(tmp_path / f"cache{run}"))
        results.append(graphstats.sample_stats("cora", (10, 10), 32, 2, 1, "metis", seed=5))
    assert results[0] == results[1]


def test_invalid_arguments_name_the_field(private_cache: Path) -> None:
    with pytest.raises(ValueError, match="partitioner"):
        graphstats.sample_stats("cora", (10,), 32, 2, 1, "spectral")
    with pytest.raises(ValueError, match="batch_size_per_worker"):
        graphstats.sample_stats("cora", (10,), 0, 2, 1, "metis")
    with pytest.raises(ValueError, match="fanouts"):
        graphstats.sample_stats("cora", (0,), 32, 2, 1, "metis")
    with pytest.raises(ValueError, match="workload.dataset"):
        graphstats.sample_stats("no-such-dataset", (10,), 32, 2, 1, "metis")
