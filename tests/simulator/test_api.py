"""simulator.api: knob parsing, simulate through constructed statistics, predicted Chrome traces."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gnnplan.simulator import api
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.plan import Plan
from gnnplan.simulator.strategies import dp
from gnnplan.simulator.trace import read_trace
from gnnplan.simulator.workload.spec import load_workload


def test_parse_knobs_coerces_types() -> None:
    assert api.parse_knobs("dp", ["cache_fraction=0.25", "partitioner=random", "num_sampler_workers=3",
                                  "batch_size=512"]) == {"cache_fraction": 0.25, "partitioner": "random",
                                                         "num_sampler_workers": 3, "batch_size": 512}
    assert api.parse_knobs("dp", ["batch_size=none", "cache_fraction=1", "cache_fraction=0.5"]) == \
        {"batch_size": None, "cache_fraction": 0.5}
    assert api.parse_knobs("dp", []) == {}
    # a knob whose value is the word none keeps it (None only where a knob admits it); a *_bytes knob reads units
    assert api.parse_knobs("hongtu", ["dedup=none"]) == {"dedup": "none"}
    assert api.parse_knobs("neutronstar", ["cache_budget_bytes=1GB"]) == {"cache_budget_bytes": 1e9}
    assert api.parse_knobs("neutronstar", ["cache_budget_bytes=512MiB"]) == {"cache_budget_bytes": 512 * 2**20}
    assert api.parse_knobs("neutronstar", ["cache_budget_bytes=none"]) == {"cache_budget_bytes": None}
    with pytest.raises(SpecError, match=r"^--set dedup=null: dedup must be one of none, gpu, reuse$"):
        api.parse_knobs("hongtu", ["dedup=null"])
    with pytest.raises(SpecError, match=r"^--set cache_budget_bytes=1GHz: cache_budget_bytes must be a number >= 0 "):
        api.parse_knobs("neutronstar", ["cache_budget_bytes=1GHz"])


@pytest.mark.parametrize("items,message", [
    (["cache_fraction"], "--set: 'cache_fraction' is not KNOB=VALUE"),
    (["cache=0.1"], ("--set: unknown knob 'cache' for strategy dp; allowed: cache_fraction, partitioner, "
                     "seed_split, num_sampler_workers, batch_size, cache_placement, graph_structure, sampler")),
    (["cache_fraction=2"], "--set cache_fraction=2: cache_fraction must be a number in [0, 1]"),
    (["cache_fraction=lots"], "--set cache_fraction=lots: cache_fraction must be a number in [0, 1]"),
    (["partitioner=hash"], "--set partitioner=hash: partitioner must be one of metis, random"),
    (["num_sampler_workers=-1"], "--set num_sampler_workers=-1: num_sampler_workers must be an integer in [0, 64]"),
    (["batch_size=0"], "--set batch_size=0: batch_size must be an integer >= 1 or none"),
])
def test_parse_knobs_errors_are_one_line(items: list[str], message: str) -> None:
    with pytest.raises(SpecError) as err:
        api.parse_knobs("dp", items)
    assert str(err.value) == message and "\n" not in str(err.value)


def test_unknown_strategy_and_bad_knob_dicts() -> None:
    with pytest.raises(SpecError, match="unknown strategy 'nope'"):
        api.parse_knobs("nope", [])
    with pytest.raises(SpecError, match="unknown knob 'x' for strategy dp"):
        api.coerce_knobs("dp", {"x": 1})
    with pytest.raises(SpecError, match=r"cache_fraction must be a number in \[0, 1\]"):
        api.coerce_knobs("dp", {"cache_fraction": 3})
    assert api.coerce_knobs("dp", None) == dp.Knobs()


def test_simulate_loads_stats_for_the_cluster_shape(fake_graphstats: list[dict[str, Any]]) -> None:
    result = api.simulate("4x-a100-10gbe", "rmat100k-sage", "dp", {"cache_fraction": 0.1, "partitioner": "random"})
    assert result.feasible and result.epoch_time_s > 0 and result.sim_wall_s > 0
    assert fake_graphstats == [{"fanouts": (10, 10), "batch_size_per_worker": 256, "num_machines": 4,
                                "gpus_per_machine": 1, "partitioner": "random", "seed": 0, "seed_split": "owner"}]
    api.simulate("dgx-a100", "rmat100k-sage", "dp", dp.Knobs(batch_size=4096))
    assert fake_graphstats[-1]["batch_size_per_worker"] == 512 and fake_graphstats[-1]["num_machines"] == 1
    assert set(result.to_json_dict()) >= {"strategy", "knobs", "feasible", "reason", "epoch_time_s",
                                          "iteration_time_s", "num_iterations", "breakdown_s", "bytes_per_epoch",
                                          "peak_memory_bytes", "sim_wall_s"}


def test_simulate_rejects_unsupported_workloads(fake_graphstats: list[dict[str, Any]]) -> None:
    wl = load_workload("rmat100k-sage")
    full = wl.model_copy(update={"training": wl.training.model_copy(update={"mode": "full-graph"})})
    with pytest.raises(SpecError, match="training.mode: strategy dp supports mini-batch"):
        api.simulate("4x-a100-10gbe", full, "dp", {})
    with pytest.raises(SpecError, match="smaller than the 8 workers"):
        api.simulate("dgx-a100", "rmat100k-sage", "dp", {"batch_size": 4})
    assert fake_graphstats == []  # rejected before measuring anything


def test_predicted_trace_round_trip(fake_graphstats: list[dict[str, Any]], tmp_path: Any) -> None:
    result = api.simulate("4x-a100-10gbe", "rmat100k-sage", "dp", {"cache_fraction": 0.2})
    meta = api.trace_metadata("4x-a100-10gbe", "rmat100k-sage", "dp", result)
    path = api.predicted_trace(result, tmp_path / "pred.json", meta)
    doc = json.loads(path.read_text())
    assert {e["ph"] for e in doc["traceEvents"]} == {"X", "M"}
    spans, metadata = read_trace(path)
    key = lambda s: (s.rank, s.phase, s.iteration, s.start_s)
    assert len(spans) == len(result.spans)
    for got, want in zip(sorted(spans, key=key), sorted(result.spans, key=key)):
        assert (got.rank, got.phase, got.stream, got.epoch, got.iteration) == \
            (want.rank, want.phase, want.stream, want.epoch, want.iteration)
        assert got.start_s == pytest.approx(want.start_s, abs=1e-12)
        assert got.dur_s == pytest.approx(want.dur_s, abs=1e-12)
        assert (got.nbytes, got.flops) == (pytest.approx(want.nbytes), pytest.approx(want.flops))
        assert got.args == pytest.approx(want.args)
    plan = Plan.model_validate(metadata["plan"])
    assert plan.strategy == "dp" and plan.knobs["cache_fraction"] == 0.2 and plan.num_workers == 4
    assert metadata["results"]["epoch_time_s"] == pytest.approx(result.epoch_time_s)
    assert metadata["prediction"]["epoch_time_s"] == pytest.approx(result.epoch_time_s)


def test_simulate_on_draws_takes_one_reference_or_several() -> None:
    """A lone string is one dataset reference, not its characters; an empty list is an error, not []."""
    one = api.simulate_on_draws("4x-a100-10gbe", "cora-sage", "dp", {}, "card:cora@0")
    again = api.simulate_on_draws("4x-a100-10gbe", "cora-sage", "dp", {}, ["card:cora@0"])
    assert len(one) == 1 and one[0].epoch_time_s == again[0].epoch_time_s
    with pytest.raises(SpecError, match=r"^refs: one or more strings \(got \[\]\)$"):
        api.simulate_on_draws("4x-a100-10gbe", "cora-sage", "dp", {}, [])


def test_a_result_round_trips_through_its_json_object_infeasible_too() -> None:
    """to_json_dict writes an infeasible result's infinite times as null (strict JSON); reading the object back
    gives the result again (2026-12-01: SimResult.model_validate of it failed on the nulls)."""
    from gnnplan.simulator.result import SimResult

    out = SimResult.infeasible("out of GPU memory: ...", strategy="dp", knobs={}, num_iterations=3)
    data = out.to_json_dict()
    assert data["epoch_time_s"] is None and data["iteration_time_s"] is None
    back = SimResult.model_validate(data)
    assert back == out and back.epoch_time_s == float("inf") and back.to_json_dict() == data
