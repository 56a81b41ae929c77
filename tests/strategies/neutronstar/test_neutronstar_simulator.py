"""The neutronstar simulator: dependency sets, Algorithm 4, the memory model, the mode flip under a bandwidth
sweep, input errors, and golden numbers."""

from __future__ import annotations

import numpy as np
import pytest
from neutronstar_workers import make_workload

from gnnplan.executor.data import SELF_LOOP_ARCHS
from gnnplan.simulator.api import load_context, parse_knobs, simulate
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware import pricing
from gnnplan.simulator.hardware.spec import load_cluster
from gnnplan.simulator.strategies import neutronstar as ns
from gnnplan.simulator.strategies.neutronstar import dependencies as deps
from gnnplan.simulator.strategies.neutronstar.split import (
    EDGE_BYTES,
    SplitCosts,
    comm_per_byte_s,
    hybrid_sets,
    split_costs,
)
from gnnplan.simulator.workload.datasets import load_dataset
from gnnplan.simulator.workload.spec import load_workload

RMAT = {"generator": "rmat", "num_vertices": 20000, "edge_factor": 16, "feature_dim": 128, "num_classes": 8,
        "seed": 0}


def cluster(name: str = "4x-a100-10gbe", machines: int = 2, **network):  # type: ignore[no-untyped-def]
    cl = load_cluster(name)
    return cl.model_copy(update={"num_machines": machines, "network": cl.network.model_copy(update=network)})


@pytest.fixture(scope="module")
def cora_structure():  # type: ignore[no-untyped-def]
    graph = load_dataset("cora")
    g = deps.training_graph(graph, "gcn")
    return graph, g, deps.owners("cora", graph, g, 4, "chunk")


def test_self_loop_rule_matches_the_executor() -> None:
    assert deps.SELF_LOOP_ARCHS == SELF_LOOP_ARCHS


def test_chunk_partition_is_contiguous_and_balanced(cora_structure) -> None:  # type: ignore[no-untyped-def]
    _, g, owner = cora_structure
    assert (np.diff(owner) >= 0).all() and set(owner.tolist()) == {0, 1, 2, 3}
    load = np.bincount(owner, weights=g.in_degrees + 12.0 * 5)
    assert load.max() / load.min() < 1.01


def test_depcache_and_depcomm_sets(cora_structure) -> None:  # type: ignore[no-untyped-def]
    _, g, owner = cora_structure
    mine = owner == 1
    one_hop, two_hop = g.expand(mine), g.expand(g.expand(mine))
    cache, comm = deps.depcache_sets(g, owner, 1, 2), deps.depcomm_sets(g, owner, 1, 2)
    np.testing.assert_array_equal(cache.remote, np.flatnonzero(one_hop & ~mine))
    np.testing.assert_array_equal(cache.replicated[1], cache.remote)
    np.testing.assert_array_equal(cache.replicated[0], np.flatnonzero(two_hop & ~mine))
    assert all(len(c) == 0 for c in cache.communicated)
    assert all(len(r) == 0 for r in comm.replicated)
    assert all(sorted(c.tolist()) == cache.remote.tolist() for c in comm.communicated)
    assert (np.diff(owner[comm.communicated[0]]) >= 0).all()  # grouped by owner


