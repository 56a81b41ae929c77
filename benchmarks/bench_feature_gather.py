"""Feature-row gathers of the executor: advanced indexing (``table[index]``, the executor's gather before
2026-11-28) vs ``torch.index_select`` (:meth:`gnnplan.executor.features.RowStore.gather` now), with the baseline
measured in the same run.

Per workload it times one worker's local feature load the way :meth:`gnnplan.executor.features.FeatureStore.load`
does it on a 2-machine cluster: the owners of the input vertices looked up, the local ones' partition positions,
their rows gathered, then written into the batch's input matrix. The input counts are the emulated bench_whatif
cluster's (2 machines, METIS, batch 512, fanouts [10, 10]; from the traces of 2026-11-28): R-MAT (20000 vertices,
128 features): a worker with 3968 inputs, 89% local (the machine with the hubs) and one with 2194, 21% local;
Cora (1433 features): 418 inputs, 68% local. Before every call ``--dirty-mib`` MiB of other memory are written, as a
training step writes its activations between two loads (so the rows come from memory, behind dirty cache lines);
the calls of both methods alternate. Prints per workload the median of ``--calls`` calls of each and their ratio,
and the ratio of the gathers alone (the row copy, without the owner lookup and the write into the batch).

Second table: a load with a feature cache, the cache's rows written into the batch and the misses gathered from the
machine's rows, the way ``FeatureStore.load`` did it before 2026-11-29 (the hits gathered, then written through a
boolean mask; the misses' rows written by advanced indexing) against :func:`gnnplan.executor.features.from_cache`
and :func:`~gnnplan.executor.features.fill` now (with at least half of the rows cached, one ``index_select`` over
every position, then the misses' rows copied in). Workloads: Cora with the main job's cache (509 inputs, 98% hits,
from its trace of 2026-11-29), and R-MAT inputs with 90% and 20% hits.

Third table: the row copies around the full-graph strategies' exchanges, before and after 2026-11-29, on the sizes
of Cora on 2 workers (this machine's main-job layout, from the traces of that day). neutronstar's layer 1 (1354
owned rows of 1433 floats, 1101 received, 1116 sent): the rows to send gathered by advanced indexing per peer and
concatenated, the receive buffers concatenated and copied back, then concatenated again with ``X_1`` into the table
``T_1``, against one ``index_select`` into the send buffer and the received rows written straight into the tail of a
table built once. The transport's own write of the received bytes is the same copy in both (stands for the
exchange, which is not timed). hongtu's ``h2d`` of a chunk (1354 host rows into a 1500-slot buffer):
``buffer[slots] = host[rows]`` against ``index_select`` and ``index_copy_``
(:func:`gnnplan.executor.features.fill`).

Run: ``python benchmarks/bench_feature_gather.py [--calls 200] [--dirty-mib 64]``.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch

from gnnplan.executor.features import fill, from_cache

WORKLOADS = {"rmat, hub machine": (10_000, 128, 3968, 0.886), "rmat, other machine": (10_000, 128, 2194, 0.215),
             "cora": (1354, 1433, 418, 0.68)}
"""name -> (rows per machine, feature width, input vertices of a batch, local fraction) (module docstring)."""


def local_load(rows: torch.Tensor, owner: torch.Tensor, position: torch.Tensor, ids: torch.Tensor,
               gather: str) -> float:
    """The local part of ``FeatureStore.load`` for machine 0, gathering with ``gather`` ("index" or
    "index_select"); returns the seconds the gather alone took.

    Shapes:
        rows: (n, d) float32, machine 0's rows; owner, position: (2n,) int64 (machine and row of every vertex);
        ids: (k,) int64, the batch's input vertices.
    """
    x = torch.empty((len(ids), rows.shape[1]))
    local = owner[ids] == 0
    where = position[ids[local]]
    start = time.perf_counter()
    got = rows[where] if gather == "index" else torch.index_select(rows, 0, where)
    gathered = time.perf_counter() - start
    x[torch.arange(len(ids))[local]] = got
    return gathered


CACHED = {"cora, main job's cache": (2708, 1433, 2600, 509, 0.984), "rmat, 90% hits": (20_000, 128, 10_000, 3968, 0.9),
          "rmat, 20% hits": (20_000, 128, 10_000, 3968, 0.2)}
"""name -> (vertices, feature width, cached rows, input vertices of a batch, hit fraction) (module docstring)."""


def cached_load(cache_rows: torch.Tensor, slot: torch.Tensor, rows: torch.Tensor, ids: torch.Tensor,
                method: str) -> torch.Tensor:
    """A batch's rows from the cache (``slot``: each vertex's cache row or -1) and, for misses, from ``rows``, by
    ``method`` ("mask": before 2026-11-29; "from_cache": now)."""
    s = slot[ids]
    if method == "mask":
        x = torch.empty((len(ids), rows.shape[1]))
        hit = s >= 0
        x[hit] = torch.index_select(cache_rows, 0, s[hit])
        pos = torch.nonzero(~hit).squeeze(1)
        x[pos] = torch.index_select(rows, 0, ids[pos])
        return x
    x, pos = from_cache(cache_rows, s)
    fill(x, pos, torch.index_select(rows, 0, ids[pos]))
    return x


def cached_table(calls: int, junk: torch.Tensor, gen: torch.Generator) -> None:
    """Print the second table (module docstring): median of ``calls`` loads by each method, alternating."""
    print("\n== load with a feature cache: hits gathered then written through a mask vs from_cache (1 thread)")
    print(f"{'workload':<24} {'hits':>6} {'mask ms':>9} {'from_cache ms':>14} {'ratio':>7}")
    for name, (n, width, cached, k, hit_fraction) in CACHED.items():
        rows = torch.rand(n, width, generator=gen)
        cache_ids = torch.randperm(n, generator=gen)[:cached]
        slot = torch.full((n,), -1, dtype=torch.int64)
        slot[cache_ids] = torch.arange(cached)
        cache_rows = rows[cache_ids].clone()
        others = torch.nonzero(slot < 0).squeeze(1)
        times: dict[str, list[float]] = {"mask": [], "from_cache": []}
        num_hit = round(k * hit_fraction)
        for call in range(calls + 2):
            ids = torch.cat([cache_ids[torch.randint(0, cached, (num_hit,), generator=gen)],
                             others[torch.randint(0, len(others), (k - num_hit,), generator=gen)]])
            ids = ids[torch.randperm(k, generator=gen)]
            outs = {}
            for method in (("mask", "from_cache") if call % 2 else ("from_cache", "mask")):
                junk.add_(1.0)
                start = time.perf_counter()
                outs[method] = cached_load(cache_rows, slot, rows, ids, method)
                if call >= 2:
                    times[method].append(time.perf_counter() - start)
            assert torch.equal(outs["mask"], outs["from_cache"])
        old, new = (float(np.median(times[m])) for m in ("mask", "from_cache"))
        print(f"{name:<24} {num_hit:>6} {old * 1e3:>9.3f} {new * 1e3:>14.3f} {old / new:>6.2f}x", flush=True)


NEUTRONSTAR_LAYER1 = (1354, 1433, 1101, 1116)
"""Cora, 2 workers, DepComm, layer 1: (owned rows, feature width, rows received, rows sent) (module docstring)."""
HONGTU_CHUNK = (2708, 1433, 1354, 1500)
"""Cora, hongtu's chunk load: (host rows, width, rows loaded, buffer slots) (module docstring)."""


