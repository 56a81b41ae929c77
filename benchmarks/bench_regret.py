"""Selection regret of the tuner: does the configuration it picks run (nearly) as fast as the best it could pick?

For each setting, the tuner runs a study on the setting's cluster; its 5 best distinct configurations
(:func:`gnnplan.autotune.study.ranked_trials`, feasible only), the best configuration of every other strategy the
study found feasible (so a strategy the top 5 leave out still counts: on 2026-11-28 the local top 5 were all
``dp``, and ``gsplit``, predicted within 2% of them, went unmeasured) and the default
configuration (``dp`` with its default knobs) are then run for real, ``--repeats`` interleaved times each, and

    regret = measured epoch time of the tuner's pick / best measured epoch time among those run - 1,

each configuration's measured time being the median of its runs (each run's median epoch). Beside it, a 90%
bootstrap interval (:func:`regret_interval`: every configuration's runs resampled with replacement, the regret
recomputed): the runs of one configuration spread by 10-30% on this shared virtual machine, and the regret takes
the least of several noisy medians, so near-equal configurations give a regret of several percent by chance alone.

Settings:

* ``local``: the main job on Cora here, as ``gnnplan probe && gnnplan loop`` runs it: this machine probed
  (:func:`measure.probe_local_cluster`, 2 worker processes; ``--quick-probe`` probes with small sizes), the
  tuner's study on that cluster, 2 worker processes, workload ``cora-sage``;
* ``emulated@RATE`` for each ``--bandwidths`` rate: 2 emulated machines x 1 core (``gnnplan probe --emulate``
  measures the cluster the tuner sees; ``gnnplan run --emulate`` runs it), workload ``cora-sage``.

Printed per setting: every configuration run with its predicted and measured epoch time, run spread, and the
tuner's rank; the measured best; the regret. Needs root with CAP_NET_ADMIN for the emulated settings.

Usage::

    python benchmarks/bench_regret.py [--settings local,emulated] [--bandwidths 100Mbit/s,1Gbit/s] [--trials 30]
                                      [--top 5] [--repeats 5] [--epochs 20] [--workload cora-sage] [--quick-probe]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("DGLBACKEND", "pytorch")

from measure import load_average, measure, probe_emulated_cluster, probe_local_cluster  # noqa: E402

INTERVAL_DRAWS = 4000
"""Bootstrap resamples behind the regret's interval."""


def tuned_configurations(cluster: Any, workload: Any, trials: int, top: int, storage: str) -> list[dict[str, Any]]:
    """The tuner's ``top`` best distinct feasible configurations (rank order), the best of every other feasible
    strategy, then ``dp``'s defaults, as rows with label, strategy, knobs, predicted epoch time and the tuner's
    rank (None for the default when not among them)."""
    from gnnplan.autotune.study import TuneRequest, best_of_others, eligible_strategies, ranked_trials, run_study
    from gnnplan.simulator.api import simulate

    req = TuneRequest(cluster, workload, eligible_strategies(workload, None, False), trials, storage, None)
    shown, others = best_of_others([r for r in ranked_trials(run_study(req)) if r["feasible"]], top)
    rows = shown + others
    out = [{"label": f"#{r['rank']} {r['strategy']}", "strategy": r["strategy"], "knobs": r["knobs"],
            "predicted_s": r["epoch_time_s"], "rank": r["rank"]} for r in rows]
    default = simulate(cluster, workload, "dp", {})
    if not any(r["strategy"] == "dp" and r["knobs"] == default.knobs for r in out):
        out.append({"label": "default dp", "strategy": "dp", "knobs": default.knobs,
                    "predicted_s": default.epoch_time_s, "rank": None})
    return out


