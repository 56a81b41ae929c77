"""The simulated epoch of a full-graph strategy (``neutronstar``, ``hongtu``): a process per worker, named events
and all-party barriers for the exchanges between workers, and the spans they record."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Generator
from typing import Any

from gnnplan.simulator.engine import Engine, Rendezvous
from gnnplan.simulator.hardware.model import HardwareModel
from gnnplan.simulator.hardware.spec import ClusterSpec
from gnnplan.simulator.trace import Span


class FullGraphRun(ABC):
    """The simulated epoch of a full-graph strategy (``neutronstar``, ``hongtu``): one process per worker on
    the hardware model, named events and all-party barriers for the exchanges between them, and the spans.
    Subclasses define ``_worker(rank)``, the generator one worker runs for the whole epoch.

    Args:
        cluster: the hardware.
        num_workers: workers (= GPUs) simulated.
        seed: the engine's seed.
    """

    def __init__(self, cluster: ClusterSpec, num_workers: int, seed: int = 0) -> None:
        self.engine = Engine(seed)
        self.hw = HardwareModel(cluster, self.engine)
        self.num_workers = num_workers
        self.spans: list[Span] = []
        self.ends = [0.0] * num_workers
        self.events: dict[tuple[Any, ...], Any] = {}
        self.rendezvous = Rendezvous(self.engine, num_workers)

    @abstractmethod
    def _worker(self, rank: int) -> Generator[Any, Any, None]:
        """The generator worker ``rank`` runs for the whole epoch (the strategy's schedule)."""

    def execute(self) -> None:
        """Run every worker to the end of the epoch."""
        for rank in range(self.num_workers):
            self.engine.process(self._worker(rank))
        self.engine.run()

    def _event(self, key: tuple[Any, ...]) -> Any:
        """The event named ``key`` (created on first use), e.g. a message's arrival."""
        if key not in self.events:
            self.events[key] = self.engine.event()
        return self.events[key]

    def _message(self, key: tuple[Any, ...], src: int, dst: int, nbytes: float) -> Generator[Any, Any, None]:
        """Send ``nbytes`` from worker ``src`` to ``dst`` and then fire the event ``key + (src, dst)``: a peer copy
        inside a machine; across machines copied out, sent from host memory and copied in (the NICs alone with
        GPUDirect RDMA: :meth:`~simulator.hardware.model.HardwareModel.gpu_network`). Run it as a process."""
        hw = self.hw
        if nbytes > 0:
            if hw.machine_of(src) == hw.machine_of(dst):
                yield hw.gpu_to_gpu(src, dst, nbytes)
            else:
                yield hw.gpu_network(src, dst, nbytes, store_and_forward=True)
        self._event(key + (src, dst)).succeed()

    def _span(self, rank: int, phase: str, start: float, stream: str, nbytes: float = 0.0, flops: float = 0.0,
              **args: Any) -> None:
        """Record a span of epoch 0 from ``start`` to now (full-graph: one iteration per epoch)."""
        self.spans.append(Span(rank, phase, start, self.engine.now - start, stream, nbytes, flops, 0, 0, args))
