"""Benchmark: calibration's fit pricing each distinct work once, and ``read_yaml`` keeping parsed texts.

Both are measured against their baseline in the same run of this script:

1. ``gnnplan calibrate`` of two simulated dp traces (``--workload``, knobs ``cache_fraction`` 0 and 0.3 with 2
   sampler processes) from a cluster whose fixed costs are off by a factor of 2-3 (the fit has to move them): once
   as shipped (:meth:`simulator.calibrate_fit._Problem._distinct_work` groups equal work) and once with every row
   priced on its own, the baseline. The fitted values must be identical: equal work has an equal price.
2. ``load_cluster`` of a preset ``--loads`` times: with the parsed-text cache, and with it emptied before every
   load (the baseline: the pure-Python YAML parser every time).

Usage::

    python benchmarks/bench_fit_speed.py [--cluster 4x-a100-10gbe] [--workload cora-sage] [--loads 50]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DGLBACKEND", "pytorch")

KNOBS = {"a.json": {"cache_fraction": 0.0}, "b.json": {"cache_fraction": 0.3, "num_sampler_workers": 2}}
OFF_BY = {"network.per_collective_s": 2.0, "gpu.kernel_overhead_s": 0.5, "host.sampler_handoff_s": 3.0,
          "iteration_overhead_s": 2.0}
"""Factors the starting cluster's fixed costs are off from the traces' truth."""


def _traces(truth: Any, workload: str, folder: Path) -> list[Path]:
    from gnnplan.simulator import api

    paths = []
    for name, knobs in KNOBS.items():
        result = api.simulate(truth, workload, "dp", knobs)
        paths.append(api.predicted_trace(result, folder / name, api.trace_metadata(truth, workload, "dp", result)))
    return paths


def _every_row_alone(self: Any, idx: list[int]) -> tuple[list[Any], Any]:
    """The baseline's grouping: each row priced on its own."""
    import numpy as np

    return [self.rows[i].work for i in idx], np.arange(len(idx), dtype=np.int64)


def bench_fit(cluster: str, workload: str) -> None:
    from gnnplan.simulator import calibrate_fit
    from gnnplan.simulator.calibrate import calibrate_files
    from gnnplan.simulator.calibrate_params import get_param, overridden
    from gnnplan.simulator.hardware.spec import load_cluster

    truth = load_cluster(cluster)
    start = overridden(truth, {p: get_param(truth, p) * f if get_param(truth, p) > 0 else 1e-4 * f
                               for p, f in OFF_BY.items()})
    with tempfile.TemporaryDirectory() as tmp:
        paths = _traces(truth, workload, Path(tmp))
        calibrate_files(paths, start)  # warm: statistics, imports
        times, fitted = {}, {}
        shipped = calibrate_fit._Problem._distinct_work
        for label, grouping in (("every row alone (baseline)", _every_row_alone), ("distinct work once", shipped)):
            calibrate_fit._Problem._distinct_work = grouping  # type: ignore[method-assign]
            try:
                t = time.perf_counter()
                report = calibrate_files(paths, start)[1]
                times[label] = time.perf_counter() - t
            finally:
                calibrate_fit._Problem._distinct_work = shipped  # type: ignore[method-assign]
            fitted[label] = {p: v["after"] for p, v in report["parameters"].items()}
    base, new = times.values()
    print(f"calibrate ({workload}, 2 traces, {cluster}): baseline {base:.2f} s, distinct work {new:.2f} s, "
          f"ratio {base / new:.2f}x; fitted values identical: {len(set(map(repr, fitted.values()))) == 1}")


def bench_yaml(cluster: str, loads: int) -> None:
    from gnnplan.simulator import io
    from gnnplan.simulator.hardware.spec import load_cluster

    load_cluster(cluster)
    t = time.perf_counter()
    for _ in range(loads):
        io._PARSED.clear()
        load_cluster(cluster)
    base = (time.perf_counter() - t) / loads
    load_cluster(cluster)
    t = time.perf_counter()
    for _ in range(loads):
        load_cluster(cluster)
    new = (time.perf_counter() - t) / loads
    print(f"load_cluster({cluster}) x {loads}: parsed every time {base * 1e3:.1f} ms, kept text "
          f"{new * 1e3:.2f} ms per load, ratio {base / new:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", default="4x-a100-10gbe")
    parser.add_argument("--workload", default="cora-sage")
    parser.add_argument("--loads", type=int, default=50)
    args = parser.parse_args()
    bench_fit(args.cluster, args.workload)
    bench_yaml(args.cluster, args.loads)


if __name__ == "__main__":
    main()
