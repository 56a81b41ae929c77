"""What-if fidelity: calibrate once on the emulated cluster, then predict and measure held-out settings.

1. ``gnnplan probe --emulate`` measures 2 emulated machines x 1 core at the calibration rate (``--calib``); that
   is the cluster the predictions start from (its priors are the probe's measurements).
2. Calibration: ``dp`` with its default knobs on Cora at that rate, run ``--repeats`` times; the median run's
   trace is calibrated on (:func:`gnnplan.simulator.calibrate.calibrate`; the median run, because the held-out
   points are compared by their median runs: a fit to the fastest run predicts a best case, low by the spread).
   This is the ONLY data fitted; the printed parameter table compares every fitted parameter with its probed value
   (flags from calibration).
3. Held-out points, each predicted by the calibrated cluster and measured ``--repeats`` times, in rounds (every
   point once, calibration point included, then again: :func:`measure.measure`), so a slow period of this shared
   virtual machine spoils one run of several points rather than every run of one (measured one point after the
   other, the same point came out 30% slower in one record than in another, all its runs alike):
   * every strategy of ``--strategies`` (default all six; hopgnn at a fixed step count, :data:`STRATEGY_KNOBS`)
     x every rate of ``--bandwidths`` (default 100 Mbit/s .. 3 Gbit/s plus unshaped), on Cora and on an R-MAT
     graph, each strategy training its model family there (:data:`FAMILIES`: GraphSAGE mini-batches for dp,
     hopgnn and gsplit, as the calibration run; full-graph GCN for neutronstar and hongtu; SGC for ppgnn): every
     held-out point differs from the calibration run in strategy, rate or graph, and those of neutronstar,
     hongtu and ppgnn in model and training mode too;
   * the same strategies at the calibration rate with a CPU quota (``--quota`` cores per machine, cgroup
     ``cpu.cfs_quota_us``), on Cora;
   * dp with another cache fraction and another batch size at the calibration rate, on Cora.
   What a what-if changes in the cluster: the network rate is the probe's NIC rate at that shaping rate (the
   probed rate / shaping rate at the calibration rate, times the new rate; the unshaped veth's rate is probed by
   the ping-pong of ``probe --emulate``) times the calibration's factor (fitted / probed bandwidth); a CPU quota of
   q cores on a machine of c cores multiplies every CPU throughput by q / c and divides every fixed CPU cost by
   it (:func:`with_cpu_quota`, the fields listed there): a slower device.
4. Printed: per point measured (median of runs), predicted, error and run spread; MAPE over the held-out points
   and beside it the run-to-run error (each run against the median of the point's other runs: the MAPE a
   prediction equal to one run would score, the noise floor of the target);
   per workload (graph and model family) and rate the measured and predicted order of its strategies with
   Kendall's tau (:func:`scipy.stats.kendalltau`) and whether the orders agree wherever measured times differ by
   more than the run spread; per workload the rate where the measured winner changes (log-interpolated between
   the measured rates; the unshaped veth counts at its probed rate, as the shaping rate that gives the same NIC
   rate) with a 90% bootstrap interval (:func:`change_interval`: every point's runs resampled), where the
   predicted one does (a fine sweep of the simulator over the same range), and their ratio.

Record and replay: ``--record DIR`` keeps what was measured (the probed cluster, every point's run times and its
median run's trace, ``record.json``) after each round; ``--replay DIR`` calibrates and predicts again from such a folder
without running anything (a model change can be checked against the same measurements), and ``--calib-point
LABEL`` calibrates on another recorded point (a shaped one at full CPU; the original calibration point is then
held out like the others).

Needs root with CAP_NET_ADMIN (not with ``--replay``). Takes ~14 minutes with ``--bandwidths
100Mbit/s,1Gbit/s,unshaped --repeats 2 --epochs 4 --rmat-vertices 10000 --quick-probe`` on 2 cores (the six
strategies: 44 points, 2026-11-30; the three SAGE strategies alone took ~15 minutes at ``--repeats 3`` and the
default rates).

Usage::

    python benchmarks/bench_whatif.py [--calib 1Gbit/s] [--bandwidths 100Mbit/s,300Mbit/s,1Gbit/s,3Gbit/s,unshaped]
        [--strategies dp,hopgnn,gsplit,neutronstar,hongtu,ppgnn] [--quota 0.5] [--repeats 2] [--epochs 6]
        [--rmat-vertices 20000] [--quick-probe] [--record DIR | --replay DIR [--calib-point LABEL]]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("DGLBACKEND", "pytorch")

from measure import Measured, load_average, measure, probe_emulated_cluster  # noqa: E402
from whatif_orders import change_interval, order_agrees, rate_text, winner_change  # noqa: E402

STRATEGY_KNOBS: dict[str, dict[str, Any]] = {"hopgnn": {"num_steps": 2}}
"""Knobs every point of a strategy runs (and is predicted) with: hopgnn keeps its M = 2 steps per iteration (the
paper's schedule before merging), because its merge controller explores step counts over the first epochs, which a
short run would measure instead of the steady state the simulator predicts for ``num_steps = None``."""
FAMILIES = {"dp": "sage", "hopgnn": "sage", "gsplit": "sage", "neutronstar": "gcn-full", "hongtu": "gcn-full",
            "ppgnn": "sgc"}
"""The model family each strategy trains on a graph (workload ``<graph>-<family>``): its Cora preset's (the first
shipped Cora preset it trains, as benchmarks/bench_transfer.py; ``cora-sage``, ``cora-gcn-full``, ``cora-sgc``) and
the same model and training on the R-MAT graph (:func:`rmat_workload`). Strategies of one family train the same
model, so their epoch times are compared and ordered."""
LEGACY_WORKLOADS = {"cora": "cora-sage", "rmat": "rmat-sage"}
"""Workload names of records made before :data:`FAMILIES` (every strategy trained GraphSAGE): replayed as these."""
RECORD = "record.json"
"""The measurements file of a ``--record`` folder (``--replay`` reads it)."""
CPU_THROUGHPUTS = ("gpu.peak_flops_per_s", "gpu.sparse_flops_per_s", "gpu.weighted_sparse_flops_per_s",
                   "gpu.memory_bandwidth_bytes_per_s",
                   "gpu.rng_elements_per_s", "host.memory_bandwidth_bytes_per_s",
                   "host.sampling_edges_per_s_per_core", "host.split_items_per_s_per_core",
                   "pcie.bandwidth_bytes_per_s")
"""Rates a CPU worker's quota scales (``pcie`` is the CPU gather path of the probed cluster)."""
CPU_FIXED_COSTS = ("gpu.kernel_overhead_s", "gpu.graph_op_overhead_s", "iteration_overhead_s",
                   "host.sampler_handoff_s", "host.sampler_call_s", "host.split_call_s", "host.row_index_s",
                   "pcie.latency_s", "network.per_collective_s", "network.per_all_to_all_s", "network.ddp_per_bucket_s")
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


