"""An Optuna study over strategies and their knobs; objective = simulated epoch time.

Out-of-GPU/host-memory configurations are rejected through Optuna's constraint mechanism
(``Trial.set_constraint``: a positive value = memory over budget, in bytes), so the TPE sampler learns the
feasible region and ``study.best_trial`` only returns feasible trials. The default storage is a SQLite file,
so a study resumes and several ``gnnplan tune`` processes can share one study; any SQLAlchemy URL
(``postgresql://...``) works the same way on a cluster. Trials run on an in-memory twin of the stored study and
each finished trial is written in one transaction (:mod:`autotune.study_mirror`); a configuration proposed again
reuses its earlier result (:mod:`autotune.trial_cache`, marked by the ``reused`` user attribute).

The trial's ``strategy`` parameter ranges over :func:`autotune.candidates.candidates`: the strategies that run
the workload as given and, with ``allow_model_change``, ``ppgnn/sgc``-style candidates whose model differs
(recorded on the trial as the ``workload`` user attribute).

Input is validated before the study is created or opened (:func:`validate_request`), so input that ``gnnplan tune``
rejects never leaves a FAIL trial. :func:`run_study` stores a trial only once it has finished, so a killed
``gnnplan tune`` leaves nothing of its last trial. Trials run on the storage itself (Optuna's own
``study.optimize``, older gnnplan versions) send Optuna heartbeats (:data:`HEARTBEAT_INTERVAL_S`): a trial left
RUNNING by a killed process stops beating and is marked FAIL (``optuna.storages.fail_stale_trials``) when the
study is next opened, once :data:`HEARTBEAT_GRACE_S` has passed, while trials of processes still running keep
beating and are left alone.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import optuna

from gnnplan.autotune.candidates import Candidate, candidates
from gnnplan.autotune.study_mirror import FINISHED, MirroredRun
from gnnplan.autotune.trial_cache import TrialCache
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.spec import ClusterSpec
from gnnplan.simulator.paths import user_home
from gnnplan.simulator.strategies import get_strategy
from gnnplan.simulator.workload.spec import WorkloadSpec

SQLITE_TIMEOUT_S = 120.0
STORAGE_RETRIES = 8
SCHEMA_RACE = ("already exists", "UNIQUE constraint failed", "database is locked")
"""Messages of the errors a process gets when another one creates the same new study database at once."""
HEARTBEAT_INTERVAL_S = 10
"""Seconds between a running trial's heartbeats (``RDBStorage(heartbeat_interval=...)``; whole seconds)."""
HEARTBEAT_GRACE_S = 30
"""Seconds without a heartbeat after which a RUNNING trial counts as abandoned by a killed process and is marked
FAIL (``RDBStorage(grace_period=...)``): three missed beats, so a busy but live process is not mistaken for dead."""


@dataclass(frozen=True)
class TuneRequest:
    """What to tune: the cluster, the workload, the strategies allowed and the search budget."""

    cluster: ClusterSpec
    workload: WorkloadSpec
    strategies: tuple[str, ...]
    num_trials: int = 40
    storage: str | None = None
    study_name: str | None = None
    tune_batch_size: bool = False
    seed: int = 0
    allow_model_change: bool = False

    def candidates(self) -> dict[str, Candidate]:
        """Label -> candidate (see :mod:`autotune.candidates`)."""
        return {c.label: c for c in candidates(self.workload, list(self.strategies), self.allow_model_change)}


def default_storage_file() -> Path:
    """The SQLite file of the default storage: ``<gnnplan home>/studies.db`` (not created here)."""
    return user_home() / "studies.db"


def default_storage() -> str:
    """``sqlite:///<gnnplan home>/studies.db`` (the folder is created)."""
    user_home().mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{default_storage_file()}"


def eligible_strategies(workload: WorkloadSpec, requested: list[str] | None,
                        allow_model_change: bool = False) -> tuple[str, ...]:
    """The strategies that can run the workload (or, when allowed, a model swap of it), optionally restricted
    to ``requested``.

    Raises:
        SpecError: a requested strategy is unknown or cannot run the workload.
    """
    found = candidates(workload, requested, allow_model_change)
    return tuple(dict.fromkeys(c.strategy for c in found))


