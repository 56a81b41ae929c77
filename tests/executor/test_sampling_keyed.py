"""The keyed neighbour sampler: deterministic, uniform without replacement, and a batch's blocks are the union of
any split's blocks, so micrograph groups sampled anywhere compute the batch's outputs."""

from __future__ import annotations

import dgl
import numpy as np
import pytest
import torch

from gnnplan.executor.data import build_graph
from gnnplan.executor.sampling_keyed import DENSE_FACTOR, KeyedSampler, choose_in_edges, make_sampler, splitmix64
from gnnplan.simulator.workload.datasets import load_dataset


@pytest.fixture(scope="module")
def cora():  # type: ignore[no-untyped-def]
    data = load_dataset("cora")
    g, weights = build_graph(data, "gcn")
    seeds = np.random.default_rng(3).choice(data.train_idx, 48, replace=False)
    return data, g, weights, seeds


def edge_sets(blocks: list) -> list[set[int]]:  # type: ignore[type-arg]
    return [set(b.edata[dgl.EID].tolist()) for b in blocks]


def test_deterministic_keyed_and_a_union_over_splits(cora) -> None:  # type: ignore[no-untyped-def]
    _, g, _, seeds = cora
    sampler = KeyedSampler([4, 4], seed=5)
    _, out, blocks, _ = sampler.sample(g, torch.from_numpy(seeds), (2, 7))
    assert out.tolist() == seeds.tolist() and blocks[-1].dstdata[dgl.NID].tolist() == seeds.tolist()
    again = KeyedSampler([4, 4], seed=5).sample(g, torch.from_numpy(seeds), (2, 7))[2]
    assert edge_sets(again) == edge_sets(blocks)
    assert edge_sets(sampler.sample(g, torch.from_numpy(seeds), (2, 8))[2]) != edge_sets(blocks)
    assert edge_sets(KeyedSampler([4, 4], seed=6).sample(g, torch.from_numpy(seeds), (2, 7))[2]) != edge_sets(blocks)
    parts = [sampler.sample(g, torch.from_numpy(p.copy()), (2, 7))[2] for p in np.array_split(seeds[::-1], 3)]
    for layer, full in enumerate(edge_sets(blocks)):
        assert set().union(*(edge_sets(p)[layer] for p in parts)) == full
    for block in blocks:  # DGL's layout: dst vertices first among the sources, at most fanout in-edges each
        n_dst = block.num_dst_nodes()
        assert block.srcdata[dgl.NID][:n_dst].tolist() == block.dstdata[dgl.NID].tolist()
        assert int(block.in_degrees().max()) <= 4
        src, dst = block.edges()
        gs, gd = g.find_edges(block.edata[dgl.EID])
        assert torch.equal(block.srcdata[dgl.NID][src], gs) and torch.equal(block.dstdata[dgl.NID][dst], gd)
    assert isinstance(make_sampler("keyed", [4], 0), KeyedSampler)
    with pytest.raises(ValueError, match="sampler"):
        make_sampler("other", [4], 0)  # type: ignore[arg-type]


@pytest.mark.parametrize("degree", [12, 100])
def test_uniform_without_replacement(degree: int) -> None:
    fanout, draws = 5, 4000
    assert (degree > DENSE_FACTOR * fanout) == (degree == 100)  # both code paths
    indptr = np.array([0, degree], dtype=np.int64)
    keys = splitmix64(np.arange(draws, dtype=np.uint64))
    pos, owner = choose_in_edges(indptr, np.zeros(draws, dtype=np.int64), keys, fanout)
    assert np.bincount(owner, minlength=draws).tolist() == [fanout] * draws
    for d in range(0, draws, 397):
        assert len(set(pos[owner == d].tolist())) == fanout
    counts = np.bincount(pos, minlength=degree)
    p = fanout / degree
    assert np.abs(counts - draws * p).max() < 5 * np.sqrt(draws * p * (1 - p))
    all_pos, _ = choose_in_edges(indptr, np.zeros(3, dtype=np.int64), keys[:3], -1)
    assert all_pos.tolist() == list(range(degree)) * 3


@pytest.mark.parametrize("arch", ["sage", "gcn", "gat"])
def test_keyed_groups_compute_the_batch_outputs(cora, arch: str) -> None:  # type: ignore[no-untyped-def]
    from gnnplan.executor.models import GNN, attach_edge_weights
    from gnnplan.simulator.workload.spec import ModelSpec

    data, g, weights, seeds = cora
    sampler = KeyedSampler([5, 5], seed=0)
    torch.manual_seed(0)
    model = GNN(ModelSpec(arch=arch, num_layers=2, hidden_dim=16, num_heads=2, dropout=0.0), data.feature_dim,
                data.num_classes).eval()
    x = torch.from_numpy(data.features)
    blocks = sampler.sample(g, torch.from_numpy(seeds), (1, 0))[2]
    attach_edge_weights(blocks, weights)
    full = model(blocks, x[blocks[0].srcdata[dgl.NID]])
    rows = [5, 1, 30, 47, 2]
    group = sampler.sample(g, torch.from_numpy(seeds[rows]), (1, 0))[2]
    attach_edge_weights(group, weights)
    out = model(group, x[group[0].srcdata[dgl.NID]])
    torch.testing.assert_close(out, full[rows], rtol=0, atol=1e-6)
