"""The cluster the benchmarks predict this machine's runs with (benchmarks/measure.py): a ``gnnplan probe`` of this
machine in the gnnplan home when there is one, else a probe made now, never silently the package's example."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

from gnnplan.simulator.hardware.spec import load_cluster, preset_dirs

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def measure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    """benchmarks/measure.py, with a gnnplan home of its own and its probe replaced by a recorder."""
    monkeypatch.setenv("GNNPLAN_HOME", str(tmp_path / "home"))
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    module = importlib.import_module("measure")
    probes: list[tuple[bool, int, int]] = []

    def probe(quick: bool, num_workers: int = 2, gpus_per_machine: int = 1) -> Any:
        probes.append((quick, num_workers, gpus_per_machine))
        return load_cluster("4x-a100-10gbe")

    monkeypatch.setattr(module, "probe_local_cluster", probe)
    module.probes = probes
    yield module
    sys.modules.pop("measure", None)


def test_an_unprobed_machine_is_probed_in_the_run(measure: Any) -> None:
    assert not (preset_dirs()[0] / "local.yaml").exists()
    cluster = measure.cluster_of_this_machine("local", 4, 2)
    assert measure.probes == [(False, 4, 2)] and cluster.name == "4x-a100-10gbe"


def test_a_probed_machine_and_a_named_preset_are_loaded(measure: Any) -> None:
    home = preset_dirs()[0]
    home.mkdir(parents=True)
    probed = load_cluster("local").model_copy(update={"name": "local", "jitter_s": 1.25e-3})
    (home / "local.yaml").write_text(probed.model_dump_json())
    assert measure.cluster_of_this_machine("local").jitter_s == 1.25e-3
    assert measure.cluster_of_this_machine("dgx-a100").name == "dgx-a100"
    assert measure.probes == []
