"""Properties every registered strategy's cost model keeps, on every shipped workload preset it accepts and on
the 4x-a100-10gbe and dgx-a100 presets: a faster link never makes an epoch slower, a larger feature cache never
moves more bytes, and importing the simulator loads no heavy module.

Parametrised over ``simulator.strategies.STRATEGIES`` and ``simulator.strategies.contract.accepts``, so a new
strategy or preset is covered without a line here. Graph statistics are measured once per preset and test session
(the statistics cache), so each case costs a few simulations.
"""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest

from gnnplan.simulator.api import simulate
from gnnplan.simulator.hardware.spec import ClusterSpec, load_cluster
from gnnplan.simulator.result import SimResult
from gnnplan.simulator.strategies import STRATEGIES
from gnnplan.simulator.strategies.contract import accepts
from gnnplan.simulator.workload.spec import load_workload, preset_names

CLUSTERS = ("4x-a100-10gbe", "dgx-a100")
LINKS = ("pcie", "nvlink", "network", "storage")
BANDWIDTH_FACTOR = 2.0
CACHE_FRACTIONS = (0.0, 0.5, 1.0)
REL_TOL = 1e-9
"""Relative slack of the monotonicity checks: floating-point rounding of the event times, nothing more."""

CASES = [(name, preset) for name in sorted(STRATEGIES) for preset in preset_names()
         if accepts(STRATEGIES[name], load_workload(preset))]
CACHE_CASES = [(name, preset) for name, preset in CASES if "cache_fraction" in STRATEGIES[name].Knobs.model_fields]


def with_bandwidth(cluster: ClusterSpec, link: str, factor: float) -> ClusterSpec:
    """``cluster`` with ``link``'s bandwidth multiplied by ``factor`` (validated like a loaded preset)."""
    data = cluster.model_dump()
    data[link]["bandwidth_bytes_per_s"] *= factor
    return ClusterSpec.model_validate(data)


def moved_bytes(result: SimResult) -> float:
    """Bytes an epoch moves over PCIe and the network (all workers)."""
    return result.bytes_per_epoch["pcie"] + result.bytes_per_epoch["network"]


def test_every_strategy_has_a_case() -> None:
    assert {name for name, _ in CASES} == set(STRATEGIES)


@pytest.mark.parametrize("cluster", CLUSTERS)
@pytest.mark.parametrize("name, preset", CASES)
def test_more_bandwidth_is_never_slower(name: str, preset: str, cluster: str) -> None:
    spec = load_cluster(cluster)
    base = simulate(spec, preset, name)
    links = [link for link in LINKS if getattr(spec, link) is not None]
    assert len(links) == (4 if spec.nvlink is not None else 3)
    for link in links:
        faster = simulate(with_bandwidth(spec, link, BANDWIDTH_FACTOR), preset, name)
        assert faster.feasible == base.feasible, link
        if base.feasible:
            assert faster.epoch_time_s <= base.epoch_time_s * (1 + REL_TOL), (link, faster.epoch_time_s,
                                                                              base.epoch_time_s)


@pytest.mark.parametrize("cluster", CLUSTERS)
@pytest.mark.parametrize("name, preset", CACHE_CASES)
def test_more_cache_never_moves_more_bytes(name: str, preset: str, cluster: str) -> None:
    results = {f: simulate(cluster, preset, name, {"cache_fraction": f}) for f in CACHE_FRACTIONS}
    moved = {f: moved_bytes(r) for f, r in results.items() if r.feasible}  # a cache that does not fit moves nothing
    assert len(moved) >= 2, "at most one cache size fits"
    steps = list(moved.values())
    for fewer, more in itertools.pairwise(steps):
        assert more <= fewer * (1 + REL_TOL), moved


def test_simulator_imports_no_heavy_module() -> None:
    code = ("import sys; import gnnplan.simulator, gnnplan.simulator.api, gnnplan.simulator.strategies; "
            "print(' '.join(m for m in ('torch', 'dgl', 'optuna', 'gnnplan.executor') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == []
