"""Executor building blocks on one process: models, GCN normalisation, seed schedule, feature store, trace."""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path

import dgl
import numpy as np
import pytest
import torch
from executor_workers import make_plan

from gnnplan.executor import comm
from gnnplan.executor.data import (
    Topology,
    build_graph,
    input_features,
    iteration_batches,
    positions_in_owner,
    row_normalised,
)
from gnnplan.executor.features import FeatureStore, fill, from_cache, machine_rows
from gnnplan.executor.launch import run_in_process
from gnnplan.executor.models import GNN, attach_edge_weights, num_params
from gnnplan.executor.sampling import BatchStream, TimedSampler
from gnnplan.executor.trace import Recorder, save, trace_path
from gnnplan.simulator.strategies.window import iteration_plan
from gnnplan.simulator.trace import read_trace
from gnnplan.simulator.workload.batches import epoch_seeds, owner_split
from gnnplan.simulator.workload.datasets import load_dataset
from gnnplan.simulator.workload.dgl_seed import seed_dgl
from gnnplan.simulator.workload.inference import inference_owners
from gnnplan.simulator.workload.model_cost import param_count
from gnnplan.simulator.workload.partition import cached_vertices, partition
from gnnplan.simulator.workload.spec import ModelSpec

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def cora():  # type: ignore[no-untyped-def]
    return load_dataset("cora")


@pytest.mark.parametrize("arch, layers, hidden, heads", [
    ("gcn", 2, 16, 1), ("sage", 3, 64, 1), ("gat", 3, 8, 4), ("gat", 1, 8, 4), ("gin", 2, 32, 1)])
def test_parameter_counts_match_the_simulator(arch: str, layers: int, hidden: int, heads: int) -> None:
    spec = ModelSpec(arch=arch, num_layers=layers, hidden_dim=hidden, num_heads=heads)
    assert num_params(GNN(spec, 1433, 7)) == param_count(spec, 1433, 7)


def test_gcn_blocks_compute_kipf_full_graph_gcn(cora) -> None:  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    model = GNN(ModelSpec(arch="gcn", num_layers=2, hidden_dim=16, dropout=0.5), 1433, 7).eval()
    x = torch.from_numpy(input_features(cora, "cora"))
    n = cora.num_vertices
    a = np.zeros((n, n))
    a[cora.dst, cora.src] = 1.0
    a += np.eye(n)
    d = a.sum(1) ** -0.5
    a_hat = torch.from_numpy(d[:, None] * a * d[None, :]).float()
    w1, w2 = model.layers[0].weight, model.layers[1].weight
    dense = a_hat @ torch.relu(a_hat @ x @ w1 + model.layers[0].bias) @ w2 + model.layers[1].bias
    g, weights = build_graph(cora, "gcn")
    seeds = torch.from_numpy(cora.test_idx)
    inputs, _, blocks, _ = TimedSampler([-1, -1]).sample(g, seeds)
    attach_edge_weights(blocks, weights)
    with torch.no_grad():
        out = model(blocks, x[inputs])
        torch.testing.assert_close(out, dense[seeds].detach(), rtol=0, atol=1e-5)


def test_row_normalisation_only_for_planetoid(cora) -> None:  # type: ignore[no-untyped-def]
    f = np.array([[1.0, 3.0], [0.0, 0.0]], dtype=np.float32)
    np.testing.assert_array_equal(row_normalised(f), [[0.25, 0.75], [0.0, 0.0]])
    np.testing.assert_allclose(input_features(cora, "cora").sum(1), 1.0, rtol=1e-6)
    assert input_features(cora, "some/ogb/folder") is cora.features


