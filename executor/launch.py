"""Process start-up: N local worker processes on 127.0.0.1, one in-process worker, or ``torchrun``.

Local runs start ``nprocs`` processes with ``torch.multiprocessing``, each joining a process group on 127.0.0.1 at
a free port; rank 0's return value comes back to the caller and messages the workers emit (per-epoch progress)
are handed to a callback in the caller's process while they run. The start method is ``forkserver`` where it
exists (else ``spawn``): one server process, started at the first run and living as long as the caller, imports
torch and DGL once (:data:`PRELOAD`) and forks every worker from that state, so a worker starts in milliseconds
instead of importing torch and DGL itself (~2.3 CPU-seconds each, measured on the 2-core development machine;
starting 2 workers took 4.7-8.3 s with ``spawn`` on that machine under load, 0.03 s from a running server). A
worker receives the caller's ``sys.path`` and unpickles its program after installing it, as ``spawn`` would.

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
import json
import os
import pickle
import socket
import sys
import traceback
from collections.abc import Callable
from typing import Any

import torch

from gnnplan.executor import comm
from gnnplan.executor.data import Topology
from gnnplan.executor.threads import (
    THREAD_ENV,
    apply_threads,
    child_environment,
    restore_threads,
    worker_threads,
)
from gnnplan.simulator.errors import RunError

PRELOAD = ("torch", "dgl", "gnnplan.executor.launch")
"""Modules the ``forkserver`` server imports before it forks workers (module docstring)."""

Emit = Callable[[Any], None]
WorkerFn = Callable[..., Any]
"""``fn(topo, emit, *args)``: the program every rank runs; rank 0's return value is the job's result."""


class WorkerError(RunError):
    """A worker process failed; the message holds its exception and traceback."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def local_device(local_rank: int) -> torch.device:
    """``cuda:local_rank`` when CUDA is available, else the CPU."""
    return torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")


def run_in_process(fn: WorkerFn, args: tuple[Any, ...], on_message: Emit | None = None,
                   samplers_per_worker: int = 0) -> Any:
    """Run ``fn`` as the only rank of a one-process group in this process (no spawn), on its thread share
    (the inter-op pool left as it is, since it cannot be resized back), restoring the thread counts afterwards.

    Args:
        fn: ``fn(topo, emit, *args)``.
        args: further arguments.
        on_message: called with every object ``fn`` passes to ``emit``.
        samplers_per_worker: sampler processes the worker starts (they take cores from its share).
    """
    previous = apply_threads(worker_threads(1, samplers_per_worker), inter_op=False)
    comm.init_process_group(0, 1, "127.0.0.1", free_port())
    try:
        topo = Topology(0, 1, 1, local_device(0))
        return fn(topo, on_message or (lambda _m: None), *args)
    finally:
        comm.destroy()
        restore_threads(previous)


def spawn(fn: WorkerFn, nprocs: int, args: tuple[Any, ...], on_message: Emit | None = None,
          samplers_per_worker: int = 0) -> Any:
    """Run ``fn`` on ``nprocs`` local processes (one machine each: ``gpus_per_machine`` = 1), each on its
    thread share of this machine's cores (module docstring).

    Args:
        fn: module-level function ``fn(topo, emit, *args)`` (picklable by reference).
        nprocs: worker processes.
        args: further arguments (picklable).
        on_message: called in this process with every object a worker passes to ``emit``.
        samplers_per_worker: sampler processes each worker starts (they take cores from its share).

    Returns:
        Rank 0's return value.

    Raises:
        WorkerError: a worker raised or died (the first failure's traceback is in the message).
        ValueError: a worker raised ``ValueError`` (e.g. a SpecError): re-raised here with its message.
    """
    import torch.multiprocessing as mp
    from torch.multiprocessing.spawn import ProcessException

    method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
    queue = mp.get_context(method).SimpleQueue()
    threads = worker_threads(nprocs, samplers_per_worker)
    program = pickle.dumps((fn, args))
    with child_environment(threads):  # the server's environment when this call starts it
        if method == "forkserver":
            mp.set_forkserver_preload(list(PRELOAD))
        ctx = mp.start_processes(_worker, args=(nprocs, free_port(), threads, list(sys.path), program, queue),
                                 nprocs=nprocs, join=False, start_method=method)
    box: dict[str, Any] = {}
    try:
        done = False
        while not done:
            done = ctx.join(timeout=0.05)
            _drain(queue, box, on_message)
    except ProcessException as exc:
        _drain(queue, box, on_message)
        if "value_error" in box:
            raise ValueError(box["value_error"]) from None
        raise WorkerError(box.get("error", str(exc))) from None
    return box.get("result")


