"""Outputs of ``gnnplan whatif``: a rich table, a CSV (one row per point and strategy), a JSON record and a
self-contained plotly HTML chart (plotly.js embedded, so it opens offline)."""

from __future__ import annotations

import csv
import html
import io
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from gnnplan.autotune.report import fmt_s, fmt_s_range, knobs_text
from gnnplan.autotune.whatif import TIE_FRACTION, Axis, WhatifResult
from gnnplan.simulator.io import atomic_write_files, atomic_write_text, check_output
from gnnplan.simulator.result import LINKS

LOG_SPAN = 100.0
"""A numeric axis whose values span at least this factor is drawn on a log scale (bandwidths always are)."""
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
UNITS = {"bandwidth": "bytes/s", "time": "s", "bytes": "bytes", "flops": "FLOP/s"}


def summary_table(res: WhatifResult) -> Table:
    """Per point: the varied values, the winner, its epoch time, the runner-up and the speedup over it; after a
    sweep over proxy draws also the winner's epoch time over the draws and on how many of them it wins (with a
    caption where a card is pooled: its epoch time need not lie in that range)."""
    draws = any("winner_draws" in s for s in res.summary)
    pooled = draws and any(est.get("pooled") for est in res.card_statistics.values())
    t = Table(title="what-if: best configuration per point (each strategy tuned at each point)",
              caption="a pooled card's epoch time is the medoid draw's statistics priced, so it need not lie in "
                      "its single draws' range" if pooled else None)
    for axis in res.axes:
        t.add_column(axis.field)
    for col in ("winner", "epoch time", "runner-up", "its epoch time", "speedup"):
        t.add_column(col)
    if draws:
        t.add_column("winner over proxy draws")
        t.add_column("draws it wins")
    for s in res.summary:
        cells = [*s["labels"], s["winner"] or none_feasible(res, s["point"]), fmt_s(s["winner_epoch_time_s"]),
                 s["runner_up"] or "-", fmt_s(s["runner_up_epoch_time_s"]),
                 speedup_text(s)]
        if draws:
            cells += _draw_cells(res, s)
        t.add_row(*cells)
    return t


def speedup_text(s: dict[str, Any]) -> str:
    """A point's speedup cell: the winner's speedup over the runner-up, and who is tied with the winner."""
    if not s["speedup"]:
        return "-"
    tied = s.get("tied") or []
    return f"{s['speedup']:.2f}x" + (f" (tie with {', '.join(tied)}: within {TIE_FRACTION:.0%})" if tied else "")


def none_feasible(res: WhatifResult, point: int) -> str:
    """The winner cell of a point where no strategy fits: why the first candidate does not (the CSV's ``reason``
    column has every candidate's)."""
    reasons = [(r["strategy"], r["reason"]) for r in res.rows if r["point"] == point and r["reason"]]
    if not reasons:
        return "none feasible"
    more = f"; {len(reasons) - 1} more in the CSV" if len(reasons) > 1 else ""
    return f"none feasible ({reasons[0][0]}: {reasons[0][1]}{more})"


def title(res: WhatifResult, cluster: object, workload: object) -> str:
    """The chart's title: the base cluster and workload (a preset name, a YAML path or a spec's name), or for a
    spec varied whole (``--vary cluster=A,B``) its values."""
    named = {"cluster": str(getattr(cluster, "name", cluster)), "workload": str(getattr(workload, "name", workload))}
    for axis in res.axes:
        if not axis.path and axis.target in named:
            named[axis.target] = f"{axis.target} = {', '.join(axis.labels)}"
    return f"gnnplan whatif: {named['cluster']} / {named['workload']}"


