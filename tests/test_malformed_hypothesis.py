"""Generated malformed input at the CLI (issue 13): cluster specs, workloads, OGB folders, plans and traces.

Each example is handed to ``gnnplan`` in-process (:func:`gnnplan.autotune.cli.main`); the outcome must be a success
with finite numbers, or exit 2 with exactly one stderr line, no traceback, no "internal error", and no file left in
the output folder (:func:`malformed_inputs.check_outcome`); a call running longer than ``HANG_S`` fails as a hang.
Examples are derandomized (the same ones every run); :data:`COUNTS` records how many of each kind ran, printed by
the last test.
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from malformed_inputs import (
    BAD_FLOATS,
    BAD_INTS,
    JUNK,
    SCALARS,
    call,
    check_outcome,
    delete_path,
    leaves,
    ogb_tables,
    set_path,
    write_ogb,
)

from gnnplan.simulator.hardware.spec import load_cluster
from gnnplan.simulator.workload.spec import load_workload

COUNTS: Counter[str] = Counter()
"""(kind, outcome) -> examples run."""
SEQ = itertools.count()


def _settings(n: int) -> Any:
    return settings(max_examples=n, derandomize=True, deadline=None, database=None, print_blob=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large])


def _out(tmp: Path) -> Path:
    return tmp / f"out{next(SEQ)}"


def _mutate(data: dict[str, Any], draw: Any) -> dict[str, Any]:
    """One structural change of a valid mapping: a leaf replaced by a bad value, a key deleted, or an unknown key."""
    data = copy.deepcopy(data)
    path = draw(st.sampled_from(leaves(data)))
    how = draw(st.sampled_from(["value", "value", "value", "junk", "delete", "extra"]))
    if how == "value":
        set_path(data, path, draw(SCALARS))
    elif how == "junk":
        set_path(data, path, draw(JUNK))
    elif how == "delete" and path:
        delete_path(data, path)
    else:
        data["unknown_field"] = draw(SCALARS)
    return data


def _yaml_text(data: dict[str, Any], draw: Any) -> str:
    """The mapping as YAML, sometimes corrupted at the text level (truncated, an alias, deep nesting)."""
    text = yaml.safe_dump(data, sort_keys=False)
    how = draw(st.sampled_from(["plain"] * 6 + ["truncate", "alias", "deep", "tab"]))
    if how == "truncate":
        return text[: draw(st.integers(0, max(0, len(text) - 1)))]
    if how == "alias":
        return "x: &a [1, 2]\n" + text.replace("\n", "\ny: *a\n", 1)
    if how == "deep":
        return text + "deep: " + "[" * 200 + "]" * 200 + "\n"
    if how == "tab":
        return text.replace("  ", "\t", 1)
    return text


@st.composite
def cluster_files(draw: Any) -> str:
    return _yaml_text(_mutate(load_cluster("4x-a100-10gbe").to_yaml_dict(), draw), draw)


@pytest.mark.filterwarnings("ignore")
@_settings(35)
@given(text=cluster_files())
def test_cluster_specs(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, out = tmp_path / "cluster.yaml", _out(tmp_path)
    path.write_text(text)
    code, so, se = call(capsys, ["simulate", "--cluster", str(path), "--workload", "cora-sage", "--strategy", "dp",
                                 "--json", "--trace", str(out / "t.json")])
    COUNTS["cluster", check_outcome(code, so, se, out)] += 1


GENERATED = st.fixed_dictionaries({
    "generator": st.sampled_from(["rmat", "sbm", "nope"]),
    "num_vertices": st.one_of(st.sampled_from([16, 10**12, 10**15, 2**62, 15, -3]), BAD_INTS),
}, optional={"edge_factor": st.one_of(st.sampled_from([1, 2, 10**12]), BAD_INTS),
             "feature_dim": st.one_of(st.sampled_from([4, 10**6, 10**9]), BAD_INTS),
             "num_classes": st.one_of(st.sampled_from([2, 3]), BAD_INTS),
             "mean_degree": BAD_FLOATS, "a": BAD_FLOATS, "mu": BAD_FLOATS, "train_fraction": BAD_FLOATS})


@st.composite
def workload_files(draw: Any) -> str:
    base = load_workload("cora-sage").to_yaml_dict()
    if draw(st.booleans()):
        base["dataset"] = draw(GENERATED)
        base["training"]["batch_size"] = 8
        return _yaml_text(base, draw)
    return _yaml_text(_mutate(base, draw), draw)


@pytest.mark.filterwarnings("ignore")
@_settings(35)
@given(text=workload_files())
def test_workloads(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, out = tmp_path / "workload.yaml", _out(tmp_path)
    path.write_text(text)
    code, so, se = call(capsys, ["simulate", "--cluster", "dgx-a100", "--workload", str(path), "--strategy", "dp",
                                 "--json", "--trace", str(out / "t.json")])
    COUNTS["workload", check_outcome(code, so, se, out)] += 1


OGB_DAMAGE = ("none", "edge_columns", "edge_id", "negative_id", "num_nodes", "num_edges", "feature_nan", "feature_inf",
              "feature_empty", "feature_text", "ragged_short", "ragged_long", "all_unlabeled", "label_low",
              "label_high", "label_text", "split_id", "train_empty", "train_unlabeled", "empty_file", "not_gzip")


@st.composite
def ogb_folders(draw: Any) -> tuple[dict[str, list[list[str]]], str]:
    n, dim = draw(st.integers(8, 14)), draw(st.integers(1, 4))
    t = ogb_tables(n, dim, seed=draw(st.integers(0, 3)))
    damage = draw(st.sampled_from(OGB_DAMAGE))
    row = draw(st.integers(0, n - 1))
    feats, labels, edges = t["raw/node-feat.csv.gz"], t["raw/node-label.csv.gz"], t["raw/edge.csv.gz"]
    if damage == "edge_columns":
        edges[row] = edges[row] + ["1"] if draw(st.booleans()) else edges[row][:1]
    elif damage in ("edge_id", "negative_id"):
        edges[row][draw(st.integers(0, 1))] = str(n + draw(st.integers(0, 5)) if damage == "edge_id" else -1)
    elif damage == "num_nodes":
        t["raw/num-node-list.csv.gz"] = [[draw(st.sampled_from(["-1", "0", "abc", str(n - 1), "1e3"]))]]
    elif damage == "num_edges":
        t["raw/num-edge-list.csv.gz"] = [[str(len(edges) + draw(st.integers(1, 3)))]]
    elif damage.startswith("feature_"):
        feats[row][draw(st.integers(0, dim - 1))] = {"feature_nan": "nan", "feature_inf": "inf", "feature_empty": "",
                                                    "feature_text": "abc"}[damage]
    elif damage == "ragged_short" and dim > 1:
        feats[row] = feats[row][:-1]
    elif damage in ("ragged_short", "ragged_long"):
        feats[row] = feats[row] + ["0.5"]
    elif damage == "all_unlabeled":
        t["raw/node-label.csv.gz"] = [["-1"]] * n
    elif damage in ("label_low", "label_high", "label_text"):
        labels[row] = [{"label_low": "-7", "label_high": str(10**7), "label_text": "x"}[damage]]
    elif damage == "split_id":
        t["split/s/test.csv.gz"].append([str(n + draw(st.integers(0, 3)))])
    elif damage == "train_empty":
        t["split/s/train.csv.gz"] = []
    elif damage == "train_unlabeled":
        for (i,) in t["split/s/train.csv.gz"]:
            labels[int(i)] = ["-1"]
    elif damage in ("empty_file", "not_gzip"):
        t[draw(st.sampled_from(sorted(t)))] = [] if damage == "empty_file" else [["\0not gzip"]]
    return t, damage


def _tiny_plan(dataset: str) -> dict[str, Any]:
    """A one-worker dp plan on ``dataset`` (a 4x-a100-10gbe machine)."""
    cluster = load_cluster("4x-a100-10gbe").to_yaml_dict()
    cluster.update(num_machines=1)
    workload = {"name": "tiny", "dataset": dataset,
                "model": {"arch": "sage", "num_layers": 2, "hidden_dim": 4},
                "training": {"batch_size": 4, "fanouts": [2, 2], "num_epochs": 1}}
    return {"strategy": "dp", "knobs": {"num_sampler_workers": 0, "partitioner": "random"}, "num_workers": 1,
            "cluster": cluster, "workload": workload, "prediction": {"epoch_time_s": 0.01}}


@pytest.mark.filterwarnings("ignore")
@_settings(25)
@given(folder=ogb_folders())
def test_ogb_folders(folder: tuple[dict[str, list[list[str]]], str], tmp_path: Path,
                     capsys: pytest.CaptureFixture[str]) -> None:
    tables, damage = folder
    k = next(SEQ)
    data = tmp_path / f"g{k}"
    if damage == "not_gzip":
        write_ogb(data, tables)
        bad = next(name for name, rows in tables.items() if rows == [["\0not gzip"]])
        (data / bad).write_bytes(b"\0not gzip")
    else:
        write_ogb(data, tables)
    plan, out = tmp_path / f"plan{k}.yaml", _out(tmp_path)
    plan.write_text(yaml.safe_dump(_tiny_plan(str(data))))
    code, so, se = call(capsys, ["run", str(plan), "--nprocs", "1", "--json", "--trace-dir", str(out)])
    outcome = check_outcome(code, so, se, out)
    if damage in ("feature_nan", "feature_inf", "feature_empty", "feature_text", "ragged_short", "ragged_long",
                  "all_unlabeled", "label_low", "label_high", "edge_id", "negative_id", "split_id", "train_empty",
                  "train_unlabeled"):
        assert outcome == "rejected", (damage, so[-500:])
    if damage == "none":
        assert outcome == "accepted", se
    COUNTS["ogb folder", outcome] += 1


@pytest.fixture(scope="module")
def tiny_dataset(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A valid 12-vertex OGB folder (the plans' dataset: a run on it takes a fraction of a second)."""
    return str(write_ogb(tmp_path_factory.mktemp("tiny") / "tiny", ogb_tables(12, 3, seed=0)))


