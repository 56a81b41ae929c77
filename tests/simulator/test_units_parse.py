"""Unit-aware values: bandwidths, times, sizes and compute rates in SI base units; one-line errors."""

from __future__ import annotations

import pytest

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.units_parse import kind_of, parse_field_value, parse_quantity


@pytest.mark.parametrize(("text", "kind", "expected"), [
    ("1Gbit/s", "bandwidth", 1.25e8),
    ("10Gbit/s", "bandwidth", 1.25e9),
    ("100Gb/s", "bandwidth", 1.25e10),
    ("100Gbps", "bandwidth", 1.25e10),
    ("10GB/s", "bandwidth", 1.0e10),
    ("1.5 GiB/s", "bandwidth", 1.5 * 2**30),
    ("25e9", "bandwidth", 25e9),
    ("5us", "time", 5e-6),
    ("2ms", "time", 2e-3),
    ("20 \u00b5s", "time", 2e-5),
    ("0.1", "time", 0.1),
    ("40GiB", "bytes", 40 * 2**30),
    ("16GB", "bytes", 16e9),
    ("8Gbit", "bytes", 1e9),
    ("19.5TFLOPS", "flops", 19.5e12),
    ("19.5 TFLOP/s", "flops", 19.5e12),
    ("0.5", "number", 0.5),
])
def test_values_become_si_base_units(text: str, kind: str, expected: float) -> None:
    assert parse_quantity(text, kind, "f") == pytest.approx(expected, rel=1e-15)


def test_a_field_name_says_its_kind() -> None:
    assert [kind_of(f) for f in ("network.bandwidth_bytes_per_s", "gpu.peak_flops_per_s", "gpu.memory_bytes",
                                 "network.latency_s", "efficiency.gather_fraction")] == \
        ["bandwidth", "flops", "bytes", "time", "number"]
    assert parse_field_value("network.latency_s", "50us") == 5e-5


@pytest.mark.parametrize(("text", "kind"), [
    ("10 furlongs", "bandwidth"), ("10GB", "bandwidth"), ("5us", "bandwidth"), ("10Gbit/s", "time"),
    ("inf", "number"), ("nan", "time"), ("1e999", "bytes"), ("", "bytes"), ("GB", "bytes"), ("1 TFLOPS", "bytes"),
])
def test_unreadable_values_are_one_line_errors_naming_field_and_forms(text: str, kind: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_quantity(text, kind, "network.bandwidth_bytes_per_s")
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("network.bandwidth_bytes_per_s: cannot read")
    assert "use e.g." in msg


@pytest.mark.parametrize(("text", "fix"), [("16Gb", "16GB, or spell bits out as 16Gbit"),
                                           ("40 Gib", "40GiB, or spell bits out as 40Gibit"),
                                           ("512Mb", "512MB, or spell bits out as 512Mbit")])
def test_a_size_in_b_is_refused_not_read_as_an_eighth(text: str, fix: str) -> None:
    with pytest.raises(SpecError, match=rf"^gpu.memory_bytes: '{text}' is in bits \(b\); write a size in bytes as "
                                        rf"{fix}$"):
        parse_quantity(text, "bytes", "gpu.memory_bytes")
    assert parse_quantity(text.replace("b", "b/s"), "bandwidth", "f") > 0  # a bandwidth in Gb/s stays bits


def test_unknown_kind_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown kind"):
        parse_quantity("1", "speed", "f")


def test_counted_nouns_agree_with_their_number() -> None:
    from gnnplan.simulator.wording import counted

    assert [counted(n, "trace") for n in (0, 1, 2)] == ["0 traces", "1 trace", "2 traces"]
    assert counted(3, "feasible trial") == "3 feasible trials" and counted(2, "child", "children") == "2 children"


def test_a_workload_file_reads_its_sizes_with_units_as_a_cluster_file_does() -> None:
    from gnnplan.simulator.workload.spec import load_workload, workload_from_dict

    data = load_workload("cora-sage").to_yaml_dict()
    data["training"]["ddp_bucket_bytes"] = "25MB"  # refused before 2026-12-01 while cluster sizes took units
    assert workload_from_dict(data).training.ddp_bucket_bytes == 25e6
    data["training"]["ddp_bucket_bytes"] = "25 furlongs"
    with pytest.raises(SpecError, match=r"^w: training.ddp_bucket_bytes: cannot read '25 furlongs' as a size"):
        workload_from_dict(data, "w")
