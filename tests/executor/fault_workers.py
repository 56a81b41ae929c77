"""Programs the fault tests run on every rank (module-level so spawned workers can import them)."""

from __future__ import annotations

import ipaddress
import os
import signal
from pathlib import Path
from typing import Any

import torch

from gnnplan.executor import comm
from gnnplan.executor.data import Topology


def misbehave(topo: Topology, emit: Any, action: str, culprit: int) -> str:
    """Every rank reports its pid and joins one all-reduce; then rank ``culprit`` misbehaves (``raise``: divides by
    zero, ``value``: raises ValueError, ``kill``: SIGKILLs itself, ``stop``: SIGSTOPs itself) while its peers wait
    in a second all-reduce."""
    emit({"rank": topo.rank, "pid": os.getpid()})
    t = torch.ones(1)
    comm.all_reduce_(t)
    if topo.rank == culprit:
        if action == "raise":
            return str(1 / 0)
        if action == "value":
            raise ValueError("knobs.x: must be positive (got -1)")
        os.kill(os.getpid(), signal.SIGKILL if action == "kill" else signal.SIGSTOP)
    comm.all_reduce_(t)
    return "finished"


def listening(topo: Topology, emit: Any) -> list[list[str]] | None:
    """Every rank's listening TCP sockets (``address:port``, from /proc/net/tcp{,6} matched to this process's
    file descriptors), gathered on rank 0."""
    return comm.gather_object(listening_sockets())


def listening_sockets() -> list[str]:
    """This process's listening TCP sockets as ``address:port``."""
    inodes = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] != "0A" or cols[9] not in inodes:  # 0A = LISTEN
                continue
            addr, port = cols[1].split(":")
            raw = bytes.fromhex(addr)
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))  # host-order 32-bit words
            found.append(f"{ipaddress.ip_address(raw)}:{int(port, 16)}")
    return found
