"""The network model: GPUDirect RDMA, NICs per machine, NVSwitch vs pairwise NVLink and DistDGL's remote sampling
on a partitioned structure (DDP bucket overlap: test_ddp_bucket_overlap.py). Each mechanism changes what it
should, exactly, and nothing else (constructed clusters, latencies 0 where a time is checked, so the expected
seconds are closed forms)."""

from __future__ import annotations

import dataclasses

import pytest
from network_fixtures import B, N, cluster, finish_times
from sim_fixtures import RMAT_SUMMARY, make_inference, make_stats

from gnnplan.simulator.api import simulate
from gnnplan.simulator.engine import Engine
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware import pricing
from gnnplan.simulator.hardware.collectives import (
    all_reduce_link_bytes,
    hierarchical_all_reduce_time_s,
    nic_index,
    peer_bandwidth_bytes_per_s,
)
from gnnplan.simulator.hardware.model import HardwareModel
from gnnplan.simulator.hardware.spec import ClusterSpec, load_cluster
from gnnplan.simulator.strategies import dp
from gnnplan.simulator.strategies.base import SimContext
from gnnplan.simulator.units import INDEX_BYTES
from gnnplan.simulator.workload import inference
from gnnplan.simulator.workload.model_cost import Block
from gnnplan.simulator.workload.spec import load_workload

# ------------------------------------------------------------------------------------------ GPUDirect RDMA

@pytest.mark.parametrize("gdr", [False, True])
def test_gpudirect_rdma_skips_the_host_staging_copy(gdr: bool) -> None:
    """A GPU-to-remote-GPU transfer next to a host-to-GPU copy into the receiving GPU: staged, the two share that
    GPU's PCIe link (each at B/2); with GPUDirect RDMA the transfer only crosses the NICs."""
    cl = cluster(network={"gpudirect_rdma": gdr})
    net, copy = finish_times(cl, lambda hw: hw.gpu_network(0, 1, N), lambda hw: hw.host_to_gpu(1, N))
    assert net == pytest.approx(N / B if gdr else 2 * N / B, rel=1e-12)
    assert copy == pytest.approx(N / B if gdr else 2 * N / B, rel=1e-12)
    out, = finish_times(cl, lambda hw: hw.gpu_network(0, 1, N))
    assert out == pytest.approx(N / B, rel=1e-12)                         # alone: NIC-bound either way


def test_gpudirect_rdma_changes_nothing_else() -> None:
    staged, direct = cluster(), cluster(network={"gpudirect_rdma": True})
    for cl in (staged, direct):                                            # host-to-host and PCIe copies
        assert finish_times(cl, lambda hw: hw.network(0, 1, N), lambda hw: hw.host_to_gpu(1, N)) == \
            pytest.approx([N / B, N / B], rel=1e-12)
    assert hierarchical_all_reduce_time_s(N, staged) == hierarchical_all_reduce_time_s(N, direct)
    # the bytes the program moves; the library's staging is timed (above), not counted
    assert all_reduce_link_bytes(N, direct) == all_reduce_link_bytes(N, staged) == {"nvlink": 0.0, "network": N}


@pytest.mark.parametrize("gdr", [False, True])
def test_staged_all_reduce_is_bound_by_a_slower_pcie(gdr: bool) -> None:
    """PCIe at B/4 under a NIC at B: staged, each ring step runs at the PCIe rate; the closed form agrees with
    the simulated flows."""
    cl = cluster(machines=4, pcie={"bandwidth_bytes_per_s": B / 4}, network={"gpudirect_rdma": gdr})
    shard = 2 * 3 / 4 * N
    expected = shard / (B if gdr else B / 4)
    assert hierarchical_all_reduce_time_s(N, cl) == pytest.approx(expected, rel=1e-12)
    ends = finish_times(cl, *[lambda hw, r=r: hw.all_reduce(r, N) for r in range(4)])
    assert ends == pytest.approx([expected] * 4, rel=1e-12)


