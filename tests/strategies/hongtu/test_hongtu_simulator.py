"""The hongtu simulator: the plug-in contract, the brief's per-epoch PCIe volumes, what deduplication buys with
and without NVLink and across machines, memory versus chunk count (infeasible, not an error, when a chunk does
not fit; the fewest chunks that fit are the fastest), calibration from a predicted trace, and input errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from hongtu_workers import make_workload

from gnnplan.simulator import api
from gnnplan.simulator.calibrate import calibrate_files, get_param, with_params
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.spec import ClusterSpec, load_cluster
from gnnplan.simulator.strategies import STRATEGIES, contract, hongtu
from gnnplan.simulator.strategies.hongtu import dedup
from gnnplan.simulator.strategies.hongtu.work import layer_widths

RMAT = {"generator": "rmat", "num_vertices": 20000, "edge_factor": 8, "feature_dim": 256, "num_classes": 8,
        "seed": 0}


def dgx(gpus: int = 4, nvlink: bool = True) -> ClusterSpec:
    """``gpus`` A100s of a DGX A100, each on a PCIe root port of its own as in HongTu's testbed (paper §2.1), so
    the host link does not bind before NVLink does (DGX A100 itself pairs GPUs behind PCIe switches)."""
    cl = load_cluster("dgx-a100").model_copy(update={"gpus_per_machine": gpus})
    cl = cl.model_copy(update={"pcie": cl.pcie.model_copy(update={"gpus_per_uplink": 1})})
    return cl if nvlink else cl.model_copy(update={"nvlink": None})


def test_plugin_is_registered_and_conforms() -> None:
    assert STRATEGIES["hongtu"] is hongtu and contract.conforms(hongtu) == []
    assert hongtu.SUPPORTS == ("full-graph",) and hongtu.MODEL_ARCHS == ("gcn", "gat")
    assert not hongtu.NEEDS_SAMPLE_STATS and hongtu.EXECUTOR == "gnnplan.executor.strategies.hongtu"
    assert {"h2d", "d2h", "exchange", "d2d", "host_accumulate", "forward", "backward"} <= set(hongtu.CALIBRATION)


@pytest.mark.parametrize("arch", ["gcn", "gat"])
def test_pcie_volumes_follow_the_brief(arch: str) -> None:
    # brief §1.9, GCN hybrid: H2D = sum_l [V_ru d_l + |V| (d_l + d_{l+1})], D2H = sum_l |V| (d_{l+1} + d_l) +
    # sum_{l>=1} V_ru d_l (rows x 4 B; no ∇h^0); GAT (no checkpoint) reloads its neighbours in the backward pass
    wl = make_workload(arch, num_heads=2)
    cl = dgx(8)
    module, knobs, ctx = api.load_context(cl, wl, "hongtu", {"num_chunks": 4, "dedup": "reuse"})
    lay, placed = hongtu.slots(wl, knobs, 8)
    v_ru, n = dedup.volumes(placed, lay.owner).v_ru, ctx.summary.num_vertices
    d = layer_widths(wl.model, ctx.summary.feature_dim, ctx.summary.num_classes)
    gat = arch == "gat"
    h2d = sum((1 + gat) * v_ru * d[k] + n * (d[k + 1] + (not gat) * d[k]) for k in range(2))
    d2h = sum(n * (d[k + 1] + (not gat) * d[k]) for k in range(2)) + v_ru * d[1]
    totals = hongtu.transfer_totals(arch, "reuse", d, hongtu.batch_counts(ctx, knobs))
    assert totals["host_to_gpu"] == 4 * h2d and totals["gpu_to_host"] == 4 * d2h
    result = module.simulate(ctx, knobs)
    assert result.bytes_per_epoch["pcie"] == 4 * (h2d + d2h) and result.bytes_per_epoch["network"] == 0
    assert sum(s.nbytes for s in result.spans if s.phase in ("h2d", "d2h")) == 4 * (h2d + d2h)


def _times(cluster: ClusterSpec, chunks: int) -> dict[str, float]:
    wl = make_workload("gcn", dataset=RMAT, hidden_dim=64)
    return {d: api.simulate(cluster, wl, "hongtu", {"dedup": d, "num_chunks": chunks}).epoch_time_s
            for d in dedup.DEDUP_LEVELS}


def test_peer_dedup_pays_off_only_over_nvlink_and_reuse_always() -> None:
    fast, slow, machines = _times(dgx(), 4), _times(dgx(nvlink=False), 4), _times(load_cluster("4x-a100-10gbe"), 4)
    assert fast["reuse"] < fast["gpu"] < 0.8 * fast["none"]  # NVLink carries the duplicates
    assert slow["reuse"] < slow["none"] < slow["gpu"]  # T_dd = T_hd: P2P gains nothing (brief §8)
    assert machines["reuse"] < 0.7 * machines["gpu"] and machines["gpu"] == pytest.approx(machines["none"], rel=0.01)


def test_more_chunks_less_memory_more_traffic() -> None:
    cl = load_cluster("local").model_copy(update={"num_machines": 4})
    wl = make_workload("gcn", dataset=RMAT, hidden_dim=64)
    runs = {n: api.simulate(cl, wl, "hongtu", {"num_chunks": n}) for n in (1, 2, 4, 8)}
    gpu = [runs[n].peak_memory_bytes["gpu"] for n in (1, 2, 4, 8)]
    pcie = [runs[n].bytes_per_epoch["pcie"] for n in (1, 2, 4, 8)]
    assert gpu == sorted(gpu, reverse=True) and gpu[-1] < 0.5 * gpu[0]
    assert pcie == sorted(pcie) and pcie[-1] > pcie[0]
    # a budget between the needs of 2 and 4 chunks: 1 and 2 chunks are infeasible (a result, with the reason)
    budget = (gpu[1] + gpu[2]) / 2
    small = cl.model_copy(update={"gpu": cl.gpu.model_copy(update={"memory_bytes": budget})})
    results = {n: api.simulate(small, wl, "hongtu", {"num_chunks": n}) for n in (1, 2, 4, 8)}
    for n in (1, 2):
        assert not results[n].feasible and results[n].epoch_time_s == float("inf")
        assert results[n].reason.startswith("out of GPU memory") and f"num_chunks={n}" in results[n].reason
    assert results[4].feasible and results[8].feasible
    # the fewest chunks that fit are the fastest feasible choice, so the tuner picks them
    assert results[4].epoch_time_s < results[8].epoch_time_s


@pytest.mark.parametrize(("gpus", "chunks", "partitioner"), [(2, 4, "metis"), (4, 8, "metis"), (4, 8, "chunk")])
def test_algorithm_4_lowers_eq4_volumes_on_cora(gpus: int, chunks: int, partitioner: str) -> None:
    identity, reorganised = hongtu.layout("cora", gpus, chunks, partitioner).volumes
    assert reorganised.v_ori == identity.v_ori  # a permutation of the same chunks
    assert reorganised.v_p2p < identity.v_p2p and reorganised.v_ru < identity.v_ru
    result = api.simulate(dgx(gpus), "cora-gcn-full", "hongtu", {"num_chunks": chunks, "partitioner": partitioner})
    epoch = next(s for s in result.spans if s.phase == "epoch").args
    assert (epoch["v_ori"], epoch["v_p2p"], epoch["v_ru"]) == (reorganised.v_ori, reorganised.v_p2p, reorganised.v_ru)
    assert epoch["alpha"] == reorganised.v_ori / 2708 and epoch["eq4_cost_s"] > 0


def test_spans_cover_every_chunk_layer_and_pass() -> None:
    result = api.simulate(dgx(2), make_workload("gat", num_heads=2), "hongtu", {"num_chunks": 3})
    count = {p: sum(s.phase == p for s in result.spans) for p in ("forward", "backward", "h2d", "d2d", "d2h")}
    assert count["forward"] == count["backward"] == 2 * 3 * 2  # GPUs x chunks x layers
    assert count["h2d"] == 2 * 2 * 3 * 2  # every batch loads in both passes
    assert count["d2d"] > 0 and all(s.stream == "nvlink" for s in result.spans if s.phase == "d2d")
    assert set(result.breakdown_s) >= set(hongtu.PHASES)


def test_every_peer_stage_pays_its_barrier() -> None:
    """Each peer stage starts with a barrier that releases at the last arrival plus network.per_collective_s
    (pricing.barrier_s): on 2 GPUs a stage is one slot, one span, which waits at least that long; raising it by d
    lengthens the lock-step epoch by d per stage and once more for the gradient all-reduce's own fixed cost."""
    wl = make_workload("gcn")
    cl = dgx(2)

    def run(per_collective_s: float) -> api.SimResult:
        return api.simulate(cl.model_copy(update={"network": cl.network.model_copy(
            update={"per_collective_s": per_collective_s})}), wl, "hongtu", {"num_chunks": 2})

    base, slower = run(1.0e-4), run(1.1e-3)
    stages = [s for s in base.spans if s.rank == 0 and s.phase in ("d2d", "exchange")]
    assert len(stages) == 6  # 2 chunks: forward pulls at layers 0 and 1, backward pushes at layer 1
    assert all(s.args["wait_s"] >= 1.0e-4 * (1 - 1e-9) for s in stages)
    assert slower.epoch_time_s - base.epoch_time_s == pytest.approx((len(stages) + 1) * 1.0e-3, rel=1e-9)


