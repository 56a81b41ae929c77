"""How far a what-if point's small per-strategy study lands from that strategy's best configuration.

``gnnplan whatif`` tunes every candidate strategy at every point with a small Optuna study (``--trials``, default
:data:`gnnplan.autotune.whatif.DEFAULT_TRIALS`, warm-started from the previous point's best and the defaults:
:func:`gnnplan.autotune.whatif.tune_candidate`), and calls the fastest the point's winner. Two strategies whose
studies end closer than their studies' own distance from the optimum are not told apart by the sweep:
:data:`gnnplan.autotune.whatif.TIE_FRACTION` calls them tied.

For each point of a sweep (default: Cora GraphSAGE on ``4x-a100-10gbe`` at 1, 10 and 100 Gbit/s, and full-graph GCN
on ``16x-t4-6gbe`` at 1 and 6 Gbit/s, where neutronstar's three modes compete), each candidate is tuned as the sweep
tunes it at several budgets (``--budgets``, the sweep's warm start carried along the points as ``whatif`` does) and
once with ``--reference`` trials from its defaults; printed per budget: the relative gap of each candidate's best
epoch time to the best either found (0 when the small study found the reference's configuration or a better
one), its median, 90th percentile and maximum over all (point, candidate) pairs, and in how many points the winner
differs from the reference's winner. Every figure is the simulator's own (no run): the gap is the search's, not the
model's error.

Usage::

    python benchmarks/bench_whatif_tuning.py [--budgets 4,8,16] [--reference 128]

Takes ~5 minutes on 2 cores with the defaults. Printed (2026-12-01, the defaults)::

    trials  pairs  median gap  90th pct      max  winner differs
         4     13       0.35%    12.15%   13.74%  1 of 5 points
         8     13       0.00%     3.15%   12.15%  0 of 5 points
        16     13       0.00%     0.10%    0.17%  0 of 5 points

The largest gaps: hopgnn's on ``4x-a100-10gbe`` at 100 Gbit/s (12.15% at 4 and 8 trials) and neutronstar's on
``16x-t4-6gbe`` at 6 Gbit/s (13.74% at 4 trials: its mode, depcache, depcomm or hybrid, is one categorical knob among
five, and 4 trials after the two enqueued ones may not try the best).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("DGLBACKEND", "pytorch")

import numpy as np  # noqa: E402
import optuna  # noqa: E402

from gnnplan.autotune.candidates import candidates  # noqa: E402
from gnnplan.autotune.whatif import grid, parse_axes, tune_candidate  # noqa: E402

SWEEPS = (("4x-a100-10gbe", "cora-sage", "network.bandwidth_bytes_per_s=1Gbit/s,10Gbit/s,100Gbit/s"),
          ("16x-t4-6gbe", "cora-gcn-full", "network.bandwidth_bytes_per_s=1Gbit/s,6Gbit/s"))
"""(cluster, workload, --vary) of every sweep measured."""


def best_times(cluster: str, workload: str, vary: str, trials: int, warm_start: bool
               ) -> dict[tuple[int, str], float | None]:
    """Per (point, candidate) the best feasible epoch time of its study (None where none fits)."""
    points = grid(cluster, workload, parse_axes([vary]))
    out: dict[tuple[int, str], float | None] = {}
    warm: dict[str, dict | None] = {}
    for n, point in enumerate(points):
        for cand in candidates(point.workload, None, False):
            found, best = tune_candidate(point, cand, trials, 0, warm.get(cand.label) if warm_start else None)
            warm[cand.label] = best
            out[(n, cand.label)] = found["epoch_time_s"]
    return out


def winners(times: dict[tuple[int, str], float | None]) -> dict[int, str]:
    """Per point the candidate with the smallest time."""
    by_point: dict[int, list[tuple[float, str]]] = {}
    for (n, label), t in times.items():
        if t is not None:
            by_point.setdefault(n, []).append((t, label))
    return {n: min(rows)[1] for n, rows in by_point.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budgets", default="4,8,16", help="trials per (point, candidate) of the sweeps measured")
    ap.add_argument("--reference", type=int, default=128, help="trials of the reference study of each")
    args = ap.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    started = time.time()
    gaps: dict[int, list[float]] = {b: [] for b in budgets}
    changed: dict[int, int] = dict.fromkeys(budgets, 0)
    num_points = 0
    for cluster, workload, vary in SWEEPS:
        ref = best_times(cluster, workload, vary, args.reference, warm_start=False)
        ref_win = winners(ref)
        num_points += len(ref_win)
        for b in budgets:
            small = best_times(cluster, workload, vary, b, warm_start=True)
            # relative gap to the better of the two studies (0 when the small one found as good or better)
            gap = {k: t / min(t, r) - 1.0 for k, t in small.items() if t is not None and (r := ref[k]) is not None}
            gaps[b] += gap.values()
            changed[b] += sum(winners(small).get(n) != w for n, w in ref_win.items())
            worst = max(gap, key=gap.__getitem__, default=None)
            print(f"{cluster} / {workload} / {vary}, {b} trials: largest gap {gap.get(worst, 0.0):.2%} at {worst}",
                  flush=True)
    print(f"\n{'trials':>6}  {'pairs':>5}  {'median gap':>10}  {'90th pct':>8}  {'max':>7}  winner differs")
    for b in budgets:
        g = gaps[b]
        p90 = float(np.percentile(g, 90, method="nearest"))
        print(f"{b:>6}  {len(g):>5}  {statistics.median(g):>10.2%}  {p90:>8.2%}  {max(g):>7.2%}  "
              f"{changed[b]} of {num_points} points")
    print(f"(reference: {args.reference} trials from the defaults; {time.time() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
