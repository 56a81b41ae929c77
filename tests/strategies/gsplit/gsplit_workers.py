"""Programs the gsplit tests run on every rank (module-level so spawned workers can import them), and the
single-process reference they are compared with."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from gnnplan.executor import comm
from gnnplan.executor.data import Topology, build_graph, input_features
from gnnplan.executor.models import GNN
from gnnplan.executor.strategies import dp, gsplit
from gnnplan.executor.trace import Recorder
from gnnplan.simulator.hardware.spec import load_cluster
from gnnplan.simulator.plan import Plan
from gnnplan.simulator.strategies.gsplit.stats import sample_batch
from gnnplan.simulator.workload.datasets import load_dataset
from gnnplan.simulator.workload.spec import WorkloadSpec, load_workload, workload_from_dict

SEED = 0


def make_workload(arch: str, fanouts: list[int], dropout: float = 0.0, **model: Any) -> WorkloadSpec:
    """Cora with the given architecture and fanouts."""
    data = load_workload("cora-sage").model_dump(mode="json")
    data["model"].update(arch=arch, dropout=dropout, **model)
    data["training"]["fanouts"] = fanouts
    return workload_from_dict(data)


def make_plan(strategy: str, workload: WorkloadSpec, num_workers: int, knobs: dict[str, Any],
              gpus_per_machine: int = 1) -> Plan:
    """A plan with ``num_workers / gpus_per_machine`` machines x ``gpus_per_machine`` workers."""
    cluster = load_cluster("local").model_copy(update={"num_machines": num_workers // gpus_per_machine,
                                                       "gpus_per_machine": gpus_per_machine})
    return Plan(strategy=strategy, knobs=knobs, num_workers=num_workers, cluster=cluster, workload=workload)


def split_gradients(topo: Topology, emit: Any, cases: list[tuple[str, dict[str, Any], list[int], list[int]]],
                    knobs: dict[str, Any], gpus_per_machine: int = 1) -> dict[str, Any]:
    """For each (arch, model overrides, fanouts, seeds): every rank's summed cross-entropy of its own targets and
    the all-reduced gradient of that global batch by the gsplit training path, on machines of
    ``gpus_per_machine`` ranks (which share their machine's split rows)."""
    out = []
    topo = Topology(topo.rank, topo.world_size, gpus_per_machine, topo.device)
    for arch, model, fanouts, seeds in cases:
        trainer = gsplit.Trainer(topo, make_plan("gsplit", make_workload(arch, fanouts, **model), topo.world_size,
                                                 knobs, gpus_per_machine), Recorder(topo.rank, 0.0))
        batch = trainer.sampler(np.asarray(seeds, dtype=np.int64))
        trainer.optimizer.zero_grad()
        ce = float(trainer.step(batch))
        grads = {n: p.grad.numpy().copy() for n, p in trainer.model.named_parameters()}
        out.append({"ce": ce, "grads": grads, "targets": len(batch.target_ids),
                    "rows_shared": "split-features" in trainer.data.shared.arrays})
        trainer.close()
        del trainer, batch  # the next case's trainer shares its machine's objects under the same names
        gc.collect()
    everyone = comm.gather_object(out)
    return {"ranks": everyone} if everyone is not None else {}


def reference(arch: str, model: dict[str, Any], fanouts: list[int], seeds: list[int]) -> tuple[float, dict]:
    """Single-process training on the same mini-batch: DGL's layers on the whole sampled batch, loss = mean
    cross-entropy over the B seeds; returns (loss, gradients)."""
    wl = make_workload(arch, fanouts, **model)
    graph = load_dataset("cora")
    g, _ = build_graph(graph, arch)
    import dgl

    sampler = dgl.dataloading.NeighborSampler(fanouts)
    blocks = sample_batch(g, sampler, np.asarray(seeds, dtype=np.int64), SEED)
    torch.manual_seed(SEED)
    net = GNN(wl.model, graph.feature_dim, graph.num_classes)
    x = torch.from_numpy(input_features(graph, "cora")[blocks[0].srcdata[dgl.NID].numpy()])
    y = torch.from_numpy(graph.labels)[blocks[-1].dstdata[dgl.NID]]
    loss = F.cross_entropy(net(blocks, x), y, reduction="sum") / len(seeds)
    loss.backward()
    return float(loss.detach()), {n: p.grad.numpy().copy() for n, p in net.named_parameters()}


def one_epoch(topo: Topology, emit: Any, knobs: dict[str, Any]) -> dict[str, Any]:
    """Epoch 0 of gsplit on cora-sage; every rank's spans and epoch statistics."""
    rec = Recorder(topo.rank, 0.0)
    trainer = gsplit.Trainer(topo, make_plan("gsplit", load_workload("cora-sage"), topo.world_size, knobs), rec)
    try:
        stats = trainer.train_epoch(0)
    finally:
        trainer.close()
    everyone = comm.gather_object({"spans": rec.spans(), "stats": stats})
    return {"ranks": everyone} if everyone is not None else {}


def accuracy(topo: Topology, emit: Any, num_epochs: int) -> dict[str, float]:
    """Test accuracy of dp and gsplit on cora-sage after ``num_epochs`` epochs (same seeds)."""
    out = {}
    for strategy, module in (("dp", dp), ("gsplit", gsplit)):
        plan = make_plan(strategy, load_workload("cora-sage"), topo.world_size, {})
        trainer = module.Trainer(topo, plan, Recorder(topo.rank, 0.0))
        try:
            for epoch in range(num_epochs):
                trainer.train_epoch(epoch)
            acc = trainer.evaluate()
        finally:
            trainer.close()
        counts = torch.tensor([acc.test_correct, acc.test_total], dtype=torch.float64)
        comm.all_reduce_(counts)
        out[strategy] = float(counts[0] / counts[1])
    return out


def several(topo: Topology, emit: Any, calls: list[tuple[str, tuple[Any, ...]]]) -> list[Any]:
    """Run several of this module's programs in one process group (saves starting processes)."""
    return [globals()[name](topo, emit, *args) for name, args in calls]


def peer_cache(topo: Topology, emit: Any, cache_fraction: float) -> dict[str, Any]:
    """dp with ``cache_placement = partitioned`` on ONE machine of all ranks: the features of 600 random vertices
    (the same on every rank), the load counts and the NVLink / network bytes of the load."""
    machine = Topology(topo.rank, topo.world_size, topo.world_size, topo.device)
    plan = make_plan("dp", load_workload("cora-sage"), topo.world_size,
                     {"cache_fraction": cache_fraction, "cache_placement": "partitioned"})
    plan = plan.model_copy(update={"cluster": plan.cluster.model_copy(
        update={"num_machines": 1, "gpus_per_machine": topo.world_size})})
    trainer = dp.Trainer(machine, plan, Recorder(topo.rank, 0.0))
    ids = np.random.default_rng(1).choice(trainer.data.graph.num_nodes(), 600, replace=False).astype(np.int64)
    sent = comm.bytes_sent()
    x, loaded = trainer.load_features(torch.from_numpy(ids))
    total, sent = comm.bytes_sent() - sent, comm.bytes_sent()
    hot = torch.from_numpy(ids)[trainer.peers.holder[torch.from_numpy(ids)] >= 0]
    trainer.peers.load(hot)  # the same pull again, alone: the bytes of the peer fetch inside load_features
    nvlink = comm.bytes_sent() - sent
    out = {"ids": ids, "x": x.numpy(), "num_hit": loaded.num_hit, "num_local": loaded.num_local,
           "num_remote": loaded.num_remote, "nvlink_bytes": nvlink, "network_bytes": total - nvlink}
    trainer.close()
    everyone = comm.gather_object(out)
    return {"ranks": everyone} if everyone is not None else {}
