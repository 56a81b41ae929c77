"""What-if fidelity: calibrate once on the emulated cluster, then predict and measure held-out settings.

1. ``gnnplan probe --emulate`` measures 2 emulated machines x 1 core at the calibration rate (``--calib``); that
   is the cluster the predictions start from (its priors are the probe's measurements).
2. Calibration: ``dp`` with its default knobs on Cora at that rate, run ``--repeats`` times; the fastest run's
   trace is calibrated on (:func:`gnnplan.simulator.calibrate.calibrate`). This is the ONLY data fitted; the
   printed parameter table compares every fitted parameter with its probed value (flags from calibration).
3. Held-out points, each predicted by the calibrated cluster and measured ``--repeats`` times:
   * every strategy of ``--strategies`` (default dp, hopgnn, gsplit: same training semantics) x every rate of
     ``--bandwidths`` (default 100 Mbit/s .. 3 Gbit/s plus unshaped), on Cora and on an R-MAT graph;
   * the same strategies at the calibration rate with a CPU quota (``--quota`` cores per machine, cgroup
     ``cpu.cfs_quota_us``), on Cora;
   * dp with another cache fraction and another batch size at the calibration rate, on Cora.
   What a what-if changes in the cluster: the network rate scales the calibrated bandwidth by rate / calibration
   rate (the link's efficiency is kept; the unshaped veth's rate is probed by the ping-pong of
   ``probe --emulate``); a CPU quota of q cores on a machine of c cores multiplies every CPU throughput by q / c
   and divides every fixed CPU cost by it (:func:`with_cpu_quota`, the fields listed there): a slower device.
4. Printed: per point measured (median of runs), predicted, error and run spread; MAPE over the held-out points;
   per workload and rate the measured and predicted order of strategies with Kendall's tau
   (:func:`scipy.stats.kendalltau`) and whether the orders agree wherever measured times differ by more than the
   run spread; per workload the rate where the measured winner changes (log-interpolated between the measured
   rates) and where the predicted one does (a fine sweep of the simulator), and their ratio.

Needs root with CAP_NET_ADMIN. Takes ~20-40 minutes with the defaults on 2 cores.

Usage::

    python benchmarks/bench_whatif.py [--calib 1Gbit/s] [--bandwidths 100Mbit/s,300Mbit/s,1Gbit/s,3Gbit/s,unshaped]
        [--strategies dp,hopgnn,gsplit] [--quota 0.5] [--repeats 2] [--epochs 6] [--rmat-vertices 20000]
        [--quick-probe]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("DGLBACKEND", "pytorch")

from measure import Measured, load_average, measure, probe_emulated_cluster  # noqa: E402

CPU_THROUGHPUTS = ("gpu.peak_flops_per_s", "gpu.sparse_flops_per_s", "gpu.memory_bandwidth_bytes_per_s",
                   "host.memory_bandwidth_bytes_per_s", "host.sampling_edges_per_s_per_core",
                   "pcie.bandwidth_bytes_per_s")
"""Rates a CPU worker's quota scales (``pcie`` is the CPU gather path of the probed cluster)."""
CPU_FIXED_COSTS = ("gpu.kernel_overhead_s", "iteration_overhead_s", "host.sampler_handoff_s", "host.row_index_s",
                   "pcie.latency_s", "network.per_collective_s")
"""Fixed per-call CPU costs a quota stretches."""


@dataclass(frozen=True)
class Point:
    """One held-out configuration: where it runs and what it is."""

    workload: str
    strategy: str
    rate: str
    quota: float | None = None
    knobs: tuple[tuple[str, Any], ...] = ()

    @property
    def label(self) -> str:
        extra = "".join(f" {k}={v}" for k, v in self.knobs) + (f" quota={self.quota:g}" if self.quota else "")
        return f"{self.workload} {self.strategy} @{self.rate}{extra}"


def rmat_workload(vertices: int, epochs: int) -> Any:
    """GraphSAGE on an R-MAT graph (edge factor 8, 128-dim features), batch 512, fanouts [10, 10]."""
    from gnnplan.simulator.workload.spec import workload_from_dict

    return workload_from_dict({
        "dataset": {"generator": "rmat", "num_vertices": vertices, "edge_factor": 8, "feature_dim": 128,
                    "num_classes": 16, "seed": 0},
        "model": {"arch": "sage", "num_layers": 2, "hidden_dim": 64},
        "training": {"batch_size": 512, "fanouts": [10, 10], "num_epochs": epochs}})


def with_bandwidth(cluster: Any, bandwidth: float) -> Any:
    """``cluster`` with its network rate replaced."""
    return cluster.model_copy(update={"network": cluster.network.model_copy(
        update={"bandwidth_bytes_per_s": bandwidth})})


def with_cpu_quota(cluster: Any, quota_cores: float) -> Any:
    """``cluster`` with each machine limited to ``quota_cores`` of CPU time (module docstring, step 3)."""
    from gnnplan.simulator.calibrate_fit import get_param, with_params

    factor = min(quota_cores, cluster.host.num_cores) / cluster.host.num_cores
    values = {p: get_param(cluster, p) * factor for p in CPU_THROUGHPUTS}
    values.update({p: get_param(cluster, p) / factor for p in CPU_FIXED_COSTS if _has(cluster, p)})
    return with_params(cluster, values)


