"""What else ran on the machine while a run trained (:mod:`executor.run_load`): per-epoch load with the run's own
process tree as its own time, the run's summary, and the note run / loop / calibrate print."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from fault_helpers import hard_limit, tiny_plan

from gnnplan.autotune.report import background_note
from gnnplan.executor import probe_busy, run_load
from gnnplan.executor.runner import run_plan

BUSY = "import time\nt = time.time()\nwhile time.time() - t < {s}: pass\n"


@pytest.mark.skipif(probe_busy.snapshot() is None, reason="needs /proc (Linux)")
def test_an_epochs_load_counts_other_processes_not_the_runs_own() -> None:
    """The run's tree is the launcher's (here this process): its busy child is its own time; a busy process that
    left the tree (reparented to init) is another's."""
    load = run_load.EpochLoad(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", BUSY.format(s=1.5)])
    try:
        load.begin()
        time.sleep(1.0)
        own = load.end()
    finally:
        child.wait()
    subprocess.run(["sh", "-c", f"{sys.executable} -c '{BUSY.format(s=1.5)}' >/dev/null 2>&1 &"], check=True)
    time.sleep(0.2)  # its interpreter has started
    load.begin()
    time.sleep(1.0)
    other = load.end()
    time.sleep(0.4)  # let it end
    assert own is not None and other is not None
    assert own["other_cores"] < 0.4 < 0.6 < other["other_cores"]
    assert not run_load.busy(own) and run_load.busy(other)
    assert run_load.EpochLoad(2**22 + 12345).end() is None  # a launcher that is gone: nothing measured


def test_the_summary_and_note_name_the_busy_measured_epochs() -> None:
    measured = [{"epoch": e, "background": {"other_cores": c, "steal_fraction": s}}
                for e, c, s in ((1, 0.05, 0.0), (2, 0.97, 0.01), (3, 0.9, 0.02), (4, 0.1, 0.2))]
    summary = run_load.summary(measured)
    assert summary == {"cores": os.cpu_count(), "other_cores": pytest.approx(0.5), "steal_fraction": 0.015,
                       "max_other_cores": 0.97, "busy_epochs": [2, 3, 4]}  # epoch 4: the hypervisor's 20%
    assert run_load.summary([{"epoch": 1}]) is None  # not measured (no /proc)
    assert background_note(summary | {"cores": 2}) == (
        "other processes kept up to 0.97 of 2 cores busy during epochs 2, 3, 4 (median 0.50; the hypervisor took 2%): "
        "those epoch times are this machine's under that load, not its own; rerun on a quiet machine before "
        "calibrating on them")
    assert background_note(summary | {"busy_epochs": []}) is None and background_note(None) is None


@pytest.mark.skipif(probe_busy.snapshot() is None, reason="needs /proc (Linux)")
def test_a_run_records_each_epochs_load_and_summarises_its_measured_ones(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with hard_limit(120):
        res = run_plan(tiny_plan("dp", num_epochs=3), trace_dir=tmp_path, progress=False)
    loads = [r["background"] for r in res["epochs"]]
    assert len(loads) == 3 and all(0.0 <= b["other_cores"] and 0.0 <= b["steal_fraction"] <= 1.0 for b in loads)
    assert set(res["background"]) == {"cores", "other_cores", "steal_fraction", "max_other_cores", "busy_epochs"}
    assert set(res["background"]["busy_epochs"]) <= set(res["measured_epochs"])
