"""Measured peak memory of an epoch: what ``simulate --json``'s ``peak_memory_bytes{gpu, host}`` predicts.

Every rank measures each training epoch and, separately, the evaluation after it (:class:`EpochPeak`, reset before
each; data loading is part of neither); the epoch's peak is the larger of the two (:func:`larger_peaks`), each
phase's is kept (``peak_memory_phases``, as the simulator's phases):

* host: the process's peak resident set during the phase, ``VmHWM`` of /proc/self/status after the high-water
  mark was reset to the current resident set (``VmRSS``) just before the phase, by writing ``5`` to
  /proc/self/clear_refs (proc(5), "/proc/pid/clear_refs", Linux 4.0 and later). So it holds everything resident
  while the phase runs: the Python, torch and DGL runtime (with what else a worker holds beyond the memory
  model's data terms: the simulator's ``host.process_bytes``, which ``gnnplan probe`` measures on a small training
  run, :func:`executor.probe_constants.worker_process_bytes`), the graph and features the trainer loaded, heap
  the allocator kept resident after earlier work (the evaluations' buffers, so a training phase's peak holds them
  too: on CiteSeer glibc's ``malloc_trim(0)`` released 55 MB after one; trimming before every epoch was tried and
  dropped, as it slowed Cora dp's epochs by ~9%, median of 3 interleaved runs of 12 epochs, 2026-11-28), and the
  phase's own peak; plus its sampler processes' private memory at the phase's end (:func:`children_private_bytes`:
  forked, they share the rest with the trainer; not a peak, as their high-water marks count the shared pages too).
  Where the mark cannot be reset (not Linux, or /proc not writable) the process's lifetime peak is reported
  instead (``resource.getrusage``'s ``ru_maxrss``), which includes loading and earlier phases: ``reset`` says which.
* device: on CUDA, ``torch.cuda.max_memory_reserved`` of the rank's device over the phase (reset with
  ``torch.cuda.reset_peak_memory_stats`` just before), the caching allocator's segments, plus the device memory
  in use outside them at the phase's end (``torch.cuda.mem_get_info``'s total - free, less
  ``torch.cuda.memory_reserved``): the CUDA context and kernels, the libraries' workspaces and NCCL's buffers,
  which the simulator prices as ``framework reserve`` (and, on a GPU shared with other processes, theirs: one
  rank per GPU is assumed). On the CPU there is no device memory: None
  (the simulator then adds its "GPU" parts to the host, :func:`simulator.strategies.base.memory_estimate`, which
  is where the measured host peak has them).

A machine's host peak is the sum over its ranks (:func:`machine_peaks`): the simulator's ``host`` is one machine's
memory, its ``gpu`` one GPU's. The graph and feature partition its workers share (:mod:`executor.shared`) count once:
the ranks other than the machine's local rank 0, which created them, leave out the shared pages they map, their
resident size at the phase's end. Pages mapped only grow, so that is at least what the rank's peak held of them:
its figure is short by the shared pages it first touched after its peak (in practice during the first epoch only,
which the summary leaves out from 3 epochs on).
"""

from __future__ import annotations

import resource
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from gnnplan.executor.shared import resident_shared_bytes

STATUS = Path("/proc/self/status")
CLEAR_REFS = Path("/proc/self/clear_refs")
RESET_PEAK_RSS = "5"
"""What /proc/self/clear_refs takes to reset the peak resident set size to the current one (proc(5))."""

__all__ = ["PHASES", "EpochPeak", "children_private_bytes", "larger_peaks", "machine_peaks"]

PHASES = ("training", "evaluation")
"""The phases of an epoch whose peaks are measured apart, in the order they run (``peak_memory_phases``)."""


def _status_kib(field: str) -> float | None:
    """A ``kB`` field of /proc/self/status (e.g. ``VmHWM``) in KiB, None where the file or field is missing."""
    try:
        for line in STATUS.read_text().splitlines():
            if line.startswith(field + ":"):
                return float(line.split()[1])
    except OSError:
        return None
    return None


def peak_resident_bytes() -> float:
    """This process's peak resident set in bytes (``VmHWM``; else ``ru_maxrss``, KiB on Linux, bytes on macOS)."""
    kib = _status_kib("VmHWM")
    if kib is not None:
        return kib * 1024.0
    maxrss = float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return maxrss if sys.platform == "darwin" else maxrss * 1024.0


