"""Bad input at the CLI: one line on stderr naming the field, exit code 2, no traceback, nothing written."""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gnnplan.autotune.cli import main
from gnnplan.simulator.hardware.spec import PRESET_DIR as CLUSTER_PRESETS
from gnnplan.simulator.workload.datasets import DATA_DIR


def _cluster(tmp_path: Path, **changes: object) -> Path:
    data = yaml.safe_load((CLUSTER_PRESETS / "4x-a100-10gbe.yaml").read_text())
    for dotted, value in changes.items():
        node = data
        *parents, leaf = dotted.split("__")
        for p in parents:
            node = node[p]
        node[leaf] = value
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _workload(tmp_path: Path, dataset: str = "cora", arch: str = "sage", fanouts: list[int] | None = None) -> Path:
    data = {"dataset": dataset, "model": {"arch": arch, "num_layers": 2, "hidden_dim": 16},
            "training": {"batch_size": 64, "fanouts": fanouts or [10, 10]}}
    path = tmp_path / "workload.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _fails(capsys: pytest.CaptureFixture[str], argv: list[str], *needles: str) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def test_malformed_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "w.yaml"
    bad.write_text("dataset: cora\nmodel: {arch: sage, num_layers: 2\n")
    trace = tmp_path / "t.json"
    _fails(capsys, ["simulate", "--cluster", "4x-a100-10gbe", "--workload", str(bad), "--strategy", "dp",
                    "--trace", str(trace)], "workload", "not valid YAML", "line")
    assert not trace.exists()


