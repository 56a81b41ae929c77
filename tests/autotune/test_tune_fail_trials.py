"""``gnnplan tune`` records no FAIL trial for input it rejects, and a trial left RUNNING by a killed process is
marked FAIL when the study is resumed (issue 13); storage failures are one line."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import optuna
import pytest
import yaml
from malformed_inputs import call, check_outcome, ogb_tables, write_ogb

from gnnplan.autotune import study as study_mod
from gnnplan.autotune.study import TuneRequest, open_storage, open_study
from gnnplan.simulator.hardware.spec import load_cluster
from gnnplan.simulator.workload.spec import load_workload

pytestmark = pytest.mark.serial  # kills a tuning process and times its restart (tests/conftest.py)


@pytest.mark.parametrize("problem", ["unlabeled", "batch", "missing"])
def test_rejected_input_leaves_no_trial(tmp_path: Path, capsys: pytest.CaptureFixture[str], problem: str) -> None:
    tables = ogb_tables(12, 3, seed=0)
    if problem == "unlabeled":
        tables["raw/node-label.csv.gz"] = [["-1"]] * 12
    folder = write_ogb(tmp_path / "g", tables)
    workload = {"dataset": str(folder) if problem != "missing" else str(tmp_path / "nothing"),
                "model": {"arch": "sage", "num_layers": 2, "hidden_dim": 4},
                "training": {"batch_size": 2 if problem == "batch" else 8, "fanouts": [2, 2]}}
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(workload))
    url = f"sqlite:///{tmp_path / 's.db'}"
    code, out, err = call(capsys, ["tune", "--cluster", "4x-a100-10gbe", "--workload", str(path), "--trials", "2",
                                   "--storage", url, "-o", str(tmp_path / "out" / "plan.yaml")])
    assert check_outcome(code, out, err, tmp_path / "out") == "rejected"
    assert "ExperimentalWarning" not in err
    assert not (tmp_path / "s.db").exists()  # validated before the storage is opened: no empty database either


KILLED = textwrap.dedent("""
    import os, signal, sys
    from gnnplan.autotune.study import TuneRequest, open_study
    from gnnplan.simulator.hardware.spec import load_cluster
    from gnnplan.simulator.workload.spec import load_workload
    req = TuneRequest(load_cluster("4x-a100-10gbe"), load_workload("cora-sage"), ("dp",), storage=sys.argv[1])
    study = open_study(req)
    trial = study.ask()
    study._storage.record_heartbeat(trial._trial_id)  # what Optuna's heartbeat thread does while a trial runs
    print(trial.number, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)              # killed mid-trial: the trial stays RUNNING
""")


def test_trials_of_a_killed_process_are_failed_on_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    proc = subprocess.run([sys.executable, "-c", KILLED, url], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr
    killed = int(proc.stdout.split()[0])
    killed_at = time.monotonic()
    monkeypatch.setattr(study_mod, "HEARTBEAT_INTERVAL_S", 1)
    monkeypatch.setattr(study_mod, "HEARTBEAT_GRACE_S", 2)  # SQLite's clock has whole seconds: > 2 s = 3 s
    req = TuneRequest(load_cluster("4x-a100-10gbe"), load_workload("cora-sage"), ("dp",), storage=url)
    live = open_study(req, open_storage(url))
    time.sleep(max(0.0, 4.0 - (time.monotonic() - killed_at)))
    alive = live.ask()
    live._storage.record_heartbeat(alive._trial_id)  # a trial of a process still running: beats now
    resumed = open_study(req, open_storage(url))
    states = {t.number: t.state for t in resumed.trials}
    assert states[killed] == optuna.trial.TrialState.FAIL
    assert states[alive.number] == optuna.trial.TrialState.RUNNING


def test_corrupt_storage_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.db"
    db.write_bytes(b"not a database" * 1024)
    code, out, err = call(capsys, ["tune", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--trials", "1",
                                   "--strategies", "dp", "--storage", f"sqlite:///{db}",
                                   "-o", str(tmp_path / "out" / "plan.yaml")])
    assert check_outcome(code, out, err, tmp_path / "out") == "rejected"
    assert "--storage" in err and "not a database" in err, err
