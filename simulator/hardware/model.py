"""The hardware model: priced operations (pure functions) and the cluster's simpy resources.

Priced operations turn work into seconds (the cluster-level ones, which calibration fits through, are in
:mod:`simulator.hardware.pricing`; the event methods of :class:`HardwareModel` use them, so the simulator and
:mod:`simulator.calibrate` agree by construction); the kernel-level formulas are here:

* compute: roofline bound per kernel, ``max(flops / peak_flops_per_s, bytes / memory_bandwidth)``, summed over
  kernels and divided by the phase's achieved fraction of that bound (``efficiency.forward_fraction`` ...),
  plus ``gpu.kernel_overhead_s`` per kernel: the fixed launch / framework-dispatch cost that dominates small
  mini-batches and does not scale with their size. Sparse kernels (aggregations) use ``gpu.sparse_flops_per_s``
  when it is measured. Source: Williams, Waterman and Patterson, "Roofline: an insightful visual performance
  model", CACM 52(4), 2009 (the bound ignores fixed per-kernel costs; the overhead term is gnnplan's, its value
  measured by ``gnnplan probe`` on the executor's own models, see :mod:`executor.probe`).
* transfer: alpha-beta, ``latency_s + bytes / bandwidth_bytes_per_s``. Source: Hockney, "The communication
  challenge for MPP", Parallel Computing 20(3), 1994.
* gather of feature rows from a memory: ``bytes / (memory_bandwidth * efficiency.gather_fraction)`` (a
  memory-bound index_select; the fraction absorbs irregular access).
* sampling: ``edges / (sampling_edges_per_s_per_core * cores)``.

:class:`HardwareModel` holds the resources of one cluster on an :class:`~simulator.engine.Engine`: per GPU a
compute unit (``simpy.Resource``, one kernel stream), PCIe host-to-device and device-to-host, NVLink send and
receive; per machine the NIC's send and receive sides, the storage device and the host cores. Links and cores
are :class:`~simulator.engine.FluidResource` objects, so concurrent transfers share bandwidth max-min fairly
(two equal transfers on one link each take twice as long). On a CPU-only cluster (``gpu.is_host_cpu``) a
worker's compute is a flow on its machine's host cores, capped at the worker's share of the cores, so compute
and sampler processes compete for the same cores.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from typing import Any, Protocol

import simpy

from gnnplan.simulator.engine import Engine, FluidResource
from gnnplan.simulator.hardware import pricing
from gnnplan.simulator.hardware.spec import ClusterSpec, GpuSpec, LinkSpec
from gnnplan.simulator.units import FLOAT_BYTES

__all__ = ["FLOAT_BYTES", "CUDA_CONTEXT_BYTES", "HardwareModel", "Kernel", "compute_time_s", "gather_time_s",
           "kernel_time_s", "roofline_s", "roofline_time_s", "sampling_time_s", "thread_share", "transfer_time_s",
           "worker_cores"]

CUDA_CONTEXT_BYTES = 8.0e8
"""GPU memory taken by a PyTorch process before any tensor: CUDA context + kernels, ~781 MB measured with
nvidia-smi in pytorch/pytorch issue #34323 ("PyTorch GPU memory allocation"), rounded up to 800 MB."""


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
    """Roofline time of one kernel on ``gpu``; sparse kernels use ``gpu.sparse_flops_per_s`` when set."""
    if kernel.sparse and gpu.sparse_flops_per_s is not None:
        return kernel.flops / gpu.sparse_flops_per_s
    return roofline_time_s(kernel.flops, kernel.nbytes, gpu.peak_flops_per_s, gpu.memory_bandwidth_bytes_per_s)


def roofline_s(kernels: Iterable[Kernel], gpu: GpuSpec) -> float:
    """Sum of the kernels' roofline times on ``gpu`` (no efficiency, no per-kernel overhead)."""
    return sum(kernel_time_s(k, gpu) for k in kernels)


def compute_time_s(kernels: Iterable[Kernel], gpu: GpuSpec, efficiency_fraction: float) -> float:
    """Time of a sequence of kernels: the sum of their roofline times divided by the achieved fraction, plus
    ``gpu.kernel_overhead_s`` per kernel (module docstring).

    Args:
        kernels: the phase's kernels.
        gpu: the device.
        efficiency_fraction: achieved fraction of the roofline bound (``cluster.efficiency.*_fraction``).
    """
    ks = tuple(kernels)
    return roofline_s(ks, gpu) / efficiency_fraction + len(ks) * gpu.kernel_overhead_s


def transfer_time_s(nbytes: float, link: LinkSpec) -> float:
    """Alpha-beta time of one message: ``latency_s + nbytes / bandwidth_bytes_per_s`` (0 for no bytes).

    Source: Hockney, Parallel Computing 20(3), 1994 (the alpha-beta / (r_inf, n_1/2) model).
    """
    return 0.0 if nbytes <= 0 else link.latency_s + nbytes / link.bandwidth_bytes_per_s


