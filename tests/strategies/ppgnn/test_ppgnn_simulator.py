"""The ``ppgnn`` simulator plug-in: knobs, work, the loading ladder's mechanics, memory and the placement rule,
and the tuner's choice of placement as the input outgrows GPU and then host memory."""

from __future__ import annotations

import math

import optuna
import pytest
from pydantic import ValidationError

from gnnplan.simulator import api
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.spec import load_cluster
from gnnplan.simulator.result import SimResult
from gnnplan.simulator.strategies import ppgnn
from gnnplan.simulator.strategies.base import SimContext
from gnnplan.simulator.strategies.contract import check_workload
from gnnplan.simulator.strategies.ppgnn.cost import input_bytes, model_cost, param_count, param_numels
from gnnplan.simulator.strategies.ppgnn.work import load_work, resolved_placement
from gnnplan.simulator.workload.graphstats import DatasetSummary, dataset_summary
from gnnplan.simulator.workload.spec import workload_from_dict

SIGN = {"arch": "sign", "num_layers": 3, "hidden_dim": 512, "dropout": 0.5}
SGC = {"arch": "sgc", "num_layers": 1, "hidden_dim": 1}


def context(cluster: str, summary: DatasetSummary, model: dict = SIGN, batch_size: int = 8000) -> SimContext:  # type: ignore[type-arg]
    wl = workload_from_dict({"dataset": "cora", "model": model, "training": {"batch_size": batch_size}})
    return SimContext(load_cluster(cluster), wl, None, summary, batch_size)  # type: ignore[arg-type]


