"""The probed machine as modelled machines of several workers: ``gnnplan probe --gpus-per-machine G``.

The probe models each worker as one machine holding its share of this machine (:mod:`executor.probe`); a machine
of G workers holds G shares of what its workers divide among themselves."""

from __future__ import annotations

from typing import Any

__all__ = ["SHARED_BY_MACHINE", "loopback_link", "machines_of_shares"]


SHARED_BY_MACHINE = ("host.num_cores", "host.memory_bytes", "host.memory_bandwidth_bytes_per_s",
                     "storage.bandwidth_bytes_per_s")
"""The fields of a worker's share of this box (module docstring) that a machine of G workers has G times: its
cores, memory, memory bandwidth and disk bandwidth (the simulator divides them among the machine's workers)."""


def loopback_link(network: dict[str, Any]) -> dict[str, Any]:
    """The ``nvlink`` mapping of a machine whose workers are processes of one box: they talk over its loopback,
    so the link is the probed ``network`` rate (bytes/s) and latency (s), any pair at that rate (``nvswitch``);
    no NVLink on a CPU."""
    return {"bandwidth_bytes_per_s": network["bandwidth_bytes_per_s"], "latency_s": network["latency_s"],
            "topology": "nvswitch"}


def machines_of_shares(data: dict[str, Any], gpus_per_machine: int) -> dict[str, Any]:
    """The probe's mapping of W one-worker machines (each a worker's share of this box) as W / G machines of G
    workers: each machine G shares (:data:`SHARED_BY_MACHINE` times G); each worker's own "GPU" fields, the
    copy path (``pcie``) and the loopback ``network`` unchanged. A machine's workers talk to each other as the
    executor's gloo ranks do, over the loopback, so that is the machine's GPU-to-GPU link (``nvlink``, at the
    ``network``'s measured rate and latency; ``nvswitch``: any pair at that rate): without it the simulator
    priced their messages as PCIe peer copies, i.e. at the memory-copy rate with its microseconds of latency (on
    this machine's 1 x 2, 2026-11-29: 4.4 GB/s and 7 us against the loopback's 1.8 GB/s and 113 us; dp's
    partitioned cache predicted at 1.4 ms of its 13.7 ms of loads per epoch)."""
    g = gpus_per_machine
    out = {**data, "num_machines": data["num_machines"] // g, "gpus_per_machine": g, "host": dict(data["host"]),
           "storage": dict(data["storage"]), "sources": dict(data["sources"])}
    for field in SHARED_BY_MACHINE:
        group, name = field.split(".")
        out[group][name] = out[group][name] * g
    out["nvlink"] = loopback_link(data["network"])
    out["sources"]["nvlink"] = ("the loopback between the machine's worker processes (gloo over 127.0.0.1, no "
                                "NVLink on a CPU): network.bandwidth_bytes_per_s and network.latency_s as measured "
                                "(executor.probe_shares.machines_of_shares)")
    out["sources"]["num_machines"] = f"{out['num_machines']} modelled machines of {g} worker processes each"
    out["sources"]["gpus_per_machine"] = f"{g} worker processes per modelled machine (gnnplan probe --gpus-per-machine)"
    out["sources"]["machine shares"] = (f"{', '.join(SHARED_BY_MACHINE)}: {g} times one worker's share "
                                        "(executor.probe_shares.machines_of_shares)")
    return out
