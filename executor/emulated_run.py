"""Run a plan on the emulated cluster (:mod:`executor.emulate`): every rank a process in its machine's namespace.

The ranks start through the torchrun entry point (:func:`executor.launch.main`), so the run is the one a real
multi-machine cluster would do, over gloo on the emulated NICs; rank 0 writes the trace and prints the
``run --json`` object, which is returned. A rank that fails ends the run: the others are killed and the error
names the rank and the last line it printed on stderr.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from gnnplan.executor.emulate import MASTER_PORT, EmulatedCluster, MachineLimits, launch_argv, rank_environment
from gnnplan.executor.launch import WorkerError
from gnnplan.simulator.plan import Plan, save_plan

POLL_S = 0.2


def run_emulated(plan: Plan, epochs: int | None = None, trace_dir: str | Path = "traces",
                 limits: MachineLimits | None = None, timeout_s: float | None = None) -> dict[str, Any]:
    """Train ``plan`` on ``plan.cluster.num_machines`` emulated machines x ``gpus_per_machine`` ranks.

    Args:
        plan: what to run; its cluster's shape gives the machines and ranks, its ``network`` the NIC rate
            unless ``limits`` says otherwise.
        epochs: epochs (None = the workload's).
        trace_dir: where rank 0 writes the trace.
        limits: per-machine NIC rate, CPU quota and memory limit (default: the plan's network bandwidth).
        timeout_s: end the run with an error after this many seconds (None = no limit).

    Returns:
        The ``run --json`` object of rank 0, plus ``emulated`` {num_machines, bandwidth_bytes_per_s,
        cpu_quota_cores, memory_bytes}.

    Raises:
        EmulationError: not root / no CAP_NET_ADMIN / a tool missing, or a live emulated run owns the set.
        WorkerError: a rank failed or the run timed out.
    """
    m, g = plan.cluster.num_machines, plan.cluster.gpus_per_machine
    limits = limits or MachineLimits(plan.cluster.network.bandwidth_bytes_per_s)
    Path(trace_dir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gnnplan-emulate-") as tmp, EmulatedCluster(m, limits) as cluster:
        plan_path = save_plan(Path(tmp) / "plan.yaml", plan)
        argv = launch_argv(plan_path, epochs, Path(trace_dir).resolve())
        logs = [open(Path(tmp) / f"rank{r}.err", "w+") for r in range(m * g)]  # noqa: SIM115 (closed below)
        result_file = open(Path(tmp) / "rank0.out", "w+")  # noqa: SIM115 (closed below)
        try:
            procs = [_start(cluster, argv, 0, m * g, g, result_file, logs[0])]
            if not cluster.wait_listening(0, MASTER_PORT):
                if procs[0].poll() not in (None, 0):
                    _wait(procs, logs, None)  # raises with rank 0's error
                raise WorkerError(f"rank 0's rendezvous store did not listen on port {MASTER_PORT}")
            procs += [_start(cluster, argv, r, m * g, g, subprocess.DEVNULL, logs[r]) for r in range(1, m * g)]
            _wait(procs, logs, timeout_s)
            out = _last_line(result_file)
        finally:
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
           stderr: IO[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(cluster.command(rank // per_machine, argv), env=rank_environment(rank, world, per_machine),
                            stdout=stdout, stderr=stderr, text=True)


def _wait(procs: list[subprocess.Popen[str]], logs: list[IO[str]], timeout_s: float | None) -> None:
    """Return once every rank has exited 0; on the first failure (or the timeout) kill the rest and raise."""
    started = time.monotonic()
    try:
        while True:
            codes = [p.poll() for p in procs]
            failed = [r for r, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                raise WorkerError(f"rank {failed[0]} exited with code {codes[failed[0]]}: "
                                  f"{_last_line(logs[failed[0]])}")
            if all(c == 0 for c in codes):
                return
            if timeout_s is not None and time.monotonic() - started > timeout_s:
                raise WorkerError(f"the emulated run did not finish within {timeout_s:g} s")
            time.sleep(POLL_S)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def _last_line(log: IO[str]) -> str:
    log.flush()
    log.seek(0)
    lines = [line.strip() for line in log.read().splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"
