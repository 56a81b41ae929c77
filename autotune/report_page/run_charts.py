"""The report's charts of one run: timelines per worker and link, held-out predictions before and after
calibration, and the calibrated parameters against their priors.

Time axes are in milliseconds (converted here, for people); the data stay in seconds until then.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from gnnplan.autotune.report import epochs_text, fmt_s
from gnnplan.autotune.report_page.inputs import Timeline
from gnnplan.autotune.report_page.style import WRAPPER_PHASES, layout, log_ticks, ordered_phases
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.trace import STREAMS, Span
from gnnplan.simulator.trace_merge import one_epoch, timed_epoch
from gnnplan.simulator.wording import counted

MAX_TIMELINE_SPANS = 20_000
"""Spans drawn per timeline at most (the earliest ones; a browser stays responsive up to a few 10^4 bars)."""
MS = 1e3
BAR_WIDTH = 0.18
"""Width of a grouped bar when few rows are drawn, in category widths (plotly's default fills the chart)."""


def epoch_spans(spans: list[Span], among: Sequence[int] | None = None) -> tuple[list[Span], int | None, float]:
    """One epoch of a timeline, shifted to start at 0: the median epoch of those ``among`` (the run's measured
    epochs; :func:`simulator.trace_merge.timed_epoch`), or every span when the trace has no ``epoch`` spans.

    Returns:
        (spans without the wrapper phases, the epoch shown or None, its duration in seconds: the slowest rank's
        epoch span, as ``gnnplan run`` reports an epoch (:func:`simulator.calibrate_holdout.epoch_times_s`), or the
        spans' extent without epoch spans).
    """
    try:
        epoch, duration = timed_epoch(spans, among=among)
        shown = one_epoch(spans, epoch)
    except SpecError:
        epoch, t0 = None, min(s.start_s for s in spans)
        shown = [replace(s, start_s=s.start_s - t0) for s in spans]
        duration = max(s.end_s for s in shown) if shown else 0.0
    return [s for s in shown if s.phase not in WRAPPER_PHASES], epoch, duration


def _row(s: Span) -> str:
    return f"rank {s.rank} · {s.stream}"


def _row_key(s: Span) -> tuple[int, int, str]:
    return (s.rank, STREAMS.index(s.stream) if s.stream in STREAMS else len(STREAMS), s.stream)


def timeline_figure(timeline: Timeline, what: str, colors: dict[str, str], num_workers: int | None = None
                    ) -> tuple[Any, str]:
    """Gantt chart of one epoch: a row per worker (rank) and stream (compute, sampler, pcie, network, ...),
    a bar per span coloured by phase.

    Args:
        timeline: the trace's spans.
        what: ``predicted`` or ``measured`` (in the title).
        colors: phase -> colour (:func:`style.phase_colors`).
        num_workers: the plan's workers (None: unknown); a trace with fewer ranks says so in the caption.

    Returns:
        (figure, caption).
    """
    import plotly.graph_objects as go

    spans, epoch, duration = epoch_spans(timeline.spans, timeline.measured_epochs)
    total = len(spans)
    spans = sorted(spans, key=lambda s: s.start_s)[:MAX_TIMELINE_SPANS]
    rows = [_row(s) for s in sorted({_row_key(s): s for s in spans}.values(), key=_row_key)]
    fig = go.Figure()
    for phase in ordered_phases(s.phase for s in spans):
        mine = [s for s in spans if s.phase == phase]
        fig.add_bar(orientation="h", y=[_row(s) for s in mine], x=[s.dur_s * MS for s in mine],
                    base=[s.start_s * MS for s in mine], name=phase, marker={"color": colors.get(phase)},
                    customdata=[[s.nbytes, s.iteration] for s in mine], legendgroup=phase,
                    hovertemplate=f"{phase}<br>start %{{base:.4g}} ms, %{{x:.4g}} ms<br>"
                                  "%{customdata[0]:.4g} bytes, iteration %{customdata[1]}<extra></extra>")
    title = f"{what} timeline, epoch {epoch if epoch is not None else '(all spans)'}: {fmt_s(duration)}"
    height = max(140 + 26 * len(rows), 130 + 20 * len(fig.data))  # every row, and the legend unscrolled
    fig.update_layout(**layout(title, height, barmode="overlay", bargap=0.25))
    fig.update_yaxes(categoryorder="array", categoryarray=rows[::-1], title=None)
    ends = [s.end_s * MS for s in spans] + [duration * MS]
    fig.update_xaxes(title="time since the epoch's start (ms)", range=[0.0, 1.02 * max(ends)])  # may open idle
    ranks = len({s.rank for s in spans})
    caption = f"{timeline.name}: {counted(total, 'span')} of {counted(ranks, 'worker')}"
    if num_workers is not None and ranks < num_workers:
        caption += (f" of the plan's {num_workers} (the simulator runs identical machines once, as a representative "
                    "(simulator/symmetry.py): the others' timelines are the same)" if what == "predicted" else
                    f" of the plan's {num_workers}")
    if total > MAX_TIMELINE_SPANS:
        caption += f"; the first {MAX_TIMELINE_SPANS} shown"
    return fig, caption


def calibration_rows(cal: dict[str, Any]) -> list[dict[str, Any]]:
    """The held-out rows of a calibration report: epochs (per trace; then their evaluation, where the run timed
    it) and configurations (leave one out), each ``{label, measured_epoch_time_s, predicted_before_s,
    predicted_s}`` (an evaluation row's times are the evaluation's)."""
    held = cal.get("held_out", {})
    out = []
    for r in held.get("epochs", {}).get("rows", []):
        out.append({"label": f"{_short(r['trace'])}:<br>epochs {epochs_text(r['held_out_epochs'])}<br>"
                             f"(fit on {epochs_text(r['fit_epochs'])})", **_times(r)})
        ev = r.get("evaluation")
        if ev:
            epochs = epochs_text(r["held_out_epochs"])
            out.append({"label": f"{_short(r['trace'])}:<br>evaluation after<br>epochs {epochs}",
                        "measured_epoch_time_s": ev["measured_s"], "predicted_before_s": ev["predicted_before_s"],
                        "predicted_s": ev["predicted_s"]})
    for r in held.get("configurations", {}).get("rows", []):
        out.append({"label": f"{r['configuration']} (fit on the other configurations)", **_times(r)})
    return out


def _short(name: str) -> str:
    return name.replace("\\", "/").rsplit("/", 1)[-1]


def _times(r: dict[str, Any]) -> dict[str, float]:
    return {k: r[k] for k in ("measured_epoch_time_s", "predicted_before_s", "predicted_s")}


def not_held_out(cal: dict[str, Any]) -> list[str]:
    """Why some traces or configurations have no held-out row."""
    held = cal.get("held_out", {})
    lines = [f"{_short(t)}: {why}" for t, why in held.get("epochs", {}).get("not_held_out", {}).items()]
    if held.get("configurations", {}).get("reason"):
        lines.append(f"configurations: {held['configurations']['reason']}")
    return lines


def _err(pred: float | None, meas: float) -> str:
    if pred is None or not meas or not math.isfinite(pred):
        return ""
    return f"{(pred - meas) / meas * 100:+.1f}%"


def calibration_figure(cal: dict[str, Any]) -> Any | None:
    """Grouped bars per held-out row: measured epoch time, the prediction before calibration and the
    prediction of a calibration that did not see those epochs / that configuration (errors as text).
    None when the calibration held nothing out."""
    import plotly.graph_objects as go

    rows = calibration_rows(cal)
    if not rows:
        return None
    labels = [r["label"] for r in rows]
    fig = go.Figure()
    series = (("measured (held out)", "measured_epoch_time_s", "#444444"),
              ("predicted before calibration", "predicted_before_s", "#EF553B"),
              ("predicted after calibration (not fitted to these)", "predicted_s", "#00A36C"))
    for name, key, color in series:
        ys = [r[key] * MS for r in rows]
        text = ["" if key == "measured_epoch_time_s" else _err(r[key], r["measured_epoch_time_s"]) for r in rows]
        fig.add_bar(x=labels, y=ys, name=name, marker={"color": color}, text=text, textposition="outside",
                    width=BAR_WIDTH if len(rows) < 3 else None,
                    hovertemplate=f"{name}: %{{y:.4g}} ms %{{text}}<extra></extra>")
    fig.update_layout(**layout("epoch time (and evaluation): measured vs predicted before and after calibration "
                               "(held out)", 460, barmode="group", legend={"orientation": "h", "y": -0.25}))
    fig.update_yaxes(title="time (ms)", rangemode="tozero")
    return fig


def parameters_figure(params: dict[str, dict[str, Any]]) -> tuple[Any | None, list[str]]:
    """Each fitted parameter's calibrated value as a multiple of its prior (log scale), with its
    one-standard-deviation range; the prior is the line at 1.

    Returns:
        (figure or None when nothing was fitted against a positive prior, names of parameters left out).
    """
    import plotly.graph_objects as go

    shown = {n: p for n, p in params.items() if p.get("fitted") and p.get("prior") and p["prior"] > 0
             and p.get("after") is not None}
    left_out = sorted(set(params) - set(shown))
    if not shown:
        return None, left_out
    names = sorted(shown, key=lambda n: shown[n]["after"] / shown[n]["prior"])
    ratio = [shown[n]["after"] / shown[n]["prior"] for n in names]
    low = [(shown[n].get("low") or 0.0) / shown[n]["prior"] for n in names]
    high = [r if shown[n].get("high") is None else shown[n]["high"] / shown[n]["prior"] for n, r in zip(names, ratio)]
    flags = [", ".join(shown[n].get("flags", [])) for n in names]  # written beside the marker, not on hover only
    fig = go.Figure(go.Scatter(
        x=ratio, y=names, mode="markers+text", marker={"size": 11, "color": "#636EFA"}, name="calibrated / prior",
        text=[f"  {f}" if f else "" for f in flags], textposition="middle right", textfont={"color": "#a33"},
        cliponaxis=False,
        error_x={"type": "data", "symmetric": False, "array": [h - r for h, r in zip(high, ratio)],
                 "arrayminus": [r - lo for r, lo in zip(ratio, low)]},
        customdata=[[shown[n]["prior"], shown[n]["after"], shown[n].get("num_rows", 0),
                     ", ".join(shown[n].get("flags", [])) or "-"] for n in names],
        hovertemplate="%{y}<br>prior %{customdata[0]:.4g}, calibrated %{customdata[1]:.4g} (x%{x:.3g})<br>"
                      "%{customdata[2]} rows; flags: %{customdata[3]}<extra></extra>"))
    fig.add_vline(x=1.0, line={"dash": "dash", "color": "#888"})
    fig.update_layout(**layout("calibrated parameters relative to their priors", 120 + 34 * len(names),
                               showlegend=False, margin={"l": 300, "r": 200 if any(flags) else 30, "t": 60,
                                                         "b": 50}))
    fig.update_xaxes(type="log", title="calibrated value / prior (dashed: the prior; bars: 1-sigma range; "
                                       "no upper bar: not determined)",
                     **log_ticks([*ratio, *[lo for lo in low if lo > 0], *high, 1.0], lambda v: f"{v:g}x"))
    return fig, left_out
