"""The GPU probe (:mod:`executor.probe_devices`), exercised on CPU devices: the same code measures GPUs when CUDA
is present (CUDA-event timing is checked with a stand-in event class)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from gnnplan.executor import probe_devices
from gnnplan.executor.launch import spawn
from gnnplan.executor.probe_devices import (
    QUICK_COPY_SIZES,
    DeviceTimer,
    all_reduce_bus_bandwidth,
    all_reduce_times_s,
    copy_times_s,
    gpu_machine,
)
from gnnplan.simulator.hardware.spec import PRESET_DIR, cluster_from_dict, load_cluster


class _FakeEvent:
    """Stands in for ``torch.cuda.Event``: 250 ms between the two records."""

    log: list[str] = []

    def __init__(self, enable_timing: bool = False) -> None:
        assert enable_timing

    def record(self) -> None:
        self.log.append("record")

    def synchronize(self) -> None:
        self.log.append("synchronize")

    def elapsed_time(self, end: Any) -> float:
        return 250.0


def test_cuda_timing_uses_events_and_milliseconds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "Event", _FakeEvent)
    _FakeEvent.log.clear()
    calls: list[int] = []
    seconds = DeviceTimer(torch.device("cuda", 0)).time_s(lambda: calls.append(1), repeats=3, warmup=1)
    assert seconds == 0.25 and len(calls) == 4
    assert _FakeEvent.log == ["record", "record", "synchronize"] * 3  # the work is between the two records


def test_cpu_copies_grow_with_size_and_fit() -> None:
    times = copy_times_s(torch.device("cpu"), torch.device("cpu"), QUICK_COPY_SIZES, repeats=3)
    assert len(times) == len(QUICK_COPY_SIZES) and all(t > 0 for t in times)
    assert times[-1] > times[0]


def test_bus_bandwidth_inverts_the_ring_model() -> None:
    p, alpha, bus = 4, 5e-6, 1e11
    sizes = [4096, 1 << 20, 64 << 20]
    times = [2 * (p - 1) * alpha + 2 * (p - 1) / p * n / bus for n in sizes]
    got_alpha, got_bus = all_reduce_bus_bandwidth(sizes, times, p)
    assert got_bus == pytest.approx(bus, rel=1e-9) and got_alpha == pytest.approx(alpha, rel=1e-6)
    with pytest.raises(ValueError, match="at least 2 ranks"):
        all_reduce_bus_bandwidth(sizes, times, 1)


def test_gpu_machine_on_cpu_devices_is_a_valid_one_machine_cluster() -> None:
    """The whole GPU path (compute, H2D/D2H, peer copy, all-reduce over spawned gloo ranks) on two CPU devices."""
    cpu = load_cluster(PRESET_DIR / "local.yaml").to_yaml_dict()

    def all_reduce(sizes: list[int], repeats: int) -> list[float]:
        return list(spawn(all_reduce_times_s, 2, (sizes, repeats)))

    data = gpu_machine(cpu, workers=2, quick=True, devices=[torch.device("cpu")] * 2, spawn_all_reduce=all_reduce)
    spec = cluster_from_dict(data)
    assert (spec.num_machines, spec.gpus_per_machine, spec.gpu.is_host_cpu) == (1, 2, False)
    assert spec.nvlink is not None and spec.pcie.bandwidth_bytes_per_s > 0
    assert spec.host.memory_bandwidth_bytes_per_s == pytest.approx(2 * cpu["host"]["memory_bandwidth_bytes_per_s"])
    assert "all-reduce over the 2 devices" in spec.sources["nvlink.bandwidth_bytes_per_s"]
    assert "device-to-host" in spec.sources["pcie.bandwidth_bytes_per_s"]
    # the priors are the GPU machine's own measurements, not the CPU probe's gather path
    assert spec.priors["pcie.bandwidth_bytes_per_s"] == spec.pcie.bandwidth_bytes_per_s != cpu["pcie"][
        "bandwidth_bytes_per_s"] and spec.priors["efficiency.gather_fraction"] == spec.efficiency.gather_fraction
    # the device's gather rate over its copy rate: measured on the device, not the CPU probe's
    assert 0 < spec.efficiency.gather_fraction < 10 and spec.efficiency.gather_fraction != cpu["efficiency"][
        "gather_fraction"] and "index_select" in spec.sources["efficiency.gather_fraction"]
    assert probe_devices.COPY_SIZES[-1] >= 256 << 20  # the full sweep reaches the bandwidth-bound regime