def _drain(queue: Any, box: dict[str, Any], on_message: Emit | None) -> None:
    while not queue.empty():
        kind, payload = queue.get()
        if kind == "message" and on_message is not None:
            on_message(payload)
        elif kind != "message":
            box.setdefault(kind, payload)


def _worker(index: int, nprocs: int, port: int, threads: int, path: list[str], program: bytes, queue: Any) -> None:
    """Worker ``index``: its thread share and environment, the caller's ``sys.path``, then the pickled
    ``(fn, args)`` in a process group; failures go to ``queue``."""
    os.environ.setdefault("DGLBACKEND", "pytorch")
    os.environ.update({name: str(threads) for name in THREAD_ENV})  # a forkserver child has the server's
    apply_threads(threads)
    sys.path[:] = path
    try:
        fn, args = pickle.loads(program)  # trusted: pickled by spawn() in the parent, as multiprocessing does
    except BaseException:
        queue.put(("error", f"worker {index} failed:\n{traceback.format_exc()}"))
        raise
    gpu = index % max(1, torch.cuda.device_count())
    comm.init_process_group(index, nprocs, "127.0.0.1", port, local_rank=gpu)
    try:
        topo = Topology(index, nprocs, 1, local_device(gpu))
        out = fn(topo, lambda m: queue.put(("message", m)), *args)
        if index == 0:
            queue.put(("result", out))
        comm.barrier()  # no rank leaves while a peer may still be in the last collective
    except ValueError as exc:
        queue.put(("value_error", str(exc)))
        raise
    except BaseException:
        queue.put(("error", f"worker {index} failed:\n{traceback.format_exc()}"))
        raise
    finally:
        comm.destroy()
    _leave_without_teardown()


def _leave_without_teardown() -> None:
    """End a worker that finished its work, skipping the interpreter's teardown.

    Now and then a worker died with SIGABRT ("terminate called without an active exception") while the
    interpreter finalised native libraries after the work was done (LIBXSMM, loaded by DGL, printed its exit
    statistics next to it): a joinable C++ thread destroyed at exit. Nothing is left to finalise here: the
    result went through the queue (``SimpleQueue.put`` writes to the pipe before returning), traces are
    written atomically, and the process group is destroyed, so the worker flushes its streams and exits 0.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def torchrun_topology(samplers_per_worker: int = 0) -> Topology:
    """This process's place from torchrun's environment, on its thread share of the machine; joins the process
    group.

    Args:
        samplers_per_worker: sampler processes each worker starts (they take cores from its share).

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
    comm.init_process_group(rank, world, addr, port, local_rank=local_rank)
    return Topology(rank, world, per_machine, local_device(local_rank))


def main(argv: list[str] | None = None) -> int:
    """``python -m gnnplan.executor.launch PLAN [--epochs E] [--trace-dir DIR]`` under torchrun; rank 0 prints the
    ``run --json`` object on stdout and the progress on stderr."""
    from gnnplan.executor.runner import progress_printer, rank_main, resolved_plan, sampler_processes
    from gnnplan.simulator.plan import load_plan

    parser = argparse.ArgumentParser(prog="python -m gnnplan.executor.launch", description=main.__doc__)
    parser.add_argument("plan")
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--trace-dir", default="traces")
    parser.add_argument("--no-progress", action="store_true")
    ns = parser.parse_args(argv)
    loaded = load_plan(ns.plan)
    topo = torchrun_topology(sampler_processes(loaded))
    say = None
    try:
        plan = resolved_plan(loaded, topo.num_machines, topo.gpus_per_machine, ns.epochs)
        say = progress_printer(plan) if topo.rank == 0 and not ns.no_progress else None
        result = rank_main(topo, say or (lambda _m: None), plan, ns.trace_dir)
        comm.barrier()  # no rank leaves while a peer may still be in the last collective
    finally:
        if say is not None:
            say.close()
        comm.destroy()
    if topo.rank == 0:
        sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    main()
    _leave_without_teardown()  # as the local workers do (see its docstring)
