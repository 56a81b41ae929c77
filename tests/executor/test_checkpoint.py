"""Checkpoints: a run interrupted after a checkpoint and resumed ends with the weights, losses and trace of the
uninterrupted run (dp mini-batch with a sampler process, neutronstar full-graph; both with dropout); a
checkpoint folder that does not fit the run is refused before anything starts. Every test has a hard time limit
(SIGALRM)."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path

import pytest
import torch
from fault_helpers import hard_limit, partial_files, tiny_plan, workers_of

from gnnplan.executor.checkpoint import complete_epochs, load_model_state
from gnnplan.executor.runner import run_plan
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.trace import epoch_fingerprints, read_measured, read_trace

EPOCHS = 3
STOP_AFTER = 1
"""The interrupted run is stopped (KeyboardInterrupt in the launcher, as Ctrl-C gives it) when epoch 1's record
arrives: epoch 0's checkpoint is complete by then (the ranks meet at a barrier after every save)."""


def _stop_at(epoch: int):  # type: ignore[no-untyped-def]
    def on_epoch(record: dict) -> None:
        if record["epoch"] == epoch:
            raise KeyboardInterrupt

    return on_epoch


@pytest.mark.parametrize("strategy, knobs", [
    pytest.param("dp", {"num_sampler_workers": 1, "cache_fraction": 0.1}, marks=pytest.mark.slow),
    ("neutronstar", {}),
])
def test_interrupted_run_resumes_to_the_uninterrupted_weights(tmp_path: Path, strategy: str, knobs: dict) -> None:
    plan = tiny_plan(strategy, knobs=knobs, num_epochs=EPOCHS)
    ref_dir, ckpt = tmp_path / "reference", tmp_path / "ckpt"
    common = {"trace_dir": tmp_path / "traces", "progress": False, "checkpoint_every": 1}
    with hard_limit(120):
        reference = run_plan(plan, checkpoint_dir=ref_dir, **common)
        with pytest.raises(KeyboardInterrupt):
            run_plan(plan, checkpoint_dir=ckpt, on_epoch=_stop_at(STOP_AFTER), **common)
        assert not workers_of(os.getpid())  # every worker stopped
        assert not partial_files(ckpt, tmp_path / "traces")
        assert STOP_AFTER - 1 in complete_epochs(ckpt, 2)
        resumed = run_plan(plan, checkpoint_dir=ckpt, resume=True, **common)
    assert resumed["resumed_from_epoch"] in (STOP_AFTER - 1, STOP_AFTER)
    assert reference["resumed_from_epoch"] is None
    final, expected = load_model_state(ckpt), load_model_state(ref_dir)
    assert all(any(folder.iterdir()) for folder in ckpt.glob("epoch-*"))  # no epoch folder left empty
    assert complete_epochs(ckpt, 2)[-1] == EPOCHS - 1 and set(final) == set(expected)
    for name, weight in expected.items():
        torch.testing.assert_close(final[name], weight, rtol=0, atol=1e-6, msg=name)
        torch.testing.assert_close(load_model_state(ckpt, rank=1)[name], weight, rtol=0, atol=1e-6)
    assert [r["loss"] for r in resumed["epochs"]] == pytest.approx([r["loss"] for r in reference["epochs"]],
                                                                   abs=1e-6)
    assert resumed["test_accuracy"] == reference["test_accuracy"]
    spans, meta = read_trace(resumed["trace"])
    epochs = Counter((s.rank, s.epoch) for s in spans if s.phase == "epoch")
    assert epochs == {(r, e): 1 for r in (0, 1) for e in range(EPOCHS)}
    starts = {e: min(s.start_s for s in spans if s.phase == "epoch" and s.epoch == e) for e in range(EPOCHS)}
    assert [starts[e] for e in range(EPOCHS)] == sorted(starts.values())  # one time line across the resumption
    assert meta["results"]["resumed_from_epoch"] == resumed["resumed_from_epoch"]
    # a fresh run may not write into another run's checkpoints, nor another plan resume from them
    with pytest.raises(SpecError, match="holds checkpoints of an earlier run; continue it with --resume"):
        run_plan(plan, checkpoint_dir=ckpt, **common)
    other = plan.model_copy(update={"cluster": plan.cluster.model_copy(update={"name": "another-cluster"})})
    with pytest.raises(SpecError, match=r"belong to another plan \(its cluster differs\)$"):
        run_plan(other, checkpoint_dir=ckpt, resume=True, **common)
    # another worker count says so; fewer epochs than the run has done are refused, not ignored (2026-11-30)
    with pytest.raises(SpecError, match=r"\(the workers differ: 2 as 2 machine\(s\) x 1 there, 1 as 1 x 1 here\)$"):
        run_plan(plan, nprocs=1, checkpoint_dir=ckpt, resume=True, **common)
    with pytest.raises(SpecError, match=f"^--epochs: the run in .* has done {EPOCHS} epochs already, more than 1; "):
        run_plan(plan, epochs=1, checkpoint_dir=ckpt, resume=True, **common)