def rmat_workload(vertices: int, epochs: int, family: str = "sage") -> Any:
    """An R-MAT graph (edge factor 8, 128-dim features, 16 classes) trained as ``family`` (:data:`FAMILIES`):
    ``sage``, GraphSAGE with batch 512 and fanouts [10, 10]; ``gcn-full``, cora-gcn-full's 2-layer GCN full-graph;
    ``sgc``, cora-sgc's SGC with batch 512.

    Raises:
        KeyError: an unknown family.
    """
    from gnnplan.simulator.workload.spec import workload_from_dict

    model, training = {
        "sage": ({"arch": "sage", "num_layers": 2, "hidden_dim": 64}, {"batch_size": 512, "fanouts": [10, 10]}),
        "gcn-full": ({"arch": "gcn", "num_layers": 2, "hidden_dim": 16, "dropout": 0.5},
                     {"mode": "full-graph", "lr": 0.01, "weight_decay": 5.0e-4}),
        "sgc": ({"arch": "sgc", "num_layers": 1, "hidden_dim": 16, "dropout": 0.0},
                {"batch_size": 512, "fanouts": [-1], "lr": 0.2, "weight_decay": 2.0e-5})}[family]
    return workload_from_dict({
        "dataset": {"generator": "rmat", "num_vertices": vertices, "edge_factor": 8, "feature_dim": 128,
                    "num_classes": 16, "seed": 0},
        "model": model, "training": {**training, "num_epochs": epochs}})


