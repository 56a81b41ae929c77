"""Shared by the fidelity benchmarks (bench_whatif.py, bench_regret.py, bench_memory.py, bench_evaluation.py,
bench_calibration.py, bench_neutronstar.py, bench_hongtu.py): run a plan for real, locally or on the emulated cluster,
several times, and summarise the epoch times; probe this machine or the emulated cluster once per setting; build a
benchmark's plan; summarise its prediction errors.

Not a benchmark itself. Every figure it returns is measured; nothing is fitted here.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

os.environ.setdefault("DGLBACKEND", "pytorch")

BUSY_WAIT_S = 600.0
"""How long a run waits for another process's emulated cluster to go away before giving up."""


@dataclass
class Measured:
    """Epoch times of repeated runs of one configuration (seconds; each run's own median epoch)."""

    runs_s: list[float] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)

    @property
    def median_s(self) -> float:
        return statistics.median(self.runs_s)

    @property
    def spread(self) -> float:
        """(max - min) / median of the runs: how much the machine moved the measurement (0 with one run)."""
        return (max(self.runs_s) - min(self.runs_s)) / self.median_s if len(self.runs_s) > 1 else 0.0

    @property
    def rerun_error(self) -> float:
        """Mean over the runs of ``|run / median of the other runs - 1|`` (nan with one run): how far the same
        configuration measured once more lands from the rest, the error a prediction equal to one run scores."""
        if len(self.runs_s) < 2:
            return float("nan")
        others = [statistics.median(self.runs_s[:i] + self.runs_s[i + 1:]) for i in range(len(self.runs_s))]
        return statistics.fmean(abs(run / other - 1.0) for run, other in zip(self.runs_s, others))

    @property
    def median_run(self) -> dict[str, Any]:
        """The ``run --json`` object of the run whose epoch time is the median (the lower middle of an even
        count): the run the point's statistic describes."""
        order = sorted(range(len(self.runs_s)), key=self.runs_s.__getitem__)
        return self.results[order[(len(order) - 1) // 2]]


def plan_for(cluster: Any, workload: str, strategy: str, knobs: dict[str, Any], nprocs: int, epochs: int,
             gpus_per_machine: int = 1) -> Any:
    """The plan ``gnnplan run --nprocs nprocs --epochs epochs --gpus-per-machine G`` runs for workload preset
    ``workload`` with ``strategy`` and ``knobs`` on ``cluster``: ``nprocs / G`` machines of ``G`` workers each on
    this box (:func:`executor.runner.resolved_plan`).

    Raises:
        SpecError: what ``gnnplan run`` refuses (:func:`executor.runner.resolved_plan`).
    """
    from gnnplan.executor.runner import resolved_plan
    from gnnplan.simulator.plan import Plan
    from gnnplan.simulator.workload.spec import load_workload

    plan = Plan(strategy=strategy, knobs=knobs, num_workers=nprocs, cluster=cluster, workload=load_workload(workload))
    return resolved_plan(plan, nprocs // gpus_per_machine, gpus_per_machine, epochs)


def error_summary(label: str, errors: list[float]) -> str:
    """``label: min .. max, mean |error| m`` of relative prediction errors (fractions, printed as percentages)."""
    return (f"{label}: {min(errors):+.1%} .. {max(errors):+.1%}, mean |error| "
            f"{statistics.fmean(abs(e) for e in errors):.1%}")


def run_once(plan: Any, trace_dir: str, epochs: int | None, limits: Any | None = None) -> dict[str, Any]:
    """One real run: on the emulated cluster when ``limits`` is given (waiting while another process owns it),
    else with local worker processes."""
    if limits is None:
        from gnnplan.executor.runner import run_plan

        return run_plan(plan, nprocs=plan.num_workers, epochs=epochs, trace_dir=trace_dir, progress=False)
    from gnnplan.executor.emulate import EmulationError
    from gnnplan.executor.emulated_run import run_emulated

    deadline = time.monotonic() + BUSY_WAIT_S
    while True:
        try:
            return run_emulated(plan, epochs=epochs, trace_dir=trace_dir, limits=limits, timeout_s=1800)
        except EmulationError as exc:
            if "is running" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(5.0)


def probe_emulated_cluster(bandwidth: float | None, quick: bool, cpu_quota: float | None = None) -> Any:
    """``gnnplan probe --emulate`` of 2 machines x 1 worker at ``bandwidth`` (None = unshaped), as a spec."""
    from gnnplan.executor.emulate import EmulationError, MachineLimits
    from gnnplan.executor.probe_emulated import probe_emulated
    from gnnplan.simulator.hardware.spec import cluster_from_dict

    deadline = time.monotonic() + BUSY_WAIT_S
    while True:
        try:
            return cluster_from_dict(probe_emulated(2, 1, MachineLimits(bandwidth, cpu_quota), quick=quick))
        except EmulationError as exc:
            if "is running" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(5.0)


def probe_local_cluster(quick: bool, num_workers: int = 2, gpus_per_machine: int = 1) -> Any:
    """``gnnplan probe --workers num_workers --gpus-per-machine gpus_per_machine`` of this machine (by default 2
    worker processes, as the main job's), as a spec; nothing written."""
    from gnnplan.executor.probe import probe_machine
    from gnnplan.simulator.hardware.spec import cluster_from_dict

    return cluster_from_dict(probe_machine(num_workers=num_workers, quick=quick, gpus_per_machine=gpus_per_machine))


def cluster_of_this_machine(ref: str, num_workers: int = 2, gpus_per_machine: int = 1) -> Any:
    """The cluster a benchmark predicts its runs on this machine with, uncalibrated: ``ref`` (its ``--cluster``)
    loaded, except the preset ``local`` when this machine has not been probed (no ``presets/local.yaml`` in the
    gnnplan home): the package's ``local`` is an example measured on the development machine of its date, not
    necessarily this one (2026-11-29: the shipped copy had been measured on another CPU, 2x slower at matmul), so
    this machine is probed now (:func:`probe_local_cluster`, ~40 s; nothing written). Prints where the cluster came
    from."""
    from gnnplan.simulator.hardware.spec import load_cluster, preset_dirs

    if ref == "local" and not (preset_dirs()[0] / "local.yaml").is_file():
        print(f"cluster: this machine has no `gnnplan probe` in {preset_dirs()[0]}; probing it now "
              f"({num_workers} workers, {gpus_per_machine} per machine)", flush=True)
        return probe_local_cluster(False, num_workers, gpus_per_machine)
    cluster = load_cluster(ref)
    print(f"cluster: {ref} ({cluster.gpu.model})", flush=True)
    return cluster


def measure(plans: dict[str, Any], repeats: int, trace_dir: str, epochs: int | None,
            limits: Any | None = None, say: Any = print, after_round: Any = None) -> dict[str, Measured]:
    """Run every plan ``repeats`` times, interleaved (repeat 1 of all, then repeat 2, ...), so a burst of load
    from other processes, or a slow period of this shared virtual machine, spoils one run of several plans rather
    than every run of one. ``limits``: the emulated machines' limits for every plan, or a mapping from plan label
    to its limits (None: local worker processes). ``after_round(r, measured)`` is called after round r (0-based)
    with the runs so far."""
    out = {label: Measured() for label in plans}
    for r in range(repeats):
        for label, plan in plans.items():
            res = run_once(plan, trace_dir, epochs, limits.get(label) if isinstance(limits, dict) else limits)
            out[label].runs_s.append(float(res["epoch_time_s"]))
            out[label].results.append(res)
            say(f"  run {r + 1}/{repeats} {label}: {res['epoch_time_s'] * 1e3:.1f} ms/epoch")
        if after_round is not None:
            after_round(r, out)
    return out


def load_average() -> str:
    """The 1-minute load average (other processes share this machine's cores)."""
    return f"{os.getloadavg()[0]:.2f}"
