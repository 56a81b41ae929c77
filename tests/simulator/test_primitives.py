"""Priced operations and closed-form collectives: exact values."""

from __future__ import annotations

import pytest

from gnnplan.simulator.hardware.collectives import (
    all_reduce_link_bytes,
    all_to_all_time_s,
    hierarchical_all_reduce_time_s,
    ring_all_reduce_bytes,
    ring_all_reduce_time_s,
)
from gnnplan.simulator.hardware.formulas import (
    compute_time_s,
    gather_time_s,
    kernel_time_s,
    roofline_s,
    roofline_time_s,
    sampling_time_s,
    transfer_time_s,
)
from gnnplan.simulator.hardware.spec import GpuSpec, LinkSpec, load_cluster
from gnnplan.simulator.workload.model_cost import Kernel

GPU = GpuSpec(model="t", peak_flops_per_s=1e12, memory_bytes=1e9, memory_bandwidth_bytes_per_s=1e11)


def test_roofline_compute_bound_and_memory_bound() -> None:
    assert roofline_time_s(2e12, 1e9, 1e12, 1e11) == 2.0          # 2 s of FLOPs vs 0.01 s of bytes
    assert roofline_time_s(1e9, 5e11, 1e12, 1e11) == 5.0          # 1 ms of FLOPs vs 5 s of bytes


def test_compute_time_sums_kernels_and_divides_by_efficiency() -> None:
    kernels = [Kernel("a", 1e12, 0.0), Kernel("b", 0.0, 1e11, sparse=True)]
    assert compute_time_s(kernels, GPU, 1.0) == pytest.approx(2.0, rel=1e-15)
    assert compute_time_s(kernels, GPU, 0.5) == pytest.approx(4.0, rel=1e-15)


def test_kernel_overhead_is_added_per_kernel_and_not_scaled_by_efficiency() -> None:
    gpu = GPU.model_copy(update={"kernel_overhead_s": 0.25})
    kernels = (Kernel("a", 1e12, 0.0), Kernel("b", 0.0, 1e11, sparse=True), Kernel("c", 0.0, 0.0))
    assert roofline_s(kernels, gpu) == pytest.approx(2.0, rel=1e-15)
    assert compute_time_s(kernels, gpu, 0.5) == pytest.approx(2.0 / 0.5 + 3 * 0.25, rel=1e-15)
    assert compute_time_s(iter(kernels), gpu, 1.0) == pytest.approx(2.75, rel=1e-15)  # any iterable, read once
    assert compute_time_s((), gpu, 1.0) == 0.0


def test_sparse_kernels_use_measured_spmm_throughput() -> None:
    gpu = GPU.model_copy(update={"sparse_flops_per_s": 1e10})
    assert kernel_time_s(Kernel("spmm", 1e10, 1e15, sparse=True), gpu) == 1.0
    assert kernel_time_s(Kernel("gemm", 1e10, 0.0), gpu) == 0.01


def test_transfer_gather_and_sampling() -> None:
    link = LinkSpec(bandwidth_bytes_per_s=1e9, latency_s=1e-5)
    assert transfer_time_s(1e9, link) == pytest.approx(1.0 + 1e-5, rel=1e-15)
    assert transfer_time_s(0, link) == 0.0
    assert gather_time_s(1e9, 1e10, 0.5) == pytest.approx(0.4)  # 1 GB read and written at 5 GB/s
    assert sampling_time_s(4e7, 2e7, 2) == pytest.approx(1.0)


def test_ring_all_reduce_formula() -> None:
    # Thakur et al. 2005: 2 (p-1)/p n/B + 2 (p-1) alpha
    assert ring_all_reduce_time_s(4e9, 4, 1e9, 1e-3) == pytest.approx(2 * 3 / 4 * 4 + 2 * 3 * 1e-3, rel=1e-15)
    assert ring_all_reduce_time_s(4e9, 1, 1e9, 1e-3) == 0.0
    assert ring_all_reduce_bytes(4e9, 4) == pytest.approx(6e9)


def test_hierarchical_all_reduce_reduces_to_rings() -> None:
    net = load_cluster("4x-a100-10gbe")      # 4 machines x 1 GPU: a flat ring over the network
    n = 1e8
    assert hierarchical_all_reduce_time_s(n, net) == pytest.approx(
        ring_all_reduce_time_s(n, 4, net.network.bandwidth_bytes_per_s, net.network.latency_s), rel=1e-15)
    dgx = load_cluster("dgx-a100")           # 1 machine x 8 GPUs: a ring over NVLink
    assert dgx.nvlink is not None
    assert hierarchical_all_reduce_time_s(n, dgx) == pytest.approx(
        ring_all_reduce_time_s(n, 8, dgx.nvlink.bandwidth_bytes_per_s, dgx.nvlink.latency_s), rel=1e-15)
    # two DGX machines sharing one NIC each (the preset has 8; tests/simulator/test_network_model.py covers them)
    two = dgx.model_copy(update={"num_machines": 2,
                                 "network": dgx.network.model_copy(update={"nics_per_machine": 1})})
    expected = (2 * 7 / 8 * n / 300e9 + 2 * 7 * 2e-6) + (2 * 1 / 2 * n / 25e9 + 2 * 1 * 5e-6)
    assert hierarchical_all_reduce_time_s(n, two) == pytest.approx(expected, rel=1e-12)
    assert all_reduce_link_bytes(n, two) == {"nvlink": pytest.approx(2 * 7 / 8 * n),
                                             "network": pytest.approx(2 * 1 / 2 * n / 8)}


def test_all_to_all_pairwise_exchange() -> None:
    assert all_to_all_time_s(4e9, 4, 1e9, 1e-3) == pytest.approx(3 * 1e-3 + 3 / 4 * 4, rel=1e-15)
    assert all_to_all_time_s(4e9, 1, 1e9, 1e-3) == 0.0