def workloads_for(strategies: list[str], epochs: int, rmat_vertices: int) -> dict[str, Any]:
    """Every workload the strategies train (:data:`FAMILIES`), Cora's and R-MAT's, each for ``epochs`` epochs,
    keyed ``<graph>-<family>``."""
    from gnnplan.simulator.workload.spec import load_workload

    out = {}
    for family in dict.fromkeys(FAMILIES[s] for s in strategies):
        cora = load_workload(f"cora-{family}")
        out[f"cora-{family}"] = cora.model_copy(
            update={"training": cora.training.model_copy(update={"num_epochs": epochs})})
    for family in dict.fromkeys(FAMILIES[s] for s in strategies):
        out[f"rmat-{family}"] = rmat_workload(rmat_vertices, epochs, family)
    return out


def strategies_of(workload: str, strategies: list[str]) -> list[str]:
    """The strategies of ``strategies`` that train ``workload`` (``<graph>-<family>``)."""
    return [s for s in strategies if workload.split("-", 1)[1] == FAMILIES[s]]


def with_bandwidth(cluster: Any, bandwidth: float) -> Any:
    """``cluster`` with its network rate replaced."""
    return cluster.model_copy(update={"network": cluster.network.model_copy(
        update={"bandwidth_bytes_per_s": bandwidth})})


def with_cpu_quota(cluster: Any, quota_cores: float) -> Any:
    """``cluster`` with each machine limited to ``quota_cores`` of CPU time (module docstring, step 3)."""
    from gnnplan.simulator.calibrate_params import get_param, with_params

    factor = min(quota_cores, cluster.host.num_cores) / cluster.host.num_cores
    values = {p: get_param(cluster, p) * factor for p in CPU_THROUGHPUTS if _has(cluster, p)}
    values.update({p: get_param(cluster, p) / factor for p in CPU_FIXED_COSTS if _has(cluster, p)})
    return with_params(cluster, values)


def with_network_prior(cluster: Any, bandwidth: float) -> Any:
    """``cluster`` with its network rate and that rate's calibration prior both ``bandwidth`` (bytes/s)."""
    return with_bandwidth(cluster, bandwidth).model_copy(update={"priors": {
        **cluster.priors, "network.bandwidth_bytes_per_s": bandwidth}})


def _has(cluster: Any, path: str) -> bool:
    obj = cluster
    for part in path.split("."):
        obj = getattr(obj, part, None)
    return isinstance(obj, int | float) and not isinstance(obj, bool)


