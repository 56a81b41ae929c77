"""The probe's fixed-cost measurements (:mod:`executor.probe_overheads`): hand-off and loop costs, the priors."""

from __future__ import annotations

from gnnplan.executor import probe_overheads


def test_handoff_and_loop_costs_are_measured_on_the_executors_paths() -> None:
    handoff = probe_overheads.sampler_handoff_s(2000, 8, (5, 5), 8, 5)
    loop = probe_overheads.iteration_overhead_s(50, 2)
    # a batch from a sampler process costs a fetched file descriptor per tensor (tens of us each); the loop's own
    # Python per iteration is microseconds
    assert handoff > 1e-4 and probe_overheads.MIN_FIXED_S <= loop < handoff


def test_priors_repeat_the_measured_values_present() -> None:
    data = {"network": {"latency_s": 1e-4, "bandwidth_bytes_per_s": 1e9}, "gpu": {"is_host_cpu": True},
            "iteration_overhead_s": 2e-5}
    assert probe_overheads._field(data, "network.latency_s") == 1e-4
    assert probe_overheads._field(data, "gpu.is_host_cpu") is None  # not numeric
    assert probe_overheads._field(data, "host.sampler_handoff_s") is None  # absent
