"""The evaluation's memory (simulator/strategies/inference_memory.py): the parts of each layer by hand, the peak of
the phases, and a configuration whose training fits but whose evaluation does not; and its time
(simulator/strategies/inference_time.py) by hand (constructed statistics)."""

from __future__ import annotations

from typing import Any

import pytest
from sim_fixtures import RMAT_SUMMARY, make_inference, shaped

from gnnplan.simulator import api
from gnnplan.simulator.hardware import pricing
from gnnplan.simulator.hardware.formulas import compute_time_s
from gnnplan.simulator.hardware.spec import load_cluster
from gnnplan.simulator.strategies.base import FETCH_COLLECTIVES, MemoryEstimate, SimContext
from gnnplan.simulator.strategies.host_memory import SAMPLER_PROCESS_BYTES
from gnnplan.simulator.strategies.inference_memory import PULL_BUFFERS, inference_memory, peak_of_phases
from gnnplan.simulator.strategies.inference_time import evaluation_time_s
from gnnplan.simulator.workload.model_cost import Block, inference_layer_kernels, layer_dims
from gnnplan.simulator.workload.spec import load_workload

MB = 1e6


def test_each_layers_parts_by_hand(fake_graphstats: list[dict[str, Any]]) -> None:
    cl = shaped("4x-a100-10gbe", 2, 2)
    wl = load_workload("rmat100k-sage")  # sage 128 -> 128 -> 16 on RMAT_SUMMARY (128 features, 16 classes)
    ctx = SimContext(cl, wl, None, RMAT_SUMMARY, 1024)
    inf = make_inference(2, 2)  # 25000 vertices per rank, chunks of 16384 reaching 57344 sources
    est = inference_memory(ctx, {"kept": 1.0}, {"kept host": 2.0}, inf)
    src = inf.src_vertices
    # layer 0 has the larger device parts: 128-wide inputs, the same structure, and SAGE's outputs of 16384 rows
    assert est.gpu_parts["inference block inputs"] == src * 128 * 4
    assert est.gpu_parts["inference block structure"] == 8 * (2 * inf.edges + src)
    assert est.gpu_parts["kept"] == 1.0 and est.host_parts["kept host"] == 2.0
    # host, per worker: layer 0 pulls across machines (its own rows: 2 x 128 outputs); layer 1 pulls across workers
    # too, holding the previous layer's 128 and 2 x 16 outputs: layer 0 is larger
    layer0 = inf.rank_vertices * 4 * (2 * 128) + PULL_BUFFERS * src * 128 * 4
    assert est.host_parts["inference rows and pull buffers"] == pytest.approx(2 * layer0)
    assert est.feasible and est.phases is None
    one = cl.model_copy(update={"num_machines": 1, "gpus_per_machine": 1})
    whole = make_inference(1, 1)  # one rank: no pulls at all; layer 1 holds its 128 inputs and 2 x 16 outputs
    alone = inference_memory(SimContext(one, wl, None, RMAT_SUMMARY, 1024), {}, {}, whole)
    assert alone.host_parts["inference rows and pull buffers"] == pytest.approx(
        max(whole.rank_vertices * 4 * 2 * 128, whole.rank_vertices * 4 * (128 + 2 * 16)))


def test_the_peak_is_the_larger_phase_per_memory_and_fits_only_when_both_do() -> None:
    training = MemoryEstimate({"a": 5.0}, {"b": 300.0}, True, "")
    evaluation = MemoryEstimate({"c": 9.0}, {"d": 200.0}, False, "evaluation (layer 0): out of GPU memory")
    peak = peak_of_phases(training, evaluation)
    assert peak.gpu_parts == {"c": 9.0} and peak.host_parts == {"b": 300.0}
    assert peak.peak_memory_bytes == {"gpu": 9.0, "host": 300.0}
    assert not peak.feasible and peak.reason == "evaluation (layer 0): out of GPU memory"
    assert peak.phases == {"training": {"gpu": 5.0, "host": 300.0}, "evaluation": {"gpu": 9.0, "host": 200.0}}


