"""gloo's event-loop thread as created vs in SCHED_IDLE (executor/gloo_loop.py): the mean time of a gloo
all-reduce after compute, with the baseline measured in the same run.

Two processes (:func:`executor.launch.spawn`, which joins them with :func:`executor.comm.init_process_group`),
each pinned to a core of its own when the machine has two (else sharing one), run rounds of all-reduces; each
call follows ``--busy`` seconds of compute (a busy loop, as a training step's all-reduce follows its backward).
Rounds alternate the loop thread's policy: ``SCHED_OTHER`` (as gloo creates it) and ``SCHED_IDLE`` (what the
executor sets), so both see the same machine. Per size and policy it prints the trimmed mean (5% each end), the
median, the 90th percentile and the share of calls over 2 ms, then the ratio of the means.

Run: ``python benchmarks/bench_gloo_loop.py [--calls 300] [--busy 0.002] [--sizes 1024,737564]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import numpy as np

ROUNDS = 4
"""Rounds per policy; the policies alternate round by round."""


def _program(topo: Any, emit: Any, sizes: list[int], calls: int, busy_s: float) -> dict[str, dict[str, list[float]]]:
    import torch

    from gnnplan.executor import comm
    from gnnplan.executor.gloo_loop import loop_threads
    from gnnplan.executor.probe_io import _busy_s

    cores = sorted(os.sched_getaffinity(0))
    for task in os.listdir("/proc/self/task"):  # every thread, gloo's included (affinity is per thread)
        os.sched_setaffinity(int(task), {cores[topo.rank % len(cores)]})
    policies = {"as created": os.SCHED_OTHER, "SCHED_IDLE": os.SCHED_IDLE}
    times: dict[str, dict[str, list[float]]] = {name: {str(s): [] for s in sizes} for name in policies}
    for _ in range(ROUNDS):
        for name, policy in policies.items():
            for tid in loop_threads():
                os.sched_setscheduler(tid, policy, os.sched_param(0))
            for size in sizes:
                value = torch.ones(size // 4)
                comm.barrier()
                for i in range(calls // ROUNDS + 2):
                    _busy_s(busy_s)
                    start = time.perf_counter()
                    comm.all_reduce_(value)
                    if i >= 2:  # two warm-up calls per round
                        times[name][str(size)].append(time.perf_counter() - start)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="timed calls per size and policy")
    parser.add_argument("--busy", type=float, default=0.002, help="seconds of compute before each call")
    parser.add_argument("--sizes", default="1024,737564", help="bytes per rank, comma-separated")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.calls < ROUNDS or args.busy < 0 or any(s < 4 for s in sizes):
        parser.error(f"--calls must be >= {ROUNDS}, --busy >= 0 and every size >= 4 bytes")
    if not hasattr(os, "SCHED_IDLE"):
        print("bench_gloo_loop: this platform has no SCHED_IDLE", file=sys.stderr)
        return 2
    import scipy.stats

    from gnnplan.executor.launch import spawn

    times = spawn(_program, 2, (sizes, args.calls, args.busy))
    print(f"gloo all-reduce between 2 processes, each call after {args.busy * 1e3:g} ms of compute "
          f"({os.cpu_count()} cores here)")
    print(f"{'bytes':>9} {'loop thread':>12} {'mean ms':>8} {'median':>7} {'p90':>7} {'> 2 ms':>7}")
    for size in sizes:
        means = {}
        for name, per_size in times.items():
            t = np.asarray(per_size[str(size)]) * 1e3
            means[name] = float(scipy.stats.trim_mean(t, 0.05))
            print(f"{size:9d} {name:>12} {means[name]:8.3f} {np.median(t):7.3f} {np.percentile(t, 90):7.3f} "
                  f"{100 * np.mean(t > 2.0):6.1f}%")
        print(f"{size:9d} mean as created / mean SCHED_IDLE = {means['as created'] / means['SCHED_IDLE']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
