"""What the executor counts as sent and received between ranks, and which of it stays inside a machine.

Every collective of :mod:`executor.comm` adds the bytes this process sends to and receives from OTHER ranks to a
per-process :class:`ByteCounter` (a rank's chunk to itself is a local copy and is not counted). What is counted:

* ``all_to_all_single``: the rows sent to / received from the other ranks, exactly.
* ``all_reduce_`` and the DDP gradient hook: ``2 (p-1)/p * nbytes`` each way, the traffic of a ring all-reduce
  (Patarasuk and Yuan, "Bandwidth optimal all-reduce algorithms", JPDC 69(2), 2009; the simulator's
  :func:`simulator.hardware.collectives.ring_all_reduce_bytes`). The backend may pick another algorithm; the count
  is the ring's, so measured and predicted link bytes use one convention.
* ``all_gather``: ``(p-1) * nbytes`` each way; ``send``/``recv``/``shift``/``post_exchange``: the tensors' bytes.
* object collectives (``gather_object``, ``broadcast_object``): the size of the object's JSON encoding
  (:mod:`executor.wire`; objects cross as JSON in uint8 tensors, never pickled), sent once per receiver.

The bytes sent to ranks of the same machine are also counted apart (``ByteCounter.within``, :func:`traffic_since`;
machines of ``gpus_per_machine`` consecutive ranks): on a GPU machine they cross NVLink or PCIe, not the network.
An all-reduce's are split as the simulator's hierarchical all-reduce prices them (:func:`all_reduce_split`).
"""

from __future__ import annotations

from dataclasses import dataclass

from gnnplan.simulator.hardware.collectives import hierarchical_all_reduce_bytes
from gnnplan.simulator.hardware.collectives import ring_all_reduce_bytes as ring_bytes

__all__ = ["COUNTER", "ByteCounter", "all_reduce_split", "bytes_received", "bytes_sent", "reset_counters", "ring_bytes",
           "traffic_mark", "traffic_since"]


@dataclass
class ByteCounter:
    """Bytes this process exchanged with other ranks since the last :func:`reset_counters`; ``within``: the part of
    ``sent`` that went to ranks of this process's machine (NVLink or PCIe peer to peer on a GPU machine, not the
    network)."""

    sent: int = 0
    received: int = 0
    within: int = 0

    def add(self, sent: float, received: float, within: float = 0.0) -> None:
        """Count one exchange (bytes; ``within``: the bytes of ``sent`` to ranks of this machine)."""
        self.sent += int(sent)
        self.received += int(received)
        self.within += int(within)


COUNTER = ByteCounter()
"""This process's counter."""


def all_reduce_split(nbytes: float, num_ranks: int, ranks_per_machine: int) -> tuple[float, float]:
    """(bytes sent, of which within the machine) by one rank in an all-reduce of ``nbytes`` over ``num_ranks`` ranks,
    machines of ``ranks_per_machine``, as the simulator's hierarchical all-reduce counts them
    (:func:`simulator.hardware.collectives.hierarchical_all_reduce_bytes`), whichever algorithm the backend runs. A
    ``ranks_per_machine`` that does not divide ``num_ranks`` counts as 1."""
    g = ranks_per_machine if num_ranks % ranks_per_machine == 0 else 1
    within, across = hierarchical_all_reduce_bytes(nbytes, num_ranks // g, g)
    return within + across, within


def bytes_sent() -> int:
    """Bytes sent to other ranks since the last reset."""
    return COUNTER.sent


def bytes_received() -> int:
    """Bytes received from other ranks since the last reset."""
    return COUNTER.received


def traffic_mark() -> tuple[int, int]:
    """The byte counters now (sent, sent within the machine), for :func:`traffic_since`."""
    return COUNTER.sent, COUNTER.within


def traffic_since(mark: tuple[int, int]) -> tuple[int, int]:
    """Bytes sent since ``mark`` (:func:`traffic_mark`): (to ranks of other machines, to ranks of this machine)."""
    sent, within = COUNTER.sent - mark[0], COUNTER.within - mark[1]
    return sent - within, within


def reset_counters() -> None:
    """Zero the byte counters."""
    COUNTER.sent = COUNTER.received = COUNTER.within = 0
