"""One regression test per bad-input class of issue 13 (the generated counterpart: test_malformed_hypothesis.py).

Classes: absurd numbers in specs, plans and traces; impossible generated-graph sizes; loader checks (NaN or ragged
feature rows, unusable labels); plan free-form blocks; trace schema; the OSError family, MemoryError,
RecursionError and unexpected errors at the CLI; output paths checked before work; errors raised inside workers.
"""

from __future__ import annotations

import copy
import errno
import json
import math
import re
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from malformed_inputs import call, check_outcome, files_in, ogb_tables, set_path, write_ogb

from gnnplan.autotune import commands
from gnnplan.simulator import io
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.spec import cluster_from_dict, load_cluster
from gnnplan.simulator.plan import load_plan
from gnnplan.simulator.trace import read_trace
from gnnplan.simulator.workload.datasets import load_dataset
from gnnplan.simulator.workload.spec import load_workload, workload_from_dict
from gnnplan.simulator.workload.validate import check_features, check_labels

SIM = ["simulate", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--strategy", "dp"]


def _rejected(capsys: pytest.CaptureFixture[str], argv: list[str], out_dir: Path, *needles: str) -> str:
    code, out, err = call(capsys, argv)
    assert check_outcome(code, out, err, out_dir) == "rejected"
    for needle in needles:
        assert needle in err, err
    return err


@pytest.mark.parametrize(("path", "value", "shown"), [
    ("network.bandwidth_bytes_per_s", 1e-320, "plausible range"),
    ("network.latency_s", 1e308, "plausible range"),
    ("gpu.peak_flops_per_s", 1e300, "plausible range"),
    ("efficiency.forward_fraction", 5e-324, "smallest plausible nonzero fraction"),
    ("num_machines", 2**64, "64-bit"),
])
def test_absurd_cluster_numbers_name_the_field(path: str, value: float, shown: str) -> None:
    data = load_cluster("4x-a100-10gbe").to_yaml_dict()
    set_path(data, tuple(path.split(".")), value)
    with pytest.raises(SpecError, match=rf"{path.replace('.', r'[.]')}: .*{shown}"):
        cluster_from_dict(data)


def test_absurd_priors_and_cli_cluster_set(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = load_cluster("4x-a100-10gbe").to_yaml_dict()
    data["priors"] = {"network.latency_s": 1e300}
    with pytest.raises(SpecError, match=r"priors\.network\.latency_s: 1e\+300 s is outside"):
        cluster_from_dict(data)
    _rejected(capsys, [*SIM, "--cluster-set", "network.bandwidth_bytes_per_s=1e-300", "--trace",
                       str(tmp_path / "out" / "t.json")], tmp_path / "out", "network.bandwidth_bytes_per_s")


def test_workload_integers_beyond_64_bits() -> None:
    data = load_workload("cora-sage").to_yaml_dict()
    data["training"]["fanouts"] = [10**20, 10]
    with pytest.raises(SpecError, match=r"training\.fanouts\.0: 100000000000000000000 does not fit"):
        workload_from_dict(data)


def test_impossible_rmat_size_is_one_line_before_allocating(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    w = load_workload("cora-sage").to_yaml_dict()
    w["dataset"] = {"generator": "rmat", "num_vertices": 10**15, "edge_factor": 16}
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(w))
    tracemalloc.start()
    try:
        _rejected(capsys, ["simulate", "--cluster", "4x-a100-10gbe", "--workload", str(path), "--strategy", "dp"],
                  tmp_path / "none", "workload.dataset", "host memory")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20  # nothing near the graph's size was allocated


def _folder(tmp_path: Path, edit: Any = None) -> Path:
    tables = ogb_tables(10, 3, seed=1)
    if edit is not None:
        edit(tables)
    return write_ogb(tmp_path / "g", tables)


@pytest.mark.parametrize(("edit", "needle"), [
    (lambda t: t["raw/node-feat.csv.gz"][4].__setitem__(1, "nan"), "row 4 (line 5)"),
    (lambda t: t["raw/node-feat.csv.gz"].__setitem__(6, ["0.1", "0.2"]), "row 6 (line 7)"),
    (lambda t: t["raw/node-feat.csv.gz"][2].__setitem__(0, "-inf"), "row 2"),
])
def test_nan_and_ragged_feature_rows_are_rejected_at_load(tmp_path: Path, edit: Any, needle: str) -> None:
    g = load_dataset(str(_folder(tmp_path, edit)))
    with pytest.raises(SpecError, match=rf"node-feat\.csv\.gz {re.escape(needle)}.*non-finite"):
        g.features  # noqa: B018 (features load on first use)


@pytest.mark.parametrize(("edit", "needle"), [
    (lambda t: t.__setitem__("raw/node-label.csv.gz", [["-1"]] * 10), "no labeled vertex"),
    (lambda t: t["raw/node-label.csv.gz"].__setitem__(3, ["-7"]), "holds label -7"),
    (lambda t: [t["raw/node-label.csv.gz"].__setitem__(int(i), ["-1"]) for (i,) in t["split/s/train.csv.gz"]],
     "training split has no labeled vertex"),
])
def test_unusable_labels_are_rejected_at_load(tmp_path: Path, edit: Any, needle: str) -> None:
    with pytest.raises(SpecError, match=needle):
        load_dataset(str(_folder(tmp_path, edit)))


@pytest.mark.parametrize(("edit", "message"), [
    (lambda t: t["raw/node-label.csv.gz"].__setitem__(2, ["nan"]),
     r"raw/node-label\.csv\.gz is corrupt: line 3: 'nan' is not a whole number$"),
    (lambda t: t["raw/edge.csv.gz"].__setitem__(4, ["1.5", "2"]),
     r"raw/edge\.csv\.gz is corrupt: line 5: '1\.5' is not a whole number$"),
    (lambda t: t["split/s/train.csv.gz"].__setitem__(1, ["0"]),
     r"split/s/train\.csv\.gz lists vertex 0 2 times; each at most once$"),
    (lambda t: t["split/s/test.csv.gz"].__setitem__(0, ["1"]),
     r"vertex 1 is in both split/s/train\.csv\.gz and test\.csv\.gz; the splits must not overlap$"),
    (lambda t: t.__setitem__("raw/num-node-list.csv.gz", [["-3"]]),
     r"raw/num-node-list\.csv\.gz says -3 vertices; it must be at least 1$"),
    (lambda t: t.__setitem__("raw/num-node-list.csv.gz", [["4"]]),
     r"raw/edge\.csv\.gz holds vertex id 4, outside \[0, 4\) \(the vertex count of raw/num-node-list\.csv\.gz\)$"),
])
def test_a_bad_integer_file_is_named_with_its_line_in_one_line(tmp_path: Path, edit: Any, message: str,
                                                               recwarn: pytest.WarningsRecorder) -> None:
    with pytest.raises(SpecError, match=message) as exc:
        load_dataset(str(_folder(tmp_path, edit)))
    assert "\n" not in str(exc.value) and not [w for w in recwarn if "invalid value" in str(w.message)]


def test_validate_functions_directly() -> None:
    feats = np.ones((70_000, 2), dtype=np.float32)
    check_features(feats, "d", "f")
    feats[68_000, 1] = np.nan
    with pytest.raises(SpecError, match="row 68000"):
        check_features(feats, "d", "f")
    with pytest.raises(SpecError, match="no labeled vertex"):
        check_labels(np.array([], dtype=np.int64), np.array([], dtype=np.int64), "d", "l")
    check_labels(np.array([-1, 0, 2]), np.array([1]), "d", "l")


def _plan(tmp_path: Path) -> dict[str, Any]:
    data = {"strategy": "dp", "knobs": {"num_sampler_workers": 0}, "num_workers": 1,
            "cluster": {**load_cluster("4x-a100-10gbe").to_yaml_dict(), "num_machines": 1},
            "workload": load_workload("cora-sage").to_yaml_dict(), "prediction": {"epoch_time_s": 0.01}}
    return copy.deepcopy(data)


@pytest.mark.parametrize(("change", "needle"), [
    (lambda p: p["prediction"].update(epoch_time_s=math.nan), "prediction: epoch_time_s: must be a finite number"),
    (lambda p: p["prediction"].update(breakdown_s={"load": math.inf}), "breakdown_s.load: must be a finite"),
    (lambda p: p["prediction"].update(x=10**30), "x: 1000000000000000000000000000000 does not fit"),
    (lambda p: p["knobs"].update(cache_fraction=math.inf), "knobs: cache_fraction: must be a finite number"),
    (lambda p: p["prediction"].update(x=json.loads('{"a":' * 20 + "1" + "}" * 20)), "nested deeper than 16"),
])
def test_plan_free_form_blocks_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Any,
                                           needle: str) -> None:
    plan = _plan(tmp_path)
    change(plan)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(plan))
    _rejected(capsys, ["run", str(path), "--nprocs", "1", "--trace-dir", str(tmp_path / "out")], tmp_path / "out",
              "gnnplan run: error: plan p.yaml", needle)