def test_calibration_recovers_hidden_parameters(tmp_path: Path) -> None:
    start = load_cluster("4x-a100-10gbe").model_copy(update={"num_machines": 2})
    hidden = {"pcie.bandwidth_bytes_per_s": 8.0e9, "network.bandwidth_bytes_per_s": 0.5e9,
              "efficiency.forward_fraction": 0.3, "efficiency.backward_fraction": 0.2,
              "efficiency.gather_fraction": 0.3}
    truth = with_params(start, hidden)
    wl = make_workload("gcn", dataset=RMAT, hidden_dim=64)
    result = api.simulate(truth, wl, "hongtu", {"num_chunks": 4})
    path = api.predicted_trace(result, tmp_path / "hongtu.json", api.trace_metadata(truth, wl, "hongtu", result))
    fitted, report = calibrate_files([path], start)
    # the loads and writes (dozens of spans) pin PCIe; the exchanges the network; a one-epoch trace has one
    # compute row per worker and phase, so the efficiencies are looser; the CPU's scatter-adds of gradient rows
    # (host_accumulate) pin the host's achieved fraction, priced alike by the simulator and calibration
    tolerance = {"pcie.bandwidth_bytes_per_s": 0.02, "network.bandwidth_bytes_per_s": 0.15,
                 "efficiency.forward_fraction": 0.25, "efficiency.backward_fraction": 0.25,
                 "efficiency.gather_fraction": 0.05}
    for p, value in hidden.items():
        assert report["parameters"][p]["constrained"], p
        assert get_param(fitted, p) == pytest.approx(value, rel=tolerance[p]), p


