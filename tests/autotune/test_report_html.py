"""``gnnplan report`` and the report ``gnnplan loop`` writes: one self-contained plotly page that renders in
headless Chromium with every chart drawn and no console error; bad input is one line and exit 2, nothing written.

The loop's input is small and deterministic: a real short study on Cora (4x-a100-10gbe, seeded TPE) and, instead
of a real run, a synthetic trace of the plan's simulated epoch at known speeds (tests/calibration_traces.py).
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from calibration_traces import epochs_trace
from chromium import render, require_chromium

from gnnplan.autotune.cli import main
from gnnplan.autotune.report import fmt_s
from gnnplan.autotune.report_page import CHARTS
from gnnplan.simulator import api
from gnnplan.simulator.calibrate import with_params
from gnnplan.simulator.hardware.spec import load_cluster
from gnnplan.simulator.trace import read_trace
from gnnplan.simulator.trace_merge import PID_OFFSET, ranks_by_label

pytestmark = pytest.mark.serial  # real loops and headless Chromium (tests/conftest.py)

FACTORS = (2.0, 1.3, 1.0, 1.3)
"""Epoch time scales of the synthetic run: a warm-up, then epochs 1 and 3 30% slower than epoch 2."""
TRIALS = 14
"""Enough trials of the seeded study to try dp, gsplit and hopgnn, with 5+ feasible trials for two of them."""
CHECKED_IN = Path(__file__).resolve().parents[2] / "traces" / "cora-main-job.merged.sample.json"


def _fake_run(trace_path: Path) -> Any:
    """``run_plan`` replaced by a synthetic trace of the plan on a cluster slower than the prior."""
    truth = with_params(load_cluster("4x-a100-10gbe"), {"efficiency.forward_fraction": 0.3,
                                                         "network.bandwidth_bytes_per_s": 0.8e9})

    def run_plan(plan: Any, nprocs: int, epochs: int | None, trace_dir: str, progress: bool,
                 gpus_per_machine: int = 1) -> dict[str, Any]:
        result = api.simulate(truth, plan.workload, plan.strategy, plan.knobs)
        trace = epochs_trace(result, truth, plan.workload, Path(trace_dir) / trace_path.name, FACTORS)  # as run's
        return {"epoch_time_s": 1.3 * result.epoch_time_s, "test_accuracy": 0.5, "trace": str(trace)}
    return run_plan


@pytest.fixture(scope="module")
def loop_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, str]]:
    """(loop folder, storage URL, the loop's stdout)."""
    import contextlib
    import io

    from gnnplan.executor import runner

    tmp = tmp_path_factory.mktemp("report")
    out_dir, storage = tmp / "loop", f"sqlite:///{tmp / 'studies.db'}"
    argv = ["loop", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--trials", str(TRIALS), "--nprocs",
            "4", "--epochs", str(len(FACTORS)), "--storage", storage, "--out-dir", str(out_dir)]
    buf = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(buf):
        mp.setattr(runner, "run_plan", _fake_run(tmp / "run.json"))
        assert main(argv) == 0
    yield out_dir, storage, buf.getvalue()


def test_loop_writes_the_report_and_says_where(loop_dir: tuple[Path, str, str]) -> None:
    out_dir, _, text = loop_dir
    page = out_dir / "report.html"
    assert f"report: {page}" in text
    html = page.read_text()
    assert not re.search(r"<script[^>]+src=", html)  # plotly.js is inline: the page opens offline
    assert html.count("Plotly.newPlot(") == len(CHARTS)
    for cid in CHARTS:
        assert f'id="{cid}"' in html
    assert "PED-ANOVA" in html or "fANOVA" in html
    pred, meta = read_trace(out_dir / "predicted.json")
    assert meta["source"] == "simulator" and {s.phase for s in pred} >= {"epoch", "forward"}


def test_report_renders_in_headless_chromium(loop_dir: tuple[Path, str, str], tmp_path: Path) -> None:
    browser = require_chromium()
    page = render(browser, loop_dir[0] / "report.html")
    (tmp_path / "report.png").write_bytes(page.screenshot_png)
    assert page.errors == [], page.messages
    charts = page.value["charts"]
    assert sorted(charts) == sorted(CHARTS) == sorted(page.value["divs"])
    for cid, chart in charts.items():
        assert chart["rendered"] and chart["traces"] >= 1 and chart["height"] > 100, (cid, chart)
        assert page.ink["elements"][cid] > 0.01, (cid, page.ink["elements"][cid])  # the chart drew something
    assert page.screenshot_png[:8] == b"\x89PNG\r\n\x1a\n" and len(page.screenshot_png) > 100_000
    assert page.ink["width"] == 1400 and page.ink["height"] > 3000 and page.ink["colours"] > 20


def test_chromium_helper_reports_console_errors(tmp_path: Path) -> None:
    """The check above can fail: a page that logs an error and throws is reported, one line each."""
    browser = require_chromium()
    page = tmp_path / "bad.html"
    page.write_text("<html><body><h1 id='h' data-ink>ink</h1><script>console.error('broken chart');"
                    "undefinedFunction();</script></body></html>")
    shown = render(browser, page, "document.getElementById('h').textContent", width=400, height=300, settle_s=0)
    assert shown.value == "ink" and len(shown.errors) == 2
    assert shown.errors[0] == "broken chart" and "undefinedFunction is not defined" in shown.errors[1]
    assert shown.ink["width"] == 400 and 0 < shown.ink["elements"]["h"] < 1


def _report(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["report", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_cli_report_from_the_folder_and_from_files(loop_dir: tuple[Path, str, str], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out_dir, storage, _ = loop_dir
    loop = json.loads((out_dir / "report.json").read_text())
    out = _report([str(out_dir), "-o", str(tmp_path / "a.html")], capsys)
    assert out["charts"] == list(CHARTS) and out["missing"] == {}
    # the same page from files named one by one: the trace is calibrated here, as gnnplan calibrate would
    files = ["--study", loop["tune"]["study"], "--storage", storage, "--plan", str(out_dir / "plan.yaml"),
             "--trace", loop["trace"], "-o", str(tmp_path / "b.html")]
    assert _report(files, capsys)["charts"] == list(CHARTS)
    held = re.findall(r"fit on 2\)", (tmp_path / "b.html").read_text())
    assert held, "the held-out epochs 1, 3 are predicted by a fit on epoch 2"
    # the trace's measured epoch time (2026-12-01: a loop page only); this fake run's trace holds the plan on
    # another cluster (the "truth" it was simulated on), so it is not set against the plan's prediction
    summary = (tmp_path / "b.html").read_text().split('<table id="summary">')[1].split("</table>")[0]
    run = json.loads(Path(loop["trace"]).read_text())["metadata"]["results"]
    assert f"<th>measured epoch time</th><td>{fmt_s(run['epoch_time_s'])} (median over the measured epochs of" \
        in summary and "not compared with the plan&#x27;s prediction: the run&#x27;s layout or configuration" in summary
    # no run wrote a calibrated cluster when the page calibrates the traces it was given
    assert "written by the run" in (tmp_path / "a.html").read_text()
    assert "written by the run" not in (tmp_path / "b.html").read_text()
    # a plan alone: its predicted timeline; every other section says why it is empty
    out = _report(["--plan", str(out_dir / "plan.yaml"), "-o", str(tmp_path / "c.html")], capsys)
    assert out["charts"] == ["timeline-predicted"]
    assert "--study" in out["missing"]["ranking"] and "--trace" in out["missing"]["calibration"]
    # ... unless the gnnplan home's storage holds the study the plan names (written by tune; 2026-11-30: --help
    # promised that default and the page said "no tuning study given")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GNNPLAN_HOME", storage.removeprefix("sqlite:///").removesuffix("/studies.db"))
        out = _report(["--plan", str(out_dir / "plan.yaml"), "-o", str(tmp_path / "d.html")], capsys)
    assert "ranking" in out["charts"] and "ranking" not in out["missing"]


def _rejected(argv: list[str], capsys: pytest.CaptureFixture[str], match: str, out: Path) -> None:
    assert main(["report", *argv]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and match in err, err
    assert not out.exists() and not list(out.parent.glob(f".{out.name}.*"))


def test_bad_input_is_one_line_and_writes_nothing(loop_dir: tuple[Path, str, str], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out_dir, storage, _ = loop_dir
    out = tmp_path / "r.html"
    o = ["-o", str(out)]
    _rejected(o, capsys, "give a folder", out)
    _rejected([str(tmp_path / "none"), *o], capsys, "is not a folder", out)
    _rejected([str(tmp_path), *o], capsys, "neither report.json", out)
    bad = tmp_path / "bad"
    bad.mkdir()
    for text, match in (("{", "not valid JSON"), ("[1]", "JSON object"), ('{"tune": 1}', "'tune' must be"),
                        ("[" * 100_000, "not valid JSON")):
        (bad / "report.json").write_text(text)
        _rejected([str(bad), *o], capsys, match, out)
    (tmp_path / "file").write_text("x")
    _rejected([str(out_dir), "-o", str(tmp_path / "file" / "r.html")], capsys, "is a file", tmp_path / "r.html")
    _rejected([str(out_dir), "-o", str(tmp_path)], capsys, "is a folder", out)
    _rejected(["--study", "nope", "--storage", storage, *o], capsys, "no study 'nope'", out)
    missing_db = tmp_path / "none.db"
    _rejected(["--storage", f"sqlite:///{missing_db}", *o], capsys, "does not exist", out)
    assert not missing_db.exists()  # the report never creates a storage
    _rejected(["--trace", str(tmp_path / "file"), *o], capsys, "not a Chrome trace", out)
    predicted = str(out_dir / "predicted.json")  # a prediction given as the measured trace, and the reverse
    _rejected(["--trace", predicted, *o], capsys, "--trace: this trace was written by the simulator", out)
    loop = json.loads((out_dir / "report.json").read_text())
    _rejected(["--trace", loop["trace"], "--predicted-trace", loop["trace"], *o], capsys,
              "--predicted-trace: this trace was written by the executor", out)
    (bad / "whatif.json").write_text('{"axes": []}')
    (bad / "report.json").unlink()
    _rejected([str(bad), *o], capsys, "not a gnnplan whatif record: 'axes' must be a non-empty list of objects", out)
    (bad / "whatif.json").write_text('{"axes": "x", "rows": []}')  # it said "TypeError: string indices must be ..."
    _rejected([str(bad), *o], capsys, "not a gnnplan whatif record: 'axes' must be a non-empty list", out)
    axis = {"field": "f", "target": "cluster", "path": "f", "labels": ["a"], "values": [1.0]}
    (bad / "whatif.json").write_text(json.dumps({"axes": [axis], "rows": [], "summary": 3, "crossovers": []}))
    _rejected([str(bad), *o], capsys, "not a gnnplan whatif record: 'summary' must be a list of objects", out)
    # a copied loop folder reads its own files, never the original's its report.json names (2026-12-01)
    copy = tmp_path / "copy"
    shutil.copytree(out_dir, copy)
    (copy / Path(loop["trace"]).name).unlink()
    _rejected([str(copy), *o], capsys, f"DIR: {copy} lacks the loop's trace '{Path(loop['trace']).name}' (named in "
              "report.json)", out)
    shutil.copy(out_dir / Path(loop["trace"]).name, copy)
    (copy / "plan.yaml").write_text("strategy: [\n")
    _rejected([str(copy), *o], capsys, "plan", out)


def test_report_redraws_a_whatif_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gnnplan.autotune.whatif import crossovers

    def row(point: int, strategy: str, epoch_time_s: float) -> dict[str, Any]:
        return {"point": point, "index": [point], "strategy": strategy, "model": "sage", "feasible": True,
                "epoch_time_s": epoch_time_s, "iteration_time_s": epoch_time_s / 3, "knobs": {"cache_fraction": 0.5},
                "reason": "", "num_trials": 2, "cluster": "4x-a100-10gbe"}
    labels = ["1Gbit/s", "100Gbit/s"]
    rows = [row(0, "dp", 0.03), row(0, "gsplit", 0.02), row(1, "dp", 0.01), row(1, "gsplit", 0.015)]
    summary = [{"point": p, "index": [p], "labels": [labels[p]], "winner": w, "winner_epoch_time_s": t,
                "runner_up": r, "runner_up_epoch_time_s": u, "speedup": u / t}
               for p, w, t, r, u in ((0, "gsplit", 0.02, "dp", 0.03), (1, "dp", 0.01, "gsplit", 0.015))]
    axis = {"field": "network.bandwidth_bytes_per_s", "target": "cluster", "path": "network.bandwidth_bytes_per_s",
            "labels": labels, "values": [1.25e8, 1.25e10]}
    (tmp_path / "whatif.json").write_text(json.dumps({"axes": [axis], "rows": rows, "summary": summary,
                                                      "crossovers": crossovers(summary)}))
    assert _report([str(tmp_path)], capsys) == {"output": str(tmp_path / "whatif.html"), "charts": ["whatif"],
                                               "missing": {}}
    html = (tmp_path / "whatif.html").read_text()
    assert html.count("Plotly.newPlot(") == 1 and "100Gbit" in html and "winner" in html
    assert f"gnnplan whatif: {tmp_path.name}" in html  # a record without its title: the folder's name
    record = json.loads((tmp_path / "whatif.json").read_text())
    (tmp_path / "whatif.json").write_text(json.dumps({**record, "title": "gnnplan whatif: 4x-t4-10gbe / cora-sage"}))
    _report([str(tmp_path)], capsys)
    assert "gnnplan whatif: 4x-t4-10gbe " in (tmp_path / "whatif.html").read_text()  # the sweep's own
    _rejected([str(tmp_path), "--plan", "p.yaml"], capsys, "whatif folder", tmp_path / "report.html")


def test_storage_with_several_studies_needs_a_name(loop_dir: tuple[Path, str, str], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out_dir, storage, _ = loop_dir
    db = tmp_path / "two.db"
    with sqlite3.connect(storage[len("sqlite:///"):]) as src, sqlite3.connect(db) as dst:
        src.backup(dst)
    import optuna

    optuna.create_study(study_name="other", storage=f"sqlite:///{db}")
    out = tmp_path / "r.html"
    _rejected(["--storage", f"sqlite:///{db}", "-o", str(out)], capsys, "holds 2 studies", out)
    # ... unless the plan names one of them (written by tune): --storage with --plan shows it (2026-12-01: the
    # plan's study was looked for in the home's storage only, and two studies here were refused)
    study = json.loads((out_dir / "report.json").read_text())["tune"]["study"]
    got = _report(["--storage", f"sqlite:///{db}", "--plan", str(out_dir / "plan.yaml"), "-o", str(out)], capsys)
    assert "ranking" in got["charts"] and f"{study} (" in out.read_text()
    missing = tmp_path / "missing.db"  # a storage file that does not exist is said, not created
    other = tmp_path / "m.html"
    _rejected(["--storage", f"sqlite:///{missing}", "--plan", str(out_dir / "plan.yaml"), "-o", str(other)], capsys,
              "does not exist", other)
    assert not missing.exists()


def test_checked_in_merged_trace_has_both_timelines() -> None:
    """traces/cora-main-job.merged.sample.json: a real gnnplan loop's prediction and measurement (README there)."""
    assert CHECKED_IN.stat().st_size < 1_000_000
    doc = json.loads(CHECKED_IN.read_text())
    spans, meta = read_trace(CHECKED_IN)
    pids = ranks_by_label(doc)
    assert pids["predicted"] and pids["measured"] and min(pids["measured"]) >= PID_OFFSET
    assert {s.rank for s in spans} == set(pids["predicted"]) | set(pids["measured"])
    for first, last in ((0, PID_OFFSET), (PID_OFFSET, 10**9)):
        mine = [s for s in spans if first <= s.rank < last]
        assert min(s.start_s for s in mine) == 0.0 and {"forward", "backward"} <= {s.phase for s in mine}
    assert meta["merged"]["predicted"]["strategy"] == meta["merged"]["measured"]["strategy"]
    assert all(t > 0 for t in meta["epoch_time_s"].values())


def test_the_held_out_chart_shows_the_evaluation_under_its_epochs() -> None:
    """A held-out epochs row whose run timed its evaluation (simulator.calibrate_holdout) is followed by a bar
    group of that evaluation's times; a row without one (a simulated trace) has none."""
    from gnnplan.autotune.report_page.run_charts import calibration_rows

    timed = {"trace": "/x/run.json", "fit_epochs": [2], "held_out_epochs": [1, 3], "measured_epoch_time_s": 0.04,
             "predicted_before_s": 0.03, "predicted_s": 0.038,
             "evaluation": {"measured_s": 0.02, "predicted_before_s": 0.011, "predicted_s": 0.017}}
    untimed = {**timed, "trace": "/x/sim.json", "evaluation": None}
    rows = calibration_rows({"held_out": {"epochs": {"rows": [timed, untimed]}}})
    assert [r["label"] for r in rows] == ["run.json:<br>epochs 1, 3<br>(fit on 2)",
                                          "run.json:<br>evaluation after<br>epochs 1, 3",
                                          "sim.json:<br>epochs 1, 3<br>(fit on 2)"]
    assert [(r["measured_epoch_time_s"], r["predicted_before_s"], r["predicted_s"]) for r in rows] == [
        (0.04, 0.03, 0.038), (0.02, 0.011, 0.017), (0.04, 0.03, 0.038)]


def test_a_transient_epoch_is_named_with_its_times() -> None:
    """The line calibrate, loop and the report page print for a trace whose epochs no fit used (transients)."""
    from gnnplan.autotune.report import transient_lines

    epochs = {"transient": {"run.json": {"epochs": [1, 2, 3], "times_s": [0.124, 0.186, 0.15], "median_s": 0.053},
                            "b.json": {"epochs": [4], "times_s": [0.2], "median_s": 0.05}}}
    assert transient_lines(epochs) == [
        "run.json: epochs 1, 2, 3 left out of every fit: 124.00 ms to 186.00 ms against the median measured epoch's "
        "53.00 ms (transient: more than 3 scaled MADs from it; still held out where odd)",
        "b.json: epoch 4 left out of every fit: 200.00 ms against the median measured epoch's 50.00 ms (transient: "
        "more than 3 scaled MADs from it; still held out where odd)"]
    assert transient_lines({"rows": []}) == []


def test_a_timelines_epoch_time_is_the_slowest_ranks_as_run_reports_it() -> None:
    """Ranks start an epoch at different times: the title gives the slowest rank's epoch (1.0 s), not the window
    from the first start to the last end (1.1 s), so it matches the run's reported epoch time."""
    from gnnplan.autotune.report_page.run_charts import epoch_spans
    from gnnplan.simulator.trace import Span

    spans = [Span(0, "epoch", 0.0, 1.0, "host", epoch=0), Span(1, "epoch", 0.2, 0.9, "host", epoch=0),
             Span(0, "forward", 0.1, 0.5, epoch=0, iteration=0), Span(1, "forward", 0.3, 0.5, epoch=0, iteration=0)]
    shown, epoch, duration = epoch_spans(spans)
    assert (epoch, duration) == (0, 1.0) and {s.phase for s in shown} == {"forward"}
    # the chart's time axis starts at the epoch's start, not at its first bar (0.1 s in; 2026-11-30)
    from gnnplan.autotune.report_page.run_charts import Timeline, timeline_figure

    fig, _ = timeline_figure(Timeline(spans, "t.json"), "measured", {})
    assert fig.layout.xaxis.range[0] == 0.0


def test_the_parameter_chart_labels_its_ratios() -> None:
    """Ratios to the prior from 0.27x to 45x: every 1-2-5 tick says its ratio (no bare '2' that reads as 2.7x)."""
    from gnnplan.autotune.report_page.run_charts import parameters_figure

    def param(after: float) -> dict[str, Any]:
        return {"fitted": True, "prior": 1.0, "after": after, "low": after / 1.1, "high": after * 1.1, "flags": []}

    fig, left_out = parameters_figure({"a": param(0.27), "b": param(45.0)})
    assert left_out == [] and list(fig.layout.xaxis.ticktext) == [
        "0.2x", "0.5x", "1x", "2x", "5x", "10x", "20x", "50x"]


def test_a_phase_has_one_colour_on_every_page() -> None:
    """A plan-only page coloured pregather otherwise than a loop's page, which had more phases (2026-12-01)."""
    from gnnplan.autotune.report_page.style import PHASE_ORDER, phase_colors

    few = phase_colors({"pregather", "migrate", "iteration"})
    many = phase_colors(set(PHASE_ORDER) | {"a_new_phase"})
    assert few == {p: many[p] for p in ("pregather", "migrate")}
    assert phase_colors({"a_new_phase"}) == {"a_new_phase": many["a_new_phase"]}
    assert len(set(many[p] for p in PHASE_ORDER)) == len(PHASE_ORDER)  # told apart


def test_timelines_share_one_time_scale_and_show_a_measured_epoch() -> None:
    """The predicted and the measured epoch are drawn on one time axis (2026-12-01: 0-63 ms beside 0-105 ms), and
    the measured one is the median of the epochs the run measured, not of its warm-up too."""
    from gnnplan.autotune.report_page.inputs import ReportInputs, Timeline
    from gnnplan.autotune.report_page.page import build_page
    from gnnplan.simulator.trace import Span
    from gnnplan.simulator.trace_merge import timed_epoch

    def epochs(durations: list[float]) -> list[Span]:
        out, t = [], 0.0
        for e, d in enumerate(durations):
            out += [Span(0, "epoch", t, d, "host", epoch=e), Span(0, "forward", t, d / 2, epoch=e, iteration=0)]
            t += d
        return out

    measured = epochs([0.5, 0.5, 0.10, 0.11, 0.12, 0.13])  # two slow warm-up epochs
    assert timed_epoch(measured) == (4, 0.12)  # all six: the warm-up weighs in
    assert timed_epoch(measured, among=[2, 3, 4, 5]) == (3, 0.11)
    page = build_page(ReportInputs("t", predicted=Timeline(epochs([0.06]), "p.json"),
                                   measured=[Timeline(measured, "m.json", [2, 3, 4, 5])]))
    ranges = re.findall(r'"range":\[0\.0,([0-9.e+-]+)\]', page.html)  # the two timelines' time axes
    assert len(ranges) == 2 and ranges[0] == ranges[1] and float(ranges[0]) >= 110.0
    assert "measured timeline, epoch 3: 110.00 ms" in page.html


def test_the_page_says_when_the_run_shared_its_machine() -> None:
    """loop printed that other processes kept the machine busy; its page did not (2026-12-01)."""
    from gnnplan.autotune.report_page.inputs import ReportInputs
    from gnnplan.autotune.report_page.page import build_page

    load = {"cores": 2, "other_cores": 0.5, "steal_fraction": 0.0, "max_other_cores": 1.01, "busy_epochs": [2, 3]}
    page = build_page(ReportInputs("t", calibration={"parameters": {}, "held_out": {}, "busy": {"run.json": load}}))
    assert "machine load during the run</th><td>run.json: other processes kept up to 1.01 of 2 cores busy" in page.html


def test_a_run_is_set_against_the_plans_prediction_only_where_it_ran_that_configuration() -> None:
    """A page from a plan and a run's trace compares them as gnnplan run does: the same configuration (the trace's
    plan holds the layout run) on the plan's kind of device."""
    from gnnplan.autotune.report_page.inputs import Timeline
    from gnnplan.autotune.report_page.page import _against
    from gnnplan.simulator.plan import Plan, configuration_digest, with_prediction
    from gnnplan.simulator.workload.spec import load_workload

    cpu = load_cluster("local")
    plan = with_prediction(Plan(strategy="dp", knobs={}, num_workers=2, cluster=cpu,
                                workload=load_workload("cora-sage")), {"epoch_time_s": 0.04, "feasible": True})
    mine = configuration_digest(plan)
    device = f"{cpu.gpu.model} (CPU)"
    assert _against(plan, Timeline([], "t.json", None, 0.05, mine, device)) == \
        "; the plan's prediction is -20.0% against it, not fitted to it"
    assert "layout or configuration is not the plan's" in _against(plan, Timeline([], "t.json", None, 0.05, "c1:x"))
    assert "the run computed on NVIDIA A100" in _against(plan, Timeline([], "t.json", None, 0.05, mine,
                                                                       "NVIDIA A100-SXM4-40GB"))
    assert _against(None, Timeline([], "t.json", None, 0.05)) == ""
