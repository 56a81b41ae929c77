"""Given a full-graph workload, the tuner compares full-graph strategies only, chooses ``neutronstar``, and the
chosen plan runs for real (2 gloo workers), writing a trace."""

from __future__ import annotations

import math

from gnnplan.autotune.planning import tune_to_plan
from gnnplan.executor.runner import run_plan
from gnnplan.simulator.hardware.spec import load_cluster
from gnnplan.simulator.plan import load_plan
from gnnplan.simulator.trace import read_trace
from gnnplan.simulator.workload.spec import load_workload


def test_tuner_chooses_and_runs_neutronstar(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tune_to_plan(load_cluster("local"), load_workload("cora-gcn-full"), None, 12,
                       f"sqlite:///{tmp_path / 'study.db'}", None, False, 0, tmp_path / "plan.yaml")
    # both full-graph strategies are compared; nothing of another training semantics
    assert {row["strategy"] for row in out["ranked"]} == {"neutronstar", "hongtu"}
    assert out["best"]["strategy"] == "neutronstar" and out["best"]["feasible"]
    assert "full-graph" in out["note"]
    modes = {row["knobs"]["mode"] for row in out["ranked"] if row["strategy"] == "neutronstar"}
    assert len(modes) >= 2  # the study tried several dependency modes
    plan = load_plan(tmp_path / "plan.yaml")
    result = run_plan(plan, nprocs=2, epochs=3, trace_dir=tmp_path, progress=False)
    assert result["strategy"] == "neutronstar" and result["num_iterations"] == 1
    assert all(t > 0 for t in result["epoch_times_s"]) and math.isfinite(result["loss"])
    assert 0.0 <= result["val_accuracy"] <= 1.0 and result["bytes_per_epoch"]["network"] > 0
    spans, meta = read_trace(result["trace"])
    assert meta["strategy"] == "neutronstar" and meta["knobs"] == plan.knobs
    assert {"exchange", "forward", "backward", "all_reduce", "optimizer"} <= {s.phase for s in spans}
