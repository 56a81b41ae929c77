"""Simulator wall time at scale (issue 10, "Simulation at scale").

Three parts, each timed in this run (wall times on a shared 2-core machine are noisy: read ratios, not digits).
Every simulation runs in a child process (fork) with a time limit, so every stage is bounded: a run that would
exceed it is stopped and printed as ``skipped (budget)``.

1. Per strategy (dp, hopgnn, neutronstar; with ``--strategies`` also gsplit, hongtu and ppgnn) and cluster size
   (4, 16, 64, 256 GPUs: 4x1, 4x4, 8x8, 32x8 machines x GPUs of the ``2x4-a100-nvlink3-200gbib`` preset), the
   wall time of one simulation with the representative fast path (:mod:`gnnplan.simulator.symmetry`) and of the
   full simulation (``symmetry.disabled()``) measured in the same run, their ratio, and the relative difference of
   the predicted epoch times. Each timed simulation may take ``--full-budget`` seconds; the full simulation is not
   tried at the next size once one was over budget (cost grows ~10x per doubling of GPUs). Graph statistics are
   measured (or read from the disk cache) before the clock starts (``--stats-budget`` seconds), with one warming
   simulation: column ``first s`` (with nothing on disk, hopgnn's micrograph statistics at 32 x 8 took 53 s,
   2026-12-01; ppgnn's pre-propagation, kept per cluster and hop count, is simulated there). Mini-batch strategies
   run the ``ogbn-papers100M`` dataset card (statistics estimated on its proxy; ppgnn with SGC); neutronstar and
   hongtu a 100k-vertex R-MAT graph trained full-graph (their dependency counts need the graph).
2. The ``ogbn-papers100M`` card on 8 machines x 8 GPUs: wall time per configuration of every strategy the card
   allows (target: under 1 s), each within ``--card-budget`` seconds; with ``--card-full`` also the full
   simulation of the named strategies' configurations (e.g. gsplit's per-rank mean vs every rank's split).
3. A 200-trial Optuna study over all strategies at 64 GPUs (8x8; target: under 60 s), within ``--study-budget``
   seconds (its trials so far are reported if stopped). A first pass of the same seeded study runs before it and
   is printed apart: it measures the graph statistics its trials need that are not on disk yet (after a change of
   a measurement format, hopgnn's micrographs at 64 GPUs took ~100 s there, 2026-11-28), so the timed pass
   times the tuner and the simulator. Per strategy the trials, how many were simulated and how
   many reused a memoised result, simulation seconds per simulated trial; then where the rest went (set-up before
   the first trial, simulation contexts, sampler and attributes inside trials, storage writes between trials) and,
   when stopped, the in-flight trial cut off by the budget, counted apart (:func:`study_accounts`).

Usage: ``python benchmarks/bench_scale.py [--sizes 4,16,64,256] [--strategies dp,hopgnn,neutronstar,...]
[--full-budget 30] [--stats-budget 300] [--card-budget 60] [--card-full gsplit] [--trials 200]
[--study-budget 600] [--study-baseline] [--parts sizes,card,study]``.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import optuna

from gnnplan.autotune.study import (
    TuneRequest,
    eligible_strategies,
    objective,
    open_storage,
    open_study,
    run_study,
    validate_request,
)
from gnnplan.simulator import symmetry
from gnnplan.simulator.api import load_context
from gnnplan.simulator.hardware.spec import ClusterSpec, load_cluster
from gnnplan.simulator.workload.spec import WorkloadSpec, workload_from_dict

BASE = "2x4-a100-nvlink3-200gbib"
SHAPES = {4: (4, 1), 16: (4, 4), 64: (8, 8), 256: (32, 8)}
CARD = {"dataset": "ogbn-papers100M", "model": {"arch": "sage", "num_layers": 2, "hidden_dim": 256},
        "training": {"mode": "mini-batch", "batch_size": 16384, "fanouts": [10, 10], "num_epochs": 1}}
FULL_GRAPH = {"dataset": {"generator": "rmat", "num_vertices": 100000, "edge_factor": 16, "feature_dim": 128,
                          "num_classes": 16, "seed": 0},
              "model": {"arch": "gcn", "num_layers": 2, "hidden_dim": 128},
              "training": {"mode": "full-graph", "num_epochs": 1}}
PRE_PROPAGATED = {**CARD, "model": {"arch": "sgc", "num_layers": 2, "hidden_dim": 256}}
"""ppgnn's workload in part 1: the card with SGC (a pre-propagation model) instead of GraphSAGE."""
KNOBS: dict[str, dict[str, Any]] = {"dp": {"cache_fraction": 0.1, "num_sampler_workers": 2},
                                    "hopgnn": {"num_steps": 2}, "neutronstar": {"mode": "hybrid"},
                                    "gsplit": {}, "hongtu": {}, "ppgnn": {"hops": 2}}
