"""Human-readable reports (rich tables) for simulate, tune, run and calibrate. Only the CLI prints them."""

from __future__ import annotations

import sys
from statistics import median
from typing import Any

from rich.console import Console
from rich.table import Table

from gnnplan.simulator.wording import bytes_text


def fmt_s(x: float | None) -> str:
    """Seconds for people: ms below one second."""
    if x is None or x == float("inf"):
        return "-"
    return f"{x * 1e3:.2f} ms" if x < 1 else f"{x:.3f} s"


def fmt_s_range(lo_s: float | None, hi_s: float | None) -> str:
    """A range of seconds for people (``--proxy-draws``' least to greatest epoch time); '-' without one."""
    return "-" if lo_s is None or hi_s is None else f"{fmt_s(lo_s)} - {fmt_s(hi_s)}"


fmt_bytes = bytes_text
"""Bytes for people (decimal units): :func:`gnnplan.simulator.wording.bytes_text`."""


def peak_memory_text(peak: dict[str, float | None], phases: dict[str, dict[str, float | None]] | None = None) -> str:
    """A run's measured ``peak_memory_bytes`` for people: one machine's host memory, one GPU's (when measured),
    each with its training and evaluation peaks when ``phases`` (``peak_memory_phases``) has them."""
    parts = []
    for key, what in (("host", "host per machine"), ("gpu", "per GPU")):
        if peak.get(key) is not None:
            parts.append(f"{fmt_bytes(peak[key])} {what}" + _phases_text(phases, key))  # type: ignore[arg-type]
    return "peak memory " + (", ".join(parts) if parts else "not measured")


def _phases_text(phases: dict[str, dict[str, float | None]] | None, key: str) -> str:
    """`` (training X, evaluation Y)`` of memory ``key``, or nothing where a phase has no value."""
    values = {p: (phases or {}).get(p, {}).get(key) for p in ("training", "evaluation")}
    if any(v is None for v in values.values()):
        return ""
    return " (" + ", ".join(f"{p} {fmt_bytes(v)}" for p, v in values.items()) + ")"  # type: ignore[arg-type]


def largest_parts(parts: dict[str, float], count: int = 3) -> str:
    """The ``count`` largest of a peak's parts (``peak_memory_parts``), ``name size`` comma-separated."""
    top = sorted(parts.items(), key=lambda kv: -kv[1])[:count]
    return ", ".join(f"{name} {fmt_bytes(nbytes)}" for name, nbytes in top if nbytes > 0)


def knobs_text(knobs: dict[str, Any]) -> str:
    """``k=v`` pairs, rounded floats, None omitted."""
    return " ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in knobs.items()
                    if v is not None)


DEVICE_ON_CPU = "worker model memory (CPU-only: also in host)"
"""What the ``gpu`` memory of a cluster without GPUs is (``gpu.is_host_cpu``): each worker's model state, which
the memory model also charges to its machine's host memory."""


