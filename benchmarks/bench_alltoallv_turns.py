"""Two-way exchanges between machines on gloo: ``alltoallv`` (the baseline) vs receives posted first, point to point
(what :func:`gnnplan.executor.comm.all_to_all_single` does across machines), in the same run, on time and with one
rank late.

gloo's ``alltoallv`` posts each peer's send before its receive, and a send leaves only once the peer's
ready-to-receive notice has arrived, which travels behind that peer's own outgoing payload
(:func:`gnnplan.executor.comm.post_exchange`). So when one rank of a swapping pair arrives late, its incoming payload
can wait for its outgoing one: the two directions take turns.

Two emulated machines x 1 core (:class:`gnnplan.executor.emulate.EmulatedCluster`) at each of ``--rates``, one
rank each, joined by :func:`gnnplan.executor.comm.init_process_group` (so gloo's event loop runs in SCHED_IDLE,
:mod:`gnnplan.executor.gloo_loop`), the link rate set as the executor's emulated runs set it (the probe's NIC rate:
0.97 x the shaping rate; the unshaped veth: 2.4 GB/s). Per payload size, delay and protocol, ``--repeats`` swaps
of that many bytes each way with :func:`gnnplan.executor.comm.shift` (hopgnn's migration), each after a barrier and
2 ms of compute, rank 0 computing ``delay`` seconds longer (0: together); the protocols alternate swap by swap.
Printed per case: the late rank's (rank 0's) median time in the call with each protocol, the one-way time of the
payload at the link rate, and the ratio of the two protocols' medians.

Needs root with CAP_NET_ADMIN. Run:
``python benchmarks/bench_alltoallv_turns.py [--rates 300Mbit/s,1Gbit/s,3Gbit/s,unshaped]
[--sizes 16000,148000,600000,1475000] [--delays-s 0.0005,0.003] [--repeats 15]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time

NIC_EFFICIENCY = 0.97
"""Probed NIC rate / shaping rate of ``probe --emulate`` (1.207e8-1.213e8 B/s at 1 Gbit/s, 2026-11-28)."""
UNSHAPED_BYTES_PER_S = 2.4e9
"""The unshaped veth's probed rate (2.43e9-2.65e9 B/s, bench_whatif records 20-22)."""


def worker(link_bytes_per_s: float, sizes: list[int], delays_s: list[float], repeats: int) -> None:
    """One rank (its torchrun variables in the environment): the swaps of the module docstring, ``sizes`` bytes each
    way, rank 0 late by each of ``delays_s`` seconds (and by 0), the link rate ``link_bytes_per_s``; the protocol is
    chosen through :data:`gnnplan.executor.comm.RECEIVE_FIRST_MIN_S` (infinite: ``alltoallv``; 0: receive-first).
    Rank 0 prints ``{"<bytes> <delay_s>": {protocol: median seconds}}`` as JSON."""
    import torch
    import torch.distributed as dist

    from gnnplan.executor import comm
    from gnnplan.executor.probe_io import _busy_s

    rank = int(os.environ["RANK"])
    comm.init_process_group(rank, int(os.environ["WORLD_SIZE"]), os.environ["MASTER_ADDR"],
                            int(os.environ["MASTER_PORT"]))
    comm.set_link_rate(link_bytes_per_s)
    chosen = comm.RECEIVE_FIRST_MIN_S
    protocols = {"alltoallv": math.inf, "receive-first": 0.0}
    out = {}
    for n in sizes:
        send, recv = torch.ones(n // 4), torch.empty(n // 4)
        for delay in [0.0, *delays_s]:
            times: dict[str, list[float]] = {name: [] for name in protocols}
            for r in range(2 * (repeats + 2)):
                name = list(protocols)[r % 2]
                comm.RECEIVE_FIRST_MIN_S = protocols[name]
                dist.barrier()
                _busy_s(0.002 + (delay if rank == 0 else 0.0))
                start = time.perf_counter()
                comm.shift(send, 1 - rank, recv, 1 - rank)
                if r >= 4:  # two warm-up swaps each
                    times[name].append(time.perf_counter() - start)
            out[f"{n} {delay}"] = {name: sorted(t)[len(t) // 2] for name, t in times.items()}
    comm.RECEIVE_FIRST_MIN_S = chosen
    if rank == 0:
        print(json.dumps(out), flush=True)
    comm.destroy()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="300Mbit/s,1Gbit/s,3Gbit/s,unshaped")
    parser.add_argument("--sizes", default="16000,148000,600000,1475000")
    parser.add_argument("--delays-s", default="0.0005,0.003", help="how late rank 0 arrives, seconds")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)  # link rate (B/s), sizes (B), delays (s), repeats
    args = parser.parse_args(argv)
    if args.worker:
        link, sizes, delays_s, repeats = args.worker
        worker(float(link), [int(x) for x in sizes.split(",")], [float(x) for x in delays_s.split(",")], int(repeats))
        return 0
    from gnnplan.executor.emulate import MASTER_PORT, EmulatedCluster, MachineLimits, rank_environment
    from gnnplan.simulator.units_parse import parse_quantity

    print(f"{'rate':>10} {'bytes':>9} {'late by':>8} {'one way ms':>11} {'alltoallv ms':>13} "
          f"{'receive-first ms':>17} {'ratio':>6}")
    for text in args.rates.split(","):
        rate_bytes_per_s = None if text == "unshaped" else parse_quantity(text, "bandwidth", "--rates")
        link_bytes_per_s = UNSHAPED_BYTES_PER_S if rate_bytes_per_s is None else NIC_EFFICIENCY * rate_bytes_per_s
        argv_w = [sys.executable, os.path.abspath(__file__), "--worker", str(link_bytes_per_s), args.sizes,
                  args.delays_s, str(args.repeats)]
        with EmulatedCluster(2, MachineLimits(rate_bytes_per_s)) as cluster:
            first = subprocess.Popen(cluster.command(0, argv_w), env=rank_environment(0, 2, 1),
                                     stdout=subprocess.PIPE, text=True)
            cluster.wait_listening(0, MASTER_PORT)
            second = subprocess.Popen(cluster.command(1, argv_w), env=rank_environment(1, 2, 1),
                                      stdout=subprocess.DEVNULL, text=True)
            out, _ = first.communicate(timeout=1800)
            second.wait(timeout=60)
        for key, medians in json.loads(out.strip().splitlines()[-1]).items():
            size, delay_s = key.split()
            old, new = medians["alltoallv"], medians["receive-first"]
            one_way_s = int(size) / link_bytes_per_s
            print(f"{text:>10} {int(size):>9} {float(delay_s) * 1e3:>6.1f}ms {one_way_s * 1e3:>11.2f} "
                  f"{old * 1e3:>13.2f} {new * 1e3:>17.2f} {old / new:>5.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