def search_key(req: TuneRequest) -> str:
    """A hash of everything that defines the search: the cluster and workload specs, the set of strategies (in any
    order: ``dp,hopgnn`` and ``hopgnn,dp`` are one search; before 2026-12-01 the order made two), whether the
    batch size and the model may change (not the seed or the trial budget: they only continue a search)."""
    key = json.dumps([req.cluster.to_yaml_dict(), req.workload.to_yaml_dict(), sorted(req.strategies),
                      req.tune_batch_size] + ([True] if req.allow_model_change else []), sort_keys=True)
    return hashlib.sha1(key.encode()).hexdigest()


def study_name_for(req: TuneRequest) -> str:
    """A stable study name: cluster and workload names plus a hash of everything that defines the search."""
    return f"{req.cluster.name}/{req.workload.name or req.workload.dataset_name}/{search_key(req)[:10]}"


SEARCH_ATTR = "gnnplan_search"
"""Study user attribute holding :func:`search_key` of the search it was created for."""


def open_study(req: TuneRequest, storage: optuna.storages.RDBStorage | None = None) -> optuna.Study:
    """Create or load the study (safe when several processes race to create it); trials a killed process left
    RUNNING are marked FAIL once their heartbeat is older than :data:`HEARTBEAT_GRACE_S`.

    Args:
        req: the request.
        storage: an open storage (None = open ``req.storage`` or the default).

    Raises:
        SpecError: the storage fails (:func:`storage_errors`); the study was created for another search
            (:func:`search_key`, kept as its :data:`SEARCH_ATTR`).
    """
    storage = storage or open_storage(req.storage or default_storage())
    sampler = _sampler(req)
    name = req.study_name or study_name_for(req)
    with storage_errors(req.storage or default_storage()):
        for attempt in range(5):
            try:
                study = optuna.create_study(study_name=name, storage=storage, sampler=sampler,
                                            direction="minimize", load_if_exists=True)
                break
            except optuna.exceptions.DuplicatedStudyError:
                time.sleep(0.2 * (attempt + 1))
        else:
            study = optuna.load_study(study_name=name, storage=storage, sampler=sampler)
        with _quiet():
            optuna.storages.fail_stale_trials(study)
        key = search_key(req)
        if study.user_attrs.get(SEARCH_ATTR) is None:  # a new study (or one from before the key was kept)
            study.set_user_attr(SEARCH_ATTR, key)  # a race between two creators keeps the first's: read it back
        if study.user_attrs.get(SEARCH_ATTR) != key:
            raise SpecError(f"--study: {name!r} holds trials of another search (its cluster, workload or "
                            "strategies differ, and a trial's epoch time is only comparable within one); name "
                            "another study, or leave --study out to get this search's own")
    return study


def _sampler(req: TuneRequest, resumed: int = 0) -> optuna.samplers.TPESampler:
    """The study's sampler: multivariate TPE over the strategies' conditional spaces (``group``), seeded with
    ``--seed`` on a new study and, on a study resumed with ``resumed`` finished trials, with a seed drawn from
    (``--seed``, ``resumed``): the same seed again would propose the first run's random start-up trials again
    (2026-12-01: three calls of ``--trials 2`` simulated the same two configurations three times). Still
    deterministic: the same command on the same stored study proposes the same trials."""
    seed = req.seed if resumed == 0 else int(np.random.SeedSequence((req.seed, resumed)).generate_state(1)[0])
    with _quiet():
        return optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True)


@contextmanager
def _quiet() -> Iterator[None]:
    """Silence Optuna's ExperimentalWarning (TPE ``group``, heartbeats): the CLI's stderr holds one line per error."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        yield


@contextmanager
def storage_errors(url: str) -> Iterator[None]:
    """Turn a storage failure while the study runs (disk full, database locked or corrupt, connection lost:
    SQLAlchemy's errors, Optuna's StorageInternalError) into one :class:`SpecError` naming ``--storage``."""
    import sqlalchemy.exc

    try:
        yield
    except (sqlalchemy.exc.SQLAlchemyError, optuna.exceptions.StorageInternalError) as exc:
        raise SpecError(f"--storage: {url!r} failed: {_root_message(exc)}") from None


def _root_message(exc: BaseException) -> str:
    """The first line of the innermost exception ``exc`` was raised from (its ``__cause__`` or ``__context__``
    chain): Optuna wraps a failed commit in StorageInternalError, whose own text guesses at invalid data, while the
    database's reason (``attempt to write a readonly database``) is inside (2026-12-01: only the guess was said)."""
    seen = {id(exc)}
    while (inner := exc.__cause__ or exc.__context__) is not None and id(inner) not in seen:
        seen.add(id(inner))
        exc = inner
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


