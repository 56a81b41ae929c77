"""Programs the executor tests run on every rank (module-level so spawned workers can import them)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch

from gnnplan.executor import comm
from gnnplan.executor.data import Topology
from gnnplan.executor.strategies.dp import Trainer
from gnnplan.executor.trace import Recorder
from gnnplan.simulator.hardware.spec import load_cluster
from gnnplan.simulator.plan import Plan
from gnnplan.simulator.workload.spec import load_workload, workload_from_dict


def make_plan(arch: str, num_workers: int, knobs: dict[str, Any], fanouts: list[int] | None = None,
              dropout: float = 0.0, preset: str = "cora-sage", **model: Any) -> Plan:
    """A plan on Cora with the given architecture, cluster shape ``num_workers`` machines x 1 worker."""
    data = load_workload(preset).model_dump(mode="json")
    data["model"].update(arch=arch, dropout=dropout, **model)
    if fanouts is not None:
        data["training"]["fanouts"] = fanouts
    cluster = load_cluster("4x-a100-10gbe").model_copy(update={"num_machines": num_workers})
    return Plan(strategy="dp", knobs=knobs, num_workers=num_workers, cluster=cluster,
                workload=workload_from_dict(data))


def fetch_check(topo: Topology, emit: Any, knobs: dict[str, Any], ids: np.ndarray) -> dict[str, Any]:
    """Load the features of ``ids`` through the feature store; return what was loaded and counted."""
    trainer = Trainer(topo, make_plan("sage", topo.world_size, knobs), Recorder(topo.rank, 0.0))
    store = trainer.data.store
    sent, received = comm.bytes_sent(), comm.bytes_received()
    x, stats = store.load(torch.from_numpy(ids))
    out = {"x": x.numpy(), "num_hit": stats.num_hit, "num_local": stats.num_local,
           "num_remote": stats.num_remote, "row_bytes": stats.row_bytes, "owner": trainer.data.owner,
           "sent": comm.bytes_sent() - sent, "received": comm.bytes_received() - received,
           "request_bytes": stats.fetch.request_bytes if stats.fetch else 0,
           "reply_bytes": stats.fetch.reply_bytes if stats.fetch else 0,
           "num_cached": store.num_cached}
    everyone = comm.gather_object(out)
    return {"ranks": everyone} if everyone is not None else {}


def gradients(topo: Topology, emit: Any, cases: list[tuple[Any, ...]]) -> list[dict]:
    """For each (arch, model overrides, seeds[, knob overrides]): the averaged gradient of that global batch with
    fanouts -1."""
    out = []
    for arch, model, seeds, *knobs in cases:
        plan = make_plan(arch, topo.world_size, {"cache_fraction": 0.1, "partitioner": "metis", **(knobs or [{}])[0]},
                         fanouts=[-1, -1], **model)
        trainer = Trainer(topo, plan, Recorder(topo.rank, 0.0))
        grads = trainer.gradient(np.asarray(seeds, dtype=np.int64))
        out.append({k: v.numpy() for k, v in grads.items()})
    return out


def uneven_epochs(topo: Topology, emit: Any, num_sampler_workers: int) -> dict[str, Any]:
    """Two epochs on a small R-MAT graph with 101 training vertices and 25 seeds per worker and iteration, so
    the last iteration of one worker is empty; returns every rank's epoch statistics."""
    data = load_workload("cora-sage").model_dump(mode="json")
    data["dataset"] = {"generator": "rmat", "num_vertices": 1000, "edge_factor": 4, "feature_dim": 8,
                       "num_classes": 4, "train_fraction": 0.101, "seed": 0}
    data["training"].update(batch_size=50, fanouts=[3, 3])
    cluster = load_cluster("4x-a100-10gbe").model_copy(update={"num_machines": topo.world_size})
    plan = Plan(strategy="dp", knobs={"cache_fraction": 0.05, "num_sampler_workers": num_sampler_workers},
                num_workers=topo.world_size, cluster=cluster, workload=workload_from_dict(data))
    trainer = Trainer(topo, plan, Recorder(topo.rank, 0.0))
    try:
        stats = [trainer.train_epoch(e) for e in range(2)]
        batches = [len(b) for b in trainer.schedule(0)[0]]
    finally:
        trainer.close()
    everyone = comm.gather_object({"stats": stats, "batch_sizes": batches})
    return {"ranks": everyone} if everyone is not None else {}