def test_epoch_schedule_matches_the_simulator(cora) -> None:  # type: ignore[no-untyped-def]
    owner = partition(cora.src, cora.dst, cora.num_vertices, 3, "metis", 0)
    seeds = epoch_seeds(cora.train_idx, owner, 3, 2, seed=5, epoch=1)
    assert len(seeds) == 6
    assert sorted(np.concatenate(seeds).tolist()) == sorted(cora.train_idx.tolist())
    assert max(map(len, seeds)) - min(map(len, seeds)) <= 1
    np.testing.assert_array_equal(seeds[0], epoch_seeds(cora.train_idx, owner, 3, 2, seed=5, epoch=1)[0])
    assert not np.array_equal(seeds[0], epoch_seeds(cora.train_idx, owner, 3, 2, seed=5, epoch=2)[0])
    per_iteration = 64 // 6
    mine, sizes = iteration_batches(seeds, per_iteration)
    expected = iteration_plan(len(cora.train_idx), 64, 6)
    assert len(sizes) == expected.num_iterations and sum(sizes) == len(cora.train_idx)
    assert all(len(b) == len(sizes) for b in mine)
    assert sizes[-1] == sum(len(s) - (len(sizes) - 1) * per_iteration for s in seeds)


def test_uneven_batches_are_padded_with_empty_ones() -> None:
    mine, sizes = iteration_batches([np.arange(5), np.arange(3)], 2)
    assert [len(b) for b in mine[0]] == [2, 2, 1] and [len(b) for b in mine[1]] == [2, 1, 0]
    assert sizes == [4, 3, 1]
    parts = owner_split(np.array([7]), np.zeros(10, dtype=np.int64), 2, 1)
    assert [p.tolist() for p in parts] == [[7], []]


def test_positions_and_inference_owners() -> None:
    owner = np.array([1, 0, 1, 1, 0, 1])
    np.testing.assert_array_equal(positions_in_owner(owner), [0, 0, 1, 2, 1, 3])
    np.testing.assert_array_equal(inference_owners(owner, 2, 2), [2, 0, 2, 3, 1, 3])


@pytest.mark.parametrize("cache_fraction", [0.2, 0.9])
def test_single_machine_store_with_cache_equals_indexing(cora, cache_fraction: float) -> None:  # type: ignore[no-untyped-def]
    feats = input_features(cora, "cora")
    cache = cached_vertices(cora.in_degrees(), cache_fraction)
    owner, topo = np.zeros(cora.num_vertices, dtype=np.int64), Topology(0, 1, 1, CPU)
    store = FeatureStore(machine_rows(feats, owner, topo), owner, topo, cache)
    ids = torch.from_numpy(np.random.default_rng(0).choice(cora.num_vertices, 500, replace=False))
    x, stats = store.load(ids)
    np.testing.assert_array_equal(x.numpy(), feats[ids.numpy()])
    hits = int(np.isin(ids.numpy(), cache).sum())
    assert (stats.num_hit, stats.num_local, stats.num_remote) == (hits, 500 - hits, 0) and hits > 0
    assert stats.fetch is None and stats.host_to_device_bytes == (500 - hits) * 1433 * 4


@pytest.mark.parametrize("slots", [[2, 0, 1, 2], [2, -1, 0, -1], [-1, 1, -1, -1], [-1, -1]])
def test_rows_from_a_cache_are_the_cached_rows_and_the_misses_positions(slots: list[int]) -> None:
    cache_rows = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    slot = torch.tensor(slots)
    x, miss_pos = from_cache(cache_rows, slot)
    hit = slot >= 0
    torch.testing.assert_close(x[hit], cache_rows[slot[hit]], rtol=0, atol=0)
    assert miss_pos.tolist() == torch.nonzero(~hit).squeeze(1).tolist()
    fill(x, miss_pos, torch.full((len(miss_pos), 4), -1.0))
    assert bool((x[~hit] == -1.0).all())
    x, miss_pos = from_cache(torch.empty((0, 4)), torch.tensor([-1, -1]))
    assert x.shape == (2, 4) and miss_pos.tolist() == [0, 1]


