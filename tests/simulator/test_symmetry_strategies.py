"""The representative-machine fast path (simulator.symmetry) in ``ppgnn`` (its GPUs folded too), ``gsplit`` and the
full-graph run (``hongtu``): equal to the full simulation where every machine's work is the same, the full
simulation where it is not; and gsplit's statistics of a dataset card (its window's batches drawn from the proxy)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from test_symmetry import assert_same, machines_represented, shaped

from gnnplan.simulator import symmetry
from gnnplan.simulator.api import load_context
from gnnplan.simulator.engine import Engine
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.model import HardwareModel
from gnnplan.simulator.strategies import gsplit, hongtu
from gnnplan.simulator.strategies.base import SimContext
from gnnplan.simulator.strategies.gsplit.stats import SplitStats, split_stats, window_batches
from gnnplan.simulator.strategies.hongtu.dedup import BatchCounts
from gnnplan.simulator.strategies.hongtu.run import EpochRun
from gnnplan.simulator.strategies.hongtu.work import ChunkWork
from gnnplan.simulator.strategies.window import iteration_plan
from gnnplan.simulator.workload.graphstats import CACHE_GRID, DatasetSummary
from gnnplan.simulator.workload.spec import load_workload

REL = 1e-9
"""Fast path vs full simulation: the same max-min arithmetic on the same flows (observed: 0)."""
SHAPES = [
    ("4x-a100-10gbe", 3, 1, {}),                             # one GPU per machine
    ("2x4-a100-nvlink3-200gbib", 3, 4, {}),                  # NVLink, InfiniBand
    ("dgx-a100", 2, 8, {}),                                  # 8 NICs, shared PCIe switches, NVSwitch
    ("4x-a6000-pcie4", 3, 2, {"gpudirect_rdma": False}),     # staged through host memory
]


def report(name: str, fast: float, full: float) -> float:
    rel = abs(fast - full) / full
    print(f"{name}: fast {fast!r} full {full!r} relative difference {rel:.3g}")
    return rel


# ---------------------------------------------------------------------------------------------- ppgnn

@pytest.mark.parametrize(("preset", "machines", "gpus", "network"), SHAPES)
def test_ppgnn_representative_equals_full(preset: str, machines: int, gpus: int, network: dict[str, Any]) -> None:
    cluster = shaped(preset, machines, gpus, **network)
    shift = symmetry.gpu_shift(HardwareModel(cluster, Engine()), machines, gpus)
    for knobs in ({"placement": "host", "loader": "fused"}, {"placement": "ssd", "loader": "baseline"},
                  {"placement": "host", "loader": "double_buffer", "reshuffle": "chunk"}):
        module, kn, ctx = load_context(cluster, load_workload("cora-sgc"), "ppgnn", {**knobs, "batch_size": 96})
        fast = module.simulate(ctx, kn)
        with symmetry.disabled():
            full = module.simulate(ctx, kn)
        assert machines_represented(fast) == {machines} and machines_represented(full) == {1}
        # every worker's work is the same: its machine's GPUs fold too, as far as the hardware allows
        assert {e.args["gpus_represented"] for e in fast.spans if e.phase == "epoch"} == {gpus // shift}
        assert report(f"ppgnn {preset} {machines}x{gpus} {knobs}", fast.epoch_time_s, full.epoch_time_s) <= REL
        assert_same(fast, full)


# ---------------------------------------------------------------------------------------------- gsplit

GSPLIT_SUMMARY = DatasetSummary("fake", num_vertices=20_000, num_edges=200_000, feature_dim=128, num_classes=8,
                                num_train=1_000, num_val=0, num_test=0)


def machine_symmetric_split_stats(machines: int, gpus: int, batches: int, skew: bool = False) -> SplitStats:
    """Split statistics whose every quantity depends only on a split's GPU within its machine and on the peer's
    position relative to the split's machine (so shifting machines maps the schedule onto itself); ``skew``
    makes split 0 of the last machine compute 3x the edges (then no longer symmetric)."""
    w = machines * gpus
    local = np.arange(w) % gpus
    src = np.stack([300 + 20 * local, 40 + 4 * local])                           # (L, g)
    dst = np.stack([40 + 4 * local, np.full(w, 32)])
    edges = np.stack([4000 + 500 * local, 600 + 50 * local]).astype(np.int64)
    if skew:
        edges[:, (machines - 1) * gpus] *= 3
    rows = np.zeros((2, w, w), dtype=np.int64)
    for i in range(w):
        for j in range(w):
            rel = (j - (i // gpus) * gpus) % w                                    # peer relative to i's machine
            rows[:, i, j] = [10 + 3 * local[i] + 2 * rel, 5 + local[i] + rel]
    grid = np.asarray(CACHE_GRID)
    hits = np.floor(np.outer(src[0], np.minimum(1.0, 2 * grid)))                  # (g, G)

    def rep(a: Any) -> np.ndarray:
        return np.repeat(np.asarray(a)[None], batches, axis=0)

    return SplitStats(
        iterations=np.arange(batches), num_iterations=batches, num_seeds=rep(64), num_input_vertices=rep(src[0].sum()),
        num_items=rep(5000), num_src=rep(src.sum(axis=1)), num_dst=rep(dst.sum(axis=1)),
        num_edges=rep(edges.sum(axis=1)), split_src=rep(src), split_dst=rep(dst), edges_by_src=rep(edges),
        edges_by_dst=rep(edges), local_edges=rep(edges // 2), sage_rows=rep(rows), gat_rows=rep(rows),
        cache_fractions=grid, input_hits=rep(hits), partition_sizes=np.full(w, 20_000 // w),
        dp_input_vertices=rep(2 * src[0].sum()), dp_edges=rep(2 * edges.sum(axis=1)))


def gsplit_pair(monkeypatch: pytest.MonkeyPatch, cluster: Any, stats: SplitStats, **knobs: Any) -> tuple[Any, Any]:
    monkeypatch.setattr(gsplit, "split_stats", lambda *a, **k: stats)
    batch = 64 * cluster.num_gpus
    plan = iteration_plan(GSPLIT_SUMMARY.num_train, batch, 1)
    assert len(plan.window) <= stats.iterations.shape[0]
    ctx = SimContext(cluster, load_workload("cora-sage"), None, GSPLIT_SUMMARY, batch)
    fast = gsplit.simulate(ctx, gsplit.Knobs(**knobs))
    with symmetry.disabled():
        full = gsplit.simulate(ctx, gsplit.Knobs(**knobs))
    return fast, full


@pytest.mark.parametrize(("preset", "machines", "gpus", "network"), SHAPES)
def test_gsplit_representative_equals_full(monkeypatch: pytest.MonkeyPatch, preset: str, machines: int, gpus: int,
                                           network: dict[str, Any]) -> None:
    cluster = shaped(preset, machines, gpus, **network)
    stats = machine_symmetric_split_stats(machines, gpus, batches=16)
    for knobs in ({"cache_fraction": 0.1}, {"num_sampler_workers": 2, "cache_fraction": 0.0}):
        fast, full = gsplit_pair(monkeypatch, cluster, stats, **knobs)
        assert machines_represented(fast) == {machines} and machines_represented(full) == {1}
        assert report(f"gsplit {preset} {machines}x{gpus} {knobs}", fast.epoch_time_s, full.epoch_time_s) <= REL
        assert_same(fast, full)


def test_gsplit_with_a_skewed_split_falls_back_to_the_full_simulation(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = shaped("2x4-a100-nvlink3-200gbib", 3, 2)
    fast, full = gsplit_pair(monkeypatch, cluster, machine_symmetric_split_stats(3, 2, batches=16, skew=True))
    assert machines_represented(fast) == machines_represented(full) == {1}
    assert fast.epoch_time_s == full.epoch_time_s
    even, _ = gsplit_pair(monkeypatch, cluster, machine_symmetric_split_stats(3, 2, batches=16))
    assert machines_represented(even) == {3}
    assert fast.epoch_time_s > even.epoch_time_s          # every GPU waits for the skewed split at each shuffle


def test_gsplit_on_measured_cora_splits_is_simulated_in_full() -> None:
    # measured splits differ from GPU to GPU: no representative
    module, kn, ctx = load_context(shaped("4x-a100-10gbe", 2, 2), load_workload("cora-sage"), "gsplit", {})
    result = module.simulate(ctx, kn)
    assert machines_represented(result) == {1}


# ---------------------------------------------------------------------------------------------- gsplit on a card

def test_window_batches_of_a_card_epoch_are_drawn_from_the_proxy() -> None:
    train = np.arange(1000, 1600, dtype=np.int64)                   # the proxy's 600 training vertices
    batches = window_batches(train, 10_000, 512, seed=3)            # the card's epoch: 20 iterations, last 272
    plan = iteration_plan(10_000, 512, 1)
    assert sorted(batches) == list(plan.window) == list(range(15)) + [19]
    assert {len(b) for it, b in batches.items() if it != 19} == {512} and len(batches[19]) == 10_000 - 19 * 512
    for b in batches.values():
        assert len(np.unique(b)) == len(b) and np.isin(b, train).all()
    again = window_batches(train, 10_000, 512, seed=3)
    assert all(np.array_equal(batches[it], again[it]) for it in batches)
    assert not np.array_equal(batches[0], batches[1])
    # the graph's own epoch: the executor's batches, unchanged
    own = window_batches(train, 600, 256, seed=3)
    assert [len(b) for b in own.values()] == [256, 256, 88]
    with pytest.raises(SpecError, match=r"^training.batch_size: 700 seeds per gsplit batch, .* at most 600$"):
        window_batches(train, 10_000, 700, seed=3)


def test_card_split_statistics_follow_the_card_epoch_not_the_proxy() -> None:
    # the cora card trains on 140 vertices, its proxy on more (PROXY_MIN_TRAIN_FRACTION): before the fix the
    # statistics followed the proxy's epoch (on ogbn-papers100M, fewer batches than the card's window: IndexError)
    module, kn, ctx = load_context(shaped("4x-a100-10gbe", 2, 1), load_workload("cora-sage"), "gsplit", {})
    card = ctx.workload.model_copy(update={"dataset": "card:cora"})
    ctx = SimContext(ctx.cluster, card, None, ctx.summary, 32)
    assert ctx.summary.num_train == 140
    stats = split_stats("card:cora", [10, 10], 32, 2, "metis", self_loops=False, num_train=140)
    assert stats.num_iterations == 5 and stats.iterations.tolist() == [0, 1, 2, 3, 4]
    assert stats.num_seeds.tolist() == [32, 32, 32, 32, 12]
    result = gsplit.simulate(ctx, gsplit.Knobs())
    assert result.feasible and result.num_iterations == 5


# ---------------------------------------------------------------------------------------------- hongtu

def machine_symmetric_counts(machines: int, gpus: int, batches: int,
                             straggler: bool = False) -> tuple[list[list[BatchCounts]], list[list[list[ChunkWork]]]]:
    """HongTu batch counts and chunk compute that depend only on a GPU's position in its machine and on the
    peer's position relative to the GPU's machine; ``straggler``: GPU 0 of the last machine computes 3x slower."""
    w = machines * gpus
    counts, works = [], []
    for r in range(w):
        local, base = r % gpus, (r // gpus) * gpus
        mine, chunks = [], []
        for j in range(batches):
            rel = [(k - base) % w for k in range(w)]
            pull = tuple(0 if k == r else 40 + 7 * local + 5 * rel[k] + 3 * j for k in range(w))
            push = tuple(0 if k == r else 20 + 2 * local + 9 * rel[k] + j for k in range(w))
            mine.append(BatchCounts(num_dst=500 + 10 * local + j, num_edges=8000 + 100 * local, num_src=900 + local,
                                    buffer_rows=900 + local, load_rows=300 + 11 * local + j, pull_rows=pull,
                                    reused_rows=50 + local, push_rows=push, flush_rows=200 + 3 * local))
            slow = 3.0 if straggler and r == (machines - 1) * gpus else 1.0
            chunks.append([ChunkWork((slow * (1e-3 + 1e-4 * local), slow * 2e-3), (1e9, 2e9), ((), ()))
                           for _ in range(2)])
        counts.append(mine)
        works.append(chunks)
    return counts, works


def hongtu_run(cluster: Any, arch: str, level: str, counts: Any, works: Any) -> EpochRun:
    run = EpochRun(cluster, arch, level, counts, works, (128, 64, 8), (1e-4, 1e6), 4.0e5)
    run.execute()
    return run


def assert_runs_equal(fast: EpochRun, full: EpochRun) -> None:
    assert fast.ends == pytest.approx(full.ends, rel=REL, abs=0)
    key = lambda s: (s.rank, s.phase, s.start_s, s.args.get("layer", -1), s.args.get("batch", -1))  # noqa: E731
    a, b = sorted(fast.spans, key=key), sorted(full.spans, key=key)
    assert [(s.rank, s.phase, s.nbytes) for s in a] == [(s.rank, s.phase, s.nbytes) for s in b]
    assert all(x.end_s == pytest.approx(y.end_s, rel=REL, abs=1e-15) for x, y in zip(a, b))


@pytest.mark.parametrize(("preset", "machines", "gpus", "network"), SHAPES)
def test_hongtu_representative_equals_full(preset: str, machines: int, gpus: int, network: dict[str, Any]) -> None:
    cluster = shaped(preset, machines, gpus, **network)
    counts, works = machine_symmetric_counts(machines, gpus, batches=2)
    for arch, level in (("gcn", "gpu"), ("gat", "none")):
        fast = hongtu_run(cluster, arch, level, counts, works)
        with symmetry.disabled():
            full = hongtu_run(cluster, arch, level, counts, works)
        assert fast.represent.folded and fast.ranks == tuple(range(gpus)) and not full.represent.folded
        assert report(f"hongtu {preset} {machines}x{gpus} {arch} {level}", max(fast.ends), max(full.ends)) <= REL
        assert_runs_equal(fast, full)
        assert {s.args["machines_represented"] for s in fast.spans if s.phase == "epoch"} == {machines}


def test_hongtu_with_a_straggler_falls_back_to_the_full_simulation() -> None:
    cluster = shaped("2x4-a100-nvlink3-200gbib", 3, 2)
    counts, works = machine_symmetric_counts(3, 2, batches=2, straggler=True)
    slow = hongtu_run(cluster, "gcn", "gpu", counts, works)
    assert not slow.represent.folded and slow.ranks == tuple(range(6))
    with symmetry.disabled():
        reference = hongtu_run(cluster, "gcn", "gpu", counts, works)
    assert slow.ends == reference.ends
    even = hongtu_run(cluster, "gcn", "gpu", *machine_symmetric_counts(3, 2, batches=2))
    assert max(slow.ends) > max(even.ends)


def test_hongtu_on_cora_is_simulated_in_full() -> None:
    module, kn, ctx = load_context(shaped("4x-a100-10gbe", 2, 2), load_workload("cora-gcn-full"), "hongtu",
                                   {"num_chunks": 2})
    fast = module.simulate(ctx, kn)
    with symmetry.disabled():
        full = module.simulate(ctx, kn)
    assert machines_represented(fast) == machines_represented(full) == {1}
    assert fast.epoch_time_s == full.epoch_time_s and isinstance(hongtu.NAME, str)