def test_hybrid_is_algorithm_4(cora_structure) -> None:  # type: ignore[no-untyped-def]
    graph, g, owner = cora_structure
    # hand-set rates, as the paper's Fig. 11 sweep: T_v = 1, T_e = 0.25, T_c = 2 at layer 2
    costs = SplitCosts(vertex_s=(1.0,), edge_s=(0.25,), comm_s=(1.0, 2.0), row_bytes=(5732.0, 64.0))
    sets = hybrid_sets(g, owner, 2, 2, costs, None)
    # layer 1: raw features cost no compute, so every dependency's features are cached (no budget)
    assert len(sets.communicated[0]) == 0 and set(sets.remote) <= set(sets.replicated[0])
    # layer 2 (L = 2): cache u iff T_v + in_degree(u) T_e < T_c, a per-vertex in-degree threshold (brief §1.5)
    deg = g.in_degrees[sets.remote]
    cached = np.isin(sets.remote, sets.replicated[1])
    np.testing.assert_array_equal(cached, deg < 4)
    assert 0 < cached.sum() < len(cached)
    np.testing.assert_array_equal(np.sort(sets.communicated[1]), sets.remote[~cached])
    # the leaves of the cached subtrees are replicated too
    assert set(g.indices[np.isin(g.edge_dst, sets.replicated[1])]) - set(sets.owned) <= set(sets.replicated[0])
    # with a budget the greedy stops, and the cached bytes stay within it
    budget = 2.0e6
    small = hybrid_sets(g, owner, 2, 2, costs, budget)
    used = sum(len(r) * costs.row_bytes[k] for k, r in enumerate(small.replicated)) + \
        EDGE_BYTES * g.in_degrees[small.replicated[1]].sum()
    assert 0 < used <= budget and len(small.communicated[0]) > 0 and len(small.replicated[1]) == 0


def test_cluster_rates_cache_less_on_a_faster_network(cora_structure) -> None:  # type: ignore[no-untyped-def]
    graph, g, owner = cora_structure
    wl = make_workload("gin")
    cached = []
    for bandwidth in (1.0e8, 1.0e9, 1.0e10):
        cl = cluster(bandwidth_bytes_per_s=bandwidth)
        costs = split_costs(cl, wl.model, graph.feature_dim, graph.num_classes)
        assert costs.comm_s[1] == pytest.approx(2 * 64 * (2 / cl.pcie.bandwidth_bytes_per_s + 1 / bandwidth))
        sets = ns.worker_sets(cl, wl, ns.Knobs(mode="hybrid"), g, owner, 2, graph.feature_dim, graph.num_classes)
        cached.append(len(sets.replicated[1]))
    assert cached[0] >= cached[1] >= cached[2] and cached[0] > cached[2]


def test_preferred_pure_mode_flips_with_network_bandwidth() -> None:
    wl = make_workload("gcn", dataset=RMAT, hidden_dim=128)
    winners = []
    for bandwidth in (1.0e8, 1.0e9, 1.0e10):
        cl = cluster("local", machines=4, bandwidth_bytes_per_s=bandwidth)
        t = {m: simulate(cl, wl, "neutronstar", {"mode": m}).epoch_time_s for m in ("depcache", "depcomm")}
        winners.append(min(t, key=t.get))
    assert winners[0] == "depcache" and winners[-1] == "depcomm"


def test_depcache_runs_out_of_gpu_memory_where_depcomm_fits() -> None:
    wl = make_workload("gcn", dataset=RMAT, hidden_dim=128)
    base = cluster(machines=4)
    need = {m: simulate(base, wl, "neutronstar", {"mode": m}).peak_memory_bytes["gpu"] for m in ("depcache", "depcomm")}
    assert need["depcache"] > need["depcomm"] + 20e6  # the replicated 2-hop closure (features, activations)
    middle = (need["depcache"] + need["depcomm"]) / 2
    small = base.model_copy(update={"gpu": base.gpu.model_copy(update={"memory_bytes": middle})})
    cache, comm = (simulate(small, wl, "neutronstar", {"mode": m}) for m in ("depcache", "depcomm"))
    assert not cache.feasible and cache.reason.startswith("out of GPU memory") and cache.epoch_time_s == float("inf")
    assert comm.feasible and comm.peak_memory_bytes["gpu"] < small.gpu.memory_bytes < cache.peak_memory_bytes["gpu"]
    capped = simulate(base, wl, "neutronstar", {"mode": "depcache", "cache_budget_bytes": 1.0e6})
    assert not capped.feasible and "cache_budget_bytes" in capped.reason


