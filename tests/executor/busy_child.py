"""A process that keeps one core busy for a while, for the tests of what else ran on the machine
(tests/executor/test_run_load.py, tests/executor/test_probe_busy.py): started as a child of the test process or as
an orphan (reparented to init, another process's time), and returned only once its loop runs, so its interpreter's
start-up (0.05-0.5 s here) is not inside the window a test measures."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

BUSY = "import pathlib, time\npathlib.Path({ready!r}).touch()\nt = time.time()\nwhile time.time() - t < {s}: pass\n"
START_TIMEOUT_S = 30.0
"""Seconds a busy process may take to start before the test fails."""


def busy_child(ready: Path, seconds: float) -> subprocess.Popen[bytes]:
    """A child of this process busy for ``seconds`` once it has touched ``ready`` (returned after that)."""
    proc = subprocess.Popen([sys.executable, "-c", BUSY.format(ready=str(ready), s=seconds)])
    _wait_started(ready)
    return proc


def busy_orphan(ready: Path, seconds: float) -> None:
    """A process busy for ``seconds`` whose parent (a shell) has exited, so it is no child of this one; returns once
    it has touched ``ready``."""
    code = BUSY.format(ready=str(ready), s=seconds)
    subprocess.run(["sh", "-c", f'{sys.executable} -c "{code}" >/dev/null 2>&1 &'], check=True)
    _wait_started(ready)


def _wait_started(ready: Path) -> None:
    """Block until ``ready`` exists; fail the test after :data:`START_TIMEOUT_S`."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready.exists():
        assert time.monotonic() < deadline, "the busy process did not start"
        time.sleep(0.01)