def neutronstar_copies(method: str, source: torch.Tensor, send: torch.Tensor, wire: torch.Tensor,
                       table0: torch.Tensor) -> torch.Tensor:
    """Layer 1's copies around the exchange by ``method`` ("before" / "now"); ``wire`` stands for the received
    bytes the transport writes; returns the table ``T_1``."""
    if method == "before":
        outgoing = [source[send[:0]], source[send]]  # per rank: none to itself, the rest to the peer
        inp = torch.cat([outgoing[1]])
        incoming = [source.new_empty((0, source.shape[1])), source.new_empty(wire.shape)]
        out = torch.cat(incoming)
        out.copy_(wire)
        for p, piece in enumerate(torch.split(out, [0, len(wire)])):
            incoming[p].copy_(piece)
        del inp
        return torch.cat([source, torch.cat(incoming)])
    packed = torch.index_select(source, 0, send)
    table0[len(source):].copy_(wire)
    del packed
    return table0


def exchange_table(calls: int, junk: torch.Tensor, gen: torch.Generator) -> None:
    """Print the third table (module docstring): median of ``calls`` of each, alternating."""
    print("\n== row copies around the full-graph exchanges (1 thread; Cora, 2 workers)")
    print(f"{'operation':<34} {'before ms':>10} {'now ms':>8} {'ratio':>7}")
    owned, width, received, sent = NEUTRONSTAR_LAYER1
    source = torch.rand(owned, width, generator=gen)
    send = torch.randperm(owned, generator=gen)[:sent]
    wire = torch.rand(received, width, generator=gen)
    table0 = torch.empty((owned + received, width))
    table0[:owned] = source
    n, width, k, capacity = HONGTU_CHUNK
    host = torch.rand(n, width, generator=gen)
    buffer = torch.empty((capacity, width))

    def h2d(method: str, rows: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
        if method == "before":
            buffer[slots] = host[rows]
        else:
            fill(buffer, slots, torch.index_select(host, 0, rows))
        return buffer

    cases = {"neutronstar layer 1: pack, T_1": lambda m, c: neutronstar_copies(m, source, send, wire, table0),
             "hongtu h2d of a chunk": lambda m, c: h2d(m, *c)}
    for name, run in cases.items():
        times: dict[str, list[float]] = {"before": [], "now": []}
        for call in range(calls + 2):
            case = (torch.randperm(n, generator=gen)[:k], torch.randperm(capacity, generator=gen)[:k])
            outs = {}
            for method in (("before", "now") if call % 2 else ("now", "before")):
                junk.add_(1.0)
                start = time.perf_counter()
                out = run(method, case)
                if call >= 2:
                    times[method].append(time.perf_counter() - start)
                outs[method] = out.clone()
            assert torch.equal(outs["before"], outs["now"])
        old, new = (float(np.median(times[m])) for m in ("before", "now"))
        print(f"{name:<34} {old * 1e3:>10.3f} {new * 1e3:>8.3f} {old / new:>6.2f}x", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--dirty-mib", type=int, default=64, help="MiB written between calls")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    junk = torch.zeros(args.dirty_mib * 2 ** 20 // 4)
    gen = torch.Generator().manual_seed(0)
    print(f"== feature gather: advanced indexing vs index_select, 1 thread, {args.dirty_mib} MiB written between calls")
    print(f"{'workload':<22} {'local rows':>10} {'load: table[index] ms':>22} {'index_select ms':>16} {'ratio':>7}"
          f"  {'gather alone: ratio':>20}")
    for name, (n, width, k, local_fraction) in WORKLOADS.items():
        rows = torch.rand(n, width, generator=gen)
        owner = torch.cat([torch.zeros(n, dtype=torch.int64), torch.ones(n, dtype=torch.int64)])
        position = torch.cat([torch.arange(n), torch.arange(n)])
        times: dict[str, list[float]] = {"index": [], "index_select": []}
        alone: dict[str, list[float]] = {"index": [], "index_select": []}
        num_local = round(k * local_fraction)
        for call in range(args.calls + 2):
            ids = torch.cat([torch.randint(0, n, (num_local,), generator=gen),
                             torch.randint(n, 2 * n, (k - num_local,), generator=gen)])
            for method in (("index", "index_select") if call % 2 else ("index_select", "index")):
                junk.add_(1.0)
                start = time.perf_counter()
                gathered = local_load(rows, owner, position, ids, method)
                if call >= 2:  # two warm-up calls
                    times[method].append(time.perf_counter() - start)
                    alone[method].append(gathered)
        old, new = (float(np.median(times[m])) for m in ("index", "index_select"))
        ratio = float(np.median(alone["index"]) / np.median(alone["index_select"]))
        print(f"{name:<22} {num_local:>10} {old * 1e3:>22.3f} {new * 1e3:>16.3f} {old / new:>6.2f}x  {ratio:>19.2f}x",
              flush=True)
    cached_table(args.calls, junk, gen)
    exchange_table(args.calls, junk, gen)
    return 0


if __name__ == "__main__":
    sys.exit(main())