def _has(cluster: Any, path: str) -> bool:
    obj = cluster
    for part in path.split("."):
        obj = getattr(obj, part, None)
    return isinstance(obj, int | float) and not isinstance(obj, bool)


def predict_s(cluster: Any, workload: Any, strategy: str, knobs: dict[str, Any]) -> float:
    from gnnplan.simulator.api import simulate

    return simulate(cluster, workload, strategy, knobs).epoch_time_s


def winner_change(rates: list[float], times: dict[str, list[float]]) -> float | None:
    """The rate where the fastest strategy changes, log-interpolated on the difference of the two strategies
    that swap (the first change from the slowest rate up); None when one strategy wins everywhere."""
    names = list(times)
    winners = [min(names, key=lambda s: times[s][i]) for i in range(len(rates))]
    for i in range(1, len(rates)):
        if winners[i] != winners[i - 1]:
            a, b = winners[i - 1], winners[i]
            d0 = math.log(times[a][i - 1] / times[b][i - 1])
            d1 = math.log(times[a][i] / times[b][i])
            frac = d0 / (d0 - d1) if d0 != d1 else 0.5
            return math.exp(math.log(rates[i - 1]) + frac * (math.log(rates[i]) - math.log(rates[i - 1])))
    return None


def order_agrees(measured: dict[str, Measured], predicted: dict[str, float]) -> bool:
    """Whether every pair of strategies whose measured times differ by more than their run spread is ordered
    the same way by the prediction."""
    names = list(measured)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            ma, mb = measured[a], measured[b]
            margin = max(ma.spread * ma.median_s, mb.spread * mb.median_s)
            if abs(ma.median_s - mb.median_s) > margin and \
                    (ma.median_s < mb.median_s) != (predicted[a] < predicted[b]):
                return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calib", default="1Gbit/s")
    parser.add_argument("--bandwidths", default="100Mbit/s,300Mbit/s,1Gbit/s,3Gbit/s,unshaped")
    parser.add_argument("--strategies", default="dp,hopgnn,gsplit")
    parser.add_argument("--quota", type=float, default=0.5)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--rmat-vertices", type=int, default=20_000)
    parser.add_argument("--quick-probe", action="store_true")
    args = parser.parse_args(argv)

    from scipy.stats import kendalltau

    from gnnplan.executor.emulate import MachineLimits
    from gnnplan.simulator.calibrate import calibrate
    from gnnplan.simulator.plan import Plan
    from gnnplan.simulator.trace import read_trace
    from gnnplan.simulator.units_parse import parse_quantity
    from gnnplan.simulator.workload.spec import load_workload

    calib_rate = parse_quantity(args.calib, "bandwidth", "--calib")
    rate_text = args.bandwidths.split(",")
    rates = {t: None if t == "unshaped" else parse_quantity(t, "bandwidth", "--bandwidths") for t in rate_text}
    strategies = args.strategies.split(",")
    workloads = {"cora": load_workload("cora-sage").model_copy(
        update={"training": load_workload("cora-sage").training.model_copy(update={"num_epochs": args.epochs})}),
        "rmat": rmat_workload(args.rmat_vertices, args.epochs)}

    with tempfile.TemporaryDirectory(prefix="gnnplan-whatif-") as tmp:
        os.environ.setdefault("GNNPLAN_HOME", tmp)
        print(f"== what-if fidelity: 2 emulated machines x 1 core; calibration dp on Cora at {args.calib}; "
              f"load average {load_average()}", flush=True)
        base = probe_emulated_cluster(calib_rate, quick=args.quick_probe)
        unshaped = probe_emulated_cluster(None, quick=True).network.bandwidth_bytes_per_s
        print(f"probed network at {args.calib}: {base.network.bandwidth_bytes_per_s:.4g} B/s "
              f"(shaped {calib_rate:.4g}); unshaped veth {unshaped:.4g} B/s", flush=True)

        def plan(wl: Any, strategy: str, cl: Any, knobs: dict[str, Any] | None = None) -> Any:
            return Plan(strategy=strategy, knobs=knobs or {}, num_workers=2, cluster=cl, workload=wl)

        fit = measure({"calibration": plan(workloads["cora"], "dp", base)}, args.repeats, tmp, None,
                      MachineLimits(calib_rate))["calibration"]
        trace = fit.fastest["trace"]
        calibrated, rep = calibrate({Path(trace).name: read_trace(trace)}, base)
        print(f"\n{'parameter':<38} {'probed':>10} {'fitted':>10} {'ratio':>7}  flags")
        for name, p in rep["parameters"].items():
            ratio = p["ratio_to_prior"]
            print(f"{name:<38} {p['prior'] if p['prior'] is not None else float('nan'):>10.3g} {p['after']:>10.3g} "
                  f"{ratio if ratio is not None else float('nan'):>7.2f}  {', '.join(p['flags'])}")
        net = calibrated.network.bandwidth_bytes_per_s
        print(f"fitted network bandwidth / shaped rate = {net / calib_rate:.3f} (target within 25%)", flush=True)

        def cluster_at(rate: float | None, quota: float | None = None) -> Any:
            cl = with_bandwidth(calibrated, net * rate / calib_rate if rate else unshaped)
            return with_cpu_quota(cl, quota) if quota else cl

        points: list[tuple[Point, Any, Any, Any]] = []  # (point, plan to run, cluster to predict with, limits)
        for wname, wl in workloads.items():
            for text, rate in rates.items():
                for s in strategies:
                    if wname == "cora" and s == "dp" and rate == calib_rate:
                        continue  # the calibration run itself
                    points.append((Point(wname, s, text), plan(wl, s, base), cluster_at(rate),
                                   MachineLimits(rate)))
        for s in strategies:
            points.append((Point("cora", s, args.calib, quota=args.quota), plan(workloads["cora"], s, base),
                           cluster_at(calib_rate, args.quota), MachineLimits(calib_rate, args.quota)))
        for knobs in ({"cache_fraction": 0.2}, {"batch_size": 32}):
            points.append((Point("cora", "dp", args.calib, knobs=tuple(knobs.items())),
                           plan(workloads["cora"], "dp", base, knobs), cluster_at(calib_rate),
                           MachineLimits(calib_rate)))

        rows: list[tuple[Point, Measured, float]] = []
        for pt, pl, cl, limits in points:
            print(f"{pt.label}: load average {load_average()}", flush=True)
            got = measure({pt.label: pl}, args.repeats, tmp, None, limits, say=lambda _m: None)[pt.label]
            rows.append((pt, got, predict_s(cl, workloads[pt.workload], pt.strategy, dict(pt.knobs))))
        report(rows, workloads, strategies, rates, calib_rate, cluster_at, kendalltau)
    return 0


