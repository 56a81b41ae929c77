"""Test helper: executor-like traces of several epochs made from a simulation (calibration's held-out tests)."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gnnplan.simulator import api
from gnnplan.simulator.result import SimResult
from gnnplan.simulator.trace import write_trace


def epochs_trace(result: SimResult, cluster: Any, workload: Any, path: Path, factors: Sequence[float],
                 evaluation_s: Sequence[float] = ()) -> Path:
    """Write a trace of ``len(factors)`` epochs run one after the other: epoch e is the simulated epoch with
    every span's start and duration scaled by ``factors[e]`` (a uniformly slower or faster machine for that
    epoch). ``results`` carry the epoch times and their median over the epochs after the first when there are
    3 or more, as ``gnnplan run`` reports them.

    Args:
        result: a simulation (its spans, one epoch).
        cluster, workload: what it simulated (for the plan in the metadata).
        path: the trace to write.
        factors: one time scale per epoch.
        evaluation_s: each epoch's measured evaluation time, written as ``gnnplan run`` does
            (``results.epochs[].evaluation_time_s``); none when empty.
    """
    spans, offset, times = [], 0.0, []
    for epoch, f in enumerate(factors):
        spans += [dataclasses.replace(s, start_s=offset + s.start_s * f, dur_s=s.dur_s * f, epoch=epoch)
                  for s in result.spans]
        times.append(result.epoch_time_s * f)
        offset += result.epoch_time_s * f
    meta = {**api.trace_metadata(cluster, workload, result.strategy, result), "source": "executor"}  # as a run's
    measured = times[1:] if len(times) >= 3 else times
    meta["results"] = {"epoch_time_s": statistics.median(measured), "epoch_times_s": times}
    if evaluation_s:
        meta["results"]["epochs"] = [{"epoch": e, "evaluation_time_s": v} for e, v in enumerate(evaluation_s)]
    return write_trace(path, spans, meta)
