"""What went wrong in a run, in one line: which rank failed first and how, from the workers' reports and exit codes.

A failing run usually fails on several ranks at once: one rank raises or is killed, and its peers then fail in
their next collective (gloo: "Connection reset by peer" at once, or "Timed out waiting ... ms" after the collective
timeout when the rank hangs). :func:`verdict` names the cause, not the echoes, by this order of kinds:

1. ``invalid``: a rank raised ``ValueError`` (bad input; the CLI exits 2);
2. ``raised``: a rank raised anything else that is not a communication error;
3. ``signal`` / ``exit``: a rank died from a signal (negative exit code) or exited non-zero without a report;
4. ``unresponsive``: a rank that is still alive and silent while a peer's collective timed out;
5. ``timeout`` / ``comm``: a rank whose collective timed out or lost its peer.

Ties go to the failure seen first. A communication error is a ``torch.distributed.DistError`` or a
``RuntimeError`` raised by gloo (its messages name a gloo source file or the socket error).
Gloo applies the process group's timeout to every collective (ProcessGroupGloo work-level timeouts,
pytorch/pytorch#40948); it raises ``RuntimeError("[...unbound_buffer.cc:..] Timed out waiting N ms for recv
operation to complete")``, which is what :data:`TIMEOUT_MARKERS` recognise.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ORDER = ("invalid", "raised", "signal", "exit", "unresponsive", "timeout", "comm")
"""Kinds of failure, the most likely cause first (module docstring)."""

COMM_MARKERS = ("gloo/", "Connection reset by peer", "Connection closed by peer", "Broken pipe", "NCCL error",
                "Socket Timeout", "Connection refused")
TIMEOUT_MARKERS = ("Timed out waiting", "timed out", "Timeout")
MAX_DETAIL = 240
"""Characters of an exception's message kept in the one-line verdict."""

WATCH_INTERVAL_S = 1.0
"""How often a worker checks that the process that started it is alive."""


@dataclass(frozen=True)
class Failure:
    """One rank's failure.

    Attributes:
        rank: the rank.
        kind: one of :data:`ORDER`.
        detail: exception type and message, signal name, or exit code (one line).
        seen_s: ``time.monotonic()`` when the launcher learnt of it.
    """

    rank: int
    kind: str
    detail: str
    seen_s: float = 0.0

    def line(self, timeout_s: float | None = None) -> str:
        """The failure as one line for the user."""
        r = f"rank {self.rank}"
        if self.kind in ("invalid", "raised"):
            return f"{r} raised {self.detail}"
        if self.kind in ("signal", "exit"):
            return f"{r} died: {self.detail}"
        limit = f"the {timeout_s:g} s collective timeout" if timeout_s else "the collective timeout"
        if self.kind == "unresponsive":
            return f"{r} stopped responding: {self.detail}; its peers waited {limit} for it"
        if self.kind == "timeout":
            return f"{r} timed out in a collective after {limit}: {self.detail}"
        return f"{r} lost a peer: {self.detail}"


def one_line(text: str) -> str:
    """The first non-empty line of ``text`` without gloo's ``[file.cc:N]`` prefix, at most :data:`MAX_DETAIL`."""
    line = next((s.strip() for s in str(text).splitlines() if s.strip()), "")
    if line.startswith("[") and "] " in line:
        line = line.split("] ", 1)[1]
    return line if len(line) <= MAX_DETAIL else line[: MAX_DETAIL - 3] + "..."


def is_comm_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a peer's failure seen from this rank (module docstring)."""
    with contextlib.suppress(ImportError, AttributeError):  # a torch without DistError: the markers decide
        import torch.distributed as dist

        if isinstance(exc, dist.DistError):
            return True
    return isinstance(exc, RuntimeError) and any(m in str(exc) for m in COMM_MARKERS)


def from_exception(rank: int, exc: BaseException) -> Failure:
    """The failure of a rank that raised ``exc``."""
    message = one_line(str(exc))
    if isinstance(exc, ValueError):
        return Failure(rank, "invalid", message or type(exc).__name__)
    if is_comm_error(exc):
        kind = "timeout" if any(m in str(exc) for m in TIMEOUT_MARKERS) else "comm"
        return Failure(rank, kind, message)
    return Failure(rank, "raised", f"{type(exc).__name__}: {message}" if message else type(exc).__name__)