def test_golden_cora(cora_structure) -> None:  # type: ignore[no-untyped-def]
    _, g, owner = cora_structure  # 4 chunk partitions, as the 4x-a100-10gbe preset
    r = {m: simulate("4x-a100-10gbe", "cora-gcn-full", "neutronstar", {"mode": m}) for m in ns.MODES}
    params = 1433 * 16 + 16 + 16 * 7 + 7
    all_reduce = 4 * 2 * 3 / 4 * 4 * params  # 4 ranks, ring all-reduce of float32 gradients
    remote = sum(len(deps.depcomm_sets(g, owner, rank, 2).remote) for rank in range(4))
    # DepComm: raw features (1433 floats) forward at layer 1; hidden rows (16 floats) forward and back at layer 2
    assert r["depcomm"].bytes_per_epoch["network"] == remote * 4 * (1433 + 2 * 16) + all_reduce
    assert r["depcomm"].bytes_per_epoch["pcie"] == 2 * remote * 4 * (1433 + 2 * 16)
    assert r["depcache"].bytes_per_epoch["network"] == all_reduce
    # 0.006486 before the row copies were priced (test_row_copies_are_device_copies), 0.006507 until a layer
    # without replicas paid a replica block's launches and GCN priced norm="both"'s degree-norm passes (2026-11-30)
    assert r["depcomm"].epoch_time_s == pytest.approx(0.006494205686945343, rel=1e-9)
    assert r["depcache"].epoch_time_s == pytest.approx(0.0002969617877813505, rel=1e-9)  # 0.000329 before that
    assert r["hybrid"].epoch_time_s == r["depcache"].epoch_time_s  # A100s: recomputing Cora's 2 hops is cheap
    assert {"forward", "backward", "exchange", "all_reduce", "optimizer"} <= set(r["depcomm"].breakdown_s)
    assert r["depcomm"].num_iterations == 1 and r["depcomm"].breakdown_s["exchange"] > 0
    assert r["depcache"].breakdown_s["exchange"] == 0


def test_row_copies_are_device_copies(cora_structure) -> None:  # type: ignore[no-untyped-def]
    """Per rank of DepComm on Cora (4 chunk parts): layer 1 packs the raw feature rows it sends (1433 floats each)
    and receives into its table; layer 2 packs the hidden rows it sends (16 floats), copies X_2 (its owned rows:
    no replicas) and the received rows into T_2, and adds the gradients that come back for the rows it sent; at
    each layer the master block gathers its sources (owned and remote rows); each copy takes gpu_gather_s of its
    bytes. DepCache exchanges nothing: its blocks only gather."""
    _, g, owner = cora_structure
    cl = load_cluster("4x-a100-10gbe")
    res = simulate(cl, "cora-gcn-full", "neutronstar", {"mode": "depcomm"})
    sets = [deps.depcomm_sets(g, owner, rank, 2) for rank in range(4)]
    for rank in range(4):
        sent = sum(int((owner[s.communicated[0]] == rank).sum()) for r, s in enumerate(sets) if r != rank)
        received = len(sets[rank].communicated[1])
        expected = [("pack", 1, sent * 4 * 1433), ("pack", 2, sent * 4 * 16),
                    ("unpack", 2, (len(sets[rank].owned) + received) * 4 * 16), ("unpack", 2, sent * 4 * 16)]
        sources = len(sets[rank].owned) + len(sets[rank].remote)
        expected += [("gather", 1, sources * 4 * 1433), ("gather", 2, sources * 4 * 16)]
        spans = [s for s in res.spans if s.rank == rank and s.phase in ("pack", "unpack")]
        spans += [s for s in res.spans if s.rank == rank and s.phase == "gather"]
        assert [(s.phase, s.args["layer"], s.nbytes) for s in spans] == expected
        for s in spans:
            assert s.dur_s == pytest.approx(pricing.gpu_gather_s(cl, s.nbytes), rel=1e-12)
    cache = simulate(cl, "cora-gcn-full", "neutronstar", {"mode": "depcache"})
    assert not [s for s in cache.spans if s.phase in ("pack", "unpack")]
    assert {s.args["layer"] for s in cache.spans if s.phase == "gather"} == {1, 2}


