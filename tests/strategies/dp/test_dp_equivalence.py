"""Two gloo workers on localhost against one: remote fetch is exact and counted, gradients are identical."""

from __future__ import annotations

import math

import numpy as np
import pytest
from executor_workers import fetch_check, several

from gnnplan.executor.data import input_features
from gnnplan.executor.launch import run_in_process, spawn
from gnnplan.simulator.units import INDEX_BYTES
from gnnplan.simulator.workload.datasets import load_dataset
from gnnplan.simulator.workload.partition import cached_vertices

KNOBS = {"cache_fraction": 0.1, "partitioner": "metis"}


@pytest.fixture(scope="module")
def cora():  # type: ignore[no-untyped-def]
    return load_dataset("cora")


@pytest.fixture(scope="module")
def fetched(cora):  # type: ignore[no-untyped-def]
    ids = np.random.default_rng(1).choice(cora.num_vertices, 600, replace=False).astype(np.int64)
    return ids, spawn(fetch_check, 2, (KNOBS, ids))["ranks"]


def test_remote_fetch_equals_direct_indexing(cora, fetched) -> None:  # type: ignore[no-untyped-def]
    ids, ranks = fetched
    expected = input_features(cora, "cora")[ids]
    for r in ranks:
        assert r["x"].dtype == np.float32
        np.testing.assert_array_equal(r["x"], expected)


def test_hit_local_remote_split_and_bytes(cora, fetched) -> None:  # type: ignore[no-untyped-def]
    ids, ranks = fetched
    cached = np.zeros(cora.num_vertices, dtype=bool)
    cached[cached_vertices(cora.in_degrees(), KNOBS["cache_fraction"])] = True
    owner = ranks[0]["owner"]
    assert set(np.unique(owner)) == {0, 1}
    row = cora.feature_dim * 4
    for rank, r in enumerate(ranks):
        other = ranks[1 - rank]
        remote = int((~cached[ids] & (owner[ids] != rank)).sum())
        assert r["num_cached"] == int(cached.sum()) == 270
        assert (r["num_hit"], r["num_remote"]) == (int(cached[ids].sum()), remote)
        assert r["num_hit"] + r["num_local"] + r["num_remote"] == len(ids)
        assert remote > 0
        # one int64 count per other rank, then the ids; rows come back
        assert r["request_bytes"] == INDEX_BYTES * (1 + remote)
        assert r["reply_bytes"] == remote * row
        # the counters see this rank's request and its replies to the other rank's request
        assert r["sent"] == r["request_bytes"] + other["num_remote"] * row
        assert r["received"] == r["reply_bytes"] + other["request_bytes"]


def test_two_workers_compute_the_one_worker_gradient(cora) -> None:  # type: ignore[no-untyped-def]
    """Also with globally random mini-batches (``seed_split = random``), whose epoch loads more rows from the other
    machine than DistDGL's split does, and whose batches are the statistics' (split_epoch_seeds)."""
    seeds = np.random.default_rng(0).choice(cora.train_idx, 40, replace=False).tolist()
    cases = [("sage", {}, seeds), ("gcn", {}, seeds), ("gat", {"num_heads": 2}, seeds),
             ("sage", {}, seeds[:1]),  # one seed: the second worker has an empty batch
             ("sage", {}, seeds, {"seed_split": "random"})]
    two, uneven, owner, rand = spawn(several, 2, ([("gradients", (cases,)), ("uneven_epochs", (1,)),
                                                   ("epoch_loads", ("owner",)), ("epoch_loads", ("random",))],))
    (one,) = run_in_process(several, ([("gradients", (cases,))],))
    for (arch, *_), a, b in zip(cases, one, two):
        assert sorted(a) == sorted(b), arch
        for name in a:
            assert np.abs(a[name]).max() > 0, (arch, name)
            np.testing.assert_allclose(b[name], a[name], rtol=0, atol=1e-5, err_msg=f"{arch} {name}")
    # an epoch whose last iteration is empty on one worker runs to the end on both (sampler processes on)
    ranks = uneven["ranks"]
    assert ranks[0]["batch_sizes"] == [25, 25, 1] and ranks[1]["batch_sizes"] == [25, 25, 0]
    for r, seeds in zip(ranks, (51, 50)):
        assert [s.num_iterations for s in r["stats"]] == [3, 3]
        assert [s.num_seeds for s in r["stats"]] == [seeds, seeds]
        assert all(math.isfinite(s.loss_sum) and s.network_bytes > 0 for s in r["stats"])
    # globally random batches: each rank's seeds are the even cut of the epoch's shuffle, and most of a rank's rows
    # come from the other machine (DistDGL's split keeps them at home)
    shuffled = np.random.default_rng((0, 0)).permutation(cora.train_idx)
    for r, part in enumerate(np.array_split(shuffled, 2)):
        np.testing.assert_array_equal(rand["ranks"][r]["first"], part[: len(rand["ranks"][r]["first"])])
    share = {name: sum(r["remote"] for r in run["ranks"]) / sum(r["remote"] + r["local"] for r in run["ranks"])
             for name, run in (("owner", owner), ("random", rand))}
    assert share["owner"] < 0.25 < 0.4 < share["random"] < 0.6, share
