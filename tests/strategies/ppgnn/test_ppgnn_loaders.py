"""Loaders produce bit-identical batches for the same order, whatever the loader and the placement; the
orders of random and chunk reshuffling; worker splits."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from gnnplan.executor.strategies.ppgnn.loaders import (
    LOADERS,
    PLACEMENTS,
    BaselineLoader,
    DoubleBufferLoader,
    FusedLoader,
    HopSource,
    contiguous_runs,
    epoch_order,
    make_loader,
    worker_batches,
)
from gnnplan.executor.strategies.ppgnn.preprop import preprocess
from gnnplan.simulator.workload.datasets import GraphData

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def files(tmp_path_factory):  # type: ignore[no-untyped-def]
    """A random graph with 300 labelled rows of 7 features, 3 hops stored."""
    rng = np.random.default_rng(0)
    n = 400
    src, dst = rng.integers(0, n, 2000), rng.integers(0, n, 2000)
    order = rng.permutation(n)
    g = GraphData("rand", n, src, dst, rng.standard_normal((n, 7), dtype=np.float32), rng.integers(0, 3, n),
                  order[:200], order[200:250], order[250:300], 3)
    return preprocess(g, g.features, 3, tmp_path_factory.mktemp("hops"))


def load_all(files, placement: str, kind: str, batches: list[np.ndarray], hops=(0, 1, 2, 3)) -> list:  # type: ignore[no-untyped-def]
    source = HopSource(files, list(hops), placement, CPU)
    loader = make_loader(kind, source, max(len(b) for b in batches), "chunk" if kind == "fused_runs" else "random",
                         num_workers=2) if kind != "fused_runs" else FusedLoader(source, 64, runs=True)
    try:
        out = [(lb.rows.copy(), [x.clone() for x in lb.xs], lb.nbytes) for lb in loader.batches(batches)]
    finally:
        loader.close()
        source.close()
    return out


@pytest.mark.parametrize("reshuffle", ["random", "chunk"])
def test_all_loaders_and_placements_give_identical_batches(files, reshuffle: str) -> None:  # type: ignore[no-untyped-def]
    order = epoch_order(files.num_train, reshuffle, 16, seed=3, epoch=1)
    batches, _ = worker_batches(order, 64, 0, 1)
    expected = [np.stack([files.load(r)[b] for r in range(4)]) for b in batches]
    kinds = (*LOADERS, "fused_runs")
    for placement in PLACEMENTS:
        for kind in kinds:
            got = load_all(files, placement, kind, batches)
            assert len(got) == len(batches)
            for (rows, xs, nbytes), want, b in zip(got, expected, batches):
                np.testing.assert_array_equal(rows, b)
                assert nbytes == len(b) * 4 * 7 * 4
                np.testing.assert_array_equal(torch.stack(xs).numpy(), want, err_msg=f"{placement} {kind}")


def test_sgc_reads_only_the_last_hop(files) -> None:  # type: ignore[no-untyped-def]
    batches = [np.array([5, 1, 9]), np.array([], dtype=np.int64), np.array([2])]
    for kind in LOADERS:
        got = load_all(files, "ssd", kind, batches, hops=(3,))
        assert [len(xs) for _, xs, _ in got] == [1, 1, 1]
        for (rows, xs, _), b in zip(got, batches):
            np.testing.assert_array_equal(xs[0].numpy(), files.load(3)[b])


def test_request_counts(files) -> None:  # type: ignore[no-untyped-def]
    rows = np.array([10, 11, 12, 40, 41, 7])  # three runs
    source = HopSource(files, [0, 1], "host", CPU)
    assert FusedLoader(source, 8).load(rows).num_requests == 2  # one index operation per matrix
    assert FusedLoader(source, 8, runs=True).load(rows).num_requests == 6  # runs x matrices
    assert next(BaselineLoader(source, 8, num_workers=0).batches([rows])).num_requests == 12  # rows x matrices


def test_double_buffer_keeps_each_batch_until_the_next_is_requested(files) -> None:  # type: ignore[no-untyped-def]
    source = HopSource(files, [0], "host", CPU)
    loader = DoubleBufferLoader(FusedLoader(source, 4, num_slots=2))
    batches = [np.arange(i, i + 4) for i in range(0, 40, 4)]
    for lb, b in zip(loader.batches(batches), batches):
        before = lb.xs[0].clone()
        time.sleep(0.02)  # releases the GIL: the producer would run ahead and overwrite the slot if it could
        torch.testing.assert_close(lb.xs[0], before)
        np.testing.assert_array_equal(lb.xs[0].numpy(), files.load(0)[b])


def test_double_buffer_reraises_producer_errors(files) -> None:  # type: ignore[no-untyped-def]
    source = HopSource(files, [0], "host", CPU)
    loader = DoubleBufferLoader(FusedLoader(source, 4, num_slots=2))
    with pytest.raises(IndexError):
        list(loader.batches([np.arange(4), np.array([files.num_rows + 5])]))


def test_drop_page_cache_keeps_contents(files) -> None:  # type: ignore[no-untyped-def]
    source = HopSource(files, [2], "ssd", CPU)
    loader = FusedLoader(source, 8, runs=True)
    first = loader.load(np.arange(8)).xs[0].clone()
    source.drop_page_cache()
    torch.testing.assert_close(loader.load(np.arange(8)).xs[0], first, rtol=0, atol=0)
    loader.close()
    source.close()


def test_random_order_is_a_seeded_permutation() -> None:
    a = epoch_order(100, "random", 1, seed=0, epoch=0)
    assert sorted(a.tolist()) == list(range(100))
    np.testing.assert_array_equal(a, epoch_order(100, "random", 1, seed=0, epoch=0))
    assert not np.array_equal(a, epoch_order(100, "random", 1, seed=0, epoch=1))


def test_chunk_order_permutes_contiguous_chunks() -> None:
    order = epoch_order(103, "chunk", 10, seed=1, epoch=2)
    assert sorted(order.tolist()) == list(range(103))
    pos, starts = 0, []
    while pos < len(order):  # eleven chunks of 10 rows in storage order, the last one short
        start = int(order[pos])
        size = min(10, 103 - start)
        assert start % 10 == 0
        np.testing.assert_array_equal(order[pos:pos + size], np.arange(start, start + size))
        pos, starts = pos + size, starts + [start]
    assert sorted(starts) == list(range(0, 103, 10)) and starts != sorted(starts)
    np.testing.assert_array_equal(epoch_order(7, "chunk", 1, seed=0, epoch=0).size, 7)
    with pytest.raises(ValueError, match="reshuffle"):
        epoch_order(7, "blocks", 1, 0, 0)


def test_worker_batches_split_every_global_batch() -> None:
    order = np.arange(23)
    parts = [worker_batches(order, 10, r, 3) for r in range(3)]
    sizes = parts[0][1]
    assert sizes == [10, 10, 3]
    for i, size in enumerate(sizes):
        joined = np.concatenate([p[0][i] for p in parts])
        np.testing.assert_array_equal(joined, order[i * 10:i * 10 + size])  # contiguous parts in rank order
    assert [len(p[0][2]) for p in parts] == [1, 1, 1]
    assert [len(b) for b in worker_batches(np.arange(2), 2, 0, 3)[0]] == [1]
    assert [len(b) for b in worker_batches(np.arange(2), 2, 2, 3)[0]] == [0]


def test_contiguous_runs() -> None:
    firsts, lengths = contiguous_runs(np.array([4, 5, 6, 1, 9, 10]))
    assert firsts.tolist() == [4, 1, 9] and lengths.tolist() == [3, 1, 2]
    assert contiguous_runs(np.array([], dtype=np.int64))[0].size == 0


def test_unknown_placement_and_loader(files) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="placement"):
        HopSource(files, [0], "tape", CPU)
    with pytest.raises(ValueError, match="loader"):
        make_loader("magic", HopSource(files, [0], "host", CPU), 4)


@pytest.mark.parametrize("direct", [True, False])
def test_direct_reader_reads_any_byte_range(tmp_path, monkeypatch, direct: bool) -> None:  # type: ignore[no-untyped-def]
    from gnnplan.executor.strategies.ppgnn.files import DirectReader

    if not direct:
        monkeypatch.delattr("os.O_DIRECT", raising=False)  # platforms without O_DIRECT read buffered
    data = np.random.default_rng(0).integers(0, 256, 3 * 4096 + 100, dtype=np.uint8)
    path = tmp_path / "blob"
    path.write_bytes(data.tobytes())
    reader = DirectReader(path)
    if not direct:
        assert not reader.direct
    for offset, length in ((0, 10), (4090, 12), (5000, 4096 + 100), (3 * 4096 + 50, 50), (0, len(data))):
        out = np.empty(length, np.uint8)
        reader.read(offset, memoryview(out))
        np.testing.assert_array_equal(out, data[offset:offset + length])
    with pytest.raises(OSError, match="unexpected end"):
        reader.read(len(data) - 10, memoryview(np.empty(20, np.uint8)))
    reader.close()
