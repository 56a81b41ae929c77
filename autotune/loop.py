"""The main job, closed loop: tune on the simulator, run the best plan for real, calibrate the simulator from the
run's trace, and report prediction errors on data no fit saw: the uncalibrated prediction, and the held-out
epochs of the run predicted by a calibration on its other epochs (:mod:`simulator.calibrate_holdout`). The
calibrated cluster written is fitted on all measured epochs; no error is computed on the epochs it was fitted
to."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gnnplan.autotune.planning import calibrate_traces, tune_to_plan
from gnnplan.autotune.report import background_note, epochs_phrase, fmt_bytes, fmt_s, pct, transient_lines
from gnnplan.autotune.report_page import write_loop_outputs
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.spec import load_cluster
from gnnplan.simulator.io import atomic_write_json
from gnnplan.simulator.plan import load_plan
from gnnplan.simulator.workload.spec import load_workload


def main_job(cluster_ref: str, workload_ref: str, trials: int, nprocs: int, epochs: int | None,
             storage: str | None, out_dir: Path, say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Tune, run, calibrate and report.

    Args:
        cluster_ref, workload_ref: preset names or YAML paths (default ``local`` and ``cora-sage``).
        trials: tuner trials.
        nprocs: worker processes for the real run; must equal the cluster's worker count.
        epochs: epochs of the real run (None = the workload's).
        storage: Optuna storage URL (None = default SQLite file).
        out_dir: receives plan.yaml, the trace, <cluster>-calibrated.yaml, report.json, and the plan's
            predicted trace predicted.json and the HTML report report.html (:mod:`autotune.report_page`).
        say: progress messages (None = silent).

    Returns:
        ``{plan, trace, calibrated_cluster, measured_epoch_time_s, predicted_before_s, error_before_fraction,
        memory: {measured_host_bytes, predicted_host_bytes_before, error_before_fraction} or None, evaluation:
        {measured_s, predicted_before_s, error_before_fraction} or None, held_out: {rows, reason}, run, tune,
        calibration, predicted_trace, report_html}``; ``held_out.rows`` are
        the run's held-out epochs (:func:`simulator.calibrate_holdout.held_out_epochs`), empty with a ``reason``
        when the run has too few epochs.

    Raises:
        SpecError: bad input (a dataset card, which has no graph to train on, among it), or nprocs inconsistent
            with the cluster; raised before anything is written.
    """
    from gnnplan.executor.runner import check_trainable, default_gpus_per_machine, run_plan
    from gnnplan.simulator.api import simulate

    tell = say or (lambda _msg: None)
    cluster, workload = load_cluster(cluster_ref), load_workload(workload_ref)
    check_trainable(workload)  # before tuning: the run step would refuse it after the study and plan are written
    if cluster.num_gpus != nprocs:
        raise SpecError(f"--nprocs: {nprocs} differs from cluster {cluster.name}'s {cluster.num_gpus} workers "
                        f"(run `gnnplan probe --workers {nprocs}` for a matching local cluster)")
    out_dir.mkdir(parents=True, exist_ok=True)
    tell(f"[1/4] tuning {workload.name} on {cluster.name} ({trials} trials)")
    tuned = tune_to_plan(cluster, workload, None, trials, storage, None, False, 0, out_dir / "plan.yaml")
    plan = load_plan(tuned["plan"])
    tell(f"      best: {plan.strategy} {plan.knobs} -> predicted {fmt_s(plan.prediction['epoch_time_s'])} per epoch")
    tell(f"[2/4] running the plan with {nprocs} workers")
    run = run_plan(plan, nprocs=nprocs, epochs=epochs, trace_dir=str(out_dir), progress=say is not None,
                   gpus_per_machine=default_gpus_per_machine(plan, nprocs))  # the layout predicted
    tell(f"      measured {fmt_s(run['epoch_time_s'])} per epoch (the median of its measured epochs), test accuracy "
         f"{run['test_accuracy']:.4f}")
    load = background_note(run.get("background"))
    if load:
        tell(f"      note: {load}")
    tell("[3/4] calibrating the simulator from the trace")
    from gnnplan.simulator.calibrate import calibrated_name

    cal_path = out_dir / f"{calibrated_name(cluster.name)}.yaml"
    cal = calibrate_traces([run["trace"]], cluster, cal_path)
    tell("[4/4] held-out check: the run's odd epochs predicted by a calibration on its even epochs")
    predicted = simulate(cluster, workload, plan.strategy, plan.knobs)
    before = predicted.epoch_time_s
    meas = float(run["epoch_time_s"])
    held = cal["held_out"]["epochs"]
    memory = _memory_check(run, float(predicted.peak_memory_bytes["host"]))
    if memory is not None:
        tell(f"      peak host memory per machine: measured {fmt_bytes(memory['measured_host_bytes'])}, predicted "
             f"{fmt_bytes(memory['predicted_host_bytes_before'])} before calibration "
             f"({pct(memory['predicted_host_bytes_before'], memory['measured_host_bytes'])}); the calibrated "
             "cluster's host.process_bytes is fitted to this run, so it predicts other configurations, not this one")
    evaluation = _evaluation_check(run, predicted.evaluation_time_s)
    if evaluation is not None:
        tell(f"      evaluation after each epoch (not in the epoch time): measured {fmt_s(evaluation['measured_s'])} "
             "(the median over the run's measured epochs), "
             f"predicted {fmt_s(evaluation['predicted_before_s'])} before calibration "
             f"({pct(evaluation['predicted_before_s'], evaluation['measured_s'])})")
        for row in held["rows"]:
            if row.get("evaluation"):
                ev = row["evaluation"]
                tell(f"      evaluation after the held-out {epochs_phrase(row['held_out_epochs'])}: measured "
                     f"{fmt_s(ev['measured_s'])} (their median), predicted {fmt_s(ev['predicted_s'])} by the "
                     f"calibration on {epochs_phrase(row['fit_epochs'])} (held-out error "
                     f"{pct(ev['predicted_s'], ev['measured_s'])})")
    for line in transient_lines(held):
        tell(f"      {line}")
    out = {"plan": tuned["plan"], "trace": run["trace"], "calibrated_cluster": str(cal_path),
           "measured_epoch_time_s": meas, "predicted_before_s": before, "error_before_fraction": (before - meas) / meas,
           "memory": memory, "evaluation": evaluation,
           "held_out": {"rows": held["rows"], "reason": "; ".join(held["not_held_out"].values()) or None,
                        "transient": held.get("transient", {})},
           "run": run, "tune": {k: tuned[k] for k in ("study", "storage", "num_trials_total", "best")},
           "calibration": cal}
    atomic_write_json(out_dir / "report.json", out)
    out.update({k: str(v) for k, v in write_loop_outputs(out_dir).items()})  # predicted.json, report.html
    return out


def _evaluation_check(run: dict[str, Any], predicted_s: float | None) -> dict[str, float] | None:
    """The run's measured evaluation time (``evaluation_time_s``, after each epoch) against the uncalibrated
    estimate (:mod:`simulator.strategies.inference_time`; nothing was fitted to it), None when either is missing
    (a strategy that does not evaluate by layer-wise inference)."""
    measured = run.get("evaluation_time_s")
    if not measured or predicted_s is None:
        return None
    return {"measured_s": float(measured), "predicted_before_s": float(predicted_s),
            "error_before_fraction": float(predicted_s) / float(measured) - 1.0}


def _memory_check(run: dict[str, Any], predicted_host_bytes: float) -> dict[str, float] | None:
    """The run's measured peak host memory against the uncalibrated prediction (a prediction: nothing was fitted
    to the run yet), None when the run measured none."""
    measured = (run.get("peak_memory_bytes") or {}).get("host")
    if not measured:
        return None
    return {"measured_host_bytes": float(measured), "predicted_host_bytes_before": predicted_host_bytes,
            "error_before_fraction": predicted_host_bytes / float(measured) - 1.0}