DATASET = "TINY-DATASET-FOLDER"
"""Stands for the tiny dataset's folder in generated plans (replaced by the test)."""


@st.composite
def plan_texts(draw: Any) -> str:
    """A plan's YAML with one problem (or none) in a free-form block, a nested spec or the top level."""
    plan = _tiny_plan(DATASET)
    block = draw(st.sampled_from(["valid", "prediction", "prediction", "knobs", "cluster", "workload", "top"]))
    key = draw(st.text(min_size=1, max_size=8))
    if block == "valid":
        plan["prediction"][key] = draw(st.one_of(st.floats(allow_nan=False, allow_infinity=False),
                                                 st.integers(-(10**9), 10**9), st.text(max_size=10), st.none()))
        return yaml.safe_dump(plan, sort_keys=False)
    if block == "prediction":
        nested: Any = draw(JUNK)
        for _ in range(draw(st.sampled_from([1, 5, 20, 40]))):
            nested = {"x": nested}
        plan["prediction"][key] = nested
    elif block == "knobs":
        plan["knobs"][key] = draw(JUNK)
    elif block == "top":
        plan[key] = draw(JUNK)
    else:
        plan[block] = _mutate(plan[block], draw)
    return _yaml_text(plan, draw)


@pytest.mark.filterwarnings("ignore")
@_settings(25)
@given(text=plan_texts())
def test_plans(text: str, tiny_dataset: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    k = next(SEQ)
    plan, out = tmp_path / f"plan{k}.yaml", _out(tmp_path)
    plan.write_text(text.replace(DATASET, tiny_dataset))
    code, so, se = call(capsys, ["run", str(plan), "--nprocs", "1", "--json", "--trace-dir", str(out)])
    COUNTS["plan", check_outcome(code, so, se, out)] += 1


@functools.lru_cache(maxsize=1)
def _predicted_trace() -> str:
    """A valid predicted trace's JSON text (simulate --trace of cora-sage dp on 4x-a100-10gbe)."""
    from gnnplan.autotune.cli import main

    path = Path(tempfile.mkdtemp(prefix="gnnplan-pred-")) / "pred.json"
    assert main(["simulate", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--strategy", "dp",
                 "--trace", str(path), "--json"]) == 0
    text = path.read_text()
    shutil.rmtree(path.parent)
    return text


@st.composite
def trace_texts(draw: Any) -> str:
    """A predicted trace's JSON with one problem (or none) in an event, its args, the metadata or the text."""
    doc = json.loads(_predicted_trace())
    how = draw(st.sampled_from(["event"] * 5 + ["args", "metadata", "plan", "top", "text"]))
    events = doc["traceEvents"]
    ev = events[draw(st.integers(0, len(events) - 1))]
    if how == "event":
        ev[draw(st.sampled_from(["ts", "dur", "pid", "tid", "name", "ph", "args"]))] = draw(JUNK)
    elif how == "args":
        ev.setdefault("args", {})[draw(st.sampled_from(["nbytes", "flops", "epoch", "iteration", "x"]))] = draw(JUNK)
    elif how == "metadata":
        doc["metadata"][draw(st.text(max_size=6))] = draw(JUNK)
    elif how == "plan":
        set_path(doc["metadata"], ("plan", "cluster", "network", "latency_s"), draw(JUNK))
    elif how == "top":
        doc[draw(st.sampled_from(["traceEvents", "metadata"]))] = draw(JUNK)
    text = json.dumps(doc, allow_nan=True)
    if how == "text":
        if draw(st.booleans()):
            at = text.find('"ts": ') + 6
            text = text[:at] + draw(st.sampled_from(["NaN", "Infinity", "-1e400", "1e400", "[" * 5000])) + \
                text[text.find(",", at):]
        else:
            text = text[: draw(st.integers(0, len(text) - 1))]
    return text


@pytest.mark.filterwarnings("ignore")
@_settings(40)
@given(text=trace_texts())
def test_traces(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    k = next(SEQ)
    trace, out = tmp_path / f"t{k}.json", _out(tmp_path)
    trace.write_text(text)
    measured = Path(__file__).parents[1] / "traces" / "cora-sage-dp.sample.json"
    code, so, se = call(capsys, ["trace", "merge", str(trace), str(measured), "-o", str(out / "m.json"), "--json"])
    COUNTS["trace", check_outcome(code, so, se, out)] += 1


def test_zz_example_counts(capsys: pytest.CaptureFixture[str]) -> None:
    """At least 100 generated inputs ran across the five kinds (printed for the record)."""
    kinds = {kind for kind, _ in COUNTS}
    total = sum(COUNTS.values())
    with capsys.disabled():
        print(f"\nmalformed-input examples: {total} total; " + ", ".join(
            f"{kind} {COUNTS[kind, 'rejected']} rejected / {COUNTS[kind, 'accepted']} accepted"
            for kind in sorted(kinds)))
    if len(kinds) < 5:
        pytest.skip("run with the generated tests above to count their examples")
    assert total >= 100
