"""``gnnplan report``: one self-contained plotly HTML page about a tuning study, a run and its calibration.

Sections (:data:`page.CHARTS`): the predicted and the measured timeline per worker and link, the tuner's ranking
(best configuration of each strategy), the phase breakdown per strategy, the optimisation history, knob
importances, predicted vs measured epoch time before and after calibration (held out only), and the calibrated
parameters against their priors. ``gnnplan loop`` writes the page at its end (:func:`write_loop_outputs`);
``gnnplan report DIR`` rebuilds it from a loop folder, and the same command on a ``gnnplan whatif`` folder
rebuilds that chart (:func:`write_whatif`).

Modules: :mod:`.inputs` (gathering and checking the inputs), :mod:`.run_charts` and :mod:`.study_charts` (the
figures), :mod:`.page` (the HTML), :mod:`.style` (colours).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gnnplan.autotune.report_page.inputs import (
    PREDICTED_TRACE,
    ReportInputs,
    check_folder,
    check_output,
    gather,
    whatif_folder,
)
from gnnplan.autotune.report_page.page import CHARTS, Page, build_page, write_report

REPORT_HTML = "report.html"

__all__ = ["CHARTS", "Page", "ReportInputs", "build_page", "check_folder", "check_output", "gather", "whatif_folder",
           "write_loop_outputs", "write_report", "write_whatif"]


def write_loop_outputs(out_dir: str | Path) -> dict[str, Path]:
    """After ``gnnplan loop`` wrote ``report.json``: the plan's predicted timeline ``predicted.json`` (to merge
    with the measured trace: ``gnnplan trace merge``) and the page ``report.html``, both atomically.

    Returns:
        ``{predicted_trace, report_html}`` paths.

    Raises:
        SpecError: the folder's ``report.json`` or its files are missing or malformed.
    """
    from gnnplan.simulator.api import predicted_trace, simulate, trace_metadata
    from gnnplan.simulator.plan import load_plan

    folder = Path(out_dir)
    plan = load_plan(folder / "plan.yaml")
    res = simulate(plan.cluster, plan.workload, plan.strategy, plan.knobs)
    pred = predicted_trace(res, folder / PREDICTED_TRACE, trace_metadata(plan.cluster, plan.workload,
                                                                         plan.strategy, res))
    write_report(gather(str(folder)), folder / REPORT_HTML)
    return {"predicted_trace": pred, "report_html": folder / REPORT_HTML}


def write_whatif(folder: str | Path, output: str | Path) -> Path:
    """Redraw a ``gnnplan whatif`` folder's chart from its ``whatif.json`` (self-contained HTML, atomically).

    Raises:
        SpecError: ``whatif.json`` is missing or malformed.
    """
    from gnnplan.autotune import whatif_report as wr
    from gnnplan.autotune.report_page.inputs import WHATIF_RECORD, read_json
    from gnnplan.autotune.whatif import Axis, WhatifResult
    from gnnplan.simulator.errors import SpecError

    path = Path(folder) / WHATIF_RECORD
    data: dict[str, Any] = read_json(path, "DIR")
    problem = whatif_record_problem(data)
    if problem:
        raise SpecError(f"DIR: {path} is not a gnnplan whatif record: {problem}")
    try:
        axes = [Axis(a["field"], a["target"], a["path"], tuple(a["labels"]), tuple(a["values"]))
                for a in data["axes"]]
        res = WhatifResult(axes, list(data["rows"]), list(data["summary"]), list(data["crossovers"]),
                           dict(data.get("card_communities") or {}), dict(data.get("card_statistics") or {}),
                           list(data.get("peak_rates") or []), list(data.get("notes") or []))
        title = data.get("title")  # the sweep's own title (cluster / workload); a record before 2026-11-30 has none
        if not isinstance(title, str):
            title = f"gnnplan whatif: {Path(folder).resolve().name}"
        return wr.write_html(res, Path(output), title)
    except (KeyError, TypeError, IndexError, ValueError) as exc:
        raise SpecError(f"DIR: {path} is not a gnnplan whatif record: {type(exc).__name__}: {exc}"[:300]) from None


AXIS_KEYS = ("field", "target", "path", "labels", "values")
"""What every axis of a ``whatif.json`` holds (:class:`gnnplan.autotune.whatif.Axis`)."""


def whatif_record_problem(data: dict[str, Any]) -> str | None:
    """What is wrong with the shape of a ``whatif.json`` object, in words naming the key (None: nothing): a
    non-empty ``axes`` list of objects with :data:`AXIS_KEYS` (labels and values lists of one length), and
    ``rows``, ``summary`` and ``crossovers`` lists of objects."""
    axes = data.get("axes")
    if not isinstance(axes, list) or not axes or not all(isinstance(a, dict) for a in axes):
        return f"'axes' must be a non-empty list of objects with {', '.join(AXIS_KEYS)}"
    for i, axis in enumerate(axes):
        missing = [k for k in AXIS_KEYS if k not in axis]
        if missing:
            return f"axes[{i}] lacks {', '.join(missing)}"
        if not isinstance(axis["labels"], list) or not isinstance(axis["values"], list) or \
                len(axis["labels"]) != len(axis["values"]):
            return f"axes[{i}]: 'labels' and 'values' must be lists of one length"
    for key in ("rows", "summary", "crossovers"):
        if not isinstance(data.get(key), list) or not all(isinstance(r, dict) for r in data[key]):
            return f"{key!r} must be a list of objects"
    return None
