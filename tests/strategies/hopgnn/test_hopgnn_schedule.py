"""HopGNN's schedule (grouping by home, merging, controller), the groups a worker hosts, and micrograph cutting, on
the paper's toy examples and on Cora."""

from __future__ import annotations

import os

import numpy as np
import pytest

from gnnplan.executor.strategies.hopgnn.exchange import MergeController
from gnnplan.simulator.strategies.hopgnn.micrographs import cut_blocks, home_groups, host_worker, merge_groups
from gnnplan.simulator.workload.dgl_seed import seed_dgl

os.environ.setdefault("DGLBACKEND", "pytorch")


def as_lists(groups):  # type: ignore[no-untyped-def]
    return [[sorted(g.tolist()) for g in row] for row in groups]


def test_home_groups_reproduce_fig9() -> None:
    # paper Fig 9: two servers, mini-batches {6, 3} (model 0) and {5, 0} (model 1); 6 and 5 live on server 0
    owner = np.array([1, 0, 0, 1, 0, 0, 0, 1])
    groups = home_groups([np.array([6, 3]), np.array([5, 0])], owner, 2)
    # step 0: server 0 trains 6 (model 0), server 1 trains 0 (model 1); step 1: server 1 trains 3, server 0 trains 5
    assert as_lists(groups) == [[[6], [3]], [[0], [5]]]
    assert [host_worker(0, t, 2) for t in (0, 1)] == [0, 1] and [host_worker(1, t, 2) for t in (0, 1)] == [1, 0]


def test_merge_reproduces_fig10() -> None:
    # paper Fig 10: 3 servers, t1 has the fewest roots; m1's 2 roots there go one each to t2 (smaller) and t0
    groups = [[np.arange(0, 3), np.arange(3, 3), np.arange(3, 6)],
              [np.arange(10, 14), np.arange(14, 16), np.arange(16, 18)],
              [np.arange(20, 23), np.arange(23, 24), np.arange(24, 27)]]
    steps, merged = merge_groups(groups, 1)
    assert steps == [0, 2]
    assert [len(g) for g in merged[1]] == [5, 3]
    assert merged[1][1].tolist() == [16, 17, 14] and merged[1][0].tolist() == [10, 11, 12, 13, 15]
    assert [len(g) for g in merged[2]] == [4, 3]  # a tie goes to the lower step


@pytest.mark.parametrize("num_merges", [0, 1, 2, 3])
def test_merging_keeps_every_seed_and_one_model_per_worker(num_merges: int) -> None:
    rng = np.random.default_rng(num_merges)
    owner = rng.integers(0, 4, 500)
    batches = [rng.choice(500, 40, replace=False) for _ in range(4)]
    steps, merged = merge_groups(home_groups(batches, owner, 4), num_merges)
    assert len(steps) == 4 - num_merges and steps == sorted(steps)
    for d, row in enumerate(merged):
        assert sorted(np.concatenate(row).tolist()) == sorted(batches[d].tolist())
    for t in steps:
        assert sorted(host_worker(d, t, 4) for d in range(4)) == [0, 1, 2, 3]
    if num_merges == 0:
        for d, row in enumerate(merged):
            for t, seeds in enumerate(row):
                assert (owner[seeds] == (d + t) % 4).all()


def test_merge_rejects_too_many_merges() -> None:
    groups = home_groups([np.array([0, 1])], np.array([0, 1]), 2)
    with pytest.raises(ValueError, match="num_merges"):
        merge_groups(groups, 2)


def test_controller_hill_climbs_and_freezes() -> None:
    c = MergeController(4, None, revert=True, warmup_epochs=1)
    for t in (9.0, 5.0, 4.0, 3.0, 3.5, 1.0):   # warm-up, reference (S=4), S=3 faster, S=2 faster, S=1 slower
        c.update(t)
    assert [s for s, _ in c.history] == [4, 4, 3, 2, 1, 2]
    assert c.frozen and c.num_steps == 2
    keep = MergeController(4, None, revert=False, warmup_epochs=0)
    for t in (5.0, 4.0, 4.5, 1.0):
        keep.update(t)
    assert [s for s, _ in keep.history] == [4, 3, 2, 2] and keep.num_steps == 2
    bottom = MergeController(2, None, revert=True, warmup_epochs=0)
    for t in (5.0, 4.0, 3.0):
        bottom.update(t)
    assert [s for s, _ in bottom.history] == [2, 1, 1]
    fixed = MergeController(4, 9, revert=True)
    fixed.update(1.0)
    assert fixed.num_steps == 4 and MergeController(4, 2, True).num_steps == 2


