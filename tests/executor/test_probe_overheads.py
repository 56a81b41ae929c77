"""The probe's fixed-cost measurements (:mod:`executor.probe_overheads`): hand-off and loop costs, the priors."""

from __future__ import annotations

import time

from gnnplan.executor import probe_overheads
from gnnplan.executor.sampling import TimedSampler

SLOW_SAMPLING_S = 0.2


class SlowSampler(TimedSampler):
    """A sampler process slowed by other load: every batch takes :data:`SLOW_SAMPLING_S` longer to sample
    (module-level, so the sampler process can unpickle it)."""

    def sample(self, g, seeds, key=None):  # type: ignore[no-untyped-def]
        time.sleep(SLOW_SAMPLING_S)
        return super().sample(g, seeds, key)


def test_handoff_and_loop_costs_are_measured_on_the_executors_paths() -> None:
    handoff = probe_overheads.sampler_handoff_s(2000, 8, (5, 5), 8, 5)
    loop = probe_overheads.iteration_overhead_s(50, 2)
    # a batch from a sampler process costs a fetched file descriptor per tensor (tens of us each); the loop's own
    # Python per iteration is microseconds
    assert handoff > 1e-4 and probe_overheads.MIN_FIXED_S <= loop < handoff


def test_a_batch_not_ready_when_asked_for_counts_from_the_end_of_its_sampling() -> None:
    # the trainer asks at once and every batch takes 0.2 s to sample: timed from the call, each next() would take
    # ~0.2 s; the hand-off itself (queue get and unpickling) is milliseconds, up to ~0.1 s when the hypervisor
    # steals this VM's cores (seen at 18% steal): the median of 5 stays below half a sampling
    handoff = probe_overheads.sampler_handoff_s(2000, 8, (5, 5), 8, 7, sampler=SlowSampler([5, 5]), wait_s=0.0)
    assert 0.0 < handoff < SLOW_SAMPLING_S / 2


def test_priors_repeat_the_measured_values_present() -> None:
    data = {"network": {"latency_s": 1e-4, "bandwidth_bytes_per_s": 1e9}, "gpu": {"is_host_cpu": True},
            "iteration_overhead_s": 2e-5}
    assert probe_overheads._field(data, "network.latency_s") == 1e-4
    assert probe_overheads._field(data, "gpu.is_host_cpu") is None  # not numeric
    assert probe_overheads._field(data, "host.sampler_handoff_s") is None  # absent
