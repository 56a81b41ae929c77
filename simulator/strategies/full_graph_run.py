"""The simulated epoch of a full-graph strategy (``neutronstar``, ``hongtu``): a process per worker, named events
and all-party barriers for the exchanges between workers, and the spans they record."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Sequence
from dataclasses import replace
from typing import Any

from gnnplan.simulator import symmetry
from gnnplan.simulator.engine import Engine
from gnnplan.simulator.hardware.model import HardwareModel
from gnnplan.simulator.hardware.spec import ClusterSpec
from gnnplan.simulator.trace import Span


class FullGraphRun(ABC):
    """The simulated epoch of a full-graph strategy (``neutronstar``, ``hongtu``): one process per worker on
    the hardware model, named events and all-party barriers for the exchanges between them, and the spans.
    Subclasses define ``_worker(rank)``, the generator one worker runs for the whole epoch.

    When every rank's work equals its image on machine 0 (``rank_works``, :func:`simulator.symmetry
    .representatives`), only machine 0's workers run, on a folded hardware model (:mod:`simulator.symmetry`):
    a message from a worker of another machine is the image of one a worker of machine 0 sends (:meth:`_arrival`),
    and after the run every simulated worker's spans and end are copied to the same GPU of every other machine.

    Args:
        cluster: the hardware.
        num_workers: workers (= GPUs) simulated.
        seed: the engine's seed.
        rank_works: each rank's work (one entry per GPU of ``cluster``), when the strategy's schedule maps onto
            itself under the cyclic shift of machines given equal work; None: every rank runs.
        same: ``same(work, image_work, shift)`` for work that names other ranks (:func:`rotated_equal`).
    """

    def __init__(self, cluster: ClusterSpec, num_workers: int, seed: int = 0, rank_works: Sequence[Any] | None = None,
                 same: Callable[[Any, Any, int], bool] | None = None) -> None:
        self.engine = Engine(seed)
        self.hw = HardwareModel(cluster, self.engine)
        self.num_workers = num_workers
        self.spans: list[Span] = []
        self.ends = [0.0] * num_workers
        self.events: dict[tuple[Any, ...], Any] = {}
        self.gpus_per_machine = cluster.gpus_per_machine
        works = rank_works if num_workers == cluster.num_gpus else None
        self.represent, self.rendezvous = symmetry.simulated_ranks(self.engine, self.hw, cluster, works, same)
        self.ranks = self.represent.ranks
        """The ranks simulated (machine 0's when folded, else all)."""

    @abstractmethod
    def _worker(self, rank: int) -> Generator[Any, Any, None]:
        """The generator worker ``rank`` runs for the whole epoch (the strategy's schedule)."""

    def execute(self) -> None:
        """Run every simulated worker to the end of the epoch; when folded, copy each one's spans and end to the
        same GPU of every other machine. Every ``epoch`` span's args say how many machines a simulated machine
        stands for (``machines_represented``)."""
        for rank in self.ranks:
            self.engine.process(self._worker(rank))
        self.engine.run()
        represented = self.represent.num_machines_represented
        self.spans = [replace(s, args={**s.args, "machines_represented": represented}) if s.phase == "epoch" else s
                      for s in self.spans]
        if self.represent.folded:
            g = self.gpus_per_machine
            self.spans = symmetry.machine_images(self.spans, g, self.num_workers)
            for rank in self.ranks:
                for image in range(rank + g, self.num_workers, g):
                    self.ends[image] = self.ends[rank]

    def _event(self, key: tuple[Any, ...]) -> Any:
        """The event named ``key`` (created on first use), e.g. a message's arrival."""
        if key not in self.events:
            self.events[key] = self.engine.event()
        return self.events[key]

    def _arrival(self, key: tuple[Any, ...], src: int, dst: int) -> Any:
        """The event of the arrival of message ``key`` from worker ``src`` at ``dst`` (:meth:`_message` fires it).
        When folded, a message from another machine's worker is named by its image under the shift that takes
        ``src`` to machine 0: sent by a simulated worker, at the same time (module docstring of
        :mod:`simulator.symmetry`)."""
        if self.represent.folded:
            g = self.gpus_per_machine
            offset = (src // g) * g
            src, dst = src - offset, (dst - offset) % self.num_workers
        return self._event(key + (src, dst))

    def _message(self, key: tuple[Any, ...], src: int, dst: int, nbytes: float) -> Generator[Any, Any, None]:
        """Send ``nbytes`` from worker ``src`` to ``dst`` and then fire its :meth:`_arrival` event: a peer copy
        inside a machine; across machines copied out, sent from host memory and copied in (the NICs alone with
        GPUDirect RDMA: :meth:`~simulator.hardware.model.HardwareModel.gpu_network`). Run it as a process."""
        hw = self.hw
        if nbytes > 0:
            if hw.machine_of(src) == hw.machine_of(dst):
                yield hw.gpu_to_gpu(src, dst, nbytes)
            else:
                yield hw.gpu_network(src, dst, nbytes, store_and_forward=True)
        self._arrival(key, src, dst).succeed()

    def _span(self, rank: int, phase: str, start: float, stream: str, nbytes: float = 0.0, flops: float = 0.0,
              **args: Any) -> None:
        """Record a span of epoch 0 from ``start`` to now (full-graph: one iteration per epoch)."""
        self.spans.append(Span(rank, phase, start, self.engine.now - start, stream, nbytes, flops, 0, 0, args))