@pytest.mark.parametrize("gdr", [False, True])
def test_a_staged_exchange_is_three_copies_and_prices_as_exchange_s(gdr: bool) -> None:
    """A program's own staged message (store and forward: copy out, send, copy in) takes pricing.exchange_s alone,
    latencies included; with GPUDirect RDMA both are the NICs alone. Next to a host-to-GPU copy into the receiving
    GPU, the staged message's last leg shares that GPU's PCIe link; the direct one shares nothing."""
    cl = cluster(pcie={"latency_s": 1e-5}, network={"gpudirect_rdma": gdr, "latency_s": 3e-5})
    expected = 3e-5 + N / B + (0.0 if gdr else 2 * (1e-5 + N / B))
    assert pricing.exchange_s(cl, N) == pytest.approx(expected, rel=1e-12)
    assert pricing.exchange_per_byte_s(cl) == pytest.approx((1 if gdr else 3) / B, rel=1e-12)
    alone, = finish_times(cl, lambda hw: hw.gpu_network(0, 1, N, store_and_forward=True))
    assert alone == pytest.approx(expected, rel=1e-12)
    msg, copy = finish_times(cl, lambda hw: hw.gpu_network(0, 1, N, store_and_forward=True),
                             lambda hw: hw.host_to_gpu(1, 4 * N))
    if gdr:
        assert (msg, copy) == pytest.approx((expected, 1e-5 + 4 * N / B), rel=1e-12)
    else:  # the copy runs alone until the message's last leg starts, then both get B/2 until the message ends
        start = 1e-5 + N / B + 3e-5 + N / B + 1e-5
        left = 4 * N - (start - 1e-5) * B
        assert msg == pytest.approx(start + 2 * N / B, rel=1e-12)
        assert copy == pytest.approx(start + 2 * N / B + (left - N) / B, rel=1e-12)


def test_gpudirect_rdma_is_irrelevant_without_gpus() -> None:
    """A CPU-only worker's rows already are in host memory: its exchange is the network alone either way."""
    local = load_cluster("local")
    assert local.gpu.is_host_cpu and not local.network.gpudirect_rdma
    direct = local.model_copy(update={"network": local.network.model_copy(update={"gpudirect_rdma": True})})
    assert pricing.exchange_s(local, N, steps=3) == pricing.exchange_s(direct, N, steps=3) == pytest.approx(
        3 * local.network.latency_s + N / local.network.bandwidth_bytes_per_s, rel=1e-12)
    assert pricing.shuffle_s(local, network_bytes=N) == pricing.shuffle_s(direct, network_bytes=N)


def _gdr(cl: ClusterSpec, on: bool) -> ClusterSpec:
    return cl.model_copy(update={"network": cl.network.model_copy(update={"gpudirect_rdma": on})})


_FULL_GRAPH = {"neutronstar": ("cora-gcn-full", {"mode": "depcomm"}), "hongtu": ("cora-gcn-full", {}),
               "gsplit": ("cora-sage", {})}


@pytest.mark.parametrize("strategy", sorted(_FULL_GRAPH))
def test_gpudirect_rdma_removes_the_staging_of_exchanges(strategy: str) -> None:
    """2 machines x 2 GPUs, PCIe at a quarter of the NIC: staged, every cross-machine message of neutronstar /
    hongtu / gsplit also crosses both GPUs' PCIe links (and shares them with loads); with GPUDirect RDMA the
    NICs alone, so exchanges get faster and their PCIe bytes vanish; the network bytes and the compute stay."""
    workload, knobs = _FULL_GRAPH[strategy]
    shape = cluster(machines=2, gpus=2, pcie={"bandwidth_bytes_per_s": B / 4})
    staged, direct = (simulate(_gdr(shape, on), workload, strategy, knobs) for on in (False, True))
    comm = "shuffle" if strategy == "gsplit" else "exchange"
    assert direct.breakdown_s[comm] < 0.8 * staged.breakdown_s[comm]
    assert direct.epoch_time_s < staged.epoch_time_s
    assert direct.bytes_per_epoch["network"] == staged.bytes_per_epoch["network"]
    for phase in ("forward", "backward", "optimizer"):
        assert direct.breakdown_s[phase] == pytest.approx(staged.breakdown_s[phase], rel=1e-9)
    if strategy == "gsplit":  # gsplit counts its loads on PCIe, not the shuffles' staging
        assert direct.bytes_per_epoch["pcie"] == staged.bytes_per_epoch["pcie"]
        return
    gradient = {s.nbytes for s in staged.spans if s.phase == "all_reduce"}
    assert len(gradient) == 1
    reduced = 4 * all_reduce_link_bytes(gradient.pop(), shape)["network"]
    exchanged = staged.bytes_per_epoch["network"] - reduced                   # rows and gradients across machines
    assert exchanged > 0
    assert staged.bytes_per_epoch["pcie"] - direct.bytes_per_epoch["pcie"] == pytest.approx(2 * exchanged, rel=1e-12)
    if strategy == "neutronstar":                                             # it has no other PCIe traffic
        assert direct.bytes_per_epoch["pcie"] == 0