def children_private_bytes() -> float:
    """The private memory (``Private_Clean`` + ``Private_Dirty`` of /proc/<pid>/smaps_rollup, Linux 4.14 and
    later) of this process's child processes, its sampler processes: what they hold beyond the pages they share
    with it copy-on-write (which its resident set counts already). 0 where /proc cannot tell."""
    total = 0.0
    try:
        tasks = list(Path("/proc/self/task").iterdir())
    except OSError:
        return 0.0
    for task in tasks:
        try:
            pids = (task / "children").read_text().split()
        except OSError:
            continue
        for pid in pids:
            try:
                lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
            except OSError:
                continue  # exited meanwhile
            total += sum(float(line.split()[1]) * 1024.0 for line in lines
                         if line.startswith(("Private_Clean:", "Private_Dirty:")))
    return total


def reset_peak_resident() -> bool:
    """Reset the peak resident set to the current one; False where the platform does not allow it."""
    try:
        CLEAR_REFS.write_text(RESET_PEAK_RSS)
    except OSError:
        return False
    return True


@dataclass
class EpochPeak:
    """One rank's peak memory per phase, a training epoch or an evaluation (module docstring).

    Call :meth:`begin` right before the phase and :meth:`end` right after; :meth:`end` returns
    ``(host_bytes, device_bytes or None)``.

    Attributes:
        device: the rank's device (CUDA: its allocator is measured; else no device memory).
        reset: whether the host peak was reset before the last phase (False: a lifetime peak).
        counts_shared: whether the host peak keeps the machine's shared objects this rank maps (True on the
            machine's local rank 0, which created them; the others leave them out, :mod:`executor.shared`).
        in_step: whether the machine has other ranks: then every one of them reads its shared objects' resident
            bytes at :meth:`end` (local rank 0 too, discarding it), so none waits at the next collective for
            another's read of /proc/self/smaps (~12 ms in a torch + DGL process here). Read by the other ranks
            alone, rank 1 of the development machine's 1 x 2 runs began each evaluation ~21 ms after rank 0,
            whose first pull then measured 24 ms against rank 1's 1.9 ms (2026-11-29).
    """

    device: torch.device
    reset: bool = False
    counts_shared: bool = True
    in_step: bool = False

    def begin(self) -> None:
        """Reset the host and device peaks to what is held now."""
        self.reset = reset_peak_resident()
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)

    def end(self) -> tuple[float, float | None]:
        """The peaks since :meth:`begin`: host bytes, device bytes (None off CUDA; module docstring)."""
        host = peak_resident_bytes() + children_private_bytes()
        if not self.counts_shared or self.in_step:
            shared = resident_shared_bytes()  # on every rank of the machine when in_step
            if not self.counts_shared:
                host -= shared
        if self.device.type != "cuda":
            return host, None
        free, total = torch.cuda.mem_get_info(self.device)
        outside = max(0.0, float(total - free) - float(torch.cuda.memory_reserved(self.device)))
        return host, float(torch.cuda.max_memory_reserved(self.device)) + outside


def machine_peaks(host: Sequence[float], device: Sequence[float | None],
                  gpus_per_machine: int) -> dict[str, float | None]:
    """The ``peak_memory_bytes`` object of one epoch from every rank's peaks (rank order; rank r is on machine
    r // ``gpus_per_machine``): ``host`` the largest machine's sum over its ranks, ``gpu`` the largest device
    peak (None when no rank has a device).

    Raises:
        ValueError: ``host`` and ``device`` differ in length, or ``gpus_per_machine`` < 1.
    """
    if len(host) != len(device) or gpus_per_machine < 1:
        raise ValueError(f"machine_peaks: {len(host)} host and {len(device)} device values, "
                         f"gpus_per_machine {gpus_per_machine}")
    machines: dict[int, float] = {}
    for rank, nbytes in enumerate(host):
        machines[rank // gpus_per_machine] = machines.get(rank // gpus_per_machine, 0.0) + nbytes
    gpus = [d for d in device if d is not None]
    return {"gpu": max(gpus) if gpus else None, "host": max(machines.values(), default=0.0)}


def larger_peaks(peaks: Iterable[Mapping[str, float | None]]) -> dict[str, float | None]:
    """Per memory (``gpu``, ``host``) the largest of several ``peak_memory_bytes`` objects' values (None where
    none has one): the peak over phases or epochs that ran one after the other."""
    out: dict[str, float | None] = {"gpu": None, "host": None}
    for peak in peaks:
        for key in out:
            value, best = peak.get(key), out[key]
            if value is not None and (best is None or value > best):
                out[key] = value
    return out
