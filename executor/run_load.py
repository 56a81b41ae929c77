"""What else ran on this machine while a run trained: per epoch, the cores other processes kept busy and the share
of CPU time the hypervisor stole (:mod:`executor.probe_busy`'s measurement, with the run's own process tree as
"own": the launcher's workers and their sampler processes).

A run's epoch times are this machine's under whatever else ran. On the 2-core development machine one busy
process beside a 1-worker ppgnn run on Cora made its epochs ~25x longer (about 50 ms against 2 ms, 2026-12-01: a
worker's 2-thread parallel regions wait for the core the other process holds), so a trace measured so is no
calibration of the machine alone. Rank 0 records each epoch's load (``record["background"]``); the run's summary
says which measured epochs were busy (:func:`summary`) and ``gnnplan run``, ``loop`` and ``calibrate`` say so
(:func:`autotune.report.background_note`).
"""

from __future__ import annotations

import os
import statistics
from typing import Any

from gnnplan.executor import probe_busy


def launcher_pid(world_size: int) -> int:
    """The root of the run's process tree as a worker sees it: itself when it runs alone in the calling process
    (``run_in_process``), else its parent (the forkserver or torchrun agent whose children the workers are)."""
    return os.getpid() if world_size == 1 else os.getppid()


class EpochLoad:
    """Measures one epoch at a time: :meth:`begin` before it, :meth:`end` after (rank 0, outside its spans)."""

    def __init__(self, root: int) -> None:
        self.root = root
        self._before: probe_busy.CpuSnapshot | None = None

    def begin(self) -> None:
        """Take the epoch's first snapshot."""
        self._before = probe_busy.tree_snapshot(self.root)

    def end(self) -> dict[str, float] | None:
        """``{other_cores, steal_fraction}`` since :meth:`begin` (:class:`executor.probe_busy.Background`), or None
        where ``/proc`` cannot be read."""
        after = probe_busy.tree_snapshot(self.root)
        if self._before is None or after is None or after.wall_s <= self._before.wall_s:
            return None
        bg = probe_busy.background(self._before, after)
        return {"other_cores": bg.other_cores, "steal_fraction": bg.steal_fraction}


def busy(load: dict[str, float]) -> bool:
    """Whether an epoch's load exceeds the probe's limits (:data:`executor.probe_busy.BUSY_CORES`,
    :data:`~executor.probe_busy.BUSY_STEAL_FRACTION`)."""
    return bool(load["other_cores"] > probe_busy.BUSY_CORES or load["steal_fraction"] > probe_busy.BUSY_STEAL_FRACTION)


def summary(measured: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The load over a run's measured epochs: ``cores`` (this machine's), ``{other_cores, steal_fraction}``
    (medians), ``max_other_cores`` and ``busy_epochs`` (those over the limits, :func:`busy`); None when no epoch
    was measured."""
    loads = [(r["epoch"], r["background"]) for r in measured if r.get("background")]
    if not loads:
        return None
    return {"cores": os.cpu_count() or 1, "other_cores": statistics.median(b["other_cores"] for _, b in loads),
            "steal_fraction": statistics.median(b["steal_fraction"] for _, b in loads),
            "max_other_cores": max(b["other_cores"] for _, b in loads),
            "busy_epochs": [e for e, b in loads if busy(b)]}

