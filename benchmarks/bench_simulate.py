"""Benchmark: how long one simulation takes once the graph statistics are cached (goal: well under 0.5 s).

Measures the graph statistics of the workload for the cluster's shape from a cold cache (a fresh temporary
GNNPLAN_HOME unless --keep-home), then times ``simulator.api.simulate`` of one configuration with warm caches
and prints the median wall time and its ratio to the 0.5 s goal.

Usage::

    python benchmarks/bench_simulate.py [--cluster 4x-a100-10gbe] [--workload rmat100k-sage] [--strategy dp]
                                        [--set cache_fraction=0.1 ...] [--repeats 7] [--keep-home]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

GOAL_S = 0.5


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", default="4x-a100-10gbe")
    parser.add_argument("--workload", default="rmat100k-sage")
    parser.add_argument("--strategy", default="dp")
    parser.add_argument("--set", dest="knobs", action="append", default=["cache_fraction=0.1",
                                                                         "num_sampler_workers=2"])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--keep-home", action="store_true", help="use the current GNNPLAN_HOME (warm cache)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gnnplan-bench-") as home:
        if not args.keep_home:
            os.environ["GNNPLAN_HOME"] = home
            os.environ.pop("GNNPLAN_CACHE", None)
        from gnnplan.simulator import api

        knobs = api.parse_knobs(args.strategy, args.knobs)
        started = time.perf_counter()
        api.load_context(args.cluster, args.workload, args.strategy, knobs)
        cold_s = time.perf_counter() - started
        walls = []
        for _ in range(max(1, args.repeats)):
            started = time.perf_counter()
            result = api.simulate(args.cluster, args.workload, args.strategy, knobs)
            walls.append(time.perf_counter() - started)
    median = statistics.median(walls)
    print(f"config: {args.cluster} / {args.workload} / {args.strategy} {knobs}")
    print(f"graph statistics + dataset, cold cache: {cold_s:.2f} s")
    print(f"simulate, warm: median {median * 1e3:.1f} ms, min {min(walls) * 1e3:.1f} ms over {args.repeats} runs")
    print(f"ratio to the {GOAL_S} s goal: {median / GOAL_S:.3f} ({'meets' if median < GOAL_S else 'misses'} it)")
    print(f"predicted epoch time {result.epoch_time_s:.4f} s, {result.num_iterations} iterations, "
          f"{len(result.spans)} spans")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
