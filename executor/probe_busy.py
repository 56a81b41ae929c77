"""Was anything else running while ``gnnplan probe`` measured?

Every rate the probe writes is a prior of every prediction on this machine, and a rate measured while other
processes (or the hypervisor) take CPU time is low by their share. The probe therefore reads the machine's CPU
time before and after measuring: all CPUs' non-idle time from ``/proc/stat`` (user, nice, system, irq, softirq;
guest time is inside user; ``proc(5)``) minus the probe's own is what other processes used, and the ``steal``
column is what the hypervisor gave to other guests. The probe's own time is its process tree's: ``getrusage`` of
this process and of its children that have ended (``getrusage(2)``) plus every live descendant's user and system
time and that of the children it has reaped (``/proc/<pid>/stat`` fields 14-17: the probe's gloo and sampler
processes, and the helpers that spawn them, may still run when it reads). Both are reported; above
:data:`BUSY_CORES` or :data:`BUSY_STEAL_FRACTION` the probe warns (pyperf's ``system`` checks and Google Benchmark's
CPU-scaling warning do the same for their timings).

A process that outlives its parent is re-parented away from the probe's tree, and its time with it: the machine
probe ``probe --emulate`` starts inside emulated machine 0 leaves its forkserver (multiprocessing's, holding the
time of the workers it reaped) to the init process when it exits, and an idle machine read 0.40 cores busy
(2026-12-01). :func:`adopt_orphans` makes the probe a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``,
Linux 3.4+: orphans of its tree become its children), so they stay in the tree it reads (0.01 cores then).

Linux only: elsewhere :func:`snapshot` returns None and nothing is reported.
"""

from __future__ import annotations

import contextlib
import os
import resource
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PROC_STAT = Path("/proc/stat")
BUSY_CORES = 0.25
"""Mean cores other processes may keep busy during the probe before it warns [chosen: a quarter of one measuring
thread's core]. On the 2-core development machine a quick probe read 0.00 when idle and 0.85 beside a busy loop
(2026-11-29)."""
MIN_WALL_S = 1.0
"""Shortest window whose reading can call the machine busy: ``/proc/stat`` counts clock ticks (10 ms at the usual
USER_HZ of 100), so over a few hundredths of a second one tick more or less is a core or more (a probe refusing
its arguments at once read "4.04 of 2 cores busy" over 0 s, 2026-12-01)."""
BUSY_STEAL_FRACTION = 0.10
"""Share of the CPU time the hypervisor may steal before the probe warns [chosen]. The development machine's
hypervisor took 1-3% during quick probes and up to 7% over 3 s of one busy core (2026-11-29)."""


@dataclass(frozen=True)
class CpuSnapshot:
    """The machine's and the probe's CPU time at one instant, seconds.

    Attributes:
        wall_s: ``time.monotonic()``.
        busy_s: all CPUs' non-idle time since boot, steal excluded.
        steal_s: all CPUs' stolen time since boot.
        total_s: all CPUs' time since boot (busy, idle, iowait and steal).
        own_s: the probe's process tree's user + system time: this process, its children that have ended and
            every live descendant (:func:`descendants_cpu_s`).
    """

    wall_s: float
    busy_s: float
    steal_s: float
    total_s: float
    own_s: float


@dataclass(frozen=True)
class Background:
    """What other processes took while the probe measured (module docstring).

    Attributes:
        wall_s: seconds between the two snapshots.
        other_cores: mean cores other processes kept busy (0 when the probe's own time exceeds the machine's
            busy time, as it may by a clock tick).
        steal_fraction: share of all CPUs' time the hypervisor stole, in [0, 1].
    """

    wall_s: float
    other_cores: float
    steal_fraction: float

    @property
    def busy(self) -> bool:
        """Whether the machine was too busy for the probe's rates to be trusted (:data:`BUSY_CORES`,
        :data:`BUSY_STEAL_FRACTION`); never over less than :data:`MIN_WALL_S`."""
        loaded = self.other_cores > BUSY_CORES or self.steal_fraction > BUSY_STEAL_FRACTION
        return self.wall_s >= MIN_WALL_S and loaded

    def describe(self, cores: int) -> str:
        """One sentence: ``while measuring (W s), other processes kept X of N cores busy and the hypervisor
        took Y% of the CPU time``."""
        return (f"while measuring ({self.wall_s:.0f} s), other processes kept {self.other_cores:.2f} of {cores} "
                f"cores busy on average and the hypervisor took {self.steal_fraction:.0%} of the CPU time")


