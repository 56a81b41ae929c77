"""``gnnplan trace merge``: predicted and measured timelines in one Chrome trace, distinct pids, aligned origins,
one epoch each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gnnplan.autotune.cli import main
from gnnplan.simulator.api import coerce_knobs
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.trace import Span, check_same_run, read_trace, write_trace
from gnnplan.simulator.trace_merge import PID_OFFSET, merge, pick_epoch, ranks_by_label


def _epoch(rank: int, epoch: int, start: float, dur: float) -> list[Span]:
    return [Span(rank, "epoch", start, dur, "host", epoch=epoch),
            Span(rank, "forward", start + 0.1 * dur, 0.5 * dur, epoch=epoch, iteration=0),
            Span(rank, "load", start + 0.6 * dur, 0.2 * dur, "pcie", nbytes=10.0, epoch=epoch, iteration=0)]


def _measured() -> list[Span]:
    # three epochs of 2 ranks starting at t = 50 s; durations 3, 1, 2 s -> the median epoch is 2
    out: list[Span] = []
    start = 50.0
    for epoch, dur in enumerate((3.0, 1.0, 2.0)):
        for rank in (0, 1):
            out += _epoch(rank, epoch, start + 0.01 * rank, dur)
        start += dur + 0.5
    return out


def test_merge_keeps_one_epoch_each_aligned_with_distinct_pids() -> None:
    pred = [s for r in (0, 1) for s in _epoch(r, 0, 0.0, 1.5)]
    doc = merge((pred, {"strategy": "dp"}), (_measured(), {"strategy": "dp"}))
    assert ranks_by_label(doc) == {"predicted": [0, 1], "measured": [PID_OFFSET, PID_OFFSET + 1]}
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    meas = [e for e in spans if e["pid"] >= PID_OFFSET]
    assert {e["args"]["epoch"] for e in meas} == {2}
    assert min(e["ts"] for e in meas) == 0.0 and min(e["ts"] for e in spans if e["pid"] < PID_OFFSET) == 0.0
    # the epoch's time as gnnplan run reports it, the slowest rank's 2 s, not the window with rank 1's 0.01 s skew
    assert doc["metadata"]["epoch_time_s"]["measured"] == pytest.approx(2.0, rel=1e-12)
    assert len(meas) == 6 and len(spans) == 12


def test_pick_epoch_rejects_missing_epochs() -> None:
    assert pick_epoch(_measured(), 0) == 0
    with pytest.raises(SpecError, match="--epoch: 7"):
        pick_epoch(_measured(), 7)
    with pytest.raises(SpecError, match="^trace: no 'epoch' spans"):
        pick_epoch([Span(0, "forward", 0.0, 1.0)])
    # merge names the side that has none (both files may be given the same name in a shell)
    no_epoch = ([Span(0, "forward", 0.0, 1.0)], {"strategy": "dp", "source": "executor"})
    with pytest.raises(SpecError, match="^MEASURED: no 'epoch' spans"):
        merge(([s for s in _epoch(0, 0, 0.0, 1.0)], {"strategy": "dp", "source": "simulator"}), no_epoch)


def test_cli_writes_a_trace_that_reads_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pred, meas, out = tmp_path / "p.json", tmp_path / "m.json", tmp_path / "merged.json"
    write_trace(pred, [s for s in _epoch(0, 0, 0.0, 1.0)], {"strategy": "dp"})
    write_trace(meas, _measured(), {"strategy": "dp"})
    assert main(["trace", "merge", str(pred), str(meas), "-o", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["merged"]["measured"]["epoch"] == 2
    spans, meta = read_trace(out)
    assert {s.rank for s in spans} == {0, PID_OFFSET, PID_OFFSET + 1} and "merged" in meta
    capsys.readouterr()
    assert main(["trace", "merge", str(pred), str(tmp_path / "none.json"), "-o", str(tmp_path / "x.json")]) == 2
    assert not (tmp_path / "x.json").exists()
    assert capsys.readouterr().err.startswith("gnnplan trace merge: error: ")  # the subcommand as typed


@pytest.mark.parametrize("predicted, swapped, needle", [
    ({"strategy": "dp"}, True, "PREDICTED: this trace was written by the executor, not the simulator"),
    ({"strategy": "hongtu"}, False, "PREDICTED: its strategy is 'hongtu', the measured trace's 'dp'"),
    ({"strategy": "dp", "knobs": {"cache_fraction": 0.3}}, False,
     "PREDICTED: its knobs.cache_fraction is 0.3, the measured trace's 0.1"),
    ({"strategy": "dp", "num_workers": 4}, False, "PREDICTED: its num_workers is 4, the measured trace's 2"),
])
def test_a_trace_of_the_wrong_kind_or_configuration_is_refused(predicted: dict, swapped: bool, needle: str,
                                                               tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The two traces given in swapped order (their metadata ``source``), or a prediction of another strategy,
    other knobs (the defaults filled in: the run's trace lists only the knobs its plan set) or another worker
    count than the run's (2026-11-30: merged without a word): one line, exit 2, nothing written; the right pair
    merges."""
    pred, meas, out = tmp_path / "p.json", tmp_path / "m.json", tmp_path / "merged.json"
    write_trace(pred, [s for s in _epoch(0, 0, 0.0, 1.0)], {**predicted, "source": "simulator"})
    write_trace(meas, _measured(), {"strategy": "dp", "source": "executor", "num_workers": 2,
                                    "knobs": {"cache_fraction": 0.1}})
    first, second = (meas, pred) if swapped else (pred, meas)
    assert main(["trace", "merge", str(first), str(second), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0] and not out.exists()
    if swapped:
        assert main(["trace", "merge", str(pred), str(meas), "-o", str(out), "--json"]) == 0


def test_knobs_compare_with_their_defaults_filled_in() -> None:
    """The simulator's trace lists every knob, the executor's those its plan set: the same configuration."""
    full = coerce_knobs("dp", {"cache_fraction": 0.1}).model_dump(mode="json")
    check_same_run({"strategy": "dp", "knobs": full}, {"plan": {"strategy": "dp", "knobs": {"cache_fraction": 0.1}}},
                   "PREDICTED")
    with pytest.raises(SpecError, match="^PREDICTED: its knobs.cache_fraction is 0.1, the measured trace's "):
        check_same_run({"strategy": "dp", "knobs": full}, {"plan": {"strategy": "dp", "knobs": {}}}, "PREDICTED")
