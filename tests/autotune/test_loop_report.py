"""``gnnplan loop`` reports prediction errors on data no fit saw: held-out epochs, never the fitted ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from calibration_traces import epochs_trace

from gnnplan.autotune.cli import main
from gnnplan.simulator import api
from gnnplan.simulator.calibrate import with_params
from gnnplan.simulator.hardware.spec import load_cluster

pytestmark = pytest.mark.serial  # real loops: their held-out errors read this machine's load (tests/conftest.py)

FACTORS = (2.0, 1.3, 1.0, 1.3)
"""Epoch time scales of the fake run: warm-up, then the held-out epochs 1 and 3 30% slower than fitted epoch 2."""


def _fake_run(tmp_path: Path, seen: dict[str, Any] | None = None) -> Any:
    """A stand-in for ``runner.run_plan``: the plan simulated on a truth cluster, its trace written from that
    simulation (epochs scaled by :data:`FACTORS`), its evaluation twice the preset's estimate; ``seen`` gets the
    truth's own evaluation time (``truth_evaluation_s``)."""
    truth = with_params(load_cluster("4x-a100-10gbe"), {"efficiency.forward_fraction": 0.3,
                                                         "network.bandwidth_bytes_per_s": 0.8e9})

    def run_plan(plan: Any, nprocs: int, epochs: int | None, trace_dir: str, progress: bool,
                 gpus_per_machine: int = 1) -> dict[str, Any]:
        assert (nprocs, epochs, gpus_per_machine) == (4, len(FACTORS), 1)  # 4x-a100-10gbe: 4 machines x 1
        result = api.simulate(truth, plan.workload, plan.strategy, plan.knobs)
        estimate = api.simulate(load_cluster("4x-a100-10gbe"), plan.workload, plan.strategy, plan.knobs)
        evaluated = None if estimate.evaluation_time_s is None else 2.0 * estimate.evaluation_time_s
        if seen is not None:
            seen["truth_evaluation_s"] = result.evaluation_time_s
        timed = [] if evaluated is None else [evaluated] * len(FACTORS)  # every epoch's evaluation, as run records
        trace = epochs_trace(result, truth, plan.workload, Path(trace_dir) / "run.json", FACTORS, timed)  # as run
        return {"epoch_time_s": 1.3 * result.epoch_time_s, "test_accuracy": 0.5, "trace": str(trace),
                "peak_memory_bytes": {"gpu": None, "host": 1.25 * result.peak_memory_bytes["host"]},
                "evaluation_time_s": evaluated}
    return run_plan


def test_loop_prints_the_held_out_error_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    from gnnplan.executor import runner

    seen: dict[str, Any] = {}
    monkeypatch.setattr(runner, "run_plan", _fake_run(tmp_path, seen))
    out_dir = tmp_path / "loop"
    argv = ["loop", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--trials", "3", "--nprocs", "4",
            "--epochs", str(len(FACTORS)), "--storage", f"sqlite:///{tmp_path / 's.db'}", "--out-dir", str(out_dir)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "after calibration" not in text and "predicted after" not in text and "in-sample" not in text
    assert "held-out epochs" in text and "held-out error" in text
    report = json.loads((out_dir / "report.json").read_text())
    assert "predicted_after_s" not in report and "error_after_fraction" not in report
    (row,) = report["held_out"]["rows"]
    assert (row["fit_epochs"], row["held_out_epochs"]) == ([2], [1, 3])
    # fitted on epoch 2, which ran at the truth: the held-out epochs ran 30% slower than it predicts
    assert row["error_fraction"] == pytest.approx(1 / 1.3 - 1, abs=0.03)
    assert f"{row['error_fraction'] * 100:+.1f}%" in text
    # the measured peak against the uncalibrated prediction (the truth's memory model is the preset's: 1/1.25)
    assert report["memory"]["error_before_fraction"] == pytest.approx(1 / 1.25 - 1)
    assert "peak host memory per machine: measured" in text and "before calibration (-20.0%)" in text
    # the evaluation, timed apart from the epoch, against the estimate (the fake run's took twice the estimate)
    # (the seeded 3-trial study picks a strategy that evaluates by layer-wise inference)
    assert report["evaluation"]["error_before_fraction"] == pytest.approx(1 / 2 - 1, rel=1e-9)
    assert "evaluation after each epoch (not in the epoch time): measured" in text
    # and the held-out epochs' evaluation against the calibration on the others: no eval spans in this trace, so
    # the prediction is the evaluation at the rates the fit recovered from the training spans, the truth's
    held = row["evaluation"]
    assert held["measured_s"] == report["evaluation"]["measured_s"]
    assert held["predicted_s"] == pytest.approx(seen["truth_evaluation_s"], rel=0.05)  # 0.6% off (2026-11-29)
    assert held["error_fraction"] == pytest.approx(held["predicted_s"] / held["measured_s"] - 1)
    assert "evaluation after the held-out epochs 1, 3: measured" in text and "on epoch 2 (held-out error" in text
    assert f"{held['error_fraction'] * 100:+.1f}%" in text
    assert "its evaluation" in text  # its row under the trace's in the held-out table (autotune/report.py)
    page = (out_dir / "report.html").read_text()
    assert "peak host memory per machine" in page
    assert main([*argv, "--json"]) == 0
    assert "predicted_after_s" not in json.loads(capsys.readouterr().out)


def test_the_evaluation_check_needs_both_a_measurement_and_an_estimate() -> None:
    from gnnplan.autotune.loop import _evaluation_check

    assert _evaluation_check({"evaluation_time_s": 0.2}, None) is None  # e.g. neutronstar: no estimate
    assert _evaluation_check({}, 0.1) is None  # a run recorded before evaluations were timed
    assert _evaluation_check({"evaluation_time_s": 0.2}, 0.1) == {"measured_s": 0.2, "predicted_before_s": 0.1,
                                                                  "error_before_fraction": -0.5}


def test_a_card_workload_is_refused_before_anything_is_written(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A dataset card has no graph to train on: the loop says so before it tunes, writing no study and no folder
    (before, the tuner ran, wrote plan.yaml and its trials, and the run step refused the plan)."""
    wl = tmp_path / "wl.yaml"
    wl.write_text("dataset: card:reddit\nmodel: {arch: sage, num_layers: 2, hidden_dim: 16}\n"
                  "training: {batch_size: 1024, fanouts: [10, 10]}\n")
    out_dir, db = tmp_path / "loop", tmp_path / "s.db"
    assert main(["loop", "--cluster", "4x-a100-10gbe", "--workload", str(wl), "--trials", "2", "--nprocs", "4",
                 "--storage", f"sqlite:///{db}", "--out-dir", str(out_dir)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gnnplan loop: error: workload.dataset: 'card:reddit' is a dataset card (statistics only)")
    assert not out_dir.exists() and not db.exists()
