"""Full-graph training with CPU offloading, recomputation and deduplicated communication (``hongtu``) for real,
on N gloo workers.

The same strategy as :mod:`simulator.strategies.hongtu` (same ``NAME`` and ``Knobs``; the partition, the
reorganisation and the transition sets are the simulator plug-in's). Every layer's vertex data live in a
host-side store in shared memory (:mod:`.store`); each worker streams its chunks through a working set bounded
by the cluster's ``gpu.memory_bytes``, one chunk at a time, recomputing in the backward pass (:mod:`.layers`),
with the deduplicated transfers of its batch plans (:mod:`.plan`) counted per path and traced
(:mod:`.transfer`); :class:`~.trainer.Trainer` runs Algorithm 1.
"""

from __future__ import annotations

from gnnplan.executor.strategies.hongtu.trainer import Trainer
from gnnplan.simulator.strategies.hongtu import NAME, Knobs

__all__ = ["NAME", "Knobs", "Trainer"]