def simulation_table(res: dict[str, Any], on_cpu: bool = False, where: str = "") -> Table:
    """One simulated configuration (``on_cpu``: a cluster without GPUs, whose ``gpu`` memory is named
    :data:`DEVICE_ON_CPU`; ``where``: the workload and cluster it is of, for the title)."""
    t = Table(title=f"predicted{f' for {where}' if where else ''}: {res['strategy']}  {knobs_text(res['knobs'])}",
              show_header=False)
    t.add_row("feasible", "yes" if res["feasible"] else f"no: {res['reason']}")
    t.add_row("epoch time", fmt_s(res["epoch_time_s"]))
    t.add_row("iteration time", f"{fmt_s(res['iteration_time_s'])} x {res['num_iterations']}")
    from gnnplan.simulator.result import ONE_OFF_PHASES

    # a phase the configuration never runs (neutronstar's exchange under depcache) stays in the JSON at 0 only
    per_epoch = {p: sec for p, sec in res["breakdown_s"].items() if p not in ONE_OFF_PHASES and sec != 0}
    if per_epoch:
        t.add_row("per epoch, by phase", "the slowest worker's time in each, summed over the epoch: a collective "
                                         "(all_reduce, exchange) and a load overlapped with compute include their "
                                         "waits, as the executor's spans do; phases overlap, so they can add up to "
                                         "more than the epoch")
    nested = res.get("nested_phases") or {}
    for phase, sec in per_epoch.items():
        t.add_row(f"  {phase}", fmt_s(sec) + (f" (within {nested[phase]}: part of its time)" if phase in nested
                                                else ""))
    for phase in ONE_OFF_PHASES:
        if phase in res["breakdown_s"]:
            t.add_row(f"once: {phase}", f"{fmt_s(res['breakdown_s'][phase])} before training (not in the epoch time)")
    for link, b in res["bytes_per_epoch"].items():
        t.add_row(f"{link} bytes/epoch", fmt_bytes(b))
    for where, b in res["peak_memory_bytes"].items():
        label = DEVICE_ON_CPU if on_cpu and where == "gpu" else f"{where} memory"
        t.add_row(f"peak {label}", fmt_bytes(b) + _phases_text(res.get("peak_memory_phases"), where))
        largest = largest_parts((res.get("peak_memory_parts") or {}).get(where) or {})
        if largest:
            t.add_row("  largest parts", largest)
    est = res.get("estimated")
    pooled = (est or {}).get("pooled")
    if est:  # a dataset card: its statistics are one draw of its proxy, or pooled over several (proxy_pool.py)
        t.add_row("statistics", estimated_text(est))
        t.add_row("proxy communities", est["proxy"]["communities"])
    drawn = res.get("proxy_draws")
    if drawn:  # simulate --proxy-draws: the same configuration on further draws of the card's proxy
        fits = [x for x in drawn["epoch_time_s"] if x is not None]
        span = f"{fmt_s_range(min(fits), max(fits))}, median {fmt_s(median(fits))}" if fits else "-"
        unfit = len(drawn["epoch_time_s"]) - len(fits)
        t.add_row(f"epoch time on single draws {drawn['draws'][0]}-{drawn['draws'][-1]}",
                  span + (f" ({unfit} of {len(drawn['draws'])} do not fit)" if unfit else "")
                  + ("; the epoch time above pools the draws, so it need not lie in a few draws' range"
                     if pooled else ""))
    t.add_row("simulated in", fmt_s(res["sim_wall_s"]))
    return t


def estimated_text(est: dict[str, Any], json_key: str = "estimated") -> str:
    """Where a card's statistics come from (a result's ``estimated`` record): one draw of its proxy, or the medoid
    of several (simulator/workload/proxy_pool.py); ``json_key`` names where ``--json`` puts the record."""
    pooled = est.get("pooled")
    where = f"the medoid of draws 0-{pooled['draws'] - 1}" if pooled else f"draw {est['proxy']['draw']}"
    size = f"{est['proxy']['num_vertices']:,} vertices{' each' if pooled else ''}"
    return f"estimated on {where} of card {est['card']}'s proxy ({size}; --json: {json_key})"


def ranked_table(rows: list[dict[str, Any]], limit: int = 15, on_cpu: bool = False) -> Table:
    """The tuner's ranked configurations: the best ``limit`` rows, then the best row of every strategy (and
    model) not among them, so a strategy is never hidden behind near-copies of another (``on_cpu``: a cluster
    without GPUs, whose device memory column is the workers' model memory)."""
    from gnnplan.autotune.study import KNOB_DIGITS, best_of_others

    shown, extra = best_of_others(rows, limit)
    hidden = ""
    if len(shown) + len(extra) < len(rows):
        more = f" and {len(extra)} more, the best of other strategies" if extra else ""
        hidden = f" (showing the best {len(shown)}{more}; --json has them all)"
    t = Table(title="configurations by simulated epoch time",
              caption=f"{len(rows)} distinct configuration{'' if len(rows) == 1 else 's'}{hidden}; the best of each "
                      "strategy tried is always shown; "
                      f"trials whose float knobs agree to {KNOB_DIGITS} significant digit are one row (column trials), "
                      "showing its best trial's knobs")
    drawn = next((r["proxy_draws"] for r in rows if r.get("proxy_draws")), None)
    device = "peak worker model memory" if on_cpu else "peak GPU memory"
    columns = ["rank", "strategy", "model", "knobs", "epoch time", "iteration", device, "trials", "note"]
    if on_cpu:  # a CPU worker's model memory is a small part of what its machine holds (graph, features, caches)
        columns.insert(7, "peak host memory (per machine)")
    if drawn:  # tune --proxy-draws: each strategy's best over further proxy draws
        columns.insert(5, f"over proxy draws {drawn[0]}-{drawn[-1]}")
    for col in columns:
        t.add_column(col)
    for i, r in enumerate(shown + extra):
        note = "" if r["feasible"] else f"infeasible: {r['reason']}"
        if r in extra:  # the best of its strategy, and of its model where the strategy trains several
            models = {o.get("model", "") for o in shown + extra if o["strategy"] == r["strategy"]}
            which = f"{r['strategy']} with {r.get('model', '')}" if len(models) > 1 else r["strategy"]
            note = f"best {which}" + (f"; {note}" if note else "")
        cells = [str(r["rank"]), r["strategy"], r.get("model", ""), knobs_text(r["knobs"]), fmt_s(r["epoch_time_s"]),
                 fmt_s(r["iteration_time_s"]), fmt_bytes(r["peak_gpu_memory_bytes"]), str(r.get("num_trials", 1)),
                 note]
        if on_cpu:
            cells.insert(7, fmt_bytes(r.get("peak_host_memory_bytes")))
        if drawn:
            cells.insert(5, "" if r.get("epoch_time_min_s") is None else
                         fmt_s_range(r["epoch_time_min_s"], r["epoch_time_max_s"]))
        t.add_row(*cells, end_section=i == len(shown) - 1 and bool(extra))
    return t


