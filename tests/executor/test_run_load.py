"""What else ran on the machine while a run trained (:mod:`executor.run_load`): per-epoch load with the run's own
process tree as its own time, the run's summary, and the note run / loop / calibrate print."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from busy_child import busy_child, busy_orphan
from fault_helpers import hard_limit, tiny_plan

from gnnplan.autotune.report import background_note
from gnnplan.executor import probe_busy, run_load
from gnnplan.executor.runner import run_plan


@pytest.mark.skipif(probe_busy.snapshot() is None, reason="needs /proc (Linux)")
def test_an_epochs_load_counts_other_processes_not_the_ranks_own(tmp_path: Path) -> None:
    """A rank's own time holds its live children (its sampler processes); a busy process that left its tree
    (reparented to init) is another's. Two ranks of one machine: rank 0's machine less both ranks' own time.
    The other cores are compared with a quiet window's first, so whatever else runs on the machine (another test
    run) cancels out; busy() is judged only when that window was idle."""
    load = run_load.EpochLoad()
    load.begin()
    time.sleep(1.0)
    base = run_load.combine([load.end()])
    assert base is not None
    quiet = run_load.load_of([base])["other_cores"]
    child = busy_child(tmp_path / "child", 1.2)
    try:
        load.begin()
        time.sleep(1.0)
        own = load.end()
    finally:
        child.wait()
    # the busy child holds a core for the whole window, less what the hypervisor stole from it (a 1-s busy loop here
    # got 0.64-0.72 CPU-s with the VM otherwise idle, 2026-12-01; the idle core has nothing to steal)
    own_s, key, _, steal_s, _, wall_s = own
    assert own_s > 0.6 * (wall_s - steal_s) and key == run_load.machine_key() and wall_s == pytest.approx(1.0, abs=0.2)
    busy_orphan(tmp_path / "orphan", 1.2)
    load.begin()
    time.sleep(1.0)
    other = load.end()
    time.sleep(0.4)  # let it end
    mine, theirs = run_load.combine([own]), run_load.combine([other])
    assert mine is not None and theirs is not None
    extra_mine = run_load.load_of([mine])["other_cores"] - quiet
    extra_theirs = run_load.load_of([theirs])["other_cores"] - quiet
    available = (other[5] - other[3]) / other[5]  # the orphan's core, less what the hypervisor stole (as above)
    assert extra_mine < 0.4 and extra_theirs > 0.6 * available
    assert run_load.busy(run_load.load_of([theirs]))
    if quiet < 0.1:  # an idle machine: the rank's own child alone does not make its other cores busy (the
        # hypervisor's steal, which this VM shows at times, is judged by busy() too and is not what this tests)
        assert run_load.load_of([mine])["other_cores"] <= probe_busy.BUSY_CORES
    # another rank of the same machine is the run's own time; one of another machine (boot id) is not
    assert run_load.combine([other, [0.9, own[1], 0.0, 0.0, 0.0, 1.0]])["own_s"] == pytest.approx(other[0] + 0.9)
    assert run_load.combine([other, [0.9, own[1] + 1, 0.0, 0.0, 0.0, 1.0]]) == theirs
    assert run_load.combine([[float("nan")] * 6]) is None  # not measured (no /proc)


def _counters(busy_s: float, own_s: float, wall_s: float, steal_s: float = 0.0) -> dict[str, float]:
    return {"busy_s": busy_s, "own_s": own_s, "steal_s": steal_s, "total_s": 2 * wall_s, "wall_s": wall_s}


def test_the_summary_judges_half_a_second_of_epochs_at_once_and_the_note_names_them() -> None:
    """/proc counts clock ticks, so consecutive epochs are judged together until they span MIN_WINDOW_S: here
    epochs 1-2 (0.6 s, idle), 3-5 (0.6 s, one core busy), 6 (0.3 s, joins 3-5: too short alone)."""
    walls = {1: 0.3, 2: 0.3, 3: 0.2, 4: 0.2, 5: 0.2, 6: 0.3}
    measured = [{"epoch": e, "background": _counters(w * (1.0 if e < 3 else 2.0), w, w)} for e, w in walls.items()]
    assert [epochs for epochs, _ in run_load.windows(measured)] == [[1, 2], [3, 4, 5, 6]]
    summary = run_load.summary(measured + [{"epoch": 7}])  # an epoch without counters is left out
    assert summary == {"cores": os.cpu_count(), "other_cores": pytest.approx(0.9 / 1.5), "steal_fraction": 0.0,
                       "max_other_cores": pytest.approx(1.0), "busy_epochs": [3, 4, 5, 6]}
    stolen = [{"epoch": 1, "background": _counters(0.5, 0.5, 0.5, steal_s=0.2)}]  # 20% of 1 s of CPU: busy too
    assert run_load.summary(stolen)["busy_epochs"] == [1]
    assert run_load.summary([{"epoch": 1}]) is None  # not measured (no /proc)
    assert background_note(summary | {"cores": 2}) == (
        "other processes kept up to 1.00 of 2 cores busy during epochs 3, 4, 5, 6 (0.60 over its measured epochs; "
        "the hypervisor took 0%): those epoch times are this machine's under that load, not its own; rerun on a "
        "quiet machine before calibrating on them")
    assert background_note(summary | {"busy_epochs": []}) is None and background_note(None) is None


@pytest.mark.skipif(probe_busy.snapshot() is None, reason="needs /proc (Linux)")
def test_a_run_records_each_epochs_load_and_summarises_its_measured_ones(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with hard_limit(120):
        res = run_plan(tiny_plan("dp", num_epochs=3), trace_dir=tmp_path, progress=False)
    loads = [r["background"] for r in res["epochs"]]  # two workers: both ranks' own time left out
    assert len(loads) == 3 and all(b["own_s"] > 0 and b["wall_s"] > 0 for b in loads)
    assert set(res["background"]) == {"cores", "other_cores", "steal_fraction", "max_other_cores", "busy_epochs"}
    assert set(res["background"]["busy_epochs"]) <= set(res["measured_epochs"])
