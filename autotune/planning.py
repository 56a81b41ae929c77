"""From a tuning study to a plan file, and from traces to a calibrated cluster file (the CLI's workhorses)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import optuna

from gnnplan.autotune.candidates import Candidate
from gnnplan.autotune.draws import draw_winner, on_draws
from gnnplan.autotune.study import (
    TuneRequest,
    best_result,
    default_storage,
    eligible_strategies,
    ranked_trials,
    run_study,
)
from gnnplan.simulator.hardware.spec import ClusterSpec
from gnnplan.simulator.io import atomic_write_yaml
from gnnplan.simulator.plan import Plan, save_plan, with_prediction
from gnnplan.simulator.workload.datasets import resolve_dataset
from gnnplan.simulator.workload.proxy_draws import requested_draws
from gnnplan.simulator.workload.spec import WorkloadSpec


def tune_to_plan(cluster: ClusterSpec, workload: WorkloadSpec, strategies: list[str] | None, trials: int,
                 storage: str | None, study_name: str | None, tune_batch_size: bool, seed: int,
                 output: Path, progress: bool = False, allow_model_change: bool = False,
                 proxy_draws: int = 1) -> dict[str, Any]:
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
        allow_model_change: also compare the workload with its model swapped between message passing and
            pre-propagation (:mod:`autotune.candidates`); the plan then carries the chosen model.
        proxy_draws: R > 1 on a dataset card: the best configuration of every strategy (and model) is simulated
            again on R - 1 more draws of the card's proxy (:func:`draw_best_rows`).

    Returns:
        ``{study, storage, num_trials_total, best, ranked, plan, note}``, and with ``proxy_draws`` > 1
        ``proxy_draws`` (:func:`draw_best_rows`).

    Raises:
        SpecError: bad strategies, storage, dataset, or no feasible configuration; ``proxy_draws`` below 1, or
            above 1 on a dataset that is not a card.
    """
    resolve_dataset(workload.dataset)
    refs = requested_draws(workload.dataset, proxy_draws)
    names = eligible_strategies(workload, strategies, allow_model_change)
    req = TuneRequest(cluster, workload, names, trials, storage, study_name, tune_batch_size, seed,
                      allow_model_change)
    study = run_study(req, progress=progress)
    best, chosen = best_result(study, workload)
    plan = with_prediction(Plan(strategy=best["strategy"], knobs=best["knobs"], num_workers=cluster.num_gpus,
                                cluster=cluster, workload=chosen),
                           {**best, "study": study.study_name})  # the report finds its study
    save_plan(output, plan)
    ranked = ranked_trials(study)
    out = {"study": study.study_name, "storage": storage or default_storage(), "num_trials_total": len(study.trials),
           "best": best, "ranked": ranked, "plan": str(output),
           "model_changed": chosen.model.arch != workload.model.arch,
           "note": _note(req, workload, chosen, sampled_labels(study), strategies)}
    if refs is not None:
        out["proxy_draws"] = draw_best_rows(cluster, list(req.candidates().values()), ranked, refs)
    return out


def draw_best_rows(cluster: ClusterSpec, cands: Sequence[Candidate], ranked: list[dict[str, Any]],
                   refs: Sequence[str]) -> dict[str, Any]:
    """The best feasible row of every strategy and model in ``ranked`` (:func:`autotune.study.ranked_trials`)
    simulated again on the proxy draws ``refs`` (:func:`autotune.draws.on_draws`; those rows gain its keys).

    Returns:
        ``{draws, best_wins, num_best_rows}``: the draw numbers, on how many of them the best row (rank 1) is the
        fastest of those rows, and how many rows (strategies and models) were simulated again.
    """
    seen = set()
    drawn = []
    for row in ranked:
        key = (row["strategy"], row.get("model", ""))
        if not row["feasible"] or key in seen:
            continue
        seen.add(key)
        cand = next(c for c in cands if c.strategy == row["strategy"] and c.workload.model.arch == row["model"])
        row.update(on_draws(cluster, cand.workload, row["strategy"], row, refs))
        drawn.append(row)
    wins = sum(bool(drawn) and draw_winner(drawn, d, "rank") == drawn[0]["rank"] for d in range(len(refs)))
    return {"draws": drawn[0]["proxy_draws"] if drawn else [], "best_wins": wins, "num_best_rows": len(drawn)}


def sampled_labels(study: optuna.Study) -> set[str]:
    """The candidate labels (the ``strategy`` parameter) of the study's completed trials."""
    return {str(t.params.get("strategy")) for t in study.get_trials(deepcopy=False,
                                                                    states=(optuna.trial.TrialState.COMPLETE,))}


def _note(req: TuneRequest, workload: WorkloadSpec, chosen: WorkloadSpec, tried: set[str],
          asked: list[str] | None = None) -> str:
    """What was compared (the candidates the study sampled, ``tried``: their strategy labels, and those it never
    sampled), which of the strategies ``asked`` for (None: every registered one) train otherwise and were not
    compared, and whether the plan trains a different model than the workload named."""
    from gnnplan.autotune.candidates import candidates
    from gnnplan.simulator.strategies import STRATEGIES

    labels = ", ".join(c for c in req.candidates() if c in tried)
    swaps = any(c.model_changed for c in candidates(workload, None, True))  # does a model change apply here?
    if not req.allow_model_change:
        runnable = {c.strategy for c in req.candidates().values()}
        other = [s for s in (asked or STRATEGIES) if s not in runnable]
        hint = "; --allow-model-change compares those that train another model, SGC or SIGN" if swaps else ""
        note = f"compared {labels} for {workload.training.mode} training of {workload.model.arch}" + (
            f" (not compared: {', '.join(other)}, of other training semantics{hint})" if other else "")
    else:
        note = f"compared {labels} (model changes allowed" + ("" if swaps else (
            f", but none applies to {workload.training.mode} training: SGC and SIGN train mini-batches of "
            "pre-propagated features (ppgnn)")) + ")"
    if chosen.model.arch != workload.model.arch:
        note += (f"; the plan trains {chosen.model.arch} instead of {workload.model.arch}: a different model, "
                 "whose accuracy differs")
    missing = [c for c in req.candidates() if c not in tried]
    if missing:
        note += f"; no trial of this study sampled {', '.join(missing)}: raise --trials to compare them"
    return note


def calibrate_traces(traces: list[str], cluster: ClusterSpec, output: Path) -> dict[str, Any]:
    """Fit the cluster's parameters to recorded executor traces and write the calibrated cluster.

    Returns:
        ``{output, **report}`` with the report of :func:`simulator.calibrate.calibrate` (``parameters``,
        ``traces``, ``held_out``, ``fit``).

    Raises:
        SpecError: a trace is missing or malformed, given twice (the same file or the same content), or not a
            measured trace (written by the simulator).
    """
    from gnnplan.simulator.calibrate import calibrate
    from gnnplan.simulator.trace import read_measured

    calibrated, rep = calibrate({str(t): trace for t, trace in read_measured(traces)}, cluster)
    atomic_write_yaml(output, calibrated.to_yaml_dict())
    return {"output": str(output), **rep}
