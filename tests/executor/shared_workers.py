"""Programs the shared-memory tests run on every rank: all ranks as ONE machine (``gpus_per_machine`` = world size),
so the machine's objects are shared (module-level so spawned workers can import them)."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import torch

from gnnplan.executor import comm
from gnnplan.executor.assemble import load_training_data
from gnnplan.executor.data import Topology
from gnnplan.executor.memory import EpochPeak
from gnnplan.executor.shared import SHM_DIR, SharedObjects, resident_shared_bytes
from gnnplan.simulator.workload.spec import load_workload


def one_machine(topo: Topology) -> Topology:
    """``topo`` with every rank on one machine."""
    return Topology(topo.rank, topo.world_size, topo.world_size, topo.device)


def shared_objects(topo: Topology, emit: Any) -> dict[str, Any]:
    """Share an array and a graph on one machine; rank 0 then writes into the array, and every rank reports what it
    sees, the names left in /dev/shm, and its resident shared bytes before and after reading the graph's arrays."""
    import dgl

    machine = one_machine(topo)
    shared = SharedObjects(machine)
    values = shared.array("values", lambda: np.arange(1000, dtype=np.int64) * 3)
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, 5000, 200_000), rng.integers(0, 5000, 200_000)
    g = shared.graph("graph", lambda: dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=5000))
    comm.barrier()  # rank 0 removes the names after the others attached
    left = sorted(p.name for p in SHM_DIR.glob(f"gnnplan-{shared.token}*"))
    before = resident_shared_bytes()
    u, v = g.edges()
    indptr, indices, _ = g.adj_tensors("csc")
    touched = int(u.sum() + v.sum() + indices.sum() + indptr.sum())  # reads every page of the four arrays
    after = resident_shared_bytes()
    comm.barrier()
    if machine.local_rank == 0:
        values[7] = -1  # one copy: the others see it
    comm.barrier()
    out = {"rank": topo.rank, "values_7": int(values[7]), "values_sum": int(values.sum()) - int(values[7]),
           "same_edges": bool(torch.equal(u, torch.from_numpy(src)) and torch.equal(v, torch.from_numpy(dst))),
           "csc_edges": int(indptr[-1]), "num_indices": int(len(indices)), "left": left, "touched": touched,
           "resident_before": before, "resident_after": after}
    everyone = comm.gather_object(out)
    return {"ranks": everyone} if everyone is not None else {}


def training_data(topo: Topology, emit: Any, preset: str, cache_fraction: float) -> dict[str, Any]:
    """What :func:`executor.assemble.load_training_data` gives every rank of one machine, as arrays."""
    d = load_training_data(load_workload(preset), "metis", cache_fraction, one_machine(topo))
    u, v = d.graph.edges()
    out = {"rank": topo.rank, "src": u.numpy(), "dst": v.numpy(), "num_nodes": d.graph.num_nodes(),
           "weights": None if d.edge_weight is None else d.edge_weight.numpy(), "labels": d.labels.numpy(),
           "owner": np.asarray(d.owner), "rows": d.store.store.rows.numpy().copy(),
           "cache": d.store.cache_rows.numpy(), "train": d.train_idx}
    everyone = comm.gather_object(out)
    return {"ranks": everyone} if everyone is not None else {}


def peak_without_shared(topo: Topology, emit: Any) -> dict[str, Any]:
    """One machine shares a 64 MB array; every rank touches all of it inside a measured phase, measured twice:
    counting the shared pages and leaving them out (:class:`executor.memory.EpochPeak`)."""
    machine = one_machine(topo)
    block = SharedObjects(machine).array("block", lambda: np.ones(8 * 2**20, dtype=np.float64))
    out: dict[str, Any] = {"rank": topo.rank}
    for counts in (True, False):
        meter = EpochPeak(torch.device("cpu"), counts_shared=counts)
        meter.begin()
        out[f"total_{counts}"] = float(block.sum())
        out[f"peak_{counts}"] = meter.end()[0]
    out["resident"] = resident_shared_bytes()
    everyone = comm.gather_object(out)
    return {"ranks": everyone} if everyone is not None else {}


def shared_vs_private(topo: Topology, emit: Any, strategy: str, arch: str, knobs: dict[str, Any],
                      epochs: int) -> dict[str, Any]:
    """``strategy`` trained ``epochs`` epochs on Cora (``arch``, fanouts [5, 5]) twice on the same topology (``topo`` as
    spawned, e.g. 2 machines x 2): with the machine's objects shared, then with every worker building its own (as
    when /dev/shm lacks the room): every rank's parameters, accuracy counts and resident shared bytes under each."""
    import warnings

    from executor_workers import make_plan

    from gnnplan.executor import shared
    from gnnplan.executor.strategies import get_executor
    from gnnplan.executor.trace import Recorder

    plan = make_plan(arch, topo.world_size, knobs, fanouts=[5, 5])
    plan = plan.model_copy(update={"strategy": strategy, "cluster": plan.cluster.model_copy(update={
        "num_machines": topo.num_machines, "gpus_per_machine": topo.gpus_per_machine})})
    Trainer = get_executor(strategy).Trainer
    out: dict[str, Any] = {"rank": topo.rank}
    room = shared._reserve
    for mode in ("shared", "private"):
        if mode == "private":  # as when /dev/shm lacks the room
            shared._reserve = lambda path, nbytes: False
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                trainer = Trainer(topo, plan, Recorder(topo.rank, 0.0))
            for epoch in range(epochs):
                trainer.train_epoch(epoch)
            acc = trainer.evaluate()
            out[mode] = {"params": [p.detach().numpy().copy() for p in trainer.model.parameters()],
                         "arrays": trainer.data.shared.arrays,
                         "accuracy": [acc.val_correct, acc.val_total, acc.test_correct, acc.test_total],
                         "resident": resident_shared_bytes(),
                         "warnings": [str(w.message) for w in caught if str(w.message).startswith("shared memory:")]}
            trainer.close()
            del trainer
            gc.collect()  # the shared run's mappings go with its last reference
        finally:
            shared._reserve = room
    everyone = comm.gather_object(out)
    return {"ranks": everyone} if everyone is not None else {}


def mixed_room(topo: Topology, emit: Any) -> dict[str, Any]:
    """2 machines x 2 ranks where machine 1 has no room in /dev/shm: an array and a graph, each rank's values and
    whether it maps shared pages (nothing may be shared, and nobody may wait for a peer that went another way)."""
    import dgl

    from gnnplan.executor import shared

    if topo.machine == 1 and topo.local_rank == 0:
        shared._reserve = lambda path, nbytes: False
    objects = SharedObjects(topo)
    values = objects.array("values", lambda: np.arange(100, dtype=np.int64))
    g = objects.graph("graph", lambda: dgl.graph((torch.arange(10), torch.arange(10).flip(0)), num_nodes=10))
    out = {"rank": topo.rank, "values": np.asarray(values).tolist(), "edges": [t.tolist() for t in g.edges()],
           "resident": resident_shared_bytes(), "arrays": objects.arrays}
    everyone = comm.gather_object(out)
    return {"ranks": everyone} if everyone is not None else {}


def die_holding_an_object(topo: Topology, emit: Any) -> None:
    """One machine of 2 ranks: local rank 0 creates a shared array and dies before releasing its name."""
    import os

    from gnnplan.executor import shared

    if topo.rank == 0:
        shared.SharedObjects._release = lambda self, name: os._exit(3)
    SharedObjects(one_machine(topo)).array("doomed", lambda: np.zeros(1000))