@pytest.mark.parametrize("strategy", ["dp", "hopgnn"])
def test_a_run_whose_evaluation_does_not_fit_is_infeasible(fake_graphstats: list[dict[str, Any]],
                                                           strategy: str) -> None:
    cl = load_cluster("4x-a100-10gbe")
    fits = api.simulate(cl, "rmat100k-sage", strategy, {})
    phases = fits.peak_memory_phases
    assert fits.feasible and phases is not None and fits.to_json_dict()["peak_memory_phases"] == phases
    assert phases["evaluation"]["host"] > phases["training"]["host"]
    assert fits.peak_memory_bytes["host"] == phases["evaluation"]["host"]
    between = (phases["training"]["host"] + phases["evaluation"]["host"]) / 2
    small = cl.model_copy(update={"host": cl.host.model_copy(update={"memory_bytes": between})})
    res = api.simulate(small, "rmat100k-sage", strategy, {})
    assert not res.feasible and res.reason.startswith("evaluation (layer 0): out of host memory")
    assert res.peak_memory_phases is not None and res.peak_memory_phases["evaluation"] == phases["evaluation"]


@pytest.mark.parametrize("strategy", ["dp", "gsplit", "hopgnn"])
def test_sampler_processes_are_held_in_both_phases(fake_graphstats: list[dict[str, Any]], strategy: str) -> None:
    cl = load_cluster("4x-a100-10gbe").model_copy(update={"gpus_per_machine": 2})
    inline = api.simulate(cl, "rmat100k-sage", strategy, {"num_sampler_workers": 0})
    three = api.simulate(cl, "rmat100k-sage", strategy, {"num_sampler_workers": 3})
    # persistent: 2 workers x 3 sampler processes in the evaluation too (training also holds their batches)
    assert inline.peak_memory_phases is not None and three.peak_memory_phases is not None
    extra = three.peak_memory_phases["evaluation"]["host"] - inline.peak_memory_phases["evaluation"]["host"]
    assert extra == pytest.approx(2 * 3 * SAMPLER_PROCESS_BYTES, rel=1e-9)
    assert (three.peak_memory_phases["training"]["host"] - inline.peak_memory_phases["training"]["host"]
            >= 2 * 3 * SAMPLER_PROCESS_BYTES)


@pytest.mark.parametrize("ratios", [(1.0, 1.0), (3.0, 2.0)])  # the presets' default; fitted to eval spans
def test_evaluation_time_by_hand(fake_graphstats: list[dict[str, Any]], ratios: tuple[float, float]) -> None:
    sampling_ratio, inference_ratio = ratios
    cl = shaped("4x-a100-10gbe", 2, 2)
    cl = cl.model_copy(update={"host": cl.host.model_copy(update={"full_neighbour_sampling_ratio": sampling_ratio}),
                               "efficiency": cl.efficiency.model_copy(update={"inference_ratio": inference_ratio})})
    wl = load_workload("rmat100k-sage")
    ctx = SimContext(cl, wl, None, RMAT_SUMMARY, 1024)
    inf = make_inference(2, 2)  # 25000 vertices: 2 chunks of 16384; 1/4 of the sources on the other machine,
    block = Block(inf.src_vertices, inf.dst_vertices, inf.edges)  # 3/8 another rank's
    assert (inf.remote_fraction, inf.other_rank_fraction) == (0.25, 0.375)
    expected = 0.0
    for layer, d in enumerate(layer_dims(wl.model, 128, 16)):  # every layer pulls (2 machines, 4 ranks): 3 calls
        rows = inf.src_vertices * d.in_dim * 4
        share = 0.25 if layer == 0 else 0.375  # layer 0: features of other machines; then rows of other ranks
        fetch = pricing.feature_fetch_s(cl, share * rows, 2, 2, FETCH_COLLECTIVES)
        sampled = inf.edges / (cl.host.sampling_edges_per_s_per_core * sampling_ratio) + cl.host.sampler_call_s
        expected += 2 * (sampled + pricing.feature_load_s(cl, (1 - share) * rows, share * rows, 0.0, fetch)
                         + compute_time_s(inference_layer_kernels("sage", d, block, layer == 1, "x"), cl.gpu,
                                          cl.efficiency.forward_fraction * inference_ratio)
                         + pricing.gpu_to_host_s(cl, inf.dst_vertices * d.out_total * 4))
    assert evaluation_time_s(ctx, inf) == pytest.approx(expected, rel=1e-12)
    if ratios != (1.0, 1.0):
        return
    result = api.simulate(cl, wl, "dp", {})
    assert result.evaluation_time_s == pytest.approx(expected, rel=1e-12)
    assert result.to_json_dict()["evaluation_time_s"] == result.evaluation_time_s
    assert "evaluation_time_s" not in api.simulate(cl, load_workload("cora-gcn-full"), "neutronstar", {}).to_json_dict()


