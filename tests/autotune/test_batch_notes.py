"""A batch larger than the training set is accepted (one iteration of the whole set, as DGL's loaders do) and
said by simulate, tune and whatif (2026-12-01: accepted silently, and tune --tune-batch-size picked 256 seeds for
Cora's 140 training vertices without a word)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gnnplan.autotune.cli import main
from gnnplan.autotune.whatif import DEFAULT_TRIALS, few_trials_note, grid, parse_axes, point_notes
from gnnplan.simulator.strategies.base import oversized_batch_note
from gnnplan.simulator.workload.spec import load_workload

NOTE = "the batch size 1000 is larger than the dataset's 140 training vertices: an epoch is 1 iteration"


def _workload(tmp_path: Path, batch: int) -> Path:
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump({"name": "big", "dataset": "cora",
                                    "model": {"arch": "sage", "num_layers": 2, "hidden_dim": 16},
                                    "training": {"batch_size": batch, "fanouts": [5, 5]}}))
    return path


def test_the_note_says_the_iterations_and_shares() -> None:
    wl = load_workload("cora-sage")
    assert oversized_batch_note(wl, 4) is None  # 64 of 140
    big = wl.model_copy(update={"training": wl.training.model_copy(update={"batch_size": 141})})
    # 141 // 8 = 17 seeds per worker and iteration, and a worker holds up to 18: still 2 iterations
    assert "an epoch is 2 iterations in which each of the 8 workers takes its share of them (at most 18)" in \
        oversized_batch_note(big, 8)
    assert "1 iteration in which the worker takes all of them" in oversized_batch_note(big, 1)
    assert oversized_batch_note(load_workload("cora-gcn-full"), 4) is None  # full-graph: no batch
    assert oversized_batch_note(wl, 4, {"batch_size": 1000}).startswith(NOTE)  # a knob's batch size counts
    assert "(at most 1); 360 of the workers get none, and" in oversized_batch_note(wl, 500, {"batch_size": 512})
    assert "get none" not in oversized_batch_note(wl, 140, {"batch_size": 512})  # one training vertex each


def test_simulate_and_tune_say_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(_workload(tmp_path, 1000))
    sim = ["simulate", "--cluster", "4x-a100-10gbe", "--workload", path, "--strategy", "dp"]
    assert main(sim) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"note: {NOTE}" in out and "predicted for big on 4x-a100-10gbe: dp" in out
    assert main([*sim, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["notes"][0].startswith(NOTE)
    assert main(["tune", "--cluster", "4x-a100-10gbe", "--workload", path, "--strategies", "dp", "--trials", "1",
                 "--storage", f"sqlite:///{tmp_path / 's.db'}", "-o", str(tmp_path / "plan.yaml")]) == 0
    assert f"note: the best plan's {NOTE}" in " ".join(capsys.readouterr().out.split())
    assert main(["simulate", "--cluster", "4x-a100-10gbe", "--workload", str(_workload(tmp_path, 64)), "--strategy",
                 "dp", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["notes"] == []


def test_whatif_notes_name_their_points() -> None:
    axes = parse_axes(["training.batch_size=64,1000", "network.latency_s=1us,2us"])
    points = grid("4x-a100-10gbe", "cora-sage", axes)
    note = oversized_batch_note(points[-1].workload, 4)
    assert note is not None and note.startswith(NOTE)
    assert point_notes(axes, points) == [
        f"at training.batch_size=1000, network.latency_s=1us; training.batch_size=1000, network.latency_s=2us: {note}"]
    assert few_trials_note(DEFAULT_TRIALS) is None and "4 trials per point" in few_trials_note(4)


def test_whatif_writes_and_prints_its_notes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["whatif", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--strategies", "dp",
                 "--vary", "training.batch_size=64,1000", "--trials", "2", "-o", str(tmp_path / "w")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    record = json.loads((tmp_path / "w" / "whatif.json").read_text())
    assert record["notes"][0].startswith("2 trials per point and strategy")
    assert record["notes"][1].startswith("at training.batch_size=1000: the batch size 1000 is larger than")
    assert all(f"note: {' '.join(n.split())}" in out for n in record["notes"])


def test_the_python_api_says_it_too(tmp_path: Path) -> None:
    """``gnnplan.simulate`` returns the note with the result, as the CLI prints it (2026-12-01: only the CLI said
    it); the JSON contract object carries ``notes`` only when there are some."""
    import gnnplan

    big = gnnplan.simulate("4x-a100-10gbe", str(_workload(tmp_path, 1000)), "dp")
    assert len(big.notes) == 1 and big.notes[0].startswith(NOTE)
    assert big.to_json_dict()["notes"] == big.notes
    knob = gnnplan.simulate("4x-a100-10gbe", "cora-sage", "dp", {"batch_size": 1000})
    assert knob.notes[0].startswith(NOTE)  # a knob's batch size counts
    fits = gnnplan.simulate("4x-a100-10gbe", "cora-sage", "dp")
    assert fits.notes == [] and "notes" not in fits.to_json_dict()