def report(rows: list[tuple[Point, Measured, float]], workloads: dict[str, Any], strategies: list[str],
           rates: dict[str, float | None], calib_rate: float, cluster_at: Any, kendalltau: Any) -> None:
    """The per-point table, MAPE, orders and winner-change rates (module docstring, step 4)."""
    print(f"\n{'held-out point':<48} {'meas_ms':>8} {'pred_ms':>8} {'error':>7} {'spread':>7}")
    errors = []
    for pt, m, pred in rows:
        err = pred / m.median_s - 1.0
        errors.append(abs(err))
        print(f"{pt.label:<48} {m.median_s * 1e3:>8.1f} {pred * 1e3:>8.1f} {err:>+7.1%} {m.spread:>7.1%}")
    print(f"held-out points: {len(rows)}; MAPE {sum(errors) / len(errors):.1%} (target <= 15%); worst "
          f"{max(errors):.1%}")
    by = {(pt.workload, pt.rate, pt.strategy): (m, pred) for pt, m, pred in rows if not pt.quota and not pt.knobs}
    print(f"\n{'workload':<6} {'rate':<10} {'measured order':<24} {'predicted order':<24} {'tau':>5} agrees")
    for wname in workloads:
        meas_t: dict[str, list[float]] = {s: [] for s in strategies}
        pred_t: dict[str, list[float]] = {s: [] for s in strategies}
        used = []
        for text, rate in rates.items():
            cells = {s: by.get((wname, text, s)) for s in strategies}
            if any(c is None for c in cells.values()):
                continue  # the calibration point has no held-out dp row
            ms = {s: c[0] for s, c in cells.items() if c}
            ps = {s: c[1] for s, c in cells.items() if c}
            mo, po = sorted(ms, key=lambda s: ms[s].median_s), sorted(ps, key=ps.__getitem__)
            tau = kendalltau([ms[s].median_s for s in strategies], [ps[s] for s in strategies]).statistic
            print(f"{wname:<6} {text:<10} {' < '.join(mo):<24} {' < '.join(po):<24} {tau:>5.2f} "
                  f"{'yes' if order_agrees(ms, ps) else 'NO'}")
            if rate is not None:
                used.append(rate)
                for s in strategies:
                    meas_t[s].append(ms[s].median_s)
                    pred_t[s].append(ps[s])
        measured_change = winner_change(used, meas_t) if len(used) > 1 else None
        sweep = [used[0] * (used[-1] / used[0]) ** (i / 200) for i in range(201)] if len(used) > 1 else []
        pred_sweep = {s: [predict_s(cluster_at(r), workloads[wname], s, {}) for r in sweep] for s in strategies}
        predicted_change = winner_change(sweep, pred_sweep) if sweep else None
        ratio = (predicted_change / measured_change if measured_change and predicted_change else None)
        print(f"{wname}: winner changes at measured {_rate(measured_change)}, predicted {_rate(predicted_change)}"
              + (f" (ratio {ratio:.2f}, target within 2x)" if ratio else ""), flush=True)


def _rate(bandwidth: float | None) -> str:
    return "never (in range)" if bandwidth is None else f"{bandwidth * 8 / 1e6:.0f} Mbit/s"


if __name__ == "__main__":
    sys.exit(main())
