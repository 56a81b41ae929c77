"""Process start-up: N local worker processes on 127.0.0.1, one in-process worker, or ``torchrun``.

Local runs start ``nprocs`` processes with ``torch.multiprocessing``, each joining a process group on 127.0.0.1 at
a free port; rank 0's return value comes back to the caller and messages the workers emit (per-epoch progress)
are handed to a callback in the caller's process while they run. The start method is ``forkserver`` where it
exists (else ``spawn``): one server process, started at the first run and living as long as the caller, imports
torch and DGL once (:data:`PRELOAD`) and forks every worker from that state, so a worker starts in milliseconds
instead of importing torch and DGL itself (~2.3 CPU-seconds each, measured on the 2-core development machine;
starting 2 workers took 4.7-8.3 s with ``spawn`` on that machine under load, 0.03 s from a running server). A
worker receives the caller's ``sys.path`` and environment as they are at the call, then its program: the
function by import path and its arguments as JSON (:mod:`executor.wire`); results and messages come back the same
way, one pipe per worker, so nothing a worker sends is unpickled. (A forkserver child otherwise keeps the server's
environment, the caller's at its first run: before 2026-12-02 a ``GNNPLAN_HOME`` changed between two runs of one
process reached the second run's workers as it was at the first.)

Faults (:mod:`executor.faults`): every worker leads its own process group (it and its sampler processes) and
ends itself when the caller disappears. The caller (:class:`executor.monitor.Monitor`) watches every worker's
pipe and process; at the first failure (a reported exception, a death by signal, a non-zero exit) it waits
:data:`executor.monitor.GRACE_S` for the peers' reports, stops every worker's process group (SIGTERM, then
SIGKILL) and raises ONE :class:`WorkerError` naming the rank that failed first and how
(:func:`executor.faults.verdict`); a rank that stays silent while its peers' collectives time out
(``collective_timeout_s``) is named as the one that stopped responding. Ctrl-C (``KeyboardInterrupt``) or SIGTERM
(``SystemExit``, see :func:`executor.faults.sigterm_unwinds`) in the caller stops every worker the
same way before the exception propagates.

Real clusters use ``torchrun``, one process per GPU::

    torchrun --nnodes M --nproc-per-node G --rdzv-endpoint HOST:PORT -m gnnplan.executor.launch PLAN [--epochs E]

which reads ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``
from the environment (torchrun sets them). The device is ``cuda:LOCAL_RANK`` when CUDA is available, else the
CPU, chosen at run time, with backend NCCL or gloo accordingly.

Every worker sizes its thread pools to its share of the machine's cores before any work
(:mod:`executor.threads`): ``cores // (workers on the machine x (1 + sampler processes per worker))``, at least 1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from gnnplan.executor import comm, faults, shared, wire
from gnnplan.executor.data import Topology
from gnnplan.executor.monitor import Monitor, WorkerError
from gnnplan.executor.threads import (
    THREAD_ENV,
    apply_threads,
    child_environment,
    restore_threads,
    worker_threads,
)
from gnnplan.simulator.errors import SpecError

PRELOAD = ("torch", "torch._dynamo", "dgl", "gnnplan.executor.launch")
"""Modules the ``forkserver`` server imports before it forks workers (module docstring). ``torch._dynamo`` is
imported by the first ``torch.optim`` optimizer a worker builds (torch 2.13): ~1.7 CPU-seconds per worker on the
2-core development machine when the server has not imported it (a dp trainer's first build and epoch on Cora: 2.3 s
against 0.6 s, measured 2026-11-30)."""

FAILURE_PREFIX = "gnnplan-failure "
"""Start of the one stderr line a torchrun rank prints when it fails: then the failure as JSON."""

__all__ = ["FAILURE_PREFIX", "WorkerError", "free_port", "main", "run_in_process", "spawn", "torchrun_topology"]

Emit = Callable[[Any], None]
WorkerFn = Callable[..., Any]
"""``fn(topo, emit, *args)``: the program every rank runs; rank 0's return value is the job's result."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def local_device(local_rank: int) -> torch.device:
    """``cuda:local_rank`` when CUDA is available, else the CPU."""
    return torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")