def test_plan_alias_size_and_node_limits(tmp_path: Path) -> None:
    text = yaml.safe_dump(_plan(tmp_path))
    path = tmp_path / "p.yaml"
    path.write_text("big: &b [1, 2, 3]\n" + text.replace("prediction:", "prediction:\n  again: *b\nold:"))
    with pytest.raises(SpecError, match=r"aliases \(\*b\) are not allowed"):
        load_plan(path)
    path.write_text(text.replace("prediction:", "prediction:\n  many: [" + ", ".join(["1"] * 20_000) + "]\nold:"))
    with pytest.raises(SpecError, match="more than 10000 values"):
        load_plan(path)
    path.write_text(text + "# " + "x" * (2**20) + "\n")
    with pytest.raises(SpecError, match="larger than 1 MiB"):
        load_plan(path)
    path.write_text(text.replace("prediction:", "when: 2024-13-45\nprediction:"))
    with pytest.raises(SpecError, match="is not valid YAML: month must be in 1..12"):
        load_plan(path)


@pytest.fixture(scope="module")
def trace_doc() -> dict[str, Any]:
    return json.loads((Path(__file__).parents[1] / "traces" / "cora-sage-dp.sample.json").read_text())


def _first_x(doc: dict[str, Any]) -> int:
    return next(i for i, e in enumerate(doc["traceEvents"]) if e.get("ph") == "X")


