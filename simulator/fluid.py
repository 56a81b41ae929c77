"""Fluid sharing of capacities among concurrent flows with max-min fairness (a fluid model of processor sharing).

A *flow* moves ``amount`` units (bytes, or core-seconds) through a set of :class:`FluidResource` (e.g. the
sender's NIC and the receiver's NIC) at a rate that is max-min fair over all active flows, optionally capped (one
sampler process cannot use more than one core). Rates change only when flows start or finish; in between every
rate is constant, so each flow's completion time is exact for the fluid model.

:func:`max_min_rates` is the textbook computation (progressive filling over every flow). :class:`FluidScheduler`
gives the same rates (up to floating-point rounding) at a fraction of the cost:

* Max-min rates of flows that share no resource, even transitively, do not depend on each other: progressive
  filling of a connected component (flows linked through shared resources) only involves its own resources. When
  flows start or finish, only the components of the resources they cross are filled again; every other flow
  keeps its rate and completion time.
* Flows crossing the same resources with the same cap always get the same rate (progressive filling freezes
  them at the same step), so a component is filled over such *groups*, each counted with its size; a group
  tracks the units served to each of its flows, so a rate change costs one update per group, not per flow.
* All starts and finishes of one simulated instant are applied first, then the rates are filled once: the fill
  is a zero-delay event of lower priority than simpy's ``NORMAL``, so it runs after every other event of that
  instant (also those scheduled during it) and before the clock moves. Rates in between are never used.
* Completion times are kept in heaps; one simpy timer waits for the earliest. At a wake-up, every flow whose
  remaining amount is within ``1e-9`` of its amount (or 1 fs of time) of zero finishes, in start order.

Source: max-min fairness and progressive filling: Bertsekas and Gallager, "Data Networks", 2nd ed., 1992,
§6.5.2; fluid processor sharing: Kleinrock, "Queueing Systems, Vol. 2", 1976, §4.4. Two equal flows on one link
each get half the bandwidth, so each takes twice as long as alone. tests/simulator/test_engine_components.py
compares the scheduler with a global recomputation after every single change on random flow sets.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import simpy

INF = float("inf")
_REL_TOL = 1e-9
"""A flow is done when at most this fraction of its amount is left; a resource is saturated when at most this
fraction of its capacity is left (floating-point slack of the exact fluid model)."""
_TIME_TOL_S = 1e-15
"""A flow due within this many seconds is done."""


@dataclass(eq=False)
class FluidResource:
    """A divisible capacity shared by flows (a link direction in bytes/s, or host cores in cores).

    Attributes:
        name: label for debugging.
        capacity: units per second (bytes/s for a link, cores for a CPU).
    """

    name: str
    capacity: float


@dataclass(eq=False)
class _Flow:
    """A flow of :func:`max_min_rates` (its ``resources`` and ``cap`` in, its ``rate`` out)."""

    resources: tuple[FluidResource, ...]
    amount: float
    cap: float
    event: simpy.Event
    remaining: float = 0.0
    rate: float = 0.0
    frozen: bool = field(default=False, repr=False)


def max_min_rates(flows: list[_Flow]) -> None:
    """Set each flow's ``rate`` to its max-min fair share (progressive filling with per-flow caps).

    All unfrozen flows grow at the same pace until a resource saturates (its flows freeze) or a flow reaches its
    cap (that flow freezes). Source: Bertsekas and Gallager, "Data Networks", 1992, §6.5.2.

    Every unfrozen flow has the same rate (the filling level), so a flow's rate is the level at which it froze;
    each resource keeps the count of its unfrozen flows, so a filling step costs the resources still in use,
    not a pass over every flow's resources.
    """
    left: dict[FluidResource, float] = {}
    users: dict[FluidResource, int] = {}
    for f in flows:
        f.rate, f.frozen = 0.0, False
        for r in f.resources:
            if r in users:
                users[r] += 1
            else:
                left[r], users[r] = r.capacity, 1
    active, level = list(flows), 0.0
    while active:
        step = min(left[r] / n for r, n in users.items())
        step = min(step, min(f.cap for f in active) - level)
        level += step
        saturated = set()
        for r, n in users.items():
            left[r] -= step * n
            if left[r] <= _REL_TOL * r.capacity:
                saturated.add(r)
        still = []
        for f in active:
            if (f.cap < INF and f.cap - level <= _REL_TOL * f.cap) or any(r in saturated for r in f.resources):
                f.rate, f.frozen = level, True
                for r in f.resources:
                    users[r] -= 1
                    if not users[r]:
                        del users[r]
            else:
                still.append(f)
        for f in still:
            f.rate = level
        active = still


class _Active:
    """A flow in progress: done when its group has served ``target`` units per flow (module docstring)."""

    __slots__ = ("amount", "event", "group", "target", "seq", "live", "count")

    def __init__(self, amount: float, event: simpy.Event, group: _Group, target: float, seq: int,
                 count: int = 1) -> None:
        self.amount, self.event, self.group, self.target, self.seq = amount, event, group, target, seq
        self.live, self.count = True, count


class _Group:
    """The active flows crossing the same resources (a tuple, repeats included) with the same cap: one rate.

    ``served`` units per flow have been served since the group was created, as of simulated time ``stamp``; a
    flow is due when ``served`` reaches its ``target``. ``by_target`` and ``by_settle`` are heaps of the flows
    by ``target`` and by ``target - 1e-9 amount`` (where it counts as done); ``gen`` tells the scheduler's
    current heap entries from stale ones.
    """

    __slots__ = ("resources", "cap", "rate", "served", "stamp", "size", "by_target", "by_settle", "gen", "seq")

    def __init__(self, resources: tuple[FluidResource, ...], cap: float, stamp: float, seq: int) -> None:
        self.resources, self.cap, self.rate, self.served, self.stamp = resources, cap, 0.0, 0.0, stamp
        self.size, self.gen, self.seq = 0, 0, seq
        self.by_target: list[tuple[float, int, _Active]] = []
        self.by_settle: list[tuple[float, int, _Active]] = []

    def advance(self, now: float) -> None:
        """Serve each flow ``rate * (now - stamp)`` units."""
        if now != self.stamp:
            self.served += self.rate * (now - self.stamp)
            self.stamp = now

    def _top(self, heap: list[tuple[float, int, _Active]]) -> float:
        while heap and not heap[0][2].live:
            heapq.heappop(heap)
        return heap[0][0] if heap else INF

    def times(self) -> tuple[float, float]:
        """(earliest completion time, earliest time a flow counts as done) at the current rate."""
        target = self._top(self.by_target)
        if target == INF or self.rate <= 0:
            return INF, INF
        due = self.stamp + (target - self.served) / self.rate
        settle = self.stamp + (self._top(self.by_settle) - self.served) / self.rate
        return due, min(settle, due - _TIME_TOL_S)

    def done(self) -> list[_Active]:
        """The flows that count as done now (after :meth:`advance`); they are removed from the heaps."""
        out = []
        for heap in (self.by_settle, self.by_target):
            while heap and (not heap[0][2].live or heap[0][0] <= self.served
                            or (heap[0][2].target - self.served) <= _TIME_TOL_S * self.rate):
                _, _, f = heapq.heappop(heap)
                if f.live:
                    f.live = False
                    out.append(f)
        return out

    def first(self) -> _Active | None:
        """The flow due first."""
        return self.by_target[0][2] if self._top(self.by_target) < INF else None


class FluidScheduler:
    """Max-min fair sharing of :class:`FluidResource` capacities among active flows (module docstring).

    Args:
        env: the simpy environment (time in seconds).
    """

    _FILL_PRIORITY = 2
    """simpy priority of the deferred fill: after ``URGENT`` (0) and ``NORMAL`` (1) events of the same time."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self._groups: dict[tuple[tuple[FluidResource, ...], float], _Group] = {}
        self._by_resource: dict[FluidResource, dict[_Group, None]] = {}
        self._dirty: dict[FluidResource, None] = {}
        self._fresh: dict[_Group, None] = {}
        self._fill_pending = False
        self._due: list[tuple[float, int, int, _Group]] = []
        self._settle: list[tuple[float, int, int, _Group]] = []
        self._timer_at = INF
        self._timer_version = 0
        self._seq = 0
        self._active = 0

    def start(self, resources: Iterable[FluidResource], amount: float, cap: float = INF,
              count: int = 1) -> simpy.Event:
        """Start a flow now (``count`` identical flows).

        Args:
            resources: every resource the flow crosses (it gets the same rate on all of them).
            amount: units to move (bytes, or core-seconds); <= 0 completes immediately.
            cap: maximum rate of this flow (e.g. 1 core), default unbounded.
            count: identical flows started at once (same resources, amount and cap): each gets its own max-min
                share, as ``count`` calls would, and all finish together (identical flows in one group get the
                same rate and are due at the same time: module docstring); >= 1.

        Returns:
            An event that fires when the flow (all ``count`` of them) has moved ``amount``.

        Raises:
            ValueError: ``count`` < 1.
        """
        if count < 1:
            raise ValueError(f"count: {count} identical flows; must be >= 1")
        event = self.env.event()
        res = tuple(resources)
        if amount <= 0 or not res:
            event.succeed()
            return event
        now, amount, key = float(self.env.now), float(amount), (res, float(cap))
        self._seq += 1
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _Group(res, float(cap), now, self._seq)
            for r in res:
                self._by_resource.setdefault(r, {})[group] = None
        group.advance(now)
        flow = _Active(amount, event, group, group.served + amount, self._seq, count)
        heapq.heappush(group.by_target, (flow.target, flow.seq, flow))
        heapq.heappush(group.by_settle, (flow.target - _REL_TOL * amount, flow.seq, flow))
        group.size += count
        self._fresh[group] = None
        self._active += count
        self._touch(res)
        return event

    @property
    def num_active(self) -> int:
        """Flows in progress."""
        return self._active

    def _touch(self, resources: tuple[FluidResource, ...]) -> None:
        """Mark ``resources`` as having changed flows and make sure a fill runs at the end of this instant."""
        for r in resources:
            self._dirty[r] = None
        if not self._fill_pending:
            self._fill_pending = True
            event = simpy.Event(self.env)
            event._ok, event._value = True, None  # a bare, already-successful event (as simpy's Timeout)
            event.callbacks.append(self._fill)
            self.env.schedule(event, self._FILL_PRIORITY)  # type: ignore[arg-type]  # simpy priorities are ints

    def _component(self) -> list[_Group]:
        """The groups linked, through shared resources, to a resource marked dirty (their connected components)."""
        seen: set[FluidResource] = set()
        groups: dict[_Group, None] = {}
        stack = list(self._dirty)
        by_resource = self._by_resource
        while stack:
            r = stack.pop()
            if r in seen:
                continue
            seen.add(r)
            for g in by_resource.get(r, ()):
                if g not in groups:
                    groups[g] = None
                    stack.extend(g.resources)
        return list(groups)

    def _fill(self, _event: Any = None) -> None:
        """Refill the rates of the changed components and arm the timer for the earliest completion."""
        self._fill_pending = False
        now = float(self.env.now)
        groups = self._component()
        self._dirty.clear()
        fresh = self._fresh
        for g, rate in zip(groups, group_rates(groups)):
            if rate != g.rate:
                g.advance(now)
                g.rate = rate
            elif g not in fresh:
                continue
            self._push(g)
        self._fresh = {}
        self._arm()

    def _push(self, g: _Group) -> None:
        """Record ``g``'s next completion and settle times in the scheduler's heaps."""
        g.gen += 1
        due, settle = g.times()
        if due < INF:
            heapq.heappush(self._due, (due, g.seq, g.gen, g))
            heapq.heappush(self._settle, (settle, g.seq, g.gen, g))

    def _earliest(self) -> _Group | None:
        """The group with the flow due first (stale heap entries dropped on the way), or None."""
        heap = self._due
        while heap and (heap[0][2] != heap[0][3].gen or not heap[0][3].size):
            heapq.heappop(heap)
        return heap[0][3] if heap else None

    def _arm(self) -> None:
        """Let one timer wait for the earliest completion (earlier timers are superseded)."""
        first = self._earliest()
        due = self._due[0][0] if first is not None else INF
        if due == self._timer_at:
            return
        self._timer_at = due
        self._timer_version += 1
        if due == INF:
            return
        version = self._timer_version
        timer = self.env.timeout(max(0.0, due - float(self.env.now)))
        timer.callbacks.append(lambda _ev: self._wake(version))

    def _wake(self, version: int) -> None:
        """Finish every flow that is done now (module docstring), in start order; refill at the instant's end."""
        if version != self._timer_version:
            return  # superseded by a later fill
        self._timer_at = INF
        now = float(self.env.now)
        heap, done = self._settle, []
        while heap and heap[0][0] <= now:
            _, _, gen, g = heapq.heappop(heap)
            if gen == g.gen and g.size:
                g.advance(now)
                done.extend(g.done())
                self._fresh[g] = None  # its next times change: pushed again by the fill
                self._touch(g.resources)
        if not done:  # floating-point: finish the flow that is closest to done
            earliest = self._earliest()
            f = earliest.first() if earliest is not None else None
            if earliest is None or f is None:
                return
            g = earliest
            f.live = False
            done = [f]
            self._fresh[g] = None
        for f in sorted(done, key=lambda f: f.seq):
            g = f.group
            g.size -= f.count
            if not g.size:
                g.gen += 1  # its heap entries are stale
                del self._groups[(g.resources, g.cap)]
                for r in dict.fromkeys(g.resources):  # a resource may repeat (a folded machine's image)
                    users = self._by_resource[r]
                    del users[g]
                    if not users:
                        del self._by_resource[r]
                self._fresh.pop(g, None)
            self._active -= f.count
            self._touch(g.resources)
            f.event.succeed()


