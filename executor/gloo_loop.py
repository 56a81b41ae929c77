"""gloo's TCP event-loop thread gets the CPU only when nothing else of the machine wants it.

gloo (the CPU backend of ``torch.distributed``) runs one event-loop thread per process, ``gloo_tcp_loop``
(gloo/transport/tcp/loop.cc: ``epoll_wait`` on the pair sockets, running their read/write handlers), beside the
process group's worker thread that runs the collective's algorithm (``pt_gloo_runloop``) and the caller, which
waits. In the torch 2.13 CPU build the loop thread spins while a collective is in flight, and only then:

* ``perf record`` sampled it inside ``epoll_wait`` calls that return at once (``ep_send_events``, ``tcp_poll``);
* ``perf sched`` counted 2137 ms of running time for the two processes' loop threads in 2 s of back-to-back
  1 KiB all-reduces (about half a core each), while the worker threads waited 0.87 ms on average (at most
  7.6 ms) to be scheduled;
* idle for 2 s between collectives, the loop threads ran 0 ticks (2026-11-28, this machine).

When the process has no core to spare, the collective's worker waits for the spinning loop's time slice to end,
so a call that moves its bytes in 0.1-0.3 ms takes 3-5 ms in a third to a half of the calls.

:func:`idle_gloo_loop` puts the loop thread in ``SCHED_IDLE`` (sched(7): the lowest priority; the fair scheduler
weighs it 3 against a default thread's 1024, and a waking default thread preempts it at once; a process may lower
its own threads without privilege), and
:func:`executor.comm.init_process_group` calls it for the gloo backend. ``benchmarks/bench_gloo_loop.py``
measures both policies in one run: two processes with every thread pinned to a core of its own, each all-reduce
after 2 ms of compute, 300 calls each (2026-11-28, this machine):

===================  ====================================  ====================================
bytes per rank       loop thread as created                loop thread in SCHED_IDLE
===================  ====================================  ====================================
1 KiB                mean 1.56 ms, p90 3.90, 38% > 2 ms    mean 0.28 ms, p90 0.36, none > 2 ms
0.74 MB (Cora SAGE)  mean 1.66 ms, p90 3.81, 42% > 2 ms    mean 0.36 ms, p90 0.43, none > 2 ms
===================  ====================================  ====================================

With only each caller thread pinned (gloo's threads free to use both cores) the means were 1.16 and 1.19 ms
against 0.44 and 0.65 ms, with 11-13% of the calls still over 2 ms; ``nice 19`` instead of ``SCHED_IDLE`` left
5-9% of the calls over 2 ms (whole processes pinned). What it
costs: while every core computes, an in-flight collective's receives wait for a core to idle, so a collective
cannot overlap compute that fills the machine (DDP's earlier buckets during backward, when there are several); on
such a machine the spinning loop took a core from that compute instead.
"""

from __future__ import annotations

import os
from pathlib import Path

LOOP_THREAD_NAME = "gloo_tcp_loop"
"""The name gloo gives its TCP event-loop thread (``/proc/<pid>/task/<tid>/comm``; seen in torch 2.13's CPU build)."""


def loop_threads() -> list[int]:
    """Thread ids of this process's gloo TCP event loops, ascending; [] where ``/proc`` is missing (not Linux)."""
    tasks = Path("/proc/self/task")
    found = []
    for task in tasks.iterdir() if tasks.is_dir() else []:
        try:
            if (task / "comm").read_text().strip() == LOOP_THREAD_NAME:
                found.append(int(task.name))
        except (OSError, ValueError):
            continue  # a thread that exited meanwhile
    return sorted(found)


def idle_gloo_loop() -> int:
    """Put this process's gloo TCP event-loop threads in ``SCHED_IDLE`` (module docstring); returns how many.

    A no-op (0) where the platform has no ``SCHED_IDLE`` or no ``/proc``, or before gloo created its device.
    """
    policy = getattr(os, "SCHED_IDLE", None)
    if policy is None or not hasattr(os, "sched_setscheduler"):
        return 0
    lowered = 0
    for tid in loop_threads():
        try:
            os.sched_setscheduler(tid, policy, os.sched_param(0))
            lowered += 1
        except OSError:
            continue  # exited meanwhile
    return lowered
