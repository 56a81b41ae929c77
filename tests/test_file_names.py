"""Cluster and workload names become parts of file names (simulator/file_names.py): a name that would leave its
folder or overflow a file name is refused when the spec is read, before any work."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from malformed_inputs import call

from gnnplan.executor import probe
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.file_names import MAX_NAME_BYTES, check_file_name_part
from gnnplan.simulator.hardware.spec import cluster_from_dict, load_cluster
from gnnplan.simulator.workload.spec import load_workload, workload_from_dict


@pytest.mark.parametrize(("name", "message"), [
    ("../../esc/x", "holds a path separator"), ("a\\b", "holds a path separator"), (".hidden", "starts with a dot"),
    ("tab\there", "holds a control character"), ("a" * (MAX_NAME_BYTES + 1), "is 101 bytes long; at most 100"),
    ("\u00e9" * 51, "is 102 bytes long"),
])
def test_a_workload_name_no_file_can_hold_is_refused(name: str, message: str) -> None:
    data = load_workload("cora-sage").to_yaml_dict()
    data["name"] = name
    with pytest.raises(SpecError, match=rf"^w\.yaml: name: {message}"):
        workload_from_dict(data, "w.yaml")


def test_ordinary_names_pass_unchanged() -> None:
    for name in ("cora-sage", "my cluster (2 x A100)", "a" * MAX_NAME_BYTES, "x.y_z-1", ""):
        assert check_file_name_part(name) == name
    data = load_cluster("4x-a100-10gbe").to_yaml_dict()
    data["name"] = "../x"
    with pytest.raises(SpecError, match=r"^cluster: name: holds a path separator"):
        cluster_from_dict(data)
    data["name"] = ""  # a cluster needs a name (its calibration was "-calibrated")
    with pytest.raises(SpecError, match=r"^cluster: name: String should have at least 1 character"):
        cluster_from_dict(data)


def test_probe_refuses_an_output_whose_name_no_cluster_can_have_before_measuring(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def measured(**_: Any) -> dict[str, Any]:
        raise AssertionError("the probe measured")

    monkeypatch.setattr(probe, "probe_machine", measured)
    code, _, err = call(capsys, ["probe", "-o", str(tmp_path / ".hidden.yaml")])
    assert code == 2 and err.strip() == ("gnnplan probe: error: -o: the cluster is named after the file, '.hidden', "
                                         "which starts with a dot; a name becomes part of a file name and must not "
                                         "hide it")
    assert not list(tmp_path.iterdir())


def test_a_folder_given_for_a_file_is_called_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "d"
    folder.mkdir()
    for argv, what in ((["run", str(folder)], "plan"), (["calibrate", str(folder), "--cluster", "4x-a100-10gbe"],
                                                        "trace")):
        code, _, err = call(capsys, argv)
        assert code == 2 and err.strip().endswith(f"error: {what}: '{folder}' is a folder, not a file")


def test_an_empty_or_overlong_reference_is_one_line_before_any_file_system_call() -> None:
    """``load_cluster("a" * 300)`` raised ``OSError: File name too long`` and ``load_cluster("")`` called the
    current folder a folder (2026-12-01, a new user's pass over the API)."""
    from gnnplan.simulator.plan import load_plan

    for load, what in ((load_cluster, "cluster"), (load_workload, "workload")):
        with pytest.raises(SpecError, match=rf"^{what}: an empty name; give a preset name or a YAML file$"):
            load(" ")
        with pytest.raises(SpecError, match=rf"^{what}: 'a{{40}}'\.\.\. holds a name of 300 bytes; a file name has at "
                                            r"most 255$"):
            load("a" * 300)
    with pytest.raises(SpecError, match=r"^plan: an empty name; give a file$"):
        load_plan("")