"""One configuration per strategy (hopgnn with a fixed step count: one simulation, not the controller's M)."""
DEFAULT_STRATEGIES = ("dp", "hopgnn", "neutronstar")
"""Part 1's strategies unless ``--strategies`` names others (issue 10's three; every key of :data:`KNOBS` runs).
The others at 4 / 16 / 64 / 256 GPUs (2026-12-01, fast path; full in brackets where it fitted the 30-s budget):
gsplit 0.06 / 0.23 / 0.62 / 1.9 s (0.17 / 2.2 s at 4 / 16); hongtu (full-graph, R-MAT 10^5, every rank simulated:
asymmetric) 0.04 / 0.17 / 2.5 s and 31.5 s at 256 (100.4 s before its breakdown was summed in one pass over the
spans, same run: simulator/strategies/window.py, busiest_phase_totals); ppgnn 0.008 / 0.010 / 0.075 / 0.14 s once
its pre-propagation is simulated (column ``first s``: 7.0 s at 64, 10.5 s at 256, 2026-12-02: beyond 64 GPUs its
all_to_all goes by machine pairs, simulator/strategies/ppgnn/preprop.py, which keeps it per cluster and hop count;
message by message it took 27 minutes at 256 and came out 5.4% shorter)."""


def cluster(num_gpus: int) -> ClusterSpec:
    machines, gpus = SHAPES[num_gpus]
    base = load_cluster(BASE)
    return base.model_copy(update={"num_machines": machines, "gpus_per_machine": gpus,
                                   "name": f"{machines}x{gpus}-{BASE}"})


def workload(strategy: str) -> WorkloadSpec:
    """Part 1's workload of ``strategy``: full-graph training on R-MAT for neutronstar and hongtu, the card with SGC
    for ppgnn, else the card's GraphSAGE mini-batches."""
    chosen = {"neutronstar": FULL_GRAPH, "hongtu": FULL_GRAPH, "ppgnn": PRE_PROPAGATED}.get(strategy, CARD)
    return workload_from_dict(chosen)


def bounded(fn: Callable[[], Any], budget_s: float) -> Any:
    """``fn()`` run in a forked child process, or None when it did not finish within ``budget_s`` seconds (the
    child is then stopped). An exception in the child is raised here as a RuntimeError with its message."""
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)

    def child() -> None:
        try:
            send.send(("ok", fn()))
        except BaseException as exc:  # noqa: BLE001 -- reported to the parent, which raises it
            send.send(("error", f"{type(exc).__name__}: {exc}"))

    proc = ctx.Process(target=child, daemon=True)
    proc.start()
    try:
        if not receive.poll(budget_s):
            return None
        status, value = receive.recv()
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
    if status == "error":
        raise RuntimeError(value)
    return value


