"""ppgnn's pre-propagation kept per process: what a study's ppgnn trials save.

A ppgnn simulation also simulates the one-off sharded pre-propagation (simulator/strategies/ppgnn/preprop.py),
whose all_to_all of every hop is simulated message by message up to 64 workers: W (W - 1) messages per hop, 7.5 s
of simulation at 8 x 8 GPUs on ogbn-papers100M's card (beyond 64, one message per machine pair: 10.5 s at 32 x 8).
It depends on the cluster, the dataset, the engine's seed and the hop count, not on ppgnn's other knobs, so
:func:`~gnnplan.simulator.strategies.ppgnn.preprop.simulate_preprocess` keeps its result for the process. This
script simulates the same ppgnn configurations (one hop count, the other knobs varied, as a study's trials) twice
in one run, with the statistics read before the clock starts:

* baseline: the kept results cleared before every simulation (as every simulation was before, 2026-12-01);
* kept: cleared once, then every simulation after the first reads the first one's pre-propagation;

and prints each configuration's wall seconds both ways, their totals and ratio, and checks that both give the same
epoch and pre-propagation seconds.

Usage: ``python benchmarks/bench_ppgnn_preprocess.py [--gpus 64]`` (4, 16, 64: the shapes of bench_scale.py).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from bench_scale import PRE_PROPAGATED, SHAPES, cluster

from gnnplan.simulator.api import load_context
from gnnplan.simulator.strategies.ppgnn import preprop
from gnnplan.simulator.strategies.ppgnn.shards import shard_stats
from gnnplan.simulator.workload.spec import workload_from_dict

CONFIGS: list[dict[str, Any]] = [{"hops": 2}, {"hops": 2, "loader": "fused"}, {"hops": 2, "placement": "host"},
                                 {"hops": 2, "reshuffle": "chunk"}, {"hops": 2, "loader": "baseline"}]
"""A study's ppgnn trials at one hop count (the other knobs varied)."""


def timed_pass(contexts: list[tuple[Any, Any, Any]], clear_each: bool) -> list[tuple[float, float, float]]:
    """(wall seconds, epoch seconds, pre-propagation seconds) of each configuration's simulation."""
    preprop._KEPT.clear()
    out = []
    for module, knobs, ctx in contexts:
        if clear_each:
            preprop._KEPT.clear()
        start = time.perf_counter()
        result = module.simulate(ctx, knobs)
        out.append((time.perf_counter() - start, result.epoch_time_s, result.breakdown_s["preprocess"]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=64, choices=sorted(SHAPES))
    args = parser.parse_args()
    wl = workload_from_dict(PRE_PROPAGATED)
    contexts = [load_context(cluster(args.gpus), wl, "ppgnn", knobs) for knobs in CONFIGS]
    shard_stats(wl.dataset, contexts[0][2].num_workers)  # measured or read before the clock starts
    base = timed_pass(contexts, clear_each=True)
    kept = timed_pass(contexts, clear_each=False)
    machines, gpus = SHAPES[args.gpus]
    print(f"ppgnn on {PRE_PROPAGATED['dataset']} (SGC), {machines} x {gpus} GPUs: seconds per simulation")
    print(f"{'knobs':<46}{'baseline s':>12}{'kept s':>10}{'same result':>13}")
    for knobs, b, k in zip(CONFIGS, base, kept):
        print(f"{str(knobs):<46}{b[0]:12.3f}{k[0]:10.3f}{str(b[1:] == k[1:]):>13}")
    total_b, total_k = sum(b[0] for b in base), sum(k[0] for k in kept)
    print(f"{'all ' + str(len(CONFIGS)):<46}{total_b:12.3f}{total_k:10.3f}   baseline / kept {total_b / total_k:.1f}x")


if __name__ == "__main__":
    main()
