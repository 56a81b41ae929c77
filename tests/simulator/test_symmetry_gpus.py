"""Folding the GPUs of a machine (simulator.symmetry.fold_gpus): the shift the hardware allows, the folded
hardware's capacities and names, dp's one simulated GPU per orbit equal to the full simulation, dp's near-equal
workers of a machine (GPU_FOLD_SPREAD), and a span's copy on the ranks it stands for (Span.on_rank)."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, replace

import pytest
from sim_fixtures import shaped
from test_symmetry import REL, assert_same, ctx_for

from gnnplan.simulator import symmetry
from gnnplan.simulator.engine import Engine
from gnnplan.simulator.hardware.model import HardwareModel
from gnnplan.simulator.strategies import dp
from gnnplan.simulator.strategies.base import SimContext
from gnnplan.simulator.strategies.dp.work import GPU_FOLD_SPREAD
from gnnplan.simulator.trace import Span


def represented(result) -> tuple[set[int], set[int]]:  # type: ignore[no-untyped-def]
    epochs = [s.args for s in result.spans if s.phase == "epoch"]
    return {a["machines_represented"] for a in epochs}, {a["gpus_represented"] for a in epochs}


@pytest.mark.parametrize(("preset", "machines", "gpus", "shift", "nics"), [
    ("2x4-a100-nvlink3-200gbib", 3, 4, 1, 1),   # own links per GPU, one NIC: every shift
    ("dgx-a100", 2, 8, 2, 8),                    # two GPUs per PCIe switch uplink
    ("dgx-a100", 2, 8, 2, 4),                    # two GPUs per NIC and per uplink
    ("dgx-a100", 1, 8, 4, 2),                    # four GPUs per NIC
    ("dgx-a100", 2, 8, 8, 3),                    # 3 NICs for 8 GPUs (3, 3, 2): no symmetry but the identity
    ("4x-a6000-pcie4", 1, 4, 1, 1),
])
def test_the_shift_is_the_least_common_multiple_of_the_blocks(preset: str, machines: int, gpus: int, shift: int,
                                                               nics: int) -> None:
    hw = HardwareModel(shaped(preset, machines, gpus, nics_per_machine=nics), Engine())
    assert symmetry.gpu_shift(hw, machines, gpus) == shift


def test_folded_links_of_a_gpu_block_carry_their_orbit_and_the_machine_keeps_its_own() -> None:
    cl = shaped("dgx-a100", 2, 8, nics_per_machine=4)
    hw = HardwareModel(cl, Engine())
    pcie, uplink, nic = hw.pcie_h2d[0].capacity, hw.uplink_h2d[0].capacity, hw.nic_tx[0].capacity
    memory, cores = hw.host_memory[0].capacity, hw.host_cores[0].capacity
    symmetry.fold_machines(hw, 2)
    names = set(symmetry.fold_gpus(hw, 2, 8, 2))
    assert {"pcie_h2d", "uplink_h2d", "nic_tx", "nvlink_rx", "gpu_compute", "_h2d_path"} <= names
    assert "host_memory" not in names and "host_cores" not in names
    assert hw.gpu_copies == 4 and hw.gpu_shift == 2
    assert hw.pcie_h2d[13] is hw.pcie_h2d[1] and hw.pcie_h2d[6] is hw.pcie_h2d[0]    # GPU 13 = machine 1, GPU 5
    assert hw.nic_tx[5] is hw.nic_tx[0] and hw.uplink_h2d[7] is hw.uplink_h2d[0]
    assert hw.pcie_h2d[0].capacity == 4 * pcie and hw.uplink_h2d[0].capacity == 4 * uplink
    assert hw.nic_tx[0].capacity == 4 * nic
    assert hw.host_memory[1].capacity == memory and hw.host_cores[0].capacity == cores
    assert hw._h2d_path[5][0] is hw.pcie_h2d[1]
    with pytest.raises(ValueError, match="shift: 3 GPUs kept of 8; must divide 8"):
        symmetry.fold_gpus(HardwareModel(cl, Engine()), 2, 8, 3)


def test_a_pairwise_nvlink_is_named_by_its_orbit() -> None:
    cl = shaped("2x4-a100-nvlink3-200gbib", 1, 4)
    hw = HardwareModel(cl, Engine())
    symmetry.fold_gpus(hw, 1, 4, 1)
    one = cl.nvlink.bandwidth_bytes_per_s / 3
    assert hw.nvlink_pair(0, 1) is hw.nvlink_pair(3, 0) is hw.nvlink_pair(2, 3)   # the orbit of the pair (l, l + 1)
    assert hw.nvlink_pair(0, 1) is not hw.nvlink_pair(1, 0)                      # (l, l + 3): another orbit
    assert hw.nvlink_pair(0, 2).capacity == pytest.approx(4 * one)
    plain = HardwareModel(cl, Engine())
    assert plain.nvlink_pair(3, 0) is not plain.nvlink_pair(0, 1) and plain.nvlink_pair(0, 1).capacity == one


def test_images_are_the_orbit_on_every_machine() -> None:
    rep = symmetry.Representatives((0, 1), 3, 4)
    assert rep.folded and rep.copies == 12
    assert rep.images(1, 3, 8) == [3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23]
    alone = symmetry.Representatives((0,), 1, 4)
    assert alone.images(0, 1, 4) == [1, 2, 3]
    assert symmetry.Representatives((0, 1), 3).images(1, 3, 2) == [3, 5]


def test_representatives_fold_gpus_only_when_every_rank_equals_its_image() -> None:
    assert symmetry.representatives(2, 4, ["w"] * 8, gpu_shift=1) == symmetry.Representatives((0,), 2, 4)
    assert symmetry.representatives(1, 4, ["w"] * 4, gpu_shift=2) == symmetry.Representatives((0, 1), 1, 2)
    assert symmetry.representatives(2, 4, ["a", "b"] * 4, gpu_shift=2) == symmetry.Representatives((0, 1), 2, 2)
    assert symmetry.representatives(2, 4, ["a", "b"] * 4, gpu_shift=1) == symmetry.Representatives((0, 1, 2, 3), 2)
    assert symmetry.representatives(2, 4, ["w"] * 8) == symmetry.Representatives((0, 1, 2, 3), 2)   # no opt-in
    assert symmetry.representatives(2, 4, ["w"] * 8, gpu_shift=4).gpus_represented == 1
    with symmetry.disabled():
        assert not symmetry.representatives(2, 4, ["w"] * 8, gpu_shift=1).folded


@pytest.mark.parametrize(("preset", "machines", "gpus", "copies"), [
    ("dgx-a100", 1, 8, 4),                   # one machine: its GPUs folded alone
    ("2x4-a100-nvlink3-200gbib", 2, 4, 4),   # pairwise NVLink: the partitioned cache's peer copies
])
def test_dp_on_folded_gpus_equals_the_full_simulation(preset: str, machines: int, gpus: int, copies: int) -> None:
    ctx = ctx_for(shaped(preset, machines, gpus))
    for knobs in (dp.Knobs(cache_fraction=0.1),
                  dp.Knobs(num_sampler_workers=2, cache_fraction=0.2, cache_placement="partitioned")):
        fast = dp.simulate(ctx, knobs)
        with symmetry.disabled():
            full = dp.simulate(ctx, knobs)
        assert represented(fast) == ({machines}, {copies}) and represented(full) == ({1}, {1})
        assert_same(fast, full)


def uneven(ctx: SimContext, ratios: list[float]) -> SimContext:
    """``ctx`` whose worker l of every machine has ``ratios[l]`` times the mean worker's batch."""
    w = ctx.cluster.num_gpus
    per = tuple(ratios[r % len(ratios)] for r in range(w))
    return replace(ctx, stats=replace(ctx.sample, worker_input_ratio=per, worker_edge_ratio=per))


