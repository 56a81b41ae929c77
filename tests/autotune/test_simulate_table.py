"""``gnnplan simulate``'s table names the largest parts of each peak (``peak_memory_parts`` of ``--json``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gnnplan.autotune.cli import main
from gnnplan.autotune.report import fmt_s, largest_parts

SIM = ["simulate", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--strategy", "dp"]


def test_largest_parts_are_the_peaks_biggest_three() -> None:
    assert largest_parts({"a": 1e6, "b": 3e9, "c": 2e3, "d": 5e6, "zero": 0.0}) == "b 3.00 GB, d 5.00 MB, a 1.00 MB"
    assert largest_parts({"only": 0.0}) == "" and largest_parts({}) == ""


def test_the_table_shows_the_json_parts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*SIM, "--json"]) == 0
    parts = json.loads(capsys.readouterr().out)["peak_memory_parts"]
    assert main(SIM) == 0
    table = capsys.readouterr().out
    for where in ("gpu", "host"):
        name, _ = max(parts[where].items(), key=lambda kv: kv[1])
        assert name in table, (where, name)
    assert table.count("largest parts") == 2
    # the phases are epoch totals, headed as such (not indented under the iteration time)
    assert table.index("iteration time") < table.index("per epoch, by phase") < table.index("  forward")


def test_a_one_off_phase_is_not_listed_among_an_epochs(capsys: pytest.CaptureFixture[str]) -> None:
    """ppgnn's pre-propagation runs once before training: its row says so, apart from the per-epoch phases, and
    the tuner's breakdown chart leaves it out of the epoch's stack."""
    from gnnplan.autotune.report import fmt_s
    from gnnplan.autotune.report_page.study_charts import breakdown_figure

    sim = ["simulate", "--cluster", "16x-t4-6gbe", "--workload", "cora-sgc", "--strategy", "ppgnn"]
    assert main([*sim, "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["breakdown_s"]["preprocess"] > res["epoch_time_s"]  # the JSON keeps it (DESIGN.md's breakdown_s)
    assert main(sim) == 0
    table = capsys.readouterr().out
    once = f"once: preprocess │ {fmt_s(res['breakdown_s']['preprocess'])} before training (not in the epoch time)"
    assert once in " ".join(table.split())
    assert "  preprocess" not in table
    fig = breakdown_figure([{**res, "label": "ppgnn"}], {})
    assert "preprocess" not in {bar.name for bar in fig.data} and "forward" in {bar.name for bar in fig.data}


def test_a_nested_phase_is_part_of_its_outer_phases_time(capsys: pytest.CaptureFixture[str]) -> None:
    """dp's load waits for its fetch (its CALIBRATION rule says it contains it, as the simulated spans show): the
    JSON names the nesting, the table says fetch is part of load's time, and the breakdown stack draws load alone."""
    from gnnplan.autotune.report_page.study_charts import breakdown_figure
    from gnnplan.simulator.api import simulate

    res = simulate("4x-a100-10gbe", "cora-sage", "dp", {}).to_json_dict()
    assert res["nested_phases"] == {"fetch": "load"}  # peer_fetch: no such phase without a partitioned cache
    spans = simulate("4x-a100-10gbe", "cora-sage", "dp", {}).spans
    loads = [s for s in spans if s.phase == "load"]
    assert all(any(ld.rank == f.rank and ld.start_s <= f.start_s and f.end_s <= ld.end_s + 1e-12 for ld in loads)
               for f in spans if f.phase == "fetch")  # what the rule says, the simulated timeline shows
    assert main(SIM) == 0
    table = " ".join(capsys.readouterr().out.split())
    assert f"fetch │ {fmt_s(res['breakdown_s']['fetch'])} (within load: part of its time)" in table
    names = {bar.name for bar in breakdown_figure([{**res, "label": "dp"}], {}).data}
    assert "load" in names and "fetch" not in names


def test_a_cluster_without_gpus_names_its_device_memory_for_what_it_is(capsys: pytest.CaptureFixture[str]) -> None:
    """On the CPU-only local preset the 'gpu' memory is each worker's model state (also charged to the host)."""
    assert main(["simulate", "--cluster", "local", "--workload", "cora-sage", "--strategy", "dp"]) == 0
    table = capsys.readouterr().out
    assert "peak worker model memory (CPU-only: also in host)" in table and "peak gpu memory" not in table
    assert main(SIM) == 0
    assert "peak gpu memory" in capsys.readouterr().out  # 4x-a100-10gbe has GPUs


def test_a_phase_the_configuration_never_runs_is_left_out_of_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    """neutronstar under depcache exchanges nothing: its JSON keeps ``exchange``, ``pack`` and ``unpack`` at 0,
    the table lists only phases with time."""
    sim = ["simulate", "--cluster", "4x-a100-10gbe", "--workload", "cora-gcn-full", "--strategy", "neutronstar",
           "--set", "mode=depcache"]
    assert main([*sim, "--json"]) == 0
    breakdown = json.loads(capsys.readouterr().out)["breakdown_s"]
    assert breakdown["exchange"] == breakdown["pack"] == 0.0 and breakdown["forward"] > 0
    assert main(sim) == 0
    table = capsys.readouterr().out
    assert "  forward" in table and "  exchange" not in table and "  pack" not in table


def test_one_set_takes_several_knobs(capsys: pytest.CaptureFixture[str]) -> None:
    """``--set A=1 B=2`` (DESIGN.md: ``[--set KNOB=VALUE ...]``) as ``--set A=1 --set B=2``; the last value of a
    knob wins (2026-12-01: one value per --set, the second refused as an unknown argument)."""
    sim = ["simulate", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--strategy", "dp", "--json"]
    assert main([*sim, "--set", "cache_fraction=0.3", "partitioner=random", "--set", "cache_fraction=0.2"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert main([*sim, "--set", "partitioner=random", "--set", "cache_fraction=0.2"]) == 0
    assert json.loads(capsys.readouterr().out)["knobs"] == one["knobs"]
    assert one["knobs"]["cache_fraction"] == 0.2 and one["knobs"]["partitioner"] == "random"


def test_simulate_takes_a_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``simulate --plan P`` simulates the plan's configuration (its prediction again, exactly), and --set and
    --cluster-set change it; --plan with --cluster is refused, and without --plan each missing one is named
    (2026-12-01: a plan had to be split into cluster and workload files to be simulated again)."""
    plan = tmp_path / "plan.yaml"
    assert main(["tune", "--cluster", "4x-a100-10gbe", "--workload", "cora-gcn-full", "--trials", "4",
                 "--storage", f"sqlite:///{tmp_path / 's.db'}", "-o", str(plan), "--json"]) == 0
    capsys.readouterr()
    data = yaml.safe_load(plan.read_text())
    assert main(["simulate", "--plan", str(plan), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert (again["strategy"], again["knobs"]) == (data["strategy"], data["knobs"])
    assert again["epoch_time_s"] == data["prediction"]["epoch_time_s"]
    assert main(["simulate", "--plan", str(plan), "--cluster-set", "network.bandwidth_bytes_per_s=1Gbit/s",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["epoch_time_s"] != again["epoch_time_s"]
    assert main(["simulate", "--plan", str(plan), "--cluster", "dgx-a100"]) == 2
    assert "--plan: the plan names the cluster, workload and strategy; leave out --cluster" in capsys.readouterr().err
    assert main(["simulate", "--cluster", "dgx-a100", "--workload", "cora-sage"]) == 2
    assert "--strategy: required (or --plan PLAN" in capsys.readouterr().err
