"""``run_plan``: train a plan for real on N local worker processes, traced (``gnnplan run PLAN``).

Every rank runs :func:`rank_main`: it builds the strategy's trainer, trains the epochs, evaluates validation
and test accuracy after each epoch (distributed layer-wise inference, not part of the epoch time), and sends
its spans to rank 0, which writes ONE Chrome trace ``<trace_dir>/<workload>-<strategy>-<timestamp>.json`` with
metadata {plan, results, versions, num_workers, cluster, workload, strategy, knobs} and returns the results.

Results (DESIGN.md, ``run --json``): ``epoch_time_s`` (median over measured epochs: all but the first when there are
at least 3, the first being warm-up, and of a run whose controller explored configurations only the epochs in the
last one, :func:`summarise`), ``epoch_times_s``, ``loss`` (mean training cross-entropy of the last epoch),
``val_accuracy``, ``test_accuracy`` (after the last epoch), ``evaluation_time_s`` (median over measured epochs of
the evaluation's wall time, the slowest rank's: not part of the epoch time), ``bytes_per_epoch{pcie, nvlink,
network, storage}`` (mean over measured epochs, summed over ranks: pcie = feature bytes copied to the device, local
and remote misses; network = bytes every rank sent through :mod:`executor.comm` to ranks of other machines, i.e.
feature requests and replies and the gradient all-reduce; what ranks sent to ranks of their own machine is counted
on NVLink, or PCIe without it, as the simulator prices it: :func:`link_bytes`), ``peak_memory_bytes{gpu, host}``
(the largest over measured epochs of an epoch's peak, its training or the evaluation after it, as ``simulate
--json`` predicts it: one GPU's, None without CUDA, and one machine's resident host memory, :mod:`executor.memory`;
each phase's in ``peak_memory_phases{training, evaluation}``), ``background`` (what else ran on this machine
during the measured epochs, on rank 0's machine: {cores, other_cores, steal_fraction, max_other_cores, busy_epochs},
:mod:`executor.run_load`; None where ``/proc`` cannot be read), ``trace``, and more (``epochs`` per-epoch records,
``seeds_per_s``, ``num_iterations``, ``threads``: rank 0's thread pool sizes {intra_op, inter_op, dgl} after the
run, its share of the cores (:mod:`executor.threads`), ...).

On this machine the ``nprocs`` workers are ``nprocs`` machines with one worker each (common.md), or with
``gpus_per_machine`` G, ``nprocs / G`` machines of G: the graph is partitioned into that many parts; the plan
recorded in the trace has that cluster shape.

Faults and checkpoints: a worker that raises, dies or stops responding ends the run with ONE line naming the rank
and the cause (:class:`executor.launch.WorkerError`, after ``collective_timeout_s`` for a hang); Ctrl-C or
SIGTERM stops every worker. Either way the run leaves no partial file: atomic writes' temporary files in the
trace folder and unfinished checkpoint folders are removed. With ``checkpoint_every`` every rank saves model,
optimizer and RNG state every N epochs (:mod:`executor.checkpoint`); ``resume`` continues from the newest
complete checkpoint and ends with the results, trace and weights of the uninterrupted run (``resumed_from_epoch``
in the results says where it picked up).
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import socket
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from gnnplan.executor import checkpoint, comm, faults, run_load
from gnnplan.executor.checkpoint import Checkpointing
from gnnplan.executor.data import Topology
from gnnplan.executor.launch import run_in_process, spawn
from gnnplan.executor.memory import PHASES, EpochPeak, larger_peaks, machine_peaks
from gnnplan.executor.run_load import EpochLoad
from gnnplan.executor.strategies import get_executor
from gnnplan.executor.strategies.base import EpochStats
from gnnplan.executor.threads import current_threads
from gnnplan.executor.trace import Recorder, now, save, trace_path
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.collectives import intra_machine_link
from gnnplan.simulator.plan import Plan
from gnnplan.simulator.strategies import get_strategy
from gnnplan.simulator.strategies.base import batch_size_of
from gnnplan.simulator.strategies.contract import check_workload
from gnnplan.simulator.workload.cards import card_name
from gnnplan.simulator.workload.spec import WorkloadSpec

EpochCallback = Callable[[dict[str, Any]], None]


def check_trainable(workload: WorkloadSpec) -> None:
    """Refuse a workload whose dataset is a dataset card: a card holds published statistics, and the simulator's
    proxy graph is no training data.

    Raises:
        SpecError: ``workload.dataset`` is a card (one line naming what run needs).
    """
    if card_name(workload.dataset) is not None:
        raise SpecError(f"workload.dataset: {workload.dataset!r} is a dataset card (statistics only); run needs "
                        "the graph's files: an OGB folder, cora, citeseer or a generator")


def resolved_plan(plan: Plan, num_machines: int, gpus_per_machine: int, epochs: int | None) -> Plan:
    """The plan as it will run: the cluster reshaped to the workers actually started, epochs overridden.

    Raises:
        SpecError: a strategy without executor, invalid knobs, an unsupported workload, fewer seeds per
            iteration than workers, or ``epochs < 1``.
    """
    from gnnplan.simulator.api import coerce_knobs

    module = get_executor(plan.strategy)
    try:  # the knob, its value and what it accepts, as simulate --set says them
        knobs = module.Knobs.model_validate(coerce_knobs(plan.strategy, plan.knobs).model_dump())
    except SpecError as exc:
        raise SpecError(f"plan.{exc}") from None
    check_workload(get_strategy(plan.strategy), plan.workload)
    check_trainable(plan.workload)
    runnable = getattr(module, "check_knobs", None)  # knobs the simulator accepts but the executor cannot run
    if runnable is not None:
        runnable(knobs, plan.workload)
    workers = num_machines * gpus_per_machine
    batch = batch_size_of(knobs, plan.workload)
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
             progress: bool = True, on_epoch: EpochCallback | None = None,
             collective_timeout_s: float = comm.COLLECTIVE_TIMEOUT_S, checkpoint_every: int = 0,
             checkpoint_dir: str | Path | None = None, resume: bool = False,
             gpus_per_machine: int = 1) -> dict[str, Any]:
    """Train ``plan`` on ``nprocs`` local worker processes (gloo on 127.0.0.1; one process runs in this one).

    Args:
        plan: what to run.
        nprocs: worker processes (None = ``plan.num_workers``).
        epochs: epochs (None = the workload's ``num_epochs``).
        trace_dir: folder receiving the trace.
        progress: show a progress bar with one line per epoch on stderr.
        on_epoch: called in this process after every epoch with its record (``epoch, epoch_time_s, loss,
            val_accuracy, test_accuracy, ...``).
        collective_timeout_s: a collective that waits longer than this for a peer fails the run (seconds).
        checkpoint_every: save a checkpoint every N epochs and after the last (0 = never; module docstring).
        checkpoint_dir: the checkpoint folder (default ``<trace_dir>/checkpoints``).
        resume: continue from the newest complete checkpoint in ``checkpoint_dir``.
        gpus_per_machine: the workers form ``nprocs / gpus_per_machine`` machines of this many workers each
            (the plan's cluster is reshaped to it; a machine's workers share its graph and features,
            :mod:`executor.shared`).

    Returns:
        The results (module docstring).

    Raises:
        SpecError: the plan cannot run (see :func:`resolved_plan`), ``nprocs < 1``, ``gpus_per_machine`` not
            dividing it, a bad timeout, or a checkpoint folder that does not fit (:func:`executor.checkpoint.prepare`).
        WorkerError: a worker raised, died or stopped responding (one line).
    """
    n = plan.num_workers if nprocs is None else nprocs
    if n < 1:
        raise SpecError(f"--nprocs: must be >= 1, got {n}")
    if not (0 < collective_timeout_s < float("inf")):
        raise SpecError(f"--collective-timeout: must be a positive number of seconds, got {collective_timeout_s}")
    if gpus_per_machine < 1 or n % gpus_per_machine:
        raise SpecError(f"--gpus-per-machine: must be >= 1 and divide the {n} workers, got {gpus_per_machine}")
    plan = resolved_plan(plan, n // gpus_per_machine, gpus_per_machine, epochs)
    folder = Path(checkpoint_dir) if checkpoint_dir is not None else Path(trace_dir) / "checkpoints"
    saving = checkpoint.prepare(Checkpointing(str(folder), checkpoint_every, resume), plan)
    sink = EpochProgress(plan, progress, on_epoch)
    args, samplers = (plan, str(trace_dir), saving), sampler_processes(plan)
    started = time.time()
    try:
        with faults.sigterm_unwinds():
            if n == 1:
                return run_in_process(rank_main, args, sink, samplers, collective_timeout_s)
            return spawn(rank_main, n, args, sink, samplers, collective_timeout_s, gpus_per_machine)
    except BaseException:
        remove_partial(trace_dir, saving, started)
        raise
    finally:
        sink.close()


def remove_partial(trace_dir: str | Path, saving: Checkpointing, since_s: float) -> None:
    """After a failed or interrupted run: delete the temporary files of atomic writes in the trace folder and
    checkpoint folders that were being written (their complete siblings stay)."""
    faults.remove_partial_files(trace_dir, since_s)
    for tmp in Path(saving.directory).glob("epoch-*/.rank-*.tmp"):
        shutil.rmtree(tmp, ignore_errors=True)


class EpochProgress:
    """One line per epoch on stderr under a tqdm progress bar over epochs (the bar only on a terminal: in a log
    its redraws are noise), and an optional callback."""

    def __init__(self, plan: Plan, show: bool, on_epoch: EpochCallback | None = None) -> None:
        self.show, self.on_epoch = show, on_epoch
        name = plan.workload.name or plan.workload.dataset_name
        self._bar_args = {"total": plan.workload.training.num_epochs, "unit": "epoch", "file": sys.stderr,
                          "desc": f"{name} {plan.strategy} x{plan.num_workers}", "leave": True,
                          "disable": not show or not sys.stderr.isatty()}
        self.bar: Any = None  # drawn at the first epoch: a run failing before it prints only its one-line error

    def __call__(self, record: dict[str, Any]) -> None:
        """Show one epoch's record."""
        from tqdm import tqdm

        line = (f"epoch {record['epoch']:>3}  time {record['epoch_time_s']:.4f} s  loss {record['loss']:.4f}  "
                f"val acc {record['val_accuracy']:.4f}  test acc {record['test_accuracy']:.4f}")
        if self.show:
            if self.bar is None:
                self.bar = tqdm(**self._bar_args)
            self.bar.write(line, file=sys.stderr)
            self.bar.update(1)
        if self.on_epoch is not None:
            self.on_epoch(record)

    def close(self) -> None:
        """Close the bar (if one was drawn)."""
        if self.bar is not None:
            self.bar.close()


def progress_printer(plan: Plan) -> EpochProgress:
    """The progress display of the torchrun entry (rank 0)."""
    return EpochProgress(plan, True)


def rank_main(topo: Topology, emit: Callable[[Any], None], plan: Plan, trace_dir: str,
              saving: Checkpointing | None = None) -> dict[str, Any] | None:
    """What every rank runs: train and evaluate every epoch (from the checkpoint when resuming, saving when due),
    then rank 0 writes the trace.

    Returns:
        On rank 0 the results, elsewhere None.
    """
    started = time.perf_counter()
    saving = saving or Checkpointing("")
    rec = Recorder(topo.rank, shared_origin())
    comm.set_link_rate(plan.cluster.network.bandwidth_bytes_per_s if topo.num_machines > 1 else None)
    trainer = get_executor(plan.strategy).Trainer(topo, plan, rec)
    records: list[dict[str, Any]] = []
    earlier: list[Any] = []  # spans of the epochs before a resumption
    resumed = None
    num_epochs = plan.workload.training.num_epochs
    try:
        if saving.resume:
            resumed = checkpoint.agreed_epoch(saving, topo.rank)
            state = checkpoint.restore(trainer, saving, resumed, topo.rank)
            records, earlier = list(state["records"]), list(state["spans"])
            rec.origin_s -= resume_offset_s(earlier)  # this run's spans follow the earlier ones
        settings = getattr(trainer, "epoch_settings", dict)
        meter = EpochPeak(topo.device, counts_shared=topo.local_rank == 0, in_step=topo.gpus_per_machine > 1)
        load = EpochLoad()
        for epoch in range((resumed + 1) if resumed is not None else 0, num_epochs):
            ran_with = settings()
            load.begin()
            meter.begin()
            stats = trainer.train_epoch(epoch)
            trained = meter.end()
            own_load = load.end()
            meter.begin()
            evaluation_start_s = time.perf_counter()
            acc = trainer.evaluate(epoch)
            evaluated_s = time.perf_counter() - evaluation_start_s
            peaks = dict(zip(PHASES, (trained, meter.end())))
            records.append(epoch_record(epoch, stats, acc, ran_with, peaks, topo.gpus_per_machine, evaluated_s,
                                        own_load))
            if topo.rank == 0:
                emit(records[-1])
            if saving.due(epoch, num_epochs):
                checkpoint.save(trainer, saving, epoch, topo.rank, {"records": records, "spans": earlier + rec.spans()})
    finally:
        trainer.close()
    gathered = comm.gather_object(earlier + rec.spans())
    if gathered is None:
        return None
    result = summarise(plan, records, time.perf_counter() - started)
    result["threads"] = dataclasses.asdict(current_threads())
    result["device"] = device_model(topo.device)
    result["resumed_from_epoch"] = resumed
    if saving.every:
        result["checkpoint_dir"] = saving.directory
    path = trace_path(trace_dir, plan.workload.name or plan.workload.dataset_name, plan.strategy)
    result["trace"] = str(path)
    save(path, [s for spans in gathered for s in spans], trace_metadata(plan, result))
    return result


def device_model(device: torch.device) -> str:
    """What rank 0 computed on: the CUDA device's name, else this machine's CPU model (``/proc/cpuinfo``, as
    ``gnnplan probe`` names it), recorded in a run's results as ``device``; calibration compares it with the
    cluster it fits (a plan for another cluster's GPUs runs on this CPU when there is no CUDA device)."""
    if device.type == "cuda":
        return str(torch.cuda.get_device_name(device))
    from gnnplan.executor.probe_host import cpu_model

    return f"{cpu_model()} (CPU)"


def resume_offset_s(earlier: list[Any]) -> float:
    """Where a resumed run's time line starts (collective): after the latest end of any rank's earlier span."""
    end = max((s.start_s + s.dur_s for s in earlier), default=0.0)
    return comm.max_over_ranks(end)


def shared_origin() -> float:
    """Time 0 of the trace on this rank (collective): rank 0's ``perf_counter()`` reading for ranks on rank 0's
    host (CLOCK_MONOTONIC is shared by a machine's processes, so their time lines align exactly), otherwise
    the rank's own reading right after a barrier (aligned to within the barrier's skew)."""
    comm.barrier()
    mine = now()
    host0, origin0 = comm.broadcast_object((socket.gethostname(), mine))
    return origin0 if host0 == socket.gethostname() else mine


def epoch_record(epoch: int, stats: EpochStats, acc: Any, settings: dict[str, int],
                 peaks: dict[str, tuple[float, float | None]], gpus_per_machine: int,
                 evaluation_s: float, load: list[float] | None = None) -> dict[str, Any]:
    """Combine every rank's epoch statistics, accuracy counts and peak memory (collective): time = slowest rank;
    ``settings`` (the trainer's ``epoch_settings()`` before the epoch, the same on every rank) are kept as
    ``settings``; ``peaks`` are this rank's ``(host, device)`` bytes of the epoch's ``training`` and of the
    ``evaluation`` after it (:class:`executor.memory.EpochPeak`), combined per machine
    (:func:`executor.memory.machine_peaks`) into ``peak_memory_phases{training, evaluation}{gpu, host}`` and
    their larger per memory, ``peak_memory_bytes{gpu, host}`` (the phases run one after the other);
    ``evaluation_s`` is this rank's wall time of the evaluation, ``evaluation_time_s`` the slowest rank's;
    ``load`` this rank's :data:`executor.run_load.FIELDS` over the training epoch, combined into ``background``
    (:func:`executor.run_load.combine`: what else ran on rank 0's machine)."""
    phases = list(peaks)
    load = load if load is not None else [math.nan] * len(run_load.FIELDS)
    mine = torch.tensor(stats.as_list() + [acc.val_correct, acc.val_total, acc.test_correct, acc.test_total,
                                           evaluation_s]
                        + [v for p in phases for v in (peaks[p][0], -1.0 if peaks[p][1] is None else peaks[p][1])]
                        + load, dtype=torch.float64, device=comm.device())
    rows = torch.stack(comm.all_gather(mine)).cpu()
    background = run_load.combine(rows[:, -len(load):].tolist())
    rows = rows[:, :-len(load)]
    total = rows.sum(0).tolist()
    names = list(EpochStats.__dataclass_fields__) + ["val_correct", "val_total", "test_correct", "test_total",
                                                     "evaluation_s"]
    s = dict(zip(names, total))
    memory = {}
    for i, phase in enumerate(phases):
        host, device = rows[:, len(names) + 2 * i], rows[:, len(names) + 2 * i + 1]
        memory[phase] = machine_peaks(host.tolist(), [d if d >= 0 else None for d in device.tolist()],
                                      gpus_per_machine)
    return {"epoch": epoch, **({"settings": dict(settings)} if settings else {}),
            **({"background": background} if background is not None else {}),
            "peak_memory_bytes": larger_peaks(memory.values()), "peak_memory_phases": memory,
            "epoch_time_s": float(rows[:, 0].max()),
            "evaluation_time_s": float(rows[:, names.index("evaluation_s")].max()),
            "loss": s["loss_sum"] / max(s["num_seeds"], 1),
            "val_accuracy": s["val_correct"] / max(s["val_total"], 1),
            "test_accuracy": s["test_correct"] / max(s["test_total"], 1),
            "num_iterations": int(rows[0, names.index("num_iterations")]), "num_seeds": int(s["num_seeds"]),
            "bytes": {"pcie": s["local_bytes"] + s["remote_bytes"], "network": s["network_bytes"],
                      "intra_machine": s["intra_machine_bytes"], "hit": s["hit_bytes"], "remote": s["remote_bytes"]}}


def summarise(plan: Plan, records: list[dict[str, Any]], wall_s: float) -> dict[str, Any]:
    """The ``run --json`` object from the per-epoch records (module docstring): its steady-state figures
    (``epoch_time_s``, ``seeds_per_s``, ``bytes_per_epoch``, and ``peak_memory_bytes`` and each phase's
    ``peak_memory_phases``: the largest of their epochs' peaks) are over ``measured_epochs``, every epoch but the
    first (warm-up) when there are at least 3 and, where a controller changed the configuration between epochs
    (records with ``settings``: hopgnn's merge controller, paper §5.3), only those that ran with the last epoch's
    settings, the configuration the run settled in and the simulator predicts (its exploration epochs are not
    charged)."""
    measured = records[1:] if len(records) >= 3 else records
    settled = [r for r in measured if r.get("settings") == records[-1].get("settings")]
    measured = settled or measured
    epoch_s = statistics.median(r["epoch_time_s"] for r in measured)
    last = records[-1]

    def mean(key: str) -> float:  # records restored from an older checkpoint may lack intra_machine
        return statistics.fmean(r["bytes"].get(key, 0.0) for r in measured)

    evaluated = [r["evaluation_time_s"] for r in measured if "evaluation_time_s" in r]
    # records restored from an older checkpoint may lack the peaks and the evaluation time
    phases = {p: larger_peaks(r["peak_memory_phases"][p] for r in measured if r.get("peak_memory_phases"))
              for p in PHASES}

    return {"strategy": plan.strategy, "knobs": dict(plan.knobs), "num_workers": plan.num_workers,
            "num_epochs": len(records), "num_iterations": last["num_iterations"],
            "epoch_time_s": epoch_s, "epoch_times_s": [r["epoch_time_s"] for r in records],
            "evaluation_time_s": statistics.median(evaluated) if evaluated else None,
            "measured_epochs": [r["epoch"] for r in measured],
            "loss": last["loss"], "val_accuracy": last["val_accuracy"], "test_accuracy": last["test_accuracy"],
            "seeds_per_s": statistics.fmean(r["num_seeds"] for r in measured) / epoch_s,
            "bytes_per_epoch": link_bytes(plan, mean("pcie"), mean("network"), mean("intra_machine")),
            "peak_memory_bytes": larger_peaks(r["peak_memory_bytes"] for r in measured if r.get("peak_memory_bytes")),
            "peak_memory_phases": phases, "background": run_load.summary(measured),
            "epochs": records, "wall_s": wall_s}


def link_bytes(plan: Plan, pcie_bytes: float, network_bytes: float, intra_machine_bytes: float) -> dict[str, float]:
    """``bytes_per_epoch{pcie, nvlink, network, storage}``: the bytes ranks sent to ranks of their own machine go
    to the link the simulator prices them on (:func:`simulator.hardware.collectives.intra_machine_link`: NVLink
    when the cluster has it, else PCIe peer to peer), on top of the feature bytes copied over PCIe."""
    out = {"pcie": pcie_bytes, "nvlink": 0.0, "network": network_bytes, "storage": 0.0}
    out[intra_machine_link(plan.cluster)[1]] += intra_machine_bytes
    return out


def default_gpus_per_machine(plan: Plan, nprocs: int) -> int:
    """The workers per machine a local run of ``plan`` on ``nprocs`` workers takes when none is given: the plan's
    cluster's where it divides ``nprocs``, else 1 (``gnnplan run``, ``gnnplan loop``)."""
    g = plan.cluster.gpus_per_machine
    return g if nprocs % g == 0 else 1


def trace_metadata(plan: Plan, result: dict[str, Any]) -> dict[str, Any]:
    """The trace's metadata object: ``cluster`` and ``workload`` are the specs as objects, as in the simulator's
    predicted traces (before 2026-12-01 a run's ``cluster`` was only its name, a string)."""
    import dgl

    from gnnplan import simulator

    dumped = plan.model_dump(mode="json")
    return {"plan": dumped, "results": result, "num_workers": plan.num_workers,
            "strategy": plan.strategy, "knobs": dict(plan.knobs), "cluster": dumped["cluster"],
            "workload": dumped["workload"], "source": "executor",
            "versions": {"torch": torch.__version__, "dgl": dgl.__version__, "gnnplan": simulator.__version__}}
