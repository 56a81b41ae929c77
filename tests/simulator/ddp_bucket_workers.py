"""Programs tests/simulator/test_network_model.py runs on every gloo rank (module-level so spawned workers can
import them): DDP's gradient buckets in the executor (:func:`gnnplan.executor.ddp.data_parallel`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from gnnplan.executor import comm, ddp
from gnnplan.executor.data import Topology

LAYERS, WIDTH = 4, 16
"""The chain model: LAYERS bias-free Linear(WIDTH, WIDTH) layers, so every parameter is WIDTH^2 float32 (1 KiB)."""


def chain_model() -> torch.nn.Module:
    """The chain model with seed-0 weights."""
    torch.manual_seed(0)
    return torch.nn.Sequential(*[torch.nn.Linear(WIDTH, WIDTH, bias=False) for _ in range(LAYERS)])


def rank_inputs(rank: int) -> torch.Tensor:
    """Rank ``rank``'s batch: 8 x WIDTH standard normal values, seeded by the rank."""
    return torch.randn(8, WIDTH, generator=torch.Generator().manual_seed(100 + rank))


def bucket_runs(topo: Topology, emit: Any, bucket_sizes: list[float]) -> dict[str, Any]:
    """For each bucket cap: two iterations (DDP reduces every gradient in one bucket in the first and rebuilds its
    buckets by the cap after it) of the chain model wrapped by ``ddp.data_parallel``; per iteration the hook's
    bucket count and bytes and the bytes the counters saw; the averaged gradients after the second."""
    out = []
    for cap in bucket_sizes:
        model = chain_model()
        net, hook = ddp.data_parallel(model, cap)
        iterations = []
        for _ in range(2):
            model.zero_grad()
            hook.reset()
            sent = comm.bytes_sent()
            net(rank_inputs(topo.rank)).square().sum().backward()
            iterations.append({"num_buckets": hook.num_buckets, "nbytes": hook.nbytes,
                               "sent": comm.bytes_sent() - sent,
                               "ordered": hook.first_launch_s is not None and hook.last_launch_s is not None
                               and hook.first_launch_s <= hook.last_launch_s})
        out.append({"cap_bytes": int(net.bucket_bytes_cap), "iterations": iterations,
                    "grads": [np.asarray(p.grad.numpy(), dtype=np.float64) for p in model.parameters()]})
    everyone = comm.gather_object(out)
    return {"ranks": everyone} if everyone is not None else {}


def dp_trainer_buckets(topo: Topology, emit: Any, bucket_bytes: float, seeds: list[int]) -> dict[str, Any]:
    """A ``dp`` Trainer on Cora whose workload sets ``training.ddp_bucket_bytes``: its DDP bucket cap, and the
    ``all_reduce`` spans of two training steps on ``seeds`` (DDP's buckets take the cap from the second on)."""
    from executor_workers import make_plan

    from gnnplan.executor.strategies.dp import Trainer
    from gnnplan.executor.trace import Recorder
    from gnnplan.simulator.plan import Plan
    from gnnplan.simulator.workload.spec import workload_from_dict

    plan = make_plan("sage", topo.world_size, {"cache_fraction": 0.0, "partitioner": "random"}, fanouts=[5, 5])
    data = plan.workload.model_dump(mode="json")
    data["training"]["ddp_bucket_bytes"] = bucket_bytes
    plan = Plan(strategy="dp", knobs=plan.knobs, num_workers=plan.num_workers, cluster=plan.cluster,
                workload=workload_from_dict(data))
    rec = Recorder(topo.rank, 0.0)
    trainer = Trainer(topo, plan, rec)
    try:
        for _ in range(2):
            trainer.gradient(np.asarray(seeds, dtype=np.int64))
        spans = [s for s in rec.spans() if s.phase == "all_reduce"]
        mine = {"cap_bytes": int(trainer.net.bucket_bytes_cap), "gradient_bytes": trainer.gradient_bytes,
                "num_buckets": [s.args["num_buckets"] for s in spans], "nbytes": [s.nbytes for s in spans]}
    finally:
        trainer.close()
    everyone = comm.gather_object(mine)
    return {"ranks": everyone} if everyone is not None else {}


def several(topo: Topology, emit: Any, calls: list[tuple[str, tuple[Any, ...]]]) -> list[Any]:
    """Run several of this module's programs in one process group (saves starting processes)."""
    return [globals()[name](topo, emit, *args) for name, args in calls]


def gsplit_bucket_gradients(topo: Topology, emit: Any, bucket_bytes: float, fanouts: list[int],
                            seeds: list[int]) -> dict[str, Any]:
    """Two ``gsplit`` training steps on Cora (SAGE) with ``training.ddp_bucket_bytes`` = ``bucket_bytes``, whose
    backward runs shuffles between the DDP buckets' all-reduces: per step the bucket count, and the gradients of
    the second step (DDP's buckets follow the cap from the second iteration on)."""
    from gnnplan.executor.strategies import gsplit
    from gnnplan.executor.trace import Recorder
    from gnnplan.simulator.hardware.spec import load_cluster
    from gnnplan.simulator.plan import Plan
    from gnnplan.simulator.workload.spec import load_workload, workload_from_dict

    data = load_workload("cora-sage").model_dump(mode="json")
    data["model"]["dropout"] = 0.0
    data["training"].update(fanouts=fanouts, ddp_bucket_bytes=bucket_bytes)
    cluster = load_cluster("local").model_copy(update={"num_machines": topo.world_size, "gpus_per_machine": 1})
    plan = Plan(strategy="gsplit", knobs={"cache_fraction": 0.1}, num_workers=topo.world_size, cluster=cluster,
                workload=workload_from_dict(data))
    trainer = gsplit.Trainer(topo, plan, Recorder(topo.rank, 0.0))
    try:
        counts = []
        for _ in range(2):
            batch = trainer.sampler(np.asarray(seeds, dtype=np.int64))
            trainer.optimizer.zero_grad()
            trainer.step(batch)
            counts.append(trainer.hook.num_buckets)
        grads = {n: p.grad.numpy().copy() for n, p in trainer.model.named_parameters()}
    finally:
        trainer.close()
    everyone = comm.gather_object({"num_buckets": counts, "grads": grads})
    return {"ranks": everyone} if everyone is not None else {}
