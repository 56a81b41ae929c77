"""Kernel-level cost formulas of the hardware model (pure functions; :mod:`simulator.hardware.model` holds the
simpy resources that use them, :mod:`simulator.hardware.pricing` the cluster-level priced operations):

* compute: roofline bound per kernel, ``max(flops / peak_flops_per_s, bytes / memory_bandwidth)``, summed over
  kernels and divided by the phase's achieved fraction of that bound (``efficiency.forward_fraction`` ...),
  plus ``gpu.kernel_overhead_s`` per kernel: the fixed launch / framework-dispatch cost that dominates small
  mini-batches and does not scale with their size. Sparse kernels (aggregations) use ``gpu.sparse_flops_per_s``
  when it is measured, those whose messages an edge value multiplies ``gpu.weighted_sparse_flops_per_s``.
  Source: Williams, Waterman and Patterson, "Roofline: an insightful visual performance model", CACM 52(4), 2009
  (the bound ignores fixed per-kernel costs; the overhead term is gnnplan's, its value measured by ``gnnplan
  probe`` on the executor's own models, see :mod:`executor.probe`).
* transfer: alpha-beta, ``latency_s + bytes / bandwidth_bytes_per_s``. Source: Hockney, "The communication
  challenge for MPP", Parallel Computing 20(3), 1994.
* gather of feature rows from a memory: ``2 bytes / (memory_bandwidth * efficiency.gather_fraction)`` (a
  memory-bound index_select reads and writes every gathered byte, :data:`GATHER_TRAFFIC`; the fraction absorbs
  irregular access).
* sampling: ``edges / (sampling_edges_per_s_per_core * cores)``.
* a worker's share of a machine's cores (:func:`thread_share`), which the executor sizes its thread pools with.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np

from gnnplan.simulator.hardware.spec import ClusterSpec, GpuSpec, LinkSpec


class Kernel(Protocol):
    """One unit of device work (see :class:`simulator.workload.model_cost.Kernel`)."""

    @property
    def flops(self) -> float: ...

    @property
    def nbytes(self) -> float: ...

    @property
    def sparse(self) -> bool: ...


def roofline_time_s(flops: float, nbytes: float, peak_flops_per_s: float, memory_bandwidth_bytes_per_s: float) -> float:
    """Roofline lower bound of a kernel's time.

    Source: Williams, Waterman and Patterson, "Roofline", CACM 2009, eq. (1): attainable FLOP/s =
    min(peak, intensity x bandwidth), i.e. time = max(flops / peak, bytes / bandwidth).
    """
    return max(flops / peak_flops_per_s, nbytes / memory_bandwidth_bytes_per_s)


def kernel_time_s(kernel: Kernel, gpu: GpuSpec) -> float:
    """Roofline time of one kernel on ``gpu``; sparse kernels use ``gpu.sparse_flops_per_s`` when set, weighted
    ones (``Kernel.weighted``) ``gpu.weighted_sparse_flops_per_s`` when that is set."""
    if kernel.sparse:  # every dense kernel of a roofline sum skips the rate lookup
        weighted = gpu.weighted_sparse_flops_per_s if getattr(kernel, "weighted", False) else None
        rate = weighted or gpu.sparse_flops_per_s
        if rate is not None:
            return kernel.flops / rate
    return roofline_time_s(kernel.flops, kernel.nbytes, gpu.peak_flops_per_s, gpu.memory_bandwidth_bytes_per_s)


def roofline_s(kernels: Iterable[Kernel], gpu: GpuSpec) -> float:
    """Sum of the kernels' roofline times on ``gpu`` (no efficiency, no per-kernel overhead)."""
    return sum(kernel_time_s(k, gpu) for k in kernels)


