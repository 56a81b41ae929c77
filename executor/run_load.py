"""What else ran on this machine while a run trained: per epoch, the cores other processes kept busy and the share
of CPU time the hypervisor stole (:mod:`executor.probe_busy`'s measurement: the machine's busy time from
``/proc/stat`` less the run's own).

A run's epoch times are this machine's under whatever else ran. On the 2-core development machine a 1-worker ppgnn
run on Cora took 1.5 ms per epoch alone, 5.4 ms beside one busy loop and ~50 ms beside another gnnplan run
(2026-12-01: a worker's 2-thread parallel regions wait for the core another process holds), so a trace measured so
is no calibration of the machine alone.

Every rank measures its own CPU time over each training epoch, symmetric and cheap (~15 us: ``getrusage`` of
itself and its reaped children, and ``/proc/<pid>/stat`` of its live descendants, its sampler processes, found
through ``/proc/<pid>/task/<tid>/children``), with the machine's ``/proc/stat`` and its boot id. The epoch's record
gathers every rank's (:func:`executor.runner.epoch_record`); :func:`combine` keeps rank 0's machine's counters and
the CPU time of the ranks that share its boot id (all of them in a local or emulated run). The summary judges
consecutive epochs of at least :data:`MIN_WINDOW_S` together, since the counters count clock ticks
(:func:`summary`), and ``gnnplan run``, ``loop`` and ``calibrate`` say which measured epochs were busy
(:func:`autotune.report.background_note`). A scan of all of ``/proc`` on rank 0 alone
(:func:`executor.probe_busy.descendants_cpu_s`, 2 ms here) would have delayed every other rank's next collective,
so their epochs, by as much.
"""

from __future__ import annotations

import math
import os
import resource
import time
from pathlib import Path
from typing import Any

from gnnplan.executor import probe_busy

FIELDS = ("own_cpu_s", "machine_key", "busy_s", "steal_s", "total_s", "wall_s")
"""What each rank contributes per epoch (:meth:`EpochLoad.end`), in this order; NaN where unmeasured."""


def own_cpu_s(ticks_per_s: float) -> float:
    """User + system seconds of this process (with the children it has reaped) and of its live descendants
    (:func:`executor.probe_busy.cpu_s` of each, with what it reaped); descendants that end meanwhile are
    skipped."""
    total = sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                   resource.getrusage(resource.RUSAGE_CHILDREN)))
    todo = _children(os.getpid())
    while todo:
        child = todo.pop()
        try:
            total += probe_busy.cpu_s(probe_busy.stat_fields(Path("/proc") / str(child)), ticks_per_s)
        except (OSError, IndexError):
            continue
        todo += _children(child)
    return total


