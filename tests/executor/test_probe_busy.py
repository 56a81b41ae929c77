"""Tests of :mod:`executor.probe_busy`: what other processes and the hypervisor took while ``gnnplan probe``
measured, and what the probe then writes and says."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from busy_child import busy_child, busy_orphan

from gnnplan.autotune.cli import main
from gnnplan.executor import probe, probe_busy
from gnnplan.executor.probe_busy import Background, CpuSnapshot
from gnnplan.executor.threads import cpu_count
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.spec import load_cluster

STAT = """cpu  1000 20 300 5000 40 10 30 100 0 0
cpu0 500 10 150 2500 20 5 15 50 0 0
intr 123
"""


def test_the_aggregate_cpu_line_is_busy_steal_and_total_seconds() -> None:
    busy, steal, total = probe_busy.parse_proc_stat(STAT, 100.0)
    # user + nice + system + irq + softirq = 1360 ticks; steal 100; + idle 5000 and iowait 40 = 6500 in all
    assert (busy, steal, total) == pytest.approx((13.6, 1.0, 65.0), rel=1e-12)
    with pytest.raises(ValueError, match="/proc/stat"):
        probe_busy.parse_proc_stat("cpu0 1 2 3\n", 100.0)


def test_other_processes_are_the_machines_busy_time_less_the_probes() -> None:
    before = CpuSnapshot(wall_s=10.0, busy_s=100.0, steal_s=2.0, total_s=400.0, own_s=5.0)
    after = CpuSnapshot(wall_s=20.0, busy_s=118.0, steal_s=3.0, total_s=420.0, own_s=13.0)
    load = probe_busy.background(before, after)
    assert load == Background(wall_s=10.0, other_cores=1.0, steal_fraction=0.05)  # (18 - 8) s over 10 s; 1 of 20
    assert load.busy  # a whole core
    assert load.describe(2) == ("while measuring (10 s), other processes kept 1.00 of 2 cores busy on average and "
                                "the hypervisor took 5% of the CPU time")
    idle = probe_busy.background(before, CpuSnapshot(20.0, 107.9, 2.5, 420.0, 13.0))
    assert idle.other_cores == 0.0 and not idle.busy  # the probe's own time counted a tick more than the machine's
    assert probe_busy.background(before, CpuSnapshot(20.0, 108.0, 4.1, 420.0, 13.0)).busy  # steal above 10%
    with pytest.raises(ValueError, match="later"):
        probe_busy.background(after, before)
    assert not Background(wall_s=0.02, other_cores=4.04, steal_fraction=0.0).busy  # a tick or two: noise


def _stat(pid: int, ppid: int, utime: int, stime: int, cutime: int, cstime: int, comm: str = "x") -> str:
    fields = ["S", ppid] + [0] * 9 + [utime, stime, cutime, cstime] + [0] * 5
    return f"{pid} ({comm}) " + " ".join(map(str, fields))


def test_descendants_are_summed_with_what_they_reaped(tmp_path: Path) -> None:
    # 10 -> 11 -> 13, 10 -> 12; 14 is another tree; a process name may hold spaces and parentheses
    tree = {10: (1, 0, 0, 0, 0), 11: (10, 100, 50, 30, 20), 12: (10, 10, 0, 0, 0), 13: (11, 5, 5, 0, 0),
            14: (1, 999, 999, 0, 0)}
    for pid, (ppid, *times) in tree.items():
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(_stat(pid, ppid, *times, comm="py (worker) 1"))
    (tmp_path / "self").mkdir()
    assert probe_busy.descendants_cpu_s(10, 100.0, proc=tmp_path) == pytest.approx(2.2)  # 200 + 10 + 10 ticks
    assert probe_busy.descendants_cpu_s(13, 100.0, proc=tmp_path) == 0.0


@pytest.mark.skipif(probe_busy.snapshot() is None, reason="needs /proc/stat (Linux)")
def test_a_busy_process_outside_the_probe_counts_and_its_own_child_does_not(tmp_path: Path) -> None:
    # the probe's own child, alive when it reads: its time is the probe's
    child = busy_child(tmp_path / "child", 1.5)
    try:
        before = probe_busy.snapshot()
        time.sleep(1.0)
        own = probe_busy.background(before, probe_busy.snapshot())  # type: ignore[arg-type]
    finally:
        child.wait()
    # a process that left the probe's tree (its parent exited: reparented to init) is another process
    busy_orphan(tmp_path / "orphan", 1.5)
    before = probe_busy.snapshot()
    time.sleep(1.0)
    other = probe_busy.background(before, probe_busy.snapshot())  # type: ignore[arg-type]
    time.sleep(0.4)  # let it end
    # the orphan's core, less what the hypervisor stole from it (a 1-s busy loop here got 0.64-0.72 CPU-s with the
    # VM otherwise idle, 2026-12-01): stolen core-seconds per second are the steal fraction times the cores
    available = 1.0 - other.steal_fraction * cpu_count()
    assert own.other_cores < 0.4 and other.other_cores > 0.6 * available and other.busy


@pytest.mark.parametrize("busy", [False, True])
def test_probe_writes_the_background_in_its_header_and_warns_when_busy(
        busy: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    data: dict[str, Any] = json.loads(load_cluster("local").model_dump_json())  # the probe's result, not measured
    monkeypatch.setattr(probe, "probe_machine", lambda **_: data)
    snaps = iter([CpuSnapshot(0.0, 10.0, 1.0, 100.0, 2.0),
                  CpuSnapshot(20.0, 30.0 + (20.0 if busy else 0.0), 1.2, 140.0, 22.0)])
    monkeypatch.setattr(probe_busy, "snapshot", lambda: next(snaps))
    out = tmp_path / "local.yaml"
    assert main(["probe", "-o", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    reply = json.loads(captured.out)
    assert reply["background"] == {"wall_s": 20.0, "other_cores": 1.0 if busy else 0.0,
                                   "steal_fraction": pytest.approx(0.005), "busy": busy}
    text = out.read_text()
    header = " ".join(line[2:] for line in text.splitlines() if line.startswith("# "))
    assert header.startswith("This machine (") and header.endswith("of the CPU time (/proc/stat).")
    assert f"other processes kept {1.0 if busy else 0.0:.2f} of" in header
    assert load_cluster(str(out)).name == "local" and yaml.safe_load(text)["name"] == "local"
    assert ("gnnplan probe: warning: while measuring (20 s), other processes kept 1.00 of" in captured.err) == busy


@pytest.mark.parametrize("busy", [False, True])
def test_a_probe_that_fails_on_a_busy_machine_says_so(busy: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    def invalid(**_: Any) -> dict[str, Any]:  # what cluster_from_dict said of a quick probe beside another one
        raise SpecError("probe: efficiency.gather_fraction: Input should be less than or equal to 10 (got 13.52)")

    monkeypatch.setattr(probe, "probe_machine", invalid)
    snaps = iter([CpuSnapshot(0.0, 10.0, 1.0, 100.0, 2.0),
                  CpuSnapshot(15.0, 25.0 + (15.75 if busy else 0.0), 1.0, 130.0, 17.0)])
    monkeypatch.setattr(probe_busy, "snapshot", lambda: next(snaps))
    out = tmp_path / "local.yaml"
    assert main(["probe", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gnnplan probe: error: probe: efficiency.gather_fraction: Input")
    assert err[0].endswith("(got 13.52) (while measuring (15 s), other processes kept 1.05 of "
                           f"{cpu_count()} cores busy on average and the hypervisor took 0% of the CPU time: re-run "
                           "the probe on an idle machine)") == busy
    assert not out.exists()


def test_probe_says_how_to_name_the_cluster_it_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    data: dict[str, Any] = json.loads(load_cluster("local").model_dump_json())  # the probe's result, not measured
    monkeypatch.setattr(probe, "probe_machine", lambda **_: data)
    monkeypatch.setattr(probe_busy, "snapshot", lambda: None)
    monkeypatch.setenv("GNNPLAN_HOME", str(tmp_path / "home"))
    out = tmp_path / "elsewhere" / "x.yaml"  # not a presets folder: only its path names it
    assert main(["probe", "-o", str(out)]) == 0
    assert f"(use it as --cluster {out})" in capsys.readouterr().out.replace("\n", "")
    assert load_cluster(str(out)).name == "x"  # named after its file: two probes' reports tell them apart
    assert main(["probe"]) == 0  # the default, in the user's presets folder: its name does
    assert "(use it as --cluster local)" in capsys.readouterr().out.replace("\n", "")
    assert "--quick" not in out.read_text()
    assert main(["probe", "--quick", "-o", str(out)]) == 0  # the file itself says its rates are rough
    header = " ".join(line[2:] for line in out.read_text().splitlines() if line.startswith("# "))
    assert "Measured with --quick (small sizes, few repeats): rough rates" in header


ORPHAN_SCRIPT = """
import contextlib, ctypes, subprocess, sys, time
from gnnplan.executor import probe_busy
def subreaper():
    value = ctypes.c_int(-1)
    ctypes.CDLL(None).prctl(probe_busy.PR_GET_CHILD_SUBREAPER, ctypes.byref(value), 0, 0, 0)
    return value.value
with probe_busy.adopted_orphans() if sys.argv[1] == "adopt" else contextlib.nullcontext(False) as adopted:
    assert adopted == (sys.argv[1] == "adopt") and subreaper() == int(adopted)
    before = probe_busy.snapshot()
    burn = "import time; t = time.process_time()\\nwhile time.process_time() - t < 0.6: pass"
    subprocess.run(["sh", "-c", f"{sys.executable} -c '{burn}' & exit 0"], check=True)  # the burner outlives sh
    time.sleep(1.5)
    print(probe_busy.snapshot().own_s - before.own_s)
assert subreaper() == 0  # restored on leaving
"""


@pytest.mark.parametrize("adopt", [True, False])
def test_a_process_that_outlives_its_parent_stays_the_probes_time(adopt: bool) -> None:
    """An orphan of the probe's tree (the emulated machine probe's forkserver) counted as another process's time:
    0.40 cores on an idle machine; a child subreaper keeps it in the tree."""
    out = subprocess.run([sys.executable, "-c", ORPHAN_SCRIPT, "adopt" if adopt else "no"], capture_output=True,
                         text=True, timeout=60, check=True)
    own = float(out.stdout.strip())
    assert (own >= 0.5) if adopt else (own < 0.3), own