def roofline_line(kernel_lists: Sequence[Sequence[Kernel]], gpu: GpuSpec) -> tuple[float, float]:
    """The least-squares line ``intercept_s + seconds_per_flop * flops`` through the roofline times of kernel
    lists of different sizes (the same kernels on more and fewer items: a mini-batch and a smaller one, a layer's
    blocks on several GPUs). A kernel's roofline time is the larger of its FLOPs and its bytes at the device's
    rates, and its bytes hold a part no batch size changes (the layer's weights, read once per kernel), so a
    batch's roofline time is affine in its FLOPs rather than proportional: the intercept is what a smaller batch
    (the epoch's last, a micrograph) still pays [inferred: exact while no kernel changes from memory- to
    compute-bound between the sizes; Williams, Waterman and Patterson, "Roofline", CACM 52(4), 2009].

    Returns:
        ``(intercept_s, seconds_per_flop)``; ``(0, roofline / flops)`` over all the lists when they do not differ
        in FLOPs or the line would have a negative intercept or slope.
    """
    flops = np.array([sum(k.flops for k in ks) for ks in kernel_lists], dtype=float)
    seconds = np.array([roofline_s(ks, gpu) for ks in kernel_lists], dtype=float)
    proportional = (0.0, float(seconds.sum() / max(flops.sum(), 1.0)))
    if len(flops) < 2 or np.ptp(flops) <= 0:
        return proportional
    slope, intercept = np.polyfit(flops, seconds, 1)
    return (float(intercept), float(slope)) if intercept >= 0.0 and slope > 0.0 else proportional


def compute_time_s(kernels: Iterable[Kernel], gpu: GpuSpec, efficiency_fraction: float) -> float:
    """Time of a sequence of kernels: the sum of their roofline times divided by the achieved fraction, plus
    ``gpu.kernel_overhead_s`` per kernel (module docstring), plus their random draws (dropout masks) at the
    measured ``gpu.rng_elements_per_s`` when set (an achieved rate: not divided by the fraction).

    Args:
        kernels: the phase's kernels.
        gpu: the device.
        efficiency_fraction: achieved fraction of the roofline bound (``cluster.efficiency.*_fraction``).
    """
    ks = tuple(kernels)
    out = roofline_s(ks, gpu) / efficiency_fraction + fixed_time_s(ks, gpu)
    if gpu.rng_elements_per_s:
        out += sum(getattr(k, "random_elems", 0.0) for k in ks) / gpu.rng_elements_per_s
    return out


def fixed_time_s(kernels: Iterable[Kernel], gpu: GpuSpec) -> float:
    """The part of :func:`compute_time_s` a kernel sequence pays whatever its sizes: ``gpu.kernel_overhead_s`` per
    kernel (times ``gpu.backward_overhead_ratio`` for a gradient kernel autograd runs, ``Kernel.backward``) and
    ``gpu.graph_op_overhead_s`` per DGL message-passing call among them (a batch twice as large launches the same
    kernels)."""
    ks = tuple(kernels)
    graph_ops = sum(1 for k in ks if getattr(k, "graph_op", False))  # DGL message-passing calls
    return kernel_launches(len(ks), backward_kernel_count(ks), gpu) + graph_ops * gpu.graph_op_overhead_s


def backward_kernel_count(kernels: Iterable[Kernel]) -> int:
    """How many of ``kernels`` are gradient kernels autograd runs (``Kernel.backward``)."""
    return sum(1 for k in kernels if getattr(k, "backward", False))


def kernel_launches(kernels: float, backward_kernels: float, gpu: GpuSpec) -> float:
    """Fixed seconds of ``kernels`` kernel launches, ``backward_kernels`` of them autograd's:
    ``(kernels - backward_kernels + backward_kernels * gpu.backward_overhead_ratio) * gpu.kernel_overhead_s``.
    The forward's kernels are dispatched by the model's Python code (module and DGL layer code), a backward's by
    autograd's C++ engine; measured with one thread on the development machine (GraphSAGE on Cora mini-batches,
    fixed seconds from a line through 8-, 64- and 512-seed batches, 2026-11-30): ~1.65 ms for 13 forward kernels,
    ~0.77 ms for their 13 gradients. Source of the split: PyTorch docs, "Autograd mechanics" (the backward graph
    is executed by the C++ engine)."""
    return (kernels + backward_kernels * (gpu.backward_overhead_ratio - 1.0)) * gpu.kernel_overhead_s


