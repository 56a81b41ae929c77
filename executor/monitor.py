"""The launcher's watch over its local worker processes (:func:`executor.launch.spawn`).

Every worker writes JSON messages (:mod:`executor.wire`) to its own pipe: ``("message", m)`` (progress),
``("result", r)`` (rank 0) and ``("failure", {kind, detail})`` before it exits on an exception. The monitor reads
them while watching the processes' sentinels; at the first failure (a report, a death by signal, a non-zero
exit; a death by SIGKILL while the kernel's OOM killer ran says "out of memory", :func:`executor.faults.killed_by_oom`)
it keeps listening :data:`GRACE_S` for the peers' reports, then raises ONE error for the rank that failed
first (:func:`executor.faults.verdict`; a rank alive and silent while a peer's collective timed out is the one
that stopped responding). :meth:`Monitor.stop` ends whatever still runs.
"""

from __future__ import annotations

import multiprocessing.connection as mpc
import time
from typing import Any

from gnnplan.executor import faults, wire
from gnnplan.simulator.errors import RunError

GRACE_S = 1.5
"""Seconds the caller keeps listening after a worker's first failure, for its peers' reports, before it decides
which rank failed first and stops the rest."""

POLL_S = 0.1
"""Longest the caller waits between checks of its workers."""


class WorkerError(RunError):
    """A worker process failed: the message names the rank that failed first and how, on one line.

    Attributes:
        failures: every failure seen (:class:`executor.faults.Failure`), the cause first.
    """

    def __init__(self, message: str, failures: list[faults.Failure] | None = None) -> None:
        super().__init__(message)
        self.failures = failures or []


class Monitor:
    """The caller's side of a spawned run: reads every worker's pipe, watches the processes, decides.

    Args:
        procs: the worker processes in rank order (``multiprocessing.Process``; may be filled after construction).
        readers: the read ends of the workers' pipes, in rank order.
        on_message: called with every message a worker emits.
        timeout_s: the run's collective timeout (for the verdict's wording).
    """

    def __init__(self, procs: list[Any], readers: list[Any], on_message: Any, timeout_s: float) -> None:
        self.procs, self.readers, self.on_message, self.timeout_s = procs, readers, on_message, timeout_s
        self.open = dict(enumerate(readers))
        self.exited: set[int] = set()
        self.failures: list[faults.Failure] = []
        self.result: Any = None
        self.first_failure_s: float | None = None
        self.oom_kills_at_start = faults.oom_kill_count()

    def run(self) -> Any:
        """Until every worker exited 0 (rank 0's result) or a failure was decided (raises)."""
        while True:
            self._poll()
            done = len(self.exited) == len(self.procs)
            if self.failures and (done or time.monotonic() - (self.first_failure_s or 0.0) > GRACE_S):
                raise self._error()
            if done:
                return self.result

    def _poll(self) -> None:
        waiting = list(self.open.values()) + [p.sentinel for r, p in enumerate(self.procs) if r not in self.exited]
        ready = set(mpc.wait(waiting, timeout=POLL_S)) if waiting else set()
        for rank, conn in list(self.open.items()):
            if conn in ready:
                self._read(rank, conn)
        for rank, proc in enumerate(self.procs):
            if rank not in self.exited and proc.exitcode is not None:
                self._drain(rank)
                self.exited.add(rank)
                if proc.exitcode != 0 and all(f.rank != rank for f in self.failures):
                    self._fail(faults.killed_by_oom(faults.from_exit_code(rank, proc.exitcode),
                                                    self.oom_kills_at_start))

    def _read(self, rank: int, conn: Any) -> None:
        try:
            kind, payload = wire.decode(conn.recv_bytes())
        except (EOFError, OSError):
            self.open.pop(rank, None)
            conn.close()
            return
        if kind == "message" and self.on_message is not None:
            self.on_message(payload)
        elif kind == "result":
            self.result = payload
        elif kind == "failure":
            self._fail(faults.Failure(rank, payload["kind"], payload["detail"], time.monotonic()))

    def _drain(self, rank: int) -> None:
        """Read what an exited worker left in its pipe (its sampler processes may hold the pipe open)."""
        conn = self.open.get(rank)
        while conn is not None and rank in self.open and conn.poll(0):
            self._read(rank, conn)
        if rank in self.open:
            self.open.pop(rank).close()

    def _fail(self, failure: faults.Failure) -> None:
        if not failure.seen_s:
            failure = faults.Failure(failure.rank, failure.kind, failure.detail, time.monotonic())
        self.failures.append(failure)
        if self.first_failure_s is None:
            self.first_failure_s = failure.seen_s

    def _error(self) -> Exception:
        failed = {f.rank for f in self.failures}
        if any(f.kind == "timeout" for f in self.failures):
            for rank, proc in enumerate(self.procs):
                if rank not in failed and rank not in self.exited:
                    self.failures.append(faults.unresponsive(rank, proc.pid))
        cause = faults.verdict(self.failures)
        ordered = [cause] + [f for f in self.failures if f is not cause]
        if cause.kind == "invalid":
            return ValueError(cause.detail)
        return WorkerError(cause.line(self.timeout_s), ordered)

    def stop(self) -> None:
        """Stop every worker still running (and its sampler processes), reap them, close the pipes."""
        running = [p for p in self.procs if p.exitcode is None]
        if running:
            faults.stop_process_groups(running)
        for proc in self.procs:
            proc.join(timeout=5.0)
        for conn in self.open.values():
            conn.close()
        self.open.clear()
