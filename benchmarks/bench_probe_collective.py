"""How steady is ``gnnplan probe``'s collective fixed cost? One block of calls against the blocks the probe times.

``network.per_collective_s`` and ``network.per_all_to_all_s`` come from the mean 1 KiB gloo all-reduce and all-to-all
between two spawned local processes, each call after 1 ms of compute (:func:`executor.probe_io.collective_means_s`).
Until 2026-12-02 the probe timed one block of :data:`~executor.probe_io.COLLECTIVE_CALLS` calls of each; now
:data:`~executor.probe_io.COLLECTIVE_BLOCKS` blocks, the two kinds in turn. This runs ``--spawns`` pairs of processes;
each times ``COLLECTIVE_BLOCKS`` blocks of each kind in turn (:func:`executor.probe_io.collective_blocks_s`, the calls
the probe averages) and reports both estimators from the same calls: the first all-reduce block alone (the baseline, the
probe before) and all blocks (the probe now), each the 5%-trimmed mean. Printed: per spawn both all-reduce estimates and
the all-to-all's, then over the spawns the range of each estimator and its max/min ratio (the smaller, the steadier the
probe on this machine). No goal.

Run: ``python benchmarks/bench_probe_collective.py [--spawns 6]`` (~3 s per spawn).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import numpy as np

os.environ.setdefault("DGLBACKEND", "pytorch")


def _program(topo: Any, emit: Any, blocks: int) -> tuple[list[list[float]], list[list[float]]]:
    from gnnplan.executor.probe_io import collective_blocks_s

    return collective_blocks_s(blocks)  # the calls the probe times, block by block


def main() -> int:
    from gnnplan.executor.launch import spawn
    from gnnplan.executor.probe_io import COLLECTIVE_BLOCKS, COLLECTIVE_BUSY_S, COLLECTIVE_CALLS, trimmed_mean_s

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spawns", type=int, default=6, help="process pairs, one after another")
    args = parser.parse_args()
    if args.spawns < 2:
        parser.error(f"--spawns: must be at least 2 (got {args.spawns})")
    print(f"{args.spawns} spawns of 2 local gloo processes; per spawn {COLLECTIVE_BLOCKS} blocks of "
          f"{COLLECTIVE_CALLS} calls of each kind in turn, each call after {1e3 * COLLECTIVE_BUSY_S:g} ms of compute",
          flush=True)
    one, every, exchange = [], [], []
    for k in range(args.spawns):
        reduce_blocks, exchange_blocks = spawn(_program, 2, (COLLECTIVE_BLOCKS,))  # rank 0's per-call times
        one.append(trimmed_mean_s(reduce_blocks[0]))
        every.append(trimmed_mean_s(np.concatenate(reduce_blocks)))
        exchange.append(trimmed_mean_s(np.concatenate(exchange_blocks)))
        block_means = ", ".join(f"{1e3 * trimmed_mean_s(b):.2f}" for b in reduce_blocks)
        print(f"spawn {k}: all-reduce first block {1e3 * one[-1]:.3f} ms, all {COLLECTIVE_BLOCKS} blocks "
              f"{1e3 * every[-1]:.3f} ms (blocks {block_means}); all-to-all, all blocks {1e3 * exchange[-1]:.3f} ms",
              flush=True)
    rows = (("all-reduce, one block (before)", one), (f"all-reduce, {COLLECTIVE_BLOCKS} blocks (now)", every),
            (f"all-to-all, {COLLECTIVE_BLOCKS} blocks (now)", exchange))
    for label, values in rows:
        print(f"{label:34s} {1e3 * min(values):.3f}-{1e3 * max(values):.3f} ms over the spawns, "
              f"max/min {max(values) / min(values):.2f}, mean {1e3 * float(np.mean(values)):.3f} ms")
    print(f"spread ratio, blocks / one block: {(max(every) / min(every)) / (max(one) / min(one)):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
