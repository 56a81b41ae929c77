"""Run a plan on the emulated cluster (:mod:`executor.emulate`): every rank a process in its machine's namespace.

The ranks start through the torchrun entry point (:func:`executor.launch.main`), so the run is the one a real
multi-machine cluster would do, over gloo on the emulated NICs; rank 0 writes the trace and prints the
``run --json`` object, which is returned. A rank that fails ends the run: the others are killed and ONE line
names the rank that failed first and how (:func:`executor.faults.verdict` over the ranks' failure lines and
exit codes, as the local launcher does; a rank still running while a peer's collective timed out is named as
the one that stopped responding). Collective timeout and checkpoint options reach every rank's command line.

With ``progress``, rank 0 prints its per-epoch lines (:class:`executor.runner.EpochProgress`) into its log and the
caller echoes each one on its own stderr while the run goes on (:class:`LogTail`: a second handle on the log, so
reading never moves the offset rank 0 writes at), as a local run shows them.
"""

from __future__ import annotations

import functools
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from gnnplan.executor import faults, shared
from gnnplan.executor.comm import COLLECTIVE_TIMEOUT_S
from gnnplan.executor.emulate import MASTER_PORT, EmulatedCluster, MachineLimits, launch_argv, rank_environment
from gnnplan.executor.launch import FAILURE_PREFIX
from gnnplan.executor.monitor import GRACE_S, WorkerError
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.plan import Plan, save_plan

POLL_S = 0.2


def run_emulated(plan: Plan, epochs: int | None = None, trace_dir: str | Path = "traces",
                 limits: MachineLimits | None = None, timeout_s: float | None = None,
                 collective_timeout_s: float = COLLECTIVE_TIMEOUT_S, checkpoint_every: int = 0,
                 checkpoint_dir: str | Path | None = None, resume: bool = False,
                 progress: bool = False) -> dict[str, Any]:
    """Train ``plan`` on ``plan.cluster.num_machines`` emulated machines x ``gpus_per_machine`` ranks.

    Args:
        plan: what to run; its cluster's shape gives the machines and ranks, its ``network`` the NIC rate
            unless ``limits`` says otherwise.
        epochs: epochs (None = the workload's).
        trace_dir: where rank 0 writes the trace.
        limits: per-machine NIC rate, CPU quota and memory limit (default: the plan's network bandwidth).
        timeout_s: end the run with an error after this many seconds (None = no limit).
        collective_timeout_s: a collective that waits longer than this for a peer fails the run (seconds).
        checkpoint_every, checkpoint_dir, resume: checkpoints, as :func:`executor.runner.run_plan` (the folder
            default is ``<trace_dir>/checkpoints``; every rank writes its own ``rank-R`` folders in it).
        progress: echo rank 0's line per epoch on stderr as the run goes (module docstring).

    Returns:
        The ``run --json`` object of rank 0, plus ``emulated`` {num_machines, bandwidth_bytes_per_s,
        cpu_quota_cores, memory_bytes}.

    Raises:
        EmulationError: not root / no CAP_NET_ADMIN / a tool missing, or a live emulated run owns the set.
        WorkerError: a rank failed or the run timed out.
        SpecError: a bad collective timeout or checkpoint interval.
    """
    m, g = plan.cluster.num_machines, plan.cluster.gpus_per_machine
    if not (0 < collective_timeout_s < float("inf")):
        raise SpecError(f"--collective-timeout: must be a positive number of seconds, got {collective_timeout_s}")
    if checkpoint_every < 0:
        raise SpecError(f"--checkpoint-every: must be >= 0 epochs, got {checkpoint_every}")
    limits = limits or MachineLimits(plan.cluster.network.bandwidth_bytes_per_s)
    Path(trace_dir).mkdir(parents=True, exist_ok=True)
    folder = Path(checkpoint_dir) if checkpoint_dir is not None else Path(trace_dir) / "checkpoints"
    extra = ["--collective-timeout", f"{collective_timeout_s:g}", "--checkpoint-every", str(checkpoint_every),
             "--checkpoint-dir", str(folder.resolve())] + (["--resume"] if resume else [])
    started, token = time.time(), shared.new_token()
    with tempfile.TemporaryDirectory(prefix="gnnplan-emulate-") as tmp, EmulatedCluster(m, limits) as cluster:
        plan_path = save_plan(Path(tmp) / "plan.yaml", plan)
        argv = launch_argv(plan_path, epochs, Path(trace_dir).resolve()) + extra
        logs = [open(Path(tmp) / f"rank{r}.err", "w+") for r in range(m * g)]  # noqa: SIM115 (closed below)
        result_file = open(Path(tmp) / "rank0.out", "w+")  # noqa: SIM115 (closed below)
        try:
            first = [a for a in argv if a != "--no-progress"] if progress else argv
            procs = [_start(cluster, first, 0, m * g, g, result_file, logs[0], token)]
            oom = functools.partial(_out_of_memory, cluster, g)
            if not cluster.wait_listening(0, MASTER_PORT):
                if procs[0].poll() not in (None, 0):
                    _wait(procs, logs, None, oom=oom)  # raises with rank 0's error
                raise WorkerError(f"rank 0's rendezvous store did not listen on port {MASTER_PORT}")
            procs += [_start(cluster, argv, r, m * g, g, subprocess.DEVNULL, logs[r], token) for r in range(1, m * g)]
            tail = LogTail(Path(logs[0].name)) if progress else None
            _wait(procs, logs, timeout_s, collective_timeout_s, oom=oom, on_poll=tail.echo if tail else None)
            out = _last_line(result_file)
        except BaseException:
            faults.remove_partial_files(trace_dir, started)
            for partial in folder.glob("epoch-*/.rank-*.tmp"):
                shutil.rmtree(partial, ignore_errors=True)
            raise
        finally:
            shared.remove_run_objects(token)  # what a killed rank left in /dev/shm
            for log in [*logs, result_file]:
                log.close()
    try:
        result: dict[str, Any] = json.loads(out)
    except json.JSONDecodeError:
        raise WorkerError(f"rank 0 printed no result: {out}") from None
    result["emulated"] = {"num_machines": m, "bandwidth_bytes_per_s": limits.bandwidth_bytes_per_s,
                          "cpu_quota_cores": limits.cpu_quota_cores, "memory_bytes": limits.memory_bytes}
    return result