def gather_time_s(nbytes: float, memory_bandwidth_bytes_per_s: float, gather_fraction: float) -> float:
    """Time to gather ``nbytes`` of feature rows (index_select) from a memory: memory-bound."""
    return nbytes / (memory_bandwidth_bytes_per_s * gather_fraction)


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


class HardwareModel:
    """The simpy resources of a cluster (see module docstring).

    Args:
        cluster: the cluster.
        engine: the event engine.
        sampler_processes_per_worker: sampler processes each worker runs beside its compute; on a CPU-only
            cluster they take threads from its share (:func:`worker_cores`), as the executor sizes them.
    """

    def __init__(self, cluster: ClusterSpec, engine: Engine, sampler_processes_per_worker: int = 0) -> None:
        self.cluster = cluster
        self.engine = engine
        self.compute_cores = worker_cores(cluster, sampler_processes_per_worker)
        num_gpus, num_machines = cluster.num_gpus, cluster.num_machines
        pcie_bw = cluster.pcie.bandwidth_bytes_per_s
        self.pcie_h2d = [FluidResource(f"gpu{g}.pcie.h2d", pcie_bw) for g in range(num_gpus)]
        self.pcie_d2h = [FluidResource(f"gpu{g}.pcie.d2h", pcie_bw) for g in range(num_gpus)]
        nv_bw = cluster.nvlink.bandwidth_bytes_per_s if cluster.nvlink else 0.0
        self.nvlink_tx = [FluidResource(f"gpu{g}.nvlink.tx", nv_bw) for g in range(num_gpus)] if nv_bw else []
        self.nvlink_rx = [FluidResource(f"gpu{g}.nvlink.rx", nv_bw) for g in range(num_gpus)] if nv_bw else []
        net_bw = cluster.network.bandwidth_bytes_per_s
        self.nic_tx = [FluidResource(f"m{m}.nic.tx", net_bw) for m in range(num_machines)]
        self.nic_rx = [FluidResource(f"m{m}.nic.rx", net_bw) for m in range(num_machines)]
        self.storage = [FluidResource(f"m{m}.storage", cluster.storage.bandwidth_bytes_per_s)
                        for m in range(num_machines)]
        self.host_cores = [FluidResource(f"m{m}.cores", float(cluster.host.num_cores)) for m in range(num_machines)]
        self.gpu_compute = [simpy.Resource(engine.env, capacity=1) for _ in range(num_gpus)]

    def machine_of(self, rank: int) -> int:
        """The machine of worker ``rank`` (ranks m*g .. m*g+g-1 live on machine m)."""
        return rank // self.cluster.gpus_per_machine

    def transfer(self, resources: Iterable[FluidResource], nbytes: float, latency_s: float) -> simpy.Event:
        """Move ``nbytes`` across ``resources`` after ``latency_s``; bandwidth is shared with concurrent flows.

        Returns:
            An event fired when the last byte has arrived.
        """
        done = self.engine.event()
        if nbytes <= 0:
            done.succeed()
            return done
        res = tuple(resources)

        def _finish(_ev: Any) -> None:
            done.succeed()

        def _start(_ev: Any = None) -> None:
            self.engine.fluid.start(res, nbytes).callbacks.append(_finish)

        if latency_s > 0:
            self.engine.timeout(latency_s).callbacks.append(_start)
        else:
            _start()
        return done

    def host_to_gpu(self, rank: int, nbytes: float) -> simpy.Event:
        """Copy host memory to worker ``rank``'s GPU over its PCIe link (host-to-device direction)."""
        return self.transfer((self.pcie_h2d[rank],), nbytes, self.cluster.pcie.latency_s)

    def gpu_to_host(self, rank: int, nbytes: float) -> simpy.Event:
        """Copy worker ``rank``'s GPU memory to the host over its PCIe link (device-to-host direction)."""
        return self.transfer((self.pcie_d2h[rank],), nbytes, self.cluster.pcie.latency_s)

    def gpu_to_gpu(self, src: int, dst: int, nbytes: float, num_messages: int = 1) -> simpy.Event:
        """Copy between two GPUs of one machine: NVLink if present, else PCIe through the host.

        ``num_messages`` back-to-back messages pay the latency that many times (e.g. the steps of a ring).
        """
        nvlink = self.cluster.nvlink
        if nvlink is not None:
            return self.transfer((self.nvlink_tx[src], self.nvlink_rx[dst]), nbytes, num_messages * nvlink.latency_s)
        return self.transfer((self.pcie_d2h[src], self.pcie_h2d[dst]), nbytes,
                             num_messages * self.cluster.pcie.latency_s)

    def network(self, src_machine: int, dst_machine: int, nbytes: float, num_messages: int = 1) -> simpy.Event:
        """Send over the network from one machine's NIC to another's (``num_messages`` latencies)."""
        return self.transfer((self.nic_tx[src_machine], self.nic_rx[dst_machine]), nbytes,
                             num_messages * self.cluster.network.latency_s)

    def all_reduce(self, rank: int, nbytes: float) -> Generator[simpy.Event, Any, None]:
        """Worker ``rank``'s part of a hierarchical ring all-reduce of ``nbytes``; use with ``yield from`` once
        every worker has arrived (e.g. at a :class:`~simulator.engine.Rendezvous`).

        Reduce-scatter inside the machine (NVLink, else PCIe through the host: ``(g-1)/g * nbytes`` in ``g-1``
        steps), ring all-reduce across machines of this GPU's ``1/g`` shard (``2 (m-1)/m * nbytes / g`` over the
        NIC in ``2 (m-1)`` steps), all-gather inside the machine; first the call's fixed cost
        (:func:`~simulator.hardware.pricing.collective_s`). Uncontended, its time equals
        :func:`~simulator.hardware.pricing.all_reduce_s`. Source: Patarasuk and Yuan,
        "Bandwidth optimal all-reduce algorithms", JPDC 69(2), 2009 (ring); the hierarchical form is NCCL's
        tree/ring across nodes (Jeaugey, GTC 2017).
        """
        g, m = self.cluster.gpus_per_machine, self.cluster.num_machines
        machine, local = divmod(rank, g)
        peer = machine * g + (local + 1) % g
        fixed_s = pricing.collective_s(self.cluster, nbytes)
        if fixed_s > 0:  # the call's fixed cost (network.per_collective_s) before its first message
            yield self.engine.timeout(fixed_s)
        if g > 1:
            yield self.gpu_to_gpu(rank, peer, (g - 1) / g * nbytes, num_messages=g - 1)
        if m > 1:
            yield self.network(machine, (machine + 1) % m, 2.0 * (m - 1) / m * nbytes / g, num_messages=2 * (m - 1))
        if g > 1:
            yield self.gpu_to_gpu(rank, peer, (g - 1) / g * nbytes, num_messages=g - 1)

    def host_work(self, machine: int, core_seconds: float, max_cores: float = 1.0) -> simpy.Event:
        """Run ``core_seconds`` of CPU work on a machine's cores, using at most ``max_cores`` at a time."""
        return self.engine.fluid.start((self.host_cores[machine],), core_seconds, cap=max_cores)

    def sample(self, machine: int, num_edges: float) -> simpy.Event:
        """Sample (or build blocks of) ``num_edges`` neighbour edges on one of a machine's cores
        (:func:`~simulator.hardware.pricing.sampling_s` core-seconds, sharing the cores with other host work)."""
        return self.host_work(machine, pricing.sampling_s(self.cluster, num_edges))

    def sampler_handoff(self, rank: int, num_batches: float = 1.0) -> Generator[simpy.Event, Any, None]:
        """Worker ``rank``'s trainer takes ``num_batches`` sampled batches from its sampler processes
        (:func:`~simulator.hardware.pricing.sampler_handoff_s`, host work on one of its machine's cores, sharing
        them with the samplers); nothing when the hand-off is not modelled (0 s). Use with ``yield from``."""
        seconds = pricing.sampler_handoff_s(self.cluster, num_batches)
        if seconds > 0:
            yield self.host_work(self.machine_of(rank), seconds)

    def host_gather(self, nbytes: float) -> simpy.Event:
        """Gather ``nbytes`` of rows from host memory (:func:`~simulator.hardware.pricing.host_gather_s`, not
        shared with other flows)."""
        return self.engine.timeout(pricing.host_gather_s(self.cluster, nbytes))

    def gpu_gather(self, rank: int, nbytes: float) -> Generator[simpy.Event, Any, None]:
        """Gather ``nbytes`` of rows in worker ``rank``'s device memory on its compute
        (:func:`~simulator.hardware.pricing.gpu_gather_s`); use with ``yield from``."""
        yield from self.compute(rank, pricing.gpu_gather_s(self.cluster, nbytes))

    def compute(self, rank: int, seconds: float) -> Generator[simpy.Event, Any, None]:
        """Occupy worker ``rank``'s compute for ``seconds`` (its uncontended time); use with ``yield from``.

        On a GPU the kernels queue on the GPU's single stream. With ``gpu.is_host_cpu`` the work is a flow of
        ``seconds * worker_cores(cluster)`` core-seconds (``seconds`` is its time on the worker's whole share, as
        the probe measured it) on the machine's cores, capped at the threads the worker computes with when it
        also runs sampler processes (``compute_cores``), so it slows down while sampler processes use the same
        cores.
        """
        if seconds <= 0:
            return
        if self.cluster.gpu.is_host_cpu:
            work = seconds * worker_cores(self.cluster)
            yield self.host_work(self.machine_of(rank), work, max_cores=self.compute_cores)
            return
        with self.gpu_compute[rank].request() as req:
            yield req
            yield self.engine.timeout(seconds)