@pytest.mark.parametrize("strategy", sorted(_FULL_GRAPH))
def test_gpudirect_rdma_changes_nothing_on_one_machine(strategy: str) -> None:
    workload, knobs = _FULL_GRAPH[strategy]
    shape = cluster(machines=1, gpus=4, pcie={"bandwidth_bytes_per_s": B / 4})
    staged, direct = (simulate(_gdr(shape, on), workload, strategy, knobs).to_json_dict() for on in (False, True))
    for key in ("epoch_time_s", "breakdown_s", "bytes_per_epoch", "peak_memory_bytes"):
        assert direct[key] == staged[key], key


# ------------------------------------------------------------------------------------------ NICs per machine

def test_each_gpu_uses_its_affine_nic() -> None:
    assert [nic_index(local, 8, 8) for local in range(8)] == list(range(8))
    assert [nic_index(local, 8, 4) for local in range(8)] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert [nic_index(local, 4, 8) for local in range(4)] == [0, 2, 4, 6]
    assert [nic_index(local, 4, 1) for local in range(4)] == [0, 0, 0, 0]
    hw = HardwareModel(cluster(gpus=4, network={"nics_per_machine": 2}), Engine(0))
    assert [hw.nic_of(r) for r in range(8)] == [0, 0, 1, 1, 0, 0, 1, 1]
    assert len(hw.nic_tx) == len(hw.nic_rx) == 4


@pytest.mark.parametrize("nics", [1, 2, 4, 8])
def test_more_nics_multiply_a_machines_bandwidth(nics: int) -> None:
    """2 machines x 4 GPUs, GPUDirect RDMA: across machines each GPU's shard shares its NIC with the GPUs affine
    to it, so the all-reduce's network term divides by min(nics, 4); simulated = closed form."""
    cl = cluster(gpus=4, nvlink={"bandwidth_bytes_per_s": 1e15},
                 network={"nics_per_machine": nics, "gpudirect_rdma": True})
    across = 2 * 1 / 2 * N / 4 * (4 / min(nics, 4)) / B
    inside = 2 * 3 / 4 * N / 1e15
    assert hierarchical_all_reduce_time_s(N, cl) == pytest.approx(inside + across, rel=1e-12)
    ends = finish_times(cl, *[lambda hw, r=r: hw.all_reduce(r, N) for r in range(8)])
    assert ends == pytest.approx([inside + across] * 8, rel=1e-12)


def test_rails_and_striping() -> None:
    cl = cluster(network={"nics_per_machine": 4})
    assert finish_times(cl, lambda hw: hw.network(0, 1, N)) == pytest.approx([N / (4 * B)], rel=1e-12)  # striped
    assert finish_times(cl, lambda hw: hw.network(0, 1, N, rail=2)) == pytest.approx([N / B], rel=1e-12)
    two_rails = finish_times(cl, lambda hw: hw.network(0, 1, N, rail=0), lambda hw: hw.network(0, 1, N, rail=1))
    one_rail = finish_times(cl, lambda hw: hw.network(0, 1, N, rail=3), lambda hw: hw.network(0, 1, N, rail=3))
    assert two_rails == pytest.approx([N / B] * 2, rel=1e-12)
    assert one_rail == pytest.approx([2 * N / B] * 2, rel=1e-12)


