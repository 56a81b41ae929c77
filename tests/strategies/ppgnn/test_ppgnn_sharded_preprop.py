"""Sharded pre-propagation: two gloo ranks, each propagating its row shard and exchanging only the rows it
reads, write the same hop files as one process; the rows they exchange are the halo the simulator measures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from preprop_workers import sharded_preprocess

from gnnplan.executor.data import input_features
from gnnplan.executor.launch import spawn
from gnnplan.executor.strategies.ppgnn.preprop import hop_file, preprocess, read_hop_files
from gnnplan.executor.strategies.ppgnn.preprop_shards import block_structure
from gnnplan.simulator.strategies.ppgnn.shards import measure_shards, shard_bounds, symmetric_structure
from gnnplan.simulator.workload.datasets import load_dataset

HOPS = 3


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:  # type: ignore[type-arg]
    """Cora pre-propagated over 2 spawned gloo ranks, undirected and directed adjacency."""
    root = tmp_path_factory.mktemp("sharded")
    folders = {op: str(root / op) for op in ("undirected", "directed")}
    result = spawn(sharded_preprocess, 2, ("cora", HOPS, folders))
    return root, result


@pytest.mark.parametrize("op", ["undirected", "directed"])
def test_two_ranks_write_the_hop_matrices_of_one_process(sharded, tmp_path: Path, op: str) -> None:  # type: ignore[no-untyped-def]
    root, _ = sharded
    graph = load_dataset("cora")
    single = preprocess(graph, input_features(graph, "cora"), HOPS, tmp_path, undirected=op == "undirected")
    files = read_hop_files(root / op)
    assert files is not None and files.hops == HOPS and files.undirected == (op == "undirected")
    assert files.num_rows == single.num_rows and files.feature_dim == single.feature_dim
    np.testing.assert_array_equal(files.labels(), single.labels())
    for r in range(HOPS + 1):
        np.testing.assert_allclose(files.load(r), single.load(r), rtol=1e-5, atol=1e-5, err_msg=f"hop {r}")
    assert not any(p.name.startswith(".") for p in (root / op).iterdir())  # no temporary file left
    assert {p.name for p in (root / op).glob("hop_*.npy")} == {hop_file(r) for r in range(HOPS + 1)}


@pytest.mark.parametrize("op", ["undirected", "directed"])
def test_ranks_receive_exactly_the_halo_the_simulator_measures(sharded, op: str) -> None:  # type: ignore[no-untyped-def]
    _, result = sharded
    graph = load_dataset("cora")
    labelled = np.concatenate([graph.train_idx, graph.val_idx, graph.test_idx])
    stats = measure_shards(graph.src, graph.dst, graph.num_vertices, labelled, 2, undirected=op == "undirected")
    row_bytes = graph.feature_dim * 4
    for rank in result["ranks"]:
        got = rank[op]
        p = rank["rank"]
        expect = [round(f * graph.num_vertices) for f in stats.halo_fraction[p]]
        assert got["need"] == expect and got["need"][p] == 0 and sum(expect) > 0
        assert got["received_bytes"] == sum(expect) * row_bytes  # one hop's exchange
        assert [got["lo"], got["hi"]] == shard_bounds(graph.num_vertices, 2)[p:p + 2]


def test_block_structure_is_the_row_block_of_the_whole_structure() -> None:
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, 50, 400), rng.integers(0, 50, 400)
    for undirected in (True, False):
        rows, cols = symmetric_structure(src, dst, 50, undirected)
        for lo, hi in ((0, 17), (17, 34), (34, 50)):
            r, c = block_structure(src, dst, 50, lo, hi, undirected)
            keep = (rows >= lo) & (rows < hi)
            np.testing.assert_array_equal(r, rows[keep])
            np.testing.assert_array_equal(c, cols[keep])
