"""Priced operations inside one machine: its links (the host<->GPU path over PCIe and its switch, peer copies over
NVLink or PCIe), storage reads, gathers from host and device memory, and the loads built of them (a batch of stored
rows, a mini-batch's input features), alone or beside what the machine's other GPUs move at the same time.

Part of the pricing layer: :mod:`gnnplan.simulator.hardware.pricing` lists every formula with its source, holds the
network, compute and fixed-cost prices and the registry calibration fits through (``OPERATIONS``), and re-exports
these functions, so callers use ``pricing.<name>`` for all of them.
"""

from __future__ import annotations

from gnnplan.simulator.hardware.collectives import intra_machine_link, peer_bandwidth_bytes_per_s
from gnnplan.simulator.hardware.formulas import gather_time_s, memory_traffic_time_s
from gnnplan.simulator.hardware.spec import ClusterSpec, LinkSpec


def link_s(link: LinkSpec, nbytes: float, num_messages: float = 1.0) -> float:
    """Alpha-beta time of ``num_messages`` back-to-back messages carrying ``nbytes`` in all (0 for no bytes)."""
    return 0.0 if nbytes <= 0 else num_messages * link.latency_s + nbytes / link.bandwidth_bytes_per_s


def bandwidth_s(link: LinkSpec, nbytes: float) -> float:
    """The bandwidth term of :func:`link_s` alone, ``nbytes / bandwidth_bytes_per_s`` (for a caller that prices
    the messages' latencies itself)."""
    return nbytes / link.bandwidth_bytes_per_s


def pcie_path_bandwidth_bytes_per_s(cluster: ClusterSpec, sharers: int = 1) -> float:
    """Bytes per second one GPU's host<->GPU copy gets while ``sharers`` GPUs of its machine (consecutive local
    ids, the GPU among them) copy in the same direction at once: the slowest of its PCIe link, its share of its
    switch uplink (``min(sharers, pcie.gpus_per_uplink)`` GPUs on it) and its share of the host memory
    (``sharers`` copies on it): ``min(pcie, uplink / min(s, u), host memory / s)``.

    Source: the max-min fair rate of equal flows on a shared path (Bertsekas and Gallager, "Data Networks",
    1992, §6.5.2); the path is :class:`~gnnplan.simulator.hardware.spec.PcieSpec`'s.

    Raises:
        ValueError: ``sharers`` outside 1 .. ``gpus_per_machine``.
    """
    if not 1 <= sharers <= cluster.gpus_per_machine:
        raise ValueError(f"sharers: must be in 1..gpus_per_machine ({cluster.gpus_per_machine}), got {sharers}")
    pcie = cluster.pcie
    on_uplink = min(sharers, pcie.gpus_per_uplink)
    return min(pcie.bandwidth_bytes_per_s, pcie.uplink_bytes_per_s / on_uplink,
               cluster.host.memory_bandwidth_bytes_per_s / sharers)


def host_to_gpu_s(cluster: ClusterSpec, nbytes: float, num_messages: float = 1.0, sharers: int = 1) -> float:
    """Copy host memory to one GPU (host-to-device) in ``num_messages`` copies while ``sharers`` GPUs of the
    machine copy at once: ``num_messages * pcie.latency_s + nbytes / pcie_path_bandwidth_bytes_per_s``."""
    if nbytes <= 0:
        return 0.0
    return num_messages * cluster.pcie.latency_s + nbytes / pcie_path_bandwidth_bytes_per_s(cluster, sharers)


def host_to_gpu_shared_s(cluster: ClusterSpec, nbytes: float, uplink_bytes: float, memory_bytes: float,
                         num_messages: float = 1.0) -> float:
    """Copy ``nbytes`` of host memory to one GPU while copies to other GPUs of the machine share its path:
    ``num_messages * pcie.latency_s + max(nbytes / pcie, uplink_bytes / uplink, memory_bytes / host memory)``,
    where ``uplink_bytes`` and ``memory_bytes`` are the bytes that cross its switch uplink and the host memory
    until it ends, its own included. Copies that start together share each link equally (processor sharing), so
    a copy ends once every link has carried its own bytes and, of each other copy, as many as its own or that
    copy's whole if smaller (the caller sums those). With ``sharers`` equal copies this is :func:`host_to_gpu_s`.
    Source: the max-min fair rate of flows on a shared path (Bertsekas and Gallager, "Data Networks", 1992,
    §6.5.2)."""
    if nbytes <= 0:
        return 0.0
    pcie = cluster.pcie
    return num_messages * pcie.latency_s + max(nbytes / pcie.bandwidth_bytes_per_s,
                                               uplink_bytes / pcie.uplink_bytes_per_s,
                                               memory_bytes / cluster.host.memory_bandwidth_bytes_per_s)


