"""Thread pools of the executor's processes: every process computes on its share of the machine's cores.

A process that imports torch and DGL has four thread pools: torch's intra-op pool (``torch.set_num_threads``),
torch's inter-op pool (``torch.set_num_interop_threads``, settable once and only before the process's first
parallel work), DGL's OpenMP pool (``dgl.utils.set_num_threads``; DGL 1.1.3 has no ``dgl.set_num_threads``) and
the OpenMP / MKL runtimes' defaults, which a process reads from ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` when it
loads them. Left alone every process sizes each pool to all cores, so N processes on a machine run N x cores
threads; OpenMP's barriers spin and wait for every thread of a parallel region, so on a busy machine each region
waits for descheduled threads and throughput collapses.

So a worker process sets all four to :func:`worker_threads`, its share of the machine's cores
(:func:`simulator.hardware.formulas.thread_share`, the split the simulator models: cores / (workers per machine x
(1 + sampler processes per worker)), at least 1), and a sampler process to 1. Processes a worker starts inherit
its environment: :func:`child_environment` sets ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` while they start, so
they import torch and DGL with their share already in place, and :data:`WAIT_POLICY` (unless the environment
already chooses one): even without oversubscription of our own, a machine shared with other jobs deschedules
threads, and spinning ones then waste the cores the others need. (A worker forked from :mod:`executor.launch`'s
forkserver inherits the server's environment, so it exports its own count to its environment as well.)
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from gnnplan.simulator.hardware.formulas import thread_share

THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
"""Environment variables the OpenMP and MKL runtimes read for their default thread count when a process loads
them. Source: OpenMP API 4.5, section 4.2 (OMP_NUM_THREADS); Intel oneMKL developer guide, "MKL_NUM_THREADS"."""


WAIT_POLICY = ("OMP_WAIT_POLICY", "PASSIVE")
"""OpenMP threads waiting at a barrier or for work sleep instead of spinning. libgomp (the OpenMP runtime of
torch's CPU wheels, which DGL shares in one process) otherwise spins for ``GOMP_SPINCOUNT`` = 300000 iterations
before sleeping (1000 when it manages more threads than there are CPUs), so on a busy machine every parallel
region also waits for descheduled spinning threads. Read once, when the runtime loads. Measured on the 2-core
development machine (torch 2.13 CPU; other users' load average 1-2): a small Linear(256, 64) + ReLU + dropout +
Adam training step on 4000 rows took, on 2 threads, 41 ms with the default policy and 8.7 ms with PASSIVE (10 ms
on 1 thread); with two more busy single-thread processes, 171 ms and 28 ms (30 ms on 1 thread).
Source: OpenMP API 4.5, section 4.8 (OMP_WAIT_POLICY); GCC libgomp manual, "GOMP_SPINCOUNT" (the counts)."""


@dataclass(frozen=True)
class ThreadCounts:
    """A process's thread pool sizes.

    Attributes:
        intra_op: ``torch.get_num_threads()``.
        inter_op: ``torch.get_num_interop_threads()``.
        dgl: ``dgl.utils.get_num_threads()`` (DGL's OpenMP pool).
    """

    intra_op: int
    inter_op: int
    dgl: int


def cpu_count() -> int:
    """Cores this process may run on (its CPU affinity on Linux, else ``os.cpu_count()``)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def worker_threads(workers_per_machine: int, sampler_processes_per_worker: int = 0) -> int:
    """Threads of one worker process on this machine: :func:`~simulator.hardware.formulas.thread_share` of
    :func:`cpu_count` cores.

    Args:
        workers_per_machine: worker processes on this machine.
        sampler_processes_per_worker: sampler processes each worker starts.

    Raises:
        ValueError: ``workers_per_machine`` < 1 or ``sampler_processes_per_worker`` < 0.
    """
    return thread_share(cpu_count(), workers_per_machine, sampler_processes_per_worker)


def current_threads() -> ThreadCounts:
    """This process's pool sizes."""
    import dgl.utils

    return ThreadCounts(torch.get_num_threads(), torch.get_num_interop_threads(), dgl.utils.get_num_threads())


def apply_threads(num_threads: int, inter_op: bool = True) -> ThreadCounts:
    """Size this process's intra-op, inter-op and DGL thread pools to ``num_threads`` (module docstring; the
    environment of processes it starts is :func:`child_environment`'s job).

    The inter-op pool is set only if ``inter_op`` and the process has not started parallel work yet (torch
    refuses later; the pool is then left as it is: eager CPU training does not use it).

    Args:
        num_threads: threads per pool (>= 1).
        inter_op: also try to set the inter-op pool (it cannot be changed back: pass False in a process that
            outlives the work, e.g. one running a worker in-process).

    Returns:
        The pool sizes before the call (for :func:`restore_threads`).

    Raises:
        ValueError: ``num_threads`` < 1.
    """
    import dgl.utils

    if num_threads < 1:
        raise ValueError(f"apply_threads: num_threads must be >= 1, got {num_threads}")
    previous = current_threads()
    torch.set_num_threads(num_threads)
    if inter_op and previous.inter_op != num_threads:
        with contextlib.suppress(RuntimeError):  # "cannot set number of interop threads after parallel work ..."
            torch.set_num_interop_threads(num_threads)
    dgl.utils.set_num_threads(num_threads)
    return previous


def restore_threads(previous: ThreadCounts) -> None:
    """Put back the intra-op and DGL pool sizes returned by :func:`apply_threads` (the inter-op pool cannot
    be resized after use; the environment is left as it is)."""
    import dgl.utils

    torch.set_num_threads(previous.intra_op)
    dgl.utils.set_num_threads(previous.dgl)


@contextlib.contextmanager
def child_environment(num_threads: int) -> Iterator[None]:
    """Export ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` = ``num_threads`` and, unless this process's environment
    sets ``OMP_WAIT_POLICY``, :data:`WAIT_POLICY` while the body starts processes (they read them when they
    import torch and DGL), restoring this process's environment afterwards.

    Raises:
        ValueError: ``num_threads`` < 1.
    """
    if num_threads < 1:
        raise ValueError(f"child_environment: num_threads must be >= 1, got {num_threads}")
    saved = {name: os.environ.get(name) for name in (*THREAD_ENV, WAIT_POLICY[0])}
    os.environ.update({name: str(num_threads) for name in THREAD_ENV})
    os.environ.setdefault(*WAIT_POLICY)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