def timed(strategy: str, num_gpus: int, full: bool, knobs: dict[str, Any] | None = None,
          wl: WorkloadSpec | None = None, cl: ClusterSpec | None = None) -> tuple[float, float, str, float]:
    """(wall seconds of the strategy's simulate, predicted epoch seconds, which ranks ran: :func:`path_of`, seconds
    before it: the statistics loaded or measured and one warming simulation, :func:`warm`). Run it in
    :func:`bounded`."""
    before = time.perf_counter()
    module, kn, ctx = load_context(cl or cluster(num_gpus), wl or workload(strategy), strategy,
                                   KNOBS[strategy] if knobs is None else knobs)
    warm(module, ctx, kn)
    first = time.perf_counter() - before
    with symmetry.disabled() if full else contextlib.nullcontext():
        start = time.perf_counter()
        result = module.simulate(ctx, kn)
        wall = time.perf_counter() - start
    epoch = next(s.args for s in result.spans if s.phase == "epoch")
    path = path_of(epoch.get("machines_represented", 1), epoch.get("gpus_represented", 1))
    return wall, result.epoch_time_s, path, first


def why_over(strategy: str, num_gpus: int) -> str:
    """What a configuration of part 1 that ran over its budget spent it on, where known: hopgnn's micrograph
    statistics, unless on disk, are measured first: per measured iteration, W sampler calls (one per worker's
    batch) and, for every step count S = M..1, one sparse cut of all the models' groups
    (simulator/strategies/hopgnn/micrographs.py; until 2026-12-01 every group of every S was sampled on its own,
    ``W M (M + 1) / 2`` sampler calls per iteration: 333 s at 32 x 8, over the default ``--stats-budget``)."""
    if strategy != "hopgnn":
        return ""
    machines, gpus = SHAPES[num_gpus]
    return (f"(unless on disk, its micrograph statistics first: {machines * gpus} sampler calls and {machines} "
            f"cuts per measured iteration)")


def path_of(machines: int, gpus: int) -> str:
    """How a simulation ran: the machines and GPUs each simulated one stands for (:mod:`gnnplan.simulator.symmetry`)."""
    if machines == 1 and gpus == 1:
        return "full"
    return "representative machine" + (f", a GPU for {gpus}" if gpus > 1 else "")


def warm(module: Any, ctx: Any, knobs: Any) -> None:
    """Measure (or read) what a strategy's ``simulate`` loads on first use before the clock starts: one
    simulation, which measures (or reads from the disk cache) hopgnn's micrographs, gsplit's splits, neutronstar's
    and hongtu's dependency counts and every strategy's evaluation statistics (until 2026-12-01 dp was not warmed,
    and its first timed simulation read those: 0.965 s at 4 GPUs against 0.073 s for the full one after it)."""
    module.simulate(ctx, knobs)


def part_sizes(strategies: list[str], sizes: list[int], budget_s: float, stats_s: float) -> Iterator[str]:
    yield f"{'strategy':<12}{'GPUs':>5}{'shape':>7}{'fast s':>10}{'full s':>18}{'full/fast':>10}" \
          f"{'epoch diff':>12}{'first s':>10}  path"
    for strategy in strategies:
        full_over = False
        for n in sizes:
            shape = "x".join(map(str, SHAPES[n]))
            fast_run = bounded(lambda: timed(strategy, n, full=False), stats_s + 2 * budget_s)
            if fast_run is None:
                yield f"{strategy:<12}{n:>5}{shape:>7}{'skipped (budget)':>28}  " + why_over(strategy, n)
                full_over = True
                continue
            fast, epoch, path, first = fast_run
            full_run = None if full_over else bounded(lambda: timed(strategy, n, full=True), stats_s + 2 * budget_s)
            if full_run is not None and full_run[0] <= budget_s:
                full_s, full_epoch, _, _ = full_run
                full_text, ratio = f"{full_s:18.3f}", f"{full_s / fast:10.1f}"
                diff = f"{abs(epoch - full_epoch) / full_epoch:12.1e}"
            else:
                full_text, ratio, diff = f"{'skipped (budget)':>18}", f"{'-':>10}", f"{'-':>12}"
                full_over = True
            if path == "full" and SHAPES[n][0] > 1:
                path = "full (asymmetric work)"
            yield f"{strategy:<12}{n:>5}{shape:>7}{fast:10.3f}{full_text}{ratio}{diff}{first:10.1f}  {path}"


