"""The gsplit simulation: shuffle volume, lockstep pace, memory, bandwidth and cache monotonicity; dp's cache
placements; the tuner's candidates. Mechanism tests run on constructed split statistics, the rest on Cora."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import numpy as np
import pytest

from gnnplan.autotune.candidates import candidates
from gnnplan.simulator.api import load_context, simulate
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.collectives import all_reduce_link_bytes
from gnnplan.simulator.hardware.spec import ClusterSpec, load_cluster
from gnnplan.simulator.strategies import dp, gsplit
from gnnplan.simulator.strategies.base import SimContext
from gnnplan.simulator.strategies.gsplit.stats import SplitStats
from gnnplan.simulator.strategies.window import iteration_plan
from gnnplan.simulator.workload.graphstats import CACHE_GRID, DatasetSummary
from gnnplan.simulator.workload.model_cost import param_count
from gnnplan.simulator.workload.spec import load_workload

SUMMARY = DatasetSummary("fake", num_vertices=10_000, num_edges=100_000, feature_dim=128, num_classes=8,
                         num_train=256, num_val=0, num_test=0)
WORKLOAD = load_workload("cora-sage")          # GraphSAGE, hidden 64, fanouts [10, 10]: widths 64 and 8
WIDTHS = (64, 8)


def fake_stats(edges: tuple[tuple[float, float], ...] = ((4e5, 4e5), (6e4, 6e4)), cross: int = 30,
               partition: int = 5000, batches: int = 4, sampled: tuple[float, float] | None = None) -> SplitStats:
    """Two splits, ``batches`` equal batches: 300 inputs each, 40 then 32 destinations, ``edges[l][i]`` computed
    by split i (``sampled`` edges per layer, default their sum); ``cross`` rows each way in every shuffle (10 kept
    locally); cache hits ``min(1, 2 c)`` of the inputs."""
    e = np.asarray(edges, dtype=np.int64)                                      # (L, g)
    total = e.sum(axis=1) if sampled is None else np.asarray(sampled, dtype=np.int64)
    rows = np.array([[[10, cross], [cross, 10]]] * 2)
    grid = np.asarray(CACHE_GRID)
    hits = np.floor(300 * np.minimum(1.0, 2 * grid))

    def rep(a: Any) -> np.ndarray:
        return np.repeat(np.asarray(a)[None], batches, axis=0)

    return SplitStats(
        iterations=np.arange(batches), num_iterations=batches, num_seeds=rep(64), num_input_vertices=rep(600),
        num_items=rep(2000), num_src=rep([600, 80]), num_dst=rep([80, 64]), num_edges=rep(total),
        split_src=rep([[300, 300], [40, 40]]), split_dst=rep([[40, 40], [32, 32]]), edges_by_src=rep(e),
        edges_by_dst=rep(e), local_edges=rep(e // 2), sage_rows=rep(rows), gat_rows=rep(rows),
        cache_fractions=grid, input_hits=rep([hits, hits]), partition_sizes=np.array([partition, partition]),
        dp_input_vertices=rep(700), dp_edges=rep(e.sum(axis=1)))


def run(monkeypatch: pytest.MonkeyPatch, cluster: ClusterSpec, stats: SplitStats, summary: DatasetSummary = SUMMARY,
        **knobs: Any) -> Any:
    monkeypatch.setattr(gsplit, "split_stats", lambda *a, **k: stats)
    ctx = SimContext(cluster, WORKLOAD, None, summary, 64)
    return gsplit.simulate(ctx, gsplit.Knobs(**knobs))


def shape(preset: str, machines: int, gpus: int) -> ClusterSpec:
    return load_cluster(preset).model_copy(update={"num_machines": machines, "gpus_per_machine": gpus})


def test_shuffle_volume_two_machines_and_one_nvlink_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    grad = 4.0 * param_count(WORKLOAD.model, SUMMARY.feature_dim, SUMMARY.num_classes)
    per_iteration = sum(2 * 2 * 30 * w * 4 for w in WIDTHS)       # 2 directions x 2 senders x 30 rows x width
    for cluster, link in ((shape("4x-a100-10gbe", 2, 1), "network"), (shape("dgx-a100", 1, 2), "nvlink")):
        res = run(monkeypatch, cluster, fake_stats())
        collective = 2 * 4 * all_reduce_link_bytes(grad, cluster)[link]
        assert res.bytes_per_epoch[link] == pytest.approx(4 * per_iteration + collective, rel=1e-12)
        shuffles = [s for s in res.spans if s.phase == "shuffle"]
        assert len(shuffles) == 2 * 4 * 2 * 2                       # ranks x iterations x layers x directions
        for s in shuffles:
            assert s.nbytes == s.args["received_bytes"] == 30 * WIDTHS[s.args["layer"]] * 4
            assert s.stream == link and s.args[f"{'network' if link == 'network' else 'intra'}_bytes"] == s.nbytes


def test_the_slowest_split_sets_the_pace(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = shape("4x-a100-10gbe", 2, 1)
    sampled = (1e4, 1e3)                       # the same (small) sample for all three, so sampling is equal
    light = run(monkeypatch, cluster, fake_stats(((4e6, 4e6), (6e5, 6e5)), sampled=sampled))
    skewed = run(monkeypatch, cluster, fake_stats(((4e6, 2e7), (6e5, 3e6)), sampled=sampled))
    heavy = run(monkeypatch, cluster, fake_stats(((2e7, 2e7), (3e6, 3e6)), sampled=sampled))
    assert skewed.epoch_time_s == pytest.approx(heavy.epoch_time_s, rel=1e-9)
    assert skewed.epoch_time_s > 1.5 * light.epoch_time_s
    wait = {r: sum(s.dur_s for s in skewed.spans if s.phase == "lockstep" and s.rank == r) for r in (0, 1)}
    assert wait[1] == pytest.approx(0.0, abs=1e-12) and wait[0] > 0.3 * skewed.epoch_time_s
    compute = {r: sum(s.dur_s for s in skewed.spans if s.phase in ("forward", "backward") and s.rank == r)
               for r in (0, 1)}
    assert compute[1] > 3 * compute[0]


def test_more_sampler_processes_are_never_slower_nor_faster_than_the_cores_allow(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """k sampler processes hand over their batches in waves of k, and the window holds whole waves after the
    prefetch (window.window_shape): on 4 cores the epoch of 49 batches takes 49 // k waves of k and one of the
    remaining 49 % k, a wave of w batches max(1, w / 4) times one batch's sampling alone on a core (sampling is the
    bound here). A 16-iteration window measured one wave for the steady state from 16 samplers on (faster than the
    cores allow), and 8 samplers' lengthened window, not cut at a wave, ended with one batch sampled alone (also
    faster)."""
    host = shape("4x-v100-nvlink2", 1, 2).host.model_copy(update={"num_cores": 4})
    cluster = shape("4x-v100-nvlink2", 1, 2).model_copy(update={"host": host})
    n = 49
    window = iteration_plan(64 * n, 64, 1).window
    stats = dataclasses.replace(fake_stats(sampled=(4e6, 4e6), batches=len(window)), iterations=np.asarray(window),
                                num_iterations=n)
    summary = dataclasses.replace(SUMMARY, num_train=64 * n)
    times = {k: run(monkeypatch, cluster, stats, summary, num_sampler_workers=k) for k in (1, 2, 3, 4, 6, 8, 16, 24)}
    batch_s = times[1].breakdown_s["sample"] / n                   # one sampler: alone on a core
    for k, res in times.items():
        waves = n // k * max(1.0, k / 4) + (max(1.0, n % k / 4) if n % k else 0.0)
        assert res.epoch_time_s == pytest.approx(waves * batch_s, rel=0.01), k
    assert all(times[a].epoch_time_s >= times[b].epoch_time_s * (1 - 1e-9) for a, b in itertools.pairwise(times))


def test_out_of_memory_is_a_result(monkeypatch: pytest.MonkeyPatch) -> None:
    small = shape("4x-a100-10gbe", 2, 1)
    small = small.model_copy(update={"gpu": small.gpu.model_copy(update={"memory_bytes": 1.5e9})})
    stats = fake_stats(partition=5_000_000)
    big = DatasetSummary("fake", 10_000_000, 100_000_000, 128, 8, 256, 0, 0)
    fits = run(monkeypatch, small, stats, big, cache_fraction=0.01)
    too_big = run(monkeypatch, small, stats, big, cache_fraction=0.5)
    assert fits.feasible and fits.epoch_time_s < float("inf")
    assert not too_big.feasible and too_big.epoch_time_s == float("inf")
    assert "out of GPU memory" in too_big.reason and "feature cache" in too_big.reason
    assert too_big.peak_memory_bytes["gpu"] - fits.peak_memory_bytes["gpu"] == pytest.approx(0.49e7 * 128 * 4)


@pytest.mark.parametrize(("preset", "link"), [("dgx-a100", "nvlink"), ("4x-a100-10gbe", "network")])
def test_more_bandwidth_is_never_slower(preset: str, link: str) -> None:
    base = load_cluster(preset)
    times = []
    for factor in (0.01, 0.1, 1.0, 10.0):
        spec = getattr(base, link)
        cluster = base.model_copy(update={link: spec.model_copy(
            update={"bandwidth_bytes_per_s": spec.bandwidth_bytes_per_s * factor})})
        times.append(simulate(cluster, "cora-sage", "gsplit").epoch_time_s)
    assert all(a >= b for a, b in itertools.pairwise(times)) and times[0] > 1.2 * times[-1], times


def test_the_cache_reduces_host_loads_to_none_at_full_coverage() -> None:
    results = [simulate("4x-a100-10gbe", "cora-sage", "gsplit", {"cache_fraction": c}) for c in (0.0, 0.05, 0.1, 0.3)]
    pcie = [r.bytes_per_epoch["pcie"] for r in results]
    assert all(a > b for a, b in itertools.pairwise(pcie))
    loads = [s for s in results[-1].spans if s.phase == "load"]     # 4 x 30% > 1: every vertex (partitions ~25%)
    assert loads and all(s.args["local_bytes"] == 0 and s.nbytes == s.args["structure_bytes"] > 0 for s in loads)
    assert results[-1].epoch_time_s < results[0].epoch_time_s


def test_dp_partitioned_cache_holds_g_times_more_and_serves_peers_over_nvlink() -> None:
    cluster, c = shape("dgx-a100", 1, 4), 0.05
    rep = simulate(cluster, "cora-sage", "dp", {"cache_fraction": c})
    rep4 = simulate(cluster, "cora-sage", "dp", {"cache_fraction": 4 * c})
    part = simulate(cluster, "cora-sage", "dp", {"cache_fraction": c, "cache_placement": "partitioned"})
    assert part.bytes_per_epoch["pcie"] == pytest.approx(rep4.bytes_per_epoch["pcie"], rel=1e-12)
    assert part.bytes_per_epoch["pcie"] < rep.bytes_per_epoch["pcie"]
    assert part.peak_memory_bytes["gpu"] == rep.peak_memory_bytes["gpu"]       # each GPU still caches c n rows
    # the machine's shared int64 maps: the peer cache's holders and positions instead of the cache's slots
    assert part.peak_memory_bytes["host"] - rep.peak_memory_bytes["host"] == 8 * 2708
    _, knobs, ctx = load_context(cluster, "cora-sage", "dp", {"cache_fraction": c, "cache_placement": "partitioned"})
    own, _, _, peer = dp.cache_access(ctx, knobs)
    machine_hits = ctx.sample.access(4 * c)[0]
    assert own == pytest.approx(machine_hits / 4) and peer == pytest.approx(machine_hits * 3 / 4)
    plan = iteration_plan(ctx.summary.num_train, ctx.batch_size, 4)
    full, last = (dp.iteration_work(ctx, knobs, scale)[0] for scale in (1.0, plan.last_fraction))
    n_in, row = ctx.sample.num_src_vertices[0], ctx.summary.feature_dim * 4 + 8      # a row and its int64 id
    assert full.peer_bytes + full.peer_request_bytes == pytest.approx(peer * n_in * row)
    extra = part.bytes_per_epoch["nvlink"] - rep.bytes_per_epoch["nvlink"]       # all-reduce bytes are equal
    per = [w.peer_bytes + w.peer_request_bytes for w in (full, last)]
    assert extra == pytest.approx(4 * ((plan.num_iterations - 1) * per[0] + per[1]), rel=1e-12)
    assert sum(s.args["peer_bytes"] for s in part.spans if s.phase == "load") > 0
    one_gpu = shape("dgx-a100", 1, 1)
    assert simulate(one_gpu, "cora-sage", "dp", {"cache_fraction": c, "cache_placement": "partitioned"}) \
        .bytes_per_epoch == simulate(one_gpu, "cora-sage", "dp", {"cache_fraction": c}).bytes_per_epoch


def test_the_tuner_offers_gsplit_for_sage_and_gat_only() -> None:
    wl = load_workload("cora-sage")
    assert [c.label for c in candidates(wl, ["dp", "gsplit"])] == ["dp", "gsplit"]
    gcn = load_workload("cora-gcn")
    with pytest.raises(SpecError, match="'gsplit' cannot train model.arch 'gcn'"):
        candidates(gcn, ["gsplit"])


@pytest.mark.parametrize("arch", ["sage", "gat"])
def test_split_aggregations_are_priced_as_the_index_operations_that_run_them(arch: str) -> None:
    """The executor's split layers aggregate with torch index operations, not DGL's fused kernels: every kernel
    the model would run as a fused sparse one is priced by its bytes, INDEX_OP_TRAFFIC times a fused kernel's, at
    the roofline's memory term (not gpu.sparse_flops_per_s), and no kernel pays the DGL call overhead."""
    from gnnplan.simulator.hardware.formulas import kernel_time_s
    from gnnplan.simulator.strategies.gsplit.work import INDEX_OP_TRAFFIC, split_cost
    from gnnplan.simulator.workload.model_cost import Block, model_cost

    model = load_workload("cora-sage").model.model_copy(update={"arch": arch})
    src, dst, edges = np.array([800, 290]), np.array([290, 64]), np.array([1400, 270])
    fused = model_cost(model, 1433, 7, [Block(800.0, 290.0, 1400.0), Block(290.0, 64.0, 270.0)])
    split = split_cost(model, 1433, 7, src, dst, edges)
    gpu = load_cluster("local").gpu
    for before, after in zip(fused.forward + fused.backward, split.forward + split.backward, strict=True):
        assert after.name == before.name and not after.graph_op and not after.sparse
        if before.sparse:
            assert after.nbytes == INDEX_OP_TRAFFIC * before.nbytes and after.flops == before.flops
            assert kernel_time_s(after, gpu) == pytest.approx(after.nbytes / gpu.memory_bandwidth_bytes_per_s)
            assert kernel_time_s(after, gpu) > kernel_time_s(before, gpu)
        else:
            assert after == dataclasses.replace(before, graph_op=False)
    assert sum(k.sparse for k in fused.forward) >= 1
