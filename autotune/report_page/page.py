"""The report as one self-contained HTML page: plotly.js embedded once in the head (the page opens offline),
then a section per chart; a section without data says why instead of drawing an empty chart."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gnnplan.autotune.report import background_note, fmt_bytes, fmt_s, knobs_text, pct, transient_lines
from gnnplan.autotune.report_page import run_charts as rc
from gnnplan.autotune.report_page import study_charts as sc
from gnnplan.autotune.report_page.inputs import ReportInputs, Timeline
from gnnplan.autotune.report_page.style import phase_colors
from gnnplan.simulator.hardware.spec import runs_as
from gnnplan.simulator.io import atomic_write_text
from gnnplan.simulator.plan import Plan, configuration_digest, predicted_epoch_s
from gnnplan.simulator.wording import counted

CHARTS = {
    "timeline-predicted": "Predicted timeline per worker and link",
    "timeline-measured": "Measured timeline per worker and link",
    "ranking": "The tuner's ranking",
    "breakdown": "Phase breakdown per strategy",
    "history": "Optimisation history",
    "importances": "Knob importances",
    "calibration": "Predicted vs measured epoch time, before and after calibration (held out)",
    "parameters": "Calibrated parameters against their priors",
}
"""Chart div id -> section heading, in page order."""
TOP_CONFIGURATIONS = 10
PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}
STYLE = """body{font-family:system-ui,sans-serif;margin:24px auto;max-width:1400px;color:#222}
h1{font-size:1.6em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.9em}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}
.caption{color:#555;font-size:.9em}.missing{color:#a33}"""


@dataclass
class Page:
    """A built report: its HTML, the chart ids drawn, and per section the caption or why it is empty."""

    html: str
    charts: list[str]
    notes: dict[str, str] = field(default_factory=dict)


class _Builder:
    def __init__(self, inputs: ReportInputs):
        self.inputs = inputs
        self.parts: list[str] = []
        self.charts: list[str] = []
        self.notes: dict[str, str] = {}
        self.colors = phase_colors(self._phases())

    def _phases(self) -> set[str]:
        phases = {s.phase for t in [self.inputs.predicted, *self.inputs.measured] if t for s in t.spans}
        if self.inputs.study is not None:
            for t in self.inputs.study.get_trials(deepcopy=False):
                phases |= set((t.user_attrs.get("result") or {}).get("breakdown_s", {}))
        return phases

    def section(self, cid: str, fig: Any | None, caption: str = "", missing: str = "") -> None:
        import plotly.io as pio

        self.parts.append(f"<h2>{html.escape(CHARTS[cid])}</h2>")
        if fig is None:
            self.notes[cid] = missing or "no data"
            why = html.escape(self.notes[cid])
            self.parts.append(f'<p class="missing" id="{cid}-missing">not available: {why}</p>')
            return
        self.charts.append(cid)
        self.notes[cid] = caption
        self.parts.append(pio.to_html(fig, include_plotlyjs=False, full_html=False, div_id=cid, config=PLOTLY_CONFIG))
        if caption:
            self.parts.append(f'<p class="caption">{html.escape(caption)}</p>')

    def html_block(self, text: str) -> None:
        self.parts.append(text)


def build_page(inputs: ReportInputs) -> Page:
    """Every section of the report (:data:`CHARTS`) from ``inputs``.

    Returns:
        The page; ``charts`` lists the ids drawn, ``notes`` says why the others are empty.
    """
    b = _Builder(inputs)
    b.html_block(_summary(inputs))
    _timelines(b, inputs)
    _study(b, inputs)
    _calibration(b, inputs)
    return Page(_document(inputs.title, "\n".join(b.parts)), b.charts, b.notes)


def _timelines(b: _Builder, inputs: ReportInputs) -> None:
    """The predicted and the measured epoch's timelines, on one time scale (2026-12-01: each on its own, which hid
    how far apart they were)."""
    workers = inputs.plan.num_workers if inputs.plan is not None else None
    predicted = measured = None
    if inputs.predicted is not None:
        predicted = rc.timeline_figure(inputs.predicted, "predicted", b.colors, workers)
    if inputs.measured:
        measured = rc.timeline_figure(inputs.measured[0], "measured", b.colors, workers)
    drawn = [fig for fig, _ in (t for t in (predicted, measured) if t is not None)]
    for fig in drawn:
        fig.update_xaxes(range=[0.0, max(f.layout.xaxis.range[1] for f in drawn)])
    if predicted is None:
        b.section("timeline-predicted", None, missing=inputs.missing.get("predicted", ""))
    else:
        fig, caption = predicted
        if inputs.loop is not None:  # loop simulates the plan on the cluster it was tuned for
            caption += "; the prediction before calibration (the cluster as given)"
        b.section("timeline-predicted", fig, caption)
    if measured is None:
        b.section("timeline-measured", None, missing=inputs.missing.get("measured", ""))
    else:
        fig, caption = measured
        first = f" (the first of {len(inputs.measured)} measured traces)" if len(inputs.measured) > 1 else ""
        b.section("timeline-measured", fig,
                  caption + f"{first}; the median epoch of those the run measured its epoch time on (the lower "
                            "middle one of an even count: an epoch that exists, so its time can differ from the "
                            "median's), aligned to start at 0 like the prediction")


def _study(b: _Builder, inputs: ReportInputs) -> None:
    study = inputs.study
    if study is None or not sc.best_per_strategy(study):
        why = inputs.missing.get("study", "the study has no completed trial")
        for cid in ("ranking", "breakdown", "history", "importances"):
            b.section(cid, None, missing=why)
        return
    best = sc.best_per_strategy(study)
    b.section("ranking", sc.ranking_figure(best), "each strategy's best configuration; the best configurations of "
              "all strategies below")
    b.html_block(_top_table(study))
    b.section("breakdown", sc.breakdown_figure(best, b.colors),
              "per phase: time of the slowest worker in one simulated epoch (a collective's and an overlapped load's "
              "include their waits, as the executor's spans do); phases overlap, so a stack can be taller than the "
              "epoch time (diamond)")
    b.section("history", sc.history_figure(study))
    fig, caption = sc.importance_figure(study)
    b.section("importances", fig, caption, missing=caption)


def _calibration(b: _Builder, inputs: ReportInputs) -> None:
    cal = inputs.calibration
    if cal is None:
        why = inputs.missing.get("calibration", "no calibration")
        b.section("calibration", None, missing=why)
        b.section("parameters", None, missing=why)
        return
    notes = rc.not_held_out(cal)
    whole = _whole_run(inputs)
    written = "the calibrated cluster written by the run" if inputs.loop else "the calibrated cluster"
    caption = ("each calibrated prediction comes from a fit that did not see the epochs or configuration it "
               f"predicts (simulator/calibrate_holdout.py); {written} is fitted on all the measured epochs but "
               "transients, and no error is computed on them"
               + (f". {whole}" if whole else "") + "".join(f". Not held out: {n}" for n in notes)
               + "".join(f". {line}" for line in transient_lines(cal.get("held_out", {}).get("epochs", {}))))
    b.section("calibration", rc.calibration_figure(cal), caption, missing=caption)
    params = cal.get("parameters", {})
    fig, left_out = rc.parameters_figure(params)
    unfitted = [n for n in left_out if not params[n].get("fitted")]
    zero = [f"{n} = {params[n]['after']:.3g}" for n in left_out if params[n].get("fitted")]
    caption = ("prior: the cluster's `priors` block (measured by gnnplan probe), else the cluster's own value; "
               "hover for values and flags"
               + (f". Not fitted, kept their starting value (no span of these traces determines them): "
                  f"{', '.join(unfitted)}" if unfitted else "")
               + (f". Fitted from a prior of 0 (no ratio): {', '.join(zero)}" if zero else ""))
    b.section("parameters", fig, caption, missing="no parameter was fitted against a positive prior")


def _whole_run(inputs: ReportInputs) -> str:
    """The loop's whole-run figures: the uncalibrated prediction was fitted to nothing, so its error counts."""
    loop = inputs.loop or {}
    meas, before = loop.get("measured_epoch_time_s"), loop.get("predicted_before_s")
    if not isinstance(meas, (int, float)) or not isinstance(before, (int, float)):
        return ""
    return (f"Whole run: measured {fmt_s(meas)} per epoch (median), predicted before calibration {fmt_s(before)} "
            f"({pct(before, meas)}; against the median over all measured epochs, where the chart above compares "
            "each trace's held-out epochs)")


def _predicted_text(plan: Plan) -> str:
    """The plan's predicted epoch time, or why it has none of its configuration (:func:`predicted_epoch_s`)."""
    value, why = predicted_epoch_s(plan)
    return fmt_s(value) if value is not None else f"none: {why}"


def _against(plan: Plan | None, run: Timeline) -> str:
    """The plan's prediction set against a run's epoch time (held out), where the run is the plan's configuration
    on its device (as ``gnnplan run`` compares them, :func:`gnnplan.executor.run_notes.prediction_for_run`), else
    why not; "" without a plan."""
    if plan is None or run.epoch_time_s is None:
        return ""
    predicted, why = predicted_epoch_s(plan)
    if run.configuration is not None and run.configuration != configuration_digest(plan):
        predicted, why = None, "the run's layout or configuration is not the plan's"
    elif run.device is not None and not runs_as(run.device, plan.cluster):
        predicted, why = None, f"the run computed on {run.device}, not {plan.cluster.name}'s {plan.cluster.gpu.model}"
    if predicted is None:
        return f"; not compared with the plan's prediction: {why}"
    return f"; the plan's prediction is {pct(predicted, run.epoch_time_s)} against it, not fitted to it"


def _summary(inputs: ReportInputs) -> str:
    rows: list[tuple[str, str]] = []
    plan = inputs.plan
    if plan is not None:
        rows += [("plan", f"{plan.strategy} {knobs_text(plan.knobs)}"),
                 ("cluster", f"{plan.cluster.name}: {counted(plan.cluster.num_machines, 'machine')} x "
                             f"{plan.cluster.gpus_per_machine} {plan.cluster.gpu.model}"),
                 ("workload", f"{plan.workload.name or plan.workload.dataset_name}: {plan.workload.model.arch}, "
                              f"{plan.workload.training.mode}"),
                 ("predicted epoch time", _predicted_text(plan))]
    loop = inputs.loop or {}
    if isinstance(loop.get("measured_epoch_time_s"), (int, float)):
        rows.append(("measured epoch time", f"{fmt_s(loop['measured_epoch_time_s'])} (median over measured epochs)"))
    elif inputs.measured and inputs.measured[0].epoch_time_s is not None:  # a trace given: its run's time
        first = inputs.measured[0]
        rows.append(("measured epoch time", f"{fmt_s(first.epoch_time_s)} (median over the measured epochs of "
                                            f"{first.name}){_against(plan, first)}"))
    memory, evaluation = loop.get("memory"), loop.get("evaluation")
    if isinstance(memory, dict):
        rows.append(("peak host memory per machine",
                     f"{fmt_bytes(memory['measured_host_bytes'])} measured, "
                     f"{fmt_bytes(memory['predicted_host_bytes_before'])} predicted before calibration "
                     f"({pct(memory['predicted_host_bytes_before'], memory['measured_host_bytes'])})"))
    if isinstance(evaluation, dict):
        rows.append(("evaluation after each epoch", f"{fmt_s(evaluation['measured_s'])} measured, "
                     f"{fmt_s(evaluation['predicted_before_s'])} predicted before calibration "
                     f"({pct(evaluation['predicted_before_s'], evaluation['measured_s'])})"))
    for name, load in ((inputs.calibration or {}).get("busy") or {}).items():  # loop printed it; say it here too
        note = background_note(load)
        if note:
            rows.append(("machine load during the run", f"{name}: {note}"))
    if inputs.study is not None:
        rows.append(("study", f"{inputs.study.study_name} ({len(inputs.study.trials)} trials)"))
    if inputs.measured:
        names = [t.name for t in inputs.measured]
        rows.append(("measured trace" if len(names) == 1 else "measured traces", ", ".join(names)))
    if inputs.predicted is not None:
        rows.append(("predicted trace", inputs.predicted.name))
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return f"<table id=\"summary\">{body}</table>" if rows else ""


def _top_table(study: Any) -> str:
    from gnnplan.autotune.study import ranked_trials

    rows = ranked_trials(study)[:TOP_CONFIGURATIONS]
    head = "".join(f"<th>{h}</th>" for h in ("rank", "strategy", "model", "knobs", "epoch time", "trials", "note"))
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in (
            r["rank"], r["strategy"], r["model"], knobs_text(r["knobs"]), fmt_s(r["epoch_time_s"]), r["num_trials"],
            "" if r["feasible"] else f"infeasible: {r['reason']}")) + "</tr>" for r in rows)
    return (f'<p class="caption">the {len(rows)} best distinct configurations (simulated)</p>'
            f'<table id="top-configurations"><tr>{head}</tr>{body}</table>')


def _document(title: str, body: str) -> str:
    from plotly.offline import get_plotlyjs

    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style>\n<script type=\"text/javascript\">{get_plotlyjs()}</script></head>\n"
            f"<body><h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n")


def write_report(inputs: ReportInputs, path: str | Path) -> Page:
    """Build the page and write it atomically (nothing is left at ``path`` on failure)."""
    page = build_page(inputs)
    atomic_write_text(path, page.html)
    return page
