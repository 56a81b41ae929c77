"""Two-level partitioning, Algorithm 4 and the transfer counts of the three dedup levels on hand-built toys, every
expected value worked out by hand below (brief §1.11: "build a comparable toy graph and check the three-stage
counting")."""

from __future__ import annotations

import numpy as np
import pytest

from gnnplan.executor.data import SELF_LOOP_ARCHS
from gnnplan.simulator.hardware.spec import load_cluster
from gnnplan.simulator.strategies.hongtu import chunks as ch
from gnnplan.simulator.strategies.hongtu import dedup
from gnnplan.simulator.workload.datasets import GraphData

# Toy graph: 8 vertices, GPU 0 owns 0-3, GPU 1 owns 4-7; edges u -> v besides the self-loops the training
# graph adds (and the loop 7 -> 7 given here, which is replaced by the added one).
EDGES = [(4, 0), (5, 1), (1, 0), (4, 2), (6, 3), (0, 3), (0, 4), (1, 5), (2, 4), (3, 6), (5, 7), (2, 7), (7, 7)]
OWNER = np.array([0, 0, 0, 0, 1, 1, 1, 1])
# In-degrees with self-loops: 3 2 2 3 | 3 2 2 3, so weights 1 + deg = 4 3 3 4 per partition, cut at half the
# total (7 of 14): chunks {0,1} {2,3} | {4,5} {6,7}, and their in-neighbour sets (self-loops included):
N = [[[0, 1, 4, 5], [0, 2, 3, 4, 6]], [[0, 1, 2, 4, 5], [2, 3, 5, 6, 7]]]


@pytest.fixture(scope="module")
def toy() -> list[list[ch.Chunk]]:
    src, dst = (np.array(x, dtype=np.int64) for x in zip(*EDGES))
    graph = GraphData("toy", 8, src, dst, np.zeros((8, 1), np.float32), np.zeros(8, np.int64),
                      np.arange(2), np.arange(0), np.arange(0), 2)
    csr = ch.training_csr(graph, "gcn")
    assert csr.in_degrees.tolist() == [3, 2, 2, 3, 3, 2, 2, 3]
    return ch.two_level_chunks(csr, OWNER, 2, 2)


def test_self_loop_rule_matches_the_executor() -> None:
    assert ch.SELF_LOOP_ARCHS == SELF_LOOP_ARCHS


def test_two_level_chunks_hold_all_in_edges(toy) -> None:  # type: ignore[no-untyped-def]
    assert [[c.dst.tolist() for c in part] for part in toy] == [[[0, 1], [2, 3]], [[4, 5], [6, 7]]]
    assert [[c.src.tolist() for c in part] for part in toy] == N
    assert [[c.num_edges for c in part] for part in toy] == [[5, 5], [5, 5]]
    assert ch.replication_factor(toy, 8) == 19 / 8


def test_eq4_volumes_19_12_8(toy) -> None:  # type: ignore[no-untyped-def]
    # V_ori = 4+5+5+5; TU_0 = {0,1,2,4,5}, TU_1 = {0,2,3,4,5,6,7}: V_+p2p = 5+7; V_+ru = 5 + |{3,6,7}|
    assert dedup.volumes(toy, OWNER) == dedup.Volumes(19, 12, 8)
    union, t = dedup.transition_sets(toy, OWNER)
    assert [u.tolist() for u in union] == [[0, 1, 2, 4, 5], [0, 2, 3, 4, 5, 6, 7]]
    assert [[x.tolist() for x in row] for row in t] == [[[0, 1, 2], [0, 2, 3]], [[4, 5], [4, 5, 6, 7]]]


def _field(counts: list[list[dedup.BatchCounts]], name: str) -> list[list[object]]:
    return [[getattr(c, name) for c in row] for row in counts]


def test_none_reads_every_neighbour_from_a_host(toy) -> None:  # type: ignore[no-untyped-def]
    one_machine = dedup.batch_counts(toy, OWNER, "none", gpus_per_machine=2)
    assert _field(one_machine, "load_rows") == [[4, 5], [5, 5]]  # 19 host rows, all local
    assert _field(one_machine, "pull_rows") == [[(0, 0)] * 2] * 2
    two_machines = dedup.batch_counts(toy, OWNER, "none", gpus_per_machine=1)
    # own rows from the local host, the rest from the owner's host: N_00 = {0,1 | 4,5}, N_01 = {0,2,3 | 4,6},
    # N_10 = {4,5 | 0,1,2}, N_11 = {5,6,7 | 2,3}
    assert _field(two_machines, "load_rows") == [[2, 3], [2, 3]]
    assert _field(two_machines, "pull_rows") == [[(0, 2), (0, 2)], [(3, 0), (2, 0)]]
    assert _field(two_machines, "push_rows") == _field(two_machines, "pull_rows")
    assert _field(two_machines, "flush_rows") == [[2, 3], [2, 3]]


def test_gpu_loads_transition_sets_and_pulls_from_peers(toy) -> None:  # type: ignore[no-untyped-def]
    counts = dedup.batch_counts(toy, OWNER, "gpu", gpus_per_machine=2)
    assert _field(counts, "load_rows") == [[3, 3], [2, 4]]  # |T_ij|: 12 = V_+p2p
    # N_00 ∩ T_10 = {4,5}, N_01 ∩ T_11 = {4,6}, N_10 ∩ T_00 = {0,1,2}, N_11 ∩ T_01 = {2,3}: 9 rows, more than
    # V_ori - V_+p2p = 7, since T_00 holds 2, which GPU 0 does not need in batch 0 (brief §2 caveat)
    assert _field(counts, "pull_rows") == [[(0, 2), (0, 2)], [(3, 0), (2, 0)]]
    assert _field(counts, "buffer_rows") == [[5, 5], [5, 6]]  # |T_ij ∪ N_ij|
    assert _field(counts, "flush_rows") == [[3, 3], [2, 4]]
    assert _field(counts, "reused_rows") == [[0, 0], [0, 0]]


