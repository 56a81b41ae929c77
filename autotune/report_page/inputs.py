"""What a report shows, gathered from a ``gnnplan loop`` folder or from files named one by one.

A loop folder (``gnnplan loop --out-dir DIR``) holds ``report.json`` (the loop's summary: study name and storage,
the calibration report with its held-out rows and fitted parameters), ``plan.yaml``, the measured trace and, from
this module's :func:`write_loop_outputs`, ``predicted.json`` (the simulator's timeline of the plan). Explicit
arguments (``--study``, ``--storage``, ``--plan``, ``--trace``, ``--predicted-trace``) add to or replace what the
folder gives; traces named with ``--trace`` are calibrated here, as ``gnnplan calibrate`` would.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.io import MAX_SPEC_BYTES, not_a_file
from gnnplan.simulator.plan import Plan, configuration_digest, load_plan
from gnnplan.simulator.trace import Span, check_same_run, check_source, read_trace
from gnnplan.simulator.trace_merge import measured_epochs

LOOP_REPORT = "report.json"
PREDICTED_TRACE = "predicted.json"
WHATIF_RECORD = "whatif.json"


@dataclass
class Timeline:
    """A trace's spans and where they came from (``name``: the file, or ``simulated from <plan>``), and the epochs
    its run measured its epoch time on (``results.measured_epochs``: not the warm-up; None: every epoch) and that
    time (``results.epoch_time_s``, the median over them, s; None for a simulated timeline); for a run's trace
    also the digest of the configuration it ran (:func:`simulator.plan.configuration_digest` of its plan, which
    holds the layout run) and the device it recorded (``results.device``)."""

    spans: list[Span]
    name: str
    measured_epochs: list[int] | None = None
    epoch_time_s: float | None = None
    configuration: str | None = None
    device: str | None = None


@dataclass
class ReportInputs:
    """Everything a report page can show; a missing piece leaves its sections with a note saying why.

    Attributes:
        title: the page's heading.
        plan: the chosen plan (strategy, knobs, cluster, workload, prediction).
        study: the Optuna study of ``gnnplan tune`` (trials carry their simulation results).
        predicted: the simulator's timeline of the plan (one epoch).
        measured: measured traces (``gnnplan run``), the first one drawn.
        calibration: the report of :func:`gnnplan.simulator.calibrate.calibrate` (``parameters``, ``held_out``).
        loop: the loop's summary (``measured_epoch_time_s``, ``predicted_before_s``, ...), when from a loop.
        missing: section -> why it has no data.
    """

    title: str
    plan: Plan | None = None
    study: Any = None
    predicted: Timeline | None = None
    measured: list[Timeline] = field(default_factory=list)
    calibration: dict[str, Any] | None = None
    loop: dict[str, Any] | None = None
    missing: dict[str, str] = field(default_factory=dict)


def read_json(path: Path, what: str) -> dict[str, Any]:
    """A JSON object from a file, at most :data:`~gnnplan.simulator.io.MAX_SPEC_BYTES` long.

    Raises:
        SpecError: missing, too large, not JSON, nested too deeply, or not an object (message names ``what``).
    """
    if not path.is_file():
        raise not_a_file(path, what)
    if path.stat().st_size > MAX_SPEC_BYTES:
        raise SpecError(f"{what}: {path} is larger than {MAX_SPEC_BYTES // 2**20} MiB")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise SpecError(f"{what}: {path} is not valid JSON: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{what}: {path} must hold a JSON object, got {type(data).__name__}")
    return data


def _in_folder(folder: Path, recorded: Any, default: str, what: str) -> Path:
    """A file the loop wrote into its folder and recorded by path (relative to where it ran): its name inside
    ``folder``, the folder the user named, never the recorded path itself (a copied folder whose own file was
    deleted or edited read the original folder's, 2026-12-01, a new user's pass).

    Raises:
        SpecError: ``folder`` lacks it (one line naming DIR and the file).
    """
    name = Path(recorded).name if isinstance(recorded, str) and recorded else default
    inside = folder / name
    if not inside.is_file():
        raise SpecError(f"DIR: {folder} lacks the loop's {what} {name!r} (named in {LOOP_REPORT})")
    return inside


def _loop_summary(folder: Path) -> dict[str, Any]:
    """The loop's ``report.json``, checked for the keys the page reads.

    Raises:
        SpecError: not a loop report.
    """
    data = read_json(folder / LOOP_REPORT, "DIR")
    for key, kind in (("tune", dict), ("calibration", dict), ("plan", str), ("trace", str)):
        if not isinstance(data.get(key), kind):
            raise SpecError(f"DIR: {folder / LOOP_REPORT} is not a gnnplan loop report: '{key}' must be a "
                            f"{'JSON object' if kind is dict else 'string'}")
    for key in ("study", "storage"):
        if not isinstance(data["tune"].get(key), str):
            raise SpecError(f"DIR: {folder / LOOP_REPORT}: tune.{key} must be a string")
    cal = data["calibration"]
    if not isinstance(cal.get("parameters"), dict) or not isinstance(cal.get("held_out"), dict):
        raise SpecError(f"DIR: {folder / LOOP_REPORT}: calibration needs 'parameters' and 'held_out' objects")
    return data


def load_study(name: str | None, storage: str) -> Any:
    """Open an existing Optuna study read-only in spirit (nothing is created).

    Args:
        name: the study name (None: the storage's only study).
        storage: an Optuna storage URL; a SQLite file must exist.

    Raises:
        SpecError: the file or study does not exist, or ``name`` is None and the storage holds several.
    """
    import optuna

    from gnnplan.autotune.study import open_storage

    if storage.startswith("sqlite:///"):
        db = Path(storage[len("sqlite:///"):])
        if not db.is_file():
            raise SpecError(f"--storage: {storage!r}: file {str(db)!r} does not exist")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rdb = open_storage(storage)
    names = [s.study_name for s in rdb.get_all_studies()]
    if name is None:
        if len(names) != 1:
            raise SpecError(f"--study: {storage} holds {len(names)} studies; name one of: {', '.join(names)}"[:300])
        name = names[0]
    if name not in names:
        raise SpecError(f"--study: no study {name!r} in {storage}; studies: {', '.join(names) or 'none'}"[:300])
    return optuna.load_study(study_name=name, storage=rdb)


def _timeline(path: Path, what: str) -> tuple[Timeline, dict[str, Any]]:
    if not path.is_file():
        raise not_a_file(path, what)
    spans, meta = read_trace(path)
    if not spans:
        raise SpecError(f"{what}: {path} holds no spans")
    results = meta.get("results") or {}
    timed, device = results.get("epoch_time_s"), results.get("device")
    try:
        ran = configuration_digest(Plan.model_validate(meta["plan"]))
    except (KeyError, TypeError, ValueError):  # read_trace checked the plan; a malformed one compares with nothing
        ran = None
    return Timeline(spans, path.name, measured_epochs(meta),
                    float(timed) if isinstance(timed, (int, float)) and not isinstance(timed, bool) else None,
                    ran, device if isinstance(device, str) else None), meta


def simulated_timeline(plan: Plan, label: str) -> Timeline:
    """The simulator's timeline of a plan (one epoch), computed now (cached graph statistics make it quick)."""
    from gnnplan.simulator.api import simulate

    return Timeline(simulate(plan.cluster, plan.workload, plan.strategy, plan.knobs).spans, f"simulated from {label}")


def _plan_of_trace(meta: dict[str, Any], path: Path) -> Plan | None:
    try:
        return Plan.model_validate(meta["plan"]) if isinstance(meta.get("plan"), dict) else None
    except ValueError:
        raise SpecError(f"--trace: {path}: metadata.plan is not a valid plan") from None


def gather(folder: str | None = None, study: str | None = None, storage: str | None = None,
           plan: str | None = None, traces: Sequence[str] = (), predicted: str | None = None) -> ReportInputs:
    """Collect a report's inputs (module docstring).

    Args:
        folder: a ``gnnplan loop`` output folder (None: only the explicit files).
        study, storage: the tuner's study (default: the loop's; storage default: the gnnplan home's SQLite file).
        plan: plan YAML (default: the loop's ``plan.yaml``, else the first trace's plan).
        traces: measured traces (default: the loop's trace, with the loop's calibration); traces given are
            calibrated here.
        predicted: a predicted trace (``gnnplan simulate --trace``; default: the loop's ``predicted.json``,
            else the plan simulated now).

    Returns:
        The inputs; pieces that are not available are named in ``missing``.

    Raises:
        SpecError: a named file, folder or study that does not exist or is malformed, or nothing given at all.
    """
    if folder is None and not (study or storage or plan or traces or predicted):
        raise SpecError("DIR: give a folder written by gnnplan loop, or --study/--storage, --plan or --trace")
    out = ReportInputs(title="gnnplan report")
    base = Path(folder) if folder is not None else None
    if base is not None:
        out.loop = _loop_summary(base)
        out.title = f"gnnplan loop: {base.resolve().name}"
        study = study or out.loop["tune"]["study"]
        storage = storage or out.loop["tune"]["storage"]
        plan = plan or str(_in_folder(base, out.loop["plan"], "plan.yaml", "plan"))
        if not traces:  # the loop's trace and its calibration; traces given instead are calibrated below
            traces = [str(_in_folder(base, out.loop["trace"], "", "trace"))]
            out.calibration = out.loop["calibration"]
        if predicted is None and (base / PREDICTED_TRACE).is_file():
            predicted = str(base / PREDICTED_TRACE)
    metas = []
    for t in traces:
        timeline, meta = _timeline(Path(t), "--trace")
        check_source(meta, "executor", "--trace")
        out.measured.append(timeline)
        metas.append((Path(t), meta))
    out.plan = load_plan(plan) if plan else next((p for path, m in metas if (p := _plan_of_trace(m, path))), None)
    if plan and metas and out.plan is not None:  # a plan named beside the traces must be theirs
        check_same_run({"plan": out.plan.model_dump(mode="json")}, metas[0][1], "--plan")
    if study or storage:
        from gnnplan.autotune.study import default_storage

        url = storage or default_storage()
        out.study = load_study(study or _named_study(out.plan, url), url)
    else:
        out.study, why = _home_study(out.plan)
        if out.study is None:
            out.missing["study"] = why
    if predicted is not None:
        timeline, meta = _timeline(Path(predicted), "--predicted-trace")
        check_source(meta, "simulator", "--predicted-trace")
        if metas:
            check_same_run(meta, metas[0][1], "--predicted-trace")
        out.predicted = timeline
    elif out.plan is not None:
        out.predicted = simulated_timeline(out.plan, Path(plan).name if plan else "the trace's plan")
    else:
        out.missing["predicted"] = "no plan or predicted trace given (--plan / --predicted-trace)"
    if not out.measured:
        out.missing["measured"] = "no measured trace given (--trace)"
    if out.calibration is None:
        out.calibration = _calibrate(traces, out) if traces else None
        if out.calibration is None:
            out.missing.setdefault("calibration", "no measured trace to calibrate on (--trace)")
    return out


def _named_study(plan: Plan | None, storage: str) -> str | None:
    """The study ``plan`` names (``prediction.study``, written by ``gnnplan tune``) when ``storage`` holds it, else
    None (:func:`load_study` then takes the storage's only study): ``--storage`` without ``--study`` shows the
    plan's study, as ``--study``'s help says (before 2026-12-01 only the home's storage was searched for it)."""
    import optuna

    named = plan.prediction.get("study") if plan is not None else None
    if not isinstance(named, str) or (storage.startswith("sqlite:///")
                                      and not Path(storage[len("sqlite:///"):]).is_file()):
        return None  # (opening a missing SQLite file would create it; load_study says it is missing)
    try:
        names = optuna.get_all_study_names(storage)
    except Exception:  # noqa: BLE001 (load_study names what is wrong with the storage)
        return None
    return named if named in names else None


def _home_study(plan: Plan | None) -> tuple[Any, str]:
    """The study of the gnnplan home's storage a report without ``--study`` / ``--storage`` shows: the one the plan
    names (``prediction.study``, written by ``gnnplan tune``), else the storage's only study (:func:`load_study`);
    (study or None, why none when None)."""
    from gnnplan.autotune.study import default_storage_file

    named = plan.prediction.get("study") if plan is not None else None
    try:
        return load_study(named, f"sqlite:///{default_storage_file()}"), ""
    except SpecError as exc:
        return None, f"no tuning study given (--study / --storage), and the home's storage has none to show: {exc}"


def _calibrate(traces: Sequence[str], out: ReportInputs) -> dict[str, Any] | None:
    """Calibrate the plan's cluster on the traces (held-out rows included), as ``gnnplan calibrate`` would."""
    from gnnplan.simulator.calibrate import calibrate

    if out.plan is None:
        out.missing["calibration"] = "the traces carry no plan, and no --plan was given: nothing to calibrate"
        return None
    try:
        return calibrate({t: read_trace(t) for t in traces}, out.plan.cluster)[1]
    except SpecError as exc:
        out.missing["calibration"] = f"calibration failed: {exc}"
        return None


def whatif_folder(folder: str) -> bool:
    """Whether ``folder`` is a ``gnnplan whatif`` output (has ``whatif.json`` and no loop report)."""
    p = Path(folder)
    return (p / WHATIF_RECORD).is_file() and not (p / LOOP_REPORT).is_file()


def check_folder(folder: str) -> None:
    """Raises SpecError unless ``folder`` is a loop or whatif output folder."""
    p = Path(folder)
    if not p.is_dir():
        raise SpecError(f"DIR: {folder!r} is not a folder")
    if not (p / LOOP_REPORT).is_file() and not (p / WHATIF_RECORD).is_file():
        raise SpecError(f"DIR: {folder} has neither {LOOP_REPORT} (gnnplan loop) nor {WHATIF_RECORD} "
                        "(gnnplan whatif)")


def check_output(path: Path, flag: str = "-o") -> None:
    """Fail early, before minutes of work, when ``path`` cannot be written as a file.

    Raises:
        SpecError: ``path`` is a folder, or one of its parents is an existing file.
    """
    if path.is_dir():
        raise SpecError(f"{flag}: {str(path)!r} is a folder; name the HTML file to write")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise SpecError(f"{flag}: {str(parent)!r} is a file, not a folder")
            break
