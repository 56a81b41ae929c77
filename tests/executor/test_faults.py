"""Faults: a worker that raises, dies or stops responding ends the run with one line naming it; Ctrl-C / SIGTERM
to the launcher stops every worker; the rendezvous listens on loopback only. Every test has a hard time limit
(subprocess timeouts, or SIGALRM in this process)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fault_helpers import alive, env, hard_limit, partial_files, tiny_plan, wait_until, workers_of
from fault_workers import listening, misbehave

from gnnplan.autotune.cli import main
from gnnplan.executor import faults
from gnnplan.executor.checkpoint import complete_epochs
from gnnplan.executor.emulated_run import _wait
from gnnplan.executor.launch import FAILURE_PREFIX, WorkerError, spawn
from gnnplan.executor.runner import run_plan
from gnnplan.simulator.plan import load_plan, save_plan

ROOT = Path(__file__).resolve().parents[2]
DEATH_LIMIT_S = 30.0
"""The issue's bound: a run with a dead worker exits within 30 s."""


@pytest.mark.parametrize("action, expected", [
    ("raise", "rank 1 raised ZeroDivisionError: division by zero"),
    ("kill", "rank 1 died: killed by SIGKILL"),
    ("stop", "rank 1 stopped responding: its process is stopped (SIGSTOP/SIGTSTP); its peers waited the 3 s "
             "collective timeout for it"),
])
def test_a_failing_worker_is_named_in_one_line_and_every_worker_stops(action: str, expected: str) -> None:
    seen: list[dict] = []
    started = time.monotonic()
    with hard_limit(60), pytest.raises(WorkerError) as info:
        spawn(misbehave, 2, (action, 1), seen.append, collective_timeout_s=3.0)
    assert str(info.value) == expected
    assert time.monotonic() - started < DEATH_LIMIT_S
    assert info.value.failures[0].rank == 1  # the cause first; rank 0's echo, if seen in time, after it
    assert sorted(m["rank"] for m in seen) == [0, 1]
    wait_until(lambda: not any(alive(m["pid"]) for m in seen), 5.0)


def test_a_worker_killed_while_the_oom_killer_ran_is_named_out_of_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel's OOM kill counter (/proc/vmstat) moved between the run's start and rank 1's SIGKILL."""
    counts = iter([7, 8])
    monkeypatch.setattr(faults, "oom_kill_count", lambda: next(counts, 8))
    with hard_limit(60), pytest.raises(WorkerError) as info:
        spawn(misbehave, 2, ("kill", 1), collective_timeout_s=3.0)
    assert str(info.value) == ("rank 1 died: killed by SIGKILL (the kernel's OOM killer ended a process during the "
                               "run: out of memory)")


