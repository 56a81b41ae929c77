"""gnnplan whatif: axes, grid, per-point tuning with warm starts, winners and crossovers, CSV/JSON/HTML output."""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from gnnplan.autotune.candidates import candidates
from gnnplan.autotune.cli import main
from gnnplan.autotune.whatif import (
    Point,
    crossovers,
    grid,
    parse_axis,
    split_values,
    summarize,
    tune_candidate,
)
from gnnplan.autotune.whatif_report import crossover_lines, csv_rows, summary_table
from gnnplan.simulator.api import coerce_knobs, simulate
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.spec import load_cluster
from gnnplan.simulator.workload.proxy_draws import draw_refs
from gnnplan.simulator.workload.spec import load_workload


def test_axes_read_units_presets_and_workload_fields() -> None:
    bw = parse_axis("network.bandwidth_bytes_per_s=1Gbit/s,10Gbit/s,100Gb/s")
    assert (bw.target, bw.path, bw.kind, bw.numeric) == ("cluster", "network.bandwidth_bytes_per_s", "bandwidth", True)
    assert bw.values == (1.25e8, 1.25e9, 1.25e10) and bw.labels == ("1Gbit/s", "10Gbit/s", "100Gb/s")
    presets = parse_axis("cluster=4x-a100-10gbe,dgx-a100")
    assert (presets.target, presets.path, presets.numeric) == ("cluster", "", False)
    hidden = parse_axis("workload.model.hidden_dim=16,256")
    assert (hidden.target, hidden.path, hidden.values) == ("workload", "model.hidden_dim", (16, 256))
    assert parse_axis("training.batch_size=64,128").target == "workload"
    assert parse_axis("workload.training.fanouts=[10,10],[15,10]").values == ([10, 10], [15, 10])
    assert split_values("[1,2], {a: 1, b: 2},3") == ["[1,2]", "{a: 1, b: 2}", "3"]