def test_reuse_keeps_rows_of_the_previous_batch(toy) -> None:  # type: ignore[no-untyped-def]
    counts = dedup.batch_counts(toy, OWNER, "reuse", gpus_per_machine=2)
    # S_00 = {0,1,2,4,5}, S_01 = {0,2,3,4,6}: load T_01 \ S_00 = {3}; S_10 = {0,1,2,4,5}, S_11 = {2,...,7}: {6,7}
    assert _field(counts, "load_rows") == [[3, 1], [2, 2]]  # 8 = V_+ru
    assert _field(counts, "reused_rows") == [[0, 3], [0, 3]]  # {0,2,4} and {2,4,5}
    # pulls skip N_i,j-1: {4,6} \ N_00 = {6}; {2,3} \ N_10 = {3}
    assert _field(counts, "pull_rows") == [[(0, 2), (0, 1)], [(3, 0), (1, 0)]]
    # pushes are not deduplicated; gradients of T_ij ∩ T_i,j+1 stay: flush T_00 \ T_01 = {1}, T_10 \ T_11 = {}
    assert _field(counts, "push_rows") == [[(0, 2), (0, 2)], [(3, 0), (2, 0)]]
    assert _field(counts, "flush_rows") == [[1, 3], [0, 4]]


def _sets(sets: list[list[int]]) -> list[ch.Chunk]:
    return [ch.Chunk(np.array(s[:1], dtype=np.int64), np.array(s, dtype=np.int64), len(s)) for s in sets]


def test_algorithm_4_fills_batches_then_chains_them() -> None:
    a = _sets([[0, 1], [2, 3], [1, 4, 5]])
    b = _sets([[4, 5, 9], [0, 1, 8], [2, 3, 7]])
    owner = np.array([0, 0, 0, 0, 0, 0, 1, 1, 1, 1])
    # Phase 1: batch 0 (TU = {0,1}) takes b1 (2 shared), batch 1 ({2,3}) b2, batch 2 b0.
    # Phase 2: from batch 0 ({0,1,8}), batch 2 ({1,4,5,9}) shares 1 row, batch 1 ({2,3,7}) none: order 0, 2, 1.
    placement = dedup.reorganise([a, b], 10)
    assert placement == [[0, 2, 1], [1, 0, 2]]
    identity = dedup.volumes([a, b], owner)
    reorganised = dedup.volumes(dedup.placed([a, b], placement), owner)
    # identity: TU = {0,1,4,5,9}, {0,1,2,3,8}, {1,2,3,4,5,7}; reorganised: {0,1,8}, {1,4,5,9}, {2,3,7}
    assert identity == dedup.Volumes(16, 16, 11) and reorganised == dedup.Volumes(16, 10, 9)
    cluster = load_cluster("dgx-a100")
    assert dedup.communication_cost_s(cluster, reorganised, 512.0) < \
        dedup.communication_cost_s(cluster, identity, 512.0)
    # Eq. 4 on these volumes: 2 rows fewer over PCIe (11 -> 9), 6 more over NVLink (0 -> 6), 4 fewer reused (5 -> 1)
    # T_ru: a gather in GPU memory, each row read and written (2 bytes of traffic per gathered byte)
    gather = cluster.gpu.memory_bandwidth_bytes_per_s * cluster.efficiency.gather_fraction / 2
    assert cluster.nvlink is not None
    saved = 512.0 * (2 / cluster.pcie.bandwidth_bytes_per_s - 6 / cluster.nvlink.bandwidth_bytes_per_s + 4 / gather)
    assert dedup.communication_cost_s(cluster, identity, 512.0) - dedup.communication_cost_s(
        cluster, reorganised, 512.0) == pytest.approx(saved, rel=1e-9)


def test_eq4_prices_peer_traffic_like_the_host_link_without_nvlink() -> None:
    cl = load_cluster("dgx-a100")
    no_nvlink = cl.model_copy(update={"nvlink": None})
    vol = dedup.Volumes(100, 60, 40)
    # T_dd = T_hd without NVLink (brief §2): the P2P term costs as much per row as a host load
    per_row = dedup.communication_cost_s(no_nvlink, vol, 1e6) - dedup.communication_cost_s(
        no_nvlink, dedup.Volumes(60, 60, 40), 1e6)
    assert per_row == pytest.approx(40e6 / no_nvlink.pcie.bandwidth_bytes_per_s, rel=1e-6)
    assert dedup.communication_cost_s(cl, vol, 1e6) < dedup.communication_cost_s(no_nvlink, vol, 1e6)


def test_balanced_ranges_are_contiguous_and_balanced() -> None:
    weights = np.random.default_rng(0).integers(1, 50, 1000)
    parts = ch.balanced_ranges(weights, 7)
    assert (np.diff(parts) >= 0).all() and set(parts.tolist()) == set(range(7))
    load = np.bincount(parts, weights=weights)
    assert load.max() - load.min() <= 2 * weights.max()
