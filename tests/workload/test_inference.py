"""The evaluation's inference blocks: exact counts on a hand-made graph, equality with the blocks the executor's
evaluator samples (DGL, all in-neighbours) on Cora, the card scaling rule's chunk, and the statistics cache."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.workload import inference, owners
from gnnplan.simulator.workload.datasets import load_dataset
from gnnplan.simulator.workload.inference import (
    CHUNK_VERTICES,
    InferenceStats,
    inference_at_size,
    inference_owners,
    measure_inference,
    proxy_chunk_vertices,
)

# In-neighbours: 0 <- {1, 2}, 1 <- {2}, 2 <- {3, 4}, 3 <- {0}, 4 <- {}, 5 <- {6}, 6 <- {5}.
EDGES = np.array([(1, 0), (2, 0), (2, 1), (3, 2), (4, 2), (0, 3), (6, 5), (5, 6)], dtype=np.int64)
SRC, DST = EDGES[:, 0], EDGES[:, 1]
OWNER = np.array([0, 0, 0, 0, 1, 1, 1], dtype=np.int64)


@pytest.fixture(scope="module")
def cora():  # type: ignore[no-untyped-def]
    return load_dataset("cora")


def _hand(chunk: int, owner: np.ndarray = OWNER, machines: int = 2, gpus: int = 1) -> InferenceStats:
    return measure_inference(SRC, DST, owner, machines, gpus, chunk_vertices=chunk)


def test_hand_made_graph_counts_the_busiest_ranks_chunks() -> None:
    # rank 0 (vertices 0-3) has 6 in-edges, rank 1 (4-6) 2: machine 0 keeps 6 of the 8. Chunks of 2: {0, 1}
    # reaches {0, 1, 2} over 3 edges, {2, 3} reaches {0, 2, 3, 4} over 3 edges: mean 3.5 sources, 1 of the 7
    # (vertex 4) on machine 1
    assert _hand(2) == InferenceStats(4.0, 2.0, 3.5, 3.0, 0.75, 1 / 7, 1 / 7)
    # chunks of 3: only the full one, {0, 1, 2}, reaching {0, 1, 2, 3, 4} over 5 edges
    assert _hand(3) == InferenceStats(4.0, 3.0, 5.0, 5.0, 0.75, 0.2, 0.2)
    # a chunk larger than the share: the share, every in-edge of it
    assert _hand(8) == InferenceStats(4.0, 4.0, 5.0, 6.0, 0.75, 0.2, 0.2)
    # one machine, two workers: numpy.array_split gives rank 0 vertices 0-3, the same busiest rank
    # (one machine: nothing remote; vertex 4 is rank 1's)
    assert _hand(2, np.zeros(7, dtype=np.int64), 1, 2) == InferenceStats(4.0, 2.0, 3.5, 3.0, 1.0, 0.0, 1 / 7)
    np.testing.assert_array_equal(inference_owners(OWNER, 2, 2), [0, 0, 1, 1, 2, 2, 3])


def test_bad_chunk_is_refused() -> None:
    with pytest.raises(ValueError, match="chunk_vertices"):
        measure_inference(SRC, DST, OWNER, 2, 1, chunk_vertices=0)


@pytest.mark.parametrize("machines,gpus,partitioner", [(2, 1, "metis"), (2, 2, "random"), (1, 3, "metis")])
def test_equals_the_blocks_the_evaluator_samples_on_cora(cora, machines: int, gpus: int,  # type: ignore[no-untyped-def]
                                                        partitioner: str) -> None:
    from gnnplan.executor.data import build_graph
    from gnnplan.executor.sampling import TimedSampler

    owner = owners.partition_owners("cora", machines, partitioner, 0, graph=cora)
    chunk = 300
    found = measure_inference(cora.src, cora.dst, owner, machines, gpus, chunk)
    rank_of = inference_owners(owner, machines, gpus)
    g, _ = build_graph(cora, "sage")
    sampler = TimedSampler([-1])
    per_rank = []
    for rank in range(machines * gpus):
        mine = np.flatnonzero(rank_of == rank)
        blocks = [sampler.sample(g, torch.from_numpy(mine[i:i + chunk]))
                  for i in range(0, len(mine) - chunk + 1, chunk)]
        sources = np.concatenate([b[0].numpy() for b in blocks])  # every chunk's sources, pooled
        per_rank.append((len(mine), np.mean([len(b[0]) for b in blocks]),
                         np.mean([b[2][0].num_edges() for b in blocks]),
                         np.mean(owner[sources] != rank // gpus), np.mean(rank_of[sources] != rank)))
    busiest = int(np.argmax(np.bincount(rank_of[cora.dst], minlength=len(per_rank))))
    vertices, src, edges, remote, other = per_rank[busiest]
    share = np.bincount(owner[cora.dst], minlength=machines).max() / cora.num_edges
    assert found == InferenceStats(float(vertices), float(chunk), pytest.approx(src), pytest.approx(edges),
                                   pytest.approx(share), pytest.approx(remote), pytest.approx(other))
    assert found.other_rank_fraction >= found.remote_fraction and (found.remote_fraction > 0) == (machines > 1)


def test_card_chunk_holds_the_cards_fraction() -> None:
    # 16384 of 111 M vertices on a 1 M-vertex proxy: 148 vertices; of a 100 k card on its 10 k proxy 1638, though
    # a 64-rank share of the card (1563) is smaller than a chunk: the rank is one chunk at both sizes
    assert proxy_chunk_vertices(111_059_956, 1_000_000) == round(CHUNK_VERTICES * 1e6 / 111_059_956)
    assert proxy_chunk_vertices(100_000, 10_000) == round(CHUNK_VERTICES / 10)
    assert proxy_chunk_vertices(10**12, 10) == 1
    assert InferenceStats(1.0, 2.0, 3.0, 4.0, 0.5).scaled(10.0) == InferenceStats(10.0, 20.0, 30.0, 40.0, 0.5)
    # the hand-made graph as the proxy of a 70-vertex card: a chunk of the card is 1638 of the proxy's vertices, so
    # rank 0's 4 are one chunk (its whole share: 5 sources, 6 edges), then everything x 10
    assert inference_at_size(SRC, DST, OWNER, 2, 1, card_vertices=70) == InferenceStats(40.0, 40.0, 50.0, 60.0,
                                                                                           0.75, 0.2, 0.2)
    assert inference_at_size(SRC, DST, OWNER, 2, 1) == measure_inference(SRC, DST, OWNER, 2, 1)


def test_a_card_at_its_proxys_size_measures_the_busiest_rank_in_one_chunk_as_the_graph_itself() -> None:
    # machine 0 holds 5 of the 7 vertices (and the most in-edges), more than a rank's mean share (ceil(7 / 2) = 4)
    # but less than a chunk: one chunk, as on the graph itself (a chunk capped at the mean share took two, and the
    # evaluation was priced twice)
    owner = np.array([0, 0, 0, 0, 0, 1, 1], dtype=np.int64)
    found = inference_at_size(SRC, DST, owner, 2, 1, card_vertices=7)
    assert found == measure_inference(SRC, DST, owner, 2, 1)
    assert found.rank_vertices == found.dst_vertices == 5.0


def test_statistics_are_cached_and_checked(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("GNNPLAN_CACHE", str(tmp_path / "cache"))
    first = inference.inference_stats("cora", 2, 1, "random")
    monkeypatch.setattr(inference, "load_dataset", lambda ref: pytest.fail("a warm call loaded the graph"))
    assert inference.inference_stats("cora", 2, 1, "random") == first
    for bad, match in (({"partitioner": "nope"}, "partitioner"), ({"num_machines": 0}, "num_machines")):
        args = {"num_machines": 2, "gpus_per_machine": 1, "partitioner": "random", **bad}
        with pytest.raises(SpecError, match=match):
            inference.inference_stats("cora", **args)
