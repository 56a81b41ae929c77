"""Benchmark: what the forkserver's preloaded modules save each start of local workers (executor/launch.py).

A local run forks its workers from one ``forkserver`` server that imported :data:`executor.launch.PRELOAD`
first. The first ``torch.optim`` optimizer a worker builds imports ``torch._dynamo`` (torch 2.13), which the server
preloads too since 2026-11-30. This script times the same work with the server's preload as shipped and, as the
baseline, without ``torch._dynamo``: each variant in a fresh Python process (a process has one forkserver),
rounds alternating so machine noise hits both. A start is ``spawn`` of N workers that each build Cora's dp trainer
(GCN, fanouts [5, 5], 20% cache) and train one epoch, timed from the call to its return, after one untimed start
that launches the server.

Prints each variant's median start time and the ratio baseline / shipped (goal: > 1, the preload saves time).
Measured on the 2-core development machine (2026-11-30, defaults, another job running): shipped 0.44 s per start of 2
workers (0.36-0.52 s), baseline 3.31 s (1.86-3.44 s): ratio 7.62.

Usage::

    python benchmarks/bench_worker_start.py [--workers 2] [--starts 3] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("DGLBACKEND", "pytorch")


def one_epoch(topo: Any, emit: Any) -> dict[str, float]:
    """Build Cora's dp trainer on ``topo`` and train one epoch (the worker's program)."""
    from executor_workers import make_plan

    from gnnplan.executor.strategies import get_executor
    from gnnplan.executor.trace import Recorder

    plan = make_plan("gcn", topo.world_size, {"cache_fraction": 0.2}, fanouts=[5, 5])
    trainer = get_executor("dp").Trainer(topo, plan, Recorder(topo.rank, 0.0))
    trainer.train_epoch(0)
    trainer.close()
    return {}


def measure(variant: str, workers: int, starts: int) -> list[float]:
    """Seconds of each timed start in this process, with the server's preload of ``variant``."""
    from gnnplan.executor import launch

    if variant == "baseline":
        launch.PRELOAD = tuple(m for m in launch.PRELOAD if m != "torch._dynamo")
    launch.spawn(one_epoch, workers, ())  # starts the server
    times = []
    for _ in range(starts):
        t0 = time.perf_counter()
        launch.spawn(one_epoch, workers, ())
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--starts", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--variant", choices=["shipped", "baseline"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.variant:  # a child: one variant, its times as JSON on stdout
        print(json.dumps(measure(args.variant, args.workers, args.starts)))
        return
    times: dict[str, list[float]] = {"shipped": [], "baseline": []}
    for _ in range(args.rounds):
        for variant in times:
            out = subprocess.run([sys.executable, __file__, "--variant", variant, "--workers", str(args.workers),
                                  "--starts", str(args.starts)], check=True, capture_output=True, text=True).stdout
            times[variant] += json.loads(out.strip().splitlines()[-1])
    med = {v: statistics.median(t) for v, t in times.items()}
    for v, t in times.items():
        print(f"{v:9s} median {med[v]:.2f} s per start of {args.workers} workers "
              f"(range {min(t):.2f}-{max(t):.2f} s, {len(t)} starts)")
    print(f"ratio baseline / shipped: {med['baseline'] / med['shipped']:.2f} (goal: > 1)")


if __name__ == "__main__":
    main()