def _draw_cells(res: WhatifResult, s: dict[str, Any]) -> list[str]:
    """The summary table's two proxy-draw cells of one point: the winner's epoch time range over the draws
    (numbered), and ``won/draws`` with the other draws' winners."""
    if "winner_draws" not in s:
        return ["- (not a card)", "-"]
    row = next((r for r in res.rows if r["point"] == s["point"] and r["strategy"] == s["winner"]), None)
    span = "-"
    if row is not None and row["epoch_time_min_s"] is not None:
        span = (f"{fmt_s_range(row['epoch_time_min_s'], row['epoch_time_max_s'])} "
                f"(draws {row['proxy_draws'][0]}-{row['proxy_draws'][-1]})")
    others = sorted({w or "none feasible" for w in s["draw_winners"] if w != s["winner"]})
    won = f"{s['winner_draws']}/{len(s['draw_winners'])}"
    return [span, won + (f" (else {', '.join(others)})" if others else "")]


def crossover_lines(res: WhatifResult) -> list[str]:
    """One sentence per crossover, or one saying there is none; a crossover whose winner was no candidate at the
    other point (another workload: ``--vary workload=cora-sage,cora-gcn-full``) says so."""
    ties = [f"{', '.join(f'{a.field}={label}' for a, label in zip(res.axes, s['labels']))}: {s['winner']} and "
            f"{', '.join(s['tied'])}" for s in res.summary if s.get("tied")]
    tie_line = [f"tied (within {TIE_FRACTION:.0%} of the winner's epoch time; a change of winner among them is no "
                f"crossover) at {'; '.join(ties)}"] if ties else []
    if not res.crossovers:
        winners = sorted({s["winner"] or "none" for s in res.summary})
        return [f"no crossover: {', '.join(winners)} wins at every point"
                if len(winners) == 1 else f"no crossover: the winners ({', '.join(winners)}) change only between "
                                          "tied candidates", *tie_line]
    lines = list(tie_line)
    for c in res.crossovers:
        axis: Axis = res.axes[c["axis"]]
        a, b = res.summary[c["from_point"]], res.summary[c["to_point"]]
        others = [f"{x.field}={a['labels'][i]}" for i, x in enumerate(res.axes) if i != c["axis"]]
        at = f" (at {', '.join(others)})" if others else ""
        absent = [w for w, p in ((c["from_winner"], c["to_point"]), (c["to_winner"], c["from_point"]))
                  if w and w not in {r["strategy"] for r in res.rows if r["point"] == p}]
        one = len(absent) == 1
        why = (f" ({' and '.join(absent)} {'is' if one else 'are'} not among the other point's candidates: "
               f"{'it cannot run its workload' if one else 'neither can run the other workload'})" if absent else "")
        between = f"{a['labels'][c['axis']]} and {b['labels'][c['axis']]}{at}"
        if c["from_winner"] is None or c["to_winner"] is None:  # a feasibility change, not a change of winner
            won, fits, fails = ((c["to_winner"], b, a) if c["from_winner"] is None else (c["from_winner"], a, b))
            lines.append(f"along {axis.field}: no strategy fits at {fails['labels'][c['axis']]}, {won} wins at "
                         f"{fits['labels'][c['axis']]}{at}")
            continue
        lines.append(f"crossover along {axis.field}: {c['from_winner']} -> {c['to_winner']} between {between}{why}")
    return lines


