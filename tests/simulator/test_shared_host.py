"""The host side a machine's GPUs share: PCIe switch uplinks and host memory (closed-form expectations)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gnnplan.simulator.engine import Engine
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware import pricing
from gnnplan.simulator.hardware.model import HardwareModel
from gnnplan.simulator.hardware.spec import ClusterSpec, cluster_from_dict, load_cluster, preset_names

NBYTES = 1.0e9


def machine(gpus: int, gpus_per_uplink: int = 1, uplink_bw: float | None = None, host_bw: float = 1.0e12,
            gather_fraction: float = 1.0) -> ClusterSpec:
    """One machine of ``gpus`` GPUs with 25 GB/s PCIe links (5 us) and the given host side."""
    base = load_cluster("4x-a100-10gbe")
    pcie = {"bandwidth_bytes_per_s": 25.0e9, "latency_s": 5.0e-6, "gpus_per_uplink": gpus_per_uplink,
            "uplink_bandwidth_bytes_per_s": uplink_bw}
    return base.model_copy(update={
        "num_machines": 1, "gpus_per_machine": gpus, "pcie": base.pcie.model_validate(pcie),
        "host": base.host.model_copy(update={"memory_bandwidth_bytes_per_s": host_bw}),
        "efficiency": base.efficiency.model_copy(update={"gather_fraction": gather_fraction})})


def finish_times(cluster: ClusterSpec, starts: list[Callable[[HardwareModel], Any]]) -> list[float]:
    """Start every event at t = 0 on one engine; when each finished."""
    engine = Engine(0)
    hw = HardwareModel(cluster, engine)
    done = [0.0] * len(starts)

    def proc(i: int, make: Callable[[HardwareModel], Any]) -> Any:
        yield make(hw)
        done[i] = engine.now

    for i, make in enumerate(starts):
        engine.process(proc(i, make))
    engine.run()
    return done


def copies(gpus: int) -> list[Callable[[HardwareModel], Any]]:
    return [lambda hw, g=g: hw.host_to_gpu(g, NBYTES) for g in range(gpus)]


def test_four_gpus_behind_one_uplink_take_four_times_as_long_per_byte_as_one() -> None:
    """Uplink 20 GB/s < the GPU link's 25: alone a copy runs at 20 GB/s, four at once at 20 / 4 GB/s each."""
    cl = machine(4, gpus_per_uplink=4, uplink_bw=20.0e9)
    alone = finish_times(cl, copies(1))[0]
    together = finish_times(cl, copies(4))
    assert alone == pytest.approx(5.0e-6 + NBYTES / 20.0e9, rel=1e-12)
    assert together == [pytest.approx(5.0e-6 + 4 * NBYTES / 20.0e9, rel=1e-12)] * 4
    per_byte_alone, per_byte_shared = (alone - 5.0e-6) / NBYTES, (together[0] - 5.0e-6) / NBYTES
    assert per_byte_shared - per_byte_alone == pytest.approx(3.0 / 20.0e9, rel=1e-9)
    assert together[0] == pytest.approx(pricing.host_to_gpu_s(cl, NBYTES, sharers=4), rel=1e-12)
    assert alone == pytest.approx(pricing.host_to_gpu_s(cl, NBYTES), rel=1e-12)


def test_four_gpus_on_their_own_ports_share_the_host_memory() -> None:
    """Host memory 60 GB/s < 4 x 25: four copies get 15 GB/s each; the device-to-host direction likewise."""
    cl = machine(4, host_bw=60.0e9)
    assert finish_times(cl, copies(1)) == [pytest.approx(5.0e-6 + NBYTES / 25.0e9, rel=1e-12)]
    assert finish_times(cl, copies(4)) == [pytest.approx(5.0e-6 + NBYTES / 15.0e9, rel=1e-12)] * 4
    back = finish_times(cl, [lambda hw, g=g: hw.gpu_to_host(g, NBYTES) for g in range(4)])
    assert back == [pytest.approx(pricing.gpu_to_host_s(cl, NBYTES, sharers=4), rel=1e-12)] * 4


def test_two_gpus_per_uplink_only_pairs_share() -> None:
    """Two GPUs per 25 GB/s uplink: GPUs 0 and 2 (different switches) copy at full rate, 0 and 1 at half."""
    cl = machine(4, gpus_per_uplink=2)
    apart = finish_times(cl, [lambda hw: hw.host_to_gpu(0, NBYTES), lambda hw: hw.host_to_gpu(2, NBYTES)])
    pair = finish_times(cl, [lambda hw: hw.host_to_gpu(0, NBYTES), lambda hw: hw.host_to_gpu(1, NBYTES)])
    assert apart == [pytest.approx(5.0e-6 + NBYTES / 25.0e9, rel=1e-12)] * 2
    assert pair == [pytest.approx(5.0e-6 + 2 * NBYTES / 25.0e9, rel=1e-12)] * 2
    assert pricing.host_to_gpu_s(cl, NBYTES, sharers=4) == pytest.approx(pair[0], rel=1e-12)


