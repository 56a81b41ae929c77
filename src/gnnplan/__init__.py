"""gnnplan: predict, choose and run distributed GNN training configurations.

The Python API (the ``gnnplan`` command line wraps the same functions)::

    import gnnplan

    cluster = gnnplan.load_cluster("4x-a100-10gbe")          # preset name, YAML path or ClusterSpec
    workload = gnnplan.load_workload("cora-sage")
    result = gnnplan.simulate(cluster, workload, "dp", {"cache_fraction": 0.2})
    result.epoch_time_s, result.breakdown_s, result.bytes_per_epoch
    summary = gnnplan.tune(cluster, workload, trials=30, output="plan.yaml")       # Optuna study
    measured = gnnplan.run(gnnplan.load_plan("plan.yaml"), nprocs=2, epochs=2)   # real training
    calibrated, report = gnnplan.calibrate(["traces/....json"], cluster)
    sweep = gnnplan.whatif("4x-v100-32gb-100gbib", "rmat100k-sage",
                           ["network.bandwidth_bytes_per_s=1Gbit/s,100Gbit/s"])   # winner per point

Packages (DESIGN.md, "Layout"): :mod:`gnnplan.simulator` (never imports torch, the executor or Optuna at import
time), :mod:`gnnplan.executor` (PyTorch + DGL + torch.distributed; torchrun entry point
``python -m gnnplan.executor.launch``), :mod:`gnnplan.autotune` (Optuna study, loop, CLI). Importing
``gnnplan`` imports only the simulator package's ``__init__``; the API's names load their modules on first use
(:data:`_LAZY`), :func:`tune` imports Optuna and :func:`run` torch when called.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

# DGL picks its tensor backend when first imported and prints a notice when none is set; every gnnplan module that
# imports DGL (sampling, the executor) runs after this package's __init__, so the choice is made once here
os.environ.setdefault("DGLBACKEND", "pytorch")

from gnnplan.simulator import __version__  # noqa: E402

if TYPE_CHECKING:
    from gnnplan.simulator.api import simulate, simulate_on_draws
    from gnnplan.simulator.errors import RunError, SpecError
    from gnnplan.simulator.hardware.spec import ClusterSpec, load_cluster, preset_names
    from gnnplan.simulator.plan import Plan, load_plan
    from gnnplan.simulator.result import SimResult
    from gnnplan.simulator.workload.spec import WorkloadSpec, load_workload

_LAZY = {"simulate": "gnnplan.simulator.api", "simulate_on_draws": "gnnplan.simulator.api",
         "ClusterSpec": "gnnplan.simulator.hardware.spec", "load_cluster": "gnnplan.simulator.hardware.spec",
         "preset_names": "gnnplan.simulator.hardware.spec", "Plan": "gnnplan.simulator.plan",
         "load_plan": "gnnplan.simulator.plan", "SimResult": "gnnplan.simulator.result",
         "WorkloadSpec": "gnnplan.simulator.workload.spec", "load_workload": "gnnplan.simulator.workload.spec",
         "SpecError": "gnnplan.simulator.errors", "RunError": "gnnplan.simulator.errors"}
"""The API's names and the module each comes from, imported on first use (PEP 562 ``__getattr__``): a worker
process that imports ``gnnplan.executor.comm`` then loads neither the simulator's strategies nor SciPy (1.0 s of
its start-up, measured 2026-11-29)."""


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'gnnplan' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

__all__ = ["__version__", "simulate", "simulate_on_draws", "tune", "run", "calibrate", "whatif", "load_cluster",
           "load_workload", "load_plan", "preset_names", "strategy_names", "ClusterSpec", "WorkloadSpec", "Plan",
           "SimResult", "SpecError", "RunError"]


def strategy_names() -> list[str]:
    """Names of the registered strategies (``dp``, ``hopgnn``, ...), sorted."""
    from gnnplan.simulator.strategies import STRATEGIES

    return sorted(STRATEGIES)


def tune(cluster: str | Path | ClusterSpec, workload: str | Path | WorkloadSpec, *,
         strategies: Sequence[str] | None = None, trials: int = 40, storage: str | None = None,
         study_name: str | None = None, tune_batch_size: bool = False, allow_model_change: bool = False,
         seed: int = 0, output: str | Path = "plan.yaml", proxy_draws: int = 1,
         cluster_set: Sequence[str] = ()) -> dict[str, Any]:
    """Search strategies and knobs with Optuna on simulated epoch time and write the best plan (``gnnplan tune``).

    Args:
        cluster, workload: preset names, YAML paths or specs (a workload also as a mapping of its fields).
        cluster_set: ``FIELD=VALUE`` changes to the cluster, unit-aware (``--cluster-set``;
            ``["network.bandwidth_bytes_per_s=25Gbit/s"]``).
        strategies: allowed strategy names (None = every strategy that supports the workload).
        trials: trials added to the study; storage: Optuna storage URL (None = the SQLite file in the gnnplan
            home); study_name: None = derived from the inputs, so a repeated call resumes.
        tune_batch_size, allow_model_change, seed: as the CLI flags.
        output: the plan YAML (written atomically after the study).
        proxy_draws: on a dataset card, each strategy's best configuration is also simulated on the next
            ``proxy_draws - 1`` draws of the card's proxy (``--proxy-draws``).

    Returns:
        ``{study, storage, num_trials_total, best, ranked, plan, model_changed, note}`` (and ``proxy_draws``
        ``{draws, best_wins}`` with ``proxy_draws`` > 1; the redrawn rows carry ``epoch_time_draws_s``).

    Raises:
        SpecError: bad input (a count, seed, strategy list or output path included) or no feasible configuration
            (one line naming the field).
    """
    from gnnplan.autotune import api_args
    from gnnplan.autotune.planning import tune_to_plan
    from gnnplan.simulator.api import with_cluster_set
    from gnnplan.simulator.io import check_output
    from gnnplan.simulator.workload.spec import load_workload

    names = api_args.names("strategies", strategies)
    out = api_args.path("output", output)
    check_output(str(out), "output")  # as the CLI's -o, before the study
    flags = {k: api_args.flag(k, v) for k, v in (("tune_batch_size", tune_batch_size),
                                                 ("allow_model_change", allow_model_change))}
    with api_args.as_arguments("storage", "trials", "seed", "proxy_draws", "output", "cluster_set", "strategies",
                               flags={"study": "study_name", "allow_model_change": "allow_model_change=True"}):
        return tune_to_plan(with_cluster_set(cluster, cluster_set), load_workload(workload), names,
                            api_args.positive_count("trials", trials), api_args.text("storage", storage),
                            api_args.text("study_name", study_name), flags["tune_batch_size"],
                            api_args.seed("seed", seed), Path(str(out)),
                            allow_model_change=flags["allow_model_change"],
                            proxy_draws=api_args.positive_count("proxy_draws", proxy_draws))


def run(plan: Plan | str | Path, *, nprocs: int | None = None, epochs: int | None = None,
        trace_dir: str | Path = "traces", progress: bool = False, collective_timeout_s: float = 60.0,
        checkpoint_every: int = 0, checkpoint_dir: str | Path | None = None, resume: bool = False,
        gpus_per_machine: int | None = None) -> dict[str, Any]:
    """Train a plan for real on local worker processes and write its Chrome trace (``gnnplan run``).

    ``collective_timeout_s``, ``checkpoint_every``, ``checkpoint_dir``, ``resume`` and ``gpus_per_machine`` are
    ``run``'s ``--collective-timeout``, ``--checkpoint-every``, ``--checkpoint-dir``, ``--resume`` and
    ``--gpus-per-machine`` (:func:`gnnplan.executor.runner.run_plan`; ``gpus_per_machine=None``: the plan's
    cluster's where it divides the workers, else 1, as ``gnnplan run``). Where the run's layout or device is not
    the plan's, so that its prediction is not the run's, other processes kept its machine busy, or its batch is
    larger than the training set, a :class:`~gnnplan.executor.run_notes.RunNote` warning says so (the notes
    ``gnnplan run`` prints).

    Returns:
        The ``run --json`` object: ``epoch_time_s`` (median, s), ``epoch_times_s``, ``loss``, ``val_accuracy``,
        ``test_accuracy``, ``bytes_per_epoch``, ``trace`` (path), ``predicted_epoch_time_s`` (the plan's
        prediction, s; None where it is not this run's: :func:`gnnplan.executor.run_notes.prediction_for_run`),
        ``prediction_note`` (why there is none: the plan was edited after its prediction, or the notes say the
        run is another configuration; None when there is one) and ``notes``.

    Raises:
        SpecError: the plan cannot run here; ``plan`` neither a Plan nor a path, ``nprocs``, ``epochs`` or
            ``gpus_per_machine`` not a positive integer, ``trace_dir`` a file.
        RunError: a worker raised, died or stopped responding (one line naming the rank).
    """
    import warnings

    from gnnplan.autotune import api_args
    from gnnplan.autotune.report import background_note
    from gnnplan.executor.run_notes import RunNote, after_run_notes, emulation_note, layout_note
    from gnnplan.executor.runner import default_gpus_per_machine, run_plan
    from gnnplan.simulator.errors import SpecError
    from gnnplan.simulator.plan import Plan, checked_plan, load_plan

    if not isinstance(plan, (Plan, str, Path)):
        raise SpecError(f"plan: a Plan, or a plan YAML's path (got {type(plan).__name__})")
    for name, value in (("nprocs", nprocs), ("epochs", epochs), ("gpus_per_machine", gpus_per_machine)):
        if value is not None:
            api_args.positive_count(name, value)
    trace_dir = api_args.path("trace_dir", trace_dir)  # type: ignore[assignment]
    checkpoint_dir = api_args.path("checkpoint_dir", checkpoint_dir, optional=True)
    collective_timeout_s = api_args.seconds("collective_timeout_s", collective_timeout_s)
    checkpoint_every = api_args.count("checkpoint_every", checkpoint_every)
    progress, resume = api_args.flag("progress", progress), api_args.flag("resume", resume)
    if Path(trace_dir).exists() and not Path(trace_dir).is_dir():
        raise SpecError(f"trace_dir: {str(trace_dir)!r} is a file, not a folder")
    loaded = checked_plan(plan) if isinstance(plan, Plan) else load_plan(plan)
    per_machine = gpus_per_machine or default_gpus_per_machine(loaded, nprocs or loaded.num_workers)
    with api_args.as_arguments("nprocs", "epochs", "trace_dir", "checkpoint_every", "checkpoint_dir",
                               "gpus_per_machine",
                               flags={"collective_timeout": "collective_timeout_s", "resume": "resume=True"}):
        result = run_plan(loaded, nprocs=nprocs, epochs=epochs, trace_dir=trace_dir, progress=progress,
                          collective_timeout_s=collective_timeout_s, checkpoint_every=checkpoint_every,
                          checkpoint_dir=checkpoint_dir, resume=resume, gpus_per_machine=per_machine)
    notes, predicted, why = after_run_notes(loaded, nprocs or loaded.num_workers,
                                            layout_note(loaded, nprocs or loaded.num_workers, per_machine),
                                            emulation_note(loaded, None, False),  # an emulated plan, run here
                                            background_note(result.get("background")))
    for note in notes:
        warnings.warn(note, RunNote, stacklevel=2)
    return {**result, "predicted_epoch_time_s": predicted, "prediction_note": why, "notes": notes}


def whatif(cluster: str | ClusterSpec, workload: str, vary: Sequence[str], *,
           strategies: Sequence[str] | None = None, trials: int = 16, seed: int = 0,
           output: str | Path | None = None, proxy_draws: int = 1, cluster_set: Sequence[str] = (),
           allow_model_change: bool = False) -> dict[str, Any]:
    """Sweep cluster or workload fields over every allowed strategy, knobs tuned per point (``gnnplan whatif``).

    Args:
        cluster, workload: preset names or YAML paths.
        vary: axes as on the command line, e.g. ``["network.bandwidth_bytes_per_s=1Gbit/s,100Gbit/s"]``
            (several make a grid).
        strategies: allowed strategy names (None = every strategy that supports the workload).
        trials: Optuna trials per strategy and point; seed: sampler seed.
        output: folder for ``whatif.csv``, ``whatif.json`` and ``whatif.html`` (None = write nothing).
        proxy_draws: where the dataset is a card, the proxy draws each tuned configuration is simulated on (the
            named draw K and K + 1, ...; ``--proxy-draws``).
        cluster_set: ``FIELD=VALUE`` changes applied to the cluster at every point, unit-aware
            (``["num_machines=4"]``; ``--cluster-set``).
        allow_model_change: let a strategy that trains another model (ppgnn's SGC/SIGN) compete
            (``--allow-model-change``).

    Returns:
        ``{rows, summary, crossovers}``: one row per point and strategy (best epoch time, knobs; with
        ``proxy_draws`` > 1 also ``epoch_time_draws_s`` and their min / max), the winner per point with its
        speedup (and ``winner_draws``: on how many draws it wins), and where the winner changes.

    Raises:
        SpecError: a malformed axis, field or value, a bad count, seed or strategy list, or an output folder (or a
            file in it) that cannot be written (one line naming it).
    """
    from gnnplan.autotune import api_args
    from gnnplan.autotune import whatif_report as wr
    from gnnplan.autotune.whatif import WhatifRequest, parse_axes, run_whatif

    with api_args.as_arguments("vary", "strategies", "trials", "seed", "proxy_draws", "output", "cluster_set"):
        axes = parse_axes(api_args.texts("vary", vary))
        req = WhatifRequest(cluster, workload, axes, api_args.names("strategies", strategies),
                            api_args.positive_count("trials", trials), api_args.seed("seed", seed),
                            allow_model_change=api_args.flag("allow_model_change", allow_model_change),
                            cluster_sets=api_args.texts("cluster_set", cluster_set) if cluster_set else [],
                            proxy_draws=api_args.positive_count("proxy_draws", proxy_draws))
        output = api_args.path("output", output, optional=True)
        if output is not None:  # as the CLI's -o: the folder and the files it will replace, before the sweep
            wr.check_outputs(output, "output")
        res = run_whatif(req)
    if output is not None:
        wr.write_outputs(res, Path(output), wr.title(res, cluster, workload))
    return {"rows": res.rows, "summary": res.summary, "crossovers": res.crossovers}


def calibrate(traces: Sequence[str | Path] | Mapping[str, Any], cluster: str | Path | ClusterSpec
              ) -> tuple[ClusterSpec, dict[str, Any]]:
    """Fit a cluster's parameters to recorded traces, regularised toward its priors, with held-out errors
    (``gnnplan calibrate``).

    Args:
        traces: Chrome-trace files, or ``{name: (spans, metadata)}`` as :func:`gnnplan.simulator.trace.read_trace`
            returns.
        cluster: the cluster to start from.

    Returns:
        (calibrated cluster, report) as :func:`gnnplan.simulator.calibrate.calibrate`.
    """
    from gnnplan.autotune import api_args
    from gnnplan.simulator import calibrate as cal
    from gnnplan.simulator.errors import SpecError

    if isinstance(traces, Mapping):  # checked as files are: the schema, and measured traces only
        from gnnplan.simulator.trace import check_source, checked_trace

        held = {name: checked_trace(name, trace) for name, trace in traces.items()}
        if not held:
            raise SpecError("traces: no trace given")
        for name, (_, meta) in held.items():
            check_source(meta, "executor", f"traces {name}")
        with api_args.as_arguments("cluster"):
            return cal.calibrate(held, cluster)
    with api_args.as_arguments("cluster", fields={"trace": "traces", "TRACE": "traces"}):
        return cal.calibrate_files(api_args.texts("traces", traces), cluster, measured_only=True)
