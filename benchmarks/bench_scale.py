"""Simulator wall time at scale (issue 10, "Simulation at scale").

Three parts, each timed in this run (wall times on a shared 2-core machine are noisy: read ratios, not digits):

1. Per strategy (dp, hopgnn, neutronstar) and cluster size (4, 16, 64, 256 GPUs: 4x1, 4x4, 8x8, 32x8 machines x
   GPUs of the ``2x4-a100-nvlink3-200gbib`` preset), the wall time of one simulation with the representative
   fast path (:mod:`gnnplan.simulator.symmetry`) and of the full simulation (``symmetry.disabled()``) measured
   in the same run, their ratio, and the relative difference of the predicted epoch times. The full simulation
   is skipped when the previous size's took longer than ``--full-budget`` seconds (cost grows ~10x per
   doubling of GPUs). Graph statistics are measured (or read from the disk cache) before the clock starts.
   Mini-batch strategies run the ``ogbn-papers100M`` dataset card (statistics estimated on its proxy);
   neutronstar a 100k-vertex R-MAT graph trained full-graph (its dependency counts need the graph).
2. The ``ogbn-papers100M`` card on 8 machines x 8 GPUs: wall time per configuration (target: under 1 s).
3. A 200-trial Optuna study over all strategies at 64 GPUs (8x8; target: under 60 s).

Usage: ``python benchmarks/bench_scale.py [--sizes 4,16,64,256] [--strategies dp,hopgnn,neutronstar]
[--full-budget 30] [--trials 200] [--parts sizes,card,study]``.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import time
from collections.abc import Iterator
from typing import Any

from gnnplan.autotune.study import TuneRequest, eligible_strategies, run_study
from gnnplan.simulator import symmetry
from gnnplan.simulator.api import load_context
from gnnplan.simulator.hardware.spec import ClusterSpec, load_cluster
from gnnplan.simulator.workload.spec import WorkloadSpec, workload_from_dict

BASE = "2x4-a100-nvlink3-200gbib"
SHAPES = {4: (4, 1), 16: (4, 4), 64: (8, 8), 256: (32, 8)}
CARD = {"dataset": "ogbn-papers100M", "model": {"arch": "sage", "num_layers": 2, "hidden_dim": 256},
        "training": {"mode": "mini-batch", "batch_size": 16384, "fanouts": [10, 10], "num_epochs": 1}}
FULL_GRAPH = {"dataset": {"generator": "rmat", "num_vertices": 100000, "edge_factor": 16, "feature_dim": 128,
                          "num_classes": 16, "seed": 0},
              "model": {"arch": "gcn", "num_layers": 2, "hidden_dim": 128},
              "training": {"mode": "full-graph", "num_epochs": 1}}
KNOBS: dict[str, dict[str, Any]] = {"dp": {"cache_fraction": 0.1, "num_sampler_workers": 2},
                                    "hopgnn": {"num_steps": 2}, "neutronstar": {"mode": "hybrid"}}
"""One configuration per strategy (hopgnn with a fixed step count: one simulation, not the controller's M)."""


def cluster(num_gpus: int) -> ClusterSpec:
    machines, gpus = SHAPES[num_gpus]
    base = load_cluster(BASE)
    return base.model_copy(update={"num_machines": machines, "gpus_per_machine": gpus,
                                   "name": f"{machines}x{gpus}-{BASE}"})


def workload(strategy: str) -> WorkloadSpec:
    return workload_from_dict(FULL_GRAPH if strategy == "neutronstar" else CARD)


def timed(strategy: str, num_gpus: int, full: bool) -> tuple[float, float, bool]:
    """(wall seconds of the strategy's simulate, predicted epoch seconds, whether a representative was used)."""
    module, knobs, ctx = load_context(cluster(num_gpus), workload(strategy), strategy, KNOBS[strategy])
    if not full:  # a strategy's own statistics (hopgnn's micrographs) are measured on first use: not timed
        module.simulate(ctx, knobs)
    with symmetry.disabled() if full else contextlib.nullcontext():
        start = time.perf_counter()
        result = module.simulate(ctx, knobs)
        wall = time.perf_counter() - start
    folded = any(s.args.get("machines_represented", 1) > 1 for s in result.spans if s.phase == "epoch")
    return wall, result.epoch_time_s, folded


def part_sizes(strategies: list[str], sizes: list[int], budget_s: float) -> Iterator[str]:
    yield f"{'strategy':<12}{'GPUs':>5}{'shape':>7}{'fast s':>10}{'full s':>10}{'full/fast':>10}" \
          f"{'epoch diff':>12}  path"
    for strategy in strategies:
        last_full = 0.0
        for n in sizes:
            fast, epoch, folded = timed(strategy, n, full=False)
            if last_full <= budget_s:
                last_full, full_epoch, _ = timed(strategy, n, full=True)
                full_text, ratio = f"{last_full:10.3f}", f"{last_full / fast:10.1f}"
                diff = f"{abs(epoch - full_epoch) / full_epoch:12.1e}"
            else:
                full_text, ratio, diff = f"{'skipped':>10}", f"{'-':>10}", f"{'-':>12}"
                last_full = math.inf
            shape = "x".join(map(str, SHAPES[n]))
            path = "representative machine" if folded else "full (asymmetric work)" if SHAPES[n][0] > 1 else "full"
            yield f"{strategy:<12}{n:>5}{shape:>7}{fast:10.3f}{full_text}{ratio}{diff}  {path}"


def part_card() -> Iterator[str]:
    configs = [("dp", {}), ("dp", {"cache_fraction": 0.2, "num_sampler_workers": 4}),
               ("dp", {"partitioner": "random", "cache_placement": "partitioned", "cache_fraction": 0.05}),
               ("hopgnn", {"num_steps": 2}), ("hopgnn", {"micrograph": False})]
    for strategy, knobs in configs:
        module, kn, ctx = load_context(cluster(64), workload_from_dict(CARD), strategy, knobs)
        module.simulate(ctx, kn)  # measures the strategy's own statistics on first use (cached): not timed
        start = time.perf_counter()
        result = module.simulate(ctx, kn)
        wall = time.perf_counter() - start
        verdict = "under 1 s" if wall < 1.0 else "OVER 1 s"
        yield f"{strategy:<8}{str(knobs):<78}{wall:8.3f} s  {verdict}  (epoch {result.epoch_time_s:.4g} s)"


def part_study(trials: int) -> Iterator[str]:
    wl = workload_from_dict(CARD)
    strategies = tuple(eligible_strategies(wl, None))
    req = TuneRequest(cluster(64), wl, strategies, num_trials=trials, storage="sqlite:///:memory:",
                      study_name="bench-scale")
    start = time.perf_counter()
    study = run_study(req)
    wall = time.perf_counter() - start
    counts: dict[str, int] = {}
    for t in study.trials:
        counts[str(t.params.get("strategy", "?"))] = counts.get(str(t.params.get("strategy", "?")), 0) + 1
    verdict = "under 60 s" if wall < 60.0 else "OVER 60 s"
    yield f"{trials} trials over {', '.join(strategies)} at 64 GPUs (8x8): {wall:.1f} s  {verdict}"
    yield f"trials per strategy: {counts}; best epoch {study.best_value:.4g} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4,16,64,256", help="GPU counts among 4, 16, 64, 256")
    parser.add_argument("--full-budget", type=float, default=30.0,
                        help="skip the full simulation after one that took longer than this (s)")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--parts", default="sizes,card,study")
    parser.add_argument("--strategies", default=",".join(KNOBS), help="strategies of part 1")
    args = parser.parse_args()
    parts = args.parts.split(",")
    if "sizes" in parts:
        print("1. wall time per configuration, representative fast path vs full simulation (same run)")
        sizes = [int(s) for s in args.sizes.split(",")]
        for line in part_sizes(args.strategies.split(","), sizes, args.full_budget):
            print(line, flush=True)
    if "card" in parts:
        print("\n2. ogbn-papers100M card on 8 machines x 8 GPUs: wall time per configuration")
        for line in part_card():
            print(line, flush=True)
    if "study" in parts:
        print("\n3. Optuna study over all strategies at 64 GPUs")
        for line in part_study(args.trials):
            print(line, flush=True)


if __name__ == "__main__":
    main()