CARD_CONFIGS: list[tuple[str, dict[str, Any]]] = [
    ("dp", {}), ("dp", {"cache_fraction": 0.2, "num_sampler_workers": 4}),
    ("dp", {"partitioner": "random", "cache_placement": "partitioned", "cache_fraction": 0.05}),
    ("hopgnn", {"num_steps": 2}), ("hopgnn", {}), ("hopgnn", {"micrograph": False}),
    ("gsplit", {}), ("gsplit", {"split": "random", "cache_fraction": 0.1, "num_sampler_workers": 2})]
"""Configurations of part 2: several per strategy the card allows (ppgnn needs SGC / SIGN, neutronstar and hongtu
full-graph training: :func:`eligible_strategies` checks the list covers the rest)."""


def part_card(budget_s: float, stats_s: float, full: tuple[str, ...] = ()) -> Iterator[str]:
    """Part 2; for the strategies in ``full`` also the full simulation (``symmetry.disabled()``: every rank, a
    card's per-rank statistics as measured on its proxy) of each configuration in the same run: its wall time,
    full / fast, and the relative difference of the predicted epochs."""
    wl = workload_from_dict(CARD)
    allowed = set(eligible_strategies(wl, None))
    missing = allowed - {s for s, _ in CARD_CONFIGS}
    if missing:
        yield f"(no configuration listed for {', '.join(sorted(missing))})"
    for strategy, knobs in CARD_CONFIGS:
        if strategy not in allowed:
            continue
        run = bounded(lambda: timed(strategy, 64, False, knobs, wl), stats_s + budget_s)
        if run is None or run[0] > budget_s:
            yield f"{strategy:<8}{str(knobs):<78}{'skipped (budget)':>10}  (over {budget_s:g} s)"
            continue
        wall, epoch, path, _ = run
        verdict = "under 1 s" if wall < 1.0 else "OVER 1 s"
        yield f"{strategy:<8}{str(knobs):<78}{wall:8.3f} s  {verdict}  (epoch {epoch:.4g} s, {path})"
        if strategy in full:
            ref = bounded(lambda: timed(strategy, 64, True, knobs, wl), stats_s + 2 * budget_s)
            if ref is None:
                yield f"{'':8}{'full simulation (symmetry.disabled())':<78}{'skipped (budget)':>10}"
            else:
                diff = (epoch - ref[1]) / ref[1]
                yield f"{'':8}{'full simulation (symmetry.disabled())':<78}{ref[0]:8.3f} s  full/fast " \
                      f"{ref[0] / wall:.0f}x  (epoch {ref[1]:.4g} s; fast - full {diff:+.2%})"


def study_run(trials: int, storage: str, plain: bool = False) -> float:
    """Run the study (validated, statistics of every strategy cached by then) and return its wall seconds.

    ``plain``: the baseline, Optuna's ``study.optimize`` on the stored study (every suggestion and attribute its
    own transaction) with every trial simulated in a context built for it (no memo), instead of
    :func:`gnnplan.autotune.study.run_study`'s in-memory twin and trial cache."""
    wl = workload_from_dict(CARD)
    req = TuneRequest(cluster(64), wl, tuple(eligible_strategies(wl, None)), num_trials=trials, storage=storage,
                      study_name="bench-scale")
    start = time.perf_counter()
    if plain:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        validate_request(req)
        study, choices = open_study(req, open_storage(storage)), req.candidates()
        study.optimize(lambda t: objective(req, t, choices), n_trials=trials, catch=())
    else:
        run_study(req)
    return time.perf_counter() - start