def summary(num_labelled: int, feature_dim: int = 128, num_vertices: int | None = None) -> DatasetSummary:
    """A graph with ``num_labelled`` labelled vertices (60/20/20) and 10 edges per vertex."""
    n = num_vertices or num_labelled
    train = int(0.6 * num_labelled)
    return DatasetSummary("card", n, 10 * n, feature_dim, 19, train, (num_labelled - train) // 2,
                          num_labelled - train - (num_labelled - train) // 2)


def test_knobs_validate() -> None:
    assert ppgnn.Knobs().hops == 2 and ppgnn.Knobs().placement is None
    for bad in ({"placement": "tape"}, {"loader": "magic"}, {"chunk_size": 0}, {"hops": -1}, {"cache_fraction": 0.1}):
        with pytest.raises(ValidationError):
            ppgnn.Knobs(**bad)


def test_check_workload_accepts_only_pre_propagation_models() -> None:
    ok = workload_from_dict({"dataset": "cora", "model": SGC})
    check_workload(ppgnn, ok)
    with pytest.raises(SpecError, match="model.arch"):
        check_workload(ppgnn, workload_from_dict({"dataset": "cora", "model": {**SIGN, "arch": "sage"},
                                                  "training": {"fanouts": [5, 5, 5]}}))
    with pytest.raises(SpecError, match="training.mode"):
        check_workload(ppgnn, workload_from_dict({"dataset": "cora", "model": SGC,
                                                  "training": {"mode": "full-graph"}}))


def test_bytes_per_epoch_sgc_one_matrix_sign_r_plus_one() -> None:
    sm = summary(100_000)
    for model, matrices in ((SGC, 1), (SIGN, 4)):
        res = ppgnn.simulate(context("4x-a100-10gbe", sm, model), ppgnn.Knobs(hops=3, placement="host"))
        assert res.feasible
        assert res.bytes_per_epoch["pcie"] == pytest.approx(sm.num_train * matrices * 128 * 4)
        assert res.bytes_per_epoch["storage"] == 0.0
        assert res.num_iterations == math.ceil(sm.num_train / 8000)
    res = ppgnn.simulate(context("4x-a100-10gbe", sm, SGC), ppgnn.Knobs(hops=3, placement="ssd", reshuffle="chunk"))
    assert res.bytes_per_epoch["storage"] > sm.num_train * 128 * 4
    assert res.bytes_per_epoch["pcie"] == pytest.approx(sm.num_train * 128 * 4)  # GDS: storage -> GPU


def test_load_work_per_placement_and_scheme() -> None:
    ctx = context("4x-a100-10gbe", summary(100_000))
    b, m = 2000.0, 4  # 8000 rows over 4 workers; SIGN with R = 3
    row = 128 * 4
    gpu = load_work(ctx, ppgnn.Knobs(hops=3, placement="gpu", loader="fused"), "gpu", b)
    assert gpu.gpu_gather_bytes == b * m * row and gpu.pcie_bytes == 0 and gpu.num_requests == m
    host = load_work(ctx, ppgnn.Knobs(hops=3, loader="fused"), "host", b)
    assert host.host_gather_bytes == host.pcie_bytes == b * m * row and host.pcie_latency_s == m * 5e-6
    chunk = load_work(ctx, ppgnn.Knobs(hops=3, loader="fused", reshuffle="chunk", chunk_size=500), "host", b)
    runs = 1 + (b - 1) / 500
    assert chunk.host_gather_bytes == 0 and chunk.num_requests == pytest.approx(runs * m)
    assert chunk.pcie_latency_s == pytest.approx(runs * m * 5e-6)
    base = load_work(ctx, ppgnn.Knobs(hops=3, loader="baseline"), "host", b)
    assert base.row_index_core_s == pytest.approx(b * m * ctx.cluster.host.row_index_s)
    assert base.num_requests == b * m
    gds = load_work(ctx, ppgnn.Knobs(hops=3, loader="fused", reshuffle="chunk"), "ssd", b)
    runs = 1 + (b - 1) / 8000
    assert gds.storage_direct and gds.pcie_bytes == 0
    assert gds.storage_bytes == pytest.approx(b * m * row + runs * m * 4096)
    rows = load_work(ctx, ppgnn.Knobs(hops=3, loader="fused"), "ssd", b)
    assert rows.storage_bytes == b * m * (4096 + row) and rows.storage_latency_s == pytest.approx(b * m * 1e-4 / 4)
    assert rows.pcie_bytes == b * m * row and not rows.storage_direct


def test_loading_ladder_on_host_memory() -> None:
    """baseline > fused > double buffering; chunk reshuffling removes the host gather (one A100 machine)."""
    ctx = context("4x-a100-10gbe", summary(400_000), {**SIGN, "hidden_dim": 128, "num_layers": 1})
    times = {}
    for name, knobs in (("baseline", {"loader": "baseline"}), ("fused", {"loader": "fused"}),
                        ("double_buffer", {"loader": "double_buffer"}),
                        ("chunk", {"loader": "double_buffer", "reshuffle": "chunk"})):
        res = ppgnn.simulate(ctx, ppgnn.Knobs(hops=3, placement="host", **knobs))
        times[name] = res.epoch_time_s
        if name == "fused":
            fused = res
    assert times["baseline"] > times["fused"] > times["double_buffer"] >= times["chunk"]
    per_it = fused.breakdown_s
    steps = fused.num_iterations
    assert fused.epoch_time_s == pytest.approx(sum(per_it[p] for p in ppgnn.PHASES), rel=1e-6)
    assert times["double_buffer"] == pytest.approx(
        max(per_it["load"], per_it["forward"] + per_it["backward"] + per_it["all_reduce"] + per_it["optimizer"])
        + per_it["load"] / steps, rel=0.1)


def test_double_buffering_hides_loading_behind_compute() -> None:
    """With a wide model compute dominates: double buffering costs one batch's load over compute alone."""
    ctx = context("4x-a100-10gbe", summary(400_000))
    fused = ppgnn.simulate(ctx, ppgnn.Knobs(hops=3, placement="host", loader="fused"))
    double = ppgnn.simulate(ctx, ppgnn.Knobs(hops=3, placement="host", loader="double_buffer"))
    compute = sum(fused.breakdown_s[p] for p in ("forward", "backward", "all_reduce", "optimizer"))
    assert fused.breakdown_s["load"] < compute
    assert double.epoch_time_s == pytest.approx(compute + fused.breakdown_s["load"] / fused.num_iterations, rel=0.02)


def test_gpus_of_a_machine_share_host_memory_bandwidth() -> None:
    """dgx-a100: eight GPUs gathering from one host memory each load slower than one GPU alone, and copy at half
    their link's rate: two GPUs share each PCIe switch uplink (pcie.gpus_per_uplink = 2)."""
    sm = summary(800_000)
    one = load_cluster("dgx-a100").model_copy(update={"gpus_per_machine": 1})
    wl = workload_from_dict({"dataset": "cora", "model": SGC, "training": {"batch_size": 8000}})
    knobs = ppgnn.Knobs(hops=3, placement="host", loader="fused")
    alone = ppgnn.simulate(SimContext(one, wl, None, sm, 1000), knobs)  # type: ignore[arg-type]
    shared = ppgnn.simulate(SimContext(load_cluster("dgx-a100"), wl, None, sm, 8000), knobs)  # type: ignore[arg-type]
    loads = [[s.dur_s for s in r.spans if s.phase == "load" and s.iteration == 0] for r in (alone, shared)]
    # one GPU's rows of hop R (SGC), read and written, at the host memory bandwidth
    gather_alone = 2 * 1000 * 128 * 4 / 409.6e9
    assert loads[0] == pytest.approx([5e-6 + gather_alone + 1000 * 128 * 4 / 25e9])
    copy_alone = 1000 * 128 * 4 / 25e9
    # eight gathers share the memory, then pairs of copies share an uplink (host memory: 8 x 25 GB/s < 409.6)
    assert loads[1] == pytest.approx([loads[0][0] + 7 * gather_alone + copy_alone] * 8)
    assert alone.breakdown_s["all_reduce"] == 0.0 < shared.breakdown_s["all_reduce"]


def test_spans_and_one_off_preprocessing() -> None:
    res = ppgnn.simulate(context("4x-a100-10gbe", summary(50_000)), ppgnn.Knobs(hops=2, placement="host"))
    phases = {s.phase for s in res.spans}
    assert {"load", "forward", "backward", "all_reduce", "optimizer", "iteration", "epoch"} <= phases
    load = next(s for s in res.spans if s.phase == "load" and s.iteration == 0)
    assert load.nbytes == pytest.approx(2000 * 3 * 128 * 4) and load.args["local_bytes"] == load.nbytes
    assert res.breakdown_s["preprocess"] > 0
    assert res.epoch_time_s < sum(res.breakdown_s.values())  # preprocessing is not part of the epoch
    # and the JSON object says so (2026-12-01: nothing in it marked preprocess as outside the epoch)
    assert res.to_json_dict()["one_off_phases"] == ["preprocess"]
    assert SimResult.model_validate(res.to_json_dict()).breakdown_s == res.breakdown_s  # read back
    dp = api.simulate("4x-a100-10gbe", "cora-sage", "dp").to_json_dict()
    assert "one_off_phases" not in dp and SimResult.model_validate(dp).epoch_time_s == dp["epoch_time_s"]


def test_flops_and_parameters() -> None:
    spec = workload_from_dict({"dataset": "cora", "model": SIGN}).model
    cost = model_cost(spec, 100, 10, 2, 1000)
    assert cost.num_params == param_count(spec, 100, 10, 2)
    first = next(k for k in cost.forward if k.name.endswith("hop0.linear0"))
    assert first.flops == 2 * 1000 * 100 * 512 + 1000 * 512
    assert cost.backward_flops > 1.9 * cost.forward_flops


def test_infeasible_placement_is_a_result() -> None:
    res = ppgnn.simulate(context("4x-a100-10gbe", summary(30_000_000)), ppgnn.Knobs(hops=3, placement="gpu"))
    assert not res.feasible and "out of GPU memory" in res.reason and math.isinf(res.epoch_time_s)


def test_real_dataset_summary() -> None:
    res = ppgnn.simulate(context("4x-a100-10gbe", dataset_summary("cora"), SGC, batch_size=140), ppgnn.Knobs())
    assert res.feasible and res.num_iterations == 1
    assert res.bytes_per_epoch["pcie"] == 0.0  # the rule places Cora's 9 MB on the GPUs


RULE_SIZES = {"gpu": 2_000_000, "host": 5_000_000, "ssd": 20_000_000}
"""Labelled vertices with 1024 features (IGB-like): SIGN R = 3 inputs of 33 GB, 82 GB and 328 GB against
40 GB GPUs and 128 GB hosts (4x-a100-10gbe)."""
TUNER_SIZES = {"gpu": 5_000_000, "host": 20_000_000, "ssd": 100_000_000}
"""SGC reads one matrix: 20 GB, 82 GB and 410 GB; its tiny model makes loading decide the epoch time."""


@pytest.mark.parametrize("expected", ["gpu", "host", "ssd"])
def test_placement_rule_follows_what_fits(expected: str) -> None:
    n = RULE_SIZES[expected]
    ctx = context("4x-a100-10gbe", summary(n, 1024, num_vertices=RULE_SIZES["ssd"]))
    stored = input_bytes(n, 1024, "sign", 3)
    assert (stored < 40e9) == (expected == "gpu") and (stored < 128e9) == (expected != "ssd")
    assert resolved_placement(ctx, ppgnn.Knobs(hops=3)) == expected


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
@pytest.mark.parametrize("expected", ["gpu", "host", "ssd"])
def test_tuner_picks_placement_by_what_fits(expected: str) -> None:
    """An Optuna study over ``ppgnn.suggest``'s whole space (exhaustive; infeasible = 1e9 s as autotune.study)
    on the simulator picks GPU while the input fits there, then host memory, then SSD."""
    ctx = context("4x-a100-10gbe", summary(TUNER_SIZES[expected], 1024, num_vertices=TUNER_SIZES["ssd"]), SGC)

    def objective(trial: optuna.Trial) -> float:
        knobs = ppgnn.suggest(trial, ctx.workload).model_copy(update={"hops": 3})
        res = ppgnn.simulate(ctx, knobs)
        trial.set_user_attr("placement", knobs.placement)
        return res.epoch_time_s if res.feasible else 1e9

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.BruteForceSampler(seed=0))
    study.optimize(objective, n_trials=18)
    assert len(study.trials) == 18
    assert study.best_trial.user_attrs["placement"] == expected
    assert study.best_value < 1e9
    best = {p: min(t.value for t in study.trials if t.user_attrs["placement"] == p) for p in ("gpu", "host", "ssd")}
    assert all(best[expected] < best[p] for p in best if p != expected)  # not a tie


@pytest.mark.parametrize(("arch", "layers"), [("sgc", 1), ("sign", 1), ("sign", 2), ("sign", 3)])
def test_parameter_tensors_equal_the_executor_models(arch: str, layers: int) -> None:
    """One Adam kernel per parameter tensor of the executor's model (its fixed cost is per tensor)."""
    pytest.importorskip("torch")
    from gnnplan.executor.strategies.ppgnn.models import build_model

    spec = workload_from_dict({"dataset": "cora", "model": {"arch": arch, "num_layers": layers, "hidden_dim": 8}}).model
    numels = sorted(p.numel() for p in build_model(spec, 20, 5, 2).parameters())
    assert sorted(param_numels(spec, 20, 5, 2)) == numels
    assert sorted(k.nbytes / 28 for k in model_cost(spec, 20, 5, 2, 10).optimizer) == numels