def test_nics_change_nothing_inside_a_machine() -> None:
    one, eight = (cluster(machines=1, gpus=8, network={"nics_per_machine": n}) for n in (1, 8))
    assert hierarchical_all_reduce_time_s(N, one) == hierarchical_all_reduce_time_s(N, eight)
    for cl in (one, eight):
        assert finish_times(cl, lambda hw: hw.gpu_to_gpu(0, 1, N), lambda hw: hw.host_to_gpu(2, N)) == \
            pytest.approx([N / B, N / B], rel=1e-12)
    # a fetch by all 8 workers of a machine: 8 pullers on one NIC, or one each on 8
    assert pricing.feature_fetch_s(one, N, sharers=8) == pytest.approx(8 * N / B, rel=1e-12)
    assert pricing.feature_fetch_s(eight, N, sharers=8) == pytest.approx(N / B, rel=1e-12)


# ------------------------------------------------------------------------------------ NVSwitch vs pairwise

@pytest.mark.parametrize("topology", ["nvswitch", "pairwise"])
def test_peer_copies_follow_the_nvlink_topology(topology: str) -> None:
    """4 GPUs: one pair's copy gets the GPU's full NVLink through NVSwitch, one of 3 direct links pairwise; a copy
    to all 3 peers at once and the collectives use every link either way."""
    cl = cluster(machines=1, gpus=4, nvlink={"topology": topology})
    pair = N / B if topology == "nvswitch" else 3 * N / B
    assert finish_times(cl, lambda hw: hw.gpu_to_gpu(0, 1, N)) == pytest.approx([pair], rel=1e-12)
    assert pricing.gpu_to_gpu_s(cl, N) == pytest.approx(pair, rel=1e-12)
    fan_out = finish_times(cl, *[lambda hw, p=p: hw.gpu_to_gpu(0, p, N / 3) for p in (1, 2, 3)])
    assert fan_out == pytest.approx([N / B] * 3, rel=1e-12)
    assert pricing.gpu_to_gpu_s(cl, N, num_peers=3) == pytest.approx(N / B, rel=1e-12)
    ring = 2 * 3 / 4 * N / B
    assert hierarchical_all_reduce_time_s(N, cl) == pytest.approx(ring, rel=1e-12)
    assert finish_times(cl, *[lambda hw, r=r: hw.all_reduce(r, N) for r in range(4)]) == \
        pytest.approx([ring] * 4, rel=1e-12)
    assert pricing.shuffle_s(cl, intra_bytes=N) == pytest.approx(N / B, rel=1e-12)


def test_without_nvlink_peer_copies_go_peer_to_peer_over_pcie() -> None:
    cl = cluster(machines=1, gpus=4, pcie={"bandwidth_bytes_per_s": B / 2})
    cl = cl.model_copy(update={"nvlink": None})
    assert peer_bandwidth_bytes_per_s(cl, num_peers=3) == B / 2
    assert finish_times(cl, lambda hw: hw.gpu_to_gpu(0, 1, N)) == pytest.approx([2 * N / B], rel=1e-12)
    assert pricing.gpu_to_gpu_s(cl, N) == pytest.approx(2 * N / B, rel=1e-12)


def test_catalogue_presets_carry_the_network_fields() -> None:
    dgx = load_cluster("dgx-a100")
    assert dgx.network.nics_per_machine == 8 and dgx.network.gpudirect_rdma
    assert dgx.nvlink is not None and dgx.nvlink.topology == "nvswitch"
    built = load_cluster("8x-a100-nvswitch")
    assert built.network.nics_per_machine == 8 and built.network.gpudirect_rdma
    assert "network.nics_per_machine" in built.sources and "network.gpudirect_rdma" in built.sources
    hgx4 = load_cluster("4x-a100-80gb-nvlink3")
    assert hgx4.nvlink is not None and hgx4.nvlink.topology == "pairwise" and "nvlink.topology" in hgx4.sources
    ethernet = load_cluster("4x-a100-10gbe")
    assert ethernet.network.nics_per_machine == 1 and not ethernet.network.gpudirect_rdma