def test_bad_input_is_one_line() -> None:
    with pytest.raises(SpecError, match=r"^--set dedup=all: dedup must be one of none, gpu, reuse$"):
        api.parse_knobs("hongtu", ["dedup=all"])
    with pytest.raises(SpecError, match="num_chunks"):
        api.simulate("4x-a100-10gbe", "cora-gcn-full", "hongtu", {"num_chunks": 0})
    with pytest.raises(SpecError, match="^model.arch: strategy hongtu supports gcn, gat"):
        api.simulate("4x-a100-10gbe", make_workload("sage"), "hongtu")
    with pytest.raises(SpecError, match="^training.mode: strategy hongtu supports full-graph"):
        api.load_context("4x-a100-10gbe", "cora-gcn", "hongtu")


def test_more_chunks_than_a_gpus_vertices_is_infeasible_and_refused_by_the_executor() -> None:
    res = api.simulate("4x-a100-10gbe", "cora-gcn-full", "hongtu", {"num_chunks": 678})
    assert not res.feasible and res.reason == ("num_chunks=678 is more chunks than a GPU's ~677 vertices (2708 on 4 "
                                               "GPUs); at most 677")
    assert api.simulate("4x-a100-10gbe", "cora-gcn-full", "hongtu", {"num_chunks": 64}).feasible
    assert hongtu.chunks_problem(2708, 4, 677) is None
