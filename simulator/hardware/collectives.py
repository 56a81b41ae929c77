"""Closed-form alpha-beta costs of collectives (ring all-reduce, hierarchical all-reduce, all-to-all).

Notation: ``p`` ranks, ``n`` bytes per rank, link bandwidth ``B`` (bytes/s) and latency ``alpha`` (s).

* ring all-reduce = reduce-scatter + all-gather, each ``p - 1`` steps of ``n / p`` bytes:
  ``2 (p-1)/p * n / B + 2 (p-1) alpha``. Source: Thakur, Rabenseifner and Gropp, "Optimization of collective
  communication operations in MPICH", IJHPCA 19(1), 2005, §4.5 (ring / Rabenseifner all-reduce cost).
* hierarchical all-reduce on ``m`` machines x ``g`` GPUs: ring reduce-scatter inside each machine (NVLink, or
  PCIe through the host without NVLink), ring all-reduce of each GPU's ``n / g`` shard across machines (the
  ``g`` shards of a machine share its NIC, so the machine moves ``2 (m-1)/m * n`` bytes), ring all-gather
  inside: ``2 (g-1)/g * n / B_in + 2 (g-1) alpha_in + 2 (m-1)/m * n / B_net + 2 (m-1) alpha_net``. Source:
  Jia et al., "Highly scalable deep learning training system with mixed-precision", arXiv:1807.11205, 2018,
  §3.3 (hierarchical all-reduce); NCCL's tree/ring hierarchy follows the same structure.
  Across machines each GPU's shard goes through its own NIC (``network.nics_per_machine``; the machine's
  ``g`` shards share its NICs) and, without GPUDirect RDMA, is staged through host memory (PCIe out and in).
* all-to-all by pairwise exchange, ``p - 1`` steps each sending ``n / p`` bytes:
  ``(p-1) alpha + (p-1)/p * n / B``. Source: Thakur, Rabenseifner and Gropp 2005, §4.7 (pairwise exchange).
"""

from __future__ import annotations

from gnnplan.simulator.hardware.spec import ClusterSpec, LinkSpec


def ring_all_reduce_time_s(nbytes: float, num_ranks: int, bandwidth_bytes_per_s: float, latency_s: float) -> float:
    """Ring all-reduce of ``nbytes`` per rank: ``2 (p-1)/p * n / B + 2 (p-1) alpha`` (0 for one rank).

    Source: Thakur, Rabenseifner and Gropp, IJHPCA 2005, §4.5.
    """
    if num_ranks <= 1 or nbytes <= 0:
        return 0.0
    p = num_ranks
    return 2.0 * (p - 1) / p * nbytes / bandwidth_bytes_per_s + 2.0 * (p - 1) * latency_s


def ring_all_reduce_bytes(nbytes: float, num_ranks: int) -> float:
    """Bytes each rank sends in a ring all-reduce: ``2 (p-1)/p * n``."""
    return 0.0 if num_ranks <= 1 else 2.0 * (num_ranks - 1) / num_ranks * nbytes


def intra_machine_link(cluster: ClusterSpec) -> tuple[LinkSpec, str]:
    """The link GPUs of one machine talk over: (NVLink, ``"nvlink"``) if present, else (PCIe, ``"pcie"``)."""
    if cluster.nvlink is not None:
        return cluster.nvlink, "nvlink"
    return cluster.pcie, "pcie"


def peer_bandwidth_bytes_per_s(cluster: ClusterSpec, num_peers: float = 1.0) -> float:
    """Bandwidth of one GPU's copy to ``num_peers`` GPUs of its machine at once (bytes split evenly among them).

    NVSwitch (``nvlink.topology = nvswitch``): the GPU's full NVLink bandwidth whatever the peers; ``pairwise``
    direct links: ``min(num_peers, g - 1) / (g - 1)`` of it (one direct link per peer); no NVLink: the PCIe
    link (peer to peer through the PCIe switch). Source: NVIDIA DGX A100 system architecture (NVSwitch: any
    GPU pair at 600 GB/s bidirectional); HGX A100 4-GPU (four of twelve NVLinks to each of three peers).
    """
    link, kind = intra_machine_link(cluster)
    if kind == "nvlink" and cluster.nvlink is not None and cluster.nvlink.topology == "pairwise":
        others = max(1, cluster.gpus_per_machine - 1)
        return link.bandwidth_bytes_per_s * min(max(num_peers, 1.0), others) / others
    return link.bandwidth_bytes_per_s


def nic_index(local_gpu: int, gpus_per_machine: int, nics_per_machine: int) -> int:
    """The NIC (within its machine) local GPU ``local_gpu`` sends and receives through: ``floor(local_gpu *
    nics / gpus)``, consecutive GPUs sharing a NIC when there are fewer NICs than GPUs (DGX A100: GPU i behind
    the PCIe switch of NIC i; NVIDIA DGX A100 User Guide, network ports mlx5_0..7)."""
    return local_gpu * nics_per_machine // gpus_per_machine


def uplink_index(local_gpu: int, gpus_per_machine: int, gpus_per_uplink: int) -> int:
    """The PCIe switch uplink (within its machine) local GPU ``local_gpu`` sits behind: consecutive local GPUs
    share one, ``min(gpus_per_uplink, gpus_per_machine)`` of them (:class:`~simulator.hardware.spec.PcieSpec`;
    NVIDIA DGX A100 system topology: four PCIe Gen4 switches, two GPUs behind each x16 uplink)."""
    return local_gpu // min(gpus_per_uplink, gpus_per_machine)


