"""The probe's collective measurements (:mod:`executor.probe_collectives`, :mod:`executor.probe_io`): what each
subtracts, the rank program's parts, the DDP bucket from the last launch, and the timed calls' shapes."""

from __future__ import annotations

from typing import Any

import pytest

from gnnplan.executor import launch, probe_collectives


@pytest.mark.parametrize(("one_way", "reduce", "expected"),
                         [(2e-4, 5e-4, 5e-4 - 2 * (1e-4 + 5e-6)), (2e-4, 1.5e-4, 1e-6)])
def test_a_collective_costs_what_its_messages_do_not(monkeypatch: pytest.MonkeyPatch, one_way: float, reduce: float,
                                                   expected: float) -> None:
    def spawn(fn: Any, nprocs: int, args: tuple[Any, ...]) -> tuple[float, ...]:
        assert (fn, nprocs, args) == (probe_collectives._collective_rank, 2, (5,))
        return one_way, reduce, 4e-4, 3e-3, 1e-3, 3e-5, 2e-4, 237

    monkeypatch.setattr(launch, "spawn", spawn)
    # the ring's 2 messages are charged at the modelled latency (1e-4 s), not at the measured one-way time, and
    # each carries half of the all-reduce's 1 KiB at the modelled rate (512 B / 1.024e8 B/s = 5e-6 s)
    costs = probe_collectives.per_collective_s(5, 1e-4, 1.024e8)
    assert costs.per_collective_s == pytest.approx(expected, rel=1e-12)  # at least MIN_FIXED_S
    assert (costs.one_way_s, costs.all_reduce_s, costs.all_to_all_s) == (one_way, reduce, 4e-4)
    # the all-to-all's one message: the latency and the half of its 1 KiB it sends
    assert costs.per_all_to_all_s == pytest.approx(4e-4 - (1e-4 + 5e-6), rel=1e-12)
    assert costs.ddp_per_bucket_s == pytest.approx(2e-3, rel=1e-12)  # bucket from the last launch - all-reduce
    assert (costs.jitter_s, costs.jitter_wait_s, costs.jitter_calls) == (3e-5, 2e-4, 237)  # passed through