def epoch_loads(topo: Topology, emit: Any, seed_split: str) -> dict[str, Any]:
    """One epoch of dp on Cora (METIS, no cache) with ``seed_split``: every rank's input rows loaded from its
    machine and fetched from others, in bytes, and its first batch's seeds."""
    trainer = Trainer(topo, make_plan("sage", topo.world_size, {"partitioner": "metis", "seed_split": seed_split}),
                      Recorder(topo.rank, 0.0))
    try:
        stats = trainer.train_epoch(0)
        first = trainer.schedule(0)[0][0]
    finally:
        trainer.close()
    everyone = comm.gather_object({"local": stats.local_bytes, "remote": stats.remote_bytes, "first": first})
    return {"ranks": everyone} if everyone is not None else {}


def several(topo: Topology, emit: Any, calls: list[tuple[str, tuple[Any, ...]]]) -> list[Any]:
    """Run several of this module's programs in one process group (saves starting processes)."""
    return [globals()[name](topo, emit, *args) for name, args in calls]


def environment_of(topo: Topology, emit: Any, name: str) -> str | None:
    """The worker's value of environment variable ``name`` (None when unset)."""
    return os.environ.get(name)


def thread_counts(topo: Topology, emit: Any, sampler_processes: int) -> dict[str, Any]:
    """Every rank's thread pool sizes, ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` and ``OMP_WAIT_POLICY``, and those of
    ``sampler_processes`` sampler processes rank 0 starts as :class:`executor.sampling.BatchStream` does."""
    import functools
    import os

    from gnnplan.executor.sampling import _init_worker, _worker_context
    from gnnplan.executor.threads import THREAD_ENV, current_threads

    mine = {"threads": current_threads(), "env": [os.environ.get(name) for name in THREAD_ENV],
            "wait_policy": os.environ.get("OMP_WAIT_POLICY")}
    samplers = []
    if topo.rank == 0 and sampler_processes:
        loader = torch.utils.data.DataLoader(
            _ThreadProbe(2 * sampler_processes), batch_size=None, num_workers=sampler_processes,
            worker_init_fn=functools.partial(_init_worker, 0), multiprocessing_context=_worker_context())
        samplers = list(loader)
    everyone = comm.gather_object(mine)
    return {"ranks": everyone, "samplers": samplers} if everyone is not None else {}