def test_unknown_strategy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _fails(capsys, ["simulate", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--strategy", "nope"],
           "strategy", "'nope'", "dp")
    plan = tmp_path / "plan.yaml"
    _fails(capsys, ["tune", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--strategies", "nope",
                    "--trials", "1", "--storage", f"sqlite:///{tmp_path / 's.db'}", "-o", str(plan)], "nope")
    assert not plan.exists()


def test_unknown_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _fails(capsys, ["simulate", "--cluster", "4x-a100-10gbe", "--workload", str(_workload(tmp_path, arch="mlp")),
                    "--strategy", "dp"], "model.arch", "'mlp'")


def test_negative_bandwidth(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = _cluster(tmp_path, network__bandwidth_bytes_per_s=-1.0)
    _fails(capsys, ["simulate", "--cluster", str(cluster), "--workload", "cora-sage", "--strategy", "dp"],
           "network.bandwidth_bytes_per_s", "greater than 0")


def test_fanouts_length_differs_from_layers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _fails(capsys, ["simulate", "--cluster", "4x-a100-10gbe",
                    "--workload", str(_workload(tmp_path, fanouts=[10, 10, 10])), "--strategy", "dp"],
           "fanouts", "num_layers")


@pytest.mark.parametrize("seed", [-1, 2**32])
def test_training_seed_out_of_range(tmp_path: Path, capsys: pytest.CaptureFixture[str], seed: int) -> None:
    """A seed outside [0, 2**32) is refused up front for every strategy (gsplit's sampler raised numpy's
    "expected non-negative integer" mid-simulation, and tune left a failed trial in its study)."""
    path = _workload(tmp_path)
    data = yaml.safe_load(path.read_text())
    data["training"]["seed"] = seed
    path.write_text(yaml.safe_dump(data))
    plan, storage = tmp_path / "plan.yaml", tmp_path / "s.db"
    _fails(capsys, ["simulate", "--cluster", "4x-a100-10gbe", "--workload", str(path), "--strategy", "gsplit"],
           "training.seed")
    _fails(capsys, ["tune", "--cluster", "4x-a100-10gbe", "--workload", str(path), "--strategies", "gsplit",
                    "--trials", "1", "--storage", f"sqlite:///{storage}", "-o", str(plan)], "training.seed")
    assert not plan.exists() and not storage.exists()


def test_missing_dataset_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "plan.yaml"
    w = _workload(tmp_path, dataset=str(tmp_path / "no-such-folder"))
    _fails(capsys, ["tune", "--cluster", "4x-a100-10gbe", "--workload", str(w), "--trials", "1",
                    "--storage", f"sqlite:///{tmp_path / 's.db'}", "-o", str(plan)], "workload.dataset")
    assert not plan.exists()


def test_corrupt_edge_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "mygraph"
    shutil.copytree(DATA_DIR / "cora", folder)
    with gzip.open(folder / "raw" / "edge.csv.gz", "wt") as fh:
        fh.write("0,1\n1,zero\n")
    trace = tmp_path / "t.json"
    _fails(capsys, ["simulate", "--cluster", "4x-a100-10gbe", "--workload", str(_workload(tmp_path, str(folder))),
                    "--strategy", "dp", "--trace", str(trace)], "edge.csv.gz")
    assert not trace.exists()


def test_unknown_knob_and_bad_value(capsys: pytest.CaptureFixture[str]) -> None:
    _fails(capsys, ["simulate", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--strategy", "dp",
                    "--set", "nosuch=1"], "nosuch")
    _fails(capsys, ["simulate", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--strategy", "dp",
                    "--set", "cache_fraction=2"], "cache_fraction")


def test_unknown_presets(capsys: pytest.CaptureFixture[str]) -> None:
    _fails(capsys, ["simulate", "--cluster", "nosuch", "--workload", "cora-sage", "--strategy", "dp"],
           "cluster", "'nosuch'", "4x-a100-10gbe")
    _fails(capsys, ["simulate", "--cluster", "dgx-a100", "--workload", "nosuch", "--strategy", "dp"],
           "workload", "'nosuch'", "cora-sage")


def test_console_script_exit_code_and_no_traceback(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path, pcie__latency_s=-5.0)
    proc = subprocess.run([sys.executable, "-m", "gnnplan.autotune.cli", "simulate", "--cluster", str(cluster),
                           "--workload", "cora-sage", "--strategy", "dp", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "pcie.latency_s" in proc.stderr and "Traceback" not in proc.stderr


def test_a_folder_is_named_as_a_folder_and_an_empty_strategy_list_is_rejected(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _fails(capsys, ["simulate", "--cluster", "4x-a100-10gbe", "--workload", str(tmp_path), "--strategy", "dp"],
           f"workload: '{tmp_path}' is a folder, not a preset or a YAML file")
    _fails(capsys, ["simulate", "--cluster", str(tmp_path), "--workload", "cora-sage", "--strategy", "dp"],
           f"cluster: '{tmp_path}' is a folder, not a preset or a YAML file")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cora-sage").mkdir()  # a folder named like a preset does not hide the preset
    assert main(["simulate", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--strategy", "dp",
                 "--json"]) == 0
    capsys.readouterr()
    _fails(capsys, ["tune", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--strategies", ",,",
                    "--storage", f"sqlite:///{tmp_path / 's.db'}", "-o", str(tmp_path / "plan.yaml")],
           "--strategies: ',,' names no strategy; give e.g. dp,hopgnn, or leave the option out for all")
    assert not (tmp_path / "s.db").exists() and not (tmp_path / "plan.yaml").exists()


def test_an_output_that_is_also_an_input_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workload = _workload(tmp_path)
    before = workload.read_text()
    _fails(capsys, ["simulate", "--cluster", "4x-a100-10gbe", "--workload", str(workload), "--strategy", "dp",
                    "--trace", str(workload)], f"--trace: '{workload}' is also an input of this command (workload)")
    assert workload.read_text() == before
    folder = tmp_path / "wi"
    assert main(["whatif", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--strategies", "dp", "--trials",
                 "1", "--vary", "network.latency_s=1us,2us", "-o", str(folder), "--json"]) == 0
    capsys.readouterr()
    record = (folder / "whatif.json").read_text()
    _fails(capsys, ["report", str(folder), "-o", str(folder / "whatif.json")],
           "is a file of the folder the report reads")
    assert (folder / "whatif.json").read_text() == record
    assert main(["report", str(folder), "-o", str(folder / "whatif.html")]) == 0  # the page it writes may be replaced


def test_a_file_output_ending_in_a_slash_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _fails(capsys, ["simulate", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--strategy", "dp",
                    "--trace", f"{tmp_path}/t/"], "ends in '/', a folder; name the file to write")
    assert not (tmp_path / "t").exists()


def test_simulate_help_names_every_registered_strategy(capsys: pytest.CaptureFixture[str]) -> None:
    from gnnplan.autotune.cli import main
    from gnnplan.simulator.strategies import STRATEGIES

    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    listed = text.split("--strategy STRATEGY ")[-1].split(" --set ")[0]  # the option's help, not the usage line
    assert set(listed.replace(",", " ").split()) - {"or"} == set(STRATEGIES)


@pytest.mark.parametrize(("argv", "message"), [
    (["simulate", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--strategy", "dp", "--trace", ""],
     "gnnplan simulate: error: argument --trace: an empty value; leave the option out for its default"),
    (["tune", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--study", " "],
     "gnnplan tune: error: argument --study: an empty value; leave the option out for its default"),
    (["simulate", "--cluster", "", "--workload", "cora-sage", "--strategy", "dp"],
     "gnnplan simulate: error: argument --cluster: an empty value"),
    (["run", ""], "gnnplan run: error: argument PLAN: an empty value"),
])
def test_an_empty_value_is_refused_not_taken_as_absent(argv: list[str], message: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """``--trace ''`` wrote no trace and ``--study ''`` tuned into the default study, without a word (2026-12-01)."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2 and capsys.readouterr().err.strip() == message


def test_a_storage_file_that_is_no_database_is_said_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A damaged study file: the URL was right, so the error says the file is the problem (2026-12-01: it advised
    another URL), and the file is left as it was."""
    junk = tmp_path / "junk.db"
    junk.write_bytes(bytes(range(256)) * 20)
    _fails(capsys, ["tune", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--strategies", "dp",
                    "--trials", "1", "--storage", f"sqlite:///{junk}", "-o", str(tmp_path / "plan.yaml")],
           "file is not a database (the file is not an SQLite database, or is damaged: give another file)")
    assert junk.read_bytes() == bytes(range(256)) * 20 and not (tmp_path / "plan.yaml").exists()


def test_a_storage_failure_names_the_database_s_reason() -> None:
    """Optuna wraps a failed commit in StorageInternalError, whose text guesses at invalid data; the error says the
    database's own reason from inside the chain (2026-12-01: a read-only file said only the guess)."""
    import optuna

    from gnnplan.autotune.study import storage_errors
    from gnnplan.simulator.errors import SpecError

    with pytest.raises(SpecError) as exc:
        with storage_errors("sqlite:///x.db"):
            try:
                raise OSError("attempt to write a readonly database")
            except OSError as inner:
                raise optuna.exceptions.StorageInternalError("An exception is raised during the commit.") from inner
    assert str(exc.value) == "--storage: 'sqlite:///x.db' failed: attempt to write a readonly database"