@pytest.mark.parametrize(("change", "needle"), [
    (lambda d, i: d["traceEvents"][i].update(ts=math.inf), "traceEvents.{i}: ts: Input should be a finite number"),
    (lambda d, i: d["traceEvents"][i].update(dur=-5), "traceEvents.{i}: dur: Input should be greater than"),
    (lambda d, i: d["traceEvents"][i].pop("pid"), "traceEvents.{i}: pid: Field required"),
    (lambda d, i: d["traceEvents"][i].update(pid=10**30), "traceEvents.{i}: pid: Input should be less than"),
    (lambda d, i: d["traceEvents"][i]["args"].update(epoch=1.5), "traceEvents.{i}: args.epoch:"),
    (lambda d, i: d["traceEvents"][i]["args"].update(nbytes="x"), "traceEvents.{i}: args.nbytes:"),
    (lambda d, i: d["traceEvents"][i].update(args=[1]), "traceEvents.{i}: args: Input should be a valid"),
    (lambda d, i: d["traceEvents"].insert(0, 7), "traceEvents.0: Input should be a valid dictionary"),
    (lambda d, i: d.update(traceEvents=5), "traceEvents: Input should be a valid list"),
    (lambda d, i: d.update(metadata=[1]), "metadata: Input should be a valid dictionary"),
    (lambda d, i: d["metadata"]["results"].update(epoch_time_s=math.nan), "results.epoch_time_s: must be a finite"),
    (lambda d, i: d["metadata"]["plan"]["cluster"]["network"].update(latency_s=1e308),
     "metadata.plan: cluster: network.latency_s: 1e+308 s is outside"),
])
def test_trace_schema_names_file_and_field(tmp_path: Path, trace_doc: dict[str, Any], change: Any,
                                           needle: str) -> None:
    doc = copy.deepcopy(trace_doc)
    i = _first_x(doc)
    change(doc, i)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(SpecError) as info:
        read_trace(path)
    assert str(info.value).startswith("trace t.json: "), info.value
    assert needle.format(i=i) in str(info.value), info.value


def test_trace_text_problems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.json"
    for text, needle in (("[" * 100_000 + "]" * 100_000, "nested too deeply"), ('{"traceEvents": [', "line 1"),
                         ("[1, 2]", "must hold a JSON object with traceEvents"), (b"\xff\xfe", "not UTF-8")):
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        _rejected(capsys, ["calibrate", str(path), "--cluster", "4x-a100-10gbe", "-o", str(tmp_path / "o" / "c.yaml")],
                  tmp_path / "o", "gnnplan calibrate: error: trace", needle)


