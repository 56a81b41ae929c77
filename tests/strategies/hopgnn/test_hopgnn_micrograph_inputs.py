"""HopGNN's micrographs of all seeds at once (one sparse product per layer) equal :func:`cut_blocks` seed by seed,
and R_micro computed from them equals the seed-by-seed sum exactly; a worker's distinct inputs counted on a stamp
table equal ``np.unique``'s count."""

from __future__ import annotations

import os

import numpy as np
import pytest

from gnnplan.simulator.strategies.hopgnn.cuts import DistinctCounter, cut, each_seed, stack_blocks
from gnnplan.simulator.strategies.hopgnn.micrographs import _locality_sum, cut_blocks
from gnnplan.simulator.workload.dgl_seed import seed_dgl

os.environ.setdefault("DGLBACKEND", "pytorch")


@pytest.fixture(scope="module", params=[([5, 5], 48), ([10, 4, 3], 20)])
def batch(request):  # type: ignore[no-untyped-def]
    import dgl
    import torch

    from gnnplan.executor.data import build_graph
    from gnnplan.simulator.workload.datasets import load_dataset

    fanouts, num_seeds = request.param
    data = load_dataset("cora")
    g, _ = build_graph(data, "sage")
    seeds = np.random.default_rng(num_seeds).choice(data.train_idx, num_seeds, replace=False)
    seed_dgl(1)
    _, _, blocks = dgl.dataloading.NeighborSampler(fanouts).sample_blocks(g, torch.from_numpy(seeds))
    return seeds, blocks


def micrograph_inputs(blocks):  # type: ignore[no-untyped-def]
    """Every seed's micrograph inputs as the measurement cuts them (micrographs._account): one-seed groups."""
    stacked = stack_blocks([blocks])
    return cut(stacked, each_seed(stacked.num_seeds)).inputs


def test_rows_are_the_cut_micrographs(batch) -> None:  # type: ignore[no-untyped-def]
    seeds, blocks = batch
    need = micrograph_inputs(blocks)
    nid = blocks[0].srcdata["_ID"].numpy()
    assert need.shape == (len(seeds), blocks[0].num_src_nodes())
    for i in range(len(seeds)):
        _, inputs, _ = cut_blocks(blocks, np.array([i]))
        row = need.indices[need.indptr[i]:need.indptr[i + 1]]
        assert sorted(nid[row].tolist()) == sorted(inputs.tolist())
        assert seeds[i] in nid[row]


def test_locality_equals_the_seed_by_seed_sum(batch) -> None:  # type: ignore[no-untyped-def]
    seeds, blocks = batch
    owner = np.random.default_rng(0).integers(0, 3, 2708)
    want = 0.0
    for pos, seed in enumerate(seeds):
        _, inputs, _ = cut_blocks(blocks, np.array([pos]))
        want += (int((owner[inputs] == owner[seed]).sum()) - 1) / len(inputs)
    got = _locality_sum(micrograph_inputs(blocks), blocks[0].srcdata["_ID"].numpy(), owner, owner[seeds])
    assert got == want


def test_distinct_counts_the_ids_of_every_segment_once() -> None:
    rng = np.random.default_rng(3)
    parts = [rng.integers(0, 1000, size) for size in (0, 1, 50, 700, 700)]
    starts = np.cumsum([0] + [len(p) for p in parts])
    counter = DistinctCounter(1000)
    for _ in range(2):  # the table is not cleared between calls
        got = counter.count(np.concatenate(parts), starts)
        assert got.tolist() == [len(np.unique(p)) for p in parts]
    assert counter.count(np.array([999, 999, 0]), np.array([0, 3])).tolist() == [2]
    assert counter.count(np.empty(0, np.int64), np.array([0])).tolist() == []
