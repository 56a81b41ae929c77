"""Priced operations: the one place where work (bytes, edges, FLOPs, messages) becomes seconds.

Every strategy states work; the simpy processes of :class:`~gnnplan.simulator.hardware.model.HardwareModel` and
:mod:`gnnplan.simulator.calibrate` both turn it into time through the functions here, so a simulation and a fit
agree by construction. The prices of what moves inside one machine (links, storage reads, gathers, loads) live in
:mod:`~gnnplan.simulator.hardware.pricing_machine` and are re-exported here; the network, compute and fixed costs
and the registry are this module's. Each function returns the *uncontended* time (the simulator shares links and
cores among concurrent flows on top of it) unless it is told what shares them (``sharers``, or the ``peer_*`` /
``nic_bytes`` a calibration rule measures beside a span). :data:`OPERATIONS` names each one with the cluster
parameters its price depends on; a strategy's ``CALIBRATION`` maps its trace phases to these names
(:class:`~gnnplan.simulator.hardware.phase_rules.PhaseRule`), which is all calibration needs to know about a
strategy.

Formulas and sources:

* transfer over a link (PCIe, NVLink, NIC, storage): alpha-beta, ``num_messages * latency_s + nbytes /
  bandwidth_bytes_per_s``. Source: Hockney, "The communication challenge for MPP", Parallel Computing 20(3),
  1994. A host<->GPU copy's bandwidth is its path's (:func:`pcie_path_bandwidth_bytes_per_s`: the GPU's link,
  its share of its PCIe switch uplink and of the host memory when ``sharers`` GPUs of the machine copy at
  once), as the event model shares them.
* gather of rows (``index_select``) from a memory: ``2 nbytes / (memory_bandwidth_bytes_per_s *
  efficiency.gather_fraction)``: memory-bound, each gathered byte read and written
  (:data:`~simulator.hardware.formulas.GATHER_TRAFFIC`; Williams, Waterman and Patterson, "Roofline", CACM 52(4),
  2009). Another memory-bound row operation on the host (HongTu's CPU scatter-add) is priced by the bytes it
  reads and writes at the same bandwidth and fraction (:func:`host_memory_traffic_s`).
* sampling: ``(num_edges / host.sampling_edges_per_s_per_core + num_calls * host.sampler_call_s) / cores`` (DGL's
  sampler is edge-bound on one core per sampler process, plus a fixed cost per call: one call per layer).
* split (``gsplit``'s online split of a sampled batch): ``num_items / host.split_items_per_s_per_core + num_calls *
  host.split_call_s`` on one core (the owner lookup of every sampled vertex and the split plan, one call per
  layer; gsplit brief §1.4): a Python / numpy pass, priced apart from DGL's C++ sampler, whose rates differ
  (gnnplan probe on the 2-core development machine, 2026-11-28: 1.3e7 items/s and 69 us per layer, against 1.8e7
  sampled edges/s and 142 us per sampler call).
* compute of a phase: ``flops * seconds_per_flop / efficiency.<phase>_fraction + kernels *
  gpu.kernel_overhead_s + graph_ops * gpu.graph_op_overhead_s + random_elems / gpu.rng_elements_per_s`` (the DGL
  message-passing calls among the kernels, and their dropout draws when the rate is measured;
  :func:`gnnplan.simulator.hardware.formulas.compute_time_s` on a kernel list), autograd's gradient kernels among
  them at ``gpu.backward_overhead_ratio`` times the per-kernel cost
  (:func:`~gnnplan.simulator.hardware.formulas.kernel_launches`).
* all-reduce: hierarchical ring (:func:`gnnplan.simulator.hardware.collectives.hierarchical_all_reduce_time_s`)
  plus ``network.per_collective_s`` once per call on a multi-worker cluster (the backend's fixed cost of a
  collective beyond its messages' latencies: dispatch, algorithm set-up, completion wait).
* sampler hand-off: ``num_batches * host.sampler_handoff_s``, what a trainer spends taking a batch from a
  sampler process (PyTorch DataLoader: queue get, then unpickling every tensor of the blocks through a
  shared-memory file descriptor fetched from the sender; torch.multiprocessing "file_descriptor" sharing
  strategy, torch/multiprocessing/reductions.py ``rebuild_storage_fd``).
* fixed per-iteration cost: ``steps * iteration_overhead_s + sampler hand-off`` (:func:`iteration_fixed_s`).
* feature fetch (a pull of remote rows, DistDGL KVStore style): ``(request_messages + 1) * network.latency_s +
  num_collectives * network.per_all_to_all_s + max(1, sharers / nics_per_machine) * nbytes /
  network.bandwidth_bytes_per_s``: the requests, then the rows back, ``sharers`` workers of the machine pulling
  at once, each through its own NIC; when the pull is made of collective calls (the executor's
  ``RowStore.pull``: three ``all_to_all`` calls, counts, ids, rows), each call's fixed cost (:func:`collective_s`
  of an all-to-all: ``network.per_all_to_all_s``, which gloo's all-to-all and all-reduce do not share).
* peer copy inside a machine: alpha-beta at the pair's bandwidth (NVSwitch: the GPU's full NVLink rate; pairwise
  NVLink: one direct link, ``bandwidth / (g - 1)``; no NVLink: PCIe peer to peer).
* feature load: ``GPU gather of cache hits + host gather of local rows + fetch_s + host-to-GPU copy of local +
  remote rows``, the gather and the copy sharing the host memory and PCIe path with the machine's other loads
  (:func:`feature_load_s`).
* exchange (per-layer representations or gradients between workers of different machines): ``steps *
  (network.latency_s + 2 pcie.latency_s) + nbytes * (1 / network bandwidth + 2 / pcie bandwidth)``: out over
  PCIe, across the network, in over PCIe; with ``network.gpudirect_rdma`` (or CPU-only) the network alone,
  ``steps * network.latency_s + nbytes / network bandwidth``.
* shuffle (``gsplit``: one all-to-all call, one message per GPU pair at once): ``per_all_to_all_s + max(gpu_to_gpu
  of the bytes inside the machine, exchange of the bytes across machines)``; it informs only the network.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gnnplan.simulator.hardware.collectives import (
    hierarchical_all_reduce_time_s,
    staged_network,
)
from gnnplan.simulator.hardware.formulas import kernel_launches
from gnnplan.simulator.hardware.pricing_machine import (
    bandwidth_s,
    batch_load_s,
    feature_load_s,
    gpu_gather_s,
    gpu_to_gpu_s,
    gpu_to_host_s,
    host_gather_s,
    host_memory_traffic_s,
    host_to_gpu_s,
    host_to_gpu_shared_s,
    link_s,
    pcie_path_bandwidth_bytes_per_s,
    row_indexing_s,
    storage_read_s,
    storage_reads_s,
)
from gnnplan.simulator.hardware.spec import ClusterSpec

__all__ = [
    "all_reduce_s",
    "bandwidth_s",
    "barrier_s",
    "batch_load_s",
    "collective_s",
    "compute_s",
    "ddp_all_reduce_s",
    "ddp_bucket_s",
    "exchange_per_byte_s",
    "exchange_s",
    "feature_fetch_s",
    "feature_load_s",
    "flows_per_nic",
    "full_sampling_s",
    "gpu_gather_s",
    "gpu_to_gpu_s",
    "gpu_to_host_s",
    "host_gather_s",
    "host_memory_traffic_s",
    "host_to_gpu_s",
    "host_to_gpu_shared_s",
    "inference_fraction",
    "iteration_fixed_s",
    "iteration_overhead_s",
    "link_s",
    "network_s",
    "pcie_path_bandwidth_bytes_per_s",
    "phase_compute_s",
    "row_indexing_s",
    "sampler_handoff_s",
    "sampling_s",
    "shuffle_s",
    "split_s",
    "storage_read_s",
    "storage_reads_s",
    "OPERATIONS",
    "PricedOp",
]
"""The pricing layer's functions, its own and those of :mod:`~gnnplan.simulator.hardware.pricing_machine` it
re-exports, and the registry."""


def network_s(cluster: ClusterSpec, nbytes: float, num_messages: float = 1.0) -> float:
    """Send ``nbytes`` from one machine's NIC to another's in ``num_messages`` messages."""
    return link_s(cluster.network, nbytes, num_messages)


def sampling_s(cluster: ClusterSpec, num_edges: float, cores: float = 1.0, num_calls: float = 0.0) -> float:
    """Sample ``num_edges`` neighbour edges in ``num_calls`` sampler calls (one per layer of a batch) on ``cores``
    host cores; with ``cores=1`` also its core-seconds: ``(num_edges / host.sampling_edges_per_s_per_core +
    num_calls * host.sampler_call_s) / cores``."""
    edges_s = num_edges / (cluster.host.sampling_edges_per_s_per_core * cores)
    return edges_s + num_calls * cluster.host.sampler_call_s / cores if num_calls else edges_s


def full_sampling_s(cluster: ClusterSpec, num_edges: float, num_calls: float = 0.0) -> float:
    """Full-neighbour sampling (every in-edge: the evaluation's blocks) of ``num_edges`` edges in ``num_calls``
    calls on one core, seconds: :func:`sampling_s` at ``host.full_neighbour_sampling_ratio`` times the rate."""
    return sampling_s(cluster, num_edges / cluster.host.full_neighbour_sampling_ratio, num_calls=num_calls)


def split_s(cluster: ClusterSpec, num_items: float, num_calls: float = 0.0) -> float:
    """``gsplit``'s split of a sampled batch on one core (module docstring), seconds and core-seconds:
    ``num_items / host.split_items_per_s_per_core + num_calls * host.split_call_s``.

    Args:
        num_items: block vertices of all layers looked up and split.
        num_calls: split calls, one per layer.
    """
    return num_items / cluster.host.split_items_per_s_per_core + num_calls * cluster.host.split_call_s


def ddp_bucket_s(cluster: ClusterSpec, nbytes: float) -> float:
    """The fixed cost DDP's reducer adds to the all-reduce of one gradient bucket of ``nbytes``:
    ``network.ddp_per_bucket_s`` on a multi-worker cluster (PyTorch DistributedDataParallel: Li et al., "PyTorch
    Distributed", VLDB 13(12), 2020, §3.2.3-3.2.4: buckets, the communication hook, copying the reduced bucket back
    into the gradients)."""
    return cluster.network.ddp_per_bucket_s if cluster.num_gpus > 1 and nbytes > 0 else 0.0


def ddp_all_reduce_s(cluster: ClusterSpec, nbytes: float) -> float:
    """A DDP gradient bucket's all-reduce: :func:`all_reduce_s` plus :func:`ddp_bucket_s`."""
    return all_reduce_s(cluster, nbytes) + ddp_bucket_s(cluster, nbytes)


def all_reduce_s(cluster: ClusterSpec, nbytes: float) -> float:
    """Hierarchical ring all-reduce of ``nbytes`` per GPU over the whole cluster, plus the collective's fixed
    cost (:func:`collective_s`)."""
    return hierarchical_all_reduce_time_s(nbytes, cluster) + collective_s(cluster, nbytes)


def collective_s(cluster: ClusterSpec, nbytes: float, all_to_all: bool = False) -> float:
    """The fixed cost of one collective call of ``nbytes`` per worker when there is something to exchange
    (several workers, bytes > 0), else 0: ``network.per_all_to_all_s`` for an ``all_to_all`` call (a pull's, a
    shuffle), ``network.per_collective_s`` for any other (an all-reduce)."""
    if cluster.num_gpus <= 1 or nbytes <= 0:
        return 0.0
    return cluster.network.per_all_to_all_s if all_to_all else cluster.network.per_collective_s


def barrier_s(cluster: ClusterSpec) -> float:
    """A barrier of every worker (``torch.distributed.barrier``) once the last has arrived: a collective call
    without payload, priced at a collective call's fixed cost, ``network.per_collective_s`` [inferred: gnnplan
    probe times a 1 KiB all-reduce, not a barrier; on this machine's 2 x 1 probe hongtu's barrier waits on Cora
    exceeded the simulated ones by 0.22 ms per barrier against a probed 0.18 ms, 2026-11-29]; 0 with one
    worker."""
    return cluster.network.per_collective_s if cluster.num_gpus > 1 else 0.0


def sampler_handoff_s(cluster: ClusterSpec, num_batches: float = 1.0) -> float:
    """A trainer taking ``num_batches`` sampled batches from sampler processes (``host.sampler_handoff_s``
    each)."""
    return num_batches * cluster.host.sampler_handoff_s


def flows_per_nic(cluster: ClusterSpec, sharers: float) -> float:
    """How many of ``sharers`` equal flows of one machine (its GPUs pulling or exchanging at once) each of its
    ``network.nics_per_machine`` NICs carries, at least 1: ``max(1, sharers / nics)``; a flow's bytes take that
    many times their time alone (max-min fair shares, Bertsekas and Gallager, "Data Networks", 1992, §6.5.2)."""
    return max(1.0, sharers / cluster.network.nics_per_machine)


def feature_fetch_s(cluster: ClusterSpec, nbytes: float, request_messages: float = 2.0, sharers: float = 1.0,
                    num_collectives: float = 0.0) -> float:
    """Pull ``nbytes`` of remote rows: requests, then the rows back, ``sharers`` pullers of one machine at once,
    each through its own NIC (``network.nics_per_machine`` NICs: ``max(1, sharers / nics)`` pullers per NIC), in
    ``num_collectives`` all-to-all calls (each one message of the ``request_messages + 1``), each with its fixed
    cost (:func:`collective_s`; every call carries at least its row counts). The wait for the other workers
    before a call is not priced here: the simulator's processes produce it (a barrier per call)."""
    net = cluster.network
    per_nic = flows_per_nic(cluster, sharers)
    calls_s = num_collectives * collective_s(cluster, 1.0, all_to_all=True) if num_collectives else 0.0
    return calls_s + (request_messages + 1.0) * net.latency_s + per_nic * nbytes / net.bandwidth_bytes_per_s


def exchange_s(cluster: ClusterSpec, nbytes: float, steps: float = 1.0, sharers: float = 1.0,
               nic_bytes: float | None = None) -> float:
    """Exchange ``nbytes`` with workers of other machines in ``steps`` sequential rounds, ``sharers`` GPUs of the
    machine exchanging at once (:func:`exchange_per_byte_s`), or, given ``nic_bytes``, the bytes its NIC carries in
    that direction until it ends (its own and, of each exchange of another GPU of the machine on that NIC at the
    same time, as many as its own or that one's whole if fewer: processor sharing), the network term ``nic_bytes /
    network.bandwidth_bytes_per_s`` in place of ``sharers``' (its PCIe legs are its own). Staged through host memory
    (:func:`~simulator.hardware.collectives.staged_network`: no ``network.gpudirect_rdma`` on a cluster with GPUs),
    each message is PCIe out, network, PCIe in, one after the other: ``steps * (network.latency_s + 2
    pcie.latency_s) + nbytes * exchange_per_byte_s``; with GPUDirect RDMA (or CPU-only) the NICs alone: ``steps *
    network.latency_s + nbytes / network.bandwidth_bytes_per_s``. Alone, a message of the event model
    (:meth:`~simulator.hardware.model.HardwareModel.gpu_network` with ``store_and_forward``) takes this long."""
    if nbytes <= 0:
        return 0.0
    pcie_latency_s = 2.0 * cluster.pcie.latency_s if staged_network(cluster) else 0.0
    latency_s = steps * (cluster.network.latency_s + pcie_latency_s)
    if nic_bytes is None:
        return latency_s + nbytes * exchange_per_byte_s(cluster, sharers)
    pcie_s = 2.0 * nbytes / pcie_path_bandwidth_bytes_per_s(cluster) if staged_network(cluster) else 0.0
    return latency_s + pcie_s + nic_bytes / cluster.network.bandwidth_bytes_per_s


def exchange_per_byte_s(cluster: ClusterSpec, sharers: float = 1.0) -> float:
    """Marginal seconds per byte of an exchange between machines (:func:`exchange_s` without its latencies):
    staged through host memory, ``1 / network bandwidth + 2 / PCIe bandwidth`` (PCIe out, the network, PCIe in; a
    PCIe leg at the host<->GPU path's rate, :func:`pcie_path_bandwidth_bytes_per_s`); with GPUDirect RDMA (or
    CPU-only), ``1 / network bandwidth``. Source: NVIDIA GPUDirect RDMA documentation (the NIC reads and writes
    GPU memory, no bounce buffer in host memory). With ``sharers`` GPUs of the machine exchanging at once, each
    of its ``network.nics_per_machine`` NICs carries :func:`flows_per_nic` of them, as in
    :func:`feature_fetch_s`."""
    per_byte = flows_per_nic(cluster, sharers) / cluster.network.bandwidth_bytes_per_s
    return per_byte + 2.0 / pcie_path_bandwidth_bytes_per_s(cluster) if staged_network(cluster) else per_byte


def shuffle_s(cluster: ClusterSpec, intra_bytes: float = 0.0, network_bytes: float = 0.0,
              sharers: float = 1.0, nic_bytes: float | None = None) -> float:
    """One GPU's part of a split-aware shuffle (``gsplit``): one message to every other GPU at once, those of its
    machine over NVLink (PCIe through the host without it; ``intra_bytes``), those of other machines as an
    :func:`exchange_s` (``network_bytes``; staged through host memory unless GPUDirect RDMA, and on a CPU-only
    cluster the rows already are in host memory: the network alone); it ends with the slower of the two, after
    the collective's fixed cost (:func:`collective_s`: the shuffle is one all-to-all call). Each ``*_bytes`` is
    the larger of what the GPU sends and receives on that path; ``sharers`` GPUs of the machine shuffle at once
    (gsplit's lockstep), sharing its NICs (:func:`exchange_per_byte_s`), or its NIC carries ``nic_bytes`` until
    the GPU's bytes are across (:func:`exchange_s`)."""
    across = exchange_s(cluster, network_bytes, sharers=sharers, nic_bytes=nic_bytes)
    peers = cluster.gpus_per_machine - 1
    return collective_s(cluster, intra_bytes + network_bytes, all_to_all=True) + max(
        gpu_to_gpu_s(cluster, intra_bytes, num_peers=peers), across)


def compute_s(cluster: ClusterSpec, fraction: float, flops: float, seconds_per_flop: float, kernels: float,
              graph_ops: float = 0.0, random_elems: float = 0.0, roofline_fixed_s: float = 0.0,
              backward_kernels: float = 0.0) -> float:
    """Kernels at an achieved ``fraction`` of the roofline, seconds, from their FLOPs, their roofline seconds per
    FLOP and the roofline seconds they pay whatever their FLOPs (a profile's ``roofline_fixed_s``), their count
    and how many of them are autograd's gradient kernels, the DGL message-passing calls among them and the random
    numbers they draw: ``(roofline_fixed_s + flops * seconds_per_flop) / fraction + kernel_launches(kernels,
    backward_kernels) + graph_ops * gpu.graph_op_overhead_s + random_elems / gpu.rng_elements_per_s`` (the last
    term only when the rate is measured; :func:`~simulator.hardware.formulas.kernel_launches`)."""
    out = (roofline_fixed_s + flops * seconds_per_flop) / fraction + \
        kernel_launches(kernels, backward_kernels, cluster.gpu)
    if random_elems and cluster.gpu.rng_elements_per_s:
        out += random_elems / cluster.gpu.rng_elements_per_s
    return out + graph_ops * cluster.gpu.graph_op_overhead_s if graph_ops else out


def phase_compute_s(cluster: ClusterSpec, phase: str, flops: float, seconds_per_flop: float,
                    kernels: float, graph_ops: float = 0.0, random_elems: float = 0.0,
                    roofline_fixed_s: float = 0.0, backward_kernels: float = 0.0) -> float:
    """A compute phase (``forward``, ``backward``, ``optimizer``): :func:`compute_s` at the phase's
    ``efficiency.<phase>_fraction``."""
    return compute_s(cluster, getattr(cluster.efficiency, f"{phase}_fraction"), flops, seconds_per_flop, kernels,
                     graph_ops, random_elems, roofline_fixed_s, backward_kernels)


def inference_fraction(cluster: ClusterSpec) -> float:
    """The evaluation's achieved fraction of the roofline: ``efficiency.forward_fraction *
    efficiency.inference_ratio``."""
    return cluster.efficiency.forward_fraction * cluster.efficiency.inference_ratio


def iteration_overhead_s(cluster: ClusterSpec) -> float:
    """The fixed framework seconds per iteration (``iteration_overhead_s``)."""
    return cluster.iteration_overhead_s


def iteration_fixed_s(cluster: ClusterSpec, steps: float = 1.0, handoffs: float = 0.0) -> float:
    """An iteration's fixed seconds outside its phases: ``steps`` times ``iteration_overhead_s`` (a strategy
    paying it per training step, e.g. hopgnn) plus ``handoffs`` batches taken from sampler processes."""
    return steps * cluster.iteration_overhead_s + sampler_handoff_s(cluster, handoffs)


@dataclass(frozen=True)
class PricedOp:
    """A priced operation and the cluster parameters (dotted field paths) its price depends on and that
    calibration may fit from spans priced by it."""

    name: str
    seconds: Callable[..., float]
    params: tuple[str, ...]


_NET = ("network.bandwidth_bytes_per_s", "network.latency_s")
_PCIE = ("pcie.bandwidth_bytes_per_s", "pcie.latency_s")
_KERNEL = ("gpu.kernel_overhead_s", "gpu.graph_op_overhead_s")
_BACKWARD_KERNEL = ("gpu.backward_overhead_ratio",)
_STORAGE = ("storage.bandwidth_bytes_per_s", "storage.latency_s", "storage.concurrency")
OPERATIONS: dict[str, PricedOp] = {op.name: op for op in (
    PricedOp("host_to_gpu", host_to_gpu_s, _PCIE),
    PricedOp("gpu_to_host", gpu_to_host_s, _PCIE),
    PricedOp("gpu_to_gpu", gpu_to_gpu_s, ("nvlink.bandwidth_bytes_per_s", "nvlink.latency_s")),
    PricedOp("network", network_s, _NET),
    PricedOp("storage_read", storage_read_s, ("storage.bandwidth_bytes_per_s", "storage.latency_s")),
    PricedOp("storage_reads", storage_reads_s, _STORAGE),
    PricedOp("row_indexing", row_indexing_s, ("host.row_index_s",)),
    PricedOp("batch_load", batch_load_s, ("host.row_index_s",) + _STORAGE + _PCIE + ("efficiency.gather_fraction",)),
    PricedOp("host_gather", host_gather_s, ("efficiency.gather_fraction",)),
    PricedOp("gpu_gather", gpu_gather_s, ("efficiency.gather_fraction",)),
    PricedOp("host_memory_traffic", host_memory_traffic_s, ("efficiency.gather_fraction",)),
    PricedOp("sampling", sampling_s, ("host.sampling_edges_per_s_per_core", "host.sampler_call_s")),
    PricedOp("full_sampling", full_sampling_s,
             ("host.sampling_edges_per_s_per_core", "host.sampler_call_s", "host.full_neighbour_sampling_ratio")),
    PricedOp("split", split_s, ("host.split_items_per_s_per_core", "host.split_call_s")),
    PricedOp("all_reduce", all_reduce_s, _NET + _PCIE + ("network.per_collective_s",)),
    PricedOp("ddp_all_reduce", ddp_all_reduce_s,
             _NET + _PCIE + ("network.per_collective_s", "network.ddp_per_bucket_s")),
    PricedOp("feature_fetch", feature_fetch_s, _NET + ("network.per_all_to_all_s",)),
    PricedOp("feature_load", feature_load_s, _PCIE + ("efficiency.gather_fraction",)),
    PricedOp("exchange", exchange_s, _NET),
    PricedOp("shuffle", shuffle_s, _NET + ("network.per_all_to_all_s",)),
    PricedOp("forward", lambda cl, **w: phase_compute_s(cl, "forward", **w),
             ("efficiency.forward_fraction",) + _KERNEL),
    PricedOp("backward", lambda cl, **w: phase_compute_s(cl, "backward", **w),
             ("efficiency.backward_fraction",) + _KERNEL + _BACKWARD_KERNEL),
    PricedOp("optimizer", lambda cl, **w: phase_compute_s(cl, "optimizer", **w),
             ("efficiency.optimizer_fraction",) + _KERNEL),
    PricedOp("inference", lambda cl, **w: compute_s(cl, inference_fraction(cl), **w),
             ("efficiency.forward_fraction", "efficiency.inference_ratio") + _KERNEL),
    PricedOp("sampler_handoff", sampler_handoff_s, ("host.sampler_handoff_s",)),
    PricedOp("iteration_overhead", iteration_fixed_s, ("iteration_overhead_s", "host.sampler_handoff_s")),
)}
"""Every priced operation by name. ``exchange`` informs only the network: one span cannot tell its PCIe legs
from its network leg, and PCIe is determined by ``load`` spans. ``full_sampling`` and ``inference`` (the
evaluation's blocks) are priced at the training rates they scale, so their spans inform those too; with the ratio
free, the ratio absorbs what the training rates leave of them (tests/simulator/test_calibrate.py). A training rate
only their spans depend on is not fitted (:data:`simulator.calibrate_fit.EVALUATION_RATIOS`).
``iteration_overhead`` is the fixed cost an iteration's phases leave over (:func:`iteration_fixed_s`): its rows
inform the per-iteration overhead and, for runs with sampler processes, the hand-off (their sum; the probe's priors
tell them apart)."""
