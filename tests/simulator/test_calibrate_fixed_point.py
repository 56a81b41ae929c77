"""Every strategy's simulator and its calibration rules price the same work alike: a trace the simulator
predicts on a cluster, calibrated from that very cluster, moves none of the parameters its spans pin.

A rule that prices a span otherwise than the simulator did moves its parameter by about the same factor. Calibration
regularises toward its starting values, so a parameter the spans inform weakly stays put whatever the rule; the
check is on the ones the traces constrain (``data_share``: the data's share of the fit's information on it).
When written (2026-11-29) it found four: HongTu's CPU scatter-add (the simulator charged 3 bytes of traffic per
accumulated byte, calibration 6: gather fraction fitted 2x); hopgnn's predicted ``load`` spans (pre-gathered rows
labelled by where they had come from, not as the load reads them: gather fraction 5.7x, PCIe 0.54x); dp's slowest
worker (its kernels' fixed costs grown with its batch: DGL call cost 1.34x); neutronstar's overlapped replica
compute (subtracted twice from the iteration's fixed cost: 0.85x)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gnnplan.simulator import api
from gnnplan.simulator.calibrate import calibrate_files, get_param, with_params
from gnnplan.simulator.hardware.spec import load_cluster
from gnnplan.simulator.strategies.calibration_rules import covered_s

FIXED_COSTS = {"network.per_collective_s": 1e-4, "gpu.kernel_overhead_s": 5e-6, "iteration_overhead_s": 1e-3,
               "gpu.graph_op_overhead_s": 2e-5, "host.sampler_call_s": 5e-5, "network.per_all_to_all_s": 5e-5,
               "efficiency.gather_fraction": 0.5, "efficiency.forward_fraction": 0.4,
               "efficiency.backward_fraction": 0.3}
"""Values the preset leaves at 0 or 1, set so that every priced operation costs something."""
CASES = [("dp", "cora-sage", {"cache_fraction": 0.2}), ("hopgnn", "cora-sage", {}), ("gsplit", "cora-sage", {}),
         ("neutronstar", "cora-gcn-full", {"mode": "depcomm"}), ("hongtu", "cora-gcn-full", {"num_chunks": 2}),
         ("ppgnn", "cora-sgc", {"placement": "host"})]
INFORMED = 0.5
"""``data_share`` above which a parameter counts as pinned by the trace."""
TOLERANCE = 0.03
"""How far a pinned parameter may move: spans that share a link or a core run longer than their price alone, and
the fit spreads that over the parameters a little."""


@pytest.mark.parametrize(("strategy", "workload", "knobs"), CASES, ids=[c[0] for c in CASES])
def test_calibrating_a_prediction_on_its_own_cluster_moves_nothing(strategy: str, workload: str,
                                                                   knobs: dict[str, Any], tmp_path: Path) -> None:
    base = load_cluster("4x-a100-10gbe")
    cluster = with_params(base.model_copy(update={"num_machines": 2}), FIXED_COSTS)
    result = api.simulate(cluster, workload, strategy, knobs)
    assert result.feasible, result.reason
    path = api.predicted_trace(result, tmp_path / f"{strategy}.json",
                               api.trace_metadata(cluster, workload, strategy, result))
    _, report = calibrate_files([path], cluster)
    pinned = {p: row for p, row in report["parameters"].items()
              if row["constrained"] and row["fitted"] and row["data_share"] > INFORMED}
    assert pinned, strategy
    moved = {p: row["after"] / row["before"] for p, row in pinned.items()
             if abs(row["after"] / row["before"] - 1) > TOLERANCE}
    assert moved == {}, strategy
    for p in pinned:
        assert get_param(cluster, p) == pinned[p]["before"]


@pytest.mark.parametrize(("intervals", "covered"), [
    ([], 0.0),
    ([(0.0, 1.0), (2.0, 3.0)], 2.0),                # disjoint: their sum
    ([(0.0, 1.0), (1.0, 3.0)], 3.0),                # touching
    ([(0.0, 5.0), (1.0, 2.0)], 5.0),                # nested (a replica block's compute inside an exchange)
    ([(2.0, 4.0), (0.0, 3.0), (3.5, 6.0)], 6.0),    # chained, unsorted
])
def test_an_iterations_busy_time_counts_overlapping_phases_once(intervals: list[tuple[float, float]],
                                                                covered: float) -> None:
    assert covered_s(intervals) == covered
