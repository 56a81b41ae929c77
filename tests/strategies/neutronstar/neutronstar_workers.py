"""Programs the neutronstar tests run on every rank (module-level so spawned workers can import them; the
single-process full-graph reference they are compared with: tests/full_graph_reference.py)."""

from __future__ import annotations

from typing import Any

import numpy as np

from gnnplan.executor import comm
from gnnplan.executor.data import Topology
from gnnplan.executor.strategies.neutronstar import Trainer
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


def make_plan(workload: WorkloadSpec, num_workers: int, knobs: dict[str, Any],
              cluster: str | ClusterSpec = "4x-a100-10gbe", gpus_per_machine: int = 1) -> Plan:
    """A neutronstar plan on ``num_workers / gpus_per_machine`` machines x ``gpus_per_machine`` workers."""
    cl = load_cluster(cluster).model_copy(update={"num_machines": num_workers // gpus_per_machine,
                                                  "gpus_per_machine": gpus_per_machine})
    return Plan(strategy="neutronstar", knobs=knobs, num_workers=num_workers, cluster=cl, workload=workload)


def gradients(topo: Topology, emit: Any, cases: list[tuple[WorkloadSpec, dict[str, Any]]]) -> list[dict[str, Any]]:
    """For each (workload, knobs): the summed loss over ranks, rank 0's all-reduced gradients, the largest
    difference between ranks' gradients, and the rows each rank exchanges at every layer."""
    out = []
    for workload, knobs in cases:
        trainer = Trainer(topo, make_plan(workload, topo.world_size, knobs), Recorder(topo.rank, 0.0))
        loss, grads = trainer.gradient()
        mine = {k: v.numpy() for k, v in grads.items()}
        everyone = comm.gather_object({"loss": loss, "grads": mine,
                                       "received": [sum(lp.recv_counts) for lp in trainer.layers],
                                       "remote": len(trainer.all_sets[topo.rank].remote)})
        if everyone is not None:
            spread = max(float(np.abs(r["grads"][k] - mine[k]).max()) for r in everyone for k in mine)
            out.append({"loss": sum(r["loss"] for r in everyone), "grads": mine, "rank_spread": spread,
                        "received": [r["received"] for r in everyone], "remote": [r["remote"] for r in everyone]})
    return out


def epoch_bytes(topo: Topology, emit: Any, workload: WorkloadSpec, knobs: dict[str, Any], epochs: int = 2,
                cluster: str | ClusterSpec = "4x-a100-10gbe") -> dict[str, Any]:
    """Train ``epochs`` epochs; every epoch's network bytes summed over ranks, and rank 0's spans."""
    rec = Recorder(topo.rank, 0.0)
    trainer = Trainer(topo, make_plan(workload, topo.world_size, knobs, cluster), rec)
    sent = [trainer.train_epoch(e).network_bytes for e in range(epochs)]
    acc = trainer.evaluate()
    everyone = comm.gather_object({"sent": sent, "spans": rec.spans(), "acc": acc})
    if everyone is None:
        return {}
    return {"bytes": [sum(r["sent"][e] for r in everyone) for e in range(epochs)],
            "spans": [s for r in everyone for s in r["spans"]], "acc": [r["acc"] for r in everyone]}


def exchange_bytes(topo: Topology, emit: Any, workload: WorkloadSpec, knobs: dict[str, Any]) -> dict[Any, Any]:
    """One epoch on the spawned topology; every rank's exchange spans' network bytes, sent and received, and all
    bytes sent, by (rank, layer, direction)."""
    rec = Recorder(topo.rank, 0.0)
    Trainer(topo, make_plan(workload, topo.world_size, knobs, gpus_per_machine=topo.gpus_per_machine),
            rec).train_epoch(0)
    mine = {(topo.rank, s.args["layer"], s.args["direction"]): (s.args["network_bytes"],
                                                                s.args["network_received_bytes"], s.nbytes)
            for s in rec.spans() if s.phase == "exchange"}
    everyone = comm.gather_object(mine)
    return {} if everyone is None else {k: v for r in everyone for k, v in r.items()}


def several(topo: Topology, emit: Any, calls: list[tuple[str, tuple[Any, ...]]]) -> list[Any]:
    """Run several of this module's programs in one process group (saves starting processes)."""
    return [globals()[name](topo, emit, *args) for name, args in calls]