def test_bad_input_is_one_line() -> None:
    with pytest.raises(SpecError, match=r"^--set mode=fast: mode must be one of depcache, depcomm, hybrid$"):
        parse_knobs("neutronstar", ["mode=fast"])
    with pytest.raises(SpecError, match="partitioner"):
        simulate("4x-a100-10gbe", "cora-gcn-full", "neutronstar", {"partitioner": "random"})
    with pytest.raises(SpecError, match="^training.mode: strategy neutronstar supports full-graph"):
        load_context("4x-a100-10gbe", load_workload("cora-gcn"), "neutronstar")
    assert parse_knobs("neutronstar", ["ring=false", "cache_budget_bytes=none"]) == \
        {"ring": False, "cache_budget_bytes": None}


def test_only_layers_with_replicas_run_a_replica_block() -> None:
    """The executor builds a replica block at layer l < L only when the worker replicates vertices there
    (executor/strategies/neutronstar/blocks.py); the simulation prices none elsewhere (before 2026-11-30 it paid an
    empty block's launches at every other layer), and calibration's compute profile counts the same spans."""
    cl = load_cluster("local").model_copy(update={"num_machines": 2, "gpus_per_machine": 1})
    for mode, layers in (("depcomm", set()), ("depcache", {1})):
        res = simulate(cl, "cora-gcn-full", "neutronstar", {"mode": mode})
        for phase in ("forward", "backward"):
            spans = [x for x in res.spans if x.phase == phase]
            assert {x.args["layer"] for x in spans if x.args["part"] == "replica"} == layers, (mode, phase)
            assert all(x.dur_s > 0 for x in spans)
        _, _, ctx = load_context(cl, "cora-gcn-full", "neutronstar", {"mode": mode})
        profile = ns.compute_profile(ctx, ns.Knobs(mode=mode))
        for phase in ("forward", "backward"):  # the profile's mean is over exactly the simulated spans
            spans = [x for x in res.spans if x.phase == phase]
            launches = sum(len(_block_kernels(ctx, mode, x.rank, x.args["layer"], x.args["part"], phase))
                           for x in spans)
            assert len(spans) * profile[phase].kernels_per_span == pytest.approx(launches)


def _block_kernels(ctx, mode: str, rank: int, layer: int, part: str, phase: str) -> list:  # type: ignore[no-untyped-def]
    """The kernels of worker ``rank``'s ``part`` block at ``layer`` (1-based) in ``phase``."""
    from gnnplan.simulator.strategies.neutronstar.work import layer_kernels, worker_work

    model, sm = ctx.workload.model, ctx.summary
    counts = ns.dependency_counts(ctx, ns.Knobs(mode=mode))[rank]
    w = worker_work(ctx.cluster, model, sm.feature_dim, sm.num_classes, counts)
    last = part == "master" and layer == model.num_layers
    kernels = layer_kernels(w.master if part == "master" else w.replica, model.arch, layer - 1, last)
    return kernels[0 if phase == "forward" else 1]


def test_communicated_rows_are_priced_on_the_paths_they_take() -> None:
    """Algorithm 4's cost of communicating a row follows the exchange's paths (split.comm_per_byte_s): one
    machine's exchanges are peer copies, which neither the NIC nor PCIe carries when NVLink does (before
    2026-11-30 they were priced host-staged, and a faster PCIe made the hybrid split slower on dgx-a100); across
    machines the host-staged or GPUDirect network path, weighted by the share of peers on each side."""
    one = load_cluster("dgx-a100").model_copy(update={"num_machines": 1})
    peer = 1.0 / one.nvlink.bandwidth_bytes_per_s
    assert comm_per_byte_s(one) == pytest.approx(peer)
    faster = one.model_copy(update={"pcie": one.pcie.model_copy(update={"bandwidth_bytes_per_s": 1e12}),
                                    "network": one.network.model_copy(update={"bandwidth_bytes_per_s": 1e12})})
    assert comm_per_byte_s(faster) == comm_per_byte_s(one)
    two = one.model_copy(update={"num_machines": 2})  # 15 peers: 7 on the machine, 8 on the other
    assert comm_per_byte_s(two) == pytest.approx(7 / 15 * peer + 8 / 15 * pricing.exchange_per_byte_s(two))
    single = load_cluster("4x-a100-10gbe").model_copy(update={"num_machines": 1, "gpus_per_machine": 1})
    assert comm_per_byte_s(single) == 0.0
