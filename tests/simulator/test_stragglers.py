"""Stragglers at synchronous collectives (cluster field ``jitter_s``): the engine's barriers release at the expected
maximum of noisy arrivals, simulations with a representative machine still equal the full ones, and the estimate
of ``jitter_s`` from arrival times (simulator.jitter) recovers a known value."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sim_fixtures import RMAT_SUMMARY, assert_same, make_stats, represented, shaped

from gnnplan.simulator import symmetry
from gnnplan.simulator.engine import Engine, Rendezvous
from gnnplan.simulator.jitter import Call, estimate_jitter
from gnnplan.simulator.order_stats import expected_max
from gnnplan.simulator.strategies import dp
from gnnplan.simulator.strategies.base import SimContext
from gnnplan.simulator.workload.spec import load_workload

E2 = 1 / math.sqrt(math.pi)
"""Expected maximum of two standard normals."""


def _barriers(jitter_s: float, works: list[list[float]], copies: int = 1) -> list[float]:
    """Release times of consecutive barriers, party p working ``works[p][k]`` seconds before barrier k."""
    eng = Engine()
    rz = Rendezvous(eng, len(works), jitter_s, copies)
    released: list[float] = []

    def party(p: int):  # type: ignore[no-untyped-def]
        for k, seconds in enumerate(works[p]):
            yield eng.timeout(seconds)
            yield rz.wait(k, p)
            if p == 0:
                released.append(eng.now)

    for p in range(len(works)):
        eng.process(party(p))
    eng.run()
    return released


def test_without_jitter_a_barrier_releases_at_the_last_arrival() -> None:
    assert _barriers(0.0, [[0.004, 0.001], [0.002, 0.003]]) == pytest.approx([0.004, 0.007], abs=1e-15)


def test_equal_parties_wait_e2_sqrt_v_t_after_the_work_since_the_last_release() -> None:
    v = 1e-4
    first = 0.004 + E2 * math.sqrt(v * 0.004)
    second = first + 0.001 + E2 * math.sqrt(v * 0.001)  # T counts from the first barrier's release
    assert _barriers(v, [[0.004, 0.001], [0.004, 0.001]]) == pytest.approx([first, second], rel=1e-9)


def test_unequal_parties_release_at_the_expected_maximum() -> None:
    v = 1e-4
    want = expected_max([0.004, 0.002], [math.sqrt(v * 0.004), math.sqrt(v * 0.002)])
    assert want > 0.004
    assert _barriers(v, [[0.004], [0.002]]) == pytest.approx([want], rel=1e-12)


def test_each_party_counts_for_its_copies() -> None:
    v, t = 1e-4, 0.003
    e8 = expected_max([0.0] * 8, [1.0] * 8)
    assert _barriers(v, [[t], [t]], copies=4) == pytest.approx([t + e8 * math.sqrt(v * t)], rel=1e-9)


def _ctx(cluster) -> SimContext:  # type: ignore[no-untyped-def]
    stats = make_stats(cluster.num_machines, cluster.gpus_per_machine, 512 // cluster.num_gpus)
    return SimContext(cluster, load_workload("rmat100k-sage"), stats, RMAT_SUMMARY, 512)


def test_dp_all_reduces_wait_for_the_expected_straggler() -> None:
    """One machine of two GPUs: the gradient all-reduce is dp's only barrier, so every all-reduce span is the
    barrier's straggler wait plus the jitter-free transfer, and that wait is e_2 sqrt(v T), T from the previous
    release to the arrival (exact, from the spans of the simulated window's consecutive iterations; the last,
    partial iteration is simulated right after them and its spans placed at the epoch's end)."""
    v = 2e-5
    base = shaped("dgx-a100", 1, 2)
    plain = dp.simulate(_ctx(base), dp.Knobs())
    noisy = dp.simulate(_ctx(base.model_copy(update={"jitter_s": v})), dp.Knobs())
    transfer = [s.dur_s for s in sorted(plain.spans, key=lambda s: s.start_s)
                if s.phase == "all_reduce" and s.rank == 0]
    spans = sorted((s for s in noisy.spans if s.phase == "all_reduce" and s.rank == 0), key=lambda s: s.start_s)
    consecutive = [i for i, s in enumerate(spans) if s.iteration == i]
    assert len(spans) == len(transfer) and len(consecutive) >= 10
    release = 0.0
    for span, seconds in zip(spans[:len(consecutive)], transfer):
        wait = span.dur_s - seconds
        assert wait == pytest.approx(E2 * math.sqrt(v * (span.start_s - release)), rel=1e-6)
        release = span.start_s + wait
    assert noisy.epoch_time_s > plain.epoch_time_s


def test_representative_machine_equals_the_full_simulation_with_stragglers() -> None:
    cluster = shaped("4x-a100-10gbe", 3, 2).model_copy(update={"jitter_s": 3e-5})
    ctx = _ctx(cluster)
    fast = dp.simulate(ctx, dp.Knobs(cache_fraction=0.1))
    with symmetry.disabled():
        full = dp.simulate(ctx, dp.Knobs(cache_fraction=0.1))
    assert represented(fast) == {3} and represented(full) == {1}
    assert_same(fast, full, rel=1e-9)
    with_none = dp.simulate(_ctx(cluster.model_copy(update={"jitter_s": 0.0})), dp.Knobs(cache_fraction=0.1))
    assert fast.epoch_time_s > with_none.epoch_time_s


# ------------------------------------------------------------------------------------------ the estimate

def _calls(v: float, offsets: dict[int, float], num_rounds: int, seed: int = 0) -> list[Call]:
    """Arrivals of 4 ranks drawn from the model: each call site k works T_k, each rank arrives sqrt(v T_k) Z
    late plus its systematic offset at that site."""
    rng = np.random.default_rng(seed)
    works = (0.001, 0.004, 0.016)
    calls, release = [], 0.0
    for i in range(num_rounds * len(works)):
        site, t = i % len(works), works[i % len(works)]
        arrivals = {r: release + t + offsets.get(r, 0.0) * (site == 1) + math.sqrt(v * t) * rng.standard_normal()
                    for r in range(4)}
        calls.append(Call(site, arrivals))
        release = max(arrivals.values())
    return calls


def test_estimate_recovers_the_noise_and_ignores_systematic_lateness() -> None:
    v = 4e-5
    fit = estimate_jitter(_calls(v, {2: 0.003}, 400))
    assert fit is not None and fit.num_calls == 3 * 400 - 1  # every rank's first call has no previous release
    assert fit.value_s == pytest.approx(v, rel=0.1)
    assert fit.low_s < fit.value_s < fit.high_s
    still = estimate_jitter(_calls(0.0, {2: 0.003}, 50))  # a rank always late at one site: not noise
    assert still is not None and still.value_s == pytest.approx(0.0, abs=1e-18)


def test_estimate_needs_two_ranks_and_enough_calls_per_site() -> None:
    assert estimate_jitter([Call(0, {0: float(i)}) for i in range(20)]) is None
    assert estimate_jitter(_calls(1e-5, {}, 3)) is None  # 3 calls per site (fewer than MIN_CALLS_PER_SITE)