def study_accounts(done: list[optuna.trial.FrozenTrial], started: float, wall: float) -> dict[str, Any]:
    """Where the study's wall time went, from its stored trials (start and end times, ``wall_s`` and ``reused``
    user attributes, :func:`gnnplan.autotune.study.objective`).

    Args:
        done: the completed trials in order.
        started: ``time.time()`` when the study process started.
        wall: the study's wall seconds (up to the budget when stopped).

    Returns:
        ``by`` (strategy -> trials, simulated, reused, simulate_s, context_s), ``setup_s`` (process start to the
        first trial: validation, storage, study), ``in_trial_s`` (sampler, parameters and attributes inside the
        trials: their durations minus context and simulation), ``between_s`` (between trials: recording a result
        and writing it to the storage), ``tail_s`` (after the last stored trial: a trial cut off by the budget,
        or the process's end).
    """
    by: dict[str, dict[str, float]] = {}
    in_trial = 0.0
    for t in done:
        row = by.setdefault(str(t.params.get("strategy", "?")),
                            {"trials": 0, "simulated": 0, "reused": 0, "simulate_s": 0.0, "context_s": 0.0})
        spent = t.user_attrs.get("wall_s", {"setup": 0.0, "simulate": 0.0})
        row["trials"] += 1
        row["reused" if t.user_attrs.get("reused") else "simulated"] += 1
        row["simulate_s"] += spent["simulate"]
        row["context_s"] += spent["setup"]
        in_trial += t.duration.total_seconds() - spent["simulate"] - spent["setup"]
    if not done:
        return {"by": by, "setup_s": wall, "in_trial_s": 0.0, "between_s": 0.0, "tail_s": 0.0}
    first, last = done[0].datetime_start.timestamp(), done[-1].datetime_complete.timestamp()
    durations = sum(t.duration.total_seconds() for t in done)
    return {"by": by, "setup_s": first - started, "in_trial_s": in_trial, "between_s": last - first - durations,
            "tail_s": started + wall - last}