def parse_proc_stat(text: str, ticks_per_s: float) -> tuple[float, float, float]:
    """(busy, steal, total) seconds of the aggregate ``cpu`` line of ``/proc/stat`` text.

    Raises:
        ValueError: no aggregate ``cpu`` line with at least the 8 fields of Linux 2.6.11+.
    """
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            if len(fields) < 9:
                break
            user, nice, system, idle, iowait, irq, softirq, steal = (float(x) / ticks_per_s for x in fields[1:9])
            busy = user + nice + system + irq + softirq
            return busy, steal, busy + idle + iowait + steal
    raise ValueError("/proc/stat: no aggregate 'cpu' line with 8 fields")


PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER = 36, 37
"""``prctl`` option numbers (linux/prctl.h)."""


@contextlib.contextmanager
def adopted_orphans() -> Iterator[bool]:
    """While open, this process is the child subreaper of its tree (module docstring); yields False where it
    cannot be (not Linux, or the call failed: the probe then reads as before). On leaving, the setting it found is
    restored (a probe called in a long-lived process, a test run, leaves it as it was)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        before = ctypes.c_int(0)
        libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(before), 0, 0, 0)
        adopted = int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        yield False
        return
    try:
        yield adopted
    finally:
        if adopted:
            libc.prctl(PR_SET_CHILD_SUBREAPER, before.value, 0, 0, 0)


def snapshot() -> CpuSnapshot | None:
    """The machine's and this process tree's CPU time now; None where ``/proc/stat`` cannot be read."""
    ticks = float(os.sysconf("SC_CLK_TCK"))
    try:
        busy, steal, total = parse_proc_stat(PROC_STAT.read_text(), ticks)
    except (OSError, ValueError):
        return None
    own = sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                  resource.getrusage(resource.RUSAGE_CHILDREN)))
    return CpuSnapshot(time.monotonic(), busy, steal, total, own + descendants_cpu_s(os.getpid(), ticks))


def stat_fields(entry: Path) -> list[str]:
    """The fields of a process's ``/proc/<pid>/stat`` after its command name (``proc(5)`` field 3 on: state,
    ppid, ..., utime at index 11, stime, cutime, cstime), for ``entry`` = ``/proc/<pid>``; a command name may hold
    spaces and parentheses.

    Raises:
        OSError, IndexError: the process is gone, or its stat line is malformed.
    """
    return (entry / "stat").read_text().rsplit(")", 1)[1].split()


def cpu_s(fields: list[str], ticks_per_s: float) -> float:
    """User + system seconds of a process and of the children it has reaped (utime, stime, cutime, cstime of
    :func:`stat_fields`, clock ticks over ``ticks_per_s``)."""
    return sum(int(x) for x in fields[11:15]) / ticks_per_s


def descendants_cpu_s(root: int, ticks_per_s: float, proc: Path = Path("/proc")) -> float:
    """User + system seconds of every live descendant of process ``root``, each with those of the children it
    has reaped (``/proc/<pid>/stat`` utime, stime, cutime, cstime); a process that ends while it is read is
    skipped."""
    parent, cpu = {}, {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = stat_fields(entry)
        except (OSError, IndexError):
            continue
        pid = int(entry.name)
        parent[pid] = int(fields[1])
        cpu[pid] = cpu_s(fields, ticks_per_s)
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = 0.0, list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        out += cpu[pid]
        todo += children.get(pid, ())
    return out


def background(before: CpuSnapshot, after: CpuSnapshot) -> Background:
    """What other processes and the hypervisor took between two snapshots (module docstring).

    Raises:
        ValueError: ``after`` is not later than ``before``.
    """
    wall = after.wall_s - before.wall_s
    if wall <= 0:
        raise ValueError("background: the second snapshot must be later than the first")
    other = (after.busy_s - before.busy_s) - (after.own_s - before.own_s)
    total = after.total_s - before.total_s
    steal = (after.steal_s - before.steal_s) / total if total > 0 else 0.0
    return Background(wall, max(0.0, other) / wall, min(1.0, max(0.0, steal)))
