"""A boolean where a number goes is refused in every spec (simulator/spec_model.py): pydantic's lax mode read
``true`` as 1 in integer fields, so a cluster of ``num_machines: true`` simulated one machine."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pytest
import yaml
from malformed_inputs import call

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.spec import cluster_from_dict, load_cluster
from gnnplan.simulator.plan import Plan
from gnnplan.simulator.spec_model import admits_bool, takes_numbers
from gnnplan.simulator.strategies.dp import Knobs
from gnnplan.simulator.workload.spec import load_workload, workload_from_dict


def test_a_cluster_file_with_a_boolean_machine_count_is_refused() -> None:
    data = load_cluster("4x-a100-10gbe").to_yaml_dict()
    data["num_machines"] = True
    with pytest.raises(SpecError, match=r"^cluster: num_machines: a number, not true$"):  # as its floats say
        cluster_from_dict(data, "cluster")


@pytest.mark.parametrize(("path", "value", "message"), [
    (("training", "batch_size"), True, "training.batch_size: a number, not true"),  # read as a file's sizes are
    (("training", "fanouts"), [True, 10], "training.fanouts: numbers, not booleans ([true, 10] holds one)"),
    (("model", "hidden_dim"), False, "model.hidden_dim: a number, not a boolean"),
])
def test_a_workload_with_a_boolean_number_is_refused(path: tuple[str, str], value: Any, message: str) -> None:
    data = load_workload("cora-sage").to_yaml_dict()
    data[path[0]][path[1]] = value
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        workload_from_dict(data)


def test_booleans_stay_allowed_where_a_field_takes_them() -> None:
    data = load_cluster("4x-a100-10gbe").to_yaml_dict()
    assert data["storage"]["gpudirect"] is True  # a boolean field of a nested model
    assert cluster_from_dict(data).storage is not None
    with pytest.raises(ValueError, match="num_sampler_workers\n  a number, not a boolean"):
        Knobs(num_sampler_workers=True)
    plan = Plan(strategy="hopgnn", knobs={"micrograph": True}, num_workers=4, cluster=load_cluster("4x-a100-10gbe"),
                workload=load_workload("cora-sage"))  # free-form knobs: the strategy's own model checks them
    assert plan.knobs["micrograph"] is True


def test_which_annotations_take_numbers_and_admit_booleans() -> None:
    assert takes_numbers(int) and takes_numbers(list[int]) and takes_numbers(float | None)
    assert not takes_numbers(str) and not takes_numbers(Literal["a", "b"])
    assert admits_bool(bool) and admits_bool(int | bool) and admits_bool(Any) and admits_bool(dict[str, Any])
    assert not admits_bool(int) and not admits_bool(list[int]) and not admits_bool(float | None)


def test_the_command_line_refuses_a_boolean_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wl = load_workload("cora-sage").to_yaml_dict()
    wl["model"]["hidden_dim"] = True
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(wl))
    code, _, err = call(capsys, ["simulate", "--cluster", "4x-a100-10gbe", "--workload", str(path), "--strategy",
                                 "dp"])
    assert code == 2 and err.strip().endswith("model.hidden_dim: a number, not a boolean (got True)")
    code, _, err = call(capsys, ["simulate", "--cluster", "4x-a100-10gbe", "--workload", "cora-sage", "--strategy",
                                 "dp", "--cluster-set", "num_machines=true"])
    assert code == 2 and err.strip().endswith("--cluster-set: num_machines: a number, not true")


def test_a_missing_dataset_or_no_fanouts_says_what_is_wanted() -> None:
    """pydantic's message for ``dataset: None`` asked for "a valid dictionary", and no fanouts were called
    not positive (2026-12-01, a new user's pass over the API)."""
    data = load_workload("cora-sage").to_yaml_dict()
    data["dataset"] = None
    with pytest.raises(SpecError, match=r"^workload: dataset: a preset \(cora, citeseer\), a card \(card:<name>\), "):
        workload_from_dict(data)
    data = load_workload("cora-sage").to_yaml_dict()
    data["training"]["fanouts"] = []
    with pytest.raises(SpecError, match=r"^workload: training.fanouts: one fanout per layer, .*; got none"):
        workload_from_dict(data)
