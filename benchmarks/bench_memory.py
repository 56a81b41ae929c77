"""Benchmark: how well does the simulator predict the peak host memory of runs it was not calibrated on?

Procedure, all in one run of this script on this machine:

1. run every configuration for real (``gnnplan run``, ``--nprocs`` gloo workers, traced): by default Cora and
   CiteSeer with dp, dp with a feature cache, hopgnn, neutronstar and gsplit (``--large`` adds rmat100k with dp,
   replicated and partitioned: the graph whose data outgrows the per-process constant); each run measures its
   epochs' peak resident host memory per machine (``peak_memory_bytes.host``, the larger of training's and the
   evaluation's after it, :mod:`executor.memory`), printed per phase beside the uncalibrated prediction of each;
2. ``gnnplan calibrate`` all traces (:mod:`simulator.calibrate_memory`: ``host.process_bytes`` as the median of
   what each trace implies) and print, per configuration, measured, uncalibrated and held-out predictions (each
   configuration predicted from the OTHER configurations' traces), then leave one dataset out (each dataset's
   configurations predicted from the other dataset's traces only), the harder transfer; with several
   ``--gpus-per-machine`` layouts, also each layout's runs predicted from the other layouts' traces only (e.g. a
   machine of 2 workers, which share the machine's graph and features, from runs of 1 worker per machine);
3. with ``--emulate`` (root with CAP_NET_ADMIN), run the first CiteSeer configuration on 2 emulated machines under
   each ``--limits`` memory limit and say whether it ran or the kernel killed it for exceeding the limit, beside
   the calibrated and uncalibrated predictions: can the prediction tell whether a run fits?

There is no goal figure: the errors are what they are; the README quotes them.

Usage::

    python benchmarks/bench_memory.py [--cluster local] [--nprocs 2] [--epochs 4] [--large]
                                      [--gpus-per-machine 1,2] [--emulate --limits 380MB,400MB]
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DGLBACKEND", "pytorch")

from measure import cluster_of_this_machine, error_summary, plan_for  # noqa: E402

CONFIGS = (("cora-sage", "dp", {}), ("cora-sage", "dp", {"cache_fraction": 0.5}),
           ("cora-sage", "hopgnn", {"num_steps": 2}), ("cora-gcn-full", "neutronstar", {}),
           ("citeseer-sage", "dp", {}), ("citeseer-sage", "gsplit", {}))
"""(workload preset, strategy, knobs) of every run."""
LARGE = (("rmat100k-sage", "dp", {}),
         ("rmat100k-sage", "dp", {"partitioner": "random", "graph_structure": "partitioned"}))
"""What ``--large`` adds: a graph whose features, structure and inference blocks are hundreds of MB, replicated and
partitioned (each machine keeps its vertices' in-edges)."""
MB = 1e6


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the process exit code (0 when it ran: it reports, it has no goal)."""
    from gnnplan.executor.runner import run_plan
    from gnnplan.simulator.api import simulate
    from gnnplan.simulator.calibrate import calibrate_files
    from gnnplan.simulator.units_parse import parse_quantity

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cluster", default="local")
    ap.add_argument("--nprocs", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--large", action="store_true",
                    help="also run rmat100k with dp, replicated and partitioned (~25 s more)")
    ap.add_argument("--gpus-per-machine", default="1",
                    help="comma-separated workers per machine: every configuration runs once per layout, its "
                         "nprocs workers as nprocs/G machines of G (e.g. 1,2: 2 machines x 1 and 1 machine x 2)")
    ap.add_argument("--emulate", action="store_true", help="also run under emulated memory limits (root)")
    ap.add_argument("--limits", default="380MB,400MB,440MB", help="memory limits per emulated machine")
    args = ap.parse_args(argv)
    cluster = cluster_of_this_machine(args.cluster)
    layouts = [int(g) for g in args.gpus_per_machine.split(",") if g.strip().isdigit()]
    if not layouts or len(layouts) != len(args.gpus_per_machine.split(",")) or any(
            g < 1 or args.nprocs % g for g in layouts):
        ap.error(f"--gpus-per-machine: comma-separated workers per machine, each dividing --nprocs "
                 f"{args.nprocs}, got {args.gpus_per_machine!r}")
    with tempfile.TemporaryDirectory(prefix="gnnplan-bench-memory-") as tmp:
        traces, datasets, shapes, labels = [], {}, {}, {}
        print("peak host memory per machine, MB: measured / uncalibrated prediction")
        print(f"{'configuration':52s} {'epoch':>8s} {'training':>15s} {'evaluation':>15s} {'run':>15s}")
        for (workload, strategy, knobs), g in itertools.product(CONFIGS + (LARGE if args.large else ()), layouts):
            plan = plan_for(cluster, workload, strategy, knobs, args.nprocs, args.epochs, g)
            res = run_plan(plan, trace_dir=Path(tmp) / workload, progress=False, gpus_per_machine=g)
            traces.append(res["trace"])
            label = f"{plan.cluster.num_machines}x{g} {workload} {strategy} {knobs}"
            for key in (res["trace"], Path(res["trace"]).name):  # calibrate_files names a trace by its file name
                datasets[key], shapes[key], labels[key] = plan.workload.dataset_name, g, label
            predicted = simulate(plan.cluster, plan.workload, strategy, knobs)
            phases = predicted.peak_memory_phases or {"training": predicted.peak_memory_bytes}
            cells = [_pair(res["peak_memory_phases"][p]["host"], phases[p]["host"] if p in phases else None)
                     for p in ("training", "evaluation")]
            cells.append(_pair(res["peak_memory_bytes"]["host"], predicted.peak_memory_bytes["host"]))
            print(f"{label:52s} {res['epoch_time_s'] * 1e3:6.1f}ms {cells[0]:>15s} {cells[1]:>15s} {cells[2]:>15s}",
                  flush=True)
        calibrated, report = calibrate_files(traces, cluster)
        memory = report["memory"]
        print(f"\nhost.process_bytes: {memory['before'] / MB:.1f} MB before, {memory['after'] / MB:.1f} MB fitted "
              "(median over the traces)")
        print(f"{'configuration':58s} {'measured':>9s} {'uncal.':>8s} {'error':>7s} {'held out':>9s} {'error':>7s} "
              f"{'dataset out':>11s} {'layout out':>10s}")
        fit, implied = memory["fit"], memory["implied_bytes"]
        errors: dict[str, list[float]] = {"uncalibrated": [], "held out (other configurations)": [],
                                          "held out (other dataset only)": [], "held out (other layout only)": []}
        for row in memory["held_out"]["rows"]:
            name, measured = row["trace"], row["measured_host_bytes"]

            def out_of(group: dict[str, Any]) -> float | None:
                """The error predicting ``name`` from the traces of the other values of ``group`` only."""
                others = [v for n, v in implied.items() if group[n] != group[name]]
                if not others:
                    return None
                return (fit[name]["zero_bytes"] + fit[name]["copies"] * statistics.median(others)) / measured - 1

            dataset_out, layout_out = out_of(datasets), out_of(shapes)
            for label, e in zip(errors, (row["error_before_fraction"], row["error_fraction"], dataset_out,
                                         layout_out)):
                if e is not None:
                    errors[label].append(e)
            print(f"{labels[name][:58]:58s} {measured / MB:8.1f}M {row['predicted_before_bytes'] / MB:7.1f}M "
                  f"{row['error_before_fraction']:+7.1%} {row['predicted_bytes'] / MB:8.1f}M "
                  f"{row['error_fraction']:+7.1%} {_percent(dataset_out):>11s} {_percent(layout_out):>10s}")
        for label, errs in errors.items():
            if errs:
                print(error_summary(label, errs))
        if args.emulate:
            _emulated_limits(args, cluster, calibrated, [parse_quantity(x, "bytes", "--limits")
                                                         for x in args.limits.split(",")], tmp)
    return 0


def _percent(error: float | None) -> str:
    """``+x.x%``, or ``-`` where there was nothing to predict from."""
    return "-" if error is None else f"{error:+.1%}"


def _pair(measured: float | None, predicted: float | None) -> str:
    """``measured / predicted`` in MB, ``-`` for a missing value."""
    return " / ".join("-" if v is None else f"{v / MB:.1f}" for v in (measured, predicted))


def _emulated_limits(args: Any, cluster: Any, calibrated: Any, limits: list[float], tmp: str) -> None:
    """Step 3 of the module docstring (``limits`` in bytes per machine)."""
    from gnnplan.executor.emulate import MachineLimits
    from gnnplan.executor.emulated_run import run_emulated
    from gnnplan.executor.monitor import WorkerError
    from gnnplan.simulator.api import simulate

    workload, strategy, knobs = next(c for c in CONFIGS if c[0].startswith("citeseer"))
    plan = plan_for(cluster, workload, strategy, knobs, 2, args.epochs)
    before = simulate(plan.cluster, plan.workload, strategy, knobs).peak_memory_bytes["host"]
    after = simulate(calibrated.model_copy(update={"num_machines": 2, "gpus_per_machine": 1}), plan.workload,
                     strategy, knobs).peak_memory_bytes["host"]
    print(f"\n{workload} {strategy} on 2 emulated machines: predicted {before / MB:.1f} MB per machine uncalibrated, "
          f"{after / MB:.1f} MB calibrated")
    for limit in limits:
        try:
            res = run_emulated(plan, trace_dir=Path(tmp) / "emulated", limits=MachineLimits(None, memory_bytes=limit),
                               timeout_s=600)
            outcome = f"ran (peak resident {res['peak_memory_bytes']['host'] / MB:.1f} MB)"
        except WorkerError as exc:
            outcome = f"failed: {exc}"
        print(f"  limit {limit / MB:.0f} MB: {outcome}; predicted to fit: uncalibrated "
              f"{'yes' if before <= limit else 'no'}, calibrated {'yes' if after <= limit else 'no'}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
