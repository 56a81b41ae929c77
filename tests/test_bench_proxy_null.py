"""benchmarks/bench_proxy_null.py's null model (double-edge swaps that keep every degree and every edge's pair of
communities) and the graph folder benchmarks/bench_proxy.py writes for a renumbered or randomised graph."""

from __future__ import annotations

import importlib
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def null(monkeypatch: pytest.MonkeyPatch) -> Any:
    """benchmarks/bench_proxy_null.py as a module (it imports bench_proxy and proxy_statistics beside it)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    yield importlib.import_module("bench_proxy_null")
    for name in ("bench_proxy_null", "bench_proxy", "proxy_statistics"):
        sys.modules.pop(name, None)


def two_rings(n: int = 40) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two rings of ``n`` vertices (communities 0 and 1) with every fourth vertex of each also joined to its
    partner in the other and a chord across each ring: edges once, (a, b) with a < b, and the communities."""
    ring = [(i, (i + 1) % n) for i in range(n)] + [(i, i + n // 2) for i in range(0, n // 2, 5)]
    edges = ring + [(a + n, b + n) for a, b in ring] + [(i, i + n) for i in range(0, n, 4)]
    a, b = np.array(edges, dtype=np.int64).T
    return np.minimum(a, b), np.maximum(a, b), np.repeat(np.array([0, 1], dtype=np.int64), n)


def test_block_null_keeps_degrees_and_community_pairs_and_moves_edges(null: Any) -> None:
    a, b, comm = two_rings()
    x, y = null.block_null(a, b, comm, np.random.default_rng(0), sweeps=20)
    n = len(comm)
    assert np.array_equal(np.bincount(np.concatenate([x, y]), minlength=n),
                          np.bincount(np.concatenate([a, b]), minlength=n))
    pairs = lambda p, q: Counter(zip(np.minimum(comm[p], comm[q]).tolist(), np.maximum(comm[p], comm[q]).tolist()))
    assert pairs(x, y) == pairs(a, b)
    assert np.all(x != y)  # no self-loop
    edges = set(zip(np.minimum(x, y).tolist(), np.maximum(x, y).tolist()))
    assert len(edges) == len(a)  # no repeated pair
    assert len(edges - set(zip(a.tolist(), b.tolist()))) > len(a) // 2  # the swaps do move the edges


def test_block_null_is_seeded(null: Any) -> None:
    a, b, comm = two_rings()
    one = null.block_null(a, b, comm, np.random.default_rng(3), sweeps=5)
    two = null.block_null(a, b, comm, np.random.default_rng(3), sweeps=5)
    assert all(np.array_equal(p, q) for p, q in zip(one, two))


def test_a_written_graph_loads_renumbered_with_its_rows(null: Any, tmp_path: Path) -> None:
    from gnnplan.simulator.workload.datasets import load_dataset

    g = load_dataset("cora")
    perm = np.random.default_rng(0).permutation(g.num_vertices).astype(np.int64)
    folder = tmp_path / "cora-renumbered"
    sys.modules["bench_proxy"].write_numbered(folder, g, g.src, g.dst, perm)
    h = load_dataset(str(folder))
    assert (h.num_vertices, h.num_edges) == (g.num_vertices, g.num_edges)
    n = g.num_vertices
    assert np.array_equal(np.bincount(h.dst, minlength=n)[perm], np.bincount(g.dst, minlength=n))
    assert np.array_equal(np.asarray(h.features)[perm], np.asarray(g.features))
    assert np.array_equal(h.labels[perm], g.labels)
    assert np.array_equal(np.sort(h.train_idx), np.sort(perm[g.train_idx]))
    assert not list(tmp_path.glob("*.tmp*"))  # written whole, nothing half-written left beside it
