"""The probed machine as modelled machines of several workers: ``gnnplan probe --gpus-per-machine G``.

The probe models each worker as one machine holding its share of this machine (:mod:`executor.probe`); a machine
of G workers holds G shares of what its workers divide among themselves."""

from __future__ import annotations

from typing import Any

__all__ = ["SHARED_BY_MACHINE", "machines_of_shares"]


SHARED_BY_MACHINE = ("host.num_cores", "host.memory_bytes", "host.memory_bandwidth_bytes_per_s",
                     "storage.bandwidth_bytes_per_s")
"""The fields of a worker's share of this box (module docstring) that a machine of G workers has G times: its
cores, memory, memory bandwidth and disk bandwidth (the simulator divides them among the machine's workers)."""


def machines_of_shares(data: dict[str, Any], gpus_per_machine: int) -> dict[str, Any]:
    """The probe's mapping of W one-worker machines (each a worker's share of this box) as W / G machines of G
    workers: each machine G shares (:data:`SHARED_BY_MACHINE` times G); each worker's own "GPU" fields, the
    copy path (``pcie``) and the loopback ``network`` unchanged; between a machine's workers the simulator then
    prices PCIe peer copies (no NVLink), where the executor's gloo ranks use the loopback."""
    g = gpus_per_machine
    out = {**data, "num_machines": data["num_machines"] // g, "gpus_per_machine": g, "host": dict(data["host"]),
           "storage": dict(data["storage"]), "sources": dict(data["sources"])}
    for field in SHARED_BY_MACHINE:
        group, name = field.split(".")
        out[group][name] = out[group][name] * g
    out["sources"]["num_machines"] = f"{out['num_machines']} modelled machines of {g} worker processes each"
    out["sources"]["gpus_per_machine"] = f"{g} worker processes per modelled machine (gnnplan probe --gpus-per-machine)"
    out["sources"]["machine shares"] = (f"{', '.join(SHARED_BY_MACHINE)}: {g} times one worker's share "
                                        "(executor.probe_shares.machines_of_shares)")
    return out
