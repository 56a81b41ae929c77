"""DepCache vs DepComm vs Hybrid for real on this machine, and what the calibrated simulator predicts.

    DGLBACKEND=pytorch python benchmarks/bench_neutronstar.py [--vertices 10000] [--feature-dim 2048] [--epochs 10]

Steps (2 gloo worker processes on this machine = 2 modelled machines of the ``local`` cluster):

1. train the R-MAT workload (GCN, full-graph) with ``mode=depcomm`` and ``mode=depcache`` (their dependency split
   does not depend on the cluster), traced, ``--rounds`` times each; each mode's fastest run is kept (other
   processes only add time);
2. calibrate the ``local`` cluster on the fastest DepComm run (it has every span kind): per phase, the
   efficiency that makes the simulated compute spans (forward, backward; per rank, layer and block) sum to the
   measured ones (median over epochs after the first); the exchange path's per-message and per-byte costs (PCIe legs and
   network, scaled together) fitted by least squares to the fastest rank's exchange spans (waiting for a
   slower peer excluded, as :mod:`simulator.calibrate` does for all-reduce); then ``iteration_overhead_s`` so
   that the calibrated simulator reproduces the measured DepComm epoch;
3. train ``mode=hybrid`` ``--rounds`` times with the calibrated cluster in its plan, so Algorithm 4 splits with
   calibrated costs; keep the fastest run;
4. print measured and predicted epoch times of the three modes, the ranks, and Hybrid / best pure mode; beside
   this benchmark's own fit, the prediction of the product's calibration (``gnnplan calibrate``, i.e.
   :func:`simulator.calibrate.calibrate_files`) on the same DepComm trace.

The default graph has wide raw features (2048) and a narrow hidden layer (16): DepComm ships every remote
vertex's raw features each epoch, DepCache recomputes the 2-hop closure's first layer, and Hybrid (raw features
cached, hidden rows communicated or cached per vertex) avoids most of both, so the three modes differ clearly
on this machine. Measured epoch time = the runner's median over epochs after the first (warm-up). Timings are
noisy when other processes share the cores.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections import defaultdict
from typing import Any

import numpy as np

os.environ.setdefault("DGLBACKEND", "pytorch")

from measure import cluster_of_this_machine  # noqa: E402

from gnnplan.executor.runner import run_plan  # noqa: E402
from gnnplan.simulator.api import simulate  # noqa: E402
from gnnplan.simulator.calibrate import get_param, with_params  # noqa: E402
from gnnplan.simulator.hardware import pricing  # noqa: E402
from gnnplan.simulator.hardware.collectives import staged_network  # noqa: E402
from gnnplan.simulator.hardware.spec import ClusterSpec  # noqa: E402
from gnnplan.simulator.plan import Plan  # noqa: E402
from gnnplan.simulator.trace import Span, read_trace  # noqa: E402
from gnnplan.simulator.workload.spec import WorkloadSpec, workload_from_dict  # noqa: E402

MODES = ("depcache", "depcomm", "hybrid")
EXCHANGE_PER_BYTE = ("pcie.bandwidth_bytes_per_s", "network.bandwidth_bytes_per_s")
EXCHANGE_LATENCY = ("pcie.latency_s", "network.latency_s")


def workload(args: argparse.Namespace) -> WorkloadSpec:
    """GCN, full-graph, on a generated R-MAT graph."""
    return workload_from_dict({
        "name": f"rmat{args.vertices}-gcn-full",
        "dataset": {"generator": "rmat", "num_vertices": args.vertices, "edge_factor": args.edge_factor,
                    "feature_dim": args.feature_dim, "num_classes": 8, "seed": 0},
        "model": {"arch": "gcn", "num_layers": 2, "hidden_dim": args.hidden_dim, "dropout": 0.5},
        "training": {"mode": "full-graph", "num_epochs": args.epochs}})


def run(cluster: ClusterSpec, wl: WorkloadSpec, mode: str, trace_dir: str) -> dict[str, Any]:
    """Train one mode on 2 local workers; returns the runner's result."""
    plan = Plan(strategy="neutronstar", knobs={"mode": mode}, num_workers=2, cluster=cluster, workload=wl)
    return run_plan(plan, nprocs=2, trace_dir=trace_dir, progress=False)


def _key(s: Span) -> tuple[Any, ...]:
    return s.rank, s.phase, s.args.get("layer"), s.args.get("part"), s.args.get("direction")