def draws_line(record: dict[str, Any]) -> str:
    """One sentence on ``tune --proxy-draws``: on how many draws the best configuration stays the fastest of the
    strategies' best (:func:`autotune.planning.draw_best_rows`)."""
    draws = record["draws"]
    if not draws:
        return "proxy draws: no feasible configuration to simulate again"
    if record.get("num_best_rows", 2) < 2:  # one strategy tried: nothing to be the fastest of
        return f"proxy draws {draws[0]}-{draws[-1]}: one strategy was tried; its best simulated on each draw"
    return (f"proxy draws {draws[0]}-{draws[-1]}: the best configuration is the fastest of the strategies' best on "
            f"{record['best_wins']} of {len(draws)} draws")


def parameter_table(params: dict[str, dict[str, Any]]) -> Table:
    """Calibrated parameters: prior, fitted value, one-standard-deviation range, ratio to the prior, rows that
    inform it and flags (:mod:`simulator.calibrate_fit`)."""
    t = Table(title="calibrated parameters (prior: measured by gnnplan probe, else the cluster's value)",
              caption="from traces: the share of a parameter's information the traces carry, the rest its prior's; "
                      "not informed: no row prices it, or under half comes from the traces (rows that move together "
                      "leave it undetermined), so its value mostly restates the prior")
    for col in ("parameter", "prior", "fitted", "1-sigma range", "x prior", "rows", "from traces", "flags"):
        t.add_column(col)
    for name, p in params.items():
        ratio = p["ratio_to_prior"]
        t.add_row(name, "-" if p["prior"] is None else f"{p['prior']:.4g}", f"{p['after']:.4g}",
                  _range_text(p["low"], p["high"]) if p["fitted"] else "-",
                  "-" if ratio is None else f"{ratio:.3g}", str(p["num_rows"]),
                  f"{p['data_share']:.0%}" if p["fitted"] else "-", ", ".join(p["flags"]))
    return t


def _range_text(low: float | None, high: float | None) -> str:
    """A one-standard-deviation range; an end the traces do not determine is ``inf``."""
    return " .. ".join("inf" if v is None else f"{v:.3g}" for v in (low, high))


def held_out_table(rows: list[dict[str, Any]]) -> Table:
    """Held-out epochs: each trace's odd epochs predicted by a calibration on its even ones, beside the
    uncalibrated prediction (:mod:`simulator.calibrate_holdout`); under a trace whose run timed its evaluation
    after each epoch, a row of that evaluation's (not part of the epoch time)."""
    t = Table(title="held-out epochs: predicted by a calibration on the other epochs (not fitted to them)")
    for col in ("trace", "fit on epochs", "held-out epochs", "measured", "uncalibrated", "error",
                "calibrated, held out", "held-out error"):
        t.add_column(col, overflow="fold" if col == "trace" else "ellipsis")  # a path is wrapped whole, not cut
    for r in rows:
        meas = r["measured_epoch_time_s"]
        t.add_row(r["trace"], epochs_text(r["fit_epochs"]), epochs_text(r["held_out_epochs"]), fmt_s(meas),
                  fmt_s(r["predicted_before_s"]), pct(r["predicted_before_s"], meas), fmt_s(r["predicted_s"]),
                  pct(r["predicted_s"], meas))
        ev = r.get("evaluation")
        if ev:
            meas = ev["measured_s"]
            t.add_row("  its evaluation", "", "", fmt_s(meas), fmt_s(ev["predicted_before_s"]),
                      pct(ev["predicted_before_s"], meas), fmt_s(ev["predicted_s"]), pct(ev["predicted_s"], meas))
    return t