@pytest.fixture(scope="module")
def cora_batch():  # type: ignore[no-untyped-def]
    import dgl
    import torch

    from gnnplan.executor.data import build_graph
    from gnnplan.simulator.workload.datasets import load_dataset

    data = load_dataset("cora")
    g, weights = build_graph(data, "gcn")
    seeds = np.random.default_rng(3).choice(data.train_idx, 48, replace=False)
    seed_dgl(0)
    _, _, blocks = dgl.dataloading.NeighborSampler([5, 5]).sample_blocks(g, torch.from_numpy(seeds))
    return data, g, weights, seeds, blocks


def test_micrographs_partition_the_batch_blocks(cora_batch) -> None:  # type: ignore[no-untyped-def]
    import dgl

    _, _, _, seeds, blocks = cora_batch
    parts = np.array_split(np.arange(len(seeds)), 3)
    cut = [cut_blocks(blocks, p)[0] for p in parts]
    for layer, block in enumerate(blocks):
        union = np.unique(np.concatenate([c[layer] for c in cut]))
        assert union.tolist() == sorted(block.edata[dgl.EID].tolist())
    _, one_inputs, sizes = cut_blocks(blocks, np.array([0]))
    assert sizes[-1][1] == 1 and seeds[0] in one_inputs and len(one_inputs) == sizes[0][0]


@pytest.mark.parametrize("gpus", [1, 2])
def test_hosted_groups_cover_every_seed_once(gpus: int) -> None:
    from gnnplan.executor.strategies.hopgnn.home import hosted_groups, hosted_model

    rng = np.random.default_rng(7)
    m, workers = 3, 3 * gpus
    owner = rng.integers(0, m, 300)
    batches = [rng.choice(300, 20, replace=False) for _ in range(workers)]
    for merges in (0, 1):
        seen: dict[int, list[int]] = {d: [] for d in range(workers)}
        for rank in range(workers):
            steps, groups = hosted_groups(batches, owner, m, gpus, merges, rank)
            assert len(steps) == m - merges
            for k, (d, seeds) in groups.items():
                assert host_worker(d, steps[k], m, gpus) == rank and hosted_model(rank, steps[k], m, gpus) == d
                if merges == 0:  # unmerged: every group is trained on its seeds' home machine
                    assert (owner[seeds] == rank // gpus).all()
                seen[d].extend(seeds.tolist())
        assert all(sorted(seen[d]) == sorted(batches[d].tolist()) for d in range(workers))


def test_sampler_processes_sample_the_inline_groups() -> None:
    """The group stream gives the same hosted groups (keyed sampler: the same blocks) inline and from a sampler
    process, for every epoch and merge count it is asked for."""
    import dgl

    from gnnplan.executor.data import build_graph
    from gnnplan.executor.sampling_keyed import KeyedSampler
    from gnnplan.executor.strategies.hopgnn.home import GroupStream, HomeSchedule
    from gnnplan.simulator.workload.datasets import load_dataset

    data = load_dataset("cora")
    g, _ = build_graph(data, "sage")
    owner = np.random.default_rng(0).integers(0, 2, data.num_vertices)
    home = HomeSchedule(data.train_idx, owner, 2, 1, 0, 30, 1, "owner")
    n_it = len(home.batches(0)[1])

    def collect(workers: int) -> list:  # type: ignore[type-arg]
        stream = GroupStream(g, KeyedSampler([4, 4], 0), home, n_it, workers, seed=0)
        out = [(b.steps, {k: (h.model, h.seeds.tolist(), [x.edata[dgl.EID].tolist() for x in h.blocks])
                          for k, h in b.groups.items()})
               for epoch, merges in ((0, 0), (1, 1)) for b in stream.epoch(epoch, merges)]
        stream.close()
        return out

    inline = collect(0)
    assert len(inline) == 2 * n_it and any(len(groups) == 2 for _, groups in inline)
    assert collect(1) == inline