DAMAGED_FILE = ("file is not a database", "database disk image is malformed")
"""SQLite's messages for a file that is no database or a damaged one: the URL was right, the file is not (before
2026-12-01 the error advised another URL)."""


def open_storage(url: str) -> optuna.storages.RDBStorage:
    """Open (creating if needed) an Optuna RDB storage.

    Two processes that open a new SQLite file at once race to create Optuna's schema; the loser fails with
    ``table ... already exists``, ``UNIQUE constraint failed: alembic_version...`` or ``database is locked``
    (:data:`SCHEMA_RACE`). It retries, and on the retry the schema is there. Other errors (a bad URL, a folder
    that does not exist) fail at once.

    Raises:
        SpecError: the URL cannot be opened after the retries (message names ``--storage``).
    """
    engine_kwargs = {"connect_args": {"timeout": SQLITE_TIMEOUT_S}} if url.startswith("sqlite") else {}
    attempt = 0
    while True:
        try:
            with _quiet():
                return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs,
                                                  heartbeat_interval=HEARTBEAT_INTERVAL_S,
                                                  grace_period=HEARTBEAT_GRACE_S)
        except Exception as exc:  # SQLAlchemy raises many types for a bad URL
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            attempt += 1
            if not any(m in message for m in SCHEMA_RACE) or attempt >= STORAGE_RETRIES:
                hint = "the file is not an SQLite database, or is damaged: give another file" \
                    if any(m in message for m in DAMAGED_FILE) else \
                    "give an SQLAlchemy database URL: sqlite:///PATH, or postgresql://USER@HOST/DB or mysql://... " \
                    "with its driver installed"
                raise SpecError(f"--storage: cannot open {url!r}: {message} ({hint})") from None
            time.sleep(0.2 * attempt)


def objective(req: TuneRequest, trial: optuna.Trial, choices: dict[str, Candidate] | None = None,
              cache: TrialCache | None = None) -> float:
    """Simulate one configuration; record the result as user attributes and memory excess as a constraint.

    User attributes: ``result`` (the ``simulate --json`` object), ``model``, ``workload`` (a changed model only),
    ``reused`` (True when the result came from the memo: the same candidate and knobs were simulated by an earlier
    trial of this process, :mod:`autotune.trial_cache`) and ``wall_s`` (``{"setup": s, "simulate": s}``: this
    trial's wall seconds building the simulation context and simulating; both 0 for a reused result).

    Args:
        req: the request.
        trial: the Optuna trial.
        choices: ``req.candidates()``, computed once per study (None = compute here).
        cache: the study's memo of results and contexts (:class:`autotune.trial_cache.TrialCache`); None: a fresh
            one for this trial (every trial simulated).

    Returns:
        The simulated epoch time in seconds (for an infeasible configuration, a finite stand-in: the
        largest epoch time seen is not known here, so 1e9 s; the constraint already marks it infeasible).
    """
    choices = choices or req.candidates()
    chosen = choices[trial.suggest_categorical("strategy", list(choices))]
    knobs = get_strategy(chosen.strategy).suggest(trial, chosen.workload, req.tune_batch_size)
    if chosen.fixed_knobs:
        knobs = knobs.model_copy(update=chosen.fixed_knobs)
    outcome = (cache or TrialCache()).run(req.cluster, chosen.label, chosen.strategy, chosen.workload, knobs)
    result = outcome.result
    trial.set_user_attr("result", result.to_json_dict())
    trial.set_user_attr("model", chosen.workload.model.arch)
    trial.set_user_attr("reused", outcome.reused)
    trial.set_user_attr("wall_s", {"setup": outcome.setup_s, "simulate": outcome.simulate_s})
    if chosen.model_changed:
        trial.set_user_attr("workload", chosen.workload.to_yaml_dict())
    trial.set_constraint("memory_excess_bytes", _memory_excess(req.cluster, result.peak_memory_bytes))
    return result.epoch_time_s if result.feasible else 1e9


