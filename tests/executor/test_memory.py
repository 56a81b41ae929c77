"""Measured peak memory of a phase (executor.memory): the host peak is reset before each phase, a machine's ranks
add up, phases and epochs combine per memory, and on CUDA the allocator's peak plus the device memory outside it is
read (the CUDA path runs here on the CPU, with torch.cuda's calls replaced by recorders of what they are asked)."""

from __future__ import annotations

import mmap
import os

import numpy as np
import pytest
import torch

from gnnplan.executor import memory
from gnnplan.executor.memory import EpochPeak, children_private_bytes, larger_peaks, machine_peaks

MB = 1 << 20


def test_a_machines_ranks_add_up_and_the_largest_machine_is_the_peak() -> None:
    host = [100.0, 50.0, 70.0, 90.0]
    assert machine_peaks(host, [None] * 4, 2) == {"gpu": None, "host": 160.0}  # machines {0, 1} and {2, 3}
    assert machine_peaks(host, [None] * 4, 1) == {"gpu": None, "host": 100.0}
    assert machine_peaks(host, [3.0, None, 7.0, 5.0], 4) == {"gpu": 7.0, "host": 310.0}
    with pytest.raises(ValueError, match="machine_peaks"):
        machine_peaks(host, [None], 1)


def test_the_larger_peak_is_taken_per_memory_and_none_only_where_no_value_is() -> None:
    training, evaluation = {"gpu": 5.0, "host": 300.0}, {"gpu": 9.0, "host": 200.0}
    assert larger_peaks([training, evaluation]) == {"gpu": 9.0, "host": 300.0}
    assert larger_peaks([{"gpu": None, "host": 1.0}, {"gpu": None, "host": 2.0}]) == {"gpu": None, "host": 2.0}
    assert larger_peaks([{"gpu": None, "host": 4.0}, {"gpu": 3.0}]) == {"gpu": 3.0, "host": 4.0}
    assert larger_peaks([]) == {"gpu": None, "host": None}


def test_the_host_peak_holds_what_the_epoch_allocated_and_is_reset_before_the_next() -> None:
    meter = EpochPeak(torch.device("cpu"))
    meter.begin()
    quiet, device = meter.end()
    assert meter.reset and device is None
    meter.begin()
    # 64 MiB of fresh anonymous pages, every page touched, unmapped before the epoch ends (an mmap, not a malloc:
    # the allocator could serve a malloc from heap pages earlier tests left resident, and the peak would not move)
    block = mmap.mmap(-1, 64 * MB)
    for offset in range(0, 64 * MB, mmap.PAGESIZE):
        block[offset] = 1
    block.close()
    busy, _ = meter.end()
    assert busy >= quiet + 60 * MB
    meter.begin()  # the next epoch starts from what is resident now, without the freed block
    after, _ = meter.end()
    assert after < busy - 60 * MB


def test_without_a_resettable_peak_the_lifetime_peak_is_reported(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(memory, "CLEAR_REFS", tmp_path / "missing" / "clear_refs")
    monkeypatch.setattr(memory, "STATUS", tmp_path / "missing" / "status")
    meter = EpochPeak(torch.device("cpu"))
    meter.begin()
    host, _ = meter.end()
    assert not meter.reset and host > 0  # ru_maxrss


def test_on_cuda_the_allocators_peak_and_what_it_does_not_hold_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, torch.device]] = []
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda d: calls.append(("reset", d)))
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda d: calls.append(("peak", d)) or 5 * MB)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda d: calls.append(("now", d)) or 3 * MB)
    # 16 GB device, 800 MB in use at the end: 3 MB of it the allocator's, 797 MB context, workspaces, NCCL
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda d: calls.append(("info", d)) or (16000 * MB - 800 * MB,
                                                                                            16000 * MB))
    gpu = torch.device("cuda", 1)
    meter = EpochPeak(gpu)
    meter.begin()
    host, device = meter.end()
    assert sorted(calls) == sorted([("reset", gpu), ("info", gpu), ("now", gpu), ("peak", gpu)])
    assert device == 5 * MB + 797 * MB and host > 0


def test_a_child_process_s_private_memory_is_counted_and_its_shared_pages_are_not() -> None:
    shared = np.ones(64 * MB // 8)  # touched before the fork: shared with the child copy-on-write
    before = children_private_bytes()
    ready, release = os.pipe(), os.pipe()
    pid = os.fork()
    if pid == 0:  # the child (a sampler process): reads the shared array, writes 32 MiB of its own
        try:
            os.close(ready[0])
            os.close(release[1])
            own = np.full(32 * MB // 8, float(shared[0]))
            os.write(ready[1], b"x")
            os.read(release[0], 1)
            del own
        finally:
            os._exit(0)
    os.close(ready[1])  # so that the read below ends (empty) if the child dies before writing
    os.close(release[0])
    try:
        assert os.read(ready[0], 1) == b"x"
        held = children_private_bytes() - before
        assert 32 * MB <= held < 60 * MB  # its own 32 MiB and some stack and heap, not the 64 MiB it shares
    finally:
        os.write(release[1], b"x")
        os.waitpid(pid, 0)
        os.close(ready[0])
        os.close(release[1])


@pytest.mark.parametrize(("counts_shared", "in_step", "reads", "subtracted"),
                         [(True, False, 0, False), (False, False, 1, True), (True, True, 1, False),
                          (False, True, 1, True)])
def test_the_ranks_of_a_machine_read_their_shared_pages_in_step(monkeypatch: pytest.MonkeyPatch, counts_shared: bool,
                                                                in_step: bool, reads: int, subtracted: bool) -> None:
    """The shared objects' resident bytes (a /proc/self/smaps pass) are left out of a peak by every rank but the
    machine's local rank 0, and on a machine of several ranks read by all of them (local rank 0 discarding it),
    so no rank's phase starts later than its machine mates' for it."""
    calls: list[int] = []
    monkeypatch.setattr(memory, "peak_resident_bytes", lambda: 500 * MB)
    monkeypatch.setattr(memory, "children_private_bytes", lambda: 0)
    monkeypatch.setattr(memory, "resident_shared_bytes", lambda: calls.append(1) or 200 * MB)
    meter = EpochPeak(torch.device("cpu"), counts_shared=counts_shared, in_step=in_step)
    host, _ = meter.end()
    assert len(calls) == reads and host == (300 if subtracted else 500) * MB
