"""``gnnplan probe`` on a machine with GPUs: device compute, host<->device copies, peer copies, all-reduce.

When CUDA is present (:func:`probe_gpu_fields`), the probe measures the GPUs instead of modelling CPU worker
processes: one machine of ``torch.cuda.device_count()`` GPUs. Every measurement is written against
``torch.device`` and a :class:`DeviceTimer`, so the same code runs (and is tested) on CPU devices:

* timing: CUDA events recorded on the current stream around the work, ``elapsed_time`` after synchronising
  (PyTorch docs, "CUDA semantics: asynchronous execution"; without it a host clock times kernel launches, not
  kernels); on CPU devices ``time.perf_counter``;
* dense FP32 throughput: ``torch.mm`` of two n x n matrices on the device, 2 n^3 FLOP; device memory bandwidth:
  ``Tensor.copy_`` on the device, bytes read + written (STREAM Copy; McCalpin, IEEE TCCA Newsletter, 1995);
  sparse throughput: ``torch.sparse.mm`` of a random CSR matrix, 2 nnz cols FLOP; ``efficiency.gather_fraction``:
  ``index_select`` of random rows on the device, its traffic (each gathered byte read and written) over that copy
  bandwidth;
* host->device (H2D) and device->host (D2H): ``copy_`` between a pinned host buffer and device memory
  (pinned, as the executor's loaders and DGL's UVA use; pageable copies are staged and slower: NVIDIA, "How to
  Optimize Data Transfers in CUDA C/C++", 2012), sizes 4 KiB .. 256 MiB, alpha-beta fit (Hockney, Parallel
  Computing 20(3), 1994; :func:`executor.probe_io.fit_latency_bandwidth`);
* peer copies (NVLink or PCIe peer-to-peer): ``copy_`` from GPU 0 to GPU 1, same sizes and fit; reported as
  NVLink only when ``torch.cuda.can_device_access_peer`` says the pair has direct access;
* all-reduce: ``torch.distributed.all_reduce`` over all GPUs (NCCL on GPUs, gloo on CPU devices), fitted to the
  ring model ``2 (p-1) alpha + 2 (p-1)/p n / B`` (Thakur, Rabenseifner and Gropp, IJHPCA 19(1), 2005, §4.5),
  so ``B`` is NCCL's "bus bandwidth" (nccl-tests, doc/PERFORMANCE.md): the intra-machine link rate collectives
  achieve, which :mod:`simulator.hardware.collectives` prices all-reduce with.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from gnnplan.executor.probe_io import fit_latency_bandwidth
from gnnplan.simulator.hardware.formulas import GATHER_TRAFFIC
from gnnplan.simulator.units import FLOAT_BYTES

__all__ = ["COPY_SIZES", "DeviceTimer", "all_reduce_bus_bandwidth", "all_reduce_times_s", "copy_times_s",
           "device_compute", "gpu_machine", "probe_gpu_fields"]

MiB = 1 << 20
COPY_SIZES = (4096, 65536, MiB, 16 * MiB, 64 * MiB, 256 * MiB)
"""Transfer sizes of the copy and all-reduce sweeps: 4 KiB (latency-bound) to 256 MiB (bandwidth-bound)."""
QUICK_COPY_SIZES = (4096, 65536, MiB, 4 * MiB)
"""The sweep of ``gnnplan probe --quick`` and of the tests."""
GATHER_ROW_FLOATS = 128
"""Width of the rows the device gather reads (float32: ogbn-papers100M's 128 features, and the rows of the CPU
probe's gather, :data:`executor.probe_host.FULL`)."""


@dataclass
class DeviceTimer:
    """Seconds of work on ``device``: CUDA events on its current stream, or ``perf_counter`` on a CPU device."""

    device: torch.device

    def time_s(self, fn: Callable[[], Any], repeats: int, warmup: int = 1) -> float:
        """Median seconds of ``repeats`` calls of ``fn`` after ``warmup`` calls (each timed separately)."""
        for _ in range(warmup):
            fn()
        times = [self._once_s(fn) for _ in range(repeats)]
        return float(np.median(times))

    def _once_s(self, fn: Callable[[], Any]) -> float:
        if self.device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3  # elapsed_time is in milliseconds
        begin = time.perf_counter()
        fn()
        return time.perf_counter() - begin


def copy_times_s(src: torch.device, dst: torch.device, sizes: Sequence[int], repeats: int) -> list[float]:
    """Median seconds to copy each size from ``src`` to ``dst`` (a CPU side is pinned when the other is CUDA).

    Args:
        src: source device (``cpu`` = host memory).
        dst: destination device.
        sizes: bytes per copy.
        repeats: timed copies per size.

    Returns:
        Seconds per size, in order.
    """
    timer = DeviceTimer(dst if dst.type == "cuda" else src)
    out = []
    for size in sizes:
        a = _buffer(size, src, pin=dst.type == "cuda")
        b = _buffer(size, dst, pin=src.type == "cuda")
        out.append(timer.time_s(lambda a=a, b=b: b.copy_(a, non_blocking=True), repeats))
    return out


def _buffer(nbytes: int, device: torch.device, pin: bool) -> torch.Tensor:
    t = torch.empty(nbytes, dtype=torch.uint8, device=device)
    return t.pin_memory() if pin and device.type == "cpu" and torch.cuda.is_available() else t


def device_compute(device: torch.device, n: int, copy_bytes: int, spmm: tuple[int, int, int], repeats: int
                   ) -> dict[str, float]:
    """Dense FLOP/s, copy bandwidth (bytes read + written), sparse FLOP/s and gather rate on ``device``.

    Args:
        device: where to measure.
        n: matrix side of the dense product.
        copy_bytes: bytes of the copied tensor.
        spmm: (rows, nonzeros per row, dense columns) of the sparse product.
        repeats: timed calls per measurement.

    Returns:
        ``peak_flops_per_s``, ``memory_bandwidth_bytes_per_s``, ``sparse_flops_per_s`` and ``gather_bytes_per_s``:
        ``index_select`` of a random quarter of the copied tensor's rows (:data:`GATHER_ROW_FLOATS` float32 each),
        gathered bytes per second (a fresh random index set per call).
    """
    timer = DeviceTimer(device)
    gen = torch.Generator().manual_seed(0)
    a, b = torch.rand(n, n, generator=gen).to(device), torch.rand(n, n, generator=gen).to(device)
    dense = 2.0 * n ** 3 / timer.time_s(lambda: torch.mm(a, b), repeats)
    src = torch.rand(copy_bytes // 4, generator=gen).to(device)
    dst = torch.empty_like(src)
    copy = 2.0 * src.numel() * 4 / timer.time_s(lambda: dst.copy_(src), repeats)
    table = src.view(-1, GATHER_ROW_FLOATS)
    num_picked = len(table) // 4  # a quarter of the rows, fresh random ones per call
    picks = iter([torch.randint(0, len(table), (num_picked,), generator=gen).to(device) for _ in range(repeats + 1)])
    gathered_bytes = num_picked * GATHER_ROW_FLOATS * FLOAT_BYTES
    gather = gathered_bytes / timer.time_s(lambda: torch.index_select(table, 0, next(picks)), repeats)
    rows, degree, cols = spmm
    col = np.sort(np.random.default_rng(0).integers(0, rows, size=(rows, degree)), axis=1).reshape(-1)
    crow = torch.arange(0, rows * degree + 1, degree, dtype=torch.int64)
    sparse_a = torch.sparse_csr_tensor(crow, torch.from_numpy(col), torch.rand(rows * degree), (rows, rows))
    sparse_a, x = sparse_a.to(device), torch.rand(rows, cols, generator=gen).to(device)
    sparse = 2.0 * rows * degree * cols / timer.time_s(lambda: torch.sparse.mm(sparse_a, x), repeats)
    return {"peak_flops_per_s": dense, "memory_bandwidth_bytes_per_s": copy, "sparse_flops_per_s": sparse,
            "gather_bytes_per_s": gather}


def all_reduce_times_s(topo: Any, emit: Any, sizes: Sequence[int], repeats: int) -> list[float]:
    """Rank program: median seconds of ``all_reduce`` of each size (float32 tensors on the rank's device),
    measured on rank 0 between barriers. Runs under :func:`executor.launch.spawn` (gloo on CPU) or one process
    per GPU (NCCL)."""
    from gnnplan.executor import comm

    timer = DeviceTimer(comm.device())
    out = []
    for size in sizes:
        t = torch.ones(max(1, size // 4), dtype=torch.float32, device=comm.device())
        comm.barrier()
        out.append(timer.time_s(lambda t=t: comm.all_reduce_(t), repeats))
    return out


def all_reduce_bus_bandwidth(sizes: Sequence[int], times_s: Sequence[float], num_ranks: int) -> tuple[float, float]:
    """Per-step latency and bus bandwidth of a ring all-reduce from its times.

    ``t = 2 (p-1) alpha + 2 (p-1)/p * n / B`` (Thakur et al. 2005, §4.5): the alpha-beta fit of ``t`` against
    ``x = 2 (p-1)/p * n`` gives ``B`` and ``2 (p-1) alpha``.

    Returns:
        (alpha_s, bus_bandwidth_bytes_per_s).

    Raises:
        ValueError: fewer than 2 ranks, or times that do not grow with size.
    """
    if num_ranks < 2:
        raise ValueError(f"all_reduce_bus_bandwidth: need at least 2 ranks (got {num_ranks})")
    p = num_ranks
    latency, bandwidth = fit_latency_bandwidth([2.0 * (p - 1) / p * n for n in sizes], times_s)
    return latency / (2.0 * (p - 1)), bandwidth


def probe_gpu_fields(devices: Sequence[torch.device], quick: bool, spawn_all_reduce: Callable[..., list[float]]
                     ) -> tuple[dict[str, Any], dict[str, str]]:
    """The cluster fields of one machine with ``devices`` (GPUs, or CPU devices in tests) and their sources.

    Args:
        devices: the machine's devices, GPU 0 first.
        quick: the small sweep (:data:`QUICK_COPY_SIZES`, small matrices, 3 repeats).
        spawn_all_reduce: ``fn(sizes, repeats) -> seconds per size`` of an all-reduce over all devices
            (:func:`executor.launch.spawn` of :func:`all_reduce_times_s` with one process per device).

    Returns:
        (fields, sources): ``gpus_per_machine``, ``gpu`` (the measured throughputs, ``is_host_cpu`` false),
        ``pcie`` (H2D fit), ``nvlink`` (peer-copy fit, or None with one device or no peer access); sources name
        each method, the D2H fit and the all-reduce bus bandwidth.
    """
    sizes, repeats = (QUICK_COPY_SIZES, 3) if quick else (COPY_SIZES, 10)
    dev0, host = devices[0], torch.device("cpu")
    compute = device_compute(dev0, 512 if quick else 8192, (16 if quick else 1024) * MiB,
                             (20_000, 8, 64) if quick else (1_000_000, 16, 128), repeats)
    h2d = fit_latency_bandwidth(sizes, copy_times_s(host, dev0, sizes, repeats))
    d2h = fit_latency_bandwidth(sizes, copy_times_s(dev0, host, sizes, repeats))
    if dev0.type == "cuda":
        name, memory = torch.cuda.get_device_name(dev0), float(torch.cuda.get_device_properties(dev0).total_memory)
    else:
        from gnnplan.executor.probe_host import host_memory_bytes

        name, memory = f"{dev0} (no GPU)", host_memory_bytes() / len(devices)
    gather = compute.pop("gather_bytes_per_s")
    fields: dict[str, Any] = {
        "gpus_per_machine": len(devices),
        "gpu": {"model": name, **compute, "memory_bytes": float(memory), "is_host_cpu": False},
        "efficiency": {"gather_fraction": GATHER_TRAFFIC * gather / compute["memory_bandwidth_bytes_per_s"]},
        "pcie": {"bandwidth_bytes_per_s": h2d[1], "latency_s": h2d[0]},
        "nvlink": None,
    }
    fit = "alpha-beta fitted by non-negative least squares on relative residuals"
    on = "CUDA events" if dev0.type == "cuda" else "perf_counter (CPU device)"
    sweep = f"sizes {', '.join(map(str, sizes))} B, median of {repeats}, timed with {on}; {fit}"
    methods = {
        "gpus_per_machine": f"torch.cuda.device_count() = {len(devices)}",
        "gpu.model": "torch.cuda.get_device_name(0)",
        "gpu.memory_bytes": "torch.cuda.get_device_properties(0).total_memory",
        "gpu.peak_flops_per_s": "torch.mm of two n x n float32 matrices on GPU 0 (2 n^3 FLOP)",
        "gpu.memory_bandwidth_bytes_per_s": "Tensor.copy_ on GPU 0, bytes read + written (STREAM Copy)",
        "gpu.sparse_flops_per_s": "torch.sparse.mm of a random CSR matrix on GPU 0 (2 nnz cols FLOP)",
        "gpu.is_host_cpu": "a CUDA device",
        "efficiency.gather_fraction": (
            f"index_select of random {GATHER_ROW_FLOATS}-float32 rows on GPU 0: {gather:.4g} gathered bytes / s, "
            "each read and written (simulator.hardware.formulas.GATHER_TRAFFIC = 2), over "
            "gpu.memory_bandwidth_bytes_per_s (bytes read + written)"),
        "pcie.bandwidth_bytes_per_s pcie.latency_s": (
            f"host-to-device copy_ from pinned host memory to GPU 0, {sweep}; device-to-host measured the same "
            f"way: {d2h[1]:.4g} B/s, latency {d2h[0]:.3g} s"),
    }
    if len(devices) > 1 and _peer_access(devices[0], devices[1]):
        peer = fit_latency_bandwidth(sizes, copy_times_s(devices[0], devices[1], sizes, repeats))
        fields["nvlink"] = {"bandwidth_bytes_per_s": peer[1], "latency_s": peer[0]}
        methods["nvlink.bandwidth_bytes_per_s nvlink.latency_s"] = f"peer copy_ GPU 0 -> GPU 1, {sweep}"
    else:
        methods["nvlink"] = ("none: one device" if len(devices) < 2
                             else "none: GPU 0 and 1 have no peer access (torch.cuda.can_device_access_peer)")
    date = datetime.date.today().isoformat()
    sources = {k: f"measured by gnnplan probe on {date}: {v}" for ks, v in methods.items() for k in ks.split()}
    if len(devices) > 1:
        alpha, bus = all_reduce_bus_bandwidth(sizes, spawn_all_reduce(list(sizes), repeats), len(devices))
        link = "nvlink" if fields["nvlink"] else "pcie"
        sources[f"{link}.bandwidth_bytes_per_s"] += (
            f"; all-reduce over the {len(devices)} devices measured the same way (ring model, Thakur et al. 2005, "
            f"§4.5): bus bandwidth {bus:.4g} B/s, {alpha:.3g} s per step")
    return fields, sources


def gpu_machine(data: dict[str, Any], workers: int, quick: bool, devices: Sequence[torch.device] | None = None,
                spawn_all_reduce: Callable[..., list[float]] | None = None) -> dict[str, Any]:
    """Turn the CPU probe's mapping (``workers`` per-worker shares of this machine) into one machine with GPUs.

    The host fields become the whole machine's: every core (:func:`executor.threads.cpu_count`), all memory,
    and the memory and storage bandwidths the CPU probe divided by ``workers``; the GPU, PCIe and NVLink fields
    are measured by :func:`probe_gpu_fields`.

    Args:
        data: a :func:`executor.probe.probe_machine` mapping measured for ``workers`` workers.
        workers: the workers it was measured for.
        quick: the small sweeps.
        devices: the GPUs (default: every CUDA device).
        spawn_all_reduce: see :func:`probe_gpu_fields` (default: one spawned process per device).

    Returns:
        A new mapping (``num_machines`` 1, ``gpus_per_machine`` = len(devices)) whose ``priors`` repeat its own
        measured values (:func:`executor.probe_overheads.set_priors`: the device's PCIe copy and gather fraction,
        not the CPU probe's gather path).
    """
    from gnnplan.executor.probe_host import host_memory_bytes
    from gnnplan.executor.probe_overheads import set_priors
    from gnnplan.executor.threads import cpu_count

    devices = list(devices or [torch.device("cuda", i) for i in range(torch.cuda.device_count())])
    spawn_all_reduce = spawn_all_reduce or _spawn_all_reduce(len(devices))
    fields, sources = probe_gpu_fields(devices, quick, spawn_all_reduce)
    out = {**data, "num_machines": 1, **fields}
    out["host"] = {**data["host"], "num_cores": cpu_count(), "memory_bytes": host_memory_bytes(),
                   "memory_bandwidth_bytes_per_s": data["host"]["memory_bandwidth_bytes_per_s"] * workers}
    out["storage"] = {**data["storage"], "bandwidth_bytes_per_s": data["storage"]["bandwidth_bytes_per_s"] * workers,
                      "gpudirect": False}
    whole = f"the whole machine (the CPU probe's per-worker share x {workers} workers)"
    out["sources"] = {**data.get("sources", {}), **sources,
                      "num_machines": "one machine with GPUs",
                      "host.num_cores": "every core this process may run on (sched_getaffinity)",
                      "host.memory_bytes": "host memory (sysconf)",
                      "host.memory_bandwidth_bytes_per_s": f"{whole}: Tensor.copy_ on all cores (STREAM Copy)",
                      "storage.bandwidth_bytes_per_s": f"{whole}: sequential preads of a temp file"}
    return set_priors(out)


def _spawn_all_reduce(num_devices: int) -> Callable[..., list[float]]:
    def run(sizes: list[int], repeats: int) -> list[float]:
        from gnnplan.executor.launch import spawn

        return list(spawn(all_reduce_times_s, num_devices, (sizes, repeats)))
    return run


def _peer_access(a: torch.device, b: torch.device) -> bool:
    if a.type == "cuda" and b.type == "cuda":
        return bool(torch.cuda.can_device_access_peer(a.index or 0, b.index or 0))
    return a.type == b.type == "cpu"  # CPU devices in tests: shared memory stands in for a peer link
