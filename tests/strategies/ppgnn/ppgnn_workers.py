"""Helpers of the ppgnn tests: plans, in-process training, and programs spawned gloo workers run (module-level
so spawned workers can import them)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from gnnplan.executor import comm
from gnnplan.executor.data import Topology
from gnnplan.executor.strategies.ppgnn import Trainer
from gnnplan.executor.trace import Recorder
from gnnplan.simulator.hardware.spec import load_cluster
from gnnplan.simulator.plan import Plan
from gnnplan.simulator.workload.spec import workload_from_dict

SGC_CORA = {"arch": "sgc", "num_layers": 1, "hidden_dim": 1, "dropout": 0.0}
SIGN_CORA = {"arch": "sign", "num_layers": 1, "hidden_dim": 64, "dropout": 0.5}


def make_plan(dataset: Any, model: dict[str, Any], training: dict[str, Any], knobs: dict[str, Any],
              num_workers: int = 1) -> Plan:
    """A ppgnn plan on ``num_workers`` machines x 1 worker of the 4x-a100-10gbe cluster."""
    wl = workload_from_dict({"dataset": dataset, "model": model, "training": training})
    cluster = load_cluster("4x-a100-10gbe").model_copy(update={"num_machines": num_workers})
    return Plan(strategy="ppgnn", knobs=knobs, num_workers=num_workers, cluster=cluster, workload=wl)


def train_in_process(plan: Plan) -> dict[str, Any]:
    """Train ``plan`` in this process as the only worker (no process group); final accuracies and stats."""
    trainer = Trainer(Topology(0, 1, 1, torch.device("cpu")), plan, Recorder(0, 0.0))
    try:
        stats = [trainer.train_epoch(e) for e in range(plan.workload.training.num_epochs)]
        acc = trainer.evaluate()
    finally:
        trainer.close()
    return {"test": acc.test_correct / acc.test_total, "val": acc.val_correct / acc.val_total, "stats": stats,
            "spans": trainer.rec.spans()}


def train_ranks(topo: Topology, emit: Any, plan: Plan, epochs: int) -> dict[str, Any]:
    """Every rank trains ``epochs`` epochs; rank 0 gets every rank's parameters, statistics and spans."""
    trainer = Trainer(topo, plan, Recorder(topo.rank, 0.0))
    try:
        stats = [trainer.train_epoch(e) for e in range(epochs)]
        acc = trainer.evaluate()
    finally:
        trainer.close()
    params = {k: v.detach().numpy().copy() for k, v in trainer.model.state_dict().items()}
    out = {"params": params, "stats": stats, "acc": acc, "spans": trainer.rec.spans(),
           "schedule": [len(b) for b in trainer.schedule(0)[0]], "placement": trainer.placement}
    everyone = comm.gather_object(out)
    return {"ranks": everyone} if everyone is not None else {}


def param_arrays(result: dict[str, Any]) -> dict[str, np.ndarray]:
    """The parameters of a single-process result of :func:`train_ranks`."""
    return result["ranks"][0]["params"]