def test_the_oom_kill_counter_is_read_and_moves_only_sigkill_deaths(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    vmstat = tmp_path / "vmstat"
    vmstat.write_text("nr_free_pages 5\noom_kill 12\npgfault 3\n")
    monkeypatch.setattr(faults, "VMSTAT", vmstat)
    assert faults.oom_kill_count() == 12
    killed = faults.from_exit_code(0, -9)
    assert faults.killed_by_oom(killed, 12) is killed  # no kill since the start
    assert "out of memory" in faults.killed_by_oom(killed, 11).detail
    exited = faults.from_exit_code(0, 3)
    assert faults.killed_by_oom(exited, 11) is exited and faults.killed_by_oom(killed, None) is killed
    monkeypatch.setattr(faults, "VMSTAT", tmp_path / "missing")
    assert faults.oom_kill_count() is None


def test_bad_input_inside_a_worker_stays_a_value_error() -> None:
    with hard_limit(60), pytest.raises(ValueError, match=r"^knobs.x: must be positive \(got -1\)$"):
        spawn(misbehave, 2, ("value", 1), collective_timeout_s=3.0)


def test_rendezvous_and_gloo_listen_on_loopback_only() -> None:
    with hard_limit(60):
        ranks = spawn(listening, 2, ())
    assert ranks[0], "rank 0 runs the rendezvous store"
    addresses = [a for sockets in ranks for a in sockets]
    assert addresses and all(a.startswith("127.0.0.1:") for a in addresses), addresses


def _reports(kind: str, detail: str, code: int) -> str:
    line = FAILURE_PREFIX + json.dumps({"rank": 0, "kind": kind, "detail": detail})
    return f"import sys; sys.stderr.write({line!r} + '\\n'); sys.exit({code})"


@pytest.mark.parametrize("programs, expected", [
    (("import time; time.sleep(60)", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"),
     "rank 1 died: killed by SIGKILL"),
    ((_reports("comm", "Connection reset by peer", 1), _reports("raised", "ZeroDivisionError: division by zero", 1)),
     "rank 1 raised ZeroDivisionError: division by zero"),
])
def test_emulated_launcher_names_the_rank_that_failed_first(tmp_path: Path, programs: tuple[str, str],
                                                            expected: str) -> None:
    """The emulated run's watcher on real rank processes: the verdict names rank 1, the rest are killed."""
    logs = [open(tmp_path / f"rank{r}.err", "w+") for r in (0, 1)]  # noqa: SIM115 (closed below)
    procs = [subprocess.Popen([sys.executable, "-c", programs[r]], stderr=logs[r], text=True) for r in (0, 1)]
    started = time.monotonic()
    try:
        with hard_limit(30), pytest.raises(WorkerError) as info:
            _wait(procs, logs, 30.0)
    finally:
        for log in logs:
            log.close()
    assert str(info.value) == expected
    assert time.monotonic() - started < 10
    assert all(p.poll() is not None for p in procs)


def test_torchrun_entry_fails_in_one_line(tmp_path: Path) -> None:
    environ = {**env(), "RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}
    out = subprocess.run([sys.executable, "-m", "gnnplan.executor.launch", str(tmp_path / "missing.yaml")],
                         cwd=ROOT, env=environ, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 2
    (line,) = out.stderr.splitlines()
    assert line.startswith(FAILURE_PREFIX)
    failure = json.loads(line[len(FAILURE_PREFIX):])
    assert failure["rank"] == 0 and failure["kind"] == "invalid" and "missing.yaml" in failure["detail"]


def _start_cli(tmp_path: Path, *extra: str) -> subprocess.Popen[str]:
    plan = save_plan(tmp_path / "plan.yaml", tiny_plan(num_epochs=400))
    argv = [sys.executable, "-m", "gnnplan.autotune.cli", "run", str(plan), "--nprocs", "2", "--json",
            "--trace-dir", str(tmp_path / "traces"), "--checkpoint-dir", str(tmp_path / "ckpt"), *extra]
    return subprocess.Popen(argv, cwd=ROOT, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _training(proc: subprocess.Popen[str], ckpt: Path, epoch: int) -> dict[str, int]:
    """Wait until every rank saved ``epoch`` or a later one (training is under way), then return the worker
    processes. "Or a later one": a rank keeps only the newest :data:`executor.checkpoint.KEEP` epochs and a tiny
    plan's epoch takes ~10 ms, so ``epoch`` itself can come and go between two polls (it did in CI: the wait ran
    out with training still going)."""
    wait_until(lambda: max(complete_epochs(ckpt, 2), default=-1) >= epoch or proc.poll() is not None, 240.0)
    assert proc.poll() is None, proc.communicate()[1]
    workers = workers_of(proc.pid)
    assert set(workers) == {"gnnplan-rank0", "gnnplan-rank1"}
    return workers


@pytest.mark.slow
def test_sigterm_to_the_launcher_stops_every_worker(tmp_path: Path) -> None:
    """SIGTERM to the ``gnnplan run`` process alone (Ctrl-C, a KeyboardInterrupt in the launcher, is
    tests/executor/test_checkpoint.py's interruption)."""
    proc = _start_cli(tmp_path, "--checkpoint-every", "1")
    try:
        workers = _training(proc, tmp_path / "ckpt", 0)
        os.kill(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=DEATH_LIMIT_S)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM
    assert err == ""
    assert not any(alive(pid) for pid in workers.values())  # stopped before the launcher exited
    assert not partial_files(tmp_path / "traces", tmp_path / "ckpt")
    assert not list((tmp_path / "traces").glob("*.json"))  # no trace of an unfinished run


@pytest.mark.slow
def test_killed_worker_ends_the_command_in_one_line_and_the_run_resumes(tmp_path: Path) -> None:
    proc = _start_cli(tmp_path, "--checkpoint-every", "1", "--collective-timeout", "5")
    try:
        workers = _training(proc, tmp_path / "ckpt", 1)
        os.kill(workers["gnnplan-rank1"], signal.SIGKILL)
        killed = time.monotonic()
        _, err = proc.communicate(timeout=DEATH_LIMIT_S)
    finally:
        proc.kill()
    assert time.monotonic() - killed < DEATH_LIMIT_S
    assert proc.returncode == 1
    assert err.splitlines() == ["gnnplan run: failed: rank 1 died: killed by SIGKILL"]
    wait_until(lambda: not alive(workers["gnnplan-rank0"]), 5.0)
    assert not partial_files(tmp_path / "traces", tmp_path / "ckpt")  # a save cut short is removed
    saved = complete_epochs(tmp_path / "ckpt", 2)
    assert saved and saved[-1] >= 1
    with hard_limit(120):  # the run the command started, continued in this process (the same run_plan)
        res = run_plan(load_plan(tmp_path / "plan.yaml"), nprocs=2, epochs=saved[-1] + 2, progress=False,
                       trace_dir=tmp_path / "traces", checkpoint_dir=tmp_path / "ckpt", resume=True)
    assert res["resumed_from_epoch"] == saved[-1]
    assert [r["epoch"] for r in res["epochs"]] == list(range(saved[-1] + 2))
    assert complete_epochs(tmp_path / "ckpt", 2)[-1] == saved[-1] + 1


@pytest.mark.parametrize("flags, message", [
    (["--collective-timeout", "0"], "--collective-timeout: must be a positive number of seconds, got 0.0"),
    (["--checkpoint-every", "-2"], "--checkpoint-every: must be >= 0 epochs, got -2"),
    (["--resume"], "--resume: {ckpt} holds no checkpoints (run.json missing or unreadable)"),
])
def test_run_flags_are_checked_before_any_worker_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        flags: list[str], message: str) -> None:
    plan = save_plan(tmp_path / "plan.yaml", tiny_plan())
    code = main(["run", str(plan), "--checkpoint-dir", str(tmp_path / "ckpt"), *flags])
    assert code == 2
    assert capsys.readouterr().err.splitlines() == [
        "gnnplan run: error: " + message.format(ckpt=tmp_path / "ckpt")]


def test_verdict_prefers_the_cause_over_its_echoes() -> None:
    echoes = [faults.Failure(0, "comm", "Connection reset by peer", 1.0),
              faults.Failure(2, "timeout", "Timed out waiting 3000ms for recv operation to complete", 0.5)]
    cause = faults.Failure(1, "signal", "killed by SIGKILL", 2.0)
    assert faults.verdict([*echoes, cause]) is cause
    assert faults.from_exit_code(1, -9).line() == "rank 1 died: killed by SIGKILL"
    assert faults.from_exit_code(1, 3).line() == "rank 1 died: exited with code 3"
    gloo = RuntimeError("[/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting "
                        "3000ms for recv operation to complete")
    assert faults.from_exception(0, gloo) == faults.Failure(
        0, "timeout", "Timed out waiting 3000ms for recv operation to complete")
    assert faults.from_exception(0, KeyError("x")).line() == "rank 0 raised KeyError: 'x'"