# ------------------------------------------------------------------------ partitioned-structure sampling

def _dp_ctx(machines: int, network_bytes_per_s: float = 1.25e9) -> SimContext:
    cl = load_cluster("4x-a100-10gbe")
    cl = cl.model_copy(update={"num_machines": machines, "network": cl.network.model_copy(
        update={"bandwidth_bytes_per_s": network_bytes_per_s})})
    wl = load_workload("rmat100k-sage")
    batch = wl.training.batch_size
    return SimContext(cl, wl, make_stats(machines, 1, batch // machines), RMAT_SUMMARY, batch)


def test_remote_sampling_from_partition_statistics() -> None:
    ctx = _dp_ctx(4)
    blocks = [Block(600.0, 90.0, 800.0), Block(90.0, 10.0, 95.0)]
    r = ctx.sample.access(0.0)[2]
    inner = r * 600.0 / (600.0 - 10.0)
    assert dp.remote_sampling(ctx, blocks) == pytest.approx(
        [(95.0, 0.0, 0.0), (800.0 - 800.0 * inner * 80.0 / 90.0, 800.0 * inner * 80.0 / 90.0, inner * 80.0)])
    assert dp.remote_sampling(_dp_ctx(1), blocks) == ()


@pytest.mark.parametrize("busiest", [0.25, 0.9])  # an even edge split, and one machine holding most edges
def test_partitioned_structure_adds_sampling_traffic_and_nothing_else(monkeypatch: pytest.MonkeyPatch,
                                                                      busiest: float) -> None:
    even = make_inference(4, 1)
    monkeypatch.setattr(inference, "inference_stats", lambda *a, **k: dataclasses.replace(
        even, machine_edge_fraction=busiest))
    ctx = _dp_ctx(4)
    replicated = dp.simulate(ctx, dp.Knobs())
    partitioned = dp.simulate(ctx, dp.Knobs(graph_structure="partitioned"))
    plan_iters = replicated.num_iterations
    full, _ = dp.iteration_work(ctx, dp.Knobs(graph_structure="partitioned"))
    last, _ = dp.iteration_work(ctx, dp.Knobs(graph_structure="partitioned"), 
                                dp.iteration_plan(RMAT_SUMMARY.num_train, ctx.batch_size, 4).last_fraction)
    extra = sum(count * (w.sample_request_bytes + w.sample_reply_bytes) for w, count in
                ((full, plan_iters - 1), (last, 1))) * 4
    assert extra > 0 and full.sample_reply_bytes == pytest.approx(
        3 * INDEX_BYTES * sum(e for _, e, _ in full.remote_sampling))
    assert partitioned.bytes_per_epoch["network"] == pytest.approx(replicated.bytes_per_epoch["network"] + extra,
                                                                   rel=1e-12)
    for link in ("pcie", "nvlink", "storage"):
        assert partitioned.bytes_per_epoch[link] == replicated.bytes_per_epoch[link]
    per_iteration = [s.nbytes for s in partitioned.spans if s.phase == "sample" and s.rank == 0 and s.iteration == 0]
    assert per_iteration == pytest.approx([full.sample_request_bytes + full.sample_reply_bytes], rel=1e-12)
    for phase in ("forward", "backward", "optimizer"):
        assert partitioned.breakdown_s[phase] == pytest.approx(replicated.breakdown_s[phase], rel=1e-12)
    assert partitioned.peak_memory_bytes["gpu"] == replicated.peak_memory_bytes["gpu"]
    # the busiest machine keeps its share of the in-edges as a CSC over all vertices with global edge ids (3 int64
    # per edge, n + 1 offsets) instead of the whole graph's COO + CSC (4 int64 per edge, n + 1 offsets)
    saved = (4.0 - 3.0 * busiest) * RMAT_SUMMARY.num_edges * INDEX_BYTES
    assert replicated.peak_memory_bytes["host"] - partitioned.peak_memory_bytes["host"] == pytest.approx(
        saved, rel=1e-9)


def test_remote_sampling_waits_for_a_slow_network() -> None:
    """In sampler processes (DistDGL's RPC) owners sample the remote vertices on their own cores (faster than one
    core when the network is quick); over a 1 MB/s network the requests and replies make sampling slower than
    sampling everything at home."""
    fast, slow = _dp_ctx(4), _dp_ctx(4, 1.0e6)
    for ctx, slower in ((fast, False), (slow, True)):
        replicated = dp.simulate(ctx, dp.Knobs(num_sampler_workers=1)).breakdown_s["sample"]
        partitioned = dp.simulate(ctx, dp.Knobs(graph_structure="partitioned",
                                                num_sampler_workers=1)).breakdown_s["sample"]
        assert (partitioned > replicated) == slower


def test_remote_sampling_in_the_trainer_is_four_collectives_per_layer() -> None:
    """Sampled in the trainer (num_sampler_workers = 0), as the executor's PartitionedSampler does: every worker
    also serves the others' requests and meets them at four all_to_all calls per layer, so sampling a
    partitioned structure is slower than sampling a replicated one at any bandwidth, by at least a network
    latency per call (the same edges are sampled on the worker's core either way), and more over a slow network."""
    gaps = []
    for ctx in (_dp_ctx(4), _dp_ctx(4, 1.0e6)):
        replicated = dp.simulate(ctx, dp.Knobs())
        partitioned = dp.simulate(ctx, dp.Knobs(graph_structure="partitioned"))
        calls = 4 * len(ctx.workload.training.fanouts) * partitioned.num_iterations
        gap = partitioned.breakdown_s["sample"] - replicated.breakdown_s["sample"]
        assert gap >= calls * ctx.cluster.network.latency_s > 0
        spans = [sp for sp in partitioned.spans if sp.phase == "sample"]
        assert spans and all("wait_s" in sp.args for sp in spans)
        gaps.append(gap)
    assert gaps[1] > 10 * gaps[0]


def test_partitioned_structure_on_one_machine_is_replicated() -> None:
    ctx = _dp_ctx(1)
    a = dp.simulate(ctx, dp.Knobs()).to_json_dict()
    b = dp.simulate(ctx, dp.Knobs(graph_structure="partitioned")).to_json_dict()
    for key in ("epoch_time_s", "breakdown_s", "bytes_per_epoch"):
        assert a[key] == b[key]


def test_the_executor_rejects_sampler_processes_on_a_partitioned_structure() -> None:
    from gnnplan.executor.strategies.dp import check_knobs

    check_knobs(dp.Knobs())
    check_knobs(dp.Knobs(graph_structure="partitioned"))  # sampled in the trainer (executor.sampling_partitioned)
    with pytest.raises(SpecError, match="graph_structure=partitioned"):
        check_knobs(dp.Knobs(graph_structure="partitioned", num_sampler_workers=1))


def test_consecutive_gpus_share_an_uplink_as_the_event_model_places_them() -> None:
    """``uplink_index``: DGX A100's two GPUs per switch, one switch for every GPU when it has more ports than the
    machine has GPUs; the event model's ``uplink_of`` numbers a machine's uplinks after the previous machine's."""
    from gnnplan.simulator.engine import Engine
    from gnnplan.simulator.hardware.collectives import uplink_index
    from gnnplan.simulator.hardware.model import HardwareModel

    assert [uplink_index(local, 8, 2) for local in range(8)] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert [uplink_index(local, 4, 8) for local in range(4)] == [0, 0, 0, 0]
    cl = load_cluster("dgx-a100").model_copy(update={"num_machines": 2})
    hw = HardwareModel(cl, Engine())
    per_machine = -(-cl.gpus_per_machine // min(cl.pcie.gpus_per_uplink, cl.gpus_per_machine))
    assert [hw.uplink_of(r) for r in range(cl.num_gpus)] == [
        r // cl.gpus_per_machine * per_machine + uplink_index(r % cl.gpus_per_machine, cl.gpus_per_machine,
                                                              cl.pcie.gpus_per_uplink) for r in range(cl.num_gpus)]
