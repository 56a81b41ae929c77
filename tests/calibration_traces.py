"""Test helper: executor-like traces of several epochs made from a simulation (calibration's held-out tests), and
the hidden parameters and dp traces the calibration tests fit (:func:`dp_traces`)."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gnnplan.simulator import api
from gnnplan.simulator.calibrate import with_params
from gnnplan.simulator.hardware.spec import ClusterSpec, load_cluster
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


# ---- the hidden truth the calibration tests recover (tests/simulator/test_calibrate*.py)

TRUE = {"network.bandwidth_bytes_per_s": 0.8e9, "network.latency_s": 5e-5, "network.per_collective_s": 2e-4,
        "pcie.bandwidth_bytes_per_s": 12e9, "pcie.latency_s": 1e-5, "efficiency.gather_fraction": 0.5,
        "efficiency.forward_fraction": 0.3, "efficiency.backward_fraction": 0.25, "efficiency.optimizer_fraction": 0.2,
        "gpu.kernel_overhead_s": 5e-6, "host.sampling_edges_per_s_per_core": 1e7, "host.sampler_handoff_s": 3e-3,
        "iteration_overhead_s": 2e-3, "gpu.backward_overhead_ratio": 0.5}
PRIORS = {"network.per_collective_s": 1e-4, "gpu.kernel_overhead_s": 2.5e-6, "host.sampler_handoff_s": 1e-3,
          "iteration_overhead_s": 1e-3}
"""Fixed costs the preset does not model (0), given measured-like starting values (the others: the preset's)."""
KNOBS = {"a.json": {"cache_fraction": 0.0}, "b.json": {"cache_fraction": 0.3, "num_sampler_workers": 2}}
DP_PARAMS = tuple(TRUE)
"""The parameters dp's spans inform (the others, the loaders' per-row cost and the storage concurrency: ppgnn's,
tests/simulator/test_calibrate_ppgnn.py)."""


def start_cluster() -> ClusterSpec:
    """The calibration tests' starting cluster: 4x-a100-10gbe with :data:`PRIORS`' fixed costs."""
    return with_params(load_cluster("4x-a100-10gbe"), PRIORS)


def dp_traces(tmp_path: Path, cluster: Any, epochs: tuple[float, ...] = (),
            evaluations: tuple[float, ...] = ()) -> list[Path]:
    """The two configurations of :data:`KNOBS` simulated on ``cluster``; with ``epochs``, traces of that many
    epochs scaled by those factors (:func:`calibration_traces.epochs_trace`), and with ``evaluations`` each
    epoch's evaluation timed at that factor times the simulated one."""
    paths = []
    for name, knobs in KNOBS.items():
        result = api.simulate(cluster, "rmat100k-sage", "dp", knobs)
        if epochs:
            timed = [f * result.evaluation_time_s for f in evaluations]
            paths.append(epochs_trace(result, cluster, "rmat100k-sage", tmp_path / name, epochs, timed))
        else:
            meta = api.trace_metadata(cluster, "rmat100k-sage", "dp", result)
            paths.append(api.predicted_trace(result, tmp_path / name, meta))
    return paths
