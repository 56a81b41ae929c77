"""``run_plan``: train a plan for real on N local worker processes, traced (``gnnplan run PLAN``).

Every rank runs :func:`rank_main`: it builds the strategy's trainer, trains the epochs, evaluates validation
and test accuracy after each epoch (distributed layer-wise inference, not part of the epoch time), and sends
its spans to rank 0, which writes ONE Chrome trace ``<trace_dir>/<workload>-<strategy>-<timestamp>.json`` with
metadata {plan, results, versions, num_workers, cluster, workload, strategy, knobs} and returns the results.

Results (DESIGN.md, ``run --json``): ``epoch_time_s`` (median over measured epochs: all but the first when
there are at least 3, the first being warm-up), ``epoch_times_s``, ``loss`` (mean training cross-entropy of
the last epoch), ``val_accuracy``, ``test_accuracy`` (after the last epoch), ``bytes_per_epoch{pcie, nvlink,
network, storage}`` (mean over measured epochs, summed over ranks: pcie = feature bytes copied to the device,
local and remote misses; network = bytes every rank sent through :mod:`executor.comm`, i.e. feature
requests and replies and the gradient all-reduce), ``trace``, and more (``epochs`` per-epoch records,
``seeds_per_s``, ``num_iterations``, ``threads``: rank 0's thread pool sizes {intra_op, inter_op, dgl} after the
run, its share of the cores (:mod:`executor.threads`), ...).

On this machine the ``nprocs`` workers are ``nprocs`` machines with one worker each (common.md): the graph is
partitioned into ``nprocs`` parts; the plan recorded in the trace has that cluster shape.
"""

from __future__ import annotations

import dataclasses
import socket
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from gnnplan.executor import comm
from gnnplan.executor.data import Topology
from gnnplan.executor.launch import run_in_process, spawn
from gnnplan.executor.strategies import get_executor
from gnnplan.executor.strategies.base import EpochStats
from gnnplan.executor.threads import current_threads
from gnnplan.executor.trace import Recorder, now, save, trace_path
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.plan import Plan
from gnnplan.simulator.strategies import get_strategy
from gnnplan.simulator.strategies.contract import check_workload

EpochCallback = Callable[[dict[str, Any]], None]


def resolved_plan(plan: Plan, num_machines: int, gpus_per_machine: int, epochs: int | None) -> Plan:
    """The plan as it will run: the cluster reshaped to the workers actually started, epochs overridden.

    Raises:
        SpecError: a strategy without executor, invalid knobs, an unsupported workload, fewer seeds per
            iteration than workers, or ``epochs < 1``.
    """
    module = get_executor(plan.strategy)
    try:
        knobs = module.Knobs.model_validate(plan.knobs)
    except ValueError as exc:
        raise SpecError(f"plan.knobs: {str(exc).splitlines()[-1].strip()}") from None
    check_workload(get_strategy(plan.strategy), plan.workload)
    runnable = getattr(module, "check_knobs", None)  # knobs the simulator accepts but the executor cannot run
    if runnable is not None:
        runnable(knobs)
    workers = num_machines * gpus_per_machine
    batch = getattr(knobs, "batch_size", None) or plan.workload.training.batch_size
    if batch < workers:
        raise SpecError(f"training.batch_size: {batch} is smaller than the {workers} workers; use at least {workers}")
    if epochs is not None and epochs < 1:
        raise SpecError(f"--epochs: must be >= 1, got {epochs}")
    data = plan.model_dump(mode="json")
    data["knobs"] = knobs.model_dump(mode="json")
    data["num_workers"] = workers
    data["cluster"].update(num_machines=num_machines, gpus_per_machine=gpus_per_machine)
    if epochs is not None:
        data["workload"]["training"]["num_epochs"] = epochs
    return Plan.model_validate(data)


def sampler_processes(plan: Plan) -> int:
    """Sampler processes each worker of ``plan`` starts: its ``num_sampler_workers`` knob (dp, hopgnn), else 0."""
    return int(plan.knobs.get("num_sampler_workers") or 0)


def run_plan(plan: Plan, nprocs: int | None = None, epochs: int | None = None, trace_dir: str | Path = "traces",
             progress: bool = True, on_epoch: EpochCallback | None = None) -> dict[str, Any]:
    """Train ``plan`` on ``nprocs`` local worker processes (gloo on 127.0.0.1; one process runs in this one).

    Args:
        plan: what to run.
        nprocs: worker processes (None = ``plan.num_workers``).
        epochs: epochs (None = the workload's ``num_epochs``).
        trace_dir: folder receiving the trace.
        progress: show a progress bar with one line per epoch on stderr.
        on_epoch: called in this process after every epoch with its record (``epoch, epoch_time_s, loss,
            val_accuracy, test_accuracy, ...``).

    Returns:
        The results (module docstring).

    Raises:
        SpecError: the plan cannot run (see :func:`resolved_plan`) or ``nprocs < 1``.
    """
    n = plan.num_workers if nprocs is None else nprocs
    if n < 1:
        raise SpecError(f"--nprocs: must be >= 1, got {n}")
    plan = resolved_plan(plan, n, 1, epochs)
    sink = EpochProgress(plan, progress, on_epoch)
    args, samplers = (plan, str(trace_dir)), sampler_processes(plan)
    try:
        if n == 1:
            result = run_in_process(rank_main, args, sink, samplers_per_worker=samplers)
        else:
            result = spawn(rank_main, n, args, sink, samplers_per_worker=samplers)
    finally:
        sink.close()
    return result