def test_checkpoint_options_are_checked_before_any_worker_starts(tmp_path: Path) -> None:
    plan = tiny_plan(num_epochs=1)
    ckpt = tmp_path / "ckpt"
    with pytest.raises(SpecError, match="--resume: .* holds no checkpoints"):
        run_plan(plan, trace_dir=tmp_path, progress=False, checkpoint_dir=ckpt, resume=True)
    with pytest.raises(SpecError, match="--checkpoint-every: must be >= 0"):
        run_plan(plan, trace_dir=tmp_path, progress=False, checkpoint_dir=ckpt, checkpoint_every=-1)
    with pytest.raises(SpecError, match="--collective-timeout: must be a positive number"):
        run_plan(plan, trace_dir=tmp_path, progress=False, collective_timeout_s=float("inf"))
    assert not ckpt.exists()


def test_a_resumed_runs_trace_and_the_run_it_continued_are_one_measurement(tmp_path: Path) -> None:
    """A resumed run's trace carries the epochs before its checkpoint, span for span, so calibrating on it and on
    the trace of the run it continued would fit and "hold out" the same epochs (2026-11-30): refused, naming the
    epochs; another run of the same plan is another measurement."""
    plan = tiny_plan("neutronstar", num_epochs=3)
    with hard_limit(120):
        first = run_plan(plan, epochs=2, trace_dir=tmp_path / "a", checkpoint_dir=tmp_path / "ckpt",
                         checkpoint_every=1, progress=False)
        resumed = run_plan(plan, trace_dir=tmp_path / "b", checkpoint_dir=tmp_path / "ckpt", resume=True,
                           progress=False)
        other = run_plan(plan, trace_dir=tmp_path / "c", progress=False)
    assert resumed["resumed_from_epoch"] == 1
    first_prints, resumed_prints = (epoch_fingerprints(read_trace(r["trace"])[0]) for r in (first, resumed))
    assert resumed_prints[0] == first_prints[0] and resumed_prints[1] == first_prints[1]
    with pytest.raises(SpecError, match=r"^TRACE: '.*b/.*' repeats epochs 0-1 of '.*a/.*' \(a run resumed from a "):
        read_measured([first["trace"], resumed["trace"]])
    assert len(read_measured([first["trace"], other["trace"]])) == 2
    assert len(read_measured([resumed["trace"], other["trace"]])) == 2


def test_an_unreadable_checkpoint_is_named_and_the_epoch_before_it_still_resumes(tmp_path: Path) -> None:
    """A rank's checkpoint file damaged on disk ends --resume in one line naming its folder (it said "wire: not a
    JSON message" for the state file and "CheckpointException ranks:dict_keys([0])" for DCP's data, 2026-12-01);
    removing that epoch's folder, as the line says, resumes from the epoch before it."""
    plan = tiny_plan("neutronstar", num_epochs=3)
    ckpt = tmp_path / "ckpt"
    with hard_limit(120):
        run_plan(plan, epochs=2, trace_dir=tmp_path, checkpoint_dir=ckpt, checkpoint_every=1, progress=False)
        for damaged, error in (("state.json", "ValueError"), ("__0_0.distcp", "CheckpointException")):
            target = ckpt / "epoch-000001" / "rank-0" / damaged
            kept = target.read_bytes()
            target.write_bytes(b"{" if damaged.endswith(".json") else b"\0garbage")
            with pytest.raises(ValueError, match=rf"^--resume: the checkpoint {ckpt}/epoch-000001/rank-0 cannot be "
                                                 r"read; remove epoch-000001 to resume from the epoch before it, or "
                                                 rf"run without --resume \({error}: "):
                run_plan(plan, trace_dir=tmp_path, checkpoint_dir=ckpt, resume=True, progress=False)
            assert target.is_file()  # nothing removed for the user
            target.write_bytes(kept)
        shutil.rmtree(ckpt / "epoch-000001")
        resumed = run_plan(plan, trace_dir=tmp_path, checkpoint_dir=ckpt, resume=True, progress=False)
    assert resumed["resumed_from_epoch"] == 0 and len(resumed["epochs"]) == 3
