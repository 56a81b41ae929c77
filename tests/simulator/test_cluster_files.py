"""A cluster YAML file reads its fields as ``--cluster-set`` does (2026-11-30, a new user's pass: ``25Gbit/s`` in
a file was "not a valid number", a misspelt field was reported as the right one missing, ``nvlink: none`` named
an internal class, ``true`` was read as 1 B/s and a key given twice kept its last value silently)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.spec import load_cluster


def _file(tmp_path: Path, edit: dict, name: str = "c.yaml") -> Path:
    data = load_cluster("4x-a100-10gbe").model_dump(mode="json")
    for path, value in edit.items():
        *groups, last = path.split(".")
        node = data
        for g in groups:
            node = node[g]
        node[last] = value
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data))
    return p


def test_a_file_reads_units_and_none_as_cluster_set_does(tmp_path: Path) -> None:
    cl = load_cluster(_file(tmp_path, {"network.bandwidth_bytes_per_s": "25Gbit/s", "network.latency_s": "20us",
                                        "gpu.memory_bytes": "40GiB", "gpu.peak_flops_per_s": "19.5 TFLOP/s",
                                        "nvlink": "none"}))
    assert cl.network.bandwidth_bytes_per_s == 25e9 / 8 and cl.network.latency_s == pytest.approx(2e-5)
    assert cl.gpu.memory_bytes == 40 * 2**30 and cl.gpu.peak_flops_per_s == 19.5e12 and cl.nvlink is None
    assert cl == load_cluster(_file(tmp_path, {"network.bandwidth_bytes_per_s": 3.125e9, "network.latency_s": 2e-5,
                                                "gpu.memory_bytes": 40 * 2**30, "gpu.peak_flops_per_s": 19.5e12,
                                                "nvlink": None}, "si.yaml"))


@pytest.mark.parametrize("edit, message", [
    ({"network.bandwidth_bytes_per_s": "25GbE"}, "network.bandwidth_bytes_per_s: cannot read '25GbE' as a bandwidth;"),
    ({"network.bandwith_bytes_per_s": 1e9}, "network.bandwith_bytes_per_s: unknown field; allowed in network: "
                                            "bandwidth_bytes_per_s, latency_s,"),
    ({"num_machine": 2}, "num_machine: unknown field; allowed: name, num_machines,"),
    ({"network.bandwidth_bytes_per_s": True}, "network.bandwidth_bytes_per_s: a number, not true"),
])
def test_a_bad_field_is_named_in_one_line(tmp_path: Path, edit: dict, message: str) -> None:
    with pytest.raises(SpecError, match="^cluster c.yaml: ") as exc:
        load_cluster(_file(tmp_path, edit))
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_a_key_given_twice_is_refused(tmp_path: Path) -> None:
    p = _file(tmp_path, {})
    p.write_text(p.read_text().replace("  memory_bytes:", "  memory_bytes: 1.0e9\n  memory_bytes:", 1))
    with pytest.raises(SpecError, match=r"^cluster: .*c.yaml is not valid YAML: key 'memory_bytes' given twice in "
                                        r"one mapping, at line \d+$"):
        load_cluster(p)


def test_an_unknown_preset_or_card_names_the_nearest_one() -> None:
    from gnnplan.simulator.workload.cards import load_card
    from gnnplan.simulator.workload.spec import load_workload

    with pytest.raises(SpecError, match=r"^cluster: unknown preset '4x-a100-10gb' \(did you mean '4x-a100-10gbe'\?\); "
                                        r"allowed: 16x-t4-6gbe, .* or a YAML file$"):
        load_cluster("4x-a100-10gb")
    with pytest.raises(SpecError, match=r"^workload: unknown preset 'cora-sag' \(did you mean 'cora-sage'\?\); "):
        load_workload("cora-sag")
    with pytest.raises(SpecError, match=r"^workload.dataset: unknown card 'ogbn-product' \(did you mean "
                                        r"'ogbn-products'\?\); allowed: "):
        load_card("ogbn-product")
    with pytest.raises(SpecError, match=r"^cluster: unknown preset 'zzz'; allowed: "):  # nothing near: no guess
        load_cluster("zzz")