def from_exit_code(rank: int, code: int) -> Failure:
    """The failure of a rank whose process ended with ``code`` (negative: killed by signal ``-code``)."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return Failure(rank, "signal", f"killed by {name}")
    if code > 128 and code - 128 in {s.value for s in signal.Signals}:  # a shell's report of a signal death
        return Failure(rank, "signal", f"killed by {signal.Signals(code - 128).name}")
    return Failure(rank, "exit", f"exited with code {code}")


VMSTAT = Path("/proc/vmstat")


def kernel_counter(path: Path, name: str) -> int | None:
    """The value of counter ``name`` in a kernel file of ``name value`` lines (/proc/vmstat, a memory cgroup's
    ``memory.oom_control``), None where the file or the counter is missing."""
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    except (OSError, ValueError):
        return None
    return None


def oom_kill_count() -> int | None:
    """Processes the kernel's OOM killer has ended since boot on this machine (``oom_kill`` of /proc/vmstat,
    Linux 4.13 and later; memory-cgroup kills included), None where it is not available."""
    return kernel_counter(VMSTAT, "oom_kill")


def out_of_memory(failure: Failure, cause: str | None) -> Failure:
    """``failure`` with ``cause`` (why the memory ran out) added to its detail when it is a death by SIGKILL and a
    cause was found; else ``failure`` itself. The one form of an out-of-memory verdict, local or emulated."""
    if not cause or failure.detail != "killed by SIGKILL":
        return failure
    return Failure(failure.rank, failure.kind, f"{failure.detail} ({cause})", failure.seen_s)


def killed_by_oom(failure: Failure, kills_before: int | None) -> Failure:
    """``failure`` with "out of memory" said (:func:`out_of_memory`), when it is a death by SIGKILL and the kernel's
    OOM killer has ended a process since ``kills_before`` (:func:`oom_kill_count` when the run started)."""
    now = oom_kill_count()
    moved = kills_before is not None and now is not None and now > kills_before
    return out_of_memory(failure, "the kernel's OOM killer ended a process during the run: out of memory" if moved
                         else None)


def process_state(pid: int) -> str:
    """The state letter of ``pid`` in ``/proc/<pid>/stat`` (``T`` = stopped), or ``?``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "?"


def unresponsive(rank: int, pid: int | None) -> Failure:
    """A rank that is alive but silent while its peers' collectives timed out."""
    state = process_state(pid) if pid else "?"
    why = "its process is stopped (SIGSTOP/SIGTSTP)" if state in ("T", "t") else \
        "its process is alive but did not reach the collective"
    return Failure(rank, "unresponsive", why, time.monotonic())


def verdict(failures: list[Failure]) -> Failure:
    """The failure that most likely caused the others (module docstring).

    Raises:
        ValueError: ``failures`` is empty.
    """
    if not failures:
        raise ValueError("verdict: no failures")
    return min(failures, key=lambda f: (ORDER.index(f.kind), f.seen_s, f.rank))


@contextlib.contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """Within the block, SIGTERM raises ``SystemExit(143)`` in the main thread (like Ctrl-C raises
    ``KeyboardInterrupt``), so clean-up code runs and worker processes are stopped; a no-op off the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def watch_parent(pid: int, interval_s: float = WATCH_INTERVAL_S) -> threading.Thread:
    """Start a daemon thread that ends this process (SIGKILL to its own process group: it and its sampler
    processes) once process ``pid`` is gone, so workers never outlive a launcher that was killed outright."""

    def watch() -> None:
        while True:
            time.sleep(interval_s)
            try:
                os.kill(pid, 0)
            except PermissionError:  # alive, but another user's process now has the pid: keep watching
                continue
            except ProcessLookupError:
                with contextlib.suppress(OSError):
                    os.killpg(os.getpgrp(), signal.SIGKILL)
                os._exit(1)

    thread = threading.Thread(target=watch, name="gnnplan-parent-watch", daemon=True)
    thread.start()
    return thread


def name_process(name: str) -> None:
    """Set this process's name as ``ps``/``top`` show it (``/proc/self/comm``, at most 15 bytes); best effort."""
    with contextlib.suppress(OSError):
        Path("/proc/self/comm").write_text(name[:15])


def stop_process_groups(procs: list[Any], grace_s: float = 2.0) -> None:
    """Stop every process group led by one of ``procs`` (``multiprocessing.Process``-like: ``pid``,
    ``is_alive()``; each worker leads its own group: it and its sampler processes): SIGTERM and SIGCONT (a
    stopped process acts on SIGTERM only once continued), then SIGKILL after ``grace_s`` to groups that still
    have members."""
    pids = [p.pid for p in procs if p.pid]
    for sig in (signal.SIGTERM, signal.SIGCONT):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, sig)
    deadline = time.monotonic() + grace_s
    alive = [p for p in procs if p.pid]
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if p.is_alive() or _group_alive(p.pid)]  # is_alive() reaps the leader first
        if alive:
            time.sleep(0.05)
    for p in alive:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def remove_partial_files(folder: str | Path, since_s: float) -> list[Path]:
    """Delete the temporary files of atomic writes (``.<name>.<random>`` next to ``<name>``, see
    :func:`simulator.io.atomic_write`) that a killed process left in ``folder`` since ``since_s`` (epoch
    seconds); returns them."""
    root = Path(folder)
    gone: list[Path] = []
    if not root.is_dir():
        return gone
    for path in root.glob(".*.*"):
        with contextlib.suppress(OSError):
            if path.is_file() and path.stat().st_mtime >= since_s - 1.0:
                path.unlink()
                gone.append(path)
    return gone
