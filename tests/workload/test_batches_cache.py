"""The statistics' and the executor's seed batches (DistDGL's owner split, each worker's share reordered as its
shuffling data loader does, or a caller's split; counted by hand) and the statistics
cache's entries (names stable for the same parameters, a stored entry returned only for exactly its own)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.workload import stats_cache
from gnnplan.simulator.workload.batches import epoch_seeds, owner_split, split_epoch_seeds, worker_batches

# 10 training vertices; machine 0 owns vertices 0-6, machine 1 owns 7-9.
OWNER = np.array([0] * 7 + [1] * 3, dtype=np.int64)
TRAIN = np.arange(10, dtype=np.int64)


def test_owner_split_balances_machines_then_cuts_each_among_its_gpus() -> None:
    seeds = np.array([9, 0, 1, 7, 2, 3, 8, 4, 5, 6], dtype=np.int64)
    parts = owner_split(seeds, OWNER, 2, 2)
    # split_seeds: machine 0 keeps its first 5 own seeds (0, 1, 2, 3, 4) and spills 5 and 6 to machine 1, which
    # owns 9, 7 and 8; each machine's share is then cut into two consecutive parts.
    assert [p.tolist() for p in parts] == [[0, 1, 2], [3, 4], [9, 7, 8], [5, 6]]
    assert all(p.dtype == np.int64 for p in parts)


def test_epoch_seeds_are_the_owner_split_with_each_share_reordered() -> None:
    for epoch in range(3):
        shuffled = np.random.default_rng((3, epoch)).permutation(TRAIN)
        split = owner_split(shuffled, OWNER, 2, 2)
        parts = epoch_seeds(TRAIN, OWNER, 2, 2, seed=3, epoch=epoch)
        rng = np.random.default_rng((3, epoch, 1))
        assert [p.tolist() for p in parts] == [rng.permutation(q).tolist() for q in split]
        assert [sorted(p.tolist()) for p in parts] == [sorted(q.tolist()) for q in split]


def test_seeds_from_another_machine_are_spread_over_the_epoch() -> None:
    # Machine 0 owns 7 of the 10 training vertices: every epoch it passes 2 to machine 1 (one GPU each). The
    # split puts them last in machine 1's share; in consumption order they sit anywhere, as with DistDGL's
    # shuffling data loader: over 400 epochs their mean position in the 5-seed share is near the middle (2).
    last, positions = [], []
    for epoch in range(400):
        split = owner_split(np.random.default_rng((0, epoch)).permutation(TRAIN), OWNER, 2, 1)[1]
        share = epoch_seeds(TRAIN, OWNER, 2, 1, seed=0, epoch=epoch)[1]
        last.append(np.flatnonzero(OWNER[split] == 0).tolist())
        positions += np.flatnonzero(OWNER[share] == 0).tolist()
    assert all(p == [3, 4] for p in last) and len(positions) == 800
    assert abs(np.mean(positions) - 2.0) < 0.15


def test_worker_batches_default_cuts_each_epochs_seeds_into_batches() -> None:
    batches = worker_batches(TRAIN, OWNER, 2, 2, batch_size=2, seed=3, num_batches=2)
    expect: list[list[list[int]]] = [[] for _ in range(4)]
    for epoch in range(2):
        for w, seeds in enumerate(epoch_seeds(TRAIN, OWNER, 2, 2, seed=3, epoch=epoch)):
            starts = range(0, len(seeds), 2)
            expect[w].extend(seeds[i: i + 2].tolist() for i in starts if len(expect[w]) < 2)
    assert [[b.tolist() for b in worker] for worker in batches] == expect


def test_worker_batches_of_random_splits_keep_full_batches_only() -> None:
    batches = worker_batches(TRAIN, OWNER, 1, 2, batch_size=2, seed=0, num_batches=3, partial=False,
                             seed_split="random")  # each epoch's shuffle cut in halves
    first = np.random.default_rng((0, 0)).permutation(TRAIN)
    second = np.random.default_rng((0, 1)).permutation(TRAIN)
    # 5 seeds per worker and epoch: two full batches each (the fifth seed is left out), a third from epoch 1.
    assert [b.tolist() for b in batches[0]] == [first[0:2].tolist(), first[2:4].tolist(), second[0:2].tolist()]
    assert [b.tolist() for b in batches[1]] == [first[5:7].tolist(), first[7:9].tolist(), second[5:7].tolist()]


def test_entry_names_depend_on_every_parameter_and_not_their_order(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GNNPLAN_CACHE", str(tmp_path))
    a = {"dataset": "cora-x", "fanouts": [10, 5], "seed": 0}
    same = {"seed": 0, "fanouts": [10, 5], "dataset": "cora-x"}
    other = {**a, "seed": 1}
    path = stats_cache.entry_path("sample", a)
    assert path == stats_cache.entry_path("sample", same)
    assert path.parent == tmp_path / "stats" / "cora-x" and path.name.startswith("sample-")
    assert path != stats_cache.entry_path("sample", other)
    assert stats_cache.entry_path("micrograph", a).name == "micrograph-" + path.name[len("sample-"):]


def test_read_entry_returns_stats_only_for_their_own_parameters(tmp_path: Path) -> None:
    path = tmp_path / "entry.json"
    assert stats_cache.read_entry(path, {"seed": 0}) is None  # missing
    path.write_text('{"params": {"seed": 0}, "stats": {"x": [1, 2]}}')
    assert stats_cache.read_entry(path, {"seed": 0}) == {"x": [1, 2]}
    assert stats_cache.read_entry(path, {"seed": 1}) is None  # measured with other parameters
    path.write_text('{"params": {"seed": 0}, "stats": [1, 2]}')
    assert stats_cache.read_entry(path, {"seed": 0}) is None  # damaged: stats not an object
    path.write_text("{not json")
    assert stats_cache.read_json(path) is None and stats_cache.read_entry(path, {"seed": 0}) is None


def test_random_seed_split_cuts_the_epochs_shuffle_evenly_and_owner_is_distdgls() -> None:
    shuffled = np.random.default_rng((3, 1)).permutation(TRAIN)
    parts = split_epoch_seeds(TRAIN, OWNER, 2, 2, seed=3, epoch=1, seed_split="random")
    assert [len(p) for p in parts] == [len(q) for q in np.array_split(shuffled, 4)]
    np.testing.assert_array_equal(np.concatenate(parts), shuffled)
    for a, b in zip(split_epoch_seeds(TRAIN, OWNER, 2, 2, seed=3, epoch=1), epoch_seeds(TRAIN, OWNER, 2, 2, 3, 1)):
        np.testing.assert_array_equal(a, b)
    firsts = worker_batches(TRAIN, OWNER, 2, 2, batch_size=4, seed=3, num_batches=1, seed_split="random")
    for batches, part in zip(firsts, split_epoch_seeds(TRAIN, OWNER, 2, 2, seed=3, epoch=0, seed_split="random")):
        np.testing.assert_array_equal(batches[0], part[:4])
    with pytest.raises(SpecError, match=r"^seed_split: 'hash' is not one of owner, random$"):
        split_epoch_seeds(TRAIN, OWNER, 2, 2, seed=3, epoch=1, seed_split="hash")
