"""Pre-propagation: the normalised adjacency, the hop products, the stored files and their cache."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gnnplan.executor.strategies.ppgnn.preprop import (
    hop_file,
    labelled_rows,
    normalized_adjacency,
    preprocess,
    prepropagated,
    propagate,
    read_hop_files,
)
from gnnplan.simulator.workload.datasets import GraphData


def tiny_graph() -> GraphData:
    """5 vertices, a duplicate edge and a self-loop in the input, vertex 4 isolated, one direction listed."""
    src = np.array([0, 1, 1, 2, 3, 3], dtype=np.int64)
    dst = np.array([1, 2, 2, 0, 3, 0], dtype=np.int64)
    features = np.arange(15, dtype=np.float32).reshape(5, 3) / 7.0
    labels = np.array([0, 1, 0, 1, -1], dtype=np.int64)
    return GraphData("tiny", 5, src, dst, features, labels, np.array([3, 0]), np.array([2]), np.array([1, 4]), 2)


def dense_b(g: GraphData, undirected: bool) -> np.ndarray:
    """D~^-1/2 (A + I) D~^-1/2 with A[v, u] = 1 for an edge u -> v (and v -> u if undirected), binary."""
    a = np.zeros((g.num_vertices, g.num_vertices))
    a[g.dst, g.src] = 1.0
    if undirected:
        a = np.maximum(a, a.T)
    np.fill_diagonal(a, 1.0)
    d = a.sum(1)
    return a / np.sqrt(np.outer(d, d))


@pytest.mark.parametrize("undirected", [True, False])
def test_normalized_adjacency_matches_dense_formula(undirected: bool) -> None:
    g = tiny_graph()
    b = normalized_adjacency(g.src, g.dst, g.num_vertices, undirected)
    np.testing.assert_allclose(b.to_dense().numpy(), dense_b(g, undirected), rtol=1e-6)


def test_propagate_is_repeated_product() -> None:
    g = tiny_graph()
    b = normalized_adjacency(g.src, g.dst, g.num_vertices)
    hops = propagate(b, torch.from_numpy(g.features), 3)
    dense = dense_b(g, True)
    expect = g.features.astype(np.float64)
    for r, x in enumerate(hops):
        np.testing.assert_allclose(x.numpy(), expect, rtol=1e-5, atol=1e-6, err_msg=f"hop {r}")
        expect = dense @ expect


def test_preprocess_writes_labelled_rows_per_hop(tmp_path) -> None:  # type: ignore[no-untyped-def]
    g = tiny_graph()
    files = preprocess(g, g.features, 2, tmp_path / "out")
    rows = labelled_rows(g)
    assert rows.tolist() == [3, 0, 2, 1, 4]
    assert (files.num_train, files.num_val, files.num_test, files.num_rows) == (2, 1, 2, 5)
    full = propagate(normalized_adjacency(g.src, g.dst, 5), torch.from_numpy(g.features), 2)
    for r in range(3):
        stored = np.load(tmp_path / "out" / hop_file(r))
        assert stored.dtype == np.float32 and stored.shape == (5, 3)
        np.testing.assert_array_equal(stored, full[r].numpy()[rows])
        np.testing.assert_array_equal(files.load(r, mmap=True), stored)
    np.testing.assert_array_equal(files.labels(), g.labels[rows])
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]  # no temp files left
    assert read_hop_files(tmp_path / "out") == files


def test_incomplete_folder_is_not_read(tmp_path) -> None:  # type: ignore[no-untyped-def]
    g = tiny_graph()
    files = preprocess(g, g.features, 1, tmp_path)
    files.path(1).write_bytes(b"truncated")
    assert read_hop_files(tmp_path) is None
    with pytest.raises(ValueError, match="hop 2 is not stored"):
        files.path(2)


def test_prepropagated_caches_and_extends(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("GNNPLAN_CACHE", str(tmp_path))
    first = prepropagated("cora", 1)
    assert first.hops == 1 and first.num_rows == 140 + 500 + 1000 and first.feature_dim == 1433
    stamp = first.path(1).stat().st_mtime_ns
    assert prepropagated("cora", 1).path(1).stat().st_mtime_ns == stamp  # cached
    more = prepropagated("cora", 2)
    assert more.hops == 2 and more.folder == first.folder
    assert prepropagated("cora", 1).hops == 2  # a folder with more hops serves fewer
