"""HopGNN's groups cut out of sampled batches (:mod:`simulator.strategies.hopgnn.cuts`): exactly
:func:`cut_blocks`'s blocks, batch by batch when batches are stacked; distributed as the group's own sample
(the measurement's premise); the merge sequence equals merging from scratch for every step count; and the
measured statistics equal those accumulated group by group with :func:`cut_blocks`."""

from __future__ import annotations

import os

import numpy as np
import pytest

from gnnplan.simulator.strategies.hopgnn import cuts
from gnnplan.simulator.strategies.hopgnn.micrographs import cut_blocks, home_groups, merge_sequence
from gnnplan.simulator.workload.dgl_seed import seed_dgl

os.environ.setdefault("DGLBACKEND", "pytorch")


@pytest.fixture(scope="module")
def cora():  # type: ignore[no-untyped-def]
    from gnnplan.executor.data import build_graph
    from gnnplan.simulator.workload.datasets import load_dataset

    data = load_dataset("cora")
    return data, build_graph(data, "sage")[0]


def sample(g, seeds, fanouts, seed):  # type: ignore[no-untyped-def]
    import dgl
    import torch

    seed_dgl(seed)
    return dgl.dataloading.NeighborSampler(fanouts).sample_blocks(g, torch.from_numpy(np.asarray(seeds)))[2]


@pytest.mark.parametrize("fanouts", [[5, 5], [10, 4, 3]])
def test_stacked_cuts_are_cut_blocks_batch_by_batch(cora, fanouts) -> None:  # type: ignore[no-untyped-def]
    data, g = cora
    rng = np.random.default_rng(len(fanouts))
    batches = [rng.choice(data.train_idx, n, replace=False) for n in (30, 1, 17)]
    sampled = [sample(g, b, fanouts, i) for i, b in enumerate(batches)]
    stacked = cuts.stack_blocks(sampled)
    at = np.cumsum([0] + [len(b) for b in batches])
    groups, want = [], []
    for i, blocks in enumerate(sampled):
        for part in np.array_split(rng.permutation(len(batches[i])), 3 if len(batches[i]) > 2 else 1):
            groups.append(part + at[i])
            _, inputs, sizes = cut_blocks(blocks, part)
            want.append((sorted(inputs.tolist()), np.asarray(sizes, dtype=float)))
    got = cuts.cut(stacked, cuts.members(groups, stacked.num_seeds))
    rows = got.inputs
    for j, (inputs, sizes) in enumerate(want):
        row = rows.indices[rows.indptr[j]:rows.indptr[j + 1]]
        assert sorted(stacked.input_ids[row].tolist()) == inputs
        assert (got.sizes[j] == sizes).all()


def test_cut_rejects_groups_of_another_stack(cora) -> None:  # type: ignore[no-untyped-def]
    data, g = cora
    stacked = cuts.stack_blocks([sample(g, data.train_idx[:8], [3], 0)])
    with pytest.raises(ValueError, match="groups: must have 8 columns"):
        cuts.cut(stacked, cuts.members([np.array([0])], 9))
    with pytest.raises(ValueError, match="batches: must be one or more"):
        cuts.stack_blocks([])


def test_a_cut_group_is_distributed_as_its_own_sample(cora) -> None:  # type: ignore[no-untyped-def]
    """The measurement's premise (cuts module docstring): over 300 draws, a group's block sizes cut out of its
    batch's sample and sampled alone have the same means (within 3 standard errors of their difference)."""
    data, g = cora
    batch = np.random.default_rng(5).choice(data.train_idx, 60, replace=False)
    group = np.arange(0, 60, 4)   # 15 of the 60 seeds
    alone, cut = [], []
    for draw in range(300):
        alone.append(np.ravel(cut_blocks(sample(g, batch[group], [2, 2], draw), np.arange(len(group)))[2]))
        blocks = sample(g, batch, [2, 2], 10_000 + draw)
        cut.append(np.ravel(cuts.cut(cuts.stack_blocks([blocks]), cuts.members([group], 60)).sizes[0]))
    a, c = np.asarray(alone, dtype=float), np.asarray(cut, dtype=float)
    err = np.sqrt(a.var(axis=0, ddof=1) / len(a) + c.var(axis=0, ddof=1) / len(c))
    moving = err > 0   # the seeds' own count is fixed
    assert moving.sum() >= 4
    assert (np.abs(a.mean(axis=0) - c.mean(axis=0))[moving] <= 3 * err[moving]).all()
    assert (a.mean(axis=0)[~moving] == c.mean(axis=0)[~moving]).all()


def merge_from_scratch(groups, num_merges):  # type: ignore[no-untyped-def]
    """§5.3's merging, every step count computed from the unmerged groups (the loop merge_groups ran before)."""
    work = [[list(g) for g in row] for row in groups]
    steps = list(range(len(groups[0])))
    for _ in range(num_merges):
        victim = min(steps, key=lambda t: (sum(len(row[t]) for row in work), t))
        steps.remove(victim)
        for row in work:
            order = sorted(steps, key=lambda t: (len(row[t]), t))
            for i, seed in enumerate(row[victim]):
                row[order[i % len(order)]].append(seed)
            row[victim] = []
    return steps, [[list(row[t]) for t in steps] for row in work]


