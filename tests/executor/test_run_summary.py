"""The ``run --json`` summary (executor.runner.summarise): its steady-state figures are over the measured epochs,
all but the warm-up and, where a controller explored configurations (records with ``settings``), only the epochs
that ran with the last epoch's settings, the configuration the simulator predicts."""

from __future__ import annotations

import statistics
from typing import Any

import pytest

from gnnplan.executor.runner import summarise
from gnnplan.simulator.hardware.spec import load_cluster
from gnnplan.simulator.plan import Plan
from gnnplan.simulator.workload.spec import load_workload


def _record(epoch: int, time_s: float, network: float, settings: dict[str, int] | None) -> dict[str, Any]:
    record = {"epoch": epoch, "epoch_time_s": time_s, "loss": 1.0, "val_accuracy": 0.5, "test_accuracy": 0.5,
              "num_iterations": 3, "num_seeds": 30, "bytes": {"pcie": 10.0 * network, "network": network},
              "peak_memory_bytes": {"gpu": None, "host": 1000.0 + network}}
    return record | ({"settings": settings} if settings is not None else {})


PLAN = Plan(strategy="hopgnn", knobs={}, num_workers=2,
            cluster=load_cluster("4x-a100-10gbe").model_copy(update={"num_machines": 2}),
            workload=load_workload("cora-sage"))
# hopgnn's merge controller on 2 machines: S = 2 (warm-up, then the reference), 1 tried and slower, back to 2
STEPS = [2, 2, 1, 2, 2]
TIMES = [0.50, 0.10, 0.30, 0.12, 0.11]
NETWORK = [9.0, 4.0, 1.0, 6.0, 8.0]


@pytest.mark.parametrize(("settings", "measured"), [
    ([{"num_steps": s} for s in STEPS], [1, 3, 4]),  # epoch 2 explored S = 1: left out
    ([None] * 5, [1, 2, 3, 4]),                      # no controller: every epoch but the warm-up
    ([{"num_steps": s} for s in [2, 2, 1, 1, 1]], [2, 3, 4]),  # S = 1 kept: the epochs at 2 were the climb
])
def test_steady_state_figures_leave_out_the_controllers_exploration(settings: list[Any], measured: list[int]) -> None:
    records = [_record(e, TIMES[e], NETWORK[e], settings[e]) for e in range(5)]
    res = summarise(PLAN, records, 1.0)
    assert res["measured_epochs"] == measured
    assert res["epoch_time_s"] == statistics.median(TIMES[e] for e in measured)
    assert res["bytes_per_epoch"]["network"] == pytest.approx(sum(NETWORK[e] for e in measured) / len(measured))
    assert res["bytes_per_epoch"]["pcie"] == pytest.approx(10.0 * res["bytes_per_epoch"]["network"])
    assert res["epoch_times_s"] == TIMES and res["num_epochs"] == 5
    assert res["peak_memory_bytes"] == {"gpu": None, "host": 1000.0 + max(NETWORK[e] for e in measured)}


def test_short_runs_keep_the_epochs_in_the_last_settings() -> None:
    records = [_record(0, 0.2, 5.0, {"num_steps": 2}), _record(1, 0.1, 3.0, {"num_steps": 1})]
    assert summarise(PLAN, records, 1.0)["measured_epochs"] == [1]  # 2 epochs: no warm-up left out, but S = 2 was left
    single = summarise(PLAN, records[:1], 1.0)
    assert single["measured_epochs"] == [0] and single["bytes_per_epoch"]["network"] == 5.0


def test_peak_memory_is_the_largest_measured_epochs_and_absent_values_are_none() -> None:
    records = [_record(e, 0.1, 1.0, None) for e in range(4)]
    records[0]["peak_memory_bytes"] = {"gpu": 9e9, "host": 9e9}  # the warm-up's peak is not steady state
    records[2]["peak_memory_bytes"] = {"gpu": 300.0, "host": 2000.0}
    del records[3]["peak_memory_bytes"]  # restored from a checkpoint written before it was recorded
    assert summarise(PLAN, records, 1.0)["peak_memory_bytes"] == {"gpu": 300.0, "host": 2000.0}
    for r in records:
        r.pop("peak_memory_bytes", None)
    assert summarise(PLAN, records, 1.0)["peak_memory_bytes"] == {"gpu": None, "host": None}


def test_each_phases_peak_is_over_the_measured_epochs_and_the_run_peak_is_the_larger() -> None:
    records = [_record(e, 0.1, 1.0, None) for e in range(4)]
    phases = [({"gpu": None, "host": 9e9}, {"gpu": None, "host": 9e9}),  # warm-up: left out
              ({"gpu": None, "host": 500.0}, {"gpu": None, "host": 700.0}),
              ({"gpu": None, "host": 650.0}, {"gpu": None, "host": 600.0}),
              ({"gpu": None, "host": 550.0}, {"gpu": None, "host": 680.0})]
    for r, (training, evaluation) in zip(records, phases):
        r["peak_memory_phases"] = {"training": training, "evaluation": evaluation}
        r["peak_memory_bytes"] = {"gpu": None, "host": max(training["host"], evaluation["host"])}
    res = summarise(PLAN, records, 1.0)
    assert res["peak_memory_phases"] == {"training": {"gpu": None, "host": 650.0},
                                         "evaluation": {"gpu": None, "host": 700.0}}
    assert res["peak_memory_bytes"] == {"gpu": None, "host": 700.0}


def test_the_evaluation_time_is_the_median_of_the_measured_epochs() -> None:
    records = [_record(e, 0.1, 1.0, None) | {"evaluation_time_s": t} for e, t in enumerate([9.0, 0.3, 0.1, 0.2])]
    assert summarise(PLAN, records, 1.0)["evaluation_time_s"] == 0.2  # the warm-up's 9 s left out
    for r in records:
        del r["evaluation_time_s"]  # restored from a checkpoint written before it was recorded
    assert summarise(PLAN, records, 1.0)["evaluation_time_s"] is None


@pytest.mark.parametrize("terminal", [False, True])
def test_the_epoch_lines_print_in_a_log_and_the_bar_only_on_a_terminal(terminal: bool,
                                                                        monkeypatch: pytest.MonkeyPatch,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """gnnplan run's epoch lines go to stderr either way; tqdm's bar and its carriage-return redraws only to a
    terminal (2026-11-30: a log of a run held them between the lines)."""
    import sys

    from gnnplan.executor.runner import EpochProgress

    monkeypatch.setattr(sys.stderr, "isatty", lambda: terminal, raising=False)
    show = EpochProgress(PLAN, True)
    for epoch in range(2):
        show({"epoch": epoch, "epoch_time_s": 0.5, "loss": 1.0, "val_accuracy": 0.5, "test_accuracy": 0.5})
    show.close()
    err = capsys.readouterr().err
    assert err.count("epoch   1  time 0.5000 s  loss 1.0000") == 1 and err.count("epoch   0  time") == 1
    assert ("\r" in err) == terminal
