"""Benchmark: does a calibration carry over to the strategies it was not fitted on?

A user calibrates on the runs they made (``gnnplan loop`` fits its one plan's trace) and then asks the simulator
about strategies they have not run. This measures that transfer on this machine, for all six strategies at once:

1. every strategy runs its Cora workload for real (:data:`WORKLOADS`: dp, gsplit and hopgnn train ``cora-sage``,
   neutronstar and hongtu ``cora-gcn-full``, ppgnn ``cora-sgc``; default knobs, hopgnn at one step as
   :data:`KNOBS` fixes), ``--nprocs`` gloo workers as machines, traced, ``--rounds`` times round-robin
   (:func:`measure.measure`: a slow period of this shared machine spoils one run of several strategies, not every
   run of one); a strategy's measured epoch time is the median over its rounds;
2. three predictions of each strategy's epoch, on the cluster of this machine (``--cluster``, default the probed
   ``local``):
   * uncalibrated;
   * **leave one strategy out**: calibrated on every other strategy's traces, never on its own (the held-out
     configurations of ``gnnplan calibrate``, :func:`simulator.calibrate_holdout.held_out_configurations`);
   * **from one strategy** (``--calibrate-on``, default dp): calibrated on that strategy's traces alone, as
     ``gnnplan loop`` does after its run;
3. printed: per strategy measured, the run-to-run error (each round against the median of the others: the noise
   floor of any prediction), each prediction and its error; the mean absolute error of each column; and for the
   strategies that train the same workload, whether each prediction orders them as measured.

Every error printed is held out: no prediction was fitted to the strategy it predicts. ``--traces DIR`` keeps the
runs' traces there; ``--replay DIR`` predicts again from such a folder without running anything (a model change
checked against the same measurements; the measured time of a run is its trace's ``results.epoch_time_s``).

Usage::

    python benchmarks/bench_transfer.py [--cluster local] [--rounds 2] [--epochs 12] [--nprocs 2]
        [--calibrate-on dp] [--traces DIR | --replay DIR]

Takes ~3 minutes with the defaults on 2 cores (6 strategies x 2 rounds x 12 Cora epochs, then ~15 s of fits).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("DGLBACKEND", "pytorch")

from measure import Measured, cluster_of_this_machine, measure, plan_for  # noqa: E402

WORKLOADS = {"dp": "cora-sage", "gsplit": "cora-sage", "hopgnn": "cora-sage", "neutronstar": "cora-gcn-full",
             "hongtu": "cora-gcn-full", "ppgnn": "cora-sgc"}
"""Each strategy's Cora workload (the first shipped Cora preset it trains)."""
KNOBS: dict[str, dict[str, Any]] = {"hopgnn": {"num_steps": 1}}
"""Knobs other than the defaults: hopgnn at a fixed step count (its merge controller spends the first epochs on
step counts it may not keep, which the simulation does not predict)."""


def run_all(cluster: Any, args: argparse.Namespace, trace_dir: str) -> dict[str, list[str]]:
    """Run every strategy ``args.rounds`` times round-robin; returns each strategy's traces."""
    plans = {name: plan_for(cluster, wl, name, KNOBS.get(name, {}), args.nprocs, args.epochs)
             for name, wl in WORKLOADS.items()}
    measured = measure(plans, args.rounds, trace_dir, args.epochs)
    return {name: [r["trace"] for r in m.results] for name, m in measured.items()}


def replayed(folder: Path) -> dict[str, list[str]]:
    """The traces of an earlier run of this benchmark (``--traces``), by strategy."""
    from gnnplan.simulator.trace import read_trace

    out: dict[str, list[str]] = defaultdict(list)
    for path in sorted(folder.glob("*.json")):
        _, meta = read_trace(path)
        out[str(meta["strategy"])].append(str(path))
    missing = set(WORKLOADS) - set(out)
    if missing:
        raise SystemExit(f"--replay: {folder} has no trace of {', '.join(sorted(missing))}")
    return out


def epoch_s(path: str) -> float:
    """A run's measured epoch time (its trace's ``results.epoch_time_s``: the median of its measured epochs)."""
    from gnnplan.simulator.trace import read_trace

    return float(read_trace(path)[1]["results"]["epoch_time_s"])


def apart(a: str, b: str, measured: dict[str, float], noise: dict[str, float]) -> bool:
    """Whether strategies ``a`` and ``b`` differ in measured epoch time by more than twice the larger of their
    run-to-run errors (their order is then a measurement, not noise; with one run each, any difference)."""
    floor = max((x for x in (noise[a], noise[b]) if not math.isnan(x)), default=0.0)
    return abs(measured[a] / measured[b] - 1.0) > 2.0 * floor