def regret_interval(runs: dict[str, list[float]], pick: str, seed: int = 0) -> tuple[float, float]:
    """90% bootstrap interval (5th and 95th percentiles) of the regret: each configuration's runs resampled with
    replacement (:data:`INTERVAL_DRAWS` times, ``numpy.random.default_rng(seed)``), the regret of ``pick``
    recomputed from the resampled medians.

    Shapes:
        runs: label -> (r,) epoch times in seconds, r >= 1 per label; ``pick`` one of the labels.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    medians = {label: np.median(rng.choice(np.asarray(r), (INTERVAL_DRAWS, len(r))), axis=1)
               for label, r in runs.items()}
    regrets = medians[pick] / np.min(np.stack(list(medians.values())), axis=0) - 1.0
    low, high = np.percentile(regrets, [5.0, 95.0])
    return float(low), float(high)


def setting(name: str, cluster: Any, workload: Any, limits: Any, args: argparse.Namespace,
            tmp: str) -> tuple[float, float, float]:
    """Tune, run the configurations, print the table; returns the regret and its 90% bootstrap interval."""
    from gnnplan.simulator.plan import Plan

    print(f"\n== {name}: cluster {cluster.name} ({cluster.num_machines} x {cluster.gpus_per_machine}), workload "
          f"{workload.name}, {args.trials} trials; load average {load_average()}", flush=True)
    db = "".join(c if c.isalnum() else "-" for c in name)  # "emulated@100Mbit/s" is no file name
    rows = tuned_configurations(cluster, workload, args.trials, args.top, f"sqlite:///{tmp}/{db}.db")
    plans = {r["label"]: Plan(strategy=r["strategy"], knobs=r["knobs"], num_workers=cluster.num_gpus,
                              cluster=cluster, workload=workload) for r in rows}
    got = measure(plans, args.repeats, tmp, args.epochs, limits)
    best = min(got.values(), key=lambda m: m.median_s).median_s
    print(f"{'configuration':<14} {'knobs':<60} {'pred_ms':>8} {'meas_ms':>8} {'spread':>7} {'meas/best':>9}")
    for r in rows:
        m = got[r["label"]]
        knobs = ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in r["knobs"].items())
        print(f"{r['label']:<14} {knobs[:60]:<60} {r['predicted_s'] * 1e3:>8.1f} {m.median_s * 1e3:>8.1f} "
              f"{m.spread:>7.1%} {m.median_s / best:>9.3f}")
    pick = got[rows[0]["label"]].median_s
    regret = pick / best - 1.0
    low, high = regret_interval({label: m.runs_s for label, m in got.items()}, rows[0]["label"])
    print(f"tuner's pick {rows[0]['label']}: {pick * 1e3:.1f} ms; best measured {best * 1e3:.1f} ms; "
          f"REGRET {regret:.1%} (90% bootstrap interval {low:.1%} .. {high:.1%}); load average {load_average()}",
          flush=True)
    return regret, low, high


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", default="local,emulated")
    parser.add_argument("--bandwidths", default="100Mbit/s,1Gbit/s")
    parser.add_argument("--workload", default="cora-sage")
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--top", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--quick-probe", action="store_true", help="probe the clusters with small sizes")
    args = parser.parse_args(argv)

    from gnnplan.executor.emulate import MachineLimits
    from gnnplan.simulator.units_parse import parse_quantity
    from gnnplan.simulator.workload.spec import load_workload

    workload = load_workload(args.workload)
    regrets: dict[str, tuple[float, float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="gnnplan-regret-") as tmp:
        settings = args.settings.split(",")
        if "local" in settings:
            regrets["local"] = setting("local", probe_local_cluster(args.quick_probe), workload, None, args, tmp)
        if "emulated" in settings:
            for text in args.bandwidths.split(","):
                rate = parse_quantity(text, "bandwidth", "--bandwidths")
                cluster = probe_emulated_cluster(rate, quick=args.quick_probe)
                regrets[f"emulated@{text}"] = setting(f"emulated@{text}", cluster, workload, MachineLimits(rate),
                                                      args, tmp)
    print("\nregret per setting (90% bootstrap interval): " + ", ".join(
        f"{k} {r:.1%} ({low:.1%} .. {high:.1%})" for k, (r, low, high) in regrets.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