def gpu_to_host_s(cluster: ClusterSpec, nbytes: float, num_messages: float = 1.0, sharers: int = 1) -> float:
    """Copy one GPU's memory to the host (device-to-host), priced as :func:`host_to_gpu_s`."""
    return host_to_gpu_s(cluster, nbytes, num_messages, sharers)


def gpu_to_gpu_s(cluster: ClusterSpec, nbytes: float, num_messages: float = 1.0, num_peers: float = 1.0) -> float:
    """Copy ``nbytes`` from one GPU to ``num_peers`` GPUs of its machine at once (split evenly): NVLink if
    present, else PCIe peer to peer (one leg priced), at
    :func:`~simulator.hardware.collectives.peer_bandwidth_bytes_per_s` (NVSwitch: the full rate to any peer;
    pairwise NVLink: one direct link per peer)."""
    if nbytes <= 0:
        return 0.0
    link = intra_machine_link(cluster)[0]
    return num_messages * link.latency_s + nbytes / peer_bandwidth_bytes_per_s(cluster, num_peers)


def storage_read_s(cluster: ClusterSpec, nbytes: float, num_reads: float = 1.0) -> float:
    """Read ``nbytes`` from a machine's storage device in ``num_reads`` requests."""
    return link_s(cluster.storage, nbytes, num_reads)


def storage_reads_s(cluster: ClusterSpec, nbytes: float, num_reads: float, in_flight: float = 1.0,
                    sharers: float = 1.0, direct: bool = False, peer_bytes: float = 0.0) -> float:
    """Read ``nbytes`` in ``num_reads`` requests, each reader keeping ``in_flight`` requests outstanding and
    ``sharers`` readers issuing at once: the device serves ``min(in_flight * sharers, storage.concurrency)``
    requests at once, so one reader's requests cost ``num_reads * storage.latency_s / depth`` with
    ``depth = min(in_flight * sharers, concurrency) / sharers``, plus ``nbytes`` at the storage bandwidth
    (with ``direct`` GPUDirect reads, at the slower of storage and PCIe: the bytes cross both at once), and
    ``peer_bytes``, what other GPUs of the machine read from the device meanwhile (processor sharing of its
    bandwidth; the caller weighs them).

    Source: Little's law, throughput = requests in service / latency (Little, "A proof for the queuing formula
    L = lambda W", Operations Research 9(3), 1961); NVMe devices serve up to their queue depth at once (Samsung
    PM9A3 product brief, rated IOPS at QD32), which ``storage.concurrency`` measures (``gnnplan probe``).
    """
    if num_reads <= 0 and nbytes <= 0:
        return 0.0
    depth = min(in_flight * sharers, cluster.storage.concurrency) / sharers
    rate = cluster.storage.bandwidth_bytes_per_s
    if direct:
        rate = min(rate, cluster.pcie.bandwidth_bytes_per_s)
    return num_reads * cluster.storage.latency_s / depth + (nbytes + peer_bytes) / rate


def row_indexing_s(cluster: ClusterSpec, num_items: float) -> float:
    """A per-row loader indexing ``num_items`` rows (one per row and matrix: ``Dataset.__getitem__`` and
    ``default_collate``) on one host core: ``num_items * host.row_index_s`` (PP-GNN brief §2.4, ``b M t_item``)."""
    return num_items * cluster.host.row_index_s


def batch_load_s(cluster: ClusterSpec, index_items: float = 0.0, storage_bytes: float = 0.0,
                 storage_reads: float = 0.0, in_flight: float = 1.0, sharers: float = 1.0, direct: bool = False,
                 gather_bytes: float = 0.0, copy_bytes: float = 0.0, copy_messages: float = 1.0,
                 device_gather_bytes: float = 0.0, peer_storage_bytes: float = 0.0, peer_gather_bytes: float = 0.0,
                 peer_uplink_bytes: float = 0.0, peer_memory_bytes: float = 0.0) -> float:
    """Assemble one batch of stored rows and bring it to the device, step after step: per-row indexing
    (:func:`row_indexing_s`), storage reads (:func:`storage_reads_s`), a host gather (:func:`host_gather_s`), the
    host-to-device copy of ``copy_bytes`` in ``copy_messages`` transfers (alpha-beta over PCIe) and a device
    gather (:func:`gpu_gather_s`). Each term is 0 without its work (the PP-GNN brief's per-batch loading model,
    §2.4: baseline, custom, chunk DMA, storage reads, GPU-resident). The ``peer_*`` bytes are what the machine's
    other GPUs move meanwhile on the storage device, the host memory's gathers, and the copies' switch uplink and
    host memory (processor sharing, as :func:`feature_load_s`; the copy then over its path,
    :func:`host_to_gpu_shared_s`)."""
    out = row_indexing_s(cluster, index_items)
    if storage_reads > 0 or storage_bytes > 0:
        out += storage_reads_s(cluster, storage_bytes, storage_reads, in_flight, sharers, direct, peer_storage_bytes)
    if gather_bytes > 0:
        out += gather_time_s(gather_bytes + peer_gather_bytes, cluster.host.memory_bandwidth_bytes_per_s,
                             cluster.efficiency.gather_fraction)
    if copy_bytes > 0 and (peer_uplink_bytes > 0 or peer_memory_bytes > 0):
        out += host_to_gpu_shared_s(cluster, copy_bytes, copy_bytes + peer_uplink_bytes,
                                    copy_bytes + peer_memory_bytes, copy_messages)
    elif copy_bytes > 0:
        out += link_s(cluster.pcie, copy_bytes, copy_messages)
    if device_gather_bytes > 0:
        out += gpu_gather_s(cluster, device_gather_bytes)
    return out


