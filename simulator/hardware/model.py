"""The hardware model: priced operations (pure functions) and the cluster's simpy resources.

Priced operations turn work into seconds: the cluster-level ones, which calibration fits through, are in
:mod:`simulator.hardware.pricing`, the kernel-level formulas (roofline compute, alpha-beta transfer, gather,
sampling, a worker's share of the cores) in :mod:`simulator.hardware.formulas`; the event methods of
:class:`HardwareModel` use them, so the simulator and :mod:`simulator.calibrate` agree by construction.

:class:`HardwareModel` holds the resources of one cluster on an :class:`~simulator.engine.Engine`: per GPU a
compute unit (``simpy.Resource``, one kernel stream), PCIe host-to-device and device-to-host, NVLink send and
receive; per machine the NIC's send and receive sides, the storage device, the host cores, the host memory and,
when GPUs share them (``pcie.gpus_per_uplink`` > 1 or a narrower uplink), the PCIe switch uplinks to the CPU
root complex, one per direction. Links, memory and cores are :class:`~simulator.engine.FluidResource` objects,
so concurrent transfers share bandwidth max-min fairly (two equal transfers on one link each take twice as
long).

The host side a machine's GPUs share (:class:`~simulator.hardware.spec.PcieSpec`): a host-to-device copy of
``n`` bytes is one flow across the GPU's link, its switch uplink and the host memory (``n`` bytes of DRAM
traffic: the DMA reads them), so four GPUs copying at once behind one uplink each get a quarter of it; a
device-to-host copy likewise in the other direction (the DMA writes them). A host gather of ``n`` bytes is a flow
of ``2 n / efficiency.gather_fraction`` bytes (read and written) on the host memory alone (alone, it takes
:func:`~simulator.hardware.pricing.host_gather_s`), so gathers and copies of the machine's GPUs contend for the
DRAM. A GPU-to-GPU copy over PCIe (no NVLink) goes peer to peer: through the uplinks only when the two GPUs sit
behind different switches, never through host memory. Source: max-min sharing of a path's links (Bertsekas and
Gallager, "Data Networks", 1992, §6.5.2); PCI Express Base Specification 4.0 §1.3 (switch upstream port);
NVIDIA DGX A100 system topology (two GPUs per PCIe switch). On a CPU-only cluster (``gpu.is_host_cpu``) a
worker's compute is a flow on its machine's host cores, capped at the worker's share of the cores, so compute
and sampler processes compete for the same cores.

The network side (:class:`~simulator.hardware.spec.NetworkSpec`, :class:`~simulator.hardware.spec.NvlinkSpec`): a
machine has ``network.nics_per_machine`` NICs, each a send and a receive resource; a GPU's traffic goes through
its PCIe-affine NIC (:meth:`HardwareModel.nic_of`) and stays on that rail. A GPU's transfer to a GPU of another
machine (:meth:`HardwareModel.gpu_network`, the all-reduce's step across machines) crosses only the NICs with
GPUDirect RDMA, and is staged through host memory without it. Between the GPUs of one machine, NVSwitch gives
any pair the GPU's full NVLink bandwidth; on ``pairwise`` links a single pair gets its direct link's share,
``bandwidth / (g - 1)``, while a collective spreads over all links (NCCL rings over every link: Jeaugey, "NCCL
2.0", GTC 2017); without NVLink a peer copy goes peer to peer over PCIe (above). Source: NVIDIA DGX A100 User
Guide (eight ConnectX-6 200 Gb/s compute NICs, one per GPU, GPUs and NICs paired behind PCIe switches); NVIDIA
HGX A100 4-GPU: four NVLinks between every GPU pair, no NVSwitch.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from typing import Any

import simpy

from gnnplan.simulator.engine import INF, Engine, FluidResource
from gnnplan.simulator.hardware import pricing
from gnnplan.simulator.hardware.collectives import nic_index, uplink_index
from gnnplan.simulator.hardware.formulas import GATHER_TRAFFIC, worker_cores
from gnnplan.simulator.hardware.spec import ClusterSpec
from gnnplan.simulator.units import FLOAT_BYTES

__all__ = ["FLOAT_BYTES", "CUDA_CONTEXT_BYTES", "HardwareModel"]

CUDA_CONTEXT_BYTES = 8.0e8
"""GPU memory taken by a PyTorch process before any tensor: CUDA context + kernels, ~781 MB measured with
nvidia-smi in pytorch/pytorch issue #34323 ("PyTorch GPU memory allocation"), rounded up to 800 MB."""


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
        net_bw, nics = cluster.network.bandwidth_bytes_per_s, cluster.network.nics_per_machine
        self.nic_tx = [FluidResource(f"m{i // nics}.nic{i % nics}.tx", net_bw) for i in range(num_machines * nics)]
        self.nic_rx = [FluidResource(f"m{i // nics}.nic{i % nics}.rx", net_bw) for i in range(num_machines * nics)]
        self._nvlink_pairs: dict[tuple[int, int], FluidResource] = {}
        self.storage = [FluidResource(f"m{m}.storage", cluster.storage.bandwidth_bytes_per_s)
                        for m in range(num_machines)]
        self.host_cores = [FluidResource(f"m{m}.cores", float(cluster.host.num_cores)) for m in range(num_machines)]
        self.host_memory = [FluidResource(f"m{m}.host_memory", cluster.host.memory_bandwidth_bytes_per_s)
                            for m in range(num_machines)]
        self.gpus_per_uplink = min(cluster.pcie.gpus_per_uplink, cluster.gpus_per_machine)
        up_bw = cluster.pcie.uplink_bytes_per_s
        num_uplinks = -(-cluster.gpus_per_machine // self.gpus_per_uplink) * num_machines
        shared = self.gpus_per_uplink > 1 or up_bw < pcie_bw
        self.uplink_h2d = [FluidResource(f"uplink{u}.h2d", up_bw) for u in range(num_uplinks)] if shared else []
        self.uplink_d2h = [FluidResource(f"uplink{u}.d2h", up_bw) for u in range(num_uplinks)] if shared else []
        self._h2d_path = [self._path(g, self.pcie_h2d, self.uplink_h2d) for g in range(num_gpus)]
        self._d2h_path = [self._path(g, self.pcie_d2h, self.uplink_d2h) for g in range(num_gpus)]
        self.gpu_compute = [simpy.Resource(engine.env, capacity=1) for _ in range(num_gpus)]
        self.gpu_copies = 1
        """Identical flows each flow stands for: the GPUs a simulated GPU represents
        (:func:`simulator.symmetry.fold_gpus`)."""
        self.gpu_shift = cluster.gpus_per_machine
        """Local GPUs simulated per machine (``g`` unless :func:`simulator.symmetry.fold_gpus` folded them)."""

    def _flow(self, resources: tuple[FluidResource, ...], amount: float, cap: float = INF,
              count: int = 1) -> simpy.Event:
        """Start ``count`` identical flows of ``amount`` units (bytes, or core-seconds) across ``resources``, each
        standing for :attr:`gpu_copies` flows (the GPUs a simulated GPU represents,
        :func:`simulator.symmetry.fold_gpus`): every flow of the model starts here
        (:meth:`~simulator.fluid.FluidScheduler.start`)."""
        return self.engine.fluid.start(resources, amount, cap=cap, count=count * self.gpu_copies)

    def machine_of(self, rank: int) -> int:
        """The machine of worker ``rank`` (ranks m*g .. m*g+g-1 live on machine m)."""
        return rank // self.cluster.gpus_per_machine

    def uplink_of(self, rank: int) -> int:
        """Index of the PCIe switch uplink worker ``rank``'s GPU sits behind (consecutive local GPUs share one;
        ``ceil(gpus_per_machine / gpus_per_uplink)`` uplinks per machine)."""
        g = self.cluster.gpus_per_machine
        machine, local = divmod(rank, g)
        return machine * -(-g // self.gpus_per_uplink) + uplink_index(local, g, self.gpus_per_uplink)

    def _path(self, rank: int, links: list[FluidResource], uplinks: list[FluidResource]) -> tuple[FluidResource, ...]:
        """A host<->GPU copy's resources: the GPU's link, its uplink (when shared), the machine's host memory."""
        up = (uplinks[self.uplink_of(rank)],) if uplinks else ()
        return (links[rank],) + up + (self.host_memory[self.machine_of(rank)],)

    def transfer(self, resources: Iterable[FluidResource], nbytes: float, latency_s: float,
                 count: int = 1) -> simpy.Event:
        """Move ``nbytes`` across ``resources`` after ``latency_s``; bandwidth is shared with concurrent flows.
        ``count`` identical transfers (same resources, bytes and start) are one call: each gets its own share
        (:meth:`~simulator.fluid.FluidScheduler.start`).

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
            self._flow(res, nbytes, count=count).callbacks.append(_finish)

        if latency_s > 0:
            self.engine.timeout(latency_s).callbacks.append(_start)
        else:
            _start()
        return done

    def host_to_gpu(self, rank: int, nbytes: float, num_messages: int = 1, count: int = 1) -> simpy.Event:
        """Copy host memory to worker ``rank``'s GPU (host-to-device): its PCIe link, its switch uplink and the
        machine's host memory, shared with the machine's other copies and gathers (module docstring);
        ``num_messages`` copies pay the latency that many times. Alone it takes
        :func:`~simulator.hardware.pricing.host_to_gpu_s`. ``count``: identical copies (:meth:`transfer`)."""
        return self.transfer(self._h2d_path[rank], nbytes, num_messages * self.cluster.pcie.latency_s, count)

    def gpu_to_host(self, rank: int, nbytes: float, num_messages: int = 1, count: int = 1) -> simpy.Event:
        """Copy worker ``rank``'s GPU memory to the host (device-to-host), the reverse path of
        :meth:`host_to_gpu`."""
        return self.transfer(self._d2h_path[rank], nbytes, num_messages * self.cluster.pcie.latency_s, count)

    def host_to_gpu_path(self, rank: int) -> tuple[FluidResource, ...]:
        """The resources a host-to-device copy to worker ``rank``'s GPU crosses (for :meth:`transfer` with a
        latency of its own, e.g. several DMA transfers of one batch)."""
        return self._h2d_path[rank]

    def storage_read(self, rank: int, nbytes: float, latency_s: float, direct: bool = False) -> simpy.Event:
        """Read ``nbytes`` from worker ``rank``'s machine's storage after ``latency_s``: into host memory (the
        drive's DMA writes them, sharing the DRAM), or with ``direct`` (GPUDirect Storage) straight into the GPU
        across its PCIe link."""
        machine = self.machine_of(rank)
        last = self.pcie_h2d[rank] if direct else self.host_memory[machine]
        return self.transfer((self.storage[machine], last), nbytes, latency_s)

    def gpu_to_gpu(self, src: int, dst: int, nbytes: float, num_messages: int = 1,
                   collective: bool = False, count: int = 1) -> simpy.Event:
        """Copy between two GPUs of one machine: NVLink if present, else PCIe peer to peer.

        ``num_messages`` back-to-back messages pay the latency that many times (e.g. the steps of a ring). On
        ``nvlink.topology = pairwise`` a copy also crosses the direct link of its pair (:meth:`nvlink_pair`,
        ``bandwidth / (g - 1)``), unless it is a ``collective``'s step: NCCL builds one ring per set of links
        (channels), so a collective uses all of a GPU's links at once (module docstring).
        """
        nvlink = self.cluster.nvlink
        path: tuple[FluidResource, ...]
        if nvlink is not None:
            path = (self.nvlink_tx[src], self.nvlink_rx[dst])
            if nvlink.topology == "pairwise" and not collective:
                path += (self.nvlink_pair(src, dst),)
            return self.transfer(path, nbytes, num_messages * nvlink.latency_s, count)
        path = (self.pcie_d2h[src], self.pcie_h2d[dst])
        if self.uplink_h2d and self.uplink_of(src) != self.uplink_of(dst):  # peer to peer via the root complex
            path += (self.uplink_d2h[self.uplink_of(src)], self.uplink_h2d[self.uplink_of(dst)])
        return self.transfer(path, nbytes, num_messages * self.cluster.pcie.latency_s, count)

    def nvlink_pair(self, src: int, dst: int) -> FluidResource:
        """The direct NVLink from GPU ``src`` to GPU ``dst`` of its machine on a ``pairwise`` topology: the GPU's
        links split evenly among its ``g - 1`` peers, ``nvlink.bandwidth_bytes_per_s / (g - 1)`` per direction
        (created on first use)."""
        g = self.cluster.gpus_per_machine
        back = src % g - src % g % self.gpu_shift  # the pair's image among the simulated GPUs (fold_gpus)
        key = (src - back, dst - dst % g + (dst % g - back) % g)
        if key not in self._nvlink_pairs:
            assert self.cluster.nvlink is not None  # callers check; not user input
            share = self.cluster.nvlink.bandwidth_bytes_per_s / max(1, g - 1)
            self._nvlink_pairs[key] = FluidResource(f"gpu{key[0]}-gpu{key[1]}.nvlink", share * self.gpu_copies)
        return self._nvlink_pairs[key]

    def nic_of(self, rank: int) -> int:
        """Index (within its machine) of the NIC worker ``rank``'s GPU sends and receives through: local GPU
        ``l`` of ``g`` uses NIC ``floor(l * nics_per_machine / g)``
        (:func:`~simulator.hardware.collectives.nic_index`)."""
        g = self.cluster.gpus_per_machine
        return nic_index(rank % g, g, self.cluster.network.nics_per_machine)

    def _nics(self, src_machine: int, dst_machine: int, rail: int) -> tuple[FluidResource, FluidResource]:
        n = self.cluster.network.nics_per_machine
        return self.nic_tx[src_machine * n + rail], self.nic_rx[dst_machine * n + rail]

    def network(self, src_machine: int, dst_machine: int, nbytes: float, num_messages: int = 1,
                rail: int | None = None) -> simpy.Event:
        """Send over the network from one machine's NIC to another's (``num_messages`` latencies).

        With ``rail`` the bytes leave through NIC ``rail`` of the sender and arrive at NIC ``rail`` of the
        receiver (a worker's own traffic: ``rail = nic_of(rank)``; a rail-optimised fabric keeps NIC k's
        traffic on rail k). Without it the bytes are striped evenly over all ``network.nics_per_machine``
        rails, one flow per rail (traffic of the machine as a whole).
        """
        latency_s = num_messages * self.cluster.network.latency_s
        if rail is not None:
            return self.transfer(self._nics(src_machine, dst_machine, rail), nbytes, latency_s)
        n = self.cluster.network.nics_per_machine
        if n == 1:
            return self.transfer(self._nics(src_machine, dst_machine, 0), nbytes, latency_s)
        return self.engine.all_of(self.transfer(self._nics(src_machine, dst_machine, k), nbytes / n, latency_s)
                                  for k in range(n))

    def gpu_network(self, src: int, dst: int, nbytes: float, num_messages: int = 1,
                    store_and_forward: bool = False, count: int = 1) -> simpy.Event:
        """Send ``nbytes`` from GPU ``src`` to GPU ``dst`` of another machine, each through its own NIC
        (:meth:`nic_of`), ``num_messages`` network latencies.

        With ``network.gpudirect_rdma`` the NICs read and write GPU memory directly: the flow crosses the two
        NICs only. Without it the bytes are staged through host memory: the flow also crosses the sender's
        device-to-host path and the receiver's host-to-device path (GPU link, PCIe switch uplink, host memory:
        :meth:`gpu_to_host`, :meth:`host_to_gpu`). The staging is pipelined in chunks (NCCL's network transport
        keeps its buffers in host memory, written and read by the GPU's kernels while the NIC moves earlier
        chunks), so it costs the bandwidth of those resources, shared with every other flow on them, and no
        latency of its own. A CPU-only cluster's "GPU" memory already is host memory: NICs only.

        Source: NVIDIA GPUDirect RDMA documentation ("direct data exchange between GPUs and a third-party peer
        device using PCI Express", no bounce buffer in host memory); NCCL environment variables
        ``NCCL_NET_GDR_LEVEL`` / ``NCCL_NET_GDR_READ`` (NCCL user guide), which select GPU or host memory for the
        network buffers. [simplification] With GPUDirect RDMA the NIC's DMA still crosses the GPU's own PCIe
        link to their common switch; it is not counted (one x16 link outruns one NIC's share in every catalogue
        machine).

        With ``store_and_forward`` a staged message is three transfers one after the other, each paying its own
        latencies: :meth:`gpu_to_host` of the sender, the NICs, :meth:`host_to_gpu` of the receiver (a program that
        copies to host memory and sends from there itself, e.g. NeutronStar's MPI sends driven by CPU threads,
        brief ../shared/papers/neutronstar.md §1.9); alone it takes
        :func:`~simulator.hardware.pricing.exchange_s`. With GPUDirect RDMA (or CPU-only) it is the NICs alone
        either way. ``count``: identical messages at once (:meth:`transfer`).
        """
        n = self.cluster.network.nics_per_machine
        src_nic = self.nic_tx[self.machine_of(src) * n + self.nic_of(src)]
        dst_nic = self.nic_rx[self.machine_of(dst) * n + self.nic_of(dst)]
        path: tuple[FluidResource, ...] = (src_nic, dst_nic)
        latency_s = num_messages * self.cluster.network.latency_s
        if not (self.cluster.network.gpudirect_rdma or self.cluster.gpu.is_host_cpu):
            if store_and_forward:
                return self.engine.process(self._store_and_forward(src, dst, path, nbytes, num_messages, count))
            path = self._d2h_path[src] + path + self._h2d_path[dst]
        return self.transfer(path, nbytes, latency_s, count)

    def _store_and_forward(self, src: int, dst: int, nics: tuple[FluidResource, ...], nbytes: float,
                           num_messages: int, count: int = 1) -> Generator[simpy.Event, Any, None]:
        yield self.gpu_to_host(src, nbytes, num_messages, count)
        yield self.transfer(nics, nbytes, num_messages * self.cluster.network.latency_s, count)
        yield self.host_to_gpu(dst, nbytes, num_messages, count)

    def all_reduce(self, rank: int, nbytes: float, ddp: bool = False) -> Generator[simpy.Event, Any, None]:
        """Worker ``rank``'s part of a hierarchical ring all-reduce of ``nbytes``; use with ``yield from`` once
        every worker has arrived (e.g. at a :class:`~simulator.engine.Rendezvous`).

        Reduce-scatter inside the machine (NVLink, else PCIe through the host: ``(g-1)/g * nbytes`` in ``g-1``
        steps), ring all-reduce across machines of this GPU's ``1/g`` shard (``2 (m-1)/m * nbytes / g`` from this
        GPU to the same GPU of the next machine in ``2 (m-1)`` steps, :meth:`gpu_network`: through the GPU's NIC,
        staged through host memory without GPUDirect RDMA), all-gather inside the machine; first the call's fixed cost
        (:func:`~simulator.hardware.pricing.collective_s`), and for a DDP bucket (``ddp``) the reducer's
        ``network.ddp_per_bucket_s``. Uncontended, its time equals :func:`~simulator.hardware.pricing.all_reduce_s`
        (:func:`~simulator.hardware.pricing.ddp_all_reduce_s`). Source: Patarasuk and Yuan,
        "Bandwidth optimal all-reduce algorithms", JPDC 69(2), 2009 (ring); the hierarchical form is NCCL's
        tree/ring across nodes (Jeaugey, GTC 2017).
        """
        g, m = self.cluster.gpus_per_machine, self.cluster.num_machines
        machine, local = divmod(rank, g)
        peer = machine * g + (local + 1) % g
        fixed_s = pricing.collective_s(self.cluster, nbytes)
        if ddp:
            fixed_s += pricing.ddp_bucket_s(self.cluster, nbytes)
        if fixed_s > 0:  # the call's fixed costs (network.per_collective_s, DDP's) before its first message
            yield self.engine.timeout(fixed_s)
        if g > 1:
            yield self.gpu_to_gpu(rank, peer, (g - 1) / g * nbytes, num_messages=g - 1, collective=True)
        if m > 1:
            yield self.gpu_network(rank, ((machine + 1) % m) * g + local, 2.0 * (m - 1) / m * nbytes / g,
                                   num_messages=2 * (m - 1))
        if g > 1:
            yield self.gpu_to_gpu(rank, peer, (g - 1) / g * nbytes, num_messages=g - 1, collective=True)

    def host_work(self, machine: int, core_seconds: float, max_cores: float = 1.0) -> simpy.Event:
        """Run ``core_seconds`` of CPU work on a machine's cores, using at most ``max_cores`` at a time."""
        return self._flow((self.host_cores[machine],), core_seconds, cap=max_cores)

    def sample(self, machine: int, num_edges: float, num_calls: float = 0.0) -> simpy.Event:
        """Sample (or build blocks of) ``num_edges`` neighbour edges in ``num_calls`` sampler calls on one of a
        machine's cores (:func:`~simulator.hardware.pricing.sampling_s` core-seconds, sharing the cores with
        other host work)."""
        return self.host_work(machine, pricing.sampling_s(self.cluster, num_edges, num_calls=num_calls))

    def sampler_handoff(self, rank: int, num_batches: float = 1.0) -> Generator[simpy.Event, Any, None]:
        """Worker ``rank``'s trainer takes ``num_batches`` sampled batches from its sampler processes
        (:func:`~simulator.hardware.pricing.sampler_handoff_s`, host work on one of its machine's cores, sharing
        them with the samplers); nothing when the hand-off is not modelled (0 s). Use with ``yield from``."""
        seconds = pricing.sampler_handoff_s(self.cluster, num_batches)
        if seconds > 0:
            yield self.host_work(self.machine_of(rank), seconds)

    def host_gather(self, nbytes: float, rank: int | None = None) -> simpy.Event:
        """Gather ``nbytes`` of rows from host memory for worker ``rank``: a flow of
        ``GATHER_TRAFFIC * nbytes / efficiency.gather_fraction`` bytes (each row read and written,
        :data:`~simulator.hardware.formulas.GATHER_TRAFFIC`) on its machine's host memory, shared with the machine's
        other gathers and copies; alone it takes :func:`~simulator.hardware.pricing.host_gather_s`. Without
        ``rank`` the gather shares nothing (a timeout of that length)."""
        if rank is None:
            return self.engine.timeout(pricing.host_gather_s(self.cluster, nbytes))
        return self._flow((self.host_memory[self.machine_of(rank)],),
                          GATHER_TRAFFIC * nbytes / self.cluster.efficiency.gather_fraction)

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