def run_in_process(fn: WorkerFn, args: tuple[Any, ...], on_message: Emit | None = None,
                   samplers_per_worker: int = 0, collective_timeout_s: float = comm.COLLECTIVE_TIMEOUT_S) -> Any:
    """Run ``fn`` as the only rank of a one-process group in this process (no spawn), on its thread share
    (the inter-op pool left as it is, since it cannot be resized back), restoring the thread counts afterwards.

    Args:
        fn: ``fn(topo, emit, *args)``.
        args: further arguments.
        on_message: called with every object ``fn`` passes to ``emit``.
        samplers_per_worker: sampler processes the worker starts (they take cores from its share).
        collective_timeout_s: collective timeout in seconds.

    Raises:
        ValueError: ``fn`` raised it (bad input).
        WorkerError: ``fn`` raised anything else (one line: ``rank 0 raised <type>: <message>``; the original
            exception is chained).
    """
    previous = apply_threads(worker_threads(1, samplers_per_worker), inter_op=False)
    comm.init_process_group(0, 1, "127.0.0.1", free_port(), timeout_s=collective_timeout_s)
    try:
        topo = Topology(0, 1, 1, local_device(0))
        return fn(topo, on_message or (lambda _m: None), *args)
    except ValueError:
        raise
    except Exception as exc:
        failure = faults.from_exception(0, exc)
        raise WorkerError(failure.line(collective_timeout_s), [failure]) from exc
    finally:
        comm.destroy()
        restore_threads(previous)


def spawn(fn: WorkerFn, nprocs: int, args: tuple[Any, ...], on_message: Emit | None = None,
          samplers_per_worker: int = 0, collective_timeout_s: float = comm.COLLECTIVE_TIMEOUT_S,
          gpus_per_machine: int = 1) -> Any:
    """Run ``fn`` on ``nprocs`` local processes (``nprocs / gpus_per_machine`` machines of ``gpus_per_machine``
    workers; by default one machine each), each on its thread share of this machine's cores (module docstring).

    Args:
        fn: module-level function ``fn(topo, emit, *args)`` (sent by import path).
        nprocs: worker processes.
        args: further arguments (values :func:`executor.wire.encode` accepts).
        on_message: called in this process with every object a worker passes to ``emit``.
        samplers_per_worker: sampler processes each worker starts (they take cores from its share).
        collective_timeout_s: a collective that waits longer than this for a peer fails (seconds).
        gpus_per_machine: workers per machine (must divide ``nprocs``): the topology each worker is given.

    Returns:
        Rank 0's return value.

    Raises:
        WorkerError: a worker raised, died or stopped responding (module docstring); every worker is stopped.
        ValueError: a worker raised ``ValueError`` (e.g. a SpecError): re-raised here with its message.
        SpecError: called from the unguarded top level of a script (:func:`_check_guarded_main`), or while a worker
            imports it; no worker is started.
    """
    import torch.multiprocessing as mp

    if getattr(mp.current_process(), "_inheriting", False):  # what multiprocessing's own check reads
        raise SpecError("gnnplan run: a worker process is importing the script that started it, which called run "
                        "again at import; put the script's calls under `if __name__ == \"__main__\":`")
    _check_guarded_main()
    method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
    ctx: Any = mp.get_context(method)
    token = shared.new_token()  # names the machines' shared objects; removed when the workers have ended
    threads = worker_threads(nprocs, samplers_per_worker)
    program = wire.encode({"fn": f"{fn.__module__}:{fn.__qualname__}", "args": tuple(args)})
    pipes = [ctx.Pipe(duplex=False) for _ in range(nprocs)]
    port = free_port()
    procs: list[Any] = []
    monitor = Monitor(procs, [r for r, _ in pipes], on_message, collective_timeout_s)
    try:
        with child_environment(threads):  # the server's environment when this call starts it
            if method == "forkserver":
                ctx.set_forkserver_preload(list(PRELOAD))
            environ = dict(os.environ)
            for index, (_, writer) in enumerate(pipes):
                proc = ctx.Process(target=_worker, name=f"gnnplan-rank{index}", args=(
                    index, nprocs, port, threads, list(sys.path), environ, program, writer, os.getpid(),
                    collective_timeout_s, gpus_per_machine, token))
                proc.start()
                procs.append(proc)  # once started: stopping a process never started fails and hides why
                writer.close()
        return monitor.run()
    finally:
        monitor.stop()
        shared.remove_run_objects(token)


