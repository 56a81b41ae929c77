"""dp on a partitioned graph structure (DistDGL: each machine keeps its vertices' in-edges and asks the owners
for the others), two gloo workers against the replicated structure: the same blocks, the same gradient, and the
exchange counted as the simulator counts it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from executor_workers import keyed_gradient, partitioned_epoch, partitioned_inference, partitioned_sampling

from gnnplan.executor.launch import run_in_process, spawn
from gnnplan.executor.sampling_partitioned import EDGE_FIELDS, local_structure
from gnnplan.executor.strategies.dp import check_knobs
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.strategies.dp import Knobs
from gnnplan.simulator.units import INDEX_BYTES
from gnnplan.simulator.workload.datasets import load_dataset

FANOUTS = [4, 3]


@pytest.fixture(scope="module")
def seeds() -> list[int]:
    return np.random.default_rng(5).choice(load_dataset("cora").train_idx, 48, replace=False).tolist()


@pytest.fixture(scope="module")
def two(seeds: list[int]) -> list[dict]:
    return spawn(partitioned_sampling, 2, (seeds, FANOUTS))["ranks"]


def test_partitioned_blocks_equal_the_replicated_ones(two: list[dict]) -> None:
    for r in two:
        assert len(r["parted"]) == len(FANOUTS)
        for parted, whole in zip(r["parted"], r["whole"]):
            for a, b in zip(parted, whole):  # src ids, dst ids, edges (local src, local dst), edge ids
                np.testing.assert_array_equal(a, b)


def test_the_exchange_is_the_other_machine_s_vertices_counted_like_the_simulator(two: list[dict]) -> None:
    owner = two[0]["owner"]
    for rank, r in enumerate(two):
        # every layer sends the destinations the other machine owns: seeds outward, layer by layer
        expected = sum(int((owner[dst] != rank).sum()) for _, dst, *_ in r["parted"])
        edges_back = sum(int((owner[dst[edst]] != rank).sum()) for _, dst, _, edst, _ in r["parted"])
        assert r["num_remote_vertices"] == expected > 0
        assert r["num_remote_edges"] == edges_back > 0
        assert r["request_bytes"] == INDEX_BYTES * expected
        assert r["reply_bytes"] == INDEX_BYTES * EDGE_FIELDS * edges_back
        # on the wire: per layer two counts to the other rank, this rank's ids and the edges it served
        other = two[1 - rank]
        assert r["sent"] == (2 * len(FANOUTS) * INDEX_BYTES + r["request_bytes"] + other["reply_bytes"])


def test_the_partitioned_gradient_is_the_one_worker_gradient(two: list[dict], seeds: list[int]) -> None:
    one = run_in_process(keyed_gradient, (seeds, FANOUTS))
    for r in two:
        assert sorted(r["grads"]) == sorted(one)
        for name, g in one.items():
            assert np.abs(g).max() > 0, name
            np.testing.assert_allclose(r["grads"][name], g, rtol=0, atol=1e-5, err_msg=name)


def test_an_epoch_with_dgl_s_sampler_records_the_exchange() -> None:
    ranks = spawn(partitioned_epoch, 2, ())["ranks"]
    for r in ranks:
        stats, spans = r["stats"], r["spans"]
        assert math.isfinite(stats.loss_sum) and stats.num_iterations == len(spans) > 0
        assert all(nbytes == INDEX_BYTES * (args["num_remote_vertices"] + EDGE_FIELDS * args["num_remote_edges"])
                   for nbytes, args in spans)
        assert sum(args["num_remote_vertices"] for _, args in spans) > 0  # METIS keeps most of a batch at home


@pytest.mark.parametrize("arch", ["sage", "gcn"])
def test_the_trainer_keeps_only_its_part_and_evaluates_on_it_as_on_the_whole_graph(arch: str) -> None:
    # gcn: self-loops and its global edge weights, taken by the part's edge ids
    from gnnplan.simulator.workload.datasets import load_dataset

    ranks = spawn(partitioned_inference, 2, (arch,))["ranks"]
    cora = load_dataset("cora")
    loops = cora.num_vertices if arch == "gcn" else 0  # one self-loop per vertex (no existing ones in Cora)
    for machine, r in enumerate(ranks):
        whole, part = r["replicated"], r["partitioned"]
        assert whole["edges"] == cora.num_edges + loops
        owned = whole["owner"] == machine
        assert part["edges"] == int(owned[cora.dst].sum()) + int(owned.sum() if loops else 0) < whole["edges"]
        np.testing.assert_allclose(part["logits"], whole["logits"], rtol=0, atol=1e-6)


def test_local_structure_keeps_only_the_machine_s_in_edges_in_csc_order() -> None:
    import dgl
    import torch

    g = dgl.graph((torch.tensor([1, 2, 0, 3, 2]), torch.tensor([0, 0, 1, 2, 3])), num_nodes=4)
    owner = np.array([0, 1, 0, 1])
    indptr, src, eids = local_structure(g, owner, 0)
    assert indptr.tolist() == [0, 2, 2, 3, 3]  # vertices 0 and 2 keep their in-edges
    full_ptr, full_src, full_eid = (t.numpy() for t in g.adj_tensors("csc"))
    assert src.tolist() == full_src[[0, 1, 3]].tolist() and eids.tolist() == full_eid[[0, 1, 3]].tolist()


def test_sampler_processes_on_a_partitioned_structure_are_refused() -> None:
    check_knobs(Knobs(graph_structure="partitioned"))
    with pytest.raises(SpecError, match="knobs.num_sampler_workers: with graph_structure=partitioned"):
        check_knobs(Knobs(graph_structure="partitioned", num_sampler_workers=2))
