"""Colours and layout shared by the report's charts: one colour per phase on every chart of the page."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

PHASE_ORDER = ("sample", "split", "pregather", "row_index", "load", "fetch", "h2d", "gather", "pack", "exchange",
               "d2d", "unpack", "shuffle", "forward", "lockstep", "backward", "d2h", "host_accumulate", "migrate",
               "all_reduce", "all_to_all", "send", "recv", "optimizer", "preprocess", "overhead", "eval_sample",
               "eval_fetch", "eval_load", "eval_forward", "eval_to_host")
"""Every phase the strategies trace (their ``PHASES``, simulator/trace.py's evaluation phases), in pipeline order;
others follow alphabetically. A phase's colour is its place here (:func:`phase_colors`), the same on every page."""
WRAPPER_PHASES = ("epoch", "iteration")
"""Spans that wrap others: timelines leave them out (they would cover every row)."""
TEMPLATE = "plotly_white"
RANGE_MARGIN_DECADES = 0.05
"""Decades of a log axis beyond the end ticks of :func:`log_ticks` (a marker on an end tick stays whole)."""


def ordered_phases(phases: Iterable[str]) -> list[str]:
    """Phases in :data:`PHASE_ORDER`, then the rest alphabetically."""
    found = set(phases) - set(WRAPPER_PHASES)
    known = [p for p in PHASE_ORDER if p in found]
    return known + sorted(found - set(known))


def phase_colors(phases: Iterable[str]) -> dict[str, str]:
    """A colour per phase, the same on every page whatever else it shows (2026-12-01: a plan's page coloured
    ``pregather`` otherwise than a loop's): a phase of :data:`PHASE_ORDER` takes the palette colour at its place
    there, any other one a colour chosen by a digest of its name."""
    from plotly import colors

    palette = colors.qualitative.Alphabet + colors.qualitative.Dark24  # Alphabet: 26 told apart (Green-Armytage)
    out = {}
    for p in ordered_phases(phases):
        place = PHASE_ORDER.index(p) if p in PHASE_ORDER else int(hashlib.sha1(p.encode()).hexdigest(), 16)
        out[p] = palette[place % len(palette)]
    return out


def strategy_colors(labels: Iterable[str]) -> dict[str, str]:
    """A stable colour per strategy label (sorted order)."""
    from plotly import colors

    palette = colors.qualitative.Dark24
    return {s: palette[i % len(palette)] for i, s in enumerate(sorted(set(labels)))}


def layout(title: str, height: int, **extra: Any) -> dict[str, Any]:
    """Common layout: title, height in CSS pixels, white template, legend on the right."""
    return {"title": {"text": title, "x": 0.01}, "height": height, "template": TEMPLATE,
            "margin": {"l": 160, "r": 30, "t": 60, "b": 50}, **extra}


def log_ticks(values: Sequence[float], text: Callable[[float], str]) -> dict[str, Any]:
    """A log axis's layout: ticks at the 1-2-5 steps from the one at or below the least positive value to the one
    at or above the greatest, each labelled by ``text`` (plotly's default labels only the decades and marks the
    steps between with bare digits), and the range (log10) that shows the end ticks; {} without positive values.
    """
    positive = [v for v in values if v > 0 and math.isfinite(v)]
    if not positive:
        return {}
    lo, hi = min(positive), max(positive)
    steps = [m * 10.0 ** e for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
             for m in (1, 2, 5)]
    below = [v for v in steps if v <= lo * (1 + 1e-9)]
    above = [v for v in steps if v >= hi * (1 - 1e-9)]
    ticks = [v for v in steps if below[-1] <= v <= above[0]]
    span = [math.log10(ticks[0]) - RANGE_MARGIN_DECADES, math.log10(ticks[-1]) + RANGE_MARGIN_DECADES]
    return {"tickvals": ticks, "ticktext": [text(v) for v in ticks], "range": span}