def _check_guarded_main() -> None:
    """Refuse a call from the top level of a script file outside ``if __name__ == "__main__":``: the forkserver
    and spawn start methods import the caller's ``__main__`` in every worker, which would run the script's
    unguarded statements again there (a second study, a second plan file) and fail when it reached this call.

    Raises:
        SpecError: the call stack's top-level frame of ``__main__`` (loaded from a file) is at a line outside
            every top-level ``if __name__ == "__main__":`` block of that file.
    """
    import ast
    import inspect

    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if not path:  # an interactive session or python -c: nothing is re-imported
        return
    frame = inspect.currentframe()
    while frame is not None and not (frame.f_code.co_name == "<module>"
                                     and frame.f_globals.get("__name__") == "__main__"):
        frame = frame.f_back
    if frame is None:
        return
    try:
        tree = ast.parse(Path(path).read_text(), path)
    except (OSError, SyntaxError, ValueError):
        return  # the source cannot be read: leave it to multiprocessing's own message
    guarded = [(node.lineno, node.end_lineno or node.lineno) for node in tree.body if isinstance(node, ast.If)
               and "__name__" in ast.unparse(node.test) and "__main__" in ast.unparse(node.test)]
    if not any(lo <= frame.f_lineno <= hi for lo, hi in guarded):
        raise SpecError(f"gnnplan run: called at the top level of {path} (line {frame.f_lineno}), which every worker "
                        "process imports and would run again; put the script's calls under "
                        "`if __name__ == \"__main__\":`")


def _worker(index: int, nprocs: int, port: int, threads: int, path: list[str], environ: dict[str, str],
            program: bytes, conn: Any, parent: int, timeout_s: float, gpus_per_machine: int, token: str) -> None:
    """Worker ``index``: its own process group and name, the caller's environment ``environ`` with its thread share
    and the run's shared-memory ``token`` (:data:`executor.shared.TOKEN_ENV`), the caller's ``sys.path``, then the
    program in a process group; its result and failure go to ``conn``."""
    os.setpgrp()
    faults.name_process(f"gnnplan-rank{index}")
    faults.watch_parent(parent)
    os.environ.clear()  # a forkserver child starts with the server's environment (module docstring)
    os.environ.update(environ)
    os.environ.setdefault("DGLBACKEND", "pytorch")
    os.environ.update({name: str(threads) for name in THREAD_ENV})
    os.environ[shared.TOKEN_ENV] = token
    apply_threads(threads)
    sys.path[:] = path

    def send(kind: str, payload: Any) -> None:
        conn.send_bytes(wire.encode((kind, payload)))

    try:
        fn, args = _program(program)
        gpu = index % max(1, torch.cuda.device_count())
        comm.init_process_group(index, nprocs, "127.0.0.1", port, local_rank=gpu, timeout_s=timeout_s,
                                gpus_per_machine=gpus_per_machine)
        topo = Topology(index, nprocs, gpus_per_machine, local_device(gpu))
        out = fn(topo, lambda m: send("message", m), *args)
        if index == 0:
            send("result", out)
        comm.barrier()  # no rank leaves while a peer may still be in the last collective
    except BaseException as exc:  # reported, then the process ends: the caller decides and prints
        failure = faults.from_exception(index, exc)
        with contextlib.suppress(OSError, ValueError):
            send("failure", {"kind": failure.kind, "detail": failure.detail})
        _leave_without_teardown(1)
    comm.destroy()
    _leave_without_teardown(0)


def _program(program: bytes) -> tuple[WorkerFn, tuple[Any, ...]]:
    """The function (imported by its path, after ``sys.path`` is the caller's) and arguments of a program."""
    import importlib

    spec = wire.decode(program)
    module, _, qualname = spec["fn"].partition(":")
    fn: Any = importlib.import_module(module)
    for part in qualname.split("."):
        fn = getattr(fn, part)
    return fn, tuple(spec["args"])