def test_gathers_and_copies_share_the_host_memory() -> None:
    """Host memory 30 GB/s, gather fraction 1 (the roofline): a gather of n bytes is 2n of memory traffic, each
    gathered byte read and written (formulas.GATHER_TRAFFIC); alone it takes
    2n / 30e9. Beside a copy of n (n of traffic) the memory is split evenly, 15 GB/s each (< the 25 GB/s link):
    the copy ends at latency + n / 15e9, the gather when all 3n of traffic has passed, at 3n / 30e9."""
    cl = machine(1, host_bw=30.0e9)
    alone = finish_times(cl, [lambda hw: hw.host_gather(NBYTES, 0)])
    assert alone == [pytest.approx(pricing.host_gather_s(cl, NBYTES), rel=1e-12)]
    assert alone[0] == pytest.approx(2 * NBYTES / 30.0e9, rel=1e-12)
    both = finish_times(cl, [lambda hw: hw.host_gather(NBYTES, 0), lambda hw: hw.host_to_gpu(0, NBYTES)])
    assert both == [pytest.approx(3 * NBYTES / 30.0e9, rel=1e-12), pytest.approx(5.0e-6 + NBYTES / 15.0e9, rel=1e-12)]
    two = machine(2, host_bw=30.0e9)
    gathers = finish_times(two, [lambda hw: hw.host_gather(NBYTES, 0), lambda hw: hw.host_gather(NBYTES, 1)])
    assert gathers == [pytest.approx(pricing.host_gather_s(two, NBYTES, sharers=2), rel=1e-12)] * 2


def test_peer_copies_cross_uplinks_only_between_switches() -> None:
    """No NVLink, two GPUs per uplink of 10 GB/s: 0->2 and 1->3 both cross uplink 0 up and uplink 1 down (5 GB/s
    each); 0->1 and 2->3 stay behind their switches (25 GB/s); peer copies never touch host memory."""
    cl = machine(4, gpus_per_uplink=2, uplink_bw=10.0e9, host_bw=1.0)
    across = finish_times(cl, [lambda hw: hw.gpu_to_gpu(0, 2, NBYTES), lambda hw: hw.gpu_to_gpu(1, 3, NBYTES)])
    inside = finish_times(cl, [lambda hw: hw.gpu_to_gpu(0, 1, NBYTES), lambda hw: hw.gpu_to_gpu(2, 3, NBYTES)])
    assert across == [pytest.approx(5.0e-6 + NBYTES / 5.0e9, rel=1e-12)] * 2
    assert inside == [pytest.approx(5.0e-6 + NBYTES / 25.0e9, rel=1e-12)] * 2


def test_old_cluster_yaml_is_valid_and_bad_values_name_the_field() -> None:
    data = load_cluster("4x-a100-10gbe").to_yaml_dict()
    data["pcie"] = {"bandwidth_bytes_per_s": 25.0e9, "latency_s": 5.0e-6}
    cl = cluster_from_dict(data)
    assert cl.pcie.gpus_per_uplink == 1 and cl.pcie.uplink_bytes_per_s == 25.0e9
    for field, value in (("gpus_per_uplink", 0), ("uplink_bandwidth_bytes_per_s", -1.0)):
        bad = {**data, "pcie": {**data["pcie"], field: value}}
        with pytest.raises(SpecError, match=f"pcie.{field}"):
            cluster_from_dict(bad)
    wide = machine(2, gpus_per_uplink=8)  # more than the machine has: all its GPUs share one uplink
    assert HardwareModel(wide, Engine(0)).gpus_per_uplink == 2


def test_presets_state_their_topology_and_one_gpu_copies_keep_their_price() -> None:
    """Every preset: an uncontended copy costs its link's alpha-beta time (the shared side does not bind for
    one GPU), and a preset that shares uplinks says where that comes from."""
    for name in preset_names():
        cl = load_cluster(name)
        assert pricing.host_to_gpu_s(cl, NBYTES) == pytest.approx(pricing.link_s(cl.pcie, NBYTES), rel=1e-15)
        if cl.pcie.gpus_per_uplink > 1:
            assert "pcie.gpus_per_uplink" in cl.sources, name
    assert load_cluster("dgx-a100").pcie.gpus_per_uplink == 2
    assert load_cluster("8x-a100-nvswitch").pcie.gpus_per_uplink == 2
