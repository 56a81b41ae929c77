"""Benchmark: how well does the simulator predict the evaluation after each epoch (layer-wise inference), which
``run --json`` times apart from the epoch (``evaluation_time_s``)?

Procedure, all in one run of this script on this machine:

1. run every configuration for real (``gnnplan run``, ``--nprocs`` gloo workers, traced): Cora and CiteSeer with
   dp, hopgnn and gsplit, and rmat100k with dp (the strategies whose executors evaluate by layer-wise inference);
2. predict each one's ``evaluation_time_s`` (:mod:`simulator.strategies.inference_time`) uncalibrated, and with
   the cluster calibrated on the OTHER configurations' traces (``gnnplan calibrate``; leave one out). Calibration
   fits the rates from training spans only: no evaluation time is ever fitted, so both columns are predictions.

There is no goal figure: the errors are what they are; the closing note quotes them.

Usage::

    python benchmarks/bench_evaluation.py [--cluster local] [--nprocs 2] [--epochs 4]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DGLBACKEND", "pytorch")

from measure import error_summary, plan_for  # noqa: E402

CONFIGS = (("cora-sage", "dp", {}), ("cora-sage", "hopgnn", {}), ("cora-sage", "gsplit", {}),
           ("citeseer-sage", "dp", {}), ("citeseer-sage", "gsplit", {}), ("rmat100k-sage", "dp", {}))
"""(workload preset, strategy, knobs) of every run."""


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the process exit code (0 when it ran: it reports, it has no goal)."""
    from gnnplan.executor.runner import run_plan
    from gnnplan.simulator.api import simulate
    from gnnplan.simulator.calibrate import calibrate_files
    from gnnplan.simulator.hardware.spec import load_cluster

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cluster", default="local")
    ap.add_argument("--nprocs", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=4)
    args = ap.parse_args(argv)
    cluster = load_cluster(args.cluster)
    with tempfile.TemporaryDirectory(prefix="gnnplan-bench-evaluation-") as tmp:
        runs = []
        for workload, strategy, knobs in CONFIGS:
            plan = plan_for(cluster, workload, strategy, knobs, args.nprocs, args.epochs)
            res = run_plan(plan, trace_dir=Path(tmp) / workload, progress=False)
            runs.append((plan, res))
            print(f"ran {workload} {strategy}: epoch {res['epoch_time_s'] * 1e3:.1f} ms, evaluation "
                  f"{res['evaluation_time_s'] * 1e3:.1f} ms", flush=True)
        print(f"\n{'configuration':28s} {'measured':>10s} {'uncal.':>10s} {'error':>7s} {'held out':>10s} "
              f"{'error':>7s}")
        errors: dict[str, list[float]] = {"uncalibrated": [], "calibrated on the other configurations": []}
        for i, (plan, res) in enumerate(runs):
            others = [r["trace"] for j, (_, r) in enumerate(runs) if j != i]
            calibrated, _ = calibrate_files(others, cluster)
            shape = {"num_machines": plan.cluster.num_machines, "gpus_per_machine": 1}
            measured = res["evaluation_time_s"]
            before = simulate(plan.cluster, plan.workload, plan.strategy, plan.knobs).evaluation_time_s
            after = simulate(calibrated.model_copy(update=shape), plan.workload, plan.strategy,
                             plan.knobs).evaluation_time_s
            e0, e1 = before / measured - 1, after / measured - 1
            errors["uncalibrated"].append(e0)
            errors["calibrated on the other configurations"].append(e1)
            print(f"{plan.workload.name + ' ' + plan.strategy:28s} {measured * 1e3:8.1f}ms {before * 1e3:8.1f}ms "
                  f"{e0:+7.1%} {after * 1e3:8.1f}ms {e1:+7.1%}", flush=True)
        for label, errs in errors.items():
            print(error_summary(label, errs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