def predict_s(cluster: Any, workload: Any, strategy: str, knobs: dict[str, Any]) -> float:
    from gnnplan.simulator.api import simulate

    return simulate(cluster, workload, strategy, knobs).epoch_time_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calib", default="1Gbit/s")
    parser.add_argument("--bandwidths", default="100Mbit/s,300Mbit/s,1Gbit/s,3Gbit/s,unshaped")
    parser.add_argument("--strategies", default=",".join(FAMILIES))
    parser.add_argument("--quota", type=float, default=0.5)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--rmat-vertices", type=int, default=20_000)
    parser.add_argument("--quick-probe", action="store_true")
    parser.add_argument("--record", help="folder to keep the measurements in (probed cluster, traces, run times)")
    parser.add_argument("--replay", help="a --record folder: calibrate and predict again from it, running nothing")
    parser.add_argument("--calib-point", help="label of the recorded point to calibrate on (default: dp on Cora "
                        "at --calib), e.g. 'cora dp @100Mbit/s'")
    args = parser.parse_args(argv)
    if args.replay:  # the recorded settings, not the flags' defaults, say what was measured
        saved = json.loads((Path(args.replay) / RECORD).read_text())["settings"]
        for key in ("calib", "bandwidths", "strategies", "quota", "epochs", "rmat_vertices"):
            setattr(args, key, saved[key])

    from scipy.stats import kendalltau

    from gnnplan.executor.emulate import MachineLimits
    from gnnplan.simulator.io import atomic_write_json
    from gnnplan.simulator.plan import Plan
    from gnnplan.simulator.units_parse import parse_quantity

    calib_rate = parse_quantity(args.calib, "bandwidth", "--calib")
    rate_text = args.bandwidths.split(",")
    rates = {t: None if t == "unshaped" else parse_quantity(t, "bandwidth", "--bandwidths") for t in rate_text}
    strategies = args.strategies.split(",")
    unknown = [s for s in strategies if s not in FAMILIES]
    if unknown or "dp" not in strategies:
        parser.error(f"--strategies: {', '.join(unknown) or 'dp missing'}; allowed: {', '.join(FAMILIES)}, "
                     "dp among them (the calibration run)")
    workloads = workloads_for(strategies, args.epochs, args.rmat_vertices)

    if args.replay:
        record = json.loads((Path(args.replay) / RECORD).read_text())
        print(f"== what-if fidelity, replayed from {args.replay} (measured {record['measured_at']})", flush=True)
        analyse(record, Path(args.replay), args.calib_point, workloads, strategies, rates, kendalltau)
        return 0
    with tempfile.TemporaryDirectory(prefix="gnnplan-whatif-") as tmp:
        os.environ.setdefault("GNNPLAN_HOME", tmp)
        keep = Path(args.record) if args.record else Path(tmp) / "record"
        keep.mkdir(parents=True, exist_ok=True)
        print(f"== what-if fidelity: 2 emulated machines x 1 core; calibration dp on Cora at {args.calib}; "
              f"load average {load_average()}", flush=True)
        base = probe_emulated_cluster(calib_rate, quick=args.quick_probe)
        unshaped = probe_emulated_cluster(None, quick=True).network.bandwidth_bytes_per_s
        print(f"probed network at {args.calib}: {base.network.bandwidth_bytes_per_s:.4g} B/s "
              f"(shaped {calib_rate:.4g}); unshaped veth {unshaped:.4g} B/s", flush=True)

        def plan(wl: Any, strategy: str, knobs: dict[str, Any], rate: float | None) -> Any:
            """The run's plan: its network rate is the NIC rate probed at that shaping rate (what the executor's
            exchanges choose their protocol by, :func:`gnnplan.executor.comm.set_link_rate`)."""
            nic = unshaped if rate is None else base.network.bandwidth_bytes_per_s / calib_rate * rate
            return Plan(strategy=strategy, knobs=knobs, num_workers=2, cluster=with_bandwidth(base, nic), workload=wl)

        points: list[Point] = [Point(w, s, text) for w in workloads for text in rates
                               for s in strategies_of(w, strategies)]
        points += [Point(f"cora-{FAMILIES[s]}", s, args.calib, quota=args.quota) for s in strategies]
        points += [Point("cora-sage", "dp", args.calib, knobs=tuple(k.items()))
                   for k in ({"cache_fraction": 0.2}, {"batch_size": 32})]
        record: dict[str, Any] = {
            "measured_at": time.strftime("%Y-%m-%d %H:%M:%S"), "calib_rate": calib_rate,
            "settings": {k: getattr(args, k) for k in ("calib", "bandwidths", "strategies", "quota", "epochs",
                                                      "rmat_vertices")},
            "base_cluster": base.model_dump(mode="json"), "unshaped_bytes_per_s": unshaped, "points": []}
        plans = {pt.label: plan(workloads[pt.workload], pt.strategy,
                                {**STRATEGY_KNOBS.get(pt.strategy, {}), **dict(pt.knobs)},
                                rates.get(pt.rate, calib_rate)) for pt in points}
        limits = {pt.label: MachineLimits(rates.get(pt.rate, calib_rate), pt.quota) for pt in points}

        def keep_round(r: int, got: dict[str, Measured]) -> None:
            """After each round: every point's runs so far and its median run's trace, into the record."""
            record["points"] = []
            for i, pt in enumerate(points):
                m, trace = got[pt.label], f"point{i:02d}.json"
                shutil.copyfile(m.median_run["trace"], keep / trace)
                record["points"].append({**asdict(pt), "knobs": dict(pt.knobs),
                                         "fixed_knobs": STRATEGY_KNOBS.get(pt.strategy, {}), "runs_s": m.runs_s,
                                         "trace": trace})
            atomic_write_json(keep / RECORD, record)
            print(f"-- round {r + 1}/{args.repeats} done; load average {load_average()}", flush=True)

        got = measure(plans, args.repeats, tmp, None, limits, after_round=keep_round)
        for pt in points:
            m = got[pt.label]
            print(f"{pt.label}: {m.median_s * 1e3:.1f} ms (runs {', '.join(f'{r * 1e3:.1f}' for r in m.runs_s)})",
                  flush=True)
        analyse(record, keep, args.calib_point, workloads, strategies, rates, kendalltau)
    return 0