def _children(pid: int) -> list[int]:
    """Live children of ``pid`` (``/proc/<pid>/task/<tid>/children``, Linux 3.5+), or none where unreadable."""
    out: list[int] = []
    try:
        tasks = list((Path("/proc") / str(pid) / "task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            out += [int(x) for x in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return out


def machine_key() -> float:
    """This machine's boot id as a number (its first 12 hex digits: exact in a float64), NaN where unreadable:
    ranks with the same key share the machine's ``/proc/stat``."""
    try:
        return float(int(Path("/proc/sys/kernel/random/boot_id").read_text().replace("-", "")[:12], 16))
    except (OSError, ValueError):
        return math.nan


class EpochLoad:
    """One rank's measurement of one epoch at a time: :meth:`begin` before it, :meth:`end` after."""

    def __init__(self) -> None:
        self.key = machine_key()
        self.ticks_per_s = float(os.sysconf("SC_CLK_TCK"))
        self._before: tuple[float, ...] | None = None

    def _now(self) -> tuple[float, ...]:
        """(own CPU s, the machine's busy, stolen and total CPU s, monotonic wall s) now; NaN where unreadable."""
        try:
            machine = probe_busy.parse_proc_stat(probe_busy.PROC_STAT.read_text(), self.ticks_per_s)
        except (OSError, ValueError):
            machine = (math.nan,) * 3
        return own_cpu_s(self.ticks_per_s), *machine, time.monotonic()

    def begin(self) -> None:
        """Read the counters before the epoch."""
        self._before = self._now()

    def end(self) -> list[float]:
        """The epoch's :data:`FIELDS` (deltas since :meth:`begin`; the machine key as it is)."""
        after = self._now()
        before = self._before or after
        own, busy, steal, total, wall = (a - b for a, b in zip(after, before))
        return [own, self.key, busy, steal, total, wall]


MIN_WINDOW_S = 0.5
"""Shortest stretch of consecutive epochs judged together: ``/proc/stat`` and ``/proc/<pid>/stat`` count clock
ticks (10 ms at ``CLK_TCK`` 100), so a 2 ms epoch alone reads 0 or a whole tick per CPU; half a second holds 50
[chosen: on the development machine an idle 1-worker ppgnn run's 1.5 ms epochs read 0-2.5 cores other one by one,
2026-12-01]."""


def combine(rows: list[list[float]]) -> dict[str, float] | None:
    """An epoch's counters on rank 0's machine from every rank's :data:`FIELDS` (rank 0's first): its busy,
    stolen and total CPU seconds and wall seconds, and ``own_s``, the CPU seconds of the ranks with its machine key;
    None where it was not measured."""
    own = [r[0] for r in rows if r[1] == rows[0][1]]
    _, _, busy_s, steal_s, total_s, wall_s = rows[0]
    if not all(math.isfinite(x) for x in (busy_s, steal_s, total_s, wall_s, *own)) or wall_s <= 0:
        return None
    return {"busy_s": busy_s, "own_s": sum(own), "steal_s": steal_s, "total_s": total_s, "wall_s": wall_s}


def load_of(counters: list[dict[str, float]]) -> dict[str, float]:
    """``{other_cores, steal_fraction}`` over epochs' counters (:func:`combine`) summed: the mean cores other
    processes kept busy (0 when the run's own time exceeds the machine's busy time, as it may by a tick) and the
    share of all CPU time stolen."""
    busy_s, own_s, steal_s, total_s, wall_s = (sum(c[k] for c in counters)
                                                for k in ("busy_s", "own_s", "steal_s", "total_s", "wall_s"))
    return {"other_cores": max(0.0, busy_s - own_s) / wall_s,
            "steal_fraction": min(1.0, max(0.0, steal_s / total_s)) if total_s > 0 else 0.0}


def busy(load: dict[str, float]) -> bool:
    """Whether a load exceeds the probe's limits (:data:`executor.probe_busy.BUSY_CORES`,
    :data:`~executor.probe_busy.BUSY_STEAL_FRACTION`)."""
    return bool(load["other_cores"] > probe_busy.BUSY_CORES or load["steal_fraction"] > probe_busy.BUSY_STEAL_FRACTION)


def windows(measured: list[dict[str, Any]]) -> list[tuple[list[int], dict[str, float]]]:
    """Consecutive measured epochs with counters, grouped until each group's wall time reaches
    :data:`MIN_WINDOW_S` (a short last group joins the one before), with each group's :func:`load_of`."""
    groups: list[list[dict[str, Any]]] = []
    for r in measured:
        if not r.get("background"):
            continue
        if not groups or sum(g["background"]["wall_s"] for g in groups[-1]) >= MIN_WINDOW_S:
            groups.append([])
        groups[-1].append(r)
    if len(groups) > 1 and sum(g["background"]["wall_s"] for g in groups[-1]) < MIN_WINDOW_S:
        short = groups.pop()
        groups[-1] += short
    return [([r["epoch"] for r in g], load_of([r["background"] for r in g])) for g in groups]


def summary(measured: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The load over a run's measured epochs, judged over :func:`windows`: ``cores`` (this machine's),
    ``other_cores`` and ``steal_fraction`` over all of them, ``max_other_cores`` (the busiest window's) and
    ``busy_epochs`` (those of the windows over the limits, :func:`busy`); None when no epoch was measured."""
    parts = windows(measured)
    if not parts:
        return None
    whole = load_of([r["background"] for r in measured if r.get("background")])
    return {"cores": os.cpu_count() or 1, **whole, "max_other_cores": max(w["other_cores"] for _, w in parts),
            "busy_epochs": [e for epochs, w in parts if busy(w) for e in epochs]}