def _schedule(batches: list[np.ndarray], epoch: int) -> list[np.ndarray]:
    return batches[epoch:] + batches[:epoch]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_batch_streams_are_reproducible(cora, num_workers: int) -> None:  # type: ignore[no-untyped-def]
    g, _ = build_graph(cora, "sage")
    seed_batches = [cora.train_idx[:64], cora.train_idx[64:100], cora.train_idx[:0]]
    schedule = functools.partial(_schedule, seed_batches)
    runs = []
    for _ in range(2):
        seed_dgl(3)
        stream = BatchStream(g, TimedSampler([5, 5]), schedule, 3, num_workers, seed=3)
        runs.append([list(stream.epoch(e)) for e in range(2)])
        stream.close()
    for epoch in range(2):
        for a, b, seeds in zip(runs[0][epoch], runs[1][epoch], schedule(epoch)):
            np.testing.assert_array_equal(a.seeds.numpy(), seeds)
            assert torch.equal(a.input_nodes, b.input_nodes)
            assert a.start_s <= a.end_s
    assert [len(b.seeds) for b in runs[0][0]] == [64, 36, 0] and runs[0][0][2].num_sampled_edges == 0


@pytest.mark.parametrize("num_workers", [0, 1])
def test_the_in_edge_format_is_built_before_sampler_processes_fork(cora, num_workers: int) -> None:  # type: ignore[no-untyped-def]
    # built after the fork, every sampler process would build (and hold) its own copy on its first batch
    g, _ = build_graph(cora, "sage")
    assert g.formats()["created"] == ["coo"]
    stream = BatchStream(g, TimedSampler([5, 5]), functools.partial(_schedule, [cora.train_idx[:8]]), 1, num_workers)
    try:
        assert ("csc" in g.formats()["created"]) == (num_workers > 0)  # inline: built on the first batch, no copies
    finally:
        stream.close()


def test_recorder_and_trace_file(tmp_path: Path) -> None:
    rec = Recorder(3, origin_s=10.0)
    rec.add("load", 10.5, 10.75, "pcie", epoch=1, iteration=2, nbytes=64, hit_bytes=8)
    rec.add("epoch", 10.0, 11.0, "host", epoch=1)
    load, _ = rec.spans()
    assert (load.rank, load.start_s, load.dur_s, load.nbytes, load.args) == (3, 0.5, 0.25, 64.0, {"hit_bytes": 8})
    path = trace_path(tmp_path, "cora-sage", "dp")
    save(path, rec.spans(), {"x": 1})
    assert trace_path(tmp_path, "cora-sage", "dp") != path
    spans, meta = read_trace(path)
    assert meta == {"x": 1} and {s.phase for s in spans} == {"load", "epoch"}


def test_ring_bytes() -> None:
    assert comm.ring_bytes(100.0, 1) == 0.0
    assert comm.ring_bytes(100.0, 4) == 150.0


def _evaluate(topo: Topology, emit, arch: str) -> tuple:  # type: ignore[no-untyped-def]
    from gnnplan.executor.strategies.dp import Trainer

    trainer = Trainer(topo, make_plan(arch, 1, {"cache_fraction": 0.05}, fanouts=[-1, -1]), Recorder(0, 0.0))
    acc = trainer.evaluate()
    data = trainer.data
    ids = torch.from_numpy(data.test_idx)
    inputs, _, blocks, _ = TimedSampler([-1, -1]).sample(data.graph, ids)
    attach_edge_weights(blocks, data.edge_weight)
    trainer.model.eval()
    with torch.no_grad():
        pred = trainer.model(blocks, data.store.load(inputs)[0]).argmax(1)
    return acc, int((pred == data.labels[ids]).sum()), len(ids), len(data.val_idx)


@pytest.mark.parametrize("arch", ["sage", "gcn"])
def test_layerwise_inference_equals_minibatch_inference(arch: str) -> None:
    acc, correct, total, num_val = run_in_process(_evaluate, (arch,))
    assert (acc.test_correct, acc.test_total, acc.val_total) == (correct, total, num_val)
    assert math.isfinite(acc.val_correct / acc.val_total)