@pytest.mark.parametrize("machines,gpus", [(5, 1), (4, 2)])
def test_merge_sequence_is_merging_from_scratch(machines: int, gpus: int) -> None:
    rng = np.random.default_rng(machines)
    owner = rng.integers(0, machines, 400)
    batches = [rng.choice(400, int(rng.integers(5, 40)), replace=False) for _ in range(machines * gpus)]
    groups = home_groups(batches, owner, machines, gpus)
    sequence = list(merge_sequence(groups))
    assert [len(steps) for steps, _ in sequence] == list(range(machines, 0, -1))
    for merges, (steps, merged) in enumerate(sequence):
        want_steps, want = merge_from_scratch(groups, merges)
        assert steps == want_steps
        assert [[g.tolist() for g in row] for row in merged] == want


@pytest.mark.parametrize("machines,gpus,split", [(4, 1, "owner"), (2, 2, "random")])
def test_measurement_equals_cutting_every_group_on_its_own(machines: int, gpus: int, split: str) -> None:
    """The statistics of two iterations equal, exactly, those accumulated group by group with :func:`cut_blocks`
    from the same samples (the bookkeeping: hosts, steps, the pre-gather's distinct rows, R_micro)."""
    from gnnplan.simulator.strategies.hopgnn import micrographs as mg
    from gnnplan.simulator.workload import graphstats, owners
    from gnnplan.simulator.workload.batches import seeded_sampler, worker_batches
    from gnnplan.simulator.workload.datasets import load_dataset

    graph = load_dataset("cora")
    owner = owners.partition_owners("cora", machines, "metis", 0, graph=graph)
    params = graphstats.sample_params("cora", [4, 3], 12, machines, gpus, "metis", 0, 2)
    params.update(seed_split=split)
    got = mg._measure(graph, owner, params)
    w = machines * gpus
    batches = worker_batches(graph.train_idx, owner, machines, gpus, 12, 0, 2, partial=False, seed_split=split)
    step = {s: np.zeros((w, s, 3 + 3 * 2)) for s in range(1, machines + 1)}
    pregather = {s: np.zeros((w, 2)) for s in range(1, machines + 1)}
    micro = group = np.zeros(2)
    with seeded_sampler(graph, [4, 3], 0) as sample:
        for it in range(2):
            batch_list = [b[it] for b in batches]
            sampled = [sample(seeds) for seeds in batch_list]
            for blocks, seeds in zip(sampled, batch_list):
                for pos in range(len(seeds)):
                    inputs = cut_blocks(blocks, np.array([pos]))[1]
                    micro = micro + ((np.sum(owner[inputs] == owner[seeds[pos]]) - 1) / len(inputs), 1)
            groups = mg.home_groups(batch_list, owner, machines, gpus)
            for s in range(1, machines + 1):
                steps, merged = mg.merge_groups(groups, machines - s)
                rows: dict[int, list[list[int]]] = {h: [[], []] for h in range(w)}
                for d, row in enumerate(merged):
                    for k, (t, seeds) in enumerate(zip(steps, row)):
                        if len(seeds):
                            host = mg.host_worker(d, t, machines, gpus)
                            where = np.flatnonzero(np.isin(batch_list[d], seeds))
                            _, inputs, sizes = cut_blocks(sampled[d], where)
                            mine = owner[inputs] == host // gpus
                            step[s][host, k] += [len(seeds), mine.sum(), (~mine).sum(), *np.ravel(sizes)]
                            rows[host][0] += inputs[~mine].tolist()
                            rows[host][1] += inputs[mine].tolist()
                            if s == machines:
                                group = group + (mine.sum(), len(inputs))
                for h in range(w):
                    pregather[s][h] += (len(set(rows[h][0])), len(set(rows[h][1])))
    for s in range(1, machines + 1):
        mean = step[s] / 2
        assert got.step_seeds[s - 1] == mean[:, :, 0].tolist()
        assert got.step_local_inputs[s - 1] == mean[:, :, 1].tolist()
        assert got.step_remote_inputs[s - 1] == mean[:, :, 2].tolist()
        for j, field in enumerate((got.step_src, got.step_dst, got.step_edges)):
            assert field[s - 1] == mean[:, :, 3 + j::3].tolist()
        assert got.pregather_remote[s - 1] == (pregather[s][:, 0] / 2).tolist()
        assert got.pregather_local[s - 1] == (pregather[s][:, 1] / 2).tolist()
    assert got.group_local_fraction == group[0] / group[1]
    assert got.micrograph_local_fraction == pytest.approx(micro[0] / micro[1], rel=1e-12)