def csv_rows(res: WhatifResult) -> list[dict[str, Any]]:
    """The CSV's rows: one per (point, strategy), the winner marked, SI values beside labels given with units, the
    best configuration's bytes per epoch on each link kind and its peak GPU and host memory (as ``simulate`` gives
    them)."""
    out = []
    for r in res.rows:
        s = res.summary[r["point"]]
        row: dict[str, Any] = {"point": r["point"]}
        for axis, i in zip(res.axes, r["index"]):
            row[axis.field] = axis.labels[i]
            if axis.numeric and any(str(v) != label for v, label in zip(axis.values, axis.labels)):
                row[f"{axis.field} [SI]"] = axis.values[i]  # only where a value was given with a unit (10Gbit/s)
        won = r["strategy"] == s["winner"]
        fixed = {"cluster": r["cluster"], "strategy": r["strategy"], "model": r["model"],
                 "feasible": r["feasible"], "epoch_time_s": r["epoch_time_s"],
                 "iteration_time_s": r["iteration_time_s"], "winner": won,
                 "speedup_over_runner_up": s["speedup"] if won else None,
                 "knobs": json.dumps(r["knobs"], sort_keys=True), "num_trials": r["num_trials"],
                 "reason": r["reason"],
                 **{f"{link}_bytes_per_epoch": r.get("bytes_per_epoch", {}).get(link) for link in LINKS},
                 "peak_gpu_memory_bytes": r.get("peak_memory_bytes", {}).get("gpu"),
                 "peak_host_memory_bytes": r.get("peak_memory_bytes", {}).get("host")}
        # an axis named like a column (``--vary cluster=a.yaml,b.yaml``) keeps its label, as the table shows it;
        # the column's own value moves to ``<name>_name`` (the cluster spec's name)
        row.update({f"{k}_name" if k in row else k: v for k, v in fixed.items()})
        if "epoch_time_draws_s" in r:  # a sweep over proxy draws (whatif.on_draws)
            row.update({"proxy_draws": json.dumps(r["proxy_draws"]),
                        "epoch_time_draws_s": json.dumps(r["epoch_time_draws_s"]),
                        "epoch_time_min_s": r["epoch_time_min_s"], "epoch_time_max_s": r["epoch_time_max_s"],
                        "draws_won": sum(w == r["strategy"] for w in s["draw_winners"])})
        out.append(row)
    return out


def csv_text(res: WhatifResult) -> str:
    """:func:`csv_rows` as CSV text (header: every column any row has)."""
    rows = csv_rows(res)
    names = list(dict.fromkeys(k for row in rows for k in row)) or ["point"]  # a real graph's rows lack the draws
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=names, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def json_text(res: WhatifResult, title: str | None = None) -> str:
    """The whole result as JSON (axes, rows, summary, crossovers, ``card_communities``: per dataset card whose
    proxy has no block model, what its communities are and do to partition-dependent statistics, and
    ``card_statistics``: per dataset card the proxy its statistics were estimated on, one draw or pooled, and
    ``peak_rates``: a sentence per cluster priced at datasheet peaks, ``notes`` on points that may not be what was
    meant, and the chart's ``title``, which a redraw keeps), for ``gnnplan report`` and scripts."""
    axes = [{"field": a.field, "target": a.target, "path": a.path, "labels": list(a.labels),
             "values": list(a.values)} for a in res.axes]
    return json.dumps({"axes": axes, "rows": res.rows, "summary": res.summary, "crossovers": res.crossovers,
                       "card_communities": res.card_communities, "card_statistics": res.card_statistics,
                       "peak_rates": res.peak_rates, "notes": res.notes, "title": title}, indent=1)


