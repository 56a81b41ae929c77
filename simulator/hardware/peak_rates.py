"""Whether a cluster prices compute at datasheet peaks, and which presets carry achieved rates for its GPU.

A cluster with no achieved-rate field (``gpu.sparse_flops_per_s`` unset, ``gpu.kernel_overhead_s`` 0, every
``efficiency`` fraction at its default 1) prices every kernel at the roofline of the datasheet peaks, so compute
looks nearly free next to communication and the strategy that moves least wins (README, "Presets"). The catalogue's
presets carry achieved rates; ``dgx-a100`` and ``4x-a100-10gbe``, the examples DESIGN.md names, keep their datasheet
rates. Measured (2026-11-30, cora-sage, dp, defaults): ``dgx-a100`` 0.45 ms per epoch, ``8x-a100-nvswitch`` (the same
DGX A100 with achieved rates) 1.14 ms; cora-gcn-full, neutronstar over hongtu 7.8x on the first, 3.2x on the
second (9.6x and 1.76x before GCN was priced as the executor's ``GraphConv(norm="none")``, the same day).
"""

from __future__ import annotations

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.spec import ClusterSpec, EfficiencySpec, load_cluster, preset_names


def at_peak_rates(cluster: ClusterSpec) -> bool:
    """True when ``cluster`` sets none of the achieved-rate fields (module docstring)."""
    return (cluster.gpu.sparse_flops_per_s is None and cluster.gpu.kernel_overhead_s == 0
            and cluster.efficiency == EfficiencySpec())


def achieved_alternatives(cluster: ClusterSpec) -> list[str]:
    """The presets with the same GPU model that carry achieved rates (names, sorted); a preset that fails to load
    is skipped."""
    out = []
    for name in preset_names():
        try:
            other = load_cluster(name)
        except SpecError:
            continue
        if other.gpu.model == cluster.gpu.model and not at_peak_rates(other):
            out.append(name)
    return sorted(out)


def peak_rates_caveat(cluster: ClusterSpec) -> str | None:
    """One sentence for a cluster priced at datasheet peaks (None for one with achieved rates)."""
    if not at_peak_rates(cluster):
        return None
    others = achieved_alternatives(cluster)
    alt = (f"; presets of the same GPU with achieved rates: {', '.join(others)}" if others else
           "; gnnplan calibrate fits them to a run's trace")
    return (f"cluster {cluster.name} prices compute at datasheet peaks (no achieved GEMM or memory efficiency, "
            f"aggregation rate or per-kernel cost), where compute looks nearly free next to communication{alt}")
