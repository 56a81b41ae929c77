"""Priced operations: the hardware model's events take the priced seconds; rules price spans at given parameters."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import pytest

from gnnplan.simulator.calibrate import overlapping_peers
from gnnplan.simulator.engine import Engine
from gnnplan.simulator.hardware import phase_rules, pricing
from gnnplan.simulator.hardware.formulas import compute_time_s, roofline_line, roofline_s
from gnnplan.simulator.hardware.model import HardwareModel
from gnnplan.simulator.hardware.spec import ClusterSpec, cluster_from_dict, load_cluster
from gnnplan.simulator.strategies import calibration_rules as rules
from gnnplan.simulator.strategies.base import kernel_profile
from gnnplan.simulator.trace import Span
from gnnplan.simulator.workload.model_cost import Kernel

CLUSTER = load_cluster("4x-a100-10gbe")


def _elapsed_s(cluster: ClusterSpec, event: Callable[[HardwareModel], Generator[Any, Any, None]]) -> float:
    engine = Engine(0)
    hw = HardwareModel(cluster, engine)
    engine.process(event(hw))
    engine.run()
    return float(engine.now)


def test_events_take_the_priced_seconds() -> None:
    def sample(hw: HardwareModel) -> Generator[Any, Any, None]:
        yield hw.sample(0, 3.0e6)

    def host_gather(hw: HardwareModel) -> Generator[Any, Any, None]:
        yield hw.host_gather(5.0e8)

    def gpu_gather(hw: HardwareModel) -> Generator[Any, Any, None]:
        yield from hw.gpu_gather(0, 5.0e8)

    def gpu_to_host(hw: HardwareModel) -> Generator[Any, Any, None]:
        yield hw.gpu_to_host(0, 5.0e8)

    assert _elapsed_s(CLUSTER, sample) == pytest.approx(pricing.sampling_s(CLUSTER, 3.0e6), rel=1e-12)
    assert _elapsed_s(CLUSTER, host_gather) == pytest.approx(pricing.host_gather_s(CLUSTER, 5.0e8), rel=1e-12)
    assert _elapsed_s(CLUSTER, gpu_gather) == pytest.approx(pricing.gpu_gather_s(CLUSTER, 5.0e8), rel=1e-12)
    assert _elapsed_s(CLUSTER, gpu_to_host) == pytest.approx(pricing.host_to_gpu_s(CLUSTER, 5.0e8), rel=1e-12)


def test_exchange_is_its_latencies_plus_bytes_at_the_per_byte_cost() -> None:
    net, pcie = CLUSTER.network, CLUSTER.pcie
    per_byte = 1.0 / net.bandwidth_bytes_per_s + 2.0 / pcie.bandwidth_bytes_per_s
    assert pricing.exchange_per_byte_s(CLUSTER) == pytest.approx(per_byte, rel=1e-15)
    assert pricing.exchange_s(CLUSTER, 1e6, steps=3) == pytest.approx(
        3 * (net.latency_s + 2 * pcie.latency_s) + 1e6 * per_byte, rel=1e-15)
    assert pricing.exchange_s(CLUSTER, 0.0, steps=3) == 0.0
    assert pricing.bandwidth_s(pcie, 1e6) == pytest.approx(1e6 / pcie.bandwidth_bytes_per_s, rel=1e-15)


def test_a_rule_prices_a_row_on_the_cluster_it_is_given() -> None:
    rule = rules.fetch_rule(request_messages=2)
    assert rule.params == ("network.bandwidth_bytes_per_s", "network.latency_s", "network.per_all_to_all_s")
    row = phase_rules.SpanRow(Span(0, "fetch", 0.0, 1e-3, nbytes=1e6), {}, {}, CLUSTER)
    slow = CLUSTER.model_copy(update={"network": CLUSTER.network.model_copy(update={"latency_s": 1e-3})})
    assert rule.predicted_s(row) == pytest.approx(pricing.feature_fetch_s(CLUSTER, 1e6, 2.0, 1.0), rel=1e-15)
    assert rule.predicted_s(row, slow) == pytest.approx(3e-3 + 1e6 / CLUSTER.network.bandwidth_bytes_per_s,
                                                        rel=1e-12)
    assert rule.measured_s(row) == 1e-3


def test_rules_reject_unknown_operations_and_row_kinds() -> None:
    with pytest.raises(ValueError, match="op: unknown priced operation 'teleport'"):
        phase_rules.PhaseRule("teleport", lambda row: {})
    with pytest.raises(ValueError, match="rows: unknown row kind"):
        phase_rules.PhaseRule("network", lambda row: {}, rows="slowest")  # type: ignore[arg-type]


def _with(cluster: ClusterSpec, **fields: dict[str, float]) -> ClusterSpec:
    return cluster.model_copy(update={k: getattr(cluster, k).model_copy(update=v) for k, v in fields.items()})


def test_fixed_costs_are_priced_where_they_are_paid() -> None:
    costly = _with(CLUSTER, network={"per_collective_s": 3e-4}, host={"sampler_handoff_s": 5e-3})
    costly = costly.model_copy(update={"iteration_overhead_s": 1e-3})

    def handoff(hw: HardwareModel) -> Generator[Any, Any, None]:
        yield from hw.sampler_handoff(0, 2.0)

    def all_reduce(hw: HardwareModel) -> Generator[Any, Any, None]:
        yield from hw.all_reduce(0, 1e6)

    assert pricing.sampler_handoff_s(costly, 2.0) == pytest.approx(1e-2, rel=1e-15)
    assert _elapsed_s(costly, handoff) == pytest.approx(1e-2, rel=1e-12)
    assert _elapsed_s(CLUSTER, handoff) == 0.0  # not modelled: no event at all
    plain = pricing.all_reduce_s(CLUSTER, 1e6)
    assert pricing.all_reduce_s(costly, 1e6) == pytest.approx(plain + 3e-4, rel=1e-12)
    assert _elapsed_s(costly, all_reduce) == pytest.approx(pricing.all_reduce_s(costly, 1e6), rel=1e-12)
    assert _elapsed_s(CLUSTER, all_reduce) == pytest.approx(plain, rel=1e-12)
    one = costly.model_copy(update={"num_machines": 1})
    assert pricing.all_reduce_s(one, 1e6) == 0.0  # one worker: no collective, no fixed cost
    assert pricing.iteration_fixed_s(costly, steps=3.0, handoffs=1.0) == pytest.approx(3e-3 + 5e-3, rel=1e-15)
    op = pricing.OPERATIONS["iteration_overhead"]
    assert op.params == ("iteration_overhead_s", "host.sampler_handoff_s")
    assert "gpu.kernel_overhead_s" in pricing.OPERATIONS["forward"].params
    assert "network.per_collective_s" in pricing.OPERATIONS["all_reduce"].params


def test_an_all_to_all_pays_its_own_fixed_cost() -> None:
    """A pull's calls and a shuffle are all-to-all calls (``network.per_all_to_all_s``), an all-reduce is not; a
    cluster that leaves the field out takes ``per_collective_s`` for it (its prices as before the field)."""
    costly = _with(CLUSTER, network={"per_collective_s": 3e-4, "per_all_to_all_s": 1e-4})
    assert pricing.collective_s(costly, 1e3) == 3e-4 and pricing.collective_s(costly, 1e3, all_to_all=True) == 1e-4
    assert pricing.feature_fetch_s(costly, 1e6, num_collectives=3) == pytest.approx(
        pricing.feature_fetch_s(CLUSTER, 1e6, num_collectives=3) + 3e-4, rel=1e-12)
    assert pricing.shuffle_s(costly, 0.0, 1e6) == pytest.approx(pricing.shuffle_s(CLUSTER, 0.0, 1e6) + 1e-4, rel=1e-12)
    assert pricing.all_reduce_s(costly, 1e6) == pytest.approx(pricing.all_reduce_s(CLUSTER, 1e6) + 3e-4, rel=1e-12)
    for op in ("feature_fetch", "shuffle"):
        assert "network.per_all_to_all_s" in pricing.OPERATIONS[op].params
        assert "network.per_collective_s" not in pricing.OPERATIONS[op].params
    data = CLUSTER.to_yaml_dict()
    data["network"] = {k: v for k, v in data["network"].items() if k != "per_all_to_all_s"} | {
        "per_collective_s": 2e-4}
    assert cluster_from_dict(data).network.per_all_to_all_s == 2e-4


def test_the_iteration_rule_prices_steps_and_handoffs() -> None:
    rule = rules.iteration_rule(("load", "forward"), per_span_of="forward")
    costly = CLUSTER.model_copy(update={"iteration_overhead_s": 1e-3, "host": CLUSTER.host.model_copy(
        update={"sampler_handoff_s": 5e-3})})
    span = Span(0, "iteration", 0.0, 0.1)
    spans = {"forward": [Span(0, "forward", 0.01, 0.02), Span(0, "forward", 0.04, 0.02)],
             "load": [Span(0, "load", 0.0, 0.01)], "sample": [Span(0, "sample", -0.05, 0.03)]}
    prefetched = phase_rules.SpanRow(span, spans, {"num_sampler_workers": 2}, costly)
    inline = phase_rules.SpanRow(span, spans, {"num_sampler_workers": 0}, costly)
    assert rule.measured_s(prefetched) == pytest.approx(0.1 - 0.05, rel=1e-12)  # the sample ended before the start
    assert rule.measured_s(inline) == pytest.approx(0.1 - 0.05 - 0.03, rel=1e-12)
    assert rule.predicted_s(prefetched) == pytest.approx(2 * 1e-3 + 5e-3, rel=1e-12)
    assert rule.predicted_s(inline) == pytest.approx(2 * 1e-3, rel=1e-12)


def test_dropout_draws_are_priced_at_the_measured_rate_in_both_pricings() -> None:
    """A dropout mask costs its random draws at ``gpu.rng_elements_per_s`` (an achieved rate, not divided by the
    efficiency); the simulator's kernel pricing and calibration's phase pricing agree; without the rate it is free."""
    from gnnplan.simulator.hardware.formulas import compute_time_s
    from gnnplan.simulator.strategies.base import kernel_profile
    from gnnplan.simulator.workload.model_cost import Block, model_cost
    from gnnplan.simulator.workload.spec import ModelSpec

    cost = model_cost(ModelSpec(arch="sage", num_layers=2, hidden_dim=64), 32, 4,
                      [Block(900.0, 300.0, 3000.0), Block(300.0, 64.0, 640.0)])
    drawn = 300.0 * 64
    rng = CLUSTER.model_copy(update={"gpu": CLUSTER.gpu.model_copy(update={"rng_elements_per_s": 2e7})})
    extra = compute_time_s(cost.forward, rng.gpu, 0.5) - compute_time_s(cost.forward, CLUSTER.gpu, 0.5)
    assert extra == pytest.approx(drawn / 2e7, rel=1e-12)
    prof = kernel_profile([cost.forward], rng.gpu)
    priced = pricing.phase_compute_s(rng, "forward", cost.forward_flops, prof.seconds_per_flop, prof.kernels_per_span,
                                     prof.graph_ops_per_span, prof.random_elems_per_span)
    assert priced == pytest.approx(compute_time_s(cost.forward, rng.gpu, rng.efficiency.forward_fraction), rel=1e-12)
    assert compute_time_s(cost.backward, rng.gpu, 0.5) == compute_time_s(cost.backward, CLUSTER.gpu, 0.5)


def test_backward_kernels_pay_their_ratio_of_the_per_kernel_cost_in_both_pricings() -> None:
    """A gradient kernel autograd runs costs ``gpu.kernel_overhead_s * gpu.backward_overhead_ratio``, a forward
    kernel (and the GCN aggregation gradient hongtu's executor calls itself) the whole cost; the simulator's kernel
    pricing and calibration's phase pricing (the profile's backward kernels) agree."""
    from gnnplan.simulator.hardware.formulas import compute_time_s, fixed_time_s
    from gnnplan.simulator.strategies.base import kernel_profile
    from gnnplan.simulator.strategies.hongtu.work import gcn_kernels
    from gnnplan.simulator.workload.model_cost import Block, model_cost
    from gnnplan.simulator.workload.spec import ModelSpec

    cost = model_cost(ModelSpec(arch="gcn", num_layers=2, hidden_dim=64), 32, 4,
                      [Block(900.0, 300.0, 3000.0), Block(300.0, 64.0, 640.0)])
    assert all(k.backward for k in cost.backward) and not any(k.backward for k in cost.forward)
    half = CLUSTER.model_copy(update={"gpu": CLUSTER.gpu.model_copy(update={"kernel_overhead_s": 1e-4,
                                                                            "backward_overhead_ratio": 0.5})})
    whole = half.model_copy(update={"gpu": half.gpu.model_copy(update={"backward_overhead_ratio": 1.0})})
    assert fixed_time_s(cost.forward, half.gpu) == fixed_time_s(cost.forward, whole.gpu)
    saved = fixed_time_s(cost.backward, whole.gpu) - fixed_time_s(cost.backward, half.gpu)
    assert saved == pytest.approx(0.5 * 1e-4 * len(cost.backward), rel=1e-12)
    prof = kernel_profile([cost.backward], half.gpu)
    assert prof.backward_kernels_per_span == len(cost.backward)
    priced = pricing.phase_compute_s(half, "backward", cost.backward_flops, prof.seconds_per_flop,
                                     prof.kernels_per_span, prof.graph_ops_per_span, prof.random_elems_per_span,
                                     prof.roofline_fixed_s, prof.backward_kernels_per_span)
    assert priced == pytest.approx(compute_time_s(cost.backward, half.gpu, half.efficiency.backward_fraction),
                                   rel=1e-12)
    _, hongtu_backward = gcn_kernels(1, 64, 4, Block(900.0, 300.0, 3000.0), True)
    marked = {k.name for k in hongtu_backward if k.backward}
    assert marked == {"gcn1.weight.grad"}  # its aggregation's gradient and the recomputed update are its own calls


def test_weighted_aggregations_are_priced_at_their_own_rate() -> None:
    """DGL's aggregation with edge-weighted messages (GCN's ``u_mul_e``, GAT's attention; forward and gradient)
    runs at ``gpu.weighted_sparse_flops_per_s`` when set, ``gpu.sparse_flops_per_s`` otherwise; SAGE's mean and the
    dense kernels are not affected."""
    from gnnplan.simulator.hardware.formulas import kernel_time_s
    from gnnplan.simulator.workload.model_cost import Block, model_cost
    from gnnplan.simulator.workload.spec import ModelSpec

    blocks = [Block(900.0, 300.0, 3000.0), Block(300.0, 64.0, 640.0)]
    gcn = model_cost(ModelSpec(arch="gcn", num_layers=2, hidden_dim=64), 32, 4, blocks)
    sage = model_cost(ModelSpec(arch="sage", num_layers=2, hidden_dim=64), 32, 4, blocks)
    gat = model_cost(ModelSpec(arch="gat", num_layers=2, hidden_dim=8, num_heads=2), 32, 4, blocks)
    assert {k.name for k in gcn.forward + gcn.backward if k.weighted} == \
        {"gcn0.u_mul_e_sum", "gcn1.u_mul_e_sum", "gcn1.u_mul_e_sum.grad"}  # layer 0 aggregates the raw features
    assert not any(k.weighted for k in sage.forward + sage.backward)
    assert {k.name for k in gat.forward if k.weighted} == {"gat0.u_mul_e_sum", "gat1.u_mul_e_sum"}
    sparse = CLUSTER.model_copy(update={"gpu": CLUSTER.gpu.model_copy(update={"sparse_flops_per_s": 4e9})})
    slow = sparse.model_copy(update={"gpu": sparse.gpu.model_copy(update={"weighted_sparse_flops_per_s": 5e8})})
    for k in gcn.forward + gcn.backward + sage.forward:
        want = k.flops / (5e8 if k.weighted else 4e9) if k.sparse else kernel_time_s(k, sparse.gpu)
        assert kernel_time_s(k, slow.gpu) == pytest.approx(want, rel=1e-12), k.name
        assert kernel_time_s(k, sparse.gpu) == (k.flops / 4e9 if k.sparse else kernel_time_s(k, CLUSTER.gpu))


def test_loads_that_start_together_are_priced_as_the_event_model_shares_them() -> None:
    """Two GPUs behind one PCIe switch load at once: equal host gathers share the host memory, then copies of
    different sizes share the switch uplink (processor sharing). The load rule, given the other GPU's span
    (calibration's ``overlapping_peers``), prices each as the events took it, though alone each is faster."""
    cl = cluster_from_dict({**CLUSTER.model_dump(), "num_machines": 1, "gpus_per_machine": 2,
                            "pcie": {**CLUSTER.pcie.model_dump(), "gpus_per_uplink": 2,
                                     "uplink_bandwidth_bytes_per_s": 16e9},
                            "efficiency": {**CLUSTER.efficiency.model_dump(), "gather_fraction": 0.5}})
    local, remote = 4.0e6, (3.0e6, 1.0e6)
    ends: dict[int, float] = {}
    engine = Engine(0)
    hw = HardwareModel(cl, engine)

    def load(rank: int) -> Generator[Any, Any, None]:
        yield hw.host_gather(local, rank)
        yield hw.host_to_gpu(rank, local + remote[rank])
        ends[rank] = float(engine.now)

    for rank in (0, 1):
        engine.process(load(rank))
    engine.run()
    spans = [Span(r, "load", 0.0, ends[r], args={"local_bytes": local, "remote_bytes": remote[r]}) for r in (0, 1)]
    peers = overlapping_peers(spans, cl.gpus_per_machine)
    rule = rules.load_rule()
    for s in spans:
        row = phase_rules.SpanRow(s, {}, {}, cl, peers=peers[(s.rank, s.epoch, s.iteration, s.start_s)])
        assert rule.predicted_s(row) == pytest.approx(s.dur_s, rel=1e-9)
        alone = phase_rules.SpanRow(s, {}, {}, cl)
        assert rule.predicted_s(alone) < 0.8 * s.dur_s
    # g equal loads at once (a lockstep) are the same price as the shared gather and copy of g of them
    copy = local + remote[0]
    assert pricing.host_gather_s(cl, local, sharers=2) + pricing.host_to_gpu_s(cl, copy, sharers=2) == pytest.approx(
        pricing.feature_load_s(cl, local, remote[0], 0.0, peer_gather_bytes=local, peer_uplink_bytes=copy,
                               peer_memory_bytes=copy), rel=1e-15)


def test_the_spans_beside_a_span_are_its_machines_other_ranks_at_the_same_time() -> None:
    spans = [Span(0, "load", 0.0, 2.0), Span(1, "load", 1.0, 2.0),   # machine 0: overlap
             Span(0, "load", 5.0, 1.0), Span(1, "load", 6.0, 1.0),   # machine 0: touch only
             Span(2, "load", 0.5, 1.0), Span(3, "load", 9.0, 1.0),   # machine 1: apart
             Span(0, "load", 5.5, 0.2)]                              # same rank as its neighbour: not a peer
    peers = overlapping_peers(spans, gpus_per_machine=2)
    assert [p.start_s for p in peers[(0, -1, -1, 0.0)]] == [1.0]
    assert [p.start_s for p in peers[(1, -1, -1, 1.0)]] == [0.0]
    assert set(peers) == {(0, -1, -1, 0.0), (1, -1, -1, 1.0)}


def _gemm(rows: float, dim: float = 16.0) -> list[Kernel]:
    """A memory-bound dense layer on ``rows`` items: its FLOPs grow with the rows, its bytes also hold the weights."""
    return [Kernel("fc", flops=2 * rows * dim * dim, nbytes=4 * (2 * rows * dim + dim * dim), gemm=True)]


def test_a_batchs_roofline_seconds_lie_on_the_line_through_other_sizes() -> None:
    gpu = CLUSTER.gpu
    intercept, slope = roofline_line([_gemm(1000), _gemm(500)], gpu)
    assert intercept == pytest.approx(4 * 16 * 16 / gpu.memory_bandwidth_bytes_per_s, rel=1e-9)  # the weights
    small = _gemm(37)
    assert intercept + slope * small[0].flops == pytest.approx(roofline_s(small, gpu), rel=1e-9)
    # one size, or sizes of one FLOP count: in proportion, as before
    one = _gemm(1000)
    assert roofline_line([one, one], gpu) == (0.0, pytest.approx(roofline_s(one, gpu) / one[0].flops, rel=1e-12))
    # a profile prices each span at its own size: the partial batch at its roofline, not at the mean's rate
    profile = kernel_profile([_gemm(1000)], gpu, line_through=[_gemm(500)])
    assert pricing.phase_compute_s(CLUSTER, "forward", small[0].flops, profile.seconds_per_flop, 1.0,
                                   roofline_fixed_s=profile.roofline_fixed_s) == pytest.approx(
        compute_time_s(small, gpu, CLUSTER.efficiency.forward_fraction), rel=1e-9)