def analyse(record: dict[str, Any], folder: Path, calib_point: str | None, workloads: dict[str, Any],
            strategies: list[str], rates: dict[str, float | None], kendalltau: Any) -> None:
    """Calibrate on ONE recorded point (default: dp on Cora at the calibration rate; ``calib_point`` names
    another by its label), print the fitted parameters against the probe, and predict every other point."""
    from gnnplan.simulator.calibrate import calibrate
    from gnnplan.simulator.hardware.spec import cluster_from_dict
    from gnnplan.simulator.trace import read_trace
    from gnnplan.simulator.units_parse import parse_quantity

    probed = cluster_from_dict(record["base_cluster"])
    probed_rate = float(record["calib_rate"])
    unshaped = float(record["unshaped_bytes_per_s"])
    recorded = [(Point(LEGACY_WORKLOADS.get(p["workload"], p["workload"]), p["strategy"], p["rate"], p["quota"],
                       tuple(p["knobs"].items())), p) for p in record["points"]]
    label = calib_point or Point("cora-sage", "dp", record["settings"]["calib"]).label
    chosen = [(pt, p) for pt, p in recorded if pt.label == label]
    if not chosen:
        raise SystemExit(f"--calib-point: {label!r} is not a recorded point (one of: "
                         f"{', '.join(pt.label for pt, _ in recorded)})")
    calib_pt, calib_rec = chosen[0]
    if calib_pt.quota or calib_pt.rate == "unshaped":
        raise SystemExit(f"--calib-point: {label!r} must be a shaped point at the full CPU")
    calib_rate = parse_quantity(calib_pt.rate, "bandwidth", "--calib-point")
    efficiency = probed.network.bandwidth_bytes_per_s / probed_rate  # probed NIC rate / shaping rate

    def nic(rate: float | None) -> float:
        """The probe's NIC rate at a shaping rate (None: the unshaped veth's probed rate)."""
        return unshaped if rate is None else efficiency * rate

    # the probe measured the NIC at probed_rate; a calibration point at another rate starts from the same probe
    # with the NIC (and its prior) at that point's shaping rate
    base = with_network_prior(probed, nic(calib_rate))
    calibrated, rep = calibrate({calib_rec["trace"]: read_trace(folder / calib_rec["trace"])}, base)
    print(f"calibrated on {label} (runs {', '.join(f'{r * 1e3:.1f}' for r in calib_rec['runs_s'])} ms)")
    print(f"\n{'parameter':<38} {'probed':>10} {'fitted':>10} {'ratio':>7}  flags")
    for name, p in rep["parameters"].items():
        ratio = p["ratio_to_prior"]
        print(f"{name:<38} {p['prior'] if p['prior'] is not None else float('nan'):>10.3g} {p['after']:>10.3g} "
              f"{ratio if ratio is not None else float('nan'):>7.2f}  {', '.join(p['flags'])}")
    net = calibrated.network.bandwidth_bytes_per_s
    print(f"fitted network bandwidth / shaped rate = {net / calib_rate:.3f} (target within 25%)", flush=True)
    fit_factor = net / nic(calib_rate)

    def cluster_at(rate: float | None, quota: float | None = None) -> Any:
        """The calibrated cluster at another shaping rate: the probe's NIC rate there times the fit's factor."""
        cl = with_bandwidth(calibrated, nic(rate) * fit_factor)
        return with_cpu_quota(cl, quota) if quota else cl

    rows = []
    for pt, p in recorded:
        if pt.label == label:
            continue  # the calibration run itself
        rate = None if pt.rate == "unshaped" else parse_quantity(pt.rate, "bandwidth", "point rate")
        got = Measured(runs_s=list(p["runs_s"]))
        knobs = {**p.get("fixed_knobs", {}), **dict(pt.knobs)}
        rows.append((pt, got, predict_s(cluster_at(rate, pt.quota), workloads[pt.workload], pt.strategy, knobs)))
    report(rows, workloads, strategies, rates, unshaped / efficiency, cluster_at, kendalltau)


