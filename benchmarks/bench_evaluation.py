"""Benchmark: how well does the simulator predict the evaluation after each epoch (layer-wise inference), which
``run --json`` times apart from the epoch (``evaluation_time_s``)?

Procedure, all in one run of this script on this machine:

1. run every configuration for real (``gnnplan run``, ``--nprocs`` gloo workers, traced): Cora with dp, hopgnn and
   gsplit, CiteSeer with dp and gsplit, and rmat100k with all three (the strategies whose executors evaluate by
   layer-wise inference; rmat100k's evaluation blocks hold ~0.9 M edges, Cora's and CiteSeer's ~5 k);
2. predict each one's ``evaluation_time_s`` (:mod:`simulator.strategies.inference_time`) and epoch time uncalibrated,
   and with the cluster calibrated on the OTHER configurations' traces (``gnnplan calibrate``; leave one out), twice:
   on their training spans only (the evaluation's ``eval_*`` spans removed from the traces), and on all their spans
   (calibration prices the evaluation's spans too: :func:`simulator.strategies.calibration_rules.evaluation_rules`);
   and a fourth time with the cluster calibrated on all the spans of the runs of the OTHER datasets only (column
   ``other ds``: the transfer to a graph the calibration has not seen, e.g. Cora's runs predicted from CiteSeer's
   and rmat100k's). No configuration's own spans are fitted in its predictions: every column is a prediction.

There is no goal figure: the errors are what they are. Bundled ``local`` preset (its probed full-neighbour
sampling ratio 2.95), 2 workers as 2 machines, 4 epochs; two runs on this machine, hours apart (the second with
the activation kernel after a hidden layer priced, which moves the predictions by under 1%; the measured
evaluations moved more: rmat100k's dp evaluation took 475 ms in the second):

* evaluation, uncalibrated: -27% .. +34% (mean |error| 19%; rmat100k +17% .. +34%), then -41% .. +80% (39%;
  rmat100k +55% .. +80%, Cora and CiteSeer -7% .. -41%; 2026-11-29, 7 min 41 s);
* evaluation, calibrated on the others' training spans: +10% .. +123% (55%) / -18% .. +186% (67%); rmat100k
  +82% .. +123% / +129% .. +186% (the forward fraction fitted on small training batches understates large
  blocks' kernels);
* evaluation, calibrated on all the others' spans (the ratios fitted to their evaluations): -54% .. -1% (27%) /
  -67% .. +7% (32%); rmat100k -14% .. -1% / -1% .. +7%, but Cora and CiteSeer -30% .. -54% / -35% .. -67%: their
  ~5 k-edge chunks are a training batch's size, and the ratios fitted mostly on rmat100k's ~0.9 M-edge chunks
  overstate their speed;
* epoch time, calibrated on the training spans / on all spans: mean |error| 11.3% / 11.7%, then 11.9% / 12.1%:
  fitting the evaluation's spans leaves the training predictions as they were.

A third run (2026-11-29, 5 min 49 s), after a gather's bytes were priced read and written
(:data:`simulator.hardware.formulas.GATHER_TRAFFIC`) and the preset's ``efficiency.gather_fraction`` derived from
its own gather and copy rates (0.191: the loads priced ~10x slower than at the copy rate): evaluation uncalibrated
+1.5% .. +91.5% (38.8%; rmat100k +74% .. +92%, Cora and CiteSeer +1.5% .. +18.5%, no longer under-predicted);
calibrated on the training spans +0.2% .. +150% (57.0%); on all spans -56.7% .. +0.8% (27.9%; rmat100k -2.3% ..
+0.8%, Cora and CiteSeer -33% .. -57%); epoch time 11.9% / 11.5%.

A fourth run (2026-11-29 evening, 5 min 3 s, with the column ``other ds``), on a cluster probed on this machine in
the same run (:func:`measure.cluster_of_this_machine`; the bundled preset of the earlier runs had been measured on
another CPU, 2x slower at matmul, and priced no dropout draws): evaluation uncalibrated -62% .. -13% (40.7%);
calibrated on the others' training spans -23% .. +68% (31.1%), on all their spans -51% .. +8% (23.0%), on the
other datasets' runs only -51% .. +49% (34.5%: Cora's and CiteSeer's from the others' -15% .. -51%, rmat100k's from
the small graphs' +37% .. +49%); epoch time uncalibrated -49% .. -35% (43.4%: the probe's rates, measured one kernel
at a time, are faster than the runs' kernels), calibrated on the others' training spans -22% .. +11% (10.6%), on all
their spans -23% .. +12% (11.0%), on the other datasets' runs only -25% .. +17% (15.0%: Cora and CiteSeer from the
other small graph and rmat100k -11% .. +17%, rmat100k from Cora and CiteSeer -14% .. -25%). The run just before, on
the old bundled preset: epoch uncalibrated -39% .. -3% (22.3%), other datasets only -42% .. +18% (21.1%; rmat100k
-36% .. -42%). A fifth run 25 min later, after gsplit's split aggregations were priced as index operations
(:data:`simulator.strategies.gsplit.work.INDEX_OP_TRAFFIC`): epoch uncalibrated -52% .. -13% (28.7%), from the
others' training spans -37% .. +21% (10.4%), from the other datasets only -37% .. +27% (12.5%; rmat100k from
Cora and CiteSeer -4% .. -13%; CiteSeer dp's run measured 59 ms against 43 ms in the fourth, -37% in every
column); evaluation uncalibrated -40% .. -2% (23.5%), other datasets only -36% .. +45% (30.1%).

Where the single ratio fails (analysed on 2026-11-29 from the spans): the aggregation's rate depends on the block.
DGL's ``update_all(copy_u, mean)`` on one core ran at 1.5-1.9 GFLOP/s on random blocks of 10 in-edges per
destination and 128 columns (a training batch), 4.5 on a random chunk of 57, and rmat100k's chunks, whose hubs
repeat, at ~8 (128 columns) and ~2 (16 columns) [inferred: each layer's eval_forward span minus its dense kernels'
price]; the dense products are priced right by the roofline on Cora (first layer 6.0 ms measured, 6.3 priced) but
CiteSeer's 3703-wide ones ran ~1.6x faster than it (12.0 ms against 18.5). A ratio applied to the
aggregations alone was tried: fitted without rmat100k it went to 0.17 (Cora's fixed per-layer cost absorbed) and
predicted rmat100k's evaluation 4x high; it was not kept.

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

from measure import cluster_of_this_machine, error_summary, plan_for  # noqa: E402

CONFIGS = (("cora-sage", "dp", {}), ("cora-sage", "hopgnn", {}), ("cora-sage", "gsplit", {}),
           ("citeseer-sage", "dp", {}), ("citeseer-sage", "gsplit", {}), ("rmat100k-sage", "dp", {}),
           ("rmat100k-sage", "hopgnn", {}), ("rmat100k-sage", "gsplit", {}))
"""(workload preset, strategy, knobs) of every run."""


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the process exit code (0 when it ran: it reports, it has no goal)."""
    from gnnplan.executor.runner import run_plan
    from gnnplan.simulator.api import simulate
    from gnnplan.simulator.calibrate import calibrate_files
    from gnnplan.simulator.plan import shaped_like

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cluster", default="local")
    ap.add_argument("--nprocs", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=4)
    args = ap.parse_args(argv)
    cluster = cluster_of_this_machine(args.cluster, args.nprocs)
    with tempfile.TemporaryDirectory(prefix="gnnplan-bench-evaluation-") as tmp:
        runs = []
        for workload, strategy, knobs in CONFIGS:
            plan = plan_for(cluster, workload, strategy, knobs, args.nprocs, args.epochs)
            res = run_plan(plan, trace_dir=Path(tmp) / workload, progress=False)
            runs.append((plan, res))
            print(f"ran {workload} {strategy}: epoch {res['epoch_time_s'] * 1e3:.1f} ms, evaluation "
                  f"{res['evaluation_time_s'] * 1e3:.1f} ms", flush=True)
        print(f"\n{'configuration':24s} {'evaluation':>10s} {'uncal.':>8s} {'training':>9s} {'all spans':>9s}"
              f" {'other ds':>9s}   {'epoch':>8s} {'uncal.':>8s} {'training':>9s} {'all spans':>9s} {'other ds':>9s}")
        labels = ("uncalibrated", "calibrated on the others' training spans", "calibrated on all the others' spans",
                  "calibrated on the other datasets' runs only")
        errors: dict[str, dict[str, list[float]]] = {"evaluation": {k: [] for k in labels},
                                                     "epoch": {k: [] for k in labels}}
        stripped = [without_evaluation(r["trace"], Path(tmp) / f"training-{i}.json") for i, (_, r) in enumerate(runs)]
        whole = [r["trace"] for _, r in runs]
        datasets = [str(plan.workload.dataset) for plan, _ in runs]
        other_datasets = {name: calibrate_files([t for t, d in zip(whole, datasets) if d != name], cluster)[0]
                          for name in dict.fromkeys(datasets)}
        for i, (plan, res) in enumerate(runs):
            clusters = [plan.cluster]
            for traces in (stripped, whole):
                calibrated, _ = calibrate_files([t for j, t in enumerate(traces) if j != i], cluster)
                clusters.append(shaped_like(calibrated, plan))
            clusters.append(shaped_like(other_datasets[datasets[i]], plan))
            predicted = [simulate(c, plan.workload, plan.strategy, plan.knobs) for c in clusters]
            cells = []
            for what, measured, of in (("evaluation", res["evaluation_time_s"], "evaluation_time_s"),
                                       ("epoch", res["epoch_time_s"], "epoch_time_s")):
                errs = [getattr(r, of) / measured - 1 for r in predicted]
                for label, e in zip(labels, errs):
                    errors[what][label].append(e)
                cells.append(f"{measured * 1e3:8.1f}ms " + " ".join(f"{e:+8.1%}" for e in errs))
            print(f"{plan.workload.name + ' ' + plan.strategy:24s} {cells[0]}   {cells[1]}", flush=True)
        for what, by_label in errors.items():
            for label, errs in by_label.items():
                print(error_summary(f"{what}, {label}", errs))
    return 0


def without_evaluation(trace: str, path: Path) -> str:
    """A copy of ``trace`` without the evaluation's spans (:data:`simulator.trace.EVALUATION_PHASES`), at
    ``path``."""
    from gnnplan.simulator.trace import EVALUATION_PHASES, read_trace, write_trace

    spans, meta = read_trace(trace)
    return str(write_trace(path, [s for s in spans if s.phase not in EVALUATION_PHASES], meta))


if __name__ == "__main__":
    sys.exit(main())
