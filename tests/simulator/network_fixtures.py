"""Constructed clusters and a runner of hardware-model operations shared by the network-model tests (every
latency and fixed cost 0, so expected times are closed forms)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gnnplan.simulator.engine import Engine
from gnnplan.simulator.hardware.model import HardwareModel
from gnnplan.simulator.hardware.spec import ClusterSpec, cluster_from_dict, load_cluster

B = 1.0e9
"""Bandwidth of every PCIe, NVLink and NIC link of :func:`cluster`, bytes/s."""
N = 6.0e6
"""A transfer size the tests use, bytes."""


def cluster(machines: int = 2, gpus: int = 1, **updates: dict[str, Any]) -> ClusterSpec:
    """A validated cluster of ``machines`` x ``gpus`` on 4x-a100-10gbe's parts: PCIe, NIC and NVLink at ``B``,
    all latencies and fixed costs 0; ``updates`` merge into its sections (``network={...}``)."""
    data = load_cluster("4x-a100-10gbe").model_dump()
    data.update(num_machines=machines, gpus_per_machine=gpus, sources={})
    data["pcie"].update(bandwidth_bytes_per_s=B, latency_s=0.0)
    data["network"].update(bandwidth_bytes_per_s=B, latency_s=0.0, per_collective_s=0.0)
    data["nvlink"] = {"bandwidth_bytes_per_s": B, "latency_s": 0.0}
    for section, fields in updates.items():
        data[section] = {**(data[section] or {}), **fields}
    return cluster_from_dict(data)


def finish_times(cl: ClusterSpec, *ops: Callable[[HardwareModel], Any]) -> list[float]:
    """Start every operation at time 0 on one hardware model; the time each one ends."""
    engine = Engine(0)
    hw = HardwareModel(cl, engine)
    ends = [0.0] * len(ops)

    def run(i: int, op: Callable[[HardwareModel], Any]) -> Any:
        event = op(hw)
        if hasattr(event, "send"):  # a generator (all_reduce): run it inline
            yield from event
        else:
            yield event
        ends[i] = engine.now

    for i, op in enumerate(ops):
        engine.process(run(i, op))
    engine.run()
    return ends
