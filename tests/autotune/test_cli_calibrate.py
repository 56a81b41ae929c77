"""``gnnplan simulate --trace`` writes a trace that ``gnnplan calibrate`` reads, with and without ``--json``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gnnplan.autotune.cli import main
from gnnplan.simulator.hardware.spec import load_cluster


@pytest.mark.parametrize("strategy, workload", [("dp", "cora-sage"), ("neutronstar", "cora-gcn-full")])
def test_calibrate_a_predicted_trace(strategy: str, workload: str, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    trace, out = tmp_path / "t.json", tmp_path / "cal.yaml"
    assert main(["simulate", "--cluster", "4x-a100-10gbe", "--workload", workload, "--strategy", strategy,
                 "--trace", str(trace), "--json"]) == 0
    predicted = json.loads(capsys.readouterr().out)["epoch_time_s"]
    assert main(["calibrate", str(trace), "--cluster", "4x-a100-10gbe", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "calibrated parameters" in text and "calibrated cluster written to" in text
    # one predicted epoch: nothing to hold out, and the in-sample figure is labelled as a fit
    assert f"held-out epochs: {trace.name}: 1 epoch: cannot be held out" in text.replace(str(trace), trace.name)
    assert "held-out configurations: 1 trace(s) of one configuration: none to leave out" in text
    assert "fit (in-sample, not a prediction)" in text and "after" not in text
    assert load_cluster(out).name == "4x-a100-10gbe-calibrated"
    assert main(["calibrate", str(trace), "--cluster", "4x-a100-10gbe", "-o", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (run,) = report["traces"].values()
    assert run["measured_epoch_time_s"] == pytest.approx(predicted, rel=1e-9)
    assert run["fit_epoch_time_s"] == pytest.approx(predicted, rel=1e-3)
    assert report["held_out"]["epochs"]["rows"] == []
