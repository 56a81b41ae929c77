"""gsplit at scale: a dataset card's per-rank mean (gsplit.rank_mean) on one representative machine, bundles of
identical messages (exact against the full simulation of the same work), the full simulation for measured real
splits, and the memory sizes of many splits evaluated at once."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sim_fixtures import shaped

from gnnplan.simulator import symmetry
from gnnplan.simulator.api import load_context
from gnnplan.simulator.strategies import gsplit
from gnnplan.simulator.strategies.base import SimContext
from gnnplan.simulator.strategies.gsplit.rank_mean import busiest_shuffles, rank_mean_stats
from gnnplan.simulator.strategies.gsplit.stats import SplitStats
from gnnplan.simulator.strategies.gsplit.work import split_cost, split_sizes
from gnnplan.simulator.strategies.window import iteration_plan
from gnnplan.simulator.workload.graphstats import CACHE_GRID, DatasetSummary
from gnnplan.simulator.workload.spec import load_workload

REL = 1e-9
"""Bundled representative vs full simulation of the same work: the same max-min arithmetic (observed: 0)."""
CARD_TOL = 0.02
"""Rank mean (shuffles at the busiest link's load) vs the full simulation of the proxy's per-rank splits on the
cora card (3 x 2 GPUs, 10 GbE), epoch and shuffle time: what it drops is the slowest split's compute lead at each
lockstep (observed: epoch 0.83 %, shuffle 0.59 %; ogbn-papers100M at 8 x 8: epoch 0.03 %,
benchmarks/bench_scale.py --parts card --card-full gsplit)."""
SUMMARY = DatasetSummary("fake", num_vertices=20_000, num_edges=200_000, feature_dim=128, num_classes=8,
                         num_train=1_000, num_val=0, num_test=0)


def represented(result: Any) -> set[int]:
    return {s.args["machines_represented"] for s in result.spans if s.phase == "epoch"}


def skewed_stats(w: int, batches: int, seed: int = 0) -> SplitStats:
    """Random per-split counts and per-pair rows (every GPU and pair different: no symmetry)."""
    rng = np.random.default_rng(seed)
    src = rng.integers(200, 400, size=(batches, 2, w))
    dst = rng.integers(30, 60, size=(batches, 2, w))
    edges = rng.integers(3000, 6000, size=(batches, 2, w))
    rows = rng.integers(0, 40, size=(batches, 2, w, w))
    grid = np.asarray(CACHE_GRID)
    hits = np.floor(src[:, 0, :, None] * np.minimum(1.0, 2 * grid)[None, None])
    return SplitStats(
        iterations=np.arange(batches), num_iterations=batches, num_seeds=np.full(batches, 64),
        num_input_vertices=src[:, 0].sum(axis=1), num_items=np.full(batches, 5000), num_src=src.sum(axis=2),
        num_dst=dst.sum(axis=2), num_edges=edges.sum(axis=2), split_src=src, split_dst=dst, edges_by_src=edges,
        edges_by_dst=edges, local_edges=edges // 3, sage_rows=rows, gat_rows=rows, cache_fractions=grid,
        input_hits=hits, partition_sizes=rng.integers(900, 1100, size=w), dp_input_vertices=2 * src[:, 0].sum(axis=1),
        dp_edges=2 * edges.sum(axis=2))


def test_rank_mean_keeps_totals_and_makes_every_split_equal() -> None:
    stats = skewed_stats(6, batches=3)
    mean = rank_mean_stats(stats, 2)
    for name in ("split_src", "split_dst", "edges_by_src", "local_edges"):
        a, m = getattr(stats, name), getattr(mean, name)
        assert np.allclose(m, m[..., :1]) and np.allclose(m.sum(axis=-1), a.sum(axis=-1), rtol=1e-12)
    assert np.allclose(mean.input_hits.sum(axis=1), stats.input_hits.sum(axis=1), rtol=1e-12)
    machine = np.arange(6) // 2
    same, eye = machine[:, None] == machine[None, :], np.eye(6, dtype=bool)
    for kind in (eye, same & ~eye, ~same):          # kept locally, inside a machine, across machines
        rows, avg = stats.sage_rows[..., kind], mean.sage_rows[..., kind]
        assert np.allclose(avg.sum(axis=-1), rows.sum(axis=-1), rtol=1e-12)
        assert np.allclose(avg, avg[..., :1])
    with pytest.raises(ValueError, match="gpus_per_machine: 4 does not divide the 6 splits"):
        rank_mean_stats(stats, 4)


@pytest.mark.parametrize(("preset", "machines", "gpus", "network"), [
    ("2x4-a100-nvlink3-200gbib", 4, 2, {}),                 # NVLink inside, InfiniBand across
    ("4x-a6000-pcie4", 3, 2, {"gpudirect_rdma": False}),    # shuffles inside and across share PCIe (staged)
    ("dgx-a100", 3, 4, {}),                                 # several NICs, shared PCIe switches
])
def test_bundled_representative_equals_the_full_simulation_of_the_mean(
        monkeypatch: pytest.MonkeyPatch, preset: str, machines: int, gpus: int, network: dict[str, Any]) -> None:
    # the mean of skewed statistics is machine-symmetric (a real graph's name: no rank_mean, the symmetry check
    # alone folds it); the representative starts each message to the same GPU of every other machine as one
    # bundle of M - 1 identical flows
    cluster = shaped(preset, machines, gpus, **network)
    mean = rank_mean_stats(skewed_stats(machines * gpus, batches=16), gpus)
    monkeypatch.setattr(gsplit, "split_stats", lambda *a, **k: mean)
    ctx = SimContext(cluster, load_workload("cora-sage"), None, SUMMARY, 64 * cluster.num_gpus)
    assert len(iteration_plan(SUMMARY.num_train, ctx.batch_size, 1).window) <= 16
    for knobs in (gsplit.Knobs(cache_fraction=0.1), gsplit.Knobs(num_sampler_workers=2)):
        fast = gsplit.simulate(ctx, knobs)
        with symmetry.disabled():
            full = gsplit.simulate(ctx, knobs)
        assert represented(fast) == {machines} and represented(full) == {1}
        assert fast.epoch_time_s == pytest.approx(full.epoch_time_s, rel=REL)
        for phase, seconds in full.breakdown_s.items():
            assert fast.breakdown_s[phase] == pytest.approx(seconds, rel=REL, abs=1e-15), phase
        assert fast.bytes_per_epoch == full.bytes_per_epoch and fast.peak_memory_bytes == full.peak_memory_bytes


def test_card_uses_the_rank_mean_within_tolerance_and_says_so() -> None:
    cluster = shaped("4x-a100-10gbe", 3, 2)
    module, kn, ctx = load_context(cluster, load_workload("cora-sage").model_copy(update={"dataset": "card:cora"}),
                                   "gsplit", {"batch_size": 96})
    fast = module.simulate(ctx, kn)
    with symmetry.disabled():
        full = module.simulate(ctx, kn)                      # every rank at the proxy's measured split
    assert represented(fast) == {3} and represented(full) == {1}
    rel = abs(fast.epoch_time_s - full.epoch_time_s) / full.epoch_time_s
    print(f"cora card 3x2: rank mean {fast.epoch_time_s!r} full {full.epoch_time_s!r} relative difference {rel:.3g}")
    assert rel <= CARD_TOL
    assert fast.peak_memory_bytes == full.peak_memory_bytes               # the largest measured split, both
    for link, nbytes in full.bytes_per_epoch.items():                     # the mean keeps every total
        assert fast.bytes_per_epoch[link] == pytest.approx(nbytes, rel=1e-12), link
    shuffle = abs(fast.breakdown_s["shuffle"] - full.breakdown_s["shuffle"]) / full.breakdown_s["shuffle"]
    print(f"shuffle: rank mean {fast.breakdown_s['shuffle']!r} full {full.breakdown_s['shuffle']!r} ({shuffle:.3g})")
    assert shuffle <= CARD_TOL
    assert "per-rank mean" in fast.estimated["statistics"]["split_stats"]
    assert "per-rank mean" not in full.estimated["statistics"]["split_stats"]
    # the lockstep wait for the slowest split exists only in the full simulation
    assert fast.breakdown_s["lockstep"] < full.breakdown_s["lockstep"]


def test_measured_real_splits_and_skewed_statistics_are_simulated_in_full(monkeypatch: pytest.MonkeyPatch) -> None:
    module, kn, ctx = load_context(shaped("4x-a100-10gbe", 2, 2), load_workload("cora-sage"), "gsplit", {})
    assert represented(module.simulate(ctx, kn)) == {1}                   # cora itself: measured, really skewed
    stats = skewed_stats(6, batches=16)
    monkeypatch.setattr(gsplit, "split_stats", lambda *a, **k: stats)
    ctx = SimContext(shaped("2x4-a100-nvlink3-200gbib", 3, 2), load_workload("cora-sage"), None, SUMMARY, 384)
    fast = gsplit.simulate(ctx, gsplit.Knobs())
    with symmetry.disabled():
        full = gsplit.simulate(ctx, gsplit.Knobs())
    assert represented(fast) == represented(full) == {1} and fast.epoch_time_s == full.epoch_time_s


def test_busiest_shuffles_scale_each_kind_to_its_busiest_link(monkeypatch: pytest.MonkeyPatch) -> None:
    # 2 machines x 2 GPUs; network rows: machine 0 sends 10 + 20 + 30 + 40 = 100, machine 1 sends 4 x 5 = 20 and
    # receives 100 -> busiest 100 over a mean of 60; inside machine 0: GPU 0 sends 6 to GPU 1, GPU 1 sends 2;
    # machine 1: 1 and 1 -> busiest 6 over a mean of 10 / 4
    rows = np.array([[0, 6, 10, 20], [2, 0, 30, 40], [5, 5, 0, 1], [5, 5, 1, 0]], dtype=np.int64)
    stats = skewed_stats(4, batches=1)
    stats = SplitStats(**{**stats.__dict__, "sage_rows": np.stack([rows, 2 * rows])[None],
                          "gat_rows": np.stack([rows, 2 * rows])[None]})
    monkeypatch.setattr(gsplit, "split_stats", lambda *a, **k: stats)
    ctx = SimContext(shaped("2x4-a100-nvlink3-200gbib", 2, 2), load_workload("cora-sage"), None, SUMMARY, 64)
    mean = rank_mean_stats(stats, 2)
    work = gsplit.iteration_work(ctx, mean, 0.0, 0)
    scaled = busiest_shuffles([work], stats, "sage", 2)[0]
    machine = np.arange(4) // 2
    across, eye = machine[:, None] != machine[None, :], np.eye(4, dtype=bool)
    for layer in range(2):
        ratio = scaled.shuffle_bytes[layer] / np.where(work.shuffle_bytes[layer] > 0, work.shuffle_bytes[layer], 1)
        assert np.allclose(ratio[across], 100 / 60) and np.allclose(ratio[~across & ~eye], 6 / 2.5)
        assert (scaled.shuffle_bytes[layer][eye] == 0).all()
        # every machine now sends what machine 0 sent, every GPU inside a machine what GPU 0 sent
        width = work.shuffle_bytes[layer][0, 2] / mean.sage_rows[0, layer, 0, 2]
        assert np.allclose(scaled.shuffle_bytes[layer][:2, 2:].sum(), 100 * (layer + 1) * width)
        assert np.allclose(scaled.shuffle_bytes[layer][0, 1], 6 * (layer + 1) * width)


@pytest.mark.parametrize("arch", ["sage", "gat"])
def test_split_sizes_equal_each_splits_model_cost(arch: str) -> None:
    model = load_workload("cora-sage").model.model_copy(update={"arch": arch, "num_heads": 2})
    rng = np.random.default_rng(1)
    src, dst, edges = (rng.integers(1, 5000, size=(20, 2)).astype(float) for _ in range(3))
    activation, structure = split_sizes(model, 128, 8, src, dst, edges)
    for i in range(20):
        cost = split_cost(model, 128, 8, src[i], dst[i], edges[i])
        assert activation[i] == pytest.approx(cost.activation_bytes, rel=1e-12)
        assert structure[i] == pytest.approx(cost.block_bytes, rel=1e-12)