def gpus_per_nic(cluster: ClusterSpec) -> int:
    """The most GPUs of one machine sending through the same NIC (:func:`nic_index`)."""
    g, n = cluster.gpus_per_machine, cluster.network.nics_per_machine
    counts = [0] * n
    for local in range(g):
        counts[nic_index(local, g, n)] += 1
    return max(counts)


def staged_network(cluster: ClusterSpec) -> bool:
    """Whether a GPU's network transfer is staged through host memory: no GPUDirect RDMA
    (``network.gpudirect_rdma``) on a cluster with GPUs (a CPU-only worker's memory is host memory)."""
    return not (cluster.network.gpudirect_rdma or cluster.gpu.is_host_cpu)


def gpu_network_rate_bytes_per_s(cluster: ClusterSpec) -> float:
    """Rate of each GPU's flow when every GPU sends to the same GPU of another machine at once (the step across
    machines of a hierarchical all-reduce), as the simulator's max-min sharing gives it: its NIC's bandwidth
    over the GPUs sharing the NIC and, when staged through host memory (:func:`staged_network`), at most its
    PCIe link, its switch uplink's share and the host memory's share (the machine's ``g`` outgoing and ``g``
    incoming copies cross one host memory).
    """
    rate = cluster.network.bandwidth_bytes_per_s / gpus_per_nic(cluster)
    if staged_network(cluster):
        g, pcie = cluster.gpus_per_machine, cluster.pcie
        rate = min(rate, pcie.bandwidth_bytes_per_s, pcie.uplink_bytes_per_s / min(pcie.gpus_per_uplink, g),
                   cluster.host.memory_bandwidth_bytes_per_s / (2 * g))
    return rate


def hierarchical_all_reduce_time_s(nbytes: float, cluster: ClusterSpec) -> float:
    """All-reduce of ``nbytes`` per GPU over the whole cluster (hierarchical when ``gpus_per_machine > 1``).

    Reduces to the flat ring all-reduce over the network for one GPU per machine, and over NVLink (or PCIe)
    for one machine. Across machines each GPU's shard moves at :func:`gpu_network_rate_bytes_per_s` (its NIC
    shared by the GPUs affine to it; staged through host memory without GPUDirect RDMA). Source: see module
    docstring (Jia et al. 2018, §3.3; Thakur et al. 2005, §4.5).
    """
    g, m = cluster.gpus_per_machine, cluster.num_machines
    intra, _ = intra_machine_link(cluster)
    inside = ring_all_reduce_time_s(nbytes, g, intra.bandwidth_bytes_per_s, intra.latency_s)
    across = 0.0
    if m > 1 and nbytes > 0:
        shard = 2.0 * (m - 1) / m * nbytes / g
        across = shard / gpu_network_rate_bytes_per_s(cluster) + 2.0 * (m - 1) * cluster.network.latency_s
    return inside + across


def hierarchical_all_reduce_bytes(nbytes: float, num_machines: int, gpus_per_machine: int) -> tuple[float, float]:
    """Bytes one GPU sends in a hierarchical all-reduce of ``nbytes``: (within its machine, across machines) = (a
    ring over the machine's ``g`` GPUs, ``2 (g-1)/g * n``; a ring over the ``m`` machines on a ``1/g`` shard,
    ``2 (m-1)/m * n/g``); their sum is the flat ring's ``2 (p-1)/p * n`` (:func:`ring_all_reduce_bytes`)."""
    g = gpus_per_machine
    return ring_all_reduce_bytes(nbytes, g), ring_all_reduce_bytes(nbytes / g, num_machines)


def all_reduce_link_bytes(nbytes: float, cluster: ClusterSpec) -> dict[str, float]:
    """Bytes one GPU puts on each link kind in a hierarchical all-reduce of ``nbytes``.

    Returns:
        ``{"nvlink" or "pcie": intra-machine bytes, "network": inter-machine bytes}`` (per GPU, sent): the bytes
        the collective moves between GPUs, as the executor counts them. Without GPUDirect RDMA the communication
        library also stages the inter-machine bytes through host memory; that staging shares the PCIe links in
        the simulated time (:meth:`~simulator.hardware.model.HardwareModel.gpu_network`) but is not counted here.
    """
    within, across = hierarchical_all_reduce_bytes(nbytes, cluster.num_machines, cluster.gpus_per_machine)
    return {intra_machine_link(cluster)[1]: within, "network": across}


def all_to_all_time_s(nbytes: float, num_ranks: int, bandwidth_bytes_per_s: float, latency_s: float) -> float:
    """All-to-all where each rank holds ``nbytes`` split evenly among all ranks: pairwise exchange,
    ``(p-1) alpha + (p-1)/p * n / B`` (0 for one rank).

    Source: Thakur, Rabenseifner and Gropp, IJHPCA 2005, §4.7.
    """
    if num_ranks <= 1 or nbytes <= 0:
        return 0.0
    p = num_ranks
    return (p - 1) * latency_s + (p - 1) / p * nbytes / bandwidth_bytes_per_s
