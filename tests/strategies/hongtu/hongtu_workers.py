"""Programs the hongtu tests run on every rank (module-level so spawned workers can import them; the
single-process full-graph reference they are compared with: tests/full_graph_reference.py)."""

from __future__ import annotations

from typing import Any

import numpy as np

from gnnplan.executor import comm
from gnnplan.executor.data import Topology
from gnnplan.executor.strategies.hongtu import Trainer
from gnnplan.executor.trace import Recorder
from gnnplan.simulator.hardware.spec import ClusterSpec, load_cluster
from gnnplan.simulator.plan import Plan
from gnnplan.simulator.workload.spec import WorkloadSpec, load_workload, workload_from_dict


def make_workload(arch: str, dropout: float = 0.0, dataset: Any = "cora", **model: Any) -> WorkloadSpec:
    """The cora-gcn-full preset with another architecture / dataset and the given model overrides."""
    data = load_workload("cora-gcn-full").model_dump(mode="json")
    data["model"].update(arch=arch, dropout=dropout, **model)
    data["dataset"] = dataset
    return workload_from_dict(data)


def make_cluster(num_workers: int, memory_bytes: float | None = None,
                 cluster: str | ClusterSpec = "4x-a100-10gbe") -> ClusterSpec:
    """``cluster`` reshaped to ``num_workers`` machines x 1 GPU, optionally with ``memory_bytes`` per GPU."""
    cl = load_cluster(cluster).model_copy(update={"num_machines": num_workers, "gpus_per_machine": 1})
    if memory_bytes is not None:
        cl = cl.model_copy(update={"gpu": cl.gpu.model_copy(update={"memory_bytes": memory_bytes})})
    return cl


def make_plan(workload: WorkloadSpec, num_workers: int, knobs: dict[str, Any],
              cluster: ClusterSpec | None = None) -> Plan:
    """A hongtu plan on ``num_workers`` machines x 1 worker."""
    cl = cluster if cluster is not None else make_cluster(num_workers)
    return Plan(strategy="hongtu", knobs=knobs, num_workers=num_workers, cluster=cl, workload=workload)


def trained(topo: Topology, emit: Any, workload: WorkloadSpec, knobs: dict[str, Any], epochs: int) -> dict[str, Any]:
    """Train ``epochs`` epochs: per rank each epoch's loss sum, the parameters after the last step and the test
    accuracy counts of its vertices."""
    trainer = Trainer(topo, make_plan(workload, topo.world_size, knobs), Recorder(topo.rank, 0.0))
    losses = [trainer.train_epoch(e).loss_sum for e in range(epochs)]
    acc = trainer.evaluate()
    params = {n: p.detach().numpy().copy() for n, p in trainer.model.named_parameters()}
    everyone = comm.gather_object({"losses": losses, "params": params, "acc": acc})
    return {"ranks": everyone} if everyone is not None else {}


def gradients(topo: Topology, emit: Any, cases: list[tuple[WorkloadSpec, dict[str, Any]]]) -> list[dict[str, Any]]:
    """For each (workload, knobs): the summed loss over ranks, rank 0's all-reduced gradients and the largest
    difference between ranks' gradients."""
    out = []
    for workload, knobs in cases:
        trainer = Trainer(topo, make_plan(workload, topo.world_size, knobs), Recorder(topo.rank, 0.0))
        loss, grads = trainer.gradient()
        mine = {k: v.numpy() for k, v in grads.items()}
        everyone = comm.gather_object({"loss": loss, "grads": mine})
        if everyone is not None:
            spread = max(float(np.abs(r["grads"][k] - mine[k]).max()) for r in everyone for k in mine)
            out.append({"loss": sum(r["loss"] for r in everyone), "grads": mine, "rank_spread": spread})
    return out


def epoch(topo: Topology, emit: Any, workload: WorkloadSpec, knobs: dict[str, Any], cluster: ClusterSpec,
          epochs: int = 1) -> dict[str, Any]:
    """Train ``epochs`` epochs; per rank the last epoch's path bytes, comm bytes, peak working set, and spans;
    the test accuracy after the last epoch."""
    rec = Recorder(topo.rank, 0.0)
    trainer = Trainer(topo, make_plan(workload, topo.world_size, knobs, cluster), rec)
    for e in range(epochs):
        before = trainer.mover.bytes.as_dict()
        stats = trainer.train_epoch(e)
        after = trainer.mover.bytes.as_dict()
    acc = trainer.evaluate()
    everyone = comm.gather_object({
        "paths": {k: after[k] - before[k] for k in after}, "network": stats.network_bytes,
        "stats": stats, "peak": trainer.ws.peak_bytes, "peak_parts": trainer.ws.peak_parts,
        "budget": trainer.ws.budget_bytes, "spans": [s for s in rec.spans() if s.epoch == epochs - 1],
        "acc": acc, "capacity": trainer.capacity})
    return {"ranks": everyone} if everyone is not None else {}


def several(topo: Topology, emit: Any, calls: list[tuple[str, tuple[Any, ...]]]) -> list[Any]:
    """Run several of this module's programs in one process group (saves starting processes)."""
    return [globals()[name](topo, emit, *args) for name, args in calls]
