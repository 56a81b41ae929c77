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


def hierarchical_all_reduce_time_s(nbytes: float, cluster: ClusterSpec) -> float:
    """All-reduce of ``nbytes`` per GPU over the whole cluster (hierarchical when ``gpus_per_machine > 1``).

    Reduces to the flat ring all-reduce over the network for one GPU per machine, and over NVLink (or PCIe)
    for one machine. Source: see module docstring (Jia et al. 2018, §3.3; Thakur et al. 2005, §4.5).
    """
    g, m = cluster.gpus_per_machine, cluster.num_machines
    intra, _ = intra_machine_link(cluster)
    inside = ring_all_reduce_time_s(nbytes, g, intra.bandwidth_bytes_per_s, intra.latency_s)
    across = 0.0
    if m > 1 and nbytes > 0:
        net = cluster.network
        across = 2.0 * (m - 1) / m * nbytes / net.bandwidth_bytes_per_s + 2.0 * (m - 1) * net.latency_s
    return inside + across


def all_reduce_link_bytes(nbytes: float, cluster: ClusterSpec) -> dict[str, float]:
    """Bytes one GPU puts on each link kind in a hierarchical all-reduce of ``nbytes``.

    Returns:
        ``{"nvlink" or "pcie": intra-machine bytes, "network": inter-machine bytes}`` (per GPU, sent).
    """
    g, m = cluster.gpus_per_machine, cluster.num_machines
    _, kind = intra_machine_link(cluster)
    return {kind: ring_all_reduce_bytes(nbytes, g), "network": ring_all_reduce_bytes(nbytes / g, m)}


def all_to_all_time_s(nbytes: float, num_ranks: int, bandwidth_bytes_per_s: float, latency_s: float) -> float:
    """All-to-all where each rank holds ``nbytes`` split evenly among all ranks: pairwise exchange,
    ``(p-1) alpha + (p-1)/p * n / B`` (0 for one rank).

    Source: Thakur, Rabenseifner and Gropp, IJHPCA 2005, §4.7.
    """
    if num_ranks <= 1 or nbytes <= 0:
        return 0.0
    p = num_ranks
    return (p - 1) * latency_s + (p - 1) / p * nbytes / bandwidth_bytes_per_s
