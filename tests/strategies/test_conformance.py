"""Every registered strategy follows the plug-in contract (DESIGN.md, "A strategy is one plug-in").

Parametrised over ``simulator.strategies.STRATEGIES``, so a new strategy is covered by adding it there. Each
strategy is simulated on Cora (real graph statistics, measured once per test session) with the first shipped
workload preset it accepts, or a model swap of one (ppgnn trains SGC/SIGN).
"""

from __future__ import annotations

import importlib
import json
import math
from typing import Any

import optuna
import pytest
from pydantic import BaseModel, ValidationError

from gnnplan.autotune.candidates import accepts, model_variants
from gnnplan.executor.strategies import get_executor
from gnnplan.simulator.api import simulate
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.result import LINKS
from gnnplan.simulator.strategies import STRATEGIES
from gnnplan.simulator.strategies.contract import Strategy, check_workload, conforms
from gnnplan.simulator.workload.spec import WorkloadSpec, load_workload, preset_names

NAMES = sorted(STRATEGIES)
CLUSTERS = ("4x-a100-10gbe", "dgx-a100")
CONTRACT_KEYS = {"strategy", "knobs", "feasible", "reason", "epoch_time_s", "iteration_time_s", "num_iterations",
                 "breakdown_s", "bytes_per_epoch", "peak_memory_bytes", "sim_wall_s"}


def cora_workload(name: str) -> WorkloadSpec:
    """The first Cora preset the strategy accepts, as given or with its model swapped."""
    presets = [load_workload(p) for p in preset_names() if p.startswith("cora")]
    for wl in presets + [v for p in presets for v, _ in model_variants(p)]:
        if accepts(name, wl):
            return wl
    raise AssertionError(f"no Cora workload for strategy {name}")


@pytest.mark.parametrize("name", NAMES)
def test_plugin_conforms_to_the_contract(name: str) -> None:
    module = STRATEGIES[name]
    assert conforms(module) == []
    assert isinstance(module, Strategy)


@pytest.mark.parametrize("name", NAMES)
def test_supported_workloads_follow_supports_and_model_archs(name: str) -> None:
    module, wl = STRATEGIES[name], cora_workload(name)
    check_workload(module, wl)
    other_mode = "full-graph" if wl.training.mode == "mini-batch" else "mini-batch"
    if other_mode not in module.SUPPORTS:
        moved = wl.model_copy(update={"training": wl.training.model_copy(update={"mode": other_mode})})
        with pytest.raises(SpecError, match=f"training.mode: strategy {name} supports"):
            check_workload(module, moved)
    for arch in {"gcn", "sage", "gat", "gin", "sgc", "sign"} - set(module.MODEL_ARCHS):
        swapped = wl.model_copy(update={"model": wl.model.model_copy(update={"arch": arch})})
        with pytest.raises(SpecError, match=f"model.arch: strategy {name} supports"):
            check_workload(module, swapped)


@pytest.mark.parametrize("name", NAMES)
def test_module_shape(name: str) -> None:
    module = STRATEGIES[name]
    assert module.NAME == name
    assert set(module.SUPPORTS) <= {"mini-batch", "full-graph"} and module.SUPPORTS
    knobs: type[BaseModel] = module.Knobs
    assert knobs.model_config.get("frozen") and knobs.model_config.get("extra") == "forbid"
    for field, info in knobs.model_fields.items():
        assert info.description, f"{name}.Knobs.{field} has no description"
    defaults = knobs()
    with pytest.raises(ValidationError, match="no_such_knob"):
        knobs(no_such_knob=1)
    with pytest.raises(ValidationError, match="frozen"):
        setattr(defaults, next(iter(knobs.model_fields)), None)


@pytest.mark.parametrize("name", NAMES)
def test_suggest_names_parameters_after_the_strategy(name: str) -> None:
    module, wl = STRATEGIES[name], cora_workload(name)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for allow_batch in (False, True):
        for _ in range(4):
            trial = study.ask()
            knobs = module.suggest(trial, wl, allow_batch)
            assert isinstance(knobs, module.Knobs)
            assert trial.params and all(p.startswith(f"{name}.") for p in trial.params), trial.params
            assert all(p.removeprefix(f"{name}.") in module.Knobs.model_fields for p in trial.params)
            study.tell(trial, 1.0)


@pytest.mark.parametrize("cluster", CLUSTERS)
@pytest.mark.parametrize("name", NAMES)
def test_simulate_follows_the_json_contract(name: str, cluster: str) -> None:
    wl = cora_workload(name)
    result = simulate(cluster, wl, name)
    out = result.to_json_dict()
    assert CONTRACT_KEYS <= set(out)
    assert out["strategy"] == name and out["knobs"] == STRATEGIES[name].Knobs().model_dump(mode="json")
    assert set(out["bytes_per_epoch"]) == set(LINKS) and set(out["peak_memory_bytes"]) == {"gpu", "host"}
    assert all(v >= 0 and math.isfinite(v) for v in out["bytes_per_epoch"].values())
    assert all(v > 0 for v in out["peak_memory_bytes"].values())
    assert out["feasible"], out["reason"]
    assert out["num_iterations"] >= 1 and 0 < out["epoch_time_s"] < math.inf
    assert out["iteration_time_s"] * out["num_iterations"] == pytest.approx(out["epoch_time_s"], rel=1e-9)
    assert out["breakdown_s"] and all(v >= 0 for v in out["breakdown_s"].values())
    json.dumps(out, allow_nan=False)  # strict JSON
    workers = {s.rank for s in result.spans}
    assert workers and workers <= set(range(_num_gpus(cluster)))
    assert all(s.dur_s >= 0 and s.start_s >= 0 for s in result.spans)


@pytest.mark.parametrize("name", NAMES)
def test_simulation_is_deterministic(name: str) -> None:
    wl = cora_workload(name)
    first, second = (_strip(simulate("4x-a100-10gbe", wl, name).to_json_dict()) for _ in range(2))
    assert first == second


@pytest.mark.parametrize("name", NAMES)
def test_executor_uses_the_same_knobs(name: str) -> None:
    plugin = STRATEGIES[name]
    assert plugin.EXECUTOR, f"strategy {name} is simulated but cannot be run"
    module = importlib.import_module(plugin.EXECUTOR)
    assert get_executor(name) is module
    assert module.NAME == name and module.Knobs is plugin.Knobs
    assert callable(getattr(module, "Trainer", None))


def test_a_strategy_without_executor_cannot_be_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(STRATEGIES["dp"], "EXECUTOR", None)
    with pytest.raises(SpecError, match="'dp' cannot be run by the executor; runnable: hopgnn"):
        get_executor("dp")
    with pytest.raises(SpecError, match="cannot be run by the executor"):
        get_executor("no_such_strategy")


def _strip(out: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in out.items() if k != "sim_wall_s"}


def _num_gpus(cluster: str) -> int:
    from gnnplan.simulator.hardware.spec import load_cluster

    return load_cluster(cluster).num_gpus