def part_study(trials: int, budget_s: float, plain: bool = False) -> Iterator[str]:
    wl = workload_from_dict(CARD)
    strategies = tuple(eligible_strategies(wl, None))
    with tempfile.TemporaryDirectory() as tmp:
        # a first pass of the same seeded study measures the statistics its trials need and that are not yet on
        # disk (a new graph, or a new measurement format), so the timed pass below times the tuner and the
        # simulator only
        clock = time.perf_counter()
        first = bounded(lambda: study_run(trials, f"sqlite:///{tmp}/first.db", plain), budget_s)
        yield "first pass (the same trials; measures statistics not yet on disk): " + \
            (f"{time.perf_counter() - clock:.1f} s" if first is not None else "skipped (budget)")
        storage = f"sqlite:///{tmp}/study.db"
        started, clock = time.time(), time.perf_counter()
        wall = bounded(lambda: study_run(trials, storage, plain), budget_s)
        stopped = wall is None
        wall = time.perf_counter() - clock
        study = optuna.load_study(study_name="bench-scale", storage=storage)
        done = sorted((t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE),
                      key=lambda t: t.datetime_start)
    if stopped:
        yield f"{trials} trials over {', '.join(strategies)} at 64 GPUs (8x8): skipped (budget): stopped after " \
              f"{wall:.1f} s with {len(done)} trials done"
    else:
        verdict = "under 60 s" if wall < 60.0 else "OVER 60 s"
        yield f"{trials} trials over {', '.join(strategies)} at 64 GPUs (8x8): {wall:.1f} s  {verdict}"
    acc = study_accounts(done, started, wall)
    yield f"  {'strategy':<9}{'trials':>7}{'simulated':>10}{'reused':>8}{'simulate s':>12}{'s/simulation':>14}" \
          f"{'context s':>11}"
    for strategy, row in sorted(acc["by"].items()):
        per = row["simulate_s"] / row["simulated"] if row["simulated"] else float("nan")
        yield f"  {strategy:<9}{row['trials']:>7}{row['simulated']:>10}{row['reused']:>8}{row['simulate_s']:12.2f}" \
              f"{per:14.3f}{row['context_s']:11.2f}"
    reused = sum(r["reused"] for r in acc["by"].values())
    simulate_s = sum(r["simulate_s"] for r in acc["by"].values())
    context_s = sum(r["context_s"] for r in acc["by"].values())
    overhead = acc["setup_s"] + acc["in_trial_s"] + acc["between_s"]
    yield f"  reused (memoised) trials: {reused}/{len(done)}" + (f" ({reused / len(done):.0%})" if done else "")
    yield f"  simulation {simulate_s:.2f} s; contexts {context_s:.2f} s; set-up before the first trial " \
          f"{acc['setup_s']:.2f} s; sampler and attributes in trials {acc['in_trial_s']:.2f} s; between trials " \
          f"(storage writes) {acc['between_s']:.2f} s"
    yield f"  non-simulation overhead {overhead + context_s:.2f} s " \
          f"({(overhead + context_s) / max(len(done), 1):.3f} s/trial); " + \
          (f"cut off by the budget (in-flight trial) {acc['tail_s']:.2f} s" if stopped else
           f"after the last trial {acc['tail_s']:.2f} s") + \
          (f"; best epoch {min(t.value for t in done):.4g} s" if done else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4,16,64,256", help="GPU counts among 4, 16, 64, 256")
    parser.add_argument("--full-budget", type=float, default=30.0,
                        help="seconds one timed simulation of part 1 may take (the full one is skipped beyond)")
    parser.add_argument("--stats-budget", type=float, default=300.0,
                        help="seconds measuring a configuration's statistics may take (cached on disk)")
    parser.add_argument("--card-budget", type=float, default=60.0, help="seconds per configuration of part 2")
    parser.add_argument("--card-full", default="",
                        help="strategies of part 2 whose full simulation is also timed (e.g. gsplit; slow)")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--study-baseline", action="store_true",
                        help="part 3 also runs the plain study (Optuna's optimize on SQLite, no memo) first")
    parser.add_argument("--study-budget", type=float, default=600.0, help="seconds the study of part 3 may take")
    parser.add_argument("--parts", default="sizes,card,study")
    parser.add_argument("--strategies", default=",".join(DEFAULT_STRATEGIES),
                        help=f"strategies of part 1 among {', '.join(KNOBS)}")
    args = parser.parse_args()
    unknown = sorted(set(args.strategies.split(",")) - set(KNOBS))
    if unknown:
        parser.error(f"--strategies: {', '.join(unknown)} not among {', '.join(KNOBS)}")
    parts = args.parts.split(",")
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
    if "sizes" in parts:
        print("1. wall time per configuration, representative fast path vs full simulation (same run)")
        sizes = [int(s) for s in args.sizes.split(",")]
        for line in part_sizes(args.strategies.split(","), sizes, args.full_budget, args.stats_budget):
            print(line, flush=True)
    if "card" in parts:
        print("\n2. ogbn-papers100M card on 8 machines x 8 GPUs: wall time per configuration")
        for line in part_card(args.card_budget, args.stats_budget, tuple(filter(None, args.card_full.split(",")))):
            print(line, flush=True)
    if "study" in parts:
        print("\n3. Optuna study over all strategies at 64 GPUs")
        if args.study_baseline:
            print("baseline: Optuna's optimize on SQLite, every trial simulated (no memo, context per trial)")
            for line in part_study(args.trials, args.study_budget, plain=True):
                print(line, flush=True)
            print("run_study: in-memory twin written once per trial, memo and shared contexts")
        for line in part_study(args.trials, args.study_budget):
            print(line, flush=True)
    print(f"load average {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
