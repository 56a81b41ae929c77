"""Programs the hopgnn tests run on every rank (module-level so spawned workers can import them)."""

from __future__ import annotations

from typing import Any

import numpy as np

from gnnplan.executor import comm
from gnnplan.executor.data import Topology
from gnnplan.executor.strategies import dp, hopgnn
from gnnplan.executor.trace import Recorder
from gnnplan.simulator.hardware.spec import load_cluster
from gnnplan.simulator.plan import Plan
from gnnplan.simulator.workload.spec import load_workload, workload_from_dict


def make_plan(strategy: str, arch: str, num_workers: int, knobs: dict[str, Any], fanouts: list[int] | None = None,
              dropout: float = 0.0, preset: str = "cora-sage", **model: Any) -> Plan:
    """A plan on ``preset`` with the given architecture and ``num_workers`` machines x 1 worker."""
    data = load_workload(preset).model_dump(mode="json")
    data["model"].update(arch=arch, dropout=dropout, **model)
    if fanouts is not None:
        data["training"]["fanouts"] = fanouts
    cluster = load_cluster("4x-a100-10gbe").model_copy(update={"num_machines": num_workers})
    return Plan(strategy=strategy, knobs=knobs, num_workers=num_workers, cluster=cluster,
                workload=workload_from_dict(data))


def gradients(topo: Topology, emit: Any, cases: list[tuple[str, str, dict[str, Any], dict[str, Any], list[int]]],
              fanouts: list[int]) -> list[dict[str, np.ndarray]]:
    """For each (strategy, arch, knobs, model overrides, seeds): the gradient of that global batch, computed by a
    fresh trainer (so ``dp`` and ``hopgnn`` sample with the same DGL RNG state)."""
    out = []
    for strategy, arch, knobs, model, seeds, *fan in cases:  # an optional 6th item overrides the fanouts
        module = hopgnn if strategy == "hopgnn" else dp
        plan = make_plan(strategy, arch, topo.world_size, knobs, fanouts=fan[0] if fan else fanouts, **model)
        trainer = module.Trainer(topo, plan, Recorder(topo.rank, 0.0))
        grads = trainer.gradient(np.asarray(seeds, dtype=np.int64))
        out.append({k: v.numpy() for k, v in grads.items()})
        trainer.close()
    return out


def epochs(topo: Topology, emit: Any, knobs: dict[str, Any], num_epochs: int, preset: str = "cora-sage",
           dataset: Any = None, batch_size: int | None = None) -> dict[str, Any]:
    """Train ``num_epochs`` epochs of hopgnn; returns every rank's epoch statistics, the controller's history and
    the spans."""
    data = load_workload(preset).model_dump(mode="json")
    if dataset is not None:
        data["dataset"] = dataset
    if batch_size is not None:
        data["training"]["batch_size"] = batch_size
    cluster = load_cluster("4x-a100-10gbe").model_copy(update={"num_machines": topo.world_size})
    plan = Plan(strategy="hopgnn", knobs=knobs, num_workers=topo.world_size, cluster=cluster,
                workload=workload_from_dict(data))
    rec = Recorder(topo.rank, 0.0)
    trainer = hopgnn.Trainer(topo, plan, rec)
    try:
        stats = [trainer.train_epoch(e) for e in range(num_epochs)]
    finally:
        trainer.close()
    everyone = comm.gather_object({"stats": stats, "history": trainer.controller.history, "spans": rec.spans()})
    return {"ranks": everyone} if everyone is not None else {}


def naive_epoch(topo: Topology, emit: Any, arch: str) -> dict[str, Any]:
    """One epoch of hopgnn's naive variant (``micrograph = false``) on Cora: every rank's epoch statistics, the
    spans, the parameter count and the sizes of every tour it started (destinations, edges of the first block)."""
    from gnnplan.executor.models import num_params

    plan = make_plan("hopgnn", arch, topo.world_size, {"micrograph": False}, fanouts=[5, 5])
    rec = Recorder(topo.rank, 0.0)
    trainer = hopgnn.Trainer(topo, plan, rec)
    try:
        stats = trainer.train_epoch(0)
    finally:
        trainer.close()
    everyone = comm.gather_object({"stats": stats, "spans": rec.spans(), "num_params": num_params(trainer.model),
                                   "dim": trainer.data.feature_dim})
    return {"ranks": everyone} if everyone is not None else {}


def assert_same_gradients(expected_grads: dict, grads: dict, what: str) -> None:
    """The same parameters, each gradient nonzero in ``expected_grads`` and equal in ``grads`` within 1e-5."""
    assert sorted(expected_grads) == sorted(grads), what
    for name, expected in expected_grads.items():
        assert np.abs(expected).max() > 0, (what, name)
        np.testing.assert_allclose(grads[name], expected, rtol=0, atol=1e-5, err_msg=f"{what} {name}")