def compute_fit(cluster: ClusterSpec, wl: WorkloadSpec, spans: list[Span]) -> dict[str, float]:
    """Forward / backward efficiencies: simulated compute (at the cluster's efficiencies) over measured compute."""
    predicted = simulate(cluster, wl, "neutronstar", {"mode": "depcomm"}).spans
    measured: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    for s in spans:
        if s.epoch >= 1 and s.phase in ("forward", "backward"):
            measured[_key(s)].append(s.dur_s)
    out = {}
    for phase in ("forward", "backward"):
        sim = sum(s.dur_s for s in predicted if s.phase == phase)
        real = sum(float(np.median(v)) for k, v in measured.items() if k[1] == phase)
        path = f"efficiency.{phase}_fraction"
        out[path] = min(10.0, get_param(cluster, path) * sim / real)
    return out


def exchange_fit(cluster: ClusterSpec, spans: list[Span]) -> dict[str, float]:
    """Scale the exchange path's latencies and per-byte costs to the fastest rank's exchange spans.

    One message each way per exchange (2 workers), priced as :func:`simulator.hardware.pricing.exchange_s`:
    time = (2 alpha_pcie + alpha_net) + bytes (2 / B_pcie + 1 / B_net) when staged through host memory, the
    network terms alone with GPUDirect RDMA or on a CPU-only cluster (``local``: the rows already are in host
    memory); least squares over (bytes, seconds) gives the two sums (when the sizes differ at least 2x; otherwise
    the latency is kept and the per-byte cost is the median of (seconds - latency) / bytes), and every term of a
    sum is scaled by the same factor.
    """
    fastest: dict[tuple[Any, ...], Span] = {}
    for s in spans:
        if s.phase == "exchange" and s.epoch >= 1 and s.nbytes > 0:
            key = (s.epoch, s.args["layer"], s.args["direction"])
            if key not in fastest or s.dur_s < fastest[key].dur_s:
                fastest[key] = s
    nbytes = np.array([s.nbytes for s in fastest.values()])
    y = np.array([s.dur_s for s in fastest.values()])
    byte0 = pricing.exchange_per_byte_s(cluster)
    lat0 = pricing.exchange_s(cluster, 1.0) - byte0
    on_path = slice(None) if staged_network(cluster) else slice(1, None)   # the PCIe legs only when staged
    if nbytes.max() >= 2 * nbytes.min():
        (alpha, beta), *_ = np.linalg.lstsq(np.stack([np.ones_like(nbytes), nbytes], 1), y, rcond=None)
    else:  # sizes too alike to separate latency from bandwidth: keep the latency, fit the per-byte cost
        alpha, beta = lat0, float(np.median((y - lat0) / nbytes))
    a, b = max(alpha, 1e-7) / lat0, max(beta, 1e-13) / byte0
    out = {p: get_param(cluster, p) * a for p in EXCHANGE_LATENCY[on_path]}
    out.update({p: get_param(cluster, p) / b for p in EXCHANGE_PER_BYTE[on_path]})
    return out


def overhead_fit(cluster: ClusterSpec, wl: WorkloadSpec, measured_s: float) -> float:
    """``iteration_overhead_s`` that makes the simulated DepComm epoch equal the measured one (>= 0)."""
    base = cluster.model_copy(update={"iteration_overhead_s": 0.0})
    return max(0.0, measured_s - simulate(base, wl, "neutronstar", {"mode": "depcomm"}).epoch_time_s)


def calibrate_on(cluster: ClusterSpec, wl: WorkloadSpec, result: dict[str, Any]) -> ClusterSpec:
    """The cluster fitted to one DepComm run (module docstring, step 2)."""
    spans, _ = read_trace(result["trace"])
    fitted = with_params(cluster, {**compute_fit(cluster, wl, spans), **exchange_fit(cluster, spans)})
    overhead = overhead_fit(fitted, wl, result["epoch_time_s"])
    return fitted.model_copy(update={"iteration_overhead_s": overhead, "name": f"{cluster.name}-calibrated"})


def ranks(times: dict[str, float]) -> list[str]:
    """Modes from fastest to slowest."""
    return sorted(times, key=times.get)  # type: ignore[arg-type]