def _memory_excess(cluster: ClusterSpec, peak: dict[str, float]) -> float:
    return max(peak.get("gpu", 0.0) - cluster.gpu.memory_bytes, peak.get("host", 0.0) - cluster.host.memory_bytes)


def validate_request(req: TuneRequest) -> None:
    """Everything :func:`objective` would reject as bad input, checked before a study exists, so no FAIL trial is
    recorded for it: each candidate's workload support and batch size against the workers (as
    :func:`simulator.api.load_context`), and the dataset loads (a corrupt file, a graph beyond host memory); the
    graph is cached for the trials.

    Raises:
        SpecError: the first problem, one line.
    """
    from gnnplan.simulator.strategies.contract import check_workload
    from gnnplan.simulator.workload.graphstats import dataset_summary

    for cand in req.candidates().values():
        check_workload(get_strategy(cand.strategy), cand.workload)
        if not req.tune_batch_size and cand.workload.training.batch_size < req.cluster.num_gpus:
            raise SpecError(f"training.batch_size: {cand.workload.training.batch_size} is smaller than the "
                            f"{req.cluster.num_gpus} workers of cluster {req.cluster.name}; use at least "
                            f"{req.cluster.num_gpus}")
    for dataset in {json.dumps(c.workload.to_yaml_dict()["dataset"]): c.workload.dataset
                    for c in req.candidates().values()}.values():
        dataset_summary(dataset)


def run_study(req: TuneRequest, progress: bool = False) -> optuna.Study:
    """Run ``req.num_trials`` more trials in this process and return the study: the input is validated first
    (:func:`validate_request`), then the storage opened, and only then the study created or resumed. The trials run in
    memory and are written to the storage one transaction each as they finish (:class:`MirroredRun`); results
    and simulation contexts are shared between the trials (:class:`TrialCache`).

    Raises:
        SpecError: bad input, a bad storage URL, or a storage failure while running (:func:`storage_errors`).
    """
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = req.storage or default_storage()
    validate_request(req)  # first: rejected input leaves no storage file behind
    storage = open_storage(url)
    study = open_study(req, storage)
    choices, cache = req.candidates(), TrialCache()
    with storage_errors(url), _quiet():
        run = MirroredRun(study, _sampler(req, len(study.get_trials(deepcopy=False, states=FINISHED))))
        enqueue_defaults(run.memory, choices, req.num_trials)
        run.optimize(lambda t: objective(req, t, choices, cache), req.num_trials, show_progress_bar=progress)
    return study


def enqueue_defaults(study: optuna.Study, choices: dict[str, Candidate], num_trials: int) -> int:
    """A study's first trials: every candidate as shipped (:meth:`Candidate.default_params`), so the best a study
    reports is never worse than a strategy's defaults, the baseline a user would otherwise run. Only the
    candidates the study has not tried yet (a resumed study tried them in its first run; one whose first run was
    stopped may lack some: before 2026-12-01 those were never tried), and only when ``num_trials`` covers all of
    them (fewer would spend them on the first candidates' defaults alone). Returns how many were enqueued."""
    tried = [t.params for t in study.get_trials(deepcopy=False)]
    missing = [p for p in (c.default_params() for c in choices.values())  # (knobs defaulting to None are
               if not any(all(k in t and t[k] == v for k, v in p.items()) for t in tried)]  # sampled)
    if not missing or num_trials < len(missing):
        return 0
    for params in missing:
        study.enqueue_trial(params, skip_if_exists=True)
    return len(missing)


KNOB_DIGITS = 1
"""Significant digits to which float knobs are compared: trials whose other knobs are equal and whose float knobs
agree to this many digits are one configuration (a TPE study samples many near-copies of its best point, e.g.
cache_fraction 0.997, 0.993 and 0.954, whose epoch times differ by under 1%)."""


