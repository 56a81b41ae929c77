"""Non-finite numbers (``.inf``, ``1e400``, NaN) in cluster, workload and plan files are rejected with the field
named (issue 13: an infinite bandwidth used to hang simulate in the rate computation)."""

from __future__ import annotations

import math

import pytest

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.spec import cluster_from_dict, load_cluster
from gnnplan.simulator.workload.spec import load_workload, workload_from_dict

BAD = [math.inf, -math.inf, math.nan, float("1e400")]


@pytest.mark.parametrize("value", BAD, ids=["inf", "-inf", "nan", "1e400"])
@pytest.mark.parametrize("path", ["pcie.bandwidth_bytes_per_s", "network.latency_s", "gpu.peak_flops_per_s",
                                  "host.sampling_edges_per_s_per_core", "iteration_overhead_s"])
def test_cluster_rejects_non_finite(path: str, value: float) -> None:
    data = load_cluster("4x-a100-10gbe").to_yaml_dict()
    node = data
    *parents, leaf = path.split(".")
    for part in parents:
        node = node[part]
    node[leaf] = value
    with pytest.raises(SpecError, match=path.replace(".", r"\.") + ".*finite"):
        cluster_from_dict(data)


@pytest.mark.parametrize("value", BAD, ids=["inf", "-inf", "nan", "1e400"])
def test_workload_rejects_non_finite(value: float) -> None:
    data = load_workload("cora-sage").model_dump(mode="python")
    data["training"]["lr"] = value
    with pytest.raises(SpecError, match=r"training\.lr.*finite"):
        workload_from_dict(data)
