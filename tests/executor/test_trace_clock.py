"""Executor spans on a GPU end when their kernels end: ``now()`` synchronises the CUDA device once asked to
(issue 9, GPU-correct measurement); on the CPU it never does. Exercised on CPU with a stand-in synchronise."""

from __future__ import annotations

import pytest
import torch

from gnnplan.executor import trace


@pytest.fixture
def sync_calls(monkeypatch: pytest.MonkeyPatch) -> list[torch.device]:
    calls: list[torch.device] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(device))
    yield calls
    trace.synchronize_spans_on("cpu")


def test_cuda_device_makes_every_reading_wait_for_the_device(sync_calls: list[torch.device]) -> None:
    assert trace.synchronize_spans_on(torch.device("cuda", 1))
    t0 = trace.now()
    t1 = trace.now()
    assert t1 >= t0 and sync_calls == [torch.device("cuda", 1)] * 2


def test_cpu_device_reads_the_clock_only(sync_calls: list[torch.device]) -> None:
    assert not trace.synchronize_spans_on("cpu")
    trace.now()
    assert sync_calls == []


def test_process_group_on_gloo_does_not_synchronise(sync_calls: list[torch.device]) -> None:
    from gnnplan.executor import comm
    from gnnplan.executor.launch import free_port

    comm.init_process_group(0, 1, "127.0.0.1", free_port(), backend="gloo")
    try:
        trace.now()
        assert sync_calls == []
    finally:
        torch.distributed.destroy_process_group()