def test_the_all_reduce_is_timed_after_compute_as_between_emulated_machines(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rank program's all-reduce and all-to-all times are :func:`executor.probe_io.collective_means_s`'s (the
    mean call after compute, as ``probe --emulate`` measures it), not a median of back-to-back calls; the round
    trip stays a median of its own rounds."""
    from types import SimpleNamespace

    from gnnplan.executor import comm

    calls: list[str] = []
    monkeypatch.setattr(comm, "barrier", lambda: None)
    monkeypatch.setattr(comm, "send", lambda buf, peer: calls.append(f"send {peer}"))
    monkeypatch.setattr(comm, "recv", lambda buf, peer: calls.append(f"recv {peer}"))
    monkeypatch.setattr(probe_collectives, "collective_means_s", lambda: (4.2e-4, 2e-4))
    monkeypatch.setattr(probe_collectives, "_ddp_bucket_times", lambda repeats: (3e-3, 1e-3))
    monkeypatch.setattr(probe_collectives, "straggler_jitter", lambda: (3e-5, 2e-4, 237))
    one_way, reduce, exchange, ddp, flat, *jitter = probe_collectives._collective_rank(SimpleNamespace(rank=0), None, 4)
    assert (reduce, exchange) == (4.2e-4, 2e-4) and (ddp, flat) == (3e-3, 1e-3) and jitter == [3e-5, 2e-4, 237]
    assert calls == ["send 1", "recv 1"] * (4 + 3) and one_way >= 0  # three warm-up round trips


def test_ddp_bucket_time_is_measured_on_the_executors_ddp_path() -> None:
    """Two real gloo processes: a DDP bucket's launch-to-return time and a plain all-reduce of its bytes, both
    positive; the returned DDP cost is their difference (at least MIN_FIXED_S). The stragglers' measurement
    fits every timed call (:func:`executor.probe_io.straggler_jitter`)."""
    from gnnplan.executor.probe_io import JITTER_CALLS

    one_way, reduce, exchange, ddp, flat, jitter, wait, calls = launch.spawn(probe_collectives._collective_rank, 2,
                                                                           (3,))
    assert min(one_way, reduce, exchange, ddp, flat) > 0
    assert calls == JITTER_CALLS and jitter >= 0 and wait >= 0
    assert probe_collectives.bucket_bytes() == 4 * (1433 * 128 + 128 + 128 * 7 + 7)


def test_ddp_bucket_time_starts_at_the_last_ranks_launch() -> None:
    """Rank 1 starts each backward 40 ms late: rank 0's bucket then waits 40 ms for it, a wait the simulator's
    barrier charges, so the reducer's cost is timed from the last launch and stays far below the delay (timed from
    rank 0's own launch it was at least 40 ms)."""
    from executor_workers import late_rank_ddp_bucket

    bucket, flat = launch.spawn(late_rank_ddp_bucket, 2, (0.04, 3))
    assert 0 < bucket < 0.02 and flat > 0


def test_the_timed_all_reduce_has_many_elements_per_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    """:func:`executor.probe_io.collective_times_s` times a 1 KiB float32 all-reduce (128 elements per rank of two),
    not a one-element one (several times faster than any larger call here), each call after the busy loop, three
    warm-ups untimed."""
    import torch

    from gnnplan.executor import comm, probe_io

    seen: list[tuple[int, torch.dtype]] = []
    busy: list[float] = []
    monkeypatch.setattr(comm, "barrier", lambda: None)
    monkeypatch.setattr(comm, "all_reduce_", lambda t: seen.append((t.numel(), t.dtype)))
    monkeypatch.setattr(probe_io, "_busy_s", busy.append)
    assert len(probe_io.collective_times_s(7)) == 7
    assert seen == [(256, torch.float32)] * 10 and busy == [probe_io.COLLECTIVE_BUSY_S] * 10
    assert probe_io.COLLECTIVE_BYTES == 1024


def test_the_timed_all_to_all_sends_an_equal_share_to_every_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``all_to_all`` the timed call is :func:`executor.comm.all_to_all_single` of the same 256 float32
    elements, split equally over the ranks (here 2: 128 to each), after the busy loop, three warm-ups untimed."""
    from gnnplan.executor import comm, probe_io

    seen: list[tuple[int, list[int], list[int]]] = []
    busy: list[float] = []
    monkeypatch.setattr(comm, "barrier", lambda: None)
    monkeypatch.setattr(comm, "world_size", lambda: 2)
    monkeypatch.setattr(comm, "all_reduce_", lambda t: pytest.fail("an all-reduce was timed"))
    monkeypatch.setattr(comm, "all_to_all_single",
                        lambda out, inp, out_splits, in_splits: seen.append((inp.numel(), out_splits, in_splits)))
    monkeypatch.setattr(probe_io, "_busy_s", busy.append)
    assert len(probe_io.collective_times_s(5, all_to_all=True)) == 5
    assert seen == [(256, [128, 128], [128, 128])] * 8 and busy == [probe_io.COLLECTIVE_BUSY_S] * 8


def test_collective_means_alternate_blocks_and_trim_over_all_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """:func:`executor.probe_io.collective_means_s` times the all-reduce and the all-to-all in alternating blocks
    (a slow period falls on both) and trims 5% at each end over all of a kind's calls, not block by block: here
    the all-reduce's third block is slow (10 ms a call against 1 ms), and the mean over the 4 x 10 calls keeps it,
    trimming only the two slowest and two fastest calls (a per-block trim would drop nothing of a 10-call block,
    and the old one-block probe saw 1 ms or 10 ms depending on the block)."""
    import scipy.stats

    from gnnplan.executor import probe_io

    order: list[str] = []

    def times(repeats: int, all_to_all: bool = False) -> list[float]:
        order.append("all_to_all" if all_to_all else "all_reduce")
        block = sum(k == "all_reduce" for k in order)
        return [0.5e-3 + 1e-5 * i for i in range(repeats)] if all_to_all else \
            [(10e-3 if block == 3 else 1e-3) + 1e-6 * i for i in range(repeats)]

    monkeypatch.setattr(probe_io, "collective_times_s", times)
    reduce, exchange = probe_io.collective_means_s(4, 10)
    assert order == ["all_reduce", "all_to_all"] * 4
    calls = [(10e-3 if b == 2 else 1e-3) + 1e-6 * i for b in range(4) for i in range(10)]
    assert reduce == pytest.approx(float(scipy.stats.trim_mean(calls, 0.05)), rel=1e-12)
    assert 3e-3 < reduce < 3.3e-3  # the slow block's 10 of 40 calls, 2 of them trimmed
    assert exchange == pytest.approx(0.5e-3 + 4.5e-5, rel=1e-12)
    with pytest.raises(ValueError, match="blocks and repeats"):
        probe_io.collective_means_s(0, 10)