def _leave_without_teardown(code: int = 0) -> None:
    """End a worker that finished its work, skipping the interpreter's teardown.

    Now and then a worker died with SIGABRT ("terminate called without an active exception") while the
    interpreter finalised native libraries after the work was done (LIBXSMM, loaded by DGL, printed its exit
    statistics next to it): a joinable C++ thread destroyed at exit. Nothing is left to finalise here: the
    result went through the pipe (``send_bytes`` writes before returning), traces are written atomically,
    and the process group is destroyed, so the worker flushes its streams and exits with ``code``.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def torchrun_topology(samplers_per_worker: int = 0,
                      collective_timeout_s: float = comm.COLLECTIVE_TIMEOUT_S) -> Topology:
    """This process's place from torchrun's environment, on its thread share of the machine; joins the process
    group.

    Args:
        samplers_per_worker: sampler processes each worker starts (they take cores from its share).
        collective_timeout_s: collective timeout in seconds.

    Raises:
        ValueError: a variable is missing or ``WORLD_SIZE`` is not a multiple of ``LOCAL_WORLD_SIZE``.
    """
    try:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        per_machine = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    except (KeyError, ValueError) as exc:
        raise ValueError(f"torchrun environment: missing or bad variable {exc} (RANK, WORLD_SIZE, LOCAL_RANK, "
                         "LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT)") from None
    if world % per_machine:
        raise ValueError(f"LOCAL_WORLD_SIZE: {per_machine} does not divide WORLD_SIZE {world}")
    apply_threads(worker_threads(per_machine, samplers_per_worker))
    comm.init_process_group(rank, world, addr, port, local_rank=local_rank, timeout_s=collective_timeout_s,
                            gpus_per_machine=per_machine)
    return Topology(rank, world, per_machine, local_device(local_rank))


def main(argv: list[str] | None = None) -> int:
    """``python -m gnnplan.executor.launch PLAN [--epochs E] [--trace-dir DIR] [--collective-timeout S]
    [--checkpoint-every N] [--checkpoint-dir DIR] [--resume]`` under torchrun; rank 0 prints the ``run --json``
    object on stdout and the progress on stderr. A rank that fails prints ONE line on stderr,
    :data:`FAILURE_PREFIX` and the failure as JSON ``{rank, kind, detail}``, and exits 2 for bad input, else 1."""
    parser = argparse.ArgumentParser(prog="python -m gnnplan.executor.launch", description=main.__doc__)
    parser.add_argument("plan")
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--trace-dir", default="traces")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--collective-timeout", type=float, default=comm.COLLECTIVE_TIMEOUT_S)
    parser.add_argument("--checkpoint-every", type=int, default=0)
    parser.add_argument("--checkpoint-dir", default=None)
    parser.add_argument("--resume", action="store_true")
    ns = parser.parse_args(argv)
    try:
        return _torchrun_rank(ns)
    except BaseException as exc:  # one line, as the local launcher reports it
        failure = faults.from_exception(int(os.environ.get("RANK", "0") or 0), exc)
        sys.stderr.write(FAILURE_PREFIX + json.dumps({"rank": failure.rank, "kind": failure.kind,
                                                      "detail": failure.detail}) + "\n")
        return 2 if failure.kind == "invalid" else 1


def _torchrun_rank(ns: argparse.Namespace) -> int:
    """One torchrun rank of :func:`main`."""
    from gnnplan.executor.checkpoint import Checkpointing, prepare
    from gnnplan.executor.runner import progress_printer, rank_main, resolved_plan, sampler_processes
    from gnnplan.simulator.plan import load_plan

    loaded = load_plan(ns.plan)
    topo = torchrun_topology(sampler_processes(loaded), ns.collective_timeout)
    say = None
    try:
        plan = resolved_plan(loaded, topo.num_machines, topo.gpus_per_machine, ns.epochs)
        saving = Checkpointing(ns.checkpoint_dir or os.path.join(ns.trace_dir, "checkpoints"), ns.checkpoint_every,
                               ns.resume)
        if topo.rank == 0:
            saving = prepare(saving, plan)
        saving = Checkpointing(saving.directory, comm.broadcast_object(saving.every), saving.resume)
        say = progress_printer(plan) if topo.rank == 0 and not ns.no_progress else None
        result = rank_main(topo, say or (lambda _m: None), plan, ns.trace_dir, saving)
        comm.barrier()  # no rank leaves while a peer may still be in the last collective
    finally:
        if say is not None:
            say.close()
    comm.destroy()
    if topo.rank == 0:
        sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    _leave_without_teardown(main())  # as the local workers do (see its docstring)
