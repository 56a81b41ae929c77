"""--cluster-set FIELD=VALUE on simulate and tune: unit-aware, validated, one-line errors with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gnnplan.autotune.cli import main
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.spec import load_cluster
from gnnplan.simulator.overrides import with_fields

SIM = ["simulate", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--strategy", "dp", "--json"]


def _epoch_s(capsys: pytest.CaptureFixture[str], *extra: str) -> float:
    assert main([*SIM, *extra]) == 0
    return float(json.loads(capsys.readouterr().out)["epoch_time_s"])


def test_simulate_uses_the_changed_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    base = _epoch_s(capsys)
    assert _epoch_s(capsys, "--cluster-set", "network.bandwidth_bytes_per_s=10Gbit/s") == base  # the preset's value
    slower = _epoch_s(capsys, "--cluster-set", "network.bandwidth_bytes_per_s=1Gbit/s",
                      "--cluster-set", "network.latency_s=200us")
    assert slower > base


def test_with_fields_is_unit_aware_and_records_the_source() -> None:
    cl = with_fields(load_cluster("4x-a100-10gbe"), ["network.bandwidth_bytes_per_s=100Gb/s", "gpu.memory_bytes=16GiB",
                                                     "nvlink={bandwidth_bytes_per_s: 300e9, latency_s: 2e-6}",
                                                     "num_machines=2"], "--cluster-set")
    assert cl.network.bandwidth_bytes_per_s == 12.5e9 and cl.gpu.memory_bytes == 16 * 2**30
    assert cl.nvlink is not None and cl.nvlink.bandwidth_bytes_per_s == 300e9 and cl.num_machines == 2
    assert cl.sources["gpu.memory_bytes"] == "set by --cluster-set gpu.memory_bytes=16GiB"
    assert with_fields(cl, ["nvlink=none"], "--cluster-set").nvlink is None
    # a group's values read units as a single field's do
    units = with_fields(cl, ["nvlink={bandwidth_bytes_per_s: 300GB/s, latency_s: 2us}"], "--cluster-set")
    assert units.nvlink == cl.nvlink
    with pytest.raises(SpecError, match="nvlink.latency_s: cannot read 'soon'"):
        with_fields(cl, ["nvlink={bandwidth_bytes_per_s: 300GB/s, latency_s: soon}"], "--cluster-set")
    with pytest.raises(SpecError, match="network.bandwidth: unknown field; allowed in network: bandwidth_bytes_per_s"):
        with_fields(cl, ["network={bandwidth: 1Gbit/s}"], "--cluster-set")


@pytest.mark.parametrize(("assignment", "needle"), [
    ("network.bandwith_bytes_per_s=1Gbit/s", "unknown field 'network.bandwith_bytes_per_s'"),
    ("network.bandwidth_bytes_per_s=1 Gbit per s", "cannot read '1 Gbit per s' as a bandwidth; use e.g. 10Gbit/s"),
    ("network.bandwidth_bytes_per_s=-1Gbit/s", "network.bandwidth_bytes_per_s: Input should be greater than 0"),
    ("network.latency_s=5 parsecs", "network.latency_s: cannot read '5 parsecs' as a time"),
    ("nvlink.latency_s=2us", "nvlink is none here"),
    ("gpu.model.name=x", "gpu.model is a value, not a group of fields"),
    ("sources.x=y", "sources is a mapping, not a group of fields (in 'sources.x'); give it whole: sources={KEY: "),
    ("network.bandwidth_bytes_per_s", "is not FIELD=VALUE"),
])
@pytest.mark.parametrize("command", ["simulate", "tune"])
def test_bad_cluster_sets_are_one_line_exit_2(command: str, assignment: str, needle: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "plan.yaml"
    argv = ([*SIM] if command == "simulate" else
            ["tune", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--trials", "1", "--storage",
             f"sqlite:///{tmp_path / 's.db'}", "-o", str(plan)])
    code = main([*argv, "--cluster-set", assignment])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"gnnplan {command}: error: --cluster-set: ") and needle in err[0], err[0]
    assert not plan.exists()


def test_tune_tunes_for_the_changed_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["tune", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--strategies", "dp", "--trials", "2",
            "--storage", f"sqlite:///{tmp_path / 's.db'}", "-o", str(tmp_path / "plan.yaml"), "--json",
            "--cluster-set", "network.bandwidth_bytes_per_s=25Gbit/s"]
    assert main(argv) == 0
    capsys.readouterr()
    from gnnplan.simulator.plan import load_plan

    plan = load_plan(tmp_path / "plan.yaml")
    assert plan.cluster.network.bandwidth_bytes_per_s == 25e9 / 8
    assert "--cluster-set" in plan.cluster.sources["network.bandwidth_bytes_per_s"]


def test_a_plan_reads_its_cluster_as_a_cluster_file_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A plan edited by hand takes the units and gets the messages a cluster file does (it refused 25Gbit/s)."""
    import yaml

    from gnnplan.simulator.plan import load_plan, predicted_epoch_s

    argv = ["tune", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--strategies", "dp", "--trials", "1",
            "--storage", f"sqlite:///{tmp_path / 's.db'}", "-o", str(tmp_path / "plan.yaml"), "--json"]
    assert main(argv) == 0
    capsys.readouterr()
    data = yaml.safe_load((tmp_path / "plan.yaml").read_text())
    data["cluster"]["network"]["bandwidth_bytes_per_s"] = "25Gbit/s"
    data["cluster"]["gpu"]["memory_bytes"] = "40GiB"
    edited = tmp_path / "edited.yaml"
    edited.write_text(yaml.safe_dump(data))
    plan = load_plan(edited)
    assert plan.cluster.network.bandwidth_bytes_per_s == 25e9 / 8 and plan.cluster.gpu.memory_bytes == 40 * 2**30
    # the prediction is of the plan as tune wrote it (its digest survives the YAML round trip), not of the edit
    assert predicted_epoch_s(load_plan(tmp_path / "plan.yaml"))[0] == data["prediction"]["epoch_time_s"]
    fewer = yaml.safe_load((tmp_path / "plan.yaml").read_text())
    fewer["workload"]["training"]["num_epochs"] = 3  # the prediction is per epoch: still this plan's
    (tmp_path / "fewer.yaml").write_text(yaml.safe_dump(fewer))
    assert predicted_epoch_s(load_plan(tmp_path / "fewer.yaml"))[0] == data["prediction"]["epoch_time_s"]
    assert predicted_epoch_s(plan) == (None, "the plan's configuration is not the one its prediction was made for "
                                             "(its strategy, knobs, workers, cluster or workload were changed since, "
                                             "by hand or for another layout): simulate it again")
    # a stamp of another digest version (a plan of 2026-12-01 before the version prefix) cannot tell: taken as it is
    other = plan.model_copy(update={"prediction": {**plan.prediction, "configuration": "08a323c7094a7f22"}})
    assert predicted_epoch_s(other)[0] == data["prediction"]["epoch_time_s"]
    for block, key, value, needle in [
            ("cluster", "network", "25 parsecs", "plan bad.yaml: cluster: network.bandwidth_bytes_per_s: cannot read"),
            ("cluster", "netwrk", 1, "plan bad.yaml: cluster.netwrk: unknown field"),
            ("workload", "trainin", 1, "plan bad.yaml: workload.trainin: unknown field")]:
        bad = yaml.safe_load(edited.read_text())
        if value == "25 parsecs":
            bad[block][key]["bandwidth_bytes_per_s"] = value
        else:
            bad[block][key] = value
        path = tmp_path / "bad.yaml"
        path.write_text(yaml.safe_dump(bad))
        with pytest.raises(SpecError) as err:
            load_plan(path)
        assert str(err.value).startswith(needle), str(err.value)


def test_unknown_top_level_field_lists_the_allowed_ones() -> None:
    with pytest.raises(SpecError, match=r"no 'netwrk'; allowed: name, num_machines, gpus_per_machine, gpu"):
        with_fields(load_cluster("dgx-a100"), ["netwrk=1"], "--cluster-set")


def test_tune_where_nothing_fits_names_the_closest_trial(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every trial over its memory: one line, exit 2, naming the trial over by the least and why (simulate's
    reason), no plan written."""
    plan = tmp_path / "plan.yaml"
    code = main(["tune", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--strategies", "dp,gsplit",
                 "--trials", "4", "--cluster-set", "gpu.memory_bytes=1MB", "--storage",
                 f"sqlite:///{tmp_path / 's.db'}", "-o", str(plan)])
    err = capsys.readouterr().err.strip().splitlines()[-1]  # after the trials' progress bar
    assert code == 2 and not plan.exists()
    assert "tune: no feasible configuration found (every trial ran out of memory; the closest, dp: " in err \
        or "tune: no feasible configuration found (every trial ran out of memory; the closest, gsplit: " in err
    assert "out of GPU memory" in err or "out of host memory" in err
