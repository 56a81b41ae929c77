"""One rank of the two-way exchange test (tests/executor/test_comm_exchange.py), run inside an emulated machine.

argv: rank, master address, payload bytes, orders (comma-separated, each timed in turn in the same process
group: ``receive-first``, :func:`executor.comm.shift` at the link rate given as the fifth argument, bytes/s;
``send-first``, the order it replaced). Rank 1 posts 10 ms after rank 0 in the timed exchanges. Prints, on rank 1,
for each order its shortest one-way time and shortest exchange time over five rounds (seconds, JSON keyed by the
order): noise on a shared machine only ever adds time, while the order's cost is paid in every round.
"""

from __future__ import annotations

import json
import sys
import time

import torch
import torch.distributed as dist

from gnnplan.executor import comm

rank, address, nbytes, orders = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4].split(",")
comm.set_link_rate(float(sys.argv[5]))
dist.init_process_group("gloo", init_method=f"tcp://{address}:29611", rank=rank, world_size=2)
out, inc = torch.ones(nbytes // 4), torch.empty(nbytes // 4)


def exchange(order: str) -> None:
    if order == "receive-first":
        comm.shift(out, 1 - rank, inc, 1 - rank)
    else:
        for request in [dist.isend(out, 1 - rank), dist.irecv(inc, 1 - rank)]:
            request.wait()


def rounds(order: str) -> dict[str, float]:
    one_way, both = [], []
    for _ in range(5):
        dist.barrier()
        t0 = time.perf_counter()
        if rank == 0:
            dist.send(out, 1)
        else:
            dist.recv(inc, 0)
            one_way.append(time.perf_counter() - t0)
        dist.barrier()
        time.sleep(0.05)
        if rank == 1:
            time.sleep(0.01)
        t0 = time.perf_counter()
        exchange(order)
        both.append(time.perf_counter() - t0)
        dist.barrier()
    return {"one_way_s": min(one_way), "exchange_s": min(both)} if rank == 1 else {}


timed = {order: rounds(order) for order in orders}
if rank == 1:
    print(json.dumps(timed))
dist.destroy_process_group()
