"""From a tuning study to a plan file, and from traces to a calibrated cluster file (the CLI's workhorses)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autotune.study import TuneRequest, best_result, default_storage, eligible_strategies, ranked_trials, run_study
from simulator.hardware.spec import ClusterSpec
from simulator.io import atomic_write_yaml
from simulator.plan import Plan, save_plan
from simulator.workload.datasets import resolve_dataset
from simulator.workload.spec import WorkloadSpec


def tune_to_plan(cluster: ClusterSpec, workload: WorkloadSpec, strategies: list[str] | None, trials: int,
                 storage: str | None, study_name: str | None, tune_batch_size: bool, seed: int,
                 output: Path, progress: bool = False) -> dict[str, Any]:
    """Run a study, rank its configurations and write the best as a plan.

    Args:
        cluster, workload: what to tune for.
        strategies: allowed strategy names (None = every strategy that supports the workload's mode).
        trials: trials to add to the study in this process.
        storage: Optuna storage URL (None = the default SQLite file).
        study_name: None = derived from the inputs, so a repeated call resumes the same study.
        tune_batch_size: whether the batch size may change.
        seed: sampler seed.
        output: plan YAML path (written atomically, only after the study succeeded).
        progress: show Optuna's progress bar.

    Returns:
        ``{study, storage, num_trials_total, best, ranked, plan, note}``.

    Raises:
        SpecError: bad strategies, storage, dataset, or no feasible configuration.
    """
    resolve_dataset(workload.dataset)
    names = eligible_strategies(workload, strategies)
    req = TuneRequest(cluster, workload, names, trials, storage, study_name, tune_batch_size, seed)
    study = run_study(req, progress=progress)
    best = best_result(study)
    plan = Plan(strategy=best["strategy"], knobs=best["knobs"], num_workers=cluster.num_gpus, cluster=cluster,
                workload=workload, prediction=best)
    save_plan(output, plan)
    return {"study": study.study_name, "storage": storage or default_storage(), "num_trials_total": len(study.trials),
            "best": best, "ranked": ranked_trials(study), "plan": str(output),
            "note": f"compared {', '.join(names)} for {workload.training.mode} training "
                    "(strategies with other training semantics are not compared)"}


def calibrate_traces(traces: list[str], cluster: ClusterSpec, output: Path) -> dict[str, Any]:
    """Fit the cluster's effective parameters to recorded executor traces and write the calibrated cluster.

    Returns:
        ``{output, parameters: {name: {before, after}}, runs: [{trace, measured_epoch_time_s,
        predicted_before_s, predicted_after_s}]}``.

    Raises:
        SpecError: a trace is missing or malformed.
    """
    from simulator.calibrate import calibrate
    from simulator.trace import read_trace

    loaded = {str(t): read_trace(t) for t in traces}
    calibrated, rep = calibrate(loaded, cluster)
    atomic_write_yaml(output, calibrated.to_yaml_dict())
    return {"output": str(output), **rep}