@pytest.mark.parametrize("device", ["cuda:0", "cpu"])
def test_a_gpu_evaluation_records_the_copy_back_of_its_rows(device: str) -> None:
    """A chunk's spans (executor/evaluate.py, ``Evaluator._record``): on a GPU the output rows' copy back to host
    memory is ``eval_to_host`` on the pcie stream, from the forward's end to the last reading, with the rows' bytes
    (the simulator's ``gpu_to_host_s`` of them, inference_time); on the CPU there is no such span. A CUDA device is
    only named here: ``_record`` reads its type, nothing runs on it."""
    from types import SimpleNamespace

    from gnnplan.executor.evaluate import Evaluator

    ev = Evaluator.__new__(Evaluator)  # the recording alone: no graph, store or process group
    ev.rec, ev.model_spec = Recorder(0, 0.0), ModelSpec(arch="sage", num_layers=2, hidden_dim=4)
    ev.topo, ev.data = SimpleNamespace(device=torch.device(device)), SimpleNamespace(feature_dim=8, num_classes=3)
    block = dgl.create_block(([0, 1, 2, 2], [0, 0, 1, 1]), num_src_nodes=3, num_dst_nodes=2)
    ev._record(2, 5, 1, block, torch.tensor([0.10, 0.15]), (0.2, 0.3, 0.4, 0.45), None, 16, 0, 12)
    spans = {s.phase: s for s in ev.rec.spans()}
    assert set(spans) == {"eval_sample", "eval_load", "eval_forward"} | ({"eval_to_host"} if device != "cpu"
                                                                          else set())
    assert all((s.epoch, s.iteration) == (2, 5) for s in spans.values())
    assert spans["eval_forward"].args["layer"] == 1 and spans["eval_load"].nbytes == 3 * 16
    if device != "cpu":
        back = spans["eval_to_host"]
        assert (back.stream, back.nbytes) == ("pcie", 2 * 12)
        assert back.start_s == pytest.approx(0.4) and back.dur_s == pytest.approx(0.05)

def test_a_dataset_card_is_not_training_data() -> None:
    """A card carries statistics (the simulator's proxy graph), not the graph: the executor refuses it."""
    from gnnplan.executor.runner import resolved_plan
    from gnnplan.simulator.errors import SpecError
    from gnnplan.simulator.hardware.spec import load_cluster
    from gnnplan.simulator.plan import Plan
    from gnnplan.simulator.workload.spec import load_workload

    wl = load_workload("cora-sage").model_copy(update={"dataset": "ogbn-arxiv"})
    plan = Plan(strategy="dp", num_workers=2, cluster=load_cluster("local"), workload=wl)
    with pytest.raises(SpecError, match="workload.dataset: 'ogbn-arxiv' is a dataset card"):
        resolved_plan(plan, 2, 1, None)


def test_max_over_ranks_is_the_largest_value_any_rank_passes() -> None:
    """Three gloo ranks pass 1.5, 11.5, 21.5 and 0, -1, -2: every rank (rank 0's answer here) gets 21.5 and 0."""
    from executor_workers import rank_maxima

    from gnnplan.executor.launch import spawn

    assert spawn(rank_maxima, 3, ()) == [21.5, 0.0]


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE") or not os.path.isdir("/proc/self/task"),
                    reason="needs Linux (SCHED_IDLE and /proc)")
def test_gloo_event_loop_runs_only_on_an_idle_core() -> None:
    """After the executor joins a gloo process group, gloo's TCP event-loop thread is in SCHED_IDLE
    (executor/gloo_loop.py: it spins while a collective is in flight), and idle_gloo_loop lowers every one it
    finds (here, in the test process, whatever other tests left)."""
    from executor_workers import gloo_loop_policies

    from gnnplan.executor.gloo_loop import idle_gloo_loop, loop_threads
    from gnnplan.executor.launch import spawn

    assert spawn(gloo_loop_policies, 2, ()) == [os.SCHED_IDLE]
    assert idle_gloo_loop() == len(loop_threads())