def report(rows: list[tuple[Point, Measured, float]], workloads: dict[str, Any], all_strategies: list[str],
           rates: dict[str, float | None], unshaped_rate: float, cluster_at: Any, kendalltau: Any) -> None:
    """The per-point table, MAPE, orders and winner-change rates (module docstring, step 4), the orders and
    changes per workload among the strategies that train it (:func:`strategies_of`); ``unshaped_rate``: the
    shaping rate whose NIC rate is the unshaped veth's probed rate (where the unshaped point sits on the rate
    axis)."""
    print(f"\n{'held-out point':<48} {'meas_ms':>8} {'pred_ms':>8} {'error':>7} {'spread':>7}")
    errors = []
    for pt, m, pred in rows:
        err = pred / m.median_s - 1.0
        errors.append(abs(err))
        print(f"{pt.label:<48} {m.median_s * 1e3:>8.1f} {pred * 1e3:>8.1f} {err:>+7.1%} {m.spread:>7.1%}")
    print(f"held-out points: {len(rows)}; MAPE {sum(errors) / len(errors):.1%} (target <= 15%); worst "
          f"{max(errors):.1%}")
    rerun = [m.rerun_error for _, m, _ in rows if len(m.runs_s) > 1]
    if rerun:  # the noise floor (measure.Measured.rerun_error)
        print(f"run to run: a point's run against the median of its other runs, mean |difference| "
              f"{sum(rerun) / len(rerun):.1%} over {len(rerun)} points (the MAPE of a prediction equal to one run)")
    by = {(pt.workload, pt.rate, pt.strategy): (m, pred) for pt, m, pred in rows if not pt.quota and not pt.knobs}
    print(f"\n{'workload':<6} {'rate':<10} {'measured order':<24} {'predicted order':<24} {'tau':>5} agrees")
    for wname in workloads:
        members = strategies_of(wname, all_strategies)
        if len(members) < 2:
            continue  # one strategy: no order to compare
        meas_t: dict[str, list[float]] = {s: [] for s in members}
        meas_runs: dict[str, list[list[float]]] = {s: [] for s in members}
        used = []
        for text, rate in rates.items():
            cells = {s: by.get((wname, text, s)) for s in members}
            if any(c is None for c in cells.values()):
                continue  # the calibration point has no held-out dp row
            ms = {s: c[0] for s, c in cells.items() if c}
            ps = {s: c[1] for s, c in cells.items() if c}
            mo, po = sorted(ms, key=lambda s: ms[s].median_s), sorted(ps, key=ps.__getitem__)
            tau = kendalltau([ms[s].median_s for s in members], [ps[s] for s in members]).statistic
            print(f"{wname:<6} {text:<10} {' < '.join(mo):<24} {' < '.join(po):<24} {tau:>5.2f} "
                  f"{'yes' if order_agrees(ms, ps) else 'NO'}")
            used.append(unshaped_rate if rate is None else rate)
            for s in members:
                meas_t[s].append(ms[s].median_s)
                meas_runs[s].append(list(ms[s].runs_s))
        order = sorted(range(len(used)), key=used.__getitem__)
        used = [used[i] for i in order]
        meas_t = {s: [v[i] for i in order] for s, v in meas_t.items()}
        meas_runs = {s: [v[i] for i in order] for s, v in meas_runs.items()}
        measured_change = winner_change(used, meas_t) if len(used) > 1 else None
        low, high = change_interval(used, meas_runs) if len(used) > 1 else (math.inf, math.inf)
        sweep = [used[0] * (used[-1] / used[0]) ** (i / 200) for i in range(201)] if len(used) > 1 else []
        pred_sweep = {s: [predict_s(cluster_at(r), workloads[wname], s, STRATEGY_KNOBS.get(s, {})) for r in sweep]
                      for s in members}
        predicted_change = winner_change(sweep, pred_sweep) if sweep else None
        ratio = (predicted_change / measured_change if measured_change and predicted_change else None)
        inside = predicted_change is not None and low / 2 <= predicted_change <= high * 2
        print(f"{wname}: winner changes at measured {rate_text(measured_change)} (90% bootstrap interval "
              f"{rate_text(low)} .. {rate_text(high)}), predicted {rate_text(predicted_change)}"
              + (f" (ratio {ratio:.2f}, target within 2x)" if ratio else "")
              + (f"; within 2x of the interval: {'yes' if inside else 'no'}" if predicted_change else ""), flush=True)


if __name__ == "__main__":
    sys.exit(main())