def _x(axis: Axis) -> tuple[list[Any], dict[str, Any]]:
    """x values of an axis and its plotly layout (user's labels as tick text; log scale for wide spans)."""
    if not axis.numeric:
        return list(axis.labels), {"type": "category", "title": axis.field}
    values = [float(v) for v in axis.values]
    positive = all(v > 0 for v in values)
    log = positive and (axis.kind == "bandwidth" or max(values) / min(values) >= LOG_SPAN)
    unit = UNITS.get(axis.kind)
    plain = all(_is_number(label) for label in axis.labels)  # labels with units (1Gbit/s) carry their own
    title = f"{axis.field} ({unit})" if unit and plain else axis.field
    return values, {"type": "log" if log else "linear", "title": title, "tickvals": values,
                    "ticktext": list(axis.labels)}


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def figure(res: WhatifResult, title: str) -> Any:
    """The chart: best epoch time per strategy against the first axis (one line per strategy and combination of
    the other axes' values; stars on the winners; after a sweep over proxy draws, bars from each configuration's
    least to its greatest epoch time over the draws); a 2-axis grid adds a heatmap of winners."""
    from plotly import colors
    from plotly.subplots import make_subplots

    axis, two_d = res.axes[0], len(res.axes) == 2
    xs, xaxis = _x(axis)
    drawn = next((r["proxy_draws"] for r in res.rows if r.get("proxy_draws")), None)
    top = "best epoch time per strategy" + (f" (bars: least to greatest over {len(drawn)} proxy draws, knobs tuned "
                                            "on the first: the draws' spread, not the proxy's error)" if drawn
                                            else "")
    fig = make_subplots(rows=2 if two_d else 1, cols=1, vertical_spacing=0.14,
                        subplot_titles=[top] + (["winner"] if two_d else []))
    strategies = list(dict.fromkeys(r["strategy"] for r in res.rows))
    palette = colors.qualitative.Plotly
    for k, combo in enumerate(sorted({tuple(r["index"][1:]) for r in res.rows})):
        suffix = ", ".join(f"{a.field}={a.labels[i]}" for a, i in zip(res.axes[1:], combo))
        for j, name in enumerate(strategies):
            pts = sorted((r for r in res.rows if r["strategy"] == name and tuple(r["index"][1:]) == combo),
                         key=lambda r: r["index"][0])
            fig.add_scatter(x=[xs[r["index"][0]] for r in pts], y=[r["epoch_time_s"] for r in pts],
                            mode="lines+markers", name=f"{name}, {suffix}" if suffix else name, legendgroup=name,
                            line={"color": palette[j % len(palette)], "dash": DASHES[k % len(DASHES)]},
                            text=[knobs_text(r["knobs"]) + _draws_text(r) for r in pts],
                            hovertemplate="%{y:.4g} s<br>%{text}", error_y=_draw_bars(pts), row=1, col=1)
    won = [s for s in res.summary if s["winner"]]
    fig.add_scatter(x=[xs[s["index"][0]] for s in won], y=[s["winner_epoch_time_s"] for s in won], mode="markers",
                    name="winner", marker={"symbol": "star", "size": 14, "color": "black"},
                    text=[s["winner"] for s in won], hovertemplate="winner %{text}: %{y:.4g} s", row=1, col=1)
    fig.update_xaxes(row=1, col=1, **xaxis)
    times = [t for r in res.rows for t in (r["epoch_time_s"], r.get("epoch_time_min_s"), r.get("epoch_time_max_s"))
             if isinstance(t, (int, float)) and math.isfinite(t) and t > 0]
    fig.update_yaxes(title="simulated epoch time", type="log", row=1, col=1, **time_ticks(times))
    if two_d:
        _winner_heatmap(fig, res, strategies, palette)
    fig.update_layout(title=title, height=900 if two_d else 600, template="plotly_white")
    return fig


def time_ticks(seconds: Sequence[float]) -> dict[str, Any]:
    """:func:`~gnnplan.autotune.report_page.style.log_ticks` of seconds, each tick with its unit (``2 ms``,
    ``500 us``), so no tick reads as a bare ``2`` of an unnamed decade (plotly's default minor labels)."""
    from gnnplan.autotune.report_page.style import log_ticks

    return log_ticks(seconds, _tick_text)


