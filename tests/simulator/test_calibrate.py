"""Calibration: recover hidden cluster parameters from the simulator's own predicted traces, regularised toward
priors, with uncertainties and flags; held-out errors of epochs and configurations the fit did not see."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from calibration_traces import DP_PARAMS, KNOBS, TRUE, dp_traces, start_cluster

from gnnplan.simulator import api
from gnnplan.simulator.calibrate import PARAMS, calibrate, calibrate_files, get_param, with_params
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.spec import load_cluster
from gnnplan.simulator.trace import Span

WIDER = {"network.latency_s": 1.4, "network.per_collective_s": 1.6, "efficiency.gather_fraction": 3.5}
"""Parameters whose one-sigma range (high / low) may exceed 1.3 in the recovery test, and their limit (the host
gather of the local rows and their PCIe copy follow each other in every load span, so the spans pin their sum better
than the gather: 0.27-0.89 around 0.5 on 2026-11-29)."""

def test_calibration_recovers_hidden_parameters(fake_graphstats: list[dict[str, Any]], tmp_path: Path) -> None:
    start = start_cluster()
    fitted, report = calibrate_files(dp_traces(tmp_path, with_params(start, TRUE)), start)
    params = report["parameters"]
    # the feature load's PCIe latency hides behind the bytes: the traces carry less information on it than its
    # prior, and the report says so (until 2026-11-29 the host gather as well, when a gathered byte was priced as
    # one byte of traffic, not read and written: half the share of the load it has now)
    weak = {p for p in DP_PARAMS if "not informed" in params[p]["flags"]}
    assert weak == {"pcie.latency_s"}
    for p in ("host.row_index_s", "storage.concurrency",  # ppgnn's loaders' parameters
              "host.split_items_per_s_per_core", "host.split_call_s",  # gsplit's split
              "host.full_neighbour_sampling_ratio", "efficiency.inference_ratio"):  # an executor run's evaluation
        assert not params[p]["constrained"] and not params[p]["fitted"] and "not informed" in params[p]["flags"], p
        assert get_param(fitted, p) == get_param(start, p), p
    for p in ("host.sampler_call_s", "gpu.graph_op_overhead_s", "network.ddp_per_bucket_s",
              "network.per_all_to_all_s"):
        # 0 in truth and start, no prior: not moved (the fetch's all-to-all calls then carry only their latencies,
        # which tell network.latency_s from the all-reduce's per-call cost)
        assert params[p]["constrained"] and not params[p]["fitted"] and get_param(fitted, p) == 0.0, p
    assert set(PARAMS) - set(DP_PARAMS) == {"host.row_index_s", "storage.concurrency", "host.sampler_call_s",
                                            "gpu.graph_op_overhead_s", "network.ddp_per_bucket_s",
                                            "network.per_all_to_all_s", "host.split_items_per_s_per_core",
                                            "host.split_call_s", "host.full_neighbour_sampling_ratio",
                                            "efficiency.inference_ratio"}
    for p in DP_PARAMS:
        assert params[p]["constrained"] and params[p]["before"] == get_param(start, p), p
        assert params[p]["low"] < params[p]["after"] < params[p]["high"], p
        if p == "pcie.bandwidth_bytes_per_s":
            # local rows are gathered and then copied, one after the other: the copy of the same bytes as the
            # gather takes up its ~1/100e9 s per byte
            assert get_param(fitted, p) == pytest.approx(TRUE[p], rel=0.05), p
        elif p == "efficiency.optimizer_fraction":
            # Adam runs one update per parameter tensor (model_cost.adam_kernels): 6 kernel launches make ~90% of
            # the optimizer span, so its fraction rests on the other ~10% and its prior (1) pulls it up a little
            # (0.229 since the backward's kernels have a ratio of their own, 2026-11-30: the per-kernel cost, which
            # the optimizer shares with the forward, recovered 1.4% high)
            assert get_param(fitted, p) == pytest.approx(TRUE[p], rel=0.15), p
        elif p not in weak:
            assert get_param(fitted, p) == pytest.approx(TRUE[p], rel=0.025), p
            # one sigma within +-15%; wider for the latency and the all-reduce's per-call cost, which only the
            # all-reduce's one call per iteration and the fetch's latencies tell apart (the fetch's all-to-all calls
            # have a fixed cost of their own, 0 here)
            assert params[p]["high"] / params[p]["low"] < WIDER.get(p, 1.3), p
    # the hand-off and the per-iteration overhead share the iteration rows; traces with and without sampler
    # processes tell them apart (and the per-collective cost from the all-reduce's latencies and bytes)
    for p in ("host.sampler_handoff_s", "iteration_overhead_s", "network.per_collective_s"):
        assert params[p]["data_share"] > 0.9, p
    for p in ("efficiency.forward_fraction", "efficiency.backward_fraction", "efficiency.optimizer_fraction"):
        assert params[p]["flags"] == ["beyond 3x of prior"], p  # 0.2-0.3 of the roofline the preset assumes
    assert fitted.name == "4x-a100-10gbe-calibrated"
    assert fitted.sources["network.latency_s"] == "calibrated from a.json, b.json"
    assert fitted.sources["pcie.latency_s"] == "calibrated from a.json, b.json (not informed)"
    assert fitted.sources["gpu.peak_flops_per_s"] == start.sources["gpu.peak_flops_per_s"]
    assert fitted.priors == {p: get_param(start, p) for p in DP_PARAMS}  # no priors block: the starting values
    for name in ("a.json", "b.json"):
        row = report["traces"][name]
        assert row["fit_epoch_time_s"] == pytest.approx(row["measured_epoch_time_s"], rel=0.01)
        assert abs(row["predicted_epoch_time_s_before"] / row["measured_epoch_time_s"] - 1) > 0.2


def test_parameters_the_traces_do_not_inform_stay(fake_graphstats: list[dict[str, Any]], tmp_path: Path) -> None:
    one = load_cluster("4x-a100-10gbe").model_copy(update={"num_machines": 1})
    truth = with_params(one, {"efficiency.forward_fraction": 0.4, "host.sampling_edges_per_s_per_core": 5e6})
    result = api.simulate(truth, "rmat100k-sage", "dp", {})
    path = api.predicted_trace(result, tmp_path / "one.json", api.trace_metadata(truth, "rmat100k-sage", "dp", result))
    fitted, report = calibrate_files([path], one)
    params = report["parameters"]
    # one machine, one GPU: no fetch and no all-reduce, so the network is not informed; no sampler process, so
    # no hand-off
    for p in ("network.bandwidth_bytes_per_s", "network.latency_s", "network.per_collective_s",
              "host.sampler_handoff_s"):
        assert not params[p]["constrained"] and get_param(fitted, p) == get_param(one, p), p
        assert params[p]["num_rows"] == 0 and "not informed" in params[p]["flags"], p
        assert p not in fitted.sources or "calibrated" not in fitted.sources[p]
    assert get_param(fitted, "efficiency.forward_fraction") == pytest.approx(0.4, rel=0.02)
    assert get_param(fitted, "host.sampling_edges_per_s_per_core") == pytest.approx(5e6, rel=1e-3)


def test_priors_block_centres_the_fit_and_survives_it(fake_graphstats: list[dict[str, Any]], tmp_path: Path) -> None:
    one = load_cluster("4x-a100-10gbe").model_copy(update={"num_machines": 1})
    truth = with_params(one, {"efficiency.forward_fraction": 0.3})
    result = api.simulate(truth, "rmat100k-sage", "dp", {})
    path = api.predicted_trace(result, tmp_path / "one.json", api.trace_metadata(truth, "rmat100k-sage", "dp", result))
    # a calibrated cluster whose fields moved, with the measured priors kept aside
    start = with_params(one, {"efficiency.forward_fraction": 0.9, "network.latency_s": 1e-3})
    start = start.model_copy(update={"priors": {"efficiency.forward_fraction": 0.25, "network.latency_s": 2e-5}})
    fitted, report = calibrate_files([path], start)
    fwd = report["parameters"]["efficiency.forward_fraction"]
    assert (fwd["prior"], fwd["before"]) == (0.25, 0.9)
    assert fwd["after"] == pytest.approx(0.3, rel=0.02) and fwd["ratio_to_prior"] == pytest.approx(1.2, rel=0.02)
    assert fwd["flags"] == []
    latency = report["parameters"]["network.latency_s"]  # not informed: kept, and still measured against its prior
    assert latency["after"] == 1e-3 and latency["ratio_to_prior"] == pytest.approx(50.0)
    assert latency["flags"] == ["not informed", "beyond 3x of prior"]
    assert fitted.priors["efficiency.forward_fraction"] == 0.25 and fitted.priors["network.latency_s"] == 2e-5
    assert fitted.priors["efficiency.backward_fraction"] == 1.0  # a fitted parameter without one gets its start


def test_fixed_costs_the_traces_cannot_tell_apart_are_flagged(fake_graphstats: list[dict[str, Any]],
                                                              tmp_path: Path) -> None:
    start = load_cluster("4x-a100-10gbe")  # the preset models neither cost: no priors
    truth = with_params(start, {"host.sampler_handoff_s": 3e-3, "iteration_overhead_s": 2e-3})
    result = api.simulate(truth, "rmat100k-sage", "dp", KNOBS["b.json"])
    path = api.predicted_trace(result, tmp_path / "b.json", api.trace_metadata(truth, "rmat100k-sage", "dp", result))
    fitted, report = calibrate_files([path], start)
    for p in ("host.sampler_handoff_s", "iteration_overhead_s", "gpu.kernel_overhead_s"):
        # only the hand-off's and the overhead's sum is measured, and the kernel overhead (0 in truth) is not
        # determined beside the efficiencies: without priors none is moved
        param = report["parameters"][p]
        assert param["constrained"] and not param["fitted"] and param["after"] == 0.0 == get_param(fitted, p), p
        assert param["flags"] == ["not informed", "no prior"], p
    # so the in-sample fit misses the 5 ms per iteration they cost
    fit_s, measured_s = report["traces"]["b.json"]["fit_epoch_time_s"], result.epoch_time_s
    assert measured_s - fit_s == pytest.approx(5e-3 * result.num_iterations, rel=0.05)


def test_a_parameter_at_its_limit_is_flagged_at_bound(fake_graphstats: list[dict[str, Any]], tmp_path: Path) -> None:
    start = with_params(start_cluster(), {"efficiency.forward_fraction": 0.3})
    # a forward pass at ClusterSpec's limit of 10 x the roofline, 33 x what the start assumes
    truth = with_params(start, {**TRUE, "efficiency.forward_fraction": 10.0, "gpu.kernel_overhead_s": 1e-9})
    _, report = calibrate_files(dp_traces(tmp_path, truth), start)
    forward = report["parameters"]["efficiency.forward_fraction"]
    assert forward["flags"] == ["at bound", "beyond 3x of prior"]
    assert forward["after"] == pytest.approx(10.0, rel=0.01)


def test_held_out_epochs_and_configurations(fake_graphstats: list[dict[str, Any]], tmp_path: Path) -> None:
    start = start_cluster()
    truth = with_params(start, TRUE)
    # epoch 0 is warm-up; epoch 2 (fitted) runs at the truth, epoch 1 (held out) 25% slower, its evaluation 2x
    paths = dp_traces(tmp_path, truth, epochs=(3.0, 1.25, 1.0), evaluations=(3.0, 2.0, 1.0))
    _, report = calibrate_files(paths, start)
    rows = {r["trace"]: r for r in report["held_out"]["epochs"]["rows"]}
    assert set(rows) == {"a.json", "b.json"} and report["held_out"]["epochs"]["not_held_out"] == {}
    assert report["held_out"]["epochs"]["transient"] == {}  # 2 measured epochs: too few to call one a transient
    for name, row in rows.items():
        assert (row["fit_epochs"], row["held_out_epochs"]) == ([2], [1])
        truth_s = api.simulate(truth, "rmat100k-sage", "dp", KNOBS[name]).epoch_time_s
        assert row["measured_epoch_time_s"] == pytest.approx(1.25 * truth_s, rel=1e-9)
        assert row["predicted_s"] == pytest.approx(truth_s, rel=0.01)  # the fit on epoch 2 found the truth
        assert row["error_fraction"] == pytest.approx(1 / 1.25 - 1, abs=0.01), name
        assert row["error_before_fraction"] == pytest.approx(row["predicted_before_s"] / row["measured_epoch_time_s"]
                                                             - 1, rel=1e-12)
        # the held-out epoch's evaluation against the same fit's prediction (no evaluation spans here: the fit's
        # rates, found from the training spans, are the truth's) and against the starting cluster's
        evaluation, truth_eval_s = row["evaluation"], api.simulate(truth, "rmat100k-sage", "dp",
                                                                   KNOBS[name]).evaluation_time_s
        assert evaluation["measured_s"] == pytest.approx(2.0 * truth_eval_s, rel=1e-9)
        assert evaluation["predicted_s"] == pytest.approx(truth_eval_s, rel=0.03)
        assert evaluation["predicted_before_s"] == api.simulate(start, "rmat100k-sage", "dp",
                                                                KNOBS[name]).evaluation_time_s
        assert evaluation["error_fraction"] == pytest.approx(evaluation["predicted_s"] / evaluation["measured_s"] - 1)
    loco = {r["traces"][0]: r for r in report["held_out"]["configurations"]["rows"]}
    # a.json alone has no sampler process: it cannot move the hand-off off its prior (1 ms, truth 3 ms), so b's
    # prediction from it is short by the 2 ms per iteration it misses
    assert loco["a.json"]["error_fraction"] == pytest.approx(0.0, abs=0.06)
    assert loco["b.json"]["error_fraction"] < -0.1
    single = calibrate_files(dp_traces(tmp_path / "single", truth)[:1], start)[1]["held_out"]
    assert single["epochs"] == {"rows": [], "not_held_out": {"a.json": "1 epoch: cannot be held out"}, "transient": {}}
    assert single["configurations"] == {"rows": [], "reason": "1 trace of one configuration: none to leave out"}


def test_phases_without_a_rule_are_ignored_and_reported(fake_graphstats: list[dict[str, Any]]) -> None:
    cluster = load_cluster("4x-a100-10gbe")
    result = api.simulate(cluster, "rmat100k-sage", "dp", {})
    meta = api.trace_metadata(cluster, "rmat100k-sage", "dp", result)
    extra = [Span(s.rank, "checkpoint", s.start_s, 1.0, epoch=s.epoch, iteration=s.iteration, nbytes=1e9)
             for s in result.spans if s.phase == "load"]
    plain = calibrate({"t.json": (result.spans, meta)}, cluster, simulate_fn=lambda cl, plan: result)[1]
    mixed = calibrate({"t.json": (result.spans + extra, meta)}, cluster, simulate_fn=lambda cl, plan: result)[1]
    assert plain["fit"]["unpriced_phases"] == [] and mixed["fit"]["unpriced_phases"] == ["checkpoint"]
    assert mixed["parameters"] == plain["parameters"]
    with pytest.raises(SpecError, match="no span their strategies' CALIBRATION prices.*checkpoint"):
        calibrate({"t.json": (extra, meta)}, cluster)


def test_calibrate_rejects_traces_without_a_plan(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="no 'plan'"):
        calibrate({"x.json": ([], {})}, "4x-a100-10gbe")
    with pytest.raises(SpecError, match="at least one trace"):
        calibrate({}, "4x-a100-10gbe")
    with pytest.raises(SpecError, match="does not exist"):
        calibrate_files([tmp_path / "missing.json"], "4x-a100-10gbe")


def test_a_transient_epoch_is_fitted_by_no_fit(fake_graphstats: list[dict[str, Any]], tmp_path: Path) -> None:
    """A run whose epoch 4 (a fitting one) took 4x its others, as under a burst of other load: no fit uses it, so
    the held-out epochs (1, 3, 5: median at the truth) are predicted within the others' 1-2% jitter, and the report
    names it (the jitter gives the epochs a spread: at least half of them equal, there is none, as in a simulated
    trace, and no epoch is called a transient)."""
    start = start_cluster()
    truth = with_params(start, TRUE)
    path = dp_traces(tmp_path, truth, epochs=(3.0, 1.0, 1.01, 0.99, 4.0, 1.02, 0.98))[0]
    report = calibrate_files([path], start)[1]["held_out"]["epochs"]
    truth_s = api.simulate(truth, "rmat100k-sage", "dp", KNOBS["a.json"]).epoch_time_s
    (row,) = report["rows"]
    assert (row["fit_epochs"], row["held_out_epochs"]) == ([2, 6], [1, 3, 5])
    assert row["error_fraction"] == pytest.approx(0.0, abs=0.02)  # fitted on 1.01 and 0.98 x the truth
    transient = report["transient"]["a.json"]
    assert transient["epochs"] == [4] and transient["median_s"] == pytest.approx(1.005 * truth_s, rel=1e-9)
    assert transient["times_s"] == [pytest.approx(4 * truth_s, rel=1e-9)]


@pytest.mark.parametrize("op", ["sampling", "forward"])
def test_evaluation_spans_fit_their_own_ratio(op: str) -> None:
    """The evaluation's blocks (a chunk's whole in-neighbourhood, ~100x a training batch) run at other rates than
    training's: full-neighbour sampling, and large kernels. Their spans (executor/evaluate.py, priced by
    calibration_rules.evaluation_rules as ``full_sampling`` and ``inference``) are priced at training's rates times
    a ratio of their own: without them the ratio is not fitted (and keeps its default, 1: the evaluation predicted at
    training's rates, 2.5x or 1.8x too slow here); with them both the training and the evaluation spans are met."""
    from gnnplan.simulator.calibrate_fit import FitRow, fit
    from gnnplan.simulator.hardware import pricing

    if op == "sampling":
        ratio, evaluation_op = "host.full_neighbour_sampling_ratio", "full_sampling"
        start = with_params(start_cluster(), {"host.sampler_call_s": 1e-4, "host.sampling_edges_per_s_per_core": 2e7})
        truth = with_params(start, {"host.sampler_call_s": 3e-4, "host.sampling_edges_per_s_per_core": 1e7,
                                    ratio: 2.5})
        train, evaluation = {"num_edges": 4000.0, "num_calls": 2.0}, {"num_edges": 4e5, "num_calls": 1.0}
    else:
        ratio, evaluation_op = "efficiency.inference_ratio", "inference"
        start = with_params(start_cluster(), {"gpu.kernel_overhead_s": 2e-5, "efficiency.forward_fraction": 1.0})
        truth = with_params(start, {"gpu.kernel_overhead_s": 6e-5, "efficiency.forward_fraction": 0.4, ratio: 1.8})
        train = {"flops": 4e7, "seconds_per_flop": 1e-10, "kernels": 60.0}
        evaluation = {"flops": 4e9, "seconds_per_flop": 1e-10, "kernels": 30.0}

    def rows(kind: str, kind_op: str, work: dict[str, float], n: int) -> list[FitRow]:
        seconds = pricing.OPERATIONS[kind_op].seconds(truth, **work)
        return [FitRow(f"t.json/{kind}", "t.json", 1, kind_op, work, seconds * (1 + 0.01 * (i % 3 - 1)), start)
                for i in range(n)]

    def priced(result: Any, kind_op: str, work: dict[str, float]) -> float:
        return pricing.OPERATIONS[kind_op].seconds(with_params(start, result.values), **work)

    alone = fit(rows(op, op, train, 30), start)
    both = fit(rows(op, op, train, 30) + rows(f"eval_{op}", evaluation_op, evaluation, 4), start)
    assert not alone.parameters[ratio]["fitted"] and alone.values[ratio] == 1.0
    assert both.parameters[ratio]["fitted"]
    for result in (alone, both):
        assert priced(result, op, train) == pytest.approx(pricing.OPERATIONS[op].seconds(truth, **train), rel=0.01)
    truth_s = pricing.OPERATIONS[evaluation_op].seconds(truth, **evaluation)
    assert priced(both, evaluation_op, evaluation) == pytest.approx(truth_s, rel=0.01)
    assert priced(alone, evaluation_op, evaluation) > 1.5 * truth_s


def test_a_row_sees_the_spans_of_its_own_iteration_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Training's iteration 0 and the evaluation's chunk 0 of an epoch share their numbers (executor/evaluate.py):
    a training span's row sees training's spans of that iteration, an evaluation span's the evaluation's."""
    from types import SimpleNamespace

    from gnnplan.simulator import calibrate as cal
    from gnnplan.simulator.hardware.phase_rules import PhaseRule
    from gnnplan.simulator.trace import Span

    seen: dict[str, list[str]] = {}

    def when(row: Any) -> bool:
        seen[row.span.phase] = sorted(row.iteration)
        return True

    rule = PhaseRule("inference", lambda row: {}, when=when)
    spans = [Span(0, phase, start, 0.1, "compute", 0.0, 1.0, 1, 0, {})
             for start, phase in ((0.0, "sample"), (0.1, "forward"), (1.0, "eval_sample"), (1.1, "eval_forward"))]
    trace = SimpleNamespace(plugin=SimpleNamespace(CALIBRATION={"forward": rule, "eval_forward": rule}), spans=spans,
                            shape=load_cluster("local"), plan=SimpleNamespace(knobs={}))
    monkeypatch.setattr(cal, "_fit_rows", lambda t, rows: rows)
    rows, unpriced = cal._collect(trace)  # type: ignore[arg-type]
    assert [phase for phase, _, _ in rows] == ["forward", "eval_forward"]  # type: ignore[misc]
    assert seen == {"forward": ["forward", "sample"], "eval_forward": ["eval_forward", "eval_sample"]}
    assert unpriced == {"sample", "eval_sample"}


@pytest.mark.parametrize("training_graph_ops", [0.0, 4.0])
def test_a_rate_only_the_evaluation_informs_is_not_fitted(training_graph_ops: float) -> None:
    """The evaluation's rows fit their own ratio; a training rate that only they depend on (gsplit's split layers
    make no DGL call, so only its evaluation's spans carry gpu.graph_op_overhead_s) keeps its value, flagged not
    informed, instead of trading against the ratio on a few large blocks. With DGL calls in training it is fitted,
    and the evaluation's rows meet their measured seconds either way."""
    from gnnplan.simulator.calibrate_fit import FitRow, fit
    from gnnplan.simulator.hardware import pricing

    start = with_params(start_cluster(), {"gpu.graph_op_overhead_s": 1e-4, "efficiency.forward_fraction": 1.0})
    truth = with_params(start, {"gpu.graph_op_overhead_s": 3e-4, "efficiency.inference_ratio": 1.5})
    train = {"flops": 4e7, "seconds_per_flop": 1e-10, "kernels": 60.0, "graph_ops": training_graph_ops}
    evaluation = {"flops": 4e9, "seconds_per_flop": 1e-10, "kernels": 30.0, "graph_ops": 6.0}

    def rows(kind: str, op: str, work: dict[str, float], n: int) -> list[FitRow]:
        seconds = pricing.OPERATIONS[op].seconds(truth, **work)
        return [FitRow(f"t.json/{kind}", "t.json", 1, op, work, seconds * (1 + 0.01 * (i % 3 - 1)), start)
                for i in range(n)]

    result = fit(rows("forward", "forward", train, 30) + rows("eval_forward", "inference", evaluation, 4), start)
    overhead = result.parameters["gpu.graph_op_overhead_s"]
    assert result.parameters["efficiency.inference_ratio"]["fitted"]
    if training_graph_ops:  # a variable (one batch size cannot tell it from the kernel cost, so not its truth)
        assert overhead["fitted"] and overhead["num_rows"] == 34
    else:
        assert not overhead["fitted"] and overhead["num_rows"] == 0 and "not informed" in overhead["flags"]
        assert result.values["gpu.graph_op_overhead_s"] == 1e-4
    fitted = with_params(start, result.values)
    for op, work in (("forward", train), ("inference", evaluation)):
        truth_s = pricing.OPERATIONS[op].seconds(truth, **work)
        assert pricing.OPERATIONS[op].seconds(fitted, **work) == pytest.approx(truth_s, rel=0.02)