def config_key(strategy: str, model: str, knobs: dict[str, Any]) -> str:
    """The identity of a configuration: strategy, model and knobs, floats rounded to :data:`KNOB_DIGITS`."""
    rounded = {k: float(f"{v:.{KNOB_DIGITS}g}") if isinstance(v, float) else v for k, v in knobs.items()}
    return json.dumps([strategy, model, rounded], sort_keys=True)


def best_of_others(rows: list[dict[str, Any]], limit: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The first ``limit`` of ranked rows (:func:`ranked_trials` order) and, after them, the best row of every
    strategy (and model) not among them, so a strategy is never hidden behind near-copies of another.

    Returns:
        (the first ``limit`` rows, the best row of each other strategy and model, in rank order).
    """
    shown = rows[:limit]
    seen = {(r["strategy"], r.get("model", "")) for r in shown}
    extra = []
    for r in rows[limit:]:
        if (r["strategy"], r.get("model", "")) not in seen:
            seen.add((r["strategy"], r.get("model", "")))
            extra.append(r)
    return shown, extra


def ranked_trials(study: optuna.Study) -> list[dict[str, Any]]:
    """Completed trials as rows, feasible first, by simulated epoch time; one row per distinct configuration
    (:func:`config_key`), the best trial of each.

    Returns:
        Rows with keys rank, trial, strategy, model (the model's arch), knobs, feasible, epoch_time_s,
        iteration_time_s, peak_gpu_memory_bytes, peak_host_memory_bytes (a machine's), reason, num_trials
        (trials merged into the row).
    """
    rows = []
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        res = t.user_attrs.get("result")
        if not res:
            continue
        rows.append({"trial": t.number, "strategy": res["strategy"], "model": t.user_attrs.get("model", ""),
                     "knobs": res["knobs"], "feasible": res["feasible"], "epoch_time_s": res["epoch_time_s"],
                     "iteration_time_s": res["iteration_time_s"],
                     "peak_gpu_memory_bytes": res["peak_memory_bytes"]["gpu"],
                     "peak_host_memory_bytes": res["peak_memory_bytes"].get("host"), "reason": res["reason"]})
    rows.sort(key=lambda r: (not r["feasible"], r["epoch_time_s"] or float("inf"), r["trial"]))
    merged: dict[str, dict[str, Any]] = {}
    for row in rows:
        key = config_key(row["strategy"], row["model"], row["knobs"])
        if key in merged:
            merged[key]["num_trials"] += 1
        else:
            merged[key] = {**row, "num_trials": 1}
    ordered = list(merged.values())
    for i, row in enumerate(ordered, 1):
        row["rank"] = i
    return ordered


def best_result(study: optuna.Study, workload: WorkloadSpec) -> tuple[dict[str, Any], WorkloadSpec]:
    """The best feasible trial's simulation result and the workload it ran.

    Args:
        study: the study.
        workload: the user's workload (returned when the best trial kept the model).

    Returns:
        (result, workload): the workload with the model swapped when the best candidate changed it.

    Raises:
        SpecError: no feasible configuration was found.
    """
    from gnnplan.simulator.workload.spec import workload_from_dict

    try:
        best = study.best_trial
        changed = best.user_attrs.get("workload")
        return dict(best.user_attrs["result"]), workload_from_dict(changed) if changed else workload
    except ValueError:
        closest = closest_infeasible(study)
        raise SpecError("tune: no feasible configuration found (every trial ran out of memory"
                        + (f"; the closest, {closest}" if closest else "")
                        + "); give the cluster more memory, or shrink what fills it (the parts named: a batch "
                          "size shrinks only the batch's)") from None


def closest_infeasible(study: optuna.Study) -> str | None:
    """The finished trial whose memory exceeds its budget by the least (its ``memory_excess_bytes``
    constraint), as ``strategy: reason``; None when no trial finished."""
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE and "result" in t.user_attrs]
    if not done:
        return None
    closest = min(done, key=lambda t: max(t.system_attrs.get("constraints") or (math.inf,)))
    result = closest.user_attrs["result"]
    return f"{result['strategy']}: {result.get('reason') or 'infeasible'}"