def configuration_table(rows: list[dict[str, Any]]) -> Table:
    """Leave one configuration out: each configuration predicted by a calibration on all the others."""
    t = Table(title="held-out configurations: predicted by a calibration on the other configurations")
    for col in ("configuration left out", "traces", "measured", "uncalibrated", "error", "calibrated, held out",
                "held-out error"):
        t.add_column(col)
    for r in rows:
        meas = r["measured_epoch_time_s"]
        t.add_row(r["configuration"], str(len(r["traces"])), fmt_s(meas), fmt_s(r["predicted_before_s"]),
                  pct(r["predicted_before_s"], meas), fmt_s(r["predicted_s"]), pct(r["predicted_s"], meas))
    return t


def memory_table(memory: dict[str, Any]) -> Table:
    """Peak host memory held out: each trace's configuration predicted with ``host.process_bytes`` fitted to
    the other configurations' measured peaks (:mod:`simulator.calibrate_memory`)."""
    t = Table(title=f"held-out peak host memory: {memory['parameter']} {fmt_bytes(memory['before'])} -> "
                    f"{fmt_bytes(memory['after'])} (median of the traces); each trace predicted from the others")
    for col in ("trace", "measured", "uncalibrated", "error", "calibrated, held out", "held-out error"):
        t.add_column(col)
    for r in memory["held_out"]["rows"]:
        meas = r["measured_host_bytes"]
        t.add_row(r["trace"], fmt_bytes(meas), fmt_bytes(r["predicted_before_bytes"]),
                  pct(r["predicted_before_bytes"], meas), fmt_bytes(r["predicted_bytes"]),
                  pct(r["predicted_bytes"], meas))
    return t


def epochs_text(epochs: list[int]) -> str:
    """A list of epochs for people: ``1, 3, 5`` (up to six), else ``1, 3, ..., 29 (15)``."""
    if len(epochs) <= 6:
        return ", ".join(map(str, epochs))
    return f"{epochs[0]}, {epochs[1]}, ..., {epochs[-1]} ({len(epochs)})"


def epochs_phrase(epochs: list[int]) -> str:
    """``epoch 2`` or ``epochs 1, 3, ...`` (:func:`epochs_text`)."""
    return f"epoch{'s' if len(epochs) != 1 else ''} {epochs_text(epochs)}"


def background_note(background: dict[str, Any] | None) -> str | None:
    """One sentence for a run whose measured epochs other processes kept busy (``results.background``,
    :func:`executor.run_load.summary`), else None: which epochs, how many cores, and what it means for its times."""
    if not background or not background.get("busy_epochs"):
        return None
    b = background
    return (f"other processes kept up to {b['max_other_cores']:.2f} of {b['cores']} cores busy during "
            f"{epochs_phrase(b['busy_epochs'])} ({b['other_cores']:.2f} over its measured epochs; the hypervisor took "
            f"{b['steal_fraction']:.0%}): those epoch times are this machine's under that load, not its own; rerun "
            "on a quiet machine before calibrating on them")


def transient_lines(epochs_report: dict[str, Any]) -> list[str]:
    """Per trace with transient epochs (a calibration report's ``held_out.epochs.transient``), one line saying
    which epochs no fit used and why (:func:`gnnplan.simulator.calibrate_holdout.transient_epochs`)."""
    from gnnplan.simulator.calibrate_holdout import TRANSIENT_MADS

    lines = []
    for name, tr in (epochs_report.get("transient") or {}).items():
        lo, hi = min(tr["times_s"]), max(tr["times_s"])
        times = fmt_s(lo) if lo == hi else f"{fmt_s(lo)} to {fmt_s(hi)}"
        lines.append(f"{name}: {epochs_phrase(tr['epochs'])} left out of "
                     f"every fit: {times} against the median measured epoch's {fmt_s(tr['median_s'])} (transient: "
                     f"more than {TRANSIENT_MADS:g} scaled MADs from it; still held out where odd)")
    return lines


def pct(pred: float | None, meas: float) -> str:
    """Signed relative error of a prediction, in percent."""
    if pred is None or meas <= 0:
        return "-"
    return f"{(pred - meas) / meas * 100:+.1f}%"


PIPE_WIDTH = 160
"""Columns of reports written to a file or pipe (rich would otherwise assume 80 and squeeze the knob column)."""


def console(stderr: bool = False) -> Console:
    """The console reports go to: the terminal's width, or :data:`PIPE_WIDTH` when not a terminal."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, soft_wrap=True, width=None if stream.isatty() else PIPE_WIDTH)