def test_output_paths_are_checked_before_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "afile").write_text("x")
    ro = tmp_path / "ro.json"
    ro.write_text("{}")
    ro.chmod(0o444)
    for target, needle in ((tmp_path / "afile" / "t.json", "is a file, not a folder"),
                           (tmp_path / ("x" * 300 + ".json"), "name too long"),
                           (ro, "is read-only"), (tmp_path, "is a folder, not a file")):
        _rejected(capsys, [*SIM, "--trace", str(target)], tmp_path / "none", "--trace", needle)
    assert ro.read_text() == "{}"
    _rejected(capsys, ["whatif", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--vary",
                       "network.bandwidth_bytes_per_s=1Gbit/s,10Gbit/s", "-o", str(tmp_path / "afile")],
              tmp_path / "none", "--output", "is a file, not a folder")


def test_read_only_file_system(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: Any, **__: Any) -> Any:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(io.tempfile, "mkstemp", refuse)  # as root, chmod cannot make a folder read-only
    _rejected(capsys, [*SIM, "--trace", str(tmp_path / "t.json")], tmp_path / "none", "Read-only file system")


def test_long_output_name_writes_atomically(tmp_path: Path) -> None:
    dest = tmp_path / ("y" * 250 + ".json")  # the temp file's name must stay within NAME_MAX too
    io.atomic_write_json(dest, {"a": 1})
    assert json.loads(dest.read_text()) == {"a": 1} and files_in(tmp_path) == [dest]


@pytest.mark.parametrize(("exc", "needle"), [
    (OSError(errno.ENOSPC, "No space left on device", "/x/plan.yaml"), "/x/plan.yaml: No space left on device"),
    (MemoryError(), "out of memory"),
    (RecursionError("maximum recursion depth exceeded"), "nested too deeply"),
    (PermissionError(errno.EACCES, "Permission denied", "/x"), "/x: Permission denied"),
    (KeyError("boom"), "internal error: KeyError"),
])
def test_every_failure_is_one_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                   tmp_path: Path, exc: BaseException, needle: str) -> None:
    def fail(_: Any) -> int:
        raise exc

    monkeypatch.setattr(commands, "cmd_simulate", fail)
    code, out, err = call(capsys, SIM)
    assert code == 2 and err.count("\n") == 1 and needle in err and "Traceback" not in err, err
    monkeypatch.setenv("GNNPLAN_DEBUG", "1")
    if isinstance(exc, KeyError):
        with pytest.raises(KeyError):
            call(capsys, SIM)


def test_worker_error_is_one_line_without_progress(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A ragged feature row is found by each worker as it loads the features: the caller prints that worker's
    one-line error and nothing else (no progress bar, no epoch line)."""
    folder = _folder(tmp_path, lambda t: t["raw/node-feat.csv.gz"].__setitem__(3, ["0.5"]))
    plan = _plan(tmp_path)
    plan.update(num_workers=2)
    plan["cluster"]["num_machines"] = 2
    plan["workload"].update(dataset=str(folder))
    plan["workload"]["training"].update(batch_size=4, fanouts=[2, 2])
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(plan))
    err = _rejected(capsys, ["run", str(path), "--nprocs", "2", "--epochs", "1", "--trace-dir", str(tmp_path / "tr")],
                    tmp_path / "tr", "gnnplan run: error: dataset g: raw/node-feat.csv.gz row 3")
    assert "epoch" not in err.split("error:")[0] and "%|" not in err



@pytest.mark.parametrize(("flags", "needle"), [
    (["--nprocs", "2", "--gpus-per-machine", "3"], "--gpus-per-machine: must be >= 1 and divide the 2 workers, got 3"),
    (["--nprocs", "2", "--gpus-per-machine", "0"], "--gpus-per-machine: must be"),
])
def test_run_workers_per_machine_must_divide_the_workers(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         flags: list[str], needle: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(_plan(tmp_path)))
    _rejected(capsys, ["run", str(path), *flags, "--trace-dir", str(tmp_path / "out")], tmp_path / "out",
              "gnnplan run: error: --gpus-per-machine", needle)
