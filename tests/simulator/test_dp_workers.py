"""dp runs the own work of the machine whose slowest worker takes longest (``dp.work.slowest_machine_works``): a
partition can give one worker the most compute and another the most to fetch, and which one sets the pace depends
on the network; a worker's pull is no smaller than what the busiest other machine sends it; each iteration waits
for its largest batch; the bytes counted per epoch stay the mean worker's; and calibration on such a trace still
recovers the network bandwidth."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from sim_fixtures import RMAT_SUMMARY, fake_inference_stats, make_stats

from gnnplan.simulator import api, symmetry
from gnnplan.simulator.calibrate import calibrate_files, with_params
from gnnplan.simulator.hardware.spec import ClusterSpec, load_cluster
from gnnplan.simulator.strategies.dp import work as dp_work
from gnnplan.simulator.workload import graphstats, inference
from gnnplan.simulator.workload.graphstats import CACHE_GRID

KNOBS = {"cache_fraction": 0.0}
COMPUTE_HEAVY = (1.4, 1.6, 0.1)
"""(input ratio, sampled-edge ratio, remote fraction) of the worker holding the hubs (the R-MAT workload's
measured pattern, graphstats.SampleStats)."""
FETCH_HEAVY = (0.6, 0.4, 0.8)


def _cluster(machines: int = 2, gpus: int = 1, bandwidth: float | None = None) -> ClusterSpec:
    """The CPU ``local`` preset as ``machines`` x ``gpus``, its collectives' fixed cost at 1 us (the rows then
    dominate a fetch at cache 0)."""
    cluster = load_cluster("local")
    update: dict[str, Any] = {"per_collective_s": 1e-6, "per_all_to_all_s": 1e-6}
    if bandwidth is not None:
        update["bandwidth_bytes_per_s"] = bandwidth
    return cluster.model_copy(update={"num_machines": machines, "gpus_per_machine": gpus,
                                      "network": cluster.network.model_copy(update=update)})


def _skewed(stats: graphstats.SampleStats, workers: list[tuple[float, float, float]],
            sent: list[float] | None = None) -> graphstats.SampleStats:
    """``stats`` with per-worker fields: each worker's (input ratio, edge ratio, remote fraction) at every cache
    fraction, no hits; each machine sends ``sent`` (default: the other machines' workers' remote rows, shared
    equally among the other machines)."""
    g, m = stats.gpus_per_machine, stats.num_machines
    if sent is None:
        sent = [sum(a * r for w, (a, _, r) in enumerate(workers) if w // g != machine) / (m - 1)
                for machine in range(m)]
    grid = len(CACHE_GRID)
    return dataclasses.replace(
        stats, worker_input_ratio=tuple(a for a, _, _ in workers), worker_edge_ratio=tuple(e for _, e, _ in workers),
        worker_hit_fraction=tuple((0.0,) * grid for _ in workers),
        worker_remote_fraction=tuple((r,) * grid for _, _, r in workers),
        machine_sent_ratio=tuple((s,) * grid for s in sent))


def _use(monkeypatch: pytest.MonkeyPatch, workers: list[tuple[float, float, float]] | None,
         sent: list[float] | None = None, slowest: float = 1.0) -> None:
    def sample_stats(ref: Any, fanouts: tuple[int, ...], batch_size_per_worker: int, num_machines: int,
                     gpus_per_machine: int, partitioner: str, seed: int = 0,
                     seed_split: str = "owner") -> graphstats.SampleStats:
        stats = make_stats(num_machines, gpus_per_machine, batch_size_per_worker, partitioner, fanouts)
        stats = dataclasses.replace(stats, slowest_input_ratio=slowest)
        return _skewed(stats, workers, sent) if workers and num_machines > 1 else stats

    monkeypatch.setattr(graphstats, "sample_stats", sample_stats, raising=False)
    monkeypatch.setattr(graphstats, "dataset_summary", lambda ref: RMAT_SUMMARY, raising=False)
    monkeypatch.setattr(inference, "inference_stats", fake_inference_stats)


def _simulate(cluster: ClusterSpec) -> Any:
    return api.simulate(cluster, "rmat100k-sage", "dp", KNOBS)


def _fixed_s(cluster: ClusterSpec, iterations: int) -> dict[str, float]:
    """The forward and backward seconds per epoch no batch size changes (the kernels' and DGL calls' fixed
    costs, ``StepCompute.forward_fixed_s``), for ``iterations`` iterations."""
    _, knobs, ctx = api.load_context(cluster, "rmat100k-sage", "dp", KNOBS)
    compute = dp_work.iteration_work(ctx, knobs)[0].compute
    return {"forward": iterations * compute.forward_fixed_s, "backward": iterations * compute.backward_fixed_s}


def _remote_rows(result: Any) -> float:
    return max(s.args["num_remote_vertices"] for s in result.spans if s.phase == "fetch")


def test_the_fetch_heavy_worker_sets_the_pace_on_a_slow_network(monkeypatch: pytest.MonkeyPatch) -> None:
    _use(monkeypatch, None)
    even_slow, even_fast = _simulate(_cluster(bandwidth=1e7)), _simulate(_cluster(bandwidth=1e11))
    _use(monkeypatch, [COMPUTE_HEAVY, FETCH_HEAVY])
    slow, fast = _simulate(_cluster(bandwidth=1e7)), _simulate(_cluster(bandwidth=1e11))
    # at 10 MB/s the worker pulling 0.6 * 0.8 of a mean batch's inputs is slowest: its passes are 0.6 of the mean's,
    # but for their kernels' fixed costs (the same kernels and DGL calls, whatever the batch size)
    fixed = _fixed_s(_cluster(), slow.num_iterations)
    for phase in ("forward", "backward"):
        assert 0 < fixed[phase] < even_slow.breakdown_s[phase]
        assert slow.breakdown_s[phase] - fixed[phase] == pytest.approx(
            0.6 * (even_slow.breakdown_s[phase] - fixed[phase]), rel=1e-9)
    assert slow.breakdown_s["fetch"] > even_slow.breakdown_s["fetch"]
    # at 100 GB/s the one with the hubs is: 1.4 times the mean's passes, 1.6 times its edges
    for phase in ("forward", "backward"):
        assert fast.breakdown_s[phase] - fixed[phase] == pytest.approx(
            1.4 * (even_fast.breakdown_s[phase] - fixed[phase]), rel=1e-9)
    assert fast.breakdown_s["sample"] > even_fast.breakdown_s["sample"]
    assert fast.epoch_time_s > even_fast.epoch_time_s
    # the bytes counted per epoch stay the mean worker's
    assert slow.bytes_per_epoch == even_slow.bytes_per_epoch


def test_a_pull_waits_for_the_busiest_other_sender(monkeypatch: pytest.MonkeyPatch) -> None:
    n_in = make_stats(2, 1, 512).num_src_vertices[0]  # rmat100k-sage: 1024 seeds over 2 workers
    _use(monkeypatch, [(1.0, 1.0, 0.2), (1.0, 1.0, 0.2)])
    own = _remote_rows(_simulate(_cluster(bandwidth=1e7)))
    assert own == pytest.approx(0.2 * n_in, rel=1e-9)
    _use(monkeypatch, [(1.0, 1.0, 0.2), (1.0, 1.0, 0.2)], sent=[0.5, 0.5])  # each machine also serves others
    assert _remote_rows(_simulate(_cluster(bandwidth=1e7))) == pytest.approx(0.5 * n_in, rel=1e-9)


def test_each_iteration_waits_for_its_largest_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    # the per-iteration largest batch is 1.5x the mean; the most loaded worker's own mean is 1.2x: the slowest
    # worker's batch grows by 1.5 / 1.2 (dp.work.fluctuation), so its passes are 1.5x the mean's, but for their
    # kernels' fixed costs, paid once whatever the batch
    _use(monkeypatch, None)
    even = _simulate(_cluster(bandwidth=1e11))
    _use(monkeypatch, [(1.2, 1.2, 0.1), (0.8, 0.8, 0.1)], slowest=1.5)
    skewed = _simulate(_cluster(bandwidth=1e11))
    _use(monkeypatch, None, slowest=1.5)  # without per-worker fields the whole ratio is fluctuation
    alike = _simulate(_cluster(bandwidth=1e11))
    fixed = _fixed_s(_cluster(), even.num_iterations)
    for phase in ("forward", "backward"):
        grown = fixed[phase] + 1.5 * (even.breakdown_s[phase] - fixed[phase])
        assert skewed.breakdown_s[phase] == pytest.approx(grown, rel=1e-9)
        assert alike.breakdown_s[phase] == pytest.approx(grown, rel=1e-9)
    assert skewed.bytes_per_epoch == even.bytes_per_epoch


def test_one_worker_is_the_mean_one(monkeypatch: pytest.MonkeyPatch) -> None:
    _use(monkeypatch, None)
    even = _simulate(_cluster(machines=1))
    _use(monkeypatch, [COMPUTE_HEAVY], slowest=1.5)  # one worker waits for nobody
    assert _simulate(_cluster(machines=1)).epoch_time_s == even.epoch_time_s


def test_the_slowest_machine_runs_on_one_representative(monkeypatch: pytest.MonkeyPatch) -> None:
    # 3 machines x 2 GPUs, machine 1 holding the hubs: every machine runs its two workers' work, so one machine
    # is simulated, and the epoch is the full simulation's
    workers = [FETCH_HEAVY, FETCH_HEAVY, COMPUTE_HEAVY, (1.0, 1.0, 0.3), FETCH_HEAVY, FETCH_HEAVY]
    _use(monkeypatch, workers)
    cluster = _cluster(machines=3, gpus=2, bandwidth=1e11)
    folded = _simulate(cluster)
    with symmetry.disabled():
        full = _simulate(cluster)
    assert {s.args["machines_represented"] for s in folded.spans if s.phase == "epoch"} == {3}
    assert {s.args["machines_represented"] for s in full.spans if s.phase == "epoch"} == {1}
    assert folded.epoch_time_s == pytest.approx(full.epoch_time_s, rel=1e-9)
    _use(monkeypatch, None)
    assert folded.epoch_time_s > _simulate(cluster).epoch_time_s


def test_calibration_recovers_the_bandwidth_of_a_skewed_fetch(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    _use(monkeypatch, [COMPUTE_HEAVY, FETCH_HEAVY])
    truth = _cluster(bandwidth=1e8)
    result = _simulate(truth)
    trace = api.predicted_trace(result, tmp_path / "skewed.json",
                                api.trace_metadata(truth, "rmat100k-sage", "dp", result))
    start = with_params(truth, {"network.bandwidth_bytes_per_s": 2.0 * truth.network.bandwidth_bytes_per_s})
    fitted, report = calibrate_files([trace], start)
    assert report["parameters"]["network.bandwidth_bytes_per_s"]["fitted"]
    assert fitted.network.bandwidth_bytes_per_s == pytest.approx(truth.network.bandwidth_bytes_per_s, rel=0.05)