def _start(cluster: EmulatedCluster, argv: list[str], rank: int, world: int, per_machine: int, stdout: Any,
           stderr: IO[str], token: str) -> subprocess.Popen[str]:
    env = {**rank_environment(rank, world, per_machine), shared.TOKEN_ENV: token}  # the run's shared-memory names
    return subprocess.Popen(cluster.command(rank // per_machine, argv), env=env, stdout=stdout, stderr=stderr,
                            text=True)


def _out_of_memory(cluster: EmulatedCluster, per_machine: int, rank: int) -> str | None:
    """Why ``rank`` (on machine ``rank // per_machine``), dead by SIGKILL, died: when the kernel's OOM killer ended
    a process of that machine's memory group (:meth:`EmulatedCluster.oom_kills`), that; else None."""
    machine = rank // per_machine
    kills, limit = cluster.oom_kills(machine), cluster.limits.memory_bytes
    if not kills or limit is None:
        return None
    return f"out of memory: machine {machine} reached its --memory-limit of {limit / 1e6:.0f} MB"


def _wait(procs: list[subprocess.Popen[str]], logs: list[IO[str]], timeout_s: float | None,
          collective_timeout_s: float = COLLECTIVE_TIMEOUT_S,
          oom: Callable[[int], str | None] | None = None, on_poll: Callable[[], None] | None = None) -> None:
    """Return once every rank has exited 0; on the first failure wait :data:`~executor.monitor.GRACE_S` for the
    peers' reports, kill the rest and raise the verdict (module docstring); on the timeout kill all and raise.
    ``oom(rank)`` says why a rank killed by SIGKILL was, when its machine ran out of memory (else None);
    ``on_poll()`` runs at every poll and once more when every rank has exited (:meth:`LogTail.echo`)."""
    started = time.monotonic()
    failures: list[faults.Failure] = []
    exited: set[int] = set()
    first: float | None = None
    try:
        while True:
            for rank, proc in enumerate(procs):
                code = proc.poll()
                if rank in exited or code is None:
                    continue
                exited.add(rank)
                if code != 0:
                    failures.append(_rank_failure(rank, code, logs[rank], oom))
                    first = first or time.monotonic()
            done = len(exited) == len(procs)
            if on_poll is not None:
                on_poll()
            if failures and first is not None and (done or time.monotonic() - first > GRACE_S):
                raise _verdict(failures, procs, exited, collective_timeout_s)
            if done:
                return
            if timeout_s is not None and time.monotonic() - started > timeout_s:
                raise WorkerError(f"the emulated run did not finish within {timeout_s:g} s")
            time.sleep(POLL_S)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def _rank_failure(rank: int, code: int, log: IO[str],
                  oom: Callable[[int], str | None] | None = None) -> faults.Failure:
    """A rank's failure from its failure line (:func:`executor.launch.main`), else from its exit code and the
    last line it printed; a death by SIGKILL says "out of memory ..." when ``oom(rank)`` finds that cause."""
    lines = _lines(log)
    for line in reversed(lines):
        if line.startswith(FAILURE_PREFIX):
            try:
                data = json.loads(line[len(FAILURE_PREFIX):])
                return faults.Failure(rank, str(data["kind"]), str(data["detail"]), time.monotonic())
            except (ValueError, KeyError, TypeError):
                break
    failure = faults.from_exit_code(rank, code)
    if oom is not None and code == -signal.SIGKILL:
        return faults.out_of_memory(faults.Failure(rank, failure.kind, failure.detail, time.monotonic()), oom(rank))
    last = faults.one_line(lines[-1]) if lines else ""
    detail = f"{failure.detail} ({last})" if last and failure.kind == "exit" else failure.detail
    return faults.Failure(rank, failure.kind, detail, time.monotonic())


def _verdict(failures: list[faults.Failure], procs: list[subprocess.Popen[str]], exited: set[int],
             collective_timeout_s: float) -> Exception:
    failed = {f.rank for f in failures}
    if any(f.kind == "timeout" for f in failures):
        failures += [faults.unresponsive(r, p.pid) for r, p in enumerate(procs) if r not in failed | exited]
    cause = faults.verdict(failures)
    if cause.kind == "invalid":
        return SpecError(cause.detail)
    return WorkerError(cause.line(collective_timeout_s), [cause] + [f for f in failures if f is not cause])


def _lines(log: IO[str]) -> list[str]:
    log.flush()
    log.seek(0)
    return [line.strip() for line in log.read().splitlines() if line.strip()]


def _last_line(log: IO[str]) -> str:
    lines = _lines(log)
    return lines[-1] if lines else "(no output)"


class LogTail:
    """The complete lines a rank adds to its log file, read through a handle of its own (the rank's writes go
    through the descriptor it was started with; a shared offset would be moved by reading).

    Args:
        path: the log file.
        keep: which lines :meth:`echo` passes on (default: rank 0's per-epoch lines, ``epoch N  time ...``).
        out: where :meth:`echo` writes them (default: ``sys.stderr`` at the time of writing).
    """

    def __init__(self, path: Path, keep: Callable[[str], bool] | None = None, out: IO[str] | None = None) -> None:
        self.path, self.offset, self.out = path, 0, out
        self.keep = keep or (lambda line: line.startswith("epoch "))

    def new_lines(self) -> list[str]:
        """Lines completed since the last call (a line still being written waits for its newline)."""
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self.offset += end
        return [line for line in data[:end].decode(errors="replace").splitlines() if line.strip()]

    def echo(self) -> None:
        """Write the new lines :attr:`keep` passes, one per line, and flush."""
        out = self.out or sys.stderr
        lines = [line for line in self.new_lines() if self.keep(line)]
        for line in lines:
            out.write(line + "\n")
        if lines:
            out.flush()
