"""Colours and layout shared by the report's charts: one colour per phase on every chart of the page."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

PHASE_ORDER = ("sample", "split", "load", "shuffle", "forward", "lockstep", "backward", "all_reduce", "all_to_all",
               "send", "recv", "optimizer", "preprocess", "overhead")
"""Phases in pipeline order (simulator/trace.py names them); others follow alphabetically."""
WRAPPER_PHASES = ("epoch", "iteration")
"""Spans that wrap others: timelines leave them out (they would cover every row)."""
TEMPLATE = "plotly_white"


def ordered_phases(phases: Iterable[str]) -> list[str]:
    """Phases in :data:`PHASE_ORDER`, then the rest alphabetically."""
    found = set(phases) - set(WRAPPER_PHASES)
    known = [p for p in PHASE_ORDER if p in found]
    return known + sorted(found - set(known))


def phase_colors(phases: Iterable[str]) -> dict[str, str]:
    """A stable colour per phase: palette position by :func:`ordered_phases` over all phases of the page."""
    from plotly import colors

    palette = colors.qualitative.Alphabet  # 26 colours chosen to be told apart (Green-Armytage, 2010)
    return {p: palette[i % len(palette)] for i, p in enumerate(ordered_phases(phases))}


def strategy_colors(labels: Iterable[str]) -> dict[str, str]:
    """A stable colour per strategy label (sorted order)."""
    from plotly import colors

    palette = colors.qualitative.Dark24
    return {s: palette[i % len(palette)] for i, s in enumerate(sorted(set(labels)))}


def layout(title: str, height: int, **extra: Any) -> dict[str, Any]:
    """Common layout: title, height in CSS pixels, white template, legend on the right."""
    return {"title": {"text": title, "x": 0.01}, "height": height, "template": TEMPLATE,
            "margin": {"l": 160, "r": 30, "t": 60, "b": 50}, **extra}