def transfer_time_s(nbytes: float, link: LinkSpec) -> float:
    """Alpha-beta time of one message: ``latency_s + nbytes / bandwidth_bytes_per_s`` (0 for no bytes).

    Source: Hockney, Parallel Computing 20(3), 1994 (the alpha-beta / (r_inf, n_1/2) model).
    """
    return 0.0 if nbytes <= 0 else link.latency_s + nbytes / link.bandwidth_bytes_per_s


GATHER_TRAFFIC = 2.0
"""Bytes of memory traffic per gathered byte: a gather reads every row and writes it into the batch. Memory
bandwidths, and the copy rates the achieved fractions come from, count both (STREAM Copy: McCalpin, IEEE TCCA
Newsletter, 1995), so a gather at the roofline bound delivers half the memory bandwidth in gathered bytes. Before
2026-11-29 a gather was priced at the whole bandwidth, twice as fast as it can run (``gnnplan probe`` found the
executor's gathers at 0.46 of this machine's copy rate)."""


def memory_traffic_time_s(traffic_bytes: float, memory_bandwidth_bytes_per_s: float, fraction: float) -> float:
    """Time of a memory-bound row operation that moves ``traffic_bytes`` (bytes read plus written, the convention
    of the bandwidth) at ``fraction`` of the roofline: ``traffic_bytes / (memory_bandwidth_bytes_per_s *
    fraction)`` (Williams, Waterman and Patterson, "Roofline", CACM 52(4), 2009)."""
    return traffic_bytes / (memory_bandwidth_bytes_per_s * fraction)


def gather_time_s(nbytes: float, memory_bandwidth_bytes_per_s: float, gather_fraction: float) -> float:
    """Time to gather ``nbytes`` of feature rows (index_select; the gathered bytes) from a memory: memory-bound,
    ``GATHER_TRAFFIC * nbytes / (memory_bandwidth_bytes_per_s * gather_fraction)`` (:data:`GATHER_TRAFFIC`,
    :func:`memory_traffic_time_s`)."""
    return memory_traffic_time_s(GATHER_TRAFFIC * nbytes, memory_bandwidth_bytes_per_s, gather_fraction)


def sampling_time_s(num_edges: float, edges_per_s_per_core: float, num_cores: float) -> float:
    """Time to sample ``num_edges`` neighbour edges on ``num_cores`` cores."""
    return num_edges / (edges_per_s_per_core * num_cores)


def thread_share(num_cores: int, workers_per_machine: int, sampler_processes_per_worker: int = 0) -> int:
    """Compute threads of one worker process: its share of the machine's cores, at least 1.

    The machine's cores are split evenly among its worker processes and their sampler processes, so the
    machine runs ``workers_per_machine * (1 + sampler_processes_per_worker)`` busy processes on ``num_cores``
    cores without oversubscribing them (a sampler process samples on one thread). The executor sizes every
    worker's thread pools with this (:mod:`executor.threads`) and the simulator caps a CPU worker's compute
    at it (:func:`worker_cores`), so both split the cores the same way.

    Args:
        num_cores: host cores of the machine.
        workers_per_machine: worker processes (ranks) on the machine.
        sampler_processes_per_worker: sampler processes each worker starts (0 = samples inline).

    Returns:
        ``max(1, num_cores // (workers_per_machine * (1 + sampler_processes_per_worker)))``.

    Raises:
        ValueError: ``num_cores`` or ``workers_per_machine`` below 1, or ``sampler_processes_per_worker`` below 0.
    """
    if num_cores < 1 or workers_per_machine < 1 or sampler_processes_per_worker < 0:
        raise ValueError(f"thread_share: need num_cores >= 1 (got {num_cores}), workers_per_machine >= 1 (got "
                         f"{workers_per_machine}), sampler_processes_per_worker >= 0 (got "
                         f"{sampler_processes_per_worker})")
    return max(1, num_cores // (workers_per_machine * (1 + sampler_processes_per_worker)))


def worker_cores(cluster: ClusterSpec, sampler_processes_per_worker: int = 0) -> int:
    """Host cores of one worker's compute when ``gpu.is_host_cpu``: :func:`thread_share` of a machine's cores
    among its ``gpus_per_machine`` workers (and their sampler processes)."""
    return thread_share(cluster.host.num_cores, cluster.gpus_per_machine, sampler_processes_per_worker)
