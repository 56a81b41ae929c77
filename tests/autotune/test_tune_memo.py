"""The study's memo and in-memory twin (autotune/trial_cache.py, autotune/study_mirror.py): a reused result is the
very result a fresh simulation gives, reused trials are marked, and neither changes which trials the seeded
sampler proposes or the best it finds; the twin writes each finished trial once and reads other processes'."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import optuna
import pytest

from gnnplan.autotune.study import (
    TuneRequest,
    enqueue_defaults,
    objective,
    open_storage,
    open_study,
    ranked_trials,
    run_study,
)
from gnnplan.autotune.study_mirror import WRITER_ATTR, MirroredRun
from gnnplan.autotune.trial_cache import TrialCache
from gnnplan.simulator.api import simulate
from gnnplan.simulator.hardware.spec import load_cluster
from gnnplan.simulator.workload.spec import load_workload

TRIALS = 20


def _request(tmp_path: Path, name: str) -> TuneRequest:
    """Cora trained full-graph by neutronstar or hongtu: categorical knobs only, so 20 seeded trials repeat some."""
    return TuneRequest(load_cluster("4x-a100-10gbe"), load_workload("cora-gcn-full"), ("neutronstar", "hongtu"),
                       num_trials=TRIALS, storage=f"sqlite:///{tmp_path / 's.db'}", study_name=name, seed=3)


def _fields(result: dict[str, Any]) -> dict[str, Any]:
    """A result without its wall time (``sim_wall_s`` measures this process, not the prediction)."""
    return {k: v for k, v in result.items() if k != "sim_wall_s"}


@pytest.fixture(scope="module")
def memoised(tmp_path_factory: pytest.TempPathFactory) -> optuna.Study:
    return run_study(_request(tmp_path_factory.mktemp("memo"), "memo"))


def test_reused_results_equal_fresh_simulations_and_are_marked(memoised: optuna.Study) -> None:
    trials = memoised.trials
    assert len(trials) == TRIALS and all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    req = _request(Path("."), "unused")
    fresh: dict[str, dict[str, Any]] = {}
    for t in trials:
        res = t.user_attrs["result"]
        key = json.dumps([res["strategy"], res["knobs"]], sort_keys=True)
        first = key not in fresh
        if first:
            fresh[key] = simulate(req.cluster, req.workload, res["strategy"], res["knobs"]).to_json_dict()
        assert _fields(res) == _fields(fresh[key]), t.number
        assert t.user_attrs["reused"] is (not first), t.number
        wall = t.user_attrs["wall_s"]
        assert (wall["simulate"] == 0.0) is (not first) and wall["setup"] >= 0.0
    reused = sum(t.user_attrs["reused"] for t in trials)
    assert reused == TRIALS - len(fresh) > 0
    rows = ranked_trials(memoised)
    assert sum(r["num_trials"] for r in rows) == TRIALS
    assert len({json.dumps([r["strategy"], r["knobs"]], sort_keys=True) for r in rows}) == len(rows)


def test_memo_and_twin_change_no_trial_of_the_seeded_study(memoised: optuna.Study, tmp_path: Path) -> None:
    """The same seeded study run the plain way (Optuna's optimize on the stored study, every trial simulated)
    proposes the same parameters, gets the same values and finds the same best."""
    req = _request(tmp_path, "plain")
    plain = open_study(req, open_storage(str(req.storage)))
    choices = req.candidates()
    enqueue_defaults(plain, choices, TRIALS)  # as run_study starts a new study
    plain.optimize(lambda t: objective(req, t, choices), n_trials=TRIALS, catch=())
    assert [t.params for t in plain.trials] == [t.params for t in memoised.trials]
    assert [t.values for t in plain.trials] == [t.values for t in memoised.trials]
    assert not any(t.user_attrs["reused"] for t in plain.trials)
    assert plain.best_trial.number == memoised.best_trial.number
    assert plain.best_trial.params == memoised.best_trial.params


def test_the_trial_cache_builds_one_context_per_batch_and_partitioner() -> None:
    from gnnplan.simulator.strategies import get_strategy

    cluster, workload = load_cluster("4x-a100-10gbe"), load_workload("cora-sage")
    cache, knobs = TrialCache(), get_strategy("dp").Knobs
    for cf, part in ((0.1, "metis"), (0.2, "metis"), (0.1, "random"), (0.1, "metis")):
        cache.run(cluster, "dp", "dp", workload, knobs(cache_fraction=cf, partitioner=part))
    assert cache.summary()["contexts"] == 2 and cache.simulated == 3 and cache.reused == 1


@pytest.mark.parametrize(("strategy", "workload"), [
    ("dp", "cora-sage"), ("gsplit", "cora-sage"), ("hopgnn", "cora-sage"), ("neutronstar", "cora-gcn-full"),
    ("hongtu", "cora-gcn-full"), ("ppgnn", "cora-sgc")])
def test_a_cached_context_gives_the_result_of_simulate(strategy: str, workload: str) -> None:
    from gnnplan.simulator.api import coerce_knobs

    cluster, wl = load_cluster("4x-a100-10gbe"), load_workload(workload)
    cache, knobs = TrialCache(), coerce_knobs(strategy, None)
    first = cache.run(cluster, strategy, strategy, wl, knobs)
    again = cache.run(cluster, strategy, strategy, wl, knobs.model_copy())
    assert not first.reused and again.reused and again.result is first.result
    fresh = simulate(cluster, wl, strategy, knobs).to_json_dict()
    assert _fields(first.result.to_json_dict()) == _fields(fresh)


def _quadratic(trial: optuna.Trial) -> float:
    return (trial.suggest_float("x", -1.0, 1.0) - 0.25) ** 2


def test_twin_writes_each_trial_once_and_reads_other_writers(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 't.db'}"
    stored = optuna.create_study(study_name="t", storage=open_storage(url))
    stored.add_trial(optuna.trial.create_trial(params={"x": 0.5}, value=0.0625,
                                               distributions={"x": optuna.distributions.FloatDistribution(-1, 1)}))
    run = MirroredRun(stored, optuna.samplers.TPESampler(seed=0))
    assert len(run.memory.trials) == 1  # a resumed study starts with what is stored
    other = optuna.load_study(study_name="t", storage=open_storage(url))  # another process's handle

    def objective_with_a_neighbour(trial: optuna.Trial) -> float:
        if trial.number == 2:
            other.enqueue_trial({"x": 0.0})
            other.optimize(_quadratic, n_trials=1)
        return _quadratic(trial)

    run.optimize(objective_with_a_neighbour, n_trials=4)
    final = optuna.load_study(study_name="t", storage=url).trials
    assert len(final) == 1 + 4 + 1
    mine = [t for t in final if t.system_attrs.get(WRITER_ATTR) == run.writer]
    assert len(mine) == 4 and len({t.number for t in final}) == 6
    assert [t.params for t in mine] == [t.params for t in run.memory.trials if t.number in run._own]
    assert {"x": 0.0} in [t.params for t in run.memory.trials]  # the neighbour's trial was read back
    assert len(run.memory.trials) == 6


def test_twin_stores_the_failed_trial_before_the_error(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'f.db'}"
    stored = optuna.create_study(study_name="f", storage=open_storage(url))

    def broken(trial: optuna.Trial) -> float:
        trial.suggest_float("x", 0.0, 1.0)
        raise RuntimeError("simulator bug")

    with pytest.raises(RuntimeError, match="simulator bug"):
        MirroredRun(stored, optuna.samplers.RandomSampler(seed=0)).optimize(broken, n_trials=3)
    states = [t.state for t in optuna.load_study(study_name="f", storage=url).trials]
    assert states == [optuna.trial.TrialState.FAIL]


def test_a_new_study_first_tries_every_strategy_as_shipped(tmp_path: Path) -> None:
    """run_study's first trials are each candidate's default knobs (the baseline a user would run without the
    tuner), so the best it reports is never slower than a strategy's defaults; a resumed study does not repeat
    them, and a study of fewer trials than candidates does not spend them on the first candidates alone."""
    req = _request(tmp_path, "defaults")
    study = run_study(req)
    choices = req.candidates()
    shipped_params = [c.default_params() for c in choices.values()]
    for trial, params in zip(study.trials, shipped_params):  # knobs that default to None are sampled
        assert {k: trial.params[k] for k in params} == params
    best = study.best_value
    for trial, cand in zip(study.trials, choices.values()):  # the default trial is the shipped configuration
        shipped = simulate(req.cluster, req.workload, cand.strategy, None)
        assert trial.user_attrs["result"]["knobs"] == shipped.knobs
        assert trial.value == shipped.epoch_time_s and best <= shipped.epoch_time_s
    # a knob whose default is None is fixed to None where the search offers it (neutronstar: no cache budget)
    assert next(p for p in shipped_params if p["strategy"] == "neutronstar")["neutronstar.cache_budget_bytes"] is None
    # a study that has trials (resumed), or fewer trials than candidates to run, is left to its sampler
    assert enqueue_defaults(study, choices, TRIALS) == 0
    assert enqueue_defaults(optuna.create_study(), choices, len(choices) - 1) == 0
    fresh = optuna.create_study()
    assert enqueue_defaults(fresh, choices, len(choices)) == len(choices) == 2
    assert [t.system_attrs["fixed_params"] for t in fresh.trials] == shipped_params
    # a study stopped before it tried every default (killed after its first trial) gets the others on resume
    # (2026-12-01: a resumed study never tried them)
    stopped = optuna.create_study()
    stopped.add_trial(study.trials[0])
    assert enqueue_defaults(stopped, choices, TRIALS) == 1
    assert stopped.trials[-1].system_attrs["fixed_params"] == shipped_params[1]
