"""A full-graph epoch's breakdown (``busiest_phase_totals``): per phase the busiest rank's summed span time, the
same numbers as summing each rank's spans phase by phase."""

from __future__ import annotations

import pytest

from gnnplan.simulator import api
from gnnplan.simulator.hardware.spec import load_cluster
from gnnplan.simulator.strategies.window import busiest_phase_totals
from gnnplan.simulator.trace import Span
from gnnplan.simulator.workload.spec import workload_from_dict


def per_rank_oracle(spans: list[Span], phases: tuple[str, ...], ranks: int) -> dict[str, float]:
    """The rule as written before: for every phase, every rank's sum over all spans, then the largest."""
    return {p: max(sum(s.dur_s for s in spans if s.rank == r and s.phase == p) for r in range(ranks)) for p in phases}


def test_the_busiest_rank_of_each_phase() -> None:
    spans = [Span(0, "forward", 0.0, 1.0), Span(1, "forward", 0.0, 0.75), Span(1, "forward", 1.0, 0.5),
             Span(0, "exchange", 1.0, 0.25), Span(2, "backward", 0.0, 3.0), Span(0, "epoch", 0.0, 9.0)]
    assert busiest_phase_totals(spans, ("forward", "exchange", "backward", "optimizer")) == {
        "forward": 1.25, "exchange": 0.25, "backward": 3.0, "optimizer": 0.0}
    assert busiest_phase_totals([], ("forward",)) == {"forward": 0.0}


@pytest.mark.parametrize("strategy,knobs", [("neutronstar", {"mode": "hybrid"}), ("hongtu", {"num_chunks": 2})])
def test_equals_summing_rank_by_rank_on_a_simulated_epoch(strategy: str, knobs: dict[str, object]) -> None:
    """On Cora, 2 machines x 2 GPUs (every rank simulated: their work differs), exactly the per-rank sums."""
    cluster = load_cluster("2x4-a100-nvlink3-200gbib").model_copy(update={"gpus_per_machine": 2})
    wl = workload_from_dict({"dataset": "cora", "model": {"arch": "gcn", "num_layers": 2, "hidden_dim": 16},
                             "training": {"mode": "full-graph", "num_epochs": 1}})
    module, kn, ctx = api.load_context(cluster, wl, strategy, knobs)
    result = module.simulate(ctx, kn)
    phases = tuple(p for p in result.breakdown_s if p != "overhead")
    assert len(phases) >= 3 and len({s.rank for s in result.spans}) == 4
    assert busiest_phase_totals(result.spans, phases) == per_rank_oracle(result.spans, phases, 4)
    assert {p: result.breakdown_s[p] for p in phases} == per_rank_oracle(result.spans, phases, 4)