@pytest.mark.parametrize(("item", "needle"), [
    ("network.bandwidth_bytes_per_s", "is not FIELD=VALUE"),
    ("netwrk.bandwidth_bytes_per_s=1Gbit/s", "unknown field 'netwrk.bandwidth_bytes_per_s'"),
    ("network.bandwidth_bytes_per_s=1Gbit/s,,2Gbit/s", "empty value"),
    ("network.bandwidth_bytes_per_s=1Gbit/s,1Gbit/s", "repeated"),
    ("network.bandwidth_bytes_per_s=1 furlong/s", "cannot read '1 furlong/s' as a bandwidth"),
    ("workload.model.hiden_dim=16", "no 'hiden_dim' under model"),
])
def test_bad_axes_are_one_line_errors(item: str, needle: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_axis(item)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_two_spellings_of_one_spec_file_are_one_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("c.yaml").write_text("x")
    with pytest.raises(SpecError, match=r"^--vary cluster: 'c.yaml' and './c.yaml' are the same file$"):
        parse_axis("cluster=c.yaml,./c.yaml")
    assert parse_axis("cluster=c.yaml,4x-a100-10gbe").labels == ("c.yaml", "4x-a100-10gbe")


def test_an_unknown_fields_message_lists_hardware_fields_not_bookkeeping() -> None:
    with pytest.raises(SpecError) as err:
        parse_axis("netwrk=1")
    listed = str(err.value).split("a cluster field (")[1].split(")")[0].split(", ")
    assert "network" in listed and "jitter_s" in listed and "sources" not in listed and "priors" not in listed


def test_grid_applies_presets_then_cluster_sets_then_fields() -> None:
    axes = [parse_axis("cluster=4x-a100-10gbe,4x-t4-10gbe"), parse_axis("network.latency_s=5us,50us"),
            parse_axis("workload.model.hidden_dim=16,32")]
    points = grid("dgx-a100", "cora-sage", axes, ["network.bandwidth_bytes_per_s=25Gbit/s"])
    assert len(points) == 8 and points[0].index == (0, 0, 0) and points[-1].index == (1, 1, 1)
    last = points[-1]
    assert last.cluster.name == "4x-t4-10gbe" and last.cluster.network.latency_s == 5e-5
    assert last.cluster.network.bandwidth_bytes_per_s == 25e9 / 8 and last.workload.model.hidden_dim == 32
    assert last.labels == ("4x-t4-10gbe", "50us", "32")


def _summary(winners: list[list[str]]) -> list[dict]:
    out = []
    for i, row in enumerate(winners):
        for j, w in enumerate(row):
            out.append({"point": len(out), "index": (i, j), "labels": (str(i), str(j)), "winner": w})
    return out


def test_crossovers_are_neighbours_along_any_axis_with_different_winners() -> None:
    found = crossovers(_summary([["dp", "dp"], ["dp", "hopgnn"]]))
    assert [(c["axis"], c["from_point"], c["to_point"], c["from_winner"], c["to_winner"]) for c in found] == \
        [(0, 1, 3, "dp", "hopgnn"), (1, 2, 3, "dp", "hopgnn")]
    assert crossovers(_summary([["dp", "dp", "dp"]])) == []


def test_summary_ranks_feasible_candidates_only() -> None:
    rows = [{"point": 0, "strategy": "dp", "feasible": True, "epoch_time_s": 2.0},
            {"point": 0, "strategy": "hopgnn", "feasible": True, "epoch_time_s": 1.0},
            {"point": 0, "strategy": "gsplit", "feasible": False, "epoch_time_s": None},
            {"point": 1, "strategy": "dp", "feasible": False, "epoch_time_s": None}]
    points = [Point((0,), ("a",), None, None), Point((1,), ("b",), None, None)]  # type: ignore[arg-type]
    first, second = summarize(rows, points)
    assert (first["winner"], first["runner_up"], first["speedup"]) == ("hopgnn", "dp", 2.0)
    assert (second["winner"], second["speedup"]) == (None, None)


def test_a_warm_start_replays_the_previous_point_s_best_knobs() -> None:
    [point] = grid("4x-a100-10gbe", "cora-sage", [parse_axis("network.latency_s=20us")])
    [dp] = [c for c in candidates(point.workload, ["dp"])]
    warm = {"strategy": "dp", "dp.cache_fraction": 0.25, "dp.partitioner": "random"}
    found, params = tune_candidate(point, dp, trials=1, seed=0, warm=warm)
    assert found["knobs"]["cache_fraction"] == 0.25 and found["knobs"]["partitioner"] == "random"
    assert params is not None and params["dp.cache_fraction"] == 0.25 and found["num_trials"] == 1
    # without a previous point, the first trial is the strategy as shipped (its default knobs)
    first, _ = tune_candidate(point, dp, trials=1, seed=0, warm=None)
    assert first["knobs"] == coerce_knobs("dp", None).model_dump()


def test_whatif_over_two_bandwidths_writes_one_csv_row_per_point_and_strategy(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["whatif", "--cluster", "4x-v100-32gb-100gbib", "--workload", "cora-sage", "--vary",
                 "network.bandwidth_bytes_per_s=1Gbit/s,100Gbit/s", "--trials", "3", "-o", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    strategies = [c.label for c in candidates(load_workload("cora-sage"))]
    with open(tmp_path / "whatif.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["network.bandwidth_bytes_per_s"], r["strategy"]) for r in rows] == \
        [(bw, s) for bw in ("1Gbit/s", "100Gbit/s") for s in strategies]
    assert {float(r["network.bandwidth_bytes_per_s [SI]"]) for r in rows} == {1.25e8, 1.25e10}
    assert sum(r["winner"] == "True" for r in rows) == 2
    fast = {r["strategy"]: float(r["epoch_time_s"]) for r in rows if r["network.bandwidth_bytes_per_s"] == "100Gbit/s"}
    slow = {r["strategy"]: float(r["epoch_time_s"]) for r in rows if r["network.bandwidth_bytes_per_s"] == "1Gbit/s"}
    assert all(fast[s] < slow[s] for s in strategies)  # a 100x faster network never slows an epoch
    # each row's best configuration's traffic and memory, as simulate gives them (2026-12-01: only its times)
    for r in rows:
        again = simulate(load_cluster("4x-v100-32gb-100gbib"), "cora-sage", r["strategy"], json.loads(r["knobs"]),
                         cluster_set=[f"network.bandwidth_bytes_per_s={r['network.bandwidth_bytes_per_s']}"])
        assert float(r["network_bytes_per_epoch"]) == again.bytes_per_epoch["network"]
        assert float(r["peak_host_memory_bytes"]) == again.peak_memory_bytes["host"]
    html = (tmp_path / "whatif.html").read_text()
    assert "plotly" in html.lower() and len(html) > 1_000_000  # plotly.js embedded: opens offline
    # the page says what it shows and what the sweep found, as the command printed it (2026-12-01: the chart alone)
    assert "<h1>gnnplan whatif: 4x-v100-32gb-100gbib / cora-sage</h1>" in html
    assert "Every epoch time here is the simulator&#x27;s prediction, not a measurement" in html
    findings = html.split('<ul id="findings">')[1].split("</ul>")[0]
    assert "note: 3 trials per point and strategy" in findings and ("crossover" in findings)
    record = json.loads((tmp_path / "whatif.json").read_text())
    assert len(record["summary"]) == 2 and record["axes"][0]["values"] == [1.25e8, 1.25e10]
    assert "winner" in out and ("crossover" in out) and "whatif.html" in out


def test_crossover_lines_say_where_the_winner_changes() -> None:
    from gnnplan.autotune.whatif import WhatifResult

    axes = [parse_axis("network.bandwidth_bytes_per_s=1Gbit/s,100Gbit/s")]
    summary = [{"point": 0, "index": (0,), "labels": ("1Gbit/s",), "winner": "hopgnn"},
               {"point": 1, "index": (1,), "labels": ("100Gbit/s",), "winner": "dp"}]
    rows = [{"point": p, "strategy": st} for p in (0, 1) for st in ("dp", "hopgnn")]
    res = WhatifResult(axes, rows, summary, crossovers(summary))
    expected = "crossover along network.bandwidth_bytes_per_s: hopgnn -> dp between 1Gbit/s and 100Gbit/s"
    assert crossover_lines(res) == [expected]
    # another workload at each point, no candidate in common (mini-batch vs full-graph): the line says so
    axes = [parse_axis("workload=cora-sage,cora-gcn-full")]
    summary = [{"point": 0, "index": (0,), "labels": ("cora-sage",), "winner": "dp"},
               {"point": 1, "index": (1,), "labels": ("cora-gcn-full",), "winner": "neutronstar"}]
    rows = [{"point": 0, "strategy": "dp"}, {"point": 1, "strategy": "neutronstar"}, {"point": 1, "strategy": "hongtu"}]
    assert crossover_lines(WhatifResult(axes, rows, summary, crossovers(summary))) == [
        "crossover along workload: dp -> neutronstar between cora-sage and cora-gcn-full (dp and neutronstar are not "
        "among the other point's candidates: neither can run the other workload)"]


def test_a_tie_is_no_crossover_and_is_said() -> None:
    """Winners within TIE_FRACTION of each other are tied: a change of winner between them is no crossover (a sweep
    over model.arch reported dp -> hopgnn at a speedup of 1.0002)."""
    from gnnplan.autotune.whatif import TIE_FRACTION, WhatifResult

    rows = [{"point": 0, "strategy": "dp", "feasible": True, "epoch_time_s": 1.0},
            {"point": 0, "strategy": "hopgnn", "feasible": True, "epoch_time_s": 1.0 + TIE_FRACTION / 2},
            {"point": 0, "strategy": "gsplit", "feasible": True, "epoch_time_s": 2.0},
            {"point": 1, "strategy": "dp", "feasible": True, "epoch_time_s": 1.0 + TIE_FRACTION / 3},
            {"point": 1, "strategy": "hopgnn", "feasible": True, "epoch_time_s": 1.0},
            {"point": 1, "strategy": "gsplit", "feasible": True, "epoch_time_s": 2.0},
            {"point": 2, "strategy": "dp", "feasible": True, "epoch_time_s": 3.0},
            {"point": 2, "strategy": "hopgnn", "feasible": True, "epoch_time_s": 2.5},
            {"point": 2, "strategy": "gsplit", "feasible": True, "epoch_time_s": 1.0}]
    axes = [parse_axis("workload.model.hidden_dim=16,32,64")]
    points = [Point((i,), (label,), None, None) for i, label in enumerate(axes[0].labels)]  # type: ignore[arg-type]
    summary = summarize(rows, points)
    assert [s["tied"] for s in summary] == [["hopgnn"], ["dp"], []]
    found = crossovers(summary)
    assert [(c["from_winner"], c["to_winner"]) for c in found] == [("hopgnn", "gsplit")]  # not dp -> hopgnn
    res = WhatifResult(axes, rows, summary, found)
    lines = crossover_lines(res)
    assert lines[0].startswith("tied (within 1% of the winner's epoch time") and "hidden_dim=16: dp and hopgnn" \
        in lines[0] and lines[1].startswith("crossover along workload.model.hidden_dim: hopgnn -> gsplit")
    assert "1.00x (tie with hopgnn: within 1%)" in _table_text(summary_table(res))
    # integers need no SI column beside them; a value given with a unit does
    written = csv_rows(WhatifResult(axes, [{**r, "index": (r["point"],), "cluster": "c", "model": "sage", "knobs": {},
                                            "iteration_time_s": 1.0, "reason": "", "num_trials": 1} for r in rows],
                                    summary, found))
    assert "workload.model.hidden_dim" in written[0] and not any("[SI]" in k for k in written[0])


def _table_text(table: object) -> str:
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(table)
    return console.export_text()


def test_whatif_bad_input_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv, needle in (
            (["--vary", "network.bandwidth_bytes_per_s=fast"], "--vary: network.bandwidth_bytes_per_s: cannot read "
                                                                 "'fast' as a bandwidth"),
            (["--vary", "workload.model.num_layers=1,2"], "vary whole workloads, --vary workload=a.yaml,b.yaml"),
            (["--vary", "cluster=no-such-preset"], "unknown preset 'no-such-preset'"),
            (["--vary", "network.latency_s=1us", "--vary", "network.latency_s=2us"], "varied twice"),
            (["--vary", "network.bandwidth_bytes_per_s=10Gbit/s,1.25GB/s"], "'10Gbit/s' and '1.25GB/s' are the same"),
            (["--vary", "network.latency_s=5us,10us", "--cluster-set", "network.latency_s=1ms"],
             "network.latency_s is also set by --cluster-set"),
            (["--vary", "network.latency_s=1us", "--trials", "0"], "--trials: must be a positive integer"),
            (["--vary", "workload.dataset=card:cora@0,card:cora@y"], "the proxy draw after '@' must be an integer"),
            (["--vary", "workload.dataset=cora,no-such-graph"], "'no-such-graph' is neither a preset"),
            (["--vary", "network.latency_s=1us", "--proxy-draws", "0"], "--proxy-draws: must be a positive integer"),
            (["--vary", "network.latency_s=1us", "--proxy-draws", "2"], "--proxy-draws: needs a dataset card"),
            # a later point's bad combination stops the sweep before the first point is tuned (no trial's traceback)
            (["--strategies", "dp", "--vary", "num_machines=1,100"], "training.batch_size: 64 is smaller than the 100"),
            (["--strategies", "dp", "--vary", "workload=cora-sage,cora-gcn-full"],
             "'dp' does not support training.mode 'full-graph'")):
        code = main(["whatif", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", *argv, "-o", str(tmp_path)])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and needle in err[0], err
    assert not (tmp_path / "whatif.csv").exists()


def test_whatif_replaces_none_of_its_files_when_one_cannot_be_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "whatif.csv").write_text("old")
    (tmp_path / "whatif.json").mkdir()
    argv = ["whatif", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--strategies", "dp", "--trials", "1",
            "--vary", "network.latency_s=1us,2us", "-o", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "whatif.json' is a folder, not a file" in err[0], err
    assert (tmp_path / "whatif.csv").read_text() == "old" and not (tmp_path / "whatif.html").exists()


def test_a_varied_cluster_file_names_its_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = []
    for name, gbit in (("slow", 1), ("fast", 100)):
        path = tmp_path / f"{name}.yaml"
        cluster = load_cluster("4x-a100-10gbe").to_yaml_dict()
        cluster["network"]["bandwidth_bytes_per_s"] = gbit * 1.25e8
        path.write_text(yaml.safe_dump(cluster))
        files.append(str(path))
    code = main(["whatif", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--strategies", "dp", "--trials",
                 "1", "--vary", f"cluster={','.join(files)}", "-o", str(tmp_path / "out")])
    text = capsys.readouterr().out
    assert code == 0, text
    with open(tmp_path / "out" / "whatif.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["cluster"] for r in rows] == files  # the axis label, as the table prints it
    # both files keep the preset's datasheet peaks: said once, under the table and in the JSON
    (peaks,) = json.loads((tmp_path / "out" / "whatif.json").read_text())["peak_rates"]
    assert peaks.startswith("cluster 4x-a100-10gbe prices compute at datasheet peaks")
    assert " ".join(text.split()).count("prices compute at datasheet peaks") == 1
    assert [r["cluster_name"] for r in rows] == ["4x-a100-10gbe"] * 2
    assert float(rows[0]["epoch_time_s"]) > float(rows[1]["epoch_time_s"])


def test_a_point_where_nothing_fits_has_no_winner(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["whatif", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--strategies", "dp",
                 "--vary", "gpu.memory_bytes=1MB,40GB", "--trials", "2", "-o", str(tmp_path), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    tiny, full = out["summary"]
    assert tiny["winner"] is None and full["winner"] == "dp"
    assert out["crossovers"] == [{"axis": 0, "from_point": 0, "to_point": 1, "from_winner": None, "to_winner": "dp"}]
    with open(tmp_path / "whatif.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert (rows[0]["feasible"], rows[0]["epoch_time_s"]) == ("False", "")
    assert "memory" in rows[0]["reason"]
    # the table says why, and the change is told as one of feasibility, not of winner
    assert main(["whatif", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--strategies", "dp",
                 "--vary", "gpu.memory_bytes=1MB,40GB", "--trials", "2", "-o", str(tmp_path)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert f"none feasible (dp: {rows[0]['reason']}".replace("\n", " ")[:40] in text
    assert "along gpu.memory_bytes: no strategy fits at 1MB, dp wins at 40GB" in text and "crossover" not in text


def test_the_chart_title_names_the_clusters_a_sweep_varies_whole(tmp_path: Path) -> None:
    from gnnplan.autotune import whatif_report as wr
    from gnnplan.autotune.whatif import WhatifResult

    whole, field = parse_axis("cluster=4x-t4-10gbe,4x-a100-10gbe"), parse_axis("num_machines=2,4")
    assert wr.title(WhatifResult([whole], [], [], []), "4x-t4-10gbe", "cora-sage") == \
        "gnnplan whatif: cluster = 4x-t4-10gbe, 4x-a100-10gbe / cora-sage"
    assert wr.title(WhatifResult([field], [], [], []), load_cluster("4x-t4-10gbe"), "cora-sage") == \
        "gnnplan whatif: 4x-t4-10gbe / cora-sage"


def test_draw_refs_count_on_from_the_named_draw() -> None:
    assert draw_refs("card:cora@3", 2) == ["card:cora@3", "card:cora@4"]
    assert draw_refs("card:cora", 3) == ["card:cora@0", "card:cora@1", "card:cora@2"]
    assert draw_refs("ogbn-arxiv", 2) == ["card:ogbn-arxiv@0", "card:ogbn-arxiv@1"]  # a bare card name
    assert draw_refs("cora", 2) is None  # the bundled real graph: nothing to redraw
    with pytest.raises(SpecError, match=r"must be an integer from 0 to 2\*\*32 - 1"):
        draw_refs("card:cora@x", 2)
    with pytest.raises(SpecError, match=r"^--proxy-draws: draws 4294967295 to 4294967296 of card:cora: the last "
                                        r"is past the proxy seeds' range, 0 to 2\*\*32 - 1$"):
        draw_refs("card:cora@4294967295", 2)


def test_summary_counts_the_draws_the_winner_wins() -> None:
    rows = [{"point": 0, "strategy": "dp", "feasible": True, "epoch_time_s": 1.0,
             "epoch_time_draws_s": [1.0, 1.3, 1.1, None]},
            {"point": 0, "strategy": "gsplit", "feasible": True, "epoch_time_s": 1.2,
             "epoch_time_draws_s": [1.2, 1.2, 1.15, None]}]
    [entry] = summarize(rows, [Point((0,), ("a",), None, None)])  # type: ignore[arg-type]
    assert entry["winner"] == "dp" and entry["draw_winners"] == ["dp", "gsplit", "dp", None]
    assert entry["winner_draws"] == 2


def test_whatif_over_proxy_draws_resimulates_each_tuned_configuration(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--proxy-draws 2`` on a card: every row's first epoch time is the tuned one, its second the same knobs
    simulated on the next proxy draw (exactly what ``simulate`` gives there); the summary counts the draws the
    winner wins, the CSV carries the per-draw times and the chart error bars to their extremes."""
    from gnnplan.autotune.whatif_report import figure
    from gnnplan.simulator.overrides import with_fields

    wl = tmp_path / "wl.yaml"
    wl.write_text("dataset: card:cora@1\nmodel: {arch: sage, num_layers: 2, hidden_dim: 64}\n"
                  "training: {mode: mini-batch, batch_size: 64, fanouts: [10, 10]}\n")
    out = tmp_path / "out"
    code = main(["whatif", "--cluster", "4x-v100-32gb-100gbib", "--workload", str(wl), "--strategies", "dp,hopgnn",
                 "--vary", "network.bandwidth_bytes_per_s=1Gbit/s,100Gbit/s", "--trials", "2", "--proxy-draws", "2",
                 "-o", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    record = json.loads((out / "whatif.json").read_text())
    points = grid("4x-v100-32gb-100gbib", str(wl), [parse_axis("network.bandwidth_bytes_per_s=1Gbit/s,100Gbit/s")])
    for row in record["rows"]:
        assert row["proxy_draws"] == [1, 2] and row["epoch_time_draws_s"][0] == row["epoch_time_s"]
        moved = with_fields(points[row["point"]].workload, ["dataset=card:cora@2"], "test")
        again = simulate(points[row["point"]].cluster, moved, row["strategy"], row["knobs"])
        assert row["epoch_time_draws_s"][1] == again.epoch_time_s
        assert row["epoch_time_min_s"] == min(row["epoch_time_draws_s"])
        assert row["epoch_time_max_s"] == max(row["epoch_time_draws_s"])
    for entry in record["summary"]:
        mine = [r for r in record["rows"] if r["point"] == entry["point"]]
        fastest = [min(mine, key=lambda r: r["epoch_time_draws_s"][d])["strategy"] for d in range(2)]
        assert entry["draw_winners"] == fastest and entry["winner_draws"] == fastest.count(entry["winner"])
    with open(out / "whatif.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [json.loads(r["epoch_time_draws_s"]) for r in rows] == [r["epoch_time_draws_s"] for r in record["rows"]]
    assert all(sum(int(r["draws_won"]) for r in rows if r["point"] == str(p)) == 2 for p in range(2))
    assert "draws it wins" in text and "(draws 1-2)" in text
    # where the card's statistics come from: its table says draw 1, as simulate and tune would
    assert record["card_statistics"]["card:cora@1"]["proxy"]["draw"] == 1
    assert "card:cora@1: statistics estimated on draw 1 of card cora's proxy (2,708 vertices;" in text
    from gnnplan.autotune.whatif import WhatifResult

    res = WhatifResult([parse_axis("network.bandwidth_bytes_per_s=1Gbit/s,100Gbit/s")], record["rows"],
                       record["summary"], record["crossovers"])
    from gnnplan.autotune.whatif_report import summary_table

    assert summary_table(res).caption is None  # one draw named (card:cora@1): its time is draw 1's
    pooled = {"card:cora": {**record["card_statistics"]["card:cora@1"], "pooled": {"draws": 15}}}
    assert "need not lie in its single draws' range" in str(summary_table(replace(res, card_statistics=pooled)).caption)
    dp_line = next(t for t in figure(res, "t").data if t.name == "dp")
    dp_rows = [r for r in record["rows"] if r["strategy"] == "dp"]
    assert list(dp_line.error_y.array) == [r["epoch_time_max_s"] - r["epoch_time_s"] for r in dp_rows]
    assert list(dp_line.error_y.arrayminus) == [r["epoch_time_s"] - r["epoch_time_min_s"] for r in dp_rows]
    assert main(["report", str(out), "-o", str(tmp_path / "again.html")]) == 0  # the record redraws


def test_whatif_says_what_a_card_without_a_block_model_does_to_partitions(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A card giving only its communities' number and mixing (as ``ogbn-arxiv``'s) gets equal communities mixed
    uniformly, which bench_card_epoch found biases METIS statistics: whatif names such a card under its table and
    in its JSON; a card with a block model (``card:cora``) is not named."""
    from gnnplan.simulator.workload import cards, proxy_estimated

    monkeypatch.setenv("GNNPLAN_HOME", str(tmp_path / "home"))
    shipped = cards.load_card("cora")
    mixing = cards.Communities(num_communities=shipped.communities.num_communities, mu=shipped.communities.mu)
    cards.write_card(shipped.model_copy(update={"name": "cora-mixing", "communities": mixing}))
    wl = tmp_path / "wl.yaml"
    wl.write_text("dataset: card:cora\nmodel: {arch: sage, num_layers: 2, hidden_dim: 16}\n"
                  "training: {batch_size: 256, fanouts: [5, 5]}\n")
    code = main(["whatif", "--cluster", "4x-v100-32gb-100gbib", "--workload", str(wl), "--strategies", "dp",
                 "--vary", "workload.dataset=card:cora,card:cora-mixing", "--trials", "1", "-o", str(tmp_path / "o")])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0, out
    caveat = (f"planted from the card: {mixing.num_communities.value} communities of equal size mixed uniformly, "
              f"mixing mu {mixing.mu.value:g} (no block model); {proxy_estimated.MIXING_ONLY_EFFECT}")
    record = json.loads((tmp_path / "o" / "whatif.json").read_text())
    assert record["card_communities"] == {"card:cora-mixing": caveat}
    assert record["card_statistics"] == {d: proxy_estimated.for_dataset(d, {}) for d in ("card:cora",
                                                                                       "card:cora-mixing")}
    assert "card:cora: statistics estimated on " in out and "--json: card_statistics)" in out
    assert f"card:cora-mixing: the proxy's communities: {caveat}" in out
    assert proxy_estimated.community_caveat("card:cora") is None and proxy_estimated.community_caveat("cora") is None
    assert proxy_estimated.community_caveat("reddit").startswith("none: the card gives no community")