def _tick_text(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale * (1 - 1e-9):
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def _draw_bars(rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Plotly error bars from each row's epoch time to its least and greatest over the proxy draws (None when no
    row was simulated on several draws)."""
    if not any(r.get("epoch_time_min_s") is not None for r in rows):
        return None
    up, down = [], []
    for r in rows:
        y, lo, hi = r["epoch_time_s"], r.get("epoch_time_min_s"), r.get("epoch_time_max_s")
        fits = y is not None and lo is not None and hi is not None
        up.append(hi - y if fits else 0.0)
        down.append(y - lo if fits else 0.0)
    return {"type": "data", "symmetric": False, "array": up, "arrayminus": down, "thickness": 1.5, "width": 6}


def _draws_text(row: dict[str, Any]) -> str:
    """Hover line of a row's epoch time range over proxy draws ('' without draws)."""
    if row.get("epoch_time_min_s") is None:
        return ""
    draws = row["proxy_draws"]
    return f"<br>proxy draws {draws[0]}-{draws[-1]}: {fmt_s_range(row['epoch_time_min_s'], row['epoch_time_max_s'])}"


def _winner_heatmap(fig: Any, res: WhatifResult, strategies: Sequence[str], palette: Sequence[str]) -> None:
    a, b = res.axes
    z = [[None] * len(a.labels) for _ in b.labels]
    text = [[""] * len(a.labels) for _ in b.labels]
    for s in res.summary:
        i, j = s["index"]
        if s["winner"]:
            z[j][i] = strategies.index(s["winner"])
            text[j][i] = s["winner"] + (f" {s['speedup']:.2f}x" if s["speedup"] else "") + (" tie" if s.get("tied")
                                                                                              else "")
    n = max(len(strategies), 1)
    scale = [[p, palette[k % len(palette)]] for k in range(n) for p in (k / n, (k + 1) / n)]
    fig.add_heatmap(x=list(a.labels), y=list(b.labels), z=z, text=text, texttemplate="%{text}", zmin=-0.5,
                    zmax=n - 0.5, colorscale=scale, showscale=False, row=2, col=1)
    fig.update_xaxes(title=a.field, type="category", row=2, col=1)
    fig.update_yaxes(title=b.field, type="category", row=2, col=1)


PAGE_STYLE = "body{font-family:system-ui,sans-serif;margin:16px 24px;color:#222}p,li{max-width:1100px}"
EXPLAINED = ("Every epoch time here is the simulator's prediction, not a measurement. At each point every strategy "
             "the workload allows was tuned by its own small Optuna study (the CSV's num_trials) and the best "
             "configuration of each is drawn; a star marks the point's winner. In the heatmap, \"dp 1.20x\" is the "
             "winner and its speedup over the runner-up, and \"tie\" a runner-up within {margin:.0%} of it (no "
             "crossover). The CSV (whatif.csv) holds every strategy's knobs, times, bytes per link and peak "
             "memory at every point.")


def html_text(res: WhatifResult, title: str) -> str:
    """The chart as one self-contained HTML page (plotly.js included), under the sweep's title, what the chart
    shows, and the sweep's findings and notes as ``gnnplan whatif`` printed them (2026-12-01: the chart alone)."""
    chart = str(figure(res, title).to_html(include_plotlyjs=True, full_html=False))
    said = [*crossover_lines(res), *(f"note: {n}" for n in res.notes), *res.peak_rates,
            *(f"{d}: the proxy's communities: {c}" for d, c in res.card_communities.items())]
    items = "".join(f"<li>{html.escape(line)}</li>" for line in said)
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{PAGE_STYLE}</style></head>\n<body><h1>{html.escape(title)}</h1>\n"
            f"<p>{html.escape(EXPLAINED.format(margin=TIE_FRACTION))}</p>\n<ul id=\"findings\">{items}</ul>\n"
            f"{chart}\n</body></html>\n")


def write_html(res: WhatifResult, path: Path, title: str) -> Path:
    """Write the chart (:func:`html_text`) atomically (``gnnplan report`` redraws a whatif folder's chart)."""
    return atomic_write_text(path, html_text(res, title))


OUTPUT_FILES = ("whatif.csv", "whatif.json", "whatif.html")
"""The files ``gnnplan whatif -o DIR`` writes in ``DIR``."""


def check_outputs(folder: str | Path, what: str) -> None:
    """Check, before a sweep, that ``folder`` and the :data:`OUTPUT_FILES` it would replace there can be written
    (:func:`simulator.io.check_output`: a file in the way, a read-only or immutable file, a folder named like one).

    Raises:
        SpecError: one line naming ``what`` (the option or argument) and the path.
    """
    check_output(folder, what, folder=True)
    for name in OUTPUT_FILES:
        check_output(Path(folder) / name, what)


def write_outputs(res: WhatifResult, folder: Path, title: str) -> dict[str, Path]:
    """Write :data:`OUTPUT_FILES` in ``folder`` as one (:func:`simulator.io.atomic_write_files`: none is replaced
    unless all can be). Returns ``{"csv": path, "json": path, "html": path}``.

    Raises:
        OSError: naming the file that could not be written.
    """
    texts = dict(zip((folder / name for name in OUTPUT_FILES),
                     (csv_text(res), json_text(res, title), html_text(res, title))))
    return dict(zip(("csv", "json", "html"), atomic_write_files(texts)))
