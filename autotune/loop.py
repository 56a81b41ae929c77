"""The main job, closed loop: tune on the simulator, run the best plan for real, calibrate the simulator from the
run's trace, and report the prediction error before and after calibration."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gnnplan.autotune.planning import calibrate_traces, tune_to_plan
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
        out_dir: receives plan.yaml, the trace, <cluster>-calibrated.yaml and report.json.
        say: progress messages (None = silent).

    Returns:
        ``{plan, trace, calibrated_cluster, measured_epoch_time_s, predicted_before_s, predicted_after_s,
        error_before_fraction, error_after_fraction, run, tune}``.

    Raises:
        SpecError: bad input, or nprocs inconsistent with the cluster.
    """
    from gnnplan.executor.runner import run_plan
    from gnnplan.simulator.api import simulate

    tell = say or (lambda _msg: None)
    cluster, workload = load_cluster(cluster_ref), load_workload(workload_ref)
    if cluster.num_gpus != nprocs:
        raise SpecError(f"--nprocs: {nprocs} differs from cluster {cluster.name}'s {cluster.num_gpus} workers "
                        f"(run `gnnplan probe --workers {nprocs}` for a matching local cluster)")
    out_dir.mkdir(parents=True, exist_ok=True)
    tell(f"[1/4] tuning {workload.name} on {cluster.name} ({trials} trials)")
    tuned = tune_to_plan(cluster, workload, None, trials, storage, None, False, 0, out_dir / "plan.yaml")
    plan = load_plan(tuned["plan"])
    tell(f"      best: {plan.strategy} {plan.knobs} -> predicted {plan.prediction['epoch_time_s']:.4f} s/epoch")
    tell(f"[2/4] running the plan with {nprocs} workers")
    run = run_plan(plan, nprocs=nprocs, epochs=epochs, trace_dir=str(out_dir), progress=say is not None)
    tell(f"      measured {run['epoch_time_s']:.4f} s/epoch, test accuracy {run['test_accuracy']:.4f}")
    tell("[3/4] calibrating the simulator from the trace")
    cal_path = out_dir / f"{cluster.name}-calibrated.yaml"
    cal = calibrate_traces([run["trace"]], cluster, cal_path)
    tell("[4/4] predicting again with the calibrated cluster")
    before = simulate(cluster, workload, plan.strategy, plan.knobs).epoch_time_s
    after = simulate(load_cluster(cal_path), workload, plan.strategy, plan.knobs).epoch_time_s
    meas = float(run["epoch_time_s"])
    out = {"plan": tuned["plan"], "trace": run["trace"], "calibrated_cluster": str(cal_path),
           "measured_epoch_time_s": meas, "predicted_before_s": before, "predicted_after_s": after,
           "error_before_fraction": (before - meas) / meas, "error_after_fraction": (after - meas) / meas,
           "run": run, "tune": {k: tuned[k] for k in ("study", "storage", "num_trials_total", "best")},
           "calibration": cal}
    atomic_write_json(out_dir / "report.json", out)
    return out