def host_gather_s(cluster: ClusterSpec, nbytes: float, sharers: int = 1) -> float:
    """Gather ``nbytes`` of rows (the gathered bytes) from host memory (memory-bound ``index_select``) while
    ``sharers`` workers of the machine gather as much at once: :func:`~simulator.hardware.formulas.gather_time_s`
    of ``sharers * nbytes`` at ``host.memory_bandwidth_bytes_per_s`` and ``efficiency.gather_fraction`` (the
    machine's gathers share its DRAM; each gathered byte is read and written)."""
    return gather_time_s(sharers * nbytes, cluster.host.memory_bandwidth_bytes_per_s,
                         cluster.efficiency.gather_fraction)


def host_memory_traffic_s(cluster: ClusterSpec, traffic_bytes: float) -> float:
    """A memory-bound host operation on rows other than a gather (HongTu's CPU scatter-add of gradient rows) that
    moves ``traffic_bytes`` (bytes read plus written): :func:`~simulator.hardware.formulas.memory_traffic_time_s`
    at ``host.memory_bandwidth_bytes_per_s`` and ``efficiency.gather_fraction`` (the achieved fraction of the
    host's row operations; a gather of ``nbytes`` is this at ``GATHER_TRAFFIC * nbytes``: :func:`host_gather_s`)."""
    return memory_traffic_time_s(traffic_bytes, cluster.host.memory_bandwidth_bytes_per_s,
                                 cluster.efficiency.gather_fraction)


def gpu_gather_s(cluster: ClusterSpec, nbytes: float) -> float:
    """Gather ``nbytes`` of rows (the gathered bytes) from GPU memory (e.g. feature-cache hits):
    :func:`~simulator.hardware.formulas.gather_time_s` at ``gpu.memory_bandwidth_bytes_per_s``."""
    return gather_time_s(nbytes, cluster.gpu.memory_bandwidth_bytes_per_s, cluster.efficiency.gather_fraction)


def feature_load_s(cluster: ClusterSpec, local_bytes: float, remote_bytes: float, hit_bytes: float,
                   fetch_s: float = 0.0, peer_gather_bytes: float = 0.0, peer_uplink_bytes: float = 0.0,
                   peer_memory_bytes: float = 0.0) -> float:
    """Load a batch's input features step after step, as the executor's ``FeatureStore.load``: the GPU gather of
    ``hit_bytes`` cache hits, the host gather of ``local_bytes``, the remote fetch (``fetch_s``, measured
    seconds), then the host-to-GPU copy of every miss, ``local_bytes + remote_bytes`` (the executor does not
    overlap the gather with the fetch); seconds.

    What the machine's other GPUs load at the same time shares its host memory and PCIe path, given by the bytes
    they contend with this load: ``peer_gather_bytes`` gathered from the host memory while this gather runs,
    ``peer_uplink_bytes`` and ``peer_memory_bytes`` copied across its switch uplink and the host memory while this
    copy runs (each other load's bytes up to this one's: processor sharing, :func:`host_to_gpu_shared_s`;
    calibration's :func:`~gnnplan.simulator.strategies.calibration_rules.load_rule` measures them from the trace;
    ``g`` equal loads at once are ``g - 1`` times this load's bytes). Without them the load is priced alone."""
    copy_bytes = local_bytes + remote_bytes
    gather_s = gather_time_s(local_bytes + peer_gather_bytes, cluster.host.memory_bandwidth_bytes_per_s,
                             cluster.efficiency.gather_fraction)
    copy_s = host_to_gpu_shared_s(cluster, copy_bytes, copy_bytes + peer_uplink_bytes, copy_bytes + peer_memory_bytes)
    return gpu_gather_s(cluster, hit_bytes) + gather_s + fetch_s + copy_s