def measure(args: argparse.Namespace, wl: WorkloadSpec,
            base: ClusterSpec) -> tuple[ClusterSpec, ClusterSpec, dict[str, dict[str, Any]]]:
    """Steps 1-4 of the module docstring.

    Returns:
        (cluster calibrated here, cluster calibrated by ``gnnplan calibrate``, per mode the run with the lowest
        median epoch time: other processes only ever add time, so the fastest of several runs is the least
        disturbed one).
    """
    from gnnplan.simulator.calibrate import calibrate_files

    best: dict[str, dict[str, Any]] = {}

    def keep(mode: str, result: dict[str, Any]) -> None:
        if mode not in best or result["epoch_time_s"] < best[mode]["epoch_time_s"]:
            best[mode] = result

    with tempfile.TemporaryDirectory() as trace_dir:
        for _ in range(args.rounds):
            for mode in ("depcomm", "depcache"):
                keep(mode, run(base, wl, mode, trace_dir))
        calibrated = calibrate_on(base, wl, best["depcomm"])
        product, _ = calibrate_files([best["depcomm"]["trace"]], base)
        for _ in range(args.rounds):
            keep("hybrid", run(calibrated, wl, "hybrid", trace_dir))
    return calibrated, product, best


def report(args: argparse.Namespace, wl: WorkloadSpec, base: ClusterSpec, calibrated: ClusterSpec,
           product: ClusterSpec, results: dict[str, dict[str, Any]]) -> None:
    """Print measured and predicted times, the orders and Hybrid / best pure mode."""
    measured = {m: results[m]["epoch_time_s"] for m in MODES}
    before = {m: simulate(base, wl, "neutronstar", {"mode": m}).epoch_time_s for m in MODES}
    after = {m: simulate(calibrated, wl, "neutronstar", {"mode": m}).epoch_time_s for m in MODES}
    fitted = {m: simulate(product, wl, "neutronstar", {"mode": m}).epoch_time_s for m in MODES}
    print(f"workload {wl.name}: R-MAT {args.vertices} vertices, edge factor {args.edge_factor}, features "
          f"{args.feature_dim}, GCN hidden {args.hidden_dim}; 2 workers, {args.epochs} epochs (median after the "
          f"first), fastest of {args.rounds} runs per mode")
    print("calibrated on the fastest depcomm run: " + ", ".join(
        f"{p}={get_param(calibrated, p):.4g}" for p in ("efficiency.forward_fraction", "efficiency.backward_fraction",
                                                         *EXCHANGE_PER_BYTE, *EXCHANGE_LATENCY,
                                                         "iteration_overhead_s")))
    print(f"{'mode':<10}{'measured s':>12}{'predicted s':>13}{'gnnplan calibrate s':>21}{'uncalibrated s':>16}"
          f"{'network B/epoch':>17}   epochs s")
    for m in MODES:
        times = " ".join(f"{t:.3f}" for t in results[m]["epoch_times_s"])
        print(f"{m:<10}{measured[m]:>12.4f}{after[m]:>13.4f}{fitted[m]:>21.4f}{before[m]:>16.4f}"
              f"{results[m]['bytes_per_epoch']['network']:>17.0f}   {times}")
    best_pure = min(measured["depcache"], measured["depcomm"])
    print(f"measured order:  {' < '.join(ranks(measured))}")
    same = "same" if ranks(measured) == ranks(after) else "DIFFERENT"
    print(f"predicted order: {' < '.join(ranks(after))}  ({same} as measured)")
    same = "same" if ranks(measured) == ranks(fitted) else "DIFFERENT"
    print(f"gnnplan calibrate order: {' < '.join(ranks(fitted))}  ({same} as measured)")
    print(f"hybrid / best pure mode (measured): {measured['hybrid'] / best_pure:.3f}  (target <= 1.1)")
    print(f"pure modes differ by {max(measured['depcache'], measured['depcomm']) / best_pure:.2f}x (measured)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vertices", type=int, default=10000)
    parser.add_argument("--edge-factor", type=int, default=8)
    parser.add_argument("--feature-dim", type=int, default=2048)
    parser.add_argument("--hidden-dim", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3, help="runs per mode; the fastest is reported")
    parser.add_argument("--cluster", default="local")
    args = parser.parse_args()
    wl = workload(args)
    base = cluster_of_this_machine(args.cluster).model_copy(update={"num_machines": 2, "gpus_per_machine": 1})
    calibrated, product, results = measure(args, wl, base)
    report(args, wl, base, calibrated, product, results)


if __name__ == "__main__":
    main()