class EpochProgress:
    """A tqdm progress bar over epochs on stderr, one line per epoch, and an optional callback."""

    def __init__(self, plan: Plan, show: bool, on_epoch: EpochCallback | None = None) -> None:
        from tqdm import tqdm

        self.show, self.on_epoch = show, on_epoch
        name = plan.workload.name or plan.workload.dataset_name
        self.bar = tqdm(total=plan.workload.training.num_epochs, desc=f"{name} {plan.strategy} x{plan.num_workers}",
                        unit="epoch", file=sys.stderr, disable=not show, leave=True)

    def __call__(self, record: dict[str, Any]) -> None:
        """Show one epoch's record."""
        line = (f"epoch {record['epoch']:>3}  time {record['epoch_time_s']:.4f} s  loss {record['loss']:.4f}  "
                f"val acc {record['val_accuracy']:.4f}  test acc {record['test_accuracy']:.4f}")
        if self.show:
            self.bar.write(line, file=sys.stderr)
            self.bar.update(1)
        if self.on_epoch is not None:
            self.on_epoch(record)

    def close(self) -> None:
        """Close the bar."""
        self.bar.close()


def progress_printer(plan: Plan) -> EpochProgress:
    """The progress display of the torchrun entry (rank 0)."""
    return EpochProgress(plan, True)


def rank_main(topo: Topology, emit: Callable[[Any], None], plan: Plan, trace_dir: str) -> dict[str, Any] | None:
    """What every rank runs: train and evaluate every epoch, then rank 0 writes the trace.

    Returns:
        On rank 0 the results, elsewhere None.
    """
    started = time.perf_counter()
    rec = Recorder(topo.rank, shared_origin())
    trainer = get_executor(plan.strategy).Trainer(topo, plan, rec)
    records = []
    try:
        for epoch in range(plan.workload.training.num_epochs):
            stats = trainer.train_epoch(epoch)
            records.append(epoch_record(epoch, stats, trainer.evaluate()))
            if topo.rank == 0:
                emit(records[-1])
    finally:
        trainer.close()
    gathered = comm.gather_object(rec.spans())
    if gathered is None:
        return None
    result = summarise(plan, records, time.perf_counter() - started)
    result["threads"] = dataclasses.asdict(current_threads())
    path = trace_path(trace_dir, plan.workload.name or plan.workload.dataset_name, plan.strategy)
    result["trace"] = str(path)
    save(path, [s for spans in gathered for s in spans], trace_metadata(plan, result))
    return result


def shared_origin() -> float:
    """Time 0 of the trace on this rank (collective): rank 0's ``perf_counter()`` reading for ranks on rank 0's
    host (CLOCK_MONOTONIC is shared by a machine's processes, so their time lines align exactly), otherwise
    the rank's own reading right after a barrier (aligned to within the barrier's skew)."""
    comm.barrier()
    mine = now()
    host0, origin0 = comm.broadcast_object((socket.gethostname(), mine))
    return origin0 if host0 == socket.gethostname() else mine


def epoch_record(epoch: int, stats: EpochStats, acc: Any) -> dict[str, Any]:
    """Combine every rank's epoch statistics and accuracy counts (collective): time = slowest rank."""
    mine = torch.tensor(stats.as_list() + [acc.val_correct, acc.val_total, acc.test_correct, acc.test_total],
                        dtype=torch.float64, device=comm.device())
    rows = torch.stack(comm.all_gather(mine)).cpu()
    total = rows.sum(0).tolist()
    names = list(EpochStats.__dataclass_fields__) + ["val_correct", "val_total", "test_correct", "test_total"]
    s = dict(zip(names, total))
    return {"epoch": epoch, "epoch_time_s": float(rows[:, 0].max()), "loss": s["loss_sum"] / max(s["num_seeds"], 1),
            "val_accuracy": s["val_correct"] / max(s["val_total"], 1),
            "test_accuracy": s["test_correct"] / max(s["test_total"], 1),
            "num_iterations": int(rows[0, names.index("num_iterations")]), "num_seeds": int(s["num_seeds"]),
            "bytes": {"pcie": s["local_bytes"] + s["remote_bytes"], "network": s["network_bytes"],
                      "hit": s["hit_bytes"], "remote": s["remote_bytes"]}}


def summarise(plan: Plan, records: list[dict[str, Any]], wall_s: float) -> dict[str, Any]:
    """The ``run --json`` object from the per-epoch records (module docstring)."""
    measured = records[1:] if len(records) >= 3 else records
    epoch_s = statistics.median(r["epoch_time_s"] for r in measured)
    last = records[-1]

    def mean(key: str) -> float:
        return statistics.fmean(r["bytes"][key] for r in measured)

    return {"strategy": plan.strategy, "knobs": dict(plan.knobs), "num_workers": plan.num_workers,
            "num_epochs": len(records), "num_iterations": last["num_iterations"],
            "epoch_time_s": epoch_s, "epoch_times_s": [r["epoch_time_s"] for r in records],
            "measured_epochs": [r["epoch"] for r in measured],
            "loss": last["loss"], "val_accuracy": last["val_accuracy"], "test_accuracy": last["test_accuracy"],
            "seeds_per_s": statistics.fmean(r["num_seeds"] for r in measured) / epoch_s,
            "bytes_per_epoch": {"pcie": mean("pcie"), "nvlink": 0.0, "network": mean("network"), "storage": 0.0},
            "epochs": records, "wall_s": wall_s}


def trace_metadata(plan: Plan, result: dict[str, Any]) -> dict[str, Any]:
    """The trace's metadata object."""
    import dgl

    from gnnplan import simulator

    return {"plan": plan.model_dump(mode="json"), "results": result, "num_workers": plan.num_workers,
            "strategy": plan.strategy, "knobs": dict(plan.knobs), "cluster": plan.cluster.name,
            "workload": plan.workload.model_dump(mode="json"), "source": "executor",
            "versions": {"torch": torch.__version__, "dgl": dgl.__version__, "gnnplan": simulator.__version__}}
