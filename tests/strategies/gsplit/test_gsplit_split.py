"""The online split by owner on a hand-worked block, and the split statistics measured on Cora."""

from __future__ import annotations

import numpy as np
import pytest

from gnnplan.simulator.strategies.gsplit.split import (
    batch_seed,
    global_batches,
    layer_counts,
    layer_plan,
    partition_cache,
    shuffle_width,
)
from gnnplan.simulator.strategies.gsplit.stats import split_stats
from gnnplan.simulator.workload.datasets import load_dataset
from gnnplan.simulator.workload.graphstats import CACHE_GRID
from gnnplan.simulator.workload.owners import partition_owners

# 5 source positions (the first 2 are the destinations), owners 0 1 0 1 1; 7 sampled edges u -> v
OWNER = np.array([0, 1, 0, 1, 1])
EDGE_SRC = np.array([2, 3, 4, 0, 2, 4, 1])
EDGE_DST = np.array([0, 0, 0, 1, 1, 1, 1])


def test_layer_counts_by_hand() -> None:
    c = layer_counts(OWNER, 2, EDGE_SRC, EDGE_DST, 2)
    assert c.src.tolist() == [2, 3] and c.dst.tolist() == [1, 1]
    assert c.edges_by_src.tolist() == [3, 4] and c.edges_by_dst.tolist() == [3, 4]
    assert c.local_edges.tolist() == [1, 2]                     # 2->0 in split 0; 4->1 and 1->1 in split 1
    # GraphSAGE: one partial sum per (source split, destination): (0,v0) (1,v0) (0,v1) (1,v1)
    assert c.sage_rows.tolist() == [[1, 1], [1, 1]]
    # GAT: one projected row per (source, destination split): v0's sources 2,3,4; v1's sources 0,2,4,1
    assert c.gat_rows.tolist() == [[1, 2], [2, 2]]


@pytest.mark.parametrize("arch", ["sage", "gat"])
def test_every_rank_plan_agrees_with_the_counts(arch: str) -> None:
    rng = np.random.default_rng(3)
    owner = rng.integers(0, 3, 40)
    src, dst = rng.integers(0, 40, 300), rng.integers(0, 12, 300)
    counts = layer_counts(owner, 12, src, dst, 3)
    rows = counts.sage_rows if arch == "sage" else counts.gat_rows
    plans = [layer_plan(arch, r, owner, 12, src, dst, 3) for r in range(3)]
    for r, p in enumerate(plans):
        assert p.send_counts.tolist() == rows[r].tolist() and p.recv_counts.tolist() == rows[:, r].tolist()
        assert p.num_own_dst == counts.dst[r] and len(p.own_src) == counts.src[r]
        assert p.num_edges == (counts.edges_by_src if arch == "sage" else counts.edges_by_dst)[r]
    assert sum(p.num_edges for p in plans) == 300


def test_sage_plan_routes_each_partial_sum_to_its_destination() -> None:
    p0, p1 = (layer_plan("sage", r, OWNER, 2, EDGE_SRC, EDGE_DST, 2) for r in range(2))
    # split 0 owns sources 0 and 2 (rows 0, 1): edges 2->0, 0->1, 2->1; slots grouped by destination split
    assert p0.own_src.tolist() == [0, 2] and p0.gather_index.tolist() == [1, 0, 1]
    assert p0.send_index.tolist() == [0, 1, 1] and p0.send_counts.tolist() == [1, 1]
    # split 1 owns destination 1 (its row 0): one partial sum from split 0, its own one; in-degree 4
    assert p1.scatter_index.tolist() == [0, 0] and p1.degree.tolist() == [4]
    assert p0.degree.tolist() == [3]


def test_batches_seeds_and_caches() -> None:
    train = np.arange(10, 20)
    batches = global_batches(train, 4, seed=0, epoch=0)
    assert [len(b) for b in batches] == [4, 4, 2] and sorted(np.concatenate(batches).tolist()) == train.tolist()
    assert [b.tolist() for b in global_batches(train, 4, 0, 0)] == [b.tolist() for b in batches]
    assert batch_seed(0, batches[0]) == batch_seed(0, batches[0].copy()) != batch_seed(1, batches[0])
    degrees = np.array([5, 9, 1, 7, 3, 8])
    owner = np.array([0, 1, 0, 1, 0, 1])
    assert partition_cache(degrees, owner, 1, 0.34).tolist() == [1, 5]    # floor(0.34 * 6) = 2 hottest of 1, 3, 5
    assert partition_cache(degrees, owner, 0, 1.0).tolist() == [0, 4, 2]
    assert shuffle_width("sage", 1433, 64, 1) == 64 and shuffle_width("sage", 8, 16, 1) == 8
    assert shuffle_width("gat", 1433, 8, 4) == 32


def test_cora_split_statistics() -> None:
    metis = split_stats("cora", [10, 10], 64, 2, "metis", self_loops=False)
    random = split_stats("cora", [10, 10], 64, 2, "random", self_loops=False)
    graph = load_dataset("cora")
    owner = partition_owners("cora", 2, "metis", 0, graph=graph)
    assert metis.iterations.tolist() == [0, 1, 2] and metis.num_iterations == 3    # 140 seeds, B = 64
    assert metis.num_seeds.tolist() == [64, 64, 12]
    assert (metis.split_src.sum(axis=2) == metis.num_src).all() and (metis.split_dst.sum(axis=2) == metis.num_dst).all()
    for edges in (metis.edges_by_src, metis.edges_by_dst):
        assert (edges.sum(axis=2) == metis.num_edges).all()
    assert metis.partition_sizes.tolist() == np.bincount(owner).tolist()
    # every layer-0 vertex is loaded once by its owner; dp's micro-batches load (and compute) more
    assert (metis.split_src[:, 0].sum(axis=1) == metis.num_input_vertices).all()
    assert metis.dp_input_vertices.sum() > 1.05 * metis.num_input_vertices.sum()   # samples differ per batch
    assert metis.dp_edges.sum() > metis.num_edges.sum()
    # a min-cut partition keeps more edges local than a random one (local with probability 1/g)
    assert metis.local_edge_fraction().mean() > 0.7 and 0.4 < random.local_edge_fraction().mean() < 0.6
    assert (metis.sage_rows.sum() - np.trace(metis.sage_rows, axis1=2, axis2=3).sum()) < \
        (random.sage_rows.sum() - np.trace(random.sage_rows, axis1=2, axis2=3).sum())
    # hits grow with the cache and reach every vertex once g x c >= 1
    hits = metis.input_hits.sum(axis=(0, 1))
    assert (np.diff(hits) >= 0).all() and hits[0] == 0
    assert hits[CACHE_GRID.index(0.5)] == metis.num_input_vertices.sum()
    assert metis.hits(0.5).sum() == metis.num_input_vertices.sum()
    again = split_stats("cora", [10, 10], 64, 2, "metis", self_loops=False)      # read back from the cache
    assert (again.gat_rows == metis.gat_rows).all() and again.num_iterations == metis.num_iterations