def ordered(a: str, b: str, measured: dict[str, float], predicted: dict[str, float]) -> bool:
    """Whether ``predicted`` orders ``a`` and ``b`` as ``measured`` does."""
    return (measured[a] < measured[b]) == (predicted[a] < predicted[b])


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the process exit code (0: it reports, it does not judge)."""
    from gnnplan.simulator.api import simulate
    from gnnplan.simulator.calibrate import calibrate_files
    from gnnplan.simulator.plan import Plan
    from gnnplan.simulator.trace import read_trace

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cluster", default="local")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--nprocs", type=int, default=2)
    ap.add_argument("--calibrate-on", default="dp", choices=sorted(WORKLOADS))
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--traces", type=Path, help="keep the runs' traces in this folder")
    where.add_argument("--replay", type=Path, help="predict from the traces of an earlier --traces folder")
    args = ap.parse_args(argv)
    cluster = cluster_of_this_machine(args.cluster, args.nprocs)
    cluster = cluster.model_copy(update={"num_machines": args.nprocs, "gpus_per_machine": 1})
    with tempfile.TemporaryDirectory() as tmp:
        if args.replay is not None:
            traces = replayed(args.replay)
        else:
            folder = args.traces or Path(tmp)
            folder.mkdir(parents=True, exist_ok=True)
            traces = run_all(cluster, args, str(folder))
        plans = {name: Plan.model_validate(read_trace(paths[0])[1]["plan"]) for name, paths in traces.items()}
        timed = {name: Measured([epoch_s(p) for p in paths]) for name, paths in traces.items()}  # each read once
        measured = {name: m.median_s for name, m in timed.items()}
        noise = {name: m.rerun_error for name, m in timed.items()}
        every = [p for name in WORKLOADS for p in traces[name]]
        _, report = calibrate_files(every, cluster)
        left_out = {row["configuration"].split()[0]: float(row["predicted_s"])  # one configuration per strategy
                    for row in report["held_out"]["configurations"]["rows"]}
        one, _ = calibrate_files(traces[args.calibrate_on], cluster)

        def predicted(spec: Any, name: str) -> float:
            plan = plans[name]
            return simulate(spec, plan.workload, name, plan.knobs).epoch_time_s

        columns = {"uncalibrated": {n: predicted(cluster, n) for n in WORKLOADS},
                   "leave one strategy out": left_out,
                   f"from {args.calibrate_on} alone": {n: predicted(one, n) for n in WORKLOADS
                                                        if n != args.calibrate_on}}
    runs = min(len(p) for p in traces.values())
    print(f"cluster {cluster.name} ({cluster.gpu.model}): {args.nprocs} worker processes, one modelled machine each")
    print(f"measured: median over {runs}+ runs of each run's median epoch; rerun: the run-to-run error (each run "
          f"against the median of the others), the noise floor of any prediction; each prediction column: "
          f"predicted epoch time and its error against measured")
    width = {label: max(len(label), 18) + 2 for label in columns}
    print(f"{'strategy':<12}{'workload':<15}{'measured':>10}{'rerun':>8}"
          + "".join(f"{label:>{width[label]}}" for label in columns))
    for name in WORKLOADS:
        line = f"{name:<12}{WORKLOADS[name]:<15}{measured[name] * 1e3:>8.2f}ms{noise[name]:>8.1%}"
        for label, values in columns.items():
            cell = "- (fitted on it)" if name not in values else \
                f"{values[name] * 1e3:.2f}ms {values[name] / measured[name] - 1:+6.1%}"
            line += f"{cell:>{width[label]}}"
        print(line)
    for label, values in columns.items():
        errors = [abs(v / measured[n] - 1.0) for n, v in values.items()]
        print(f"{label}: mean |error| {statistics.fmean(errors):.1%} over {len(errors)} strategies (held out), "
              f"worst {max(errors):.1%}")
    print(f"rerun (noise floor): mean {statistics.fmean(noise.values()):.1%}")
    by_workload: dict[str, list[str]] = defaultdict(list)
    for name, wl in WORKLOADS.items():
        by_workload[wl].append(name)
    for wl, names in by_workload.items():
        if len(names) < 2:
            continue
        truth = " < ".join(sorted(names, key=measured.__getitem__))
        pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:] if apart(a, b, measured, noise)]
        if not pairs:
            print(f"{wl}: measured {truth}, but no two differ by more than twice their rerun error: no order to check")
            continue
        said = "; ".join(f"{label} {sum(ordered(a, b, measured, v) for a, b in pairs if a in v and b in v)} of "
                         f"{sum(1 for a, b in pairs if a in v and b in v)}" for label, v in columns.items())
        print(f"{wl}: measured {truth}; of the pairs that differ by more than twice their rerun error, ordered as "
              f"measured by: {said}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