class _ThreadProbe(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """Item i = (the loader process's id, its thread pool sizes)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[int, Any]:
        import os

        from gnnplan.executor.threads import current_threads

        return os.getpid(), current_threads()


EXCHANGE_ROWS = [[1, 2, 30], [2, 1, 3], [40, 3, 1]]
"""Rows rank r sends rank j in :func:`exchange_protocols` (100 float32 each: 400 B)."""


def exchange_protocols(topo: Topology, emit: Any, link_bytes_per_s: float) -> dict[str, Any]:
    """:func:`executor.comm.all_to_all_single` of :data:`EXCHANGE_ROWS` (row k from rank r to j holds
    r * 1000 + j * 10 + k) with no link rate (gloo's ``alltoallv``), at ``link_bytes_per_s`` with a 5 ms threshold
    (long pairs point to point, the others through ``alltoallv``) and with the executor's threshold (every pair
    point to point); every rank's three results and bytes counted, on rank 0."""
    me, rows = topo.rank, EXCHANGE_ROWS
    inp = torch.cat([torch.full((n, 100), float(me * 1000 + j * 10)) + torch.arange(n, dtype=torch.float32)[:, None]
                     for j, n in enumerate(rows[me])])
    got = {}
    threshold = comm.RECEIVE_FIRST_MIN_S
    for name, rate, min_s in (("collective", None, threshold), ("mixed", link_bytes_per_s, 0.005),
                              ("direct", link_bytes_per_s, threshold)):
        comm.set_link_rate(rate)
        comm.RECEIVE_FIRST_MIN_S = min_s
        sent = comm.bytes_sent()
        out = torch.empty(sum(r[me] for r in rows), 100)
        comm.all_to_all_single(out, inp, [r[me] for r in rows], rows[me])
        got[name] = out.numpy()
        got[name + "_sent"] = comm.bytes_sent() - sent
    comm.set_link_rate(None)
    comm.RECEIVE_FIRST_MIN_S = threshold
    everyone = comm.gather_object(got)
    return {"ranks": everyone} if everyone is not None else {}


def late_rank_ddp_bucket(topo: Topology, emit: Any, delay_s: float, repeats: int) -> tuple[float, float]:
    """:func:`executor.probe_collectives._ddp_bucket_times` with rank 1 starting each backward ``delay_s`` late (it
    sleeps before its loss), as a rank sharing a core with the other would: rank 0's bucket is launched that much
    before rank 1's."""
    import time

    from gnnplan.executor import probe_collectives

    if topo.rank == 1:
        loss = torch.nn.functional.cross_entropy

        def late(*args: Any, **kwargs: Any) -> torch.Tensor:
            time.sleep(delay_s)
            return loss(*args, **kwargs)

        torch.nn.functional.cross_entropy = late
    return probe_collectives._ddp_bucket_times(repeats)


def gloo_loop_policies(topo: Topology, emit: Any) -> list[int]:
    """The scheduling policy of each of this rank's gloo TCP event-loop threads, after the process group is up."""
    from gnnplan.executor.gloo_loop import loop_threads

    return [os.sched_getscheduler(tid) for tid in loop_threads()]


def rank_maxima(topo: Topology, emit: Any) -> list[float]:
    """:func:`executor.comm.max_over_ranks` of two rank-dependent values: rank r passes 10 r + 1.5 and -r."""
    return [comm.max_over_ranks(10.0 * topo.rank + 1.5), comm.max_over_ranks(-float(topo.rank))]


def partitioned_sampling(topo: Topology, emit: Any, seeds: list[int], fanouts: list[int]) -> dict[str, Any]:
    """dp with ``graph_structure = partitioned`` and the keyed sampler: this rank's share of ``seeds`` sampled on
    the partitioned structure (collective) and on the whole graph by the replicated keyed sampler; the blocks'
    vertex ids, edges and edge ids of both, the exchange's statistics and the bytes the rank sent, and the
    gradient of the global batch (sampled on the partitioned structure)."""
    from gnnplan.executor.data import build_graph
    from gnnplan.executor.sampling import sample_inline
    from gnnplan.executor.sampling_keyed import KeyedSampler
    from gnnplan.simulator.workload.batches import owner_split
    from gnnplan.simulator.workload.datasets import load_dataset

    knobs = {"partitioner": "random", "graph_structure": "partitioned", "sampler": "keyed"}  # half of it remote
    trainer = Trainer(topo, make_plan("sage", topo.world_size, knobs, fanouts=fanouts), Recorder(topo.rank, 0.0))
    d = trainer.data
    mine = owner_split(np.asarray(seeds, dtype=np.int64), d.owner, topo.num_machines, topo.gpus_per_machine)[topo.rank]
    sent = comm.bytes_sent()
    parted = sample_inline(d.graph, trainer.sampler, mine, (3, 7))
    sent = comm.bytes_sent() - sent
    graph, _ = build_graph(load_dataset("cora"), "sage")  # the trainer keeps only its part (d.graph)
    whole = sample_inline(graph, KeyedSampler(fanouts, trainer.workload.training.seed), mine, (3, 7))

    def layout(blocks: list[Any]) -> list[tuple[np.ndarray, ...]]:
        import dgl

        return [(b.srcdata[dgl.NID].numpy(), b.dstdata[dgl.NID].numpy(), *(t.numpy() for t in b.edges()),
                 b.edata[dgl.EID].numpy()) for b in blocks]

    last = trainer.sampler.last
    grads = trainer.gradient(np.asarray(seeds, dtype=np.int64))
    out = {"parted": layout(parted.blocks), "whole": layout(whole.blocks), "owner": d.owner,
           "num_remote_vertices": last.num_remote_vertices, "num_remote_edges": last.num_remote_edges,
           "request_bytes": last.request_bytes, "reply_bytes": last.reply_bytes, "sent": sent,
           "grads": {k: v.numpy() for k, v in grads.items()}}
    everyone = comm.gather_object(out)
    return {"ranks": everyone} if everyone is not None else {}


def keyed_gradient(topo: Topology, emit: Any, seeds: list[int], fanouts: list[int]) -> dict[str, np.ndarray]:
    """The gradient of the global batch ``seeds`` by dp with the keyed sampler on the replicated structure."""
    knobs = {"partitioner": "random", "sampler": "keyed"}
    trainer = Trainer(topo, make_plan("sage", topo.world_size, knobs, fanouts=fanouts), Recorder(topo.rank, 0.0))
    return {k: v.numpy() for k, v in trainer.gradient(np.asarray(seeds, dtype=np.int64)).items()}


def partitioned_epoch(topo: Topology, emit: Any) -> dict[str, Any]:
    """One epoch of dp with ``graph_structure = partitioned`` and DGL's sampler on Cora: every rank's epoch
    statistics and ``sample`` spans."""
    knobs = {"partitioner": "metis", "graph_structure": "partitioned", "cache_fraction": 0.1}
    rec = Recorder(topo.rank, 0.0)
    trainer = Trainer(topo, make_plan("sage", topo.world_size, knobs, fanouts=[5, 5]), rec)
    try:
        stats = trainer.train_epoch(0)
    finally:
        trainer.close()
    spans = [(s.nbytes, dict(s.args)) for s in rec.spans() if s.phase == "sample"]
    everyone = comm.gather_object({"stats": stats, "spans": spans})
    return {"ranks": everyone} if everyone is not None else {}


def partitioned_inference(topo: Topology, emit: Any, arch: str) -> dict[str, Any]:
    """Evaluation of the same initial model with the replicated and the partitioned structure (keyed sampler, METIS,
    2 machines): every rank's logits of its vertices under each, and the edges each trainer's graph holds."""
    out: dict[str, Any] = {}
    for structure in ("replicated", "partitioned"):
        knobs = {"partitioner": "metis", "graph_structure": structure, "sampler": "keyed"}
        trainer = Trainer(topo, make_plan(arch, topo.world_size, knobs), Recorder(topo.rank, 0.0))
        try:
            out[structure] = {"logits": trainer.evaluator.logits(trainer.model).numpy(),
                              "edges": int(trainer.data.graph.num_edges()), "owner": trainer.data.owner}
        finally:
            trainer.close()
    everyone = comm.gather_object(out)
    return {"ranks": everyone} if everyone is not None else {}


def traffic_counts(topo: Topology, emit: Any) -> dict[str, Any]:
    """Bytes each rank counts as sent to other machines and to its own machine (``executor.comm.traffic_since``)
    for one all-reduce of 1000 floats, one all_to_all_single of 10 int64 rows to every other rank, and one shift of
    5 floats to the next rank."""
    out: dict[str, Any] = {"rank": topo.rank}
    mark = comm.traffic_mark()
    comm.all_reduce_(torch.ones(1000))
    out["all_reduce"] = comm.traffic_since(mark)
    p = topo.world_size
    mark = comm.traffic_mark()
    splits = [0 if j == topo.rank else 10 for j in range(p)]
    comm.all_to_all_single(torch.empty(sum(splits), dtype=torch.int64), torch.zeros(sum(splits), dtype=torch.int64),
                           splits, splits)
    out["all_to_all"] = comm.traffic_since(mark)
    mark = comm.traffic_mark()
    comm.shift(torch.ones(5), (topo.rank + 1) % p, torch.empty(5), (topo.rank - 1) % p)
    out["shift"] = comm.traffic_since(mark)
    everyone = comm.gather_object(out)
    return {"ranks": everyone} if everyone is not None else {}


def row_pulls(topo: Topology, emit: Any) -> dict[str, Any]:
    """``RowStore.pull`` over 3 ranks: rank r holds vertices ``4 r + i`` (i < 4, stored in reverse order) of a
    12-row matrix whose row v is ``[v, -v]``; each rank asks for a mix of its own and the others' vertices,
    repeated and out of order (rank 2 none of its own), then only its own or none. Returns every rank's ids, rows
    and stats per case, and the rows each of its all-to-all calls sent to and received from itself."""
    from gnnplan.executor.features import RowStore

    me = topo.rank
    to_self: list[tuple[int, int]] = []
    exchange = comm.all_to_all_single

    def recorded(out: torch.Tensor, inp: torch.Tensor, out_splits: list[int], in_splits: list[int]) -> torch.Tensor:
        to_self.append((in_splits[me], out_splits[me]))
        return exchange(out, inp, out_splits, in_splits)

    comm.all_to_all_single = recorded
    owner = torch.arange(12) // 4
    position = 3 - torch.arange(12) % 4  # each rank stores its vertices in reverse order
    held = torch.tensor([[v, -v] for v in range(12) if owner[v] == me][::-1], dtype=torch.float32)
    store, out = RowStore(held, position), {"rank": me}
    asks = {"mixed": {0: [5, 0, 9, 5, 3], 1: [4, 7, 4, 0, 11], 2: [1, 6, 0]}[me],
            "own or none": {0: [3, 1, 3], 1: [], 2: [8]}[me]}  # no rank asks another: counts still exchanged
    for case, ids in asks.items():
        ids_t = torch.tensor(ids, dtype=torch.int64)
        rows, stats = store.pull(ids_t, owner[ids_t])
        out[case] = {"ids": ids, "rows": rows.numpy(), "timed": stats.end_s >= stats.start_s,
                     "stats": (stats.num_rows, stats.request_bytes, stats.reply_bytes), "to_self": list(to_self)}
        to_self.clear()
    comm.all_to_all_single = exchange
    everyone = comm.gather_object(out)
    return {"ranks": everyone} if everyone is not None else {}