def group_rates(groups: list[Any]) -> list[float]:
    """Max-min fair rate of each group's flows: :func:`max_min_rates` over the flows of ``groups`` (one or
    several connected components), each group standing for its ``size`` flows with the same ``resources`` and
    ``cap``.

    Progressive filling with the same steps and arithmetic as :func:`max_min_rates` (on the same flows it gives
    the same numbers): all unfrozen groups grow at the same pace until a resource saturates (the groups crossing
    it freeze) or a group reaches its cap; a resource keeps its count of unfrozen flows and the groups crossing
    it, so a freeze costs the frozen groups' resources. Source: Bertsekas and Gallager, "Data Networks", 1992,
    §6.5.2.
    """
    if len(groups) == 1:  # one filling step: the tightest resource (each counted once per crossing) or the cap
        g = groups[0]
        crossings = {r: g.resources.count(r) * g.size for r in g.resources}
        return [min(min(r.capacity / n for r, n in crossings.items()), g.cap)]
    left: dict[FluidResource, float] = {}
    users: dict[FluidResource, int] = {}
    cross: dict[FluidResource, list[int]] = {}
    for i, g in enumerate(groups):
        n = g.size
        for r in g.resources:
            if r in users:
                users[r] += n
                cross[r].append(i)
            else:
                left[r], users[r], cross[r] = r.capacity, n, [i]
    rates: list[float] = [-1.0] * len(groups)
    capped = sorted((i for i, g in enumerate(groups) if g.cap < INF), key=lambda i: groups[i].cap)
    next_cap, unfrozen, level = 0, len(groups), 0.0
    while unfrozen:
        step = min(left[r] / n for r, n in users.items())
        while next_cap < len(capped) and rates[capped[next_cap]] >= 0:
            next_cap += 1
        if next_cap < len(capped):
            step = min(step, groups[capped[next_cap]].cap - level)
        level += step
        frozen = []
        for r, n in users.items():
            left[r] -= step * n
            if left[r] <= _REL_TOL * r.capacity:
                for i in cross[r]:
                    if rates[i] < 0:
                        rates[i] = level
                        frozen.append(i)
        while next_cap < len(capped):
            i = capped[next_cap]
            cap = groups[i].cap
            if rates[i] < 0:
                if cap - level > _REL_TOL * cap:
                    break
                rates[i] = level
                frozen.append(i)
            next_cap += 1
        for i in frozen:
            n = groups[i].size
            for r in groups[i].resources:
                users[r] -= n
                if not users[r]:
                    del users[r]
        unfrozen -= len(frozen)
    return rates