def test_dp_runs_the_slowest_worker_everywhere_when_a_machine_s_workers_are_near_equal() -> None:
    ctx = ctx_for(shaped("2x4-a100-nvlink3-200gbib", 2, 4))
    knobs = dp.Knobs(cache_fraction=0.1)
    near = uneven(ctx, [1.0, 1.0 + GPU_FOLD_SPREAD / 2, 1.0, 1.0])
    fast = dp.simulate(near, knobs)
    with symmetry.disabled():
        full = dp.simulate(near, knobs)
    assert represented(fast) == ({2}, {4}) and represented(full) == ({1}, {1})
    # the pace is the slowest worker's either way; the others' extra work adds at most the spread
    assert full.epoch_time_s <= fast.epoch_time_s <= (1 + GPU_FOLD_SPREAD) * full.epoch_time_s
    far = uneven(ctx, [1.0, 1.0 + 4 * GPU_FOLD_SPREAD, 1.0, 1.0])
    fast = dp.simulate(far, knobs)
    with symmetry.disabled():
        full = dp.simulate(far, knobs)
    assert represented(fast) == ({2}, {1})               # machines still folded, every GPU simulated
    assert fast.epoch_time_s == pytest.approx(full.epoch_time_s, rel=REL)


def test_a_span_on_another_rank_is_replace_with_that_rank() -> None:
    span = Span(3, "fetch", 0.25, 0.5, "network", 1e6, 0.0, 0, 7, {"wait_s": 0.1})
    copy = span.on_rank(11)
    assert copy == replace(span, rank=11) and copy.rank == 11 and copy.args is span.args
    assert span.rank == 3 and copy.end_s == span.end_s
    with pytest.raises(FrozenInstanceError):
        copy.rank = 4  # type: ignore[misc]
