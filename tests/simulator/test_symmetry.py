"""Simulation at scale (simulator.symmetry): one representative machine gives the full simulation's results, and
asymmetric work falls back to simulating every rank."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sim_fixtures import RMAT_SUMMARY, make_stats, shaped

from gnnplan.simulator import symmetry
from gnnplan.simulator.engine import Engine, FluidResource
from gnnplan.simulator.hardware.model import HardwareModel
from gnnplan.simulator.hardware.spec import ClusterSpec
from gnnplan.simulator.strategies import dp, hopgnn
from gnnplan.simulator.strategies.base import SimContext
from gnnplan.simulator.strategies.hopgnn.run import HopRun
from gnnplan.simulator.strategies.window import iteration_plan
from gnnplan.simulator.workload.spec import load_workload

WORKLOAD = load_workload("rmat100k-sage")
REL = 1e-9
"""Tolerance of fast path vs full simulation: the same max-min arithmetic on the same flows (observed: 0)."""


def ctx_for(cluster: ClusterSpec, batch: int = 512) -> SimContext:
    stats = make_stats(cluster.num_machines, cluster.gpus_per_machine, batch // cluster.num_gpus)
    return SimContext(cluster, WORKLOAD, stats, RMAT_SUMMARY, batch)


def machines_represented(result) -> set[int]:  # type: ignore[no-untyped-def]
    return {s.args["machines_represented"] for s in result.spans if s.phase == "epoch"}


def assert_same(fast, full) -> None:  # type: ignore[no-untyped-def]
    assert fast.epoch_time_s == pytest.approx(full.epoch_time_s, rel=REL)
    assert fast.breakdown_s.keys() == full.breakdown_s.keys()
    for phase, seconds in full.breakdown_s.items():
        assert fast.breakdown_s[phase] == pytest.approx(seconds, rel=REL, abs=1e-15), phase
    assert fast.bytes_per_epoch == full.bytes_per_epoch
    key = lambda s: (s.rank, s.iteration, s.phase, s.start_s)  # noqa: E731
    a, b = sorted(fast.spans, key=key), sorted(full.spans, key=key)
    assert [(s.rank, s.phase, s.iteration) for s in a] == [(s.rank, s.phase, s.iteration) for s in b]
    assert all(x.end_s == pytest.approx(y.end_s, rel=REL, abs=1e-15) for x, y in zip(a, b))


CASES = [
    ("4x-a100-10gbe", 4, 1, {}),  # one GPU per machine: one rank simulated
    ("2x4-a100-nvlink3-200gbib", 3, 4, {}),  # NVLink, InfiniBand
    ("dgx-a100", 2, 8, {}),  # 8 NICs per machine, PCIe switches shared by two GPUs, NVSwitch
    ("4x-a6000-pcie4", 3, 2, {"gpudirect_rdma": False}),  # staged through host memory at both ends
]


@pytest.mark.parametrize(("preset", "machines", "gpus", "network"), CASES)
def test_representative_machine_equals_the_full_simulation(preset: str, machines: int, gpus: int,
                                                          network: dict[str, object]) -> None:
    ctx = ctx_for(shaped(preset, machines, gpus, **network))
    for knobs in (dp.Knobs(cache_fraction=0.1),
                  dp.Knobs(num_sampler_workers=2, cache_fraction=0.2, cache_placement="partitioned")):
        fast = dp.simulate(ctx, knobs)
        with symmetry.disabled():
            full = dp.simulate(ctx, knobs)
        assert machines_represented(fast) == {machines} and machines_represented(full) == {1}
        assert_same(fast, full)


def test_hopgnn_with_equal_work_per_machine_uses_the_representative() -> None:
    # the naive feature-centric variant gives every rank the same work: symmetric
    ctx = ctx_for(shaped("2x4-a100-nvlink3-200gbib", 3, 2))
    knobs = hopgnn.Knobs(micrograph=False)
    fast = hopgnn.simulate(ctx, knobs)
    with symmetry.disabled():
        full = hopgnn.simulate(ctx, knobs)
    assert machines_represented(fast) == {3}
    assert_same(fast, full)


def test_a_straggler_falls_back_to_the_full_simulation() -> None:
    ctx = ctx_for(shaped("4x-a100-10gbe", 3, 2))
    plan = iteration_plan(ctx.summary.num_train, ctx.batch_size, ctx.num_workers)
    full = [hopgnn.work.naive_work(ctx, r) for r in range(ctx.num_workers)]
    last = [hopgnn.work.naive_work(ctx, r, plan.last_fraction) for r in range(ctx.num_workers)]

    def run(works):  # type: ignore[no-untyped-def]
        r = HopRun(ctx, 0, True, plan, works, last)
        r.execute()
        return r

    even = run(full)
    assert even.represent.folded and even.ranks == (0, 1)
    slow = list(full)  # rank 4 (machine 2) computes its forward pass 3x slower
    slow[4] = replace(full[4], steps=full[4].steps[:-1] + (replace(full[4].steps[-1],
                                                                    forward_s=3 * full[4].steps[-1].forward_s),))
    straggler = run(slow)
    assert not straggler.represent.folded and straggler.ranks == tuple(range(6))
    with symmetry.disabled():
        reference = run(slow)
    assert straggler.ends == reference.ends
    # everybody waits for the straggler at the all-reduce: the epoch is longer than the symmetric one
    assert max(straggler.ends[0]) > max(even.ends[0])


def test_machine_symmetric_compares_each_rank_with_its_image_on_machine_0() -> None:
    assert symmetry.machine_symmetric(["a", "b"] * 3, 3, 2)
    assert not symmetry.machine_symmetric(["a", "b", "a", "b", "b", "a"], 3, 2)
    # work naming other machines (rows received from each owner) compares after the shift
    rotating = [tuple((m + s) % 3 for s in range(3)) for m in range(3)]
    assert not symmetry.machine_symmetric(rotating, 3, 1)
    assert symmetry.machine_symmetric(rotating, 3, 1, same=lambda a, b, shift: a == tuple((x + shift) % 3 for x in b))
    with pytest.raises(ValueError, match="rank_works: 5 entries for 3 x 2 ranks"):
        symmetry.machine_symmetric(["a"] * 5, 3, 2)


def test_representatives_need_equal_work_several_machines_and_the_fast_path_on() -> None:
    assert symmetry.representatives(4, 2, ["w"] * 8) == symmetry.Representatives((0, 1), 4)
    assert symmetry.representatives(4, 2, None) == symmetry.Representatives(tuple(range(8)), 1)
    assert symmetry.representatives(1, 2, ["w"] * 2) == symmetry.Representatives((0, 1), 1)
    with symmetry.disabled():
        assert not symmetry.enabled()
        assert not symmetry.representatives(4, 2, ["w"] * 8).folded
    assert symmetry.enabled()


def test_fold_maps_every_machine_to_machine_0() -> None:
    cl = shaped("dgx-a100", 3, 8)
    hw = HardwareModel(cl, Engine())
    names = set(symmetry.fold_machines(hw, 3))
    assert {"pcie_h2d", "pcie_d2h", "nic_tx", "nic_rx", "storage", "host_cores", "gpu_compute"} <= names
    for name in names:
        value = getattr(hw, name)
        per = len(value) // 3
        assert all(value[i] is value[i % per] for i in range(len(value)))
    assert hw.nic_tx[2 * 8 + 5] is hw.nic_tx[5] and hw.pcie_h2d[17] is hw.pcie_h2d[1]

    class Broken:
        def __init__(self) -> None:
            self.links = [FluidResource("x", 1.0)] * 4

    with pytest.raises(ValueError, match="Broken|links: 4 resources for 3 machines"):
        symmetry.fold_machines(Broken(), 3)