@pytest.mark.parametrize("strategy", ["dp", "hopgnn", "gsplit"])
def test_the_evaluation_s_spans_are_priced_per_layer(fake_graphstats: list[dict[str, Any]], strategy: str) -> None:
    """Every plug-in that evaluates by layer-wise inference prices its ``eval_sample`` and ``eval_forward`` spans
    (calibration_rules.evaluation_rules), and its compute profile has what the forward rule reads: each layer's
    kernels on the inference block and their mean (calibration drops the rows of a phase the profile lacks)."""
    from gnnplan.simulator.strategies import get_strategy
    from gnnplan.simulator.strategies.base import kernel_profile
    from gnnplan.simulator.strategies.inference_time import evaluation_block, layer_profile_key

    module = get_strategy(strategy)
    assert module.CALIBRATION["eval_sample"].op == "full_sampling"
    assert module.CALIBRATION["eval_forward"].op == "inference" and module.CALIBRATION["eval_forward"].profiled
    cl = shaped("4x-a100-10gbe", 2, 2)
    mod, knobs, ctx = api.load_context(cl, "rmat100k-sage", strategy, {})
    profile = mod.compute_profile(ctx, knobs)
    inf = evaluation_block(ctx, "metis")  # every strategy's default partition
    block = Block(inf.src_vertices, inf.dst_vertices, inf.edges)
    kernels = [inference_layer_kernels("sage", d, block, layer == 1, "x")
               for layer, d in enumerate(layer_dims(ctx.workload.model, 128, 16))]
    assert profile["eval_forward"] == kernel_profile(kernels, cl.gpu)
    for layer, ks in enumerate(kernels):
        assert profile[layer_profile_key(layer)] == kernel_profile([ks], cl.gpu)
    assert profile[layer_profile_key(0)] != profile[layer_profile_key(1)]  # 128 -> 128, then 128 -> 16 classes


def test_an_eval_forward_span_is_priced_with_its_layer_s_kernels() -> None:
    from gnnplan.simulator.hardware.phase_rules import SpanRow
    from gnnplan.simulator.strategies.base import PhaseProfile
    from gnnplan.simulator.strategies.calibration_rules import evaluation_rules
    from gnnplan.simulator.trace import Span

    rule = evaluation_rules()["eval_forward"]
    profile = {"eval_forward": PhaseProfile(2e-12, 5.0, 1.0), "eval_forward/0": PhaseProfile(1e-12, 4.0, 1.0),
               "eval_forward/1": PhaseProfile(3e-12, 6.0, 1.0)}
    cl = load_cluster("4x-a100-10gbe")
    for args, want in (({"layer": 0}, profile["eval_forward/0"]), ({"layer": 1}, profile["eval_forward/1"]),
                       ({}, profile["eval_forward"])):
        span = Span(0, "eval_forward", 0.0, 1e-3, flops=1e9, epoch=1, iteration=0, args=args)
        work = rule.work(SpanRow(span, {}, {}, cl, profile))
        assert work == {"flops": 1e9, "seconds_per_flop": want.seconds_per_flop, "kernels": want.kernels_per_span,
                        "graph_ops": want.graph_ops_per_span}
