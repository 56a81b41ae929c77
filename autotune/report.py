"""Human-readable reports (rich tables) for simulate, tune, run and calibrate. Only the CLI prints them."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.table import Table


def fmt_s(x: float | None) -> str:
    """Seconds for people: ms below one second."""
    if x is None or x == float("inf"):
        return "-"
    return f"{x * 1e3:.2f} ms" if x < 1 else f"{x:.3f} s"


def fmt_bytes(x: float) -> str:
    """Bytes for people (decimal units)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if x >= scale:
            return f"{x / scale:.2f} {unit}"
    return f"{x:.0f} B"


def knobs_text(knobs: dict[str, Any]) -> str:
    """``k=v`` pairs, rounded floats, None omitted."""
    return " ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in knobs.items()
                    if v is not None)


def simulation_table(res: dict[str, Any]) -> Table:
    """One simulated configuration."""
    t = Table(title=f"{res['strategy']}  {knobs_text(res['knobs'])}", show_header=False)
    t.add_row("feasible", "yes" if res["feasible"] else f"no: {res['reason']}")
    t.add_row("epoch time", fmt_s(res["epoch_time_s"]))
    t.add_row("iteration time", f"{fmt_s(res['iteration_time_s'])} x {res['num_iterations']}")
    for phase, sec in res["breakdown_s"].items():
        t.add_row(f"  {phase}", fmt_s(sec))
    for link, b in res["bytes_per_epoch"].items():
        t.add_row(f"{link} bytes/epoch", fmt_bytes(b))
    for where, b in res["peak_memory_bytes"].items():
        t.add_row(f"peak {where} memory", fmt_bytes(b))
    t.add_row("simulated in", fmt_s(res["sim_wall_s"]))
    return t


def ranked_table(rows: list[dict[str, Any]], limit: int = 15) -> Table:
    """The tuner's ranked configurations."""
    t = Table(title="configurations by simulated epoch time")
    for col in ("rank", "strategy", "model", "knobs", "epoch time", "iteration", "peak GPU memory", "note"):
        t.add_column(col)
    for r in rows[:limit]:
        t.add_row(str(r["rank"]), r["strategy"], r.get("model", ""), knobs_text(r["knobs"]), fmt_s(r["epoch_time_s"]),
                  fmt_s(r["iteration_time_s"]), fmt_bytes(r["peak_gpu_memory_bytes"]),
                  "" if r["feasible"] else f"infeasible: {r['reason']}")
    return t


def error_table(rows: list[tuple[str, float, float | None, float | None]]) -> Table:
    """Predicted vs measured epoch time: (label, measured_s, predicted_before_s, predicted_after_s)."""
    t = Table(title="epoch time: measured vs predicted")
    for col in ("run", "measured", "predicted before", "error before", "predicted after", "error after"):
        t.add_column(col)
    for label, meas, before, after in rows:
        t.add_row(label, fmt_s(meas), fmt_s(before), pct(before, meas), fmt_s(after), pct(after, meas))
    return t


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
