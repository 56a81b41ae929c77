"""One Chrome trace holding a predicted and a measured timeline side by side (``gnnplan trace merge``).

Both inputs use ``pid`` = rank and their own time origins, so opening them together in Perfetto overlays
unrelated processes. The merge takes one epoch of each (the predicted trace has one; of the measured trace the
epoch whose slowest rank is the median, or the one asked for), moves each epoch's start to time 0, and gives
the processes distinct pids and names: predicted rank ``r`` is pid ``r`` named ``predicted rank r``, measured
rank ``r`` is pid ``PID_OFFSET + r`` named ``measured rank r``.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from gnnplan.simulator.calibrate_holdout import epoch_times_s
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.io import atomic_write_text
from gnnplan.simulator.trace import EVALUATION_PHASES, Span, check_same_run, check_source, read_trace, to_chrome

PID_OFFSET = 1000
"""First pid of the measured timeline (ranks stay far below it)."""
_SUMMARY_KEYS = ("strategy", "knobs", "num_workers", "source")


def epoch_windows(spans: list[Span]) -> dict[int, tuple[float, float]]:
    """Per epoch index, (earliest start, latest end) over the ranks' ``epoch`` spans."""
    windows: dict[int, tuple[float, float]] = {}
    for s in spans:
        if s.phase == "epoch":
            lo, hi = windows.get(s.epoch, (s.start_s, s.end_s))
            windows[s.epoch] = (min(lo, s.start_s), max(hi, s.end_s))
    return windows


def pick_epoch(spans: list[Span], epoch: int | None = None, what: str = "trace") -> int:
    """The epoch to show (:func:`timed_epoch`, without its time).

    Raises:
        SpecError: as :func:`timed_epoch`.
    """
    return timed_epoch(spans, epoch, what)[0]


def timed_epoch(spans: list[Span], epoch: int | None = None, what: str = "trace",
                among: Sequence[int] | None = None) -> tuple[int, float]:
    """The epoch to show and its time in seconds: ``epoch`` if given, else the one whose time is the median (the
    lower one of an even count, so the result is an epoch that exists) of the epochs ``among`` (the run's measured
    epochs, ``results.measured_epochs``: its warm-up left out, as the run's median leaves it; None or none of them
    in the trace: every epoch); an epoch's time is its slowest rank's epoch span, as ``gnnplan run`` reports it
    (:func:`~gnnplan.simulator.calibrate_holdout.epoch_times_s`). ``what`` names the trace in an error
    (``PREDICTED`` / ``MEASURED`` as ``gnnplan trace merge`` calls its arguments).

    Raises:
        SpecError: the trace has no ``epoch`` spans, or not the one asked for.
    """
    durations = epoch_times_s(spans)
    if not durations:
        raise SpecError(f"{what}: no 'epoch' spans (written by gnnplan run or gnnplan simulate --trace?)")
    if epoch is not None:
        if epoch not in durations:
            raise SpecError(f"--epoch: {epoch} is not in the trace; epochs: {', '.join(map(str, sorted(durations)))}")
        return epoch, durations[epoch]
    kept = None if among is None else set(among)
    pool = {e: d for e, d in durations.items() if kept is None or e in kept} or durations
    median = statistics.median_low(pool.values())
    return min(e for e, d in pool.items() if d == median), median


def measured_epochs(metadata: dict[str, Any]) -> list[int] | None:
    """The epochs a run measured its epoch time on (``results.measured_epochs`` of its trace), None if it says
    none."""
    epochs = (metadata.get("results") or {}).get("measured_epochs")
    return [int(e) for e in epochs] if isinstance(epochs, list) and epochs else None


def one_epoch(spans: list[Span], epoch: int) -> list[Span]:
    """The spans of ``epoch`` (tagged with it, or untagged and inside its window), shifted to start at 0; the
    evaluation after it (:data:`~gnnplan.simulator.trace.EVALUATION_PHASES`, tagged with the epoch) is not part
    of the epoch and is left out, as the simulator's predicted epoch has none."""
    lo, hi = epoch_windows(spans)[epoch]
    keep = [s for s in spans if s.phase not in EVALUATION_PHASES
            and (s.epoch == epoch or (s.epoch == -1 and s.start_s >= lo and s.end_s <= hi))]
    return [replace(s, start_s=s.start_s - lo) for s in keep]


def merge(predicted: tuple[list[Span], dict[str, Any]], measured: tuple[list[Span], dict[str, Any]],
          epoch: int | None = None) -> dict[str, Any]:
    """The merged Chrome-trace object (module docstring).

    Args:
        predicted: (spans, metadata) of the simulator's trace.
        measured: (spans, metadata) of the executor's trace.
        epoch: the measured epoch to show (None = the median one of those the run measured its time on).

    Raises:
        SpecError: a trace without ``epoch`` spans, or an epoch it does not have; a trace whose metadata names the
            other side's source (``source``: ``simulator`` / ``executor``, e.g. the two given in swapped order), or
            a predicted trace of another strategy or dataset than the measured one.
    """
    (pred, pred_meta), (meas, meas_meta) = predicted, measured
    check_source(pred_meta, "simulator", "PREDICTED")
    check_source(meas_meta, "executor", "MEASURED")
    check_same_run(pred_meta, meas_meta, "PREDICTED")
    pred_epoch, pred_s = timed_epoch(pred, what="PREDICTED")
    meas_epoch, meas_s = timed_epoch(meas, epoch, what="MEASURED", among=measured_epochs(meas_meta))
    doc = to_chrome(one_epoch(pred, pred_epoch), {}, label="predicted rank")
    other = to_chrome(one_epoch(meas, meas_epoch), {}, pid_offset=PID_OFFSET, label="measured rank")
    doc["traceEvents"].extend(other["traceEvents"])
    doc["metadata"] = {
        "merged": {"predicted": {"epoch": pred_epoch, **_summary(pred_meta)},
                   "measured": {"epoch": meas_epoch, **_summary(meas_meta)},
                   "measured_pid_offset": PID_OFFSET, "time_origin": "start of each timeline's epoch"},
        "epoch_time_s": {"predicted": pred_s, "measured": meas_s}}
    return doc


def _summary(meta: dict[str, Any]) -> dict[str, Any]:
    return {k: meta[k] for k in _SUMMARY_KEYS if k in meta}


def merge_files(predicted: str | Path, measured: str | Path, output: str | Path, epoch: int | None = None
                ) -> dict[str, Any]:
    """Read two trace files, merge them and write the result atomically.

    Returns:
        The merged trace's metadata.

    Raises:
        SpecError: a missing or malformed input (see :func:`gnnplan.simulator.trace.read_trace`) or
            :func:`merge`'s errors; nothing is written then.
    """
    doc = merge(read_trace(predicted), read_trace(measured), epoch)
    atomic_write_text(output, json.dumps(doc))
    return dict(doc["metadata"])


def ranks_by_label(doc: dict[str, Any]) -> dict[str, list[int]]:
    """Process pids of a merged trace by the first word of their name (``predicted`` / ``measured``)."""
    out: dict[str, list[int]] = defaultdict(list)
    for e in doc["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            out[e["args"]["name"].split()[0]].append(int(e["pid"]))
    return {k: sorted(v) for k, v in out.items()}
