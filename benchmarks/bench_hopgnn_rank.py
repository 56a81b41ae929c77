"""Benchmark: does the calibrated simulator rank ``hopgnn`` and ``dp`` as measured on this machine?

For each configuration (workload on ``--workers`` local gloo processes = machines) both strategies are trained
with the executor (median epoch time over the measured epochs); the ``local`` cluster is calibrated from the
``dp`` traces only (:func:`simulator.calibrate.calibrate_files`: the span kinds it fits are ``dp``'s; ``hopgnn``'s
``pregather``/``migrate`` spans are not used), then both strategies are simulated on the
calibrated cluster. Prints measured and predicted epoch times, hopgnn/dp ratios, and whether the predicted
order equals the measured one. Also lists the strategies the tuner offers for each workload.

Usage::

    python benchmarks/bench_hopgnn_rank.py [--epochs 5] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DGLBACKEND", "pytorch")

from bench_hopgnn import RMAT, run, workload

HOP_KNOBS: dict[str, Any] = {"num_steps": 2, "seed_split": "random"}
"""The ``hopgnn`` configuration ranked: the paper's setting (globally random mini-batches, no merging)."""


def configs(epochs: int) -> list[tuple[str, Any]]:
    """(name, workload) pairs: Cora (1433-dim features) and the R-MAT graph at two batch sizes."""
    return [("cora-b64", workload("cora", 64, [10, 10], epochs)),
            ("rmat20k-b512", workload(RMAT, 512, [10, 10], epochs)),
            ("rmat20k-b128", workload(RMAT, 128, [5, 5], epochs))]


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    from gnnplan.autotune.study import eligible_strategies
    from gnnplan.simulator.api import simulate
    from gnnplan.simulator.calibrate import calibrate_files
    from gnnplan.simulator.hardware.spec import load_cluster

    with tempfile.TemporaryDirectory(prefix="gnnplan-bench-") as tmp:
        os.environ.setdefault("GNNPLAN_HOME", tmp)
        measured, traces = {}, []
        for name, wl in configs(args.epochs):
            print(f"{name}: tuner offers {', '.join(eligible_strategies(wl, None))}", flush=True)
            for strategy, knobs in (("dp", {}), ("hopgnn", HOP_KNOBS)):
                res = run(strategy, wl, args.workers, knobs, tmp)
                measured[(name, strategy)] = res["epoch_time_s"]
                if strategy == "dp":
                    traces.append(res["trace"])
        base = load_cluster("local").model_copy(update={"num_machines": args.workers, "gpus_per_machine": 1})
        calibrated, report = calibrate_files(traces, base)
        print(f"calibrated from {len(traces)} dp traces: " + ", ".join(
            f"{p}={v['after']:.3g}" for p, v in report["parameters"].items() if v["constrained"]))
        agree = 0
        print(f"{'config':<14} {'dp_meas_s':>10} {'hop_meas_s':>11} {'dp_pred_s':>10} {'hop_pred_s':>11} "
              f"{'meas hop/dp':>12} {'pred hop/dp':>12}  order")
        for name, wl in configs(args.epochs):
            pred = {s: simulate(calibrated, wl, s, k).epoch_time_s for s, k in (("dp", {}), ("hopgnn", HOP_KNOBS))}
            m_dp, m_hop = measured[(name, "dp")], measured[(name, "hopgnn")]
            same = (m_hop < m_dp) == (pred["hopgnn"] < pred["dp"])
            agree += same
            print(f"{name:<14} {m_dp:>10.4f} {m_hop:>11.4f} {pred['dp']:>10.4f} {pred['hopgnn']:>11.4f} "
                  f"{m_hop / m_dp:>12.3f} {pred['hopgnn'] / pred['dp']:>12.3f}  {'agree' if same else 'DISAGREE'}",
                  flush=True)
        print(f"ranking agrees for {agree} of {len(configs(args.epochs))} configurations")
    return 0


if __name__ == "__main__":
    sys.exit(main())
