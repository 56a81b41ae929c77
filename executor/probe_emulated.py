"""``gnnplan probe --emulate``: measure the emulated cluster (:mod:`executor.emulate`) into a cluster file.

A cluster file for the emulated machines must describe what a plan run with ``gnnplan run PLAN --emulate`` gets,
not this box: each emulated machine has its share of the cores (``taskset``), possibly a CPU quota and a memory
limit (cgroup v1), and a NIC shaped by ``tc tbf``. So the probe runs where the ranks will run:

* the machine's own measurements (compute, memory bandwidth, gather, sampling, storage, fixed overheads:
  :func:`executor.probe.probe_machine`) run inside machine 0's namespace, pinned to its cores and inside its
  cgroups, for ``workers_per_machine`` workers;
* the network is measured between machines: a gloo send/recv ping-pong between a rank on machine 0 and a rank on
  machine 1 over the shaped veth pairs and bridge, fitted with the alpha-beta model
  (:func:`executor.probe_io.fit_latency_bandwidth`; Hockney, Parallel Computing 20(3), 1994), and the fixed cost
  of a collective call from the mean 1 KiB ``all_reduce`` between the same two ranks, and of an all-to-all call
  from their mean 1 KiB ``all_to_all_single`` (:func:`executor.probe_io.collective_means_s`), not from two processes
  inside machine 0, whose calls never cross the shaped link.

The result has ``num_machines`` machines of ``workers_per_machine`` workers each; every measured field's
``sources`` entry says it was measured on the emulated machine. A token bucket passes a little less than its rate
(TCP/IP headers and the bucket's bursts: ~95 Mbit/s through a 100 Mbit/s tbf measured here), so the probed
network bandwidth is the achieved one, which is what the simulator prices; run plans with the same shaping rate
(``gnnplan run PLAN --emulate --bandwidth RATE``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

from gnnplan.executor.emulate import (
    MASTER_PORT,
    QUOTA_SOURCE,
    SHAPED_SOURCE,
    EmulatedCluster,
    EmulationError,
    MachineLimits,
    rank_environment,
)
from gnnplan.executor.launch import WorkerError
from gnnplan.executor.probe_calls import MIN_FIXED_S
from gnnplan.executor.probe_io import (
    COLLECTIVE_BLOCKS,
    COLLECTIVE_BUSY_S,
    COLLECTIVE_BYTES,
    COLLECTIVE_CALLS,
    jitter_source,
)
from gnnplan.executor.probe_shares import loopback_link
from gnnplan.simulator.errors import SpecError

__all__ = ["emulated_network_sources", "probe_emulated", "shaped_latency_bandwidth"]

TIMEOUT_S = 900.0
"""Longest a probe step may take before it is ended with an error (the full machine probe takes about a minute on
one core of this box; a CPU quota stretches it)."""


def probe_emulated(num_machines: int = 2, workers_per_machine: int = 1, limits: MachineLimits | None = None,
                   quick: bool = False, timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
    """Measure an emulated cluster of ``num_machines`` machines into a cluster mapping named ``emulated``.

    Args:
        num_machines: emulated machines, >= 2 (the network is measured between two of them).
        workers_per_machine: worker processes (ranks) per machine the cluster is modelled for (>= 1).
        limits: each machine's NIC rate (bytes/s; None = unshaped), CPU quota (cores) and memory limit (bytes).
        quick: the probe's small sizes (:data:`executor.probe_host.QUICK`; seconds, less accurate).
        timeout_s: longest each step may take.

    Returns:
        A mapping valid for :func:`simulator.hardware.spec.cluster_from_dict`: ``num_machines`` x
        ``workers_per_machine`` workers, the machine's measurements from inside machine 0, the network measured
        between machines 0 and 1.

    Raises:
        SpecError: ``num_machines`` < 2 or ``workers_per_machine`` < 1 (one line naming the flag).
        EmulationError: not root / no CAP_NET_ADMIN / a tool missing, or another emulated run is live.
        WorkerError: a probe step failed or timed out (its last stderr line).
    """
    from gnnplan.executor.probe_host import FULL, QUICK

    for name, value, low in (("--machines", num_machines, 2), ("--workers", workers_per_machine, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise SpecError(f"{name}: must be an integer >= {low} with --emulate (got {value!r})")
    limits = limits or MachineLimits(None)
    sizes = QUICK if quick else FULL
    with tempfile.TemporaryDirectory(prefix="gnnplan-probe-") as tmp, EmulatedCluster(num_machines, limits) as cl:
        machine = _machine_probe(cl, workers_per_machine, quick, Path(tmp), timeout_s)
        times, reduce, exchange, jitter = _ping_pong(cl, list(sizes.message_sizes), sizes.message_repeats,
                                                     Path(tmp), timeout_s)
    latency, bandwidth = shaped_latency_bandwidth(sizes.message_sizes, times)
    return _cluster(machine, num_machines, workers_per_machine, limits, (latency, bandwidth, reduce, exchange),
                    sizes, jitter)


def shaped_latency_bandwidth(sizes_bytes: list[int] | tuple[int, ...], times_s: list[float]) -> tuple[float, float]:
    """Alpha-beta parameters of a link shaped by a token bucket.

    A token bucket passes a burst up to its bucket size at line rate (tc-tbf(8); :func:`executor.emulate.tbf_args`
    sizes it to 10 ms of traffic, at least 32 KiB), so small messages look faster than the shaped rate and a fit
    over all sizes (:func:`executor.probe_io.fit_latency_bandwidth`, relative residuals) overestimates the
    bandwidth (21 MB/s fitted for a 12.5 MB/s tbf, measured here). The bandwidth is therefore Hockney's asymptotic
    rate r_inf, the slope between the two largest messages (both far above the bucket); the latency comes from the
    fit over all sizes, which the small messages determine. Source: Hockney, Parallel Computing 20(3), 1994.

    Args:
        sizes_bytes: message sizes, at least two distinct; the two largest should exceed the bucket (>= 1 MiB).
        times_s: one-way seconds per size.

    Returns:
        (latency_s, bandwidth_bytes_per_s).

    Raises:
        ValueError: fewer than two distinct sizes, or the largest message was not slower than the second largest.
    """
    from gnnplan.executor.probe_io import fit_latency_bandwidth

    latency, _ = fit_latency_bandwidth(sizes_bytes, times_s)
    (s1, t1), (s2, t2) = sorted(zip(sizes_bytes, times_s))[-2:]
    if s2 <= s1 or t2 <= t1:
        raise ValueError(f"probe --emulate: the largest messages ({s1} B in {t1:.3g} s, {s2} B in {t2:.3g} s) give "
                         "no bandwidth")
    return latency, (s2 - s1) / (t2 - t1)


def _cluster(machine: dict[str, Any], m: int, w: int, limits: MachineLimits,
             network: tuple[float, float, float, float], sizes: Any,
             jitter: tuple[float, float, int] = (0.0, 0.0, 0)) -> dict[str, Any]:
    """The machine probe's mapping turned into the emulated cluster's; ``network`` is what was measured between
    machines: (latency s, bandwidth B/s, mean :data:`~executor.probe_io.COLLECTIVE_BYTES` all-reduce s, mean
    all-to-all of the same bytes s); ``jitter`` the stragglers between them (``jitter_s``, mean wait s, calls:
    :func:`executor.probe_io.straggler_jitter`), which replaces the machine probe's (two processes inside one
    machine, sharing its cores)."""
    from gnnplan.executor.probe import _sig
    from gnnplan.executor.probe_collectives import all_to_all_fixed_s, collective_fixed_s
    from gnnplan.executor.probe_host import host_memory_bytes

    latency_s, bandwidth_bytes_per_s, reduce_s, exchange_s = network
    collective = collective_fixed_s(reduce_s, latency_s, bandwidth_bytes_per_s)
    all_to_all = all_to_all_fixed_s(exchange_s, latency_s, bandwidth_bytes_per_s)

    data = dict(machine)
    memory = limits.memory_bytes or host_memory_bytes() / m
    data.update(name="emulated", num_machines=m, gpus_per_machine=w)
    data["host"] = {**machine["host"], "memory_bytes": _sig(memory)}
    data["gpu"] = {**machine["gpu"], "memory_bytes": _sig(memory / w)}
    data["jitter_s"] = _sig(jitter[0])
    if w > 1:  # a machine's workers talk over its loopback
        data["nvlink"] = loopback_link(machine["network"])
    data["network"] = {**machine["network"], "bandwidth_bytes_per_s": _sig(bandwidth_bytes_per_s),
                       "latency_s": _sig(latency_s), "per_collective_s": _sig(collective),
                       "per_all_to_all_s": _sig(all_to_all)}
    # the machine probe's priors hold its loopback network; calibration must regularise toward the emulated NIC
    data["priors"] = {**machine.get("priors", {}), "network.bandwidth_bytes_per_s": _sig(bandwidth_bytes_per_s),
                      "network.latency_s": _sig(latency_s), "network.per_collective_s": _sig(collective),
                      "network.per_all_to_all_s": _sig(all_to_all)}
    sources = {k: v.replace("measured by gnnplan probe", "measured by gnnplan probe --emulate inside emulated "
                                                          "machine 0", 1)
               for k, v in machine.get("sources", {}).items()}
    sources.update(emulated_network_sources(m, w, limits, memory, sizes, reduce_s, exchange_s))
    sources["jitter_s"] = (f"measured by gnnplan probe --emulate on {datetime.date.today().isoformat()}: "
                           + jitter_source("a rank on emulated machine 0 and one on machine 1", *jitter))
    if w > 1:
        sources["nvlink"] = (f"measured by gnnplan probe --emulate inside emulated machine 0 on "
                             f"{datetime.date.today().isoformat()}: as the loopback between the machine's worker "
                             "processes (gloo inside one namespace; no NVLink on a CPU), the machine probe's "
                             "network.bandwidth_bytes_per_s and network.latency_s")
    data["sources"] = sources
    return data


def emulated_network_sources(m: int, w: int, limits: MachineLimits, memory_bytes: float,
                             sizes: Any, all_reduce_s: float, all_to_all_s: float) -> dict[str, str]:
    """``sources`` entries of the fields :func:`probe_emulated` sets itself."""
    date = datetime.date.today().isoformat()
    shaped = (f"{SHAPED_SOURCE.format(limits.bandwidth_bytes_per_s)} per direction"
              if limits.bandwidth_bytes_per_s else "NICs unshaped (veth pairs and a bridge)")
    quota = f", {QUOTA_SOURCE.format(limits.cpu_quota_cores)}" if limits.cpu_quota_cores else ""
    memo = (f"memory limit {memory_bytes:.4g} B (cgroup memory.limit_in_bytes)" if limits.memory_bytes
            else f"host memory (sysconf) / {m} emulated machines = {memory_bytes:.4g} B")
    methods = {
        "num_machines gpus_per_machine": f"{m} emulated machines (network namespaces{quota}) x {w} worker(s) each",
        "host.memory_bytes": memo,
        "gpu.memory_bytes": f"{memo}, / {w} worker(s)",
        "network.bandwidth_bytes_per_s network.latency_s": (
            f"gloo send/recv ping-pong between a rank on emulated machine 0 and one on machine 1 ({shaped}), "
            f"sizes {', '.join(map(str, sizes.message_sizes))} B, median of {sizes.message_repeats} interleaved "
            "round trips / 2 per size; bandwidth = slope between the two largest sizes (asymptotic rate, above the "
            "token bucket's burst), latency fitted by non-negative least squares on relative residuals over all "
            "sizes"),
        "network.per_collective_s": (
            f"mean {COLLECTIVE_BYTES}-byte float32 gloo all_reduce between the same two ranks ({all_reduce_s:.4g} "
            f"s; executor.probe_io.collective_means_s: {COLLECTIVE_BLOCKS} blocks of {COLLECTIVE_CALLS} calls, "
            f"in turn with the all-to-all's, each after {COLLECTIVE_BUSY_S * 1e3:g} ms of compute, 5% trimmed each "
            "side) minus its ring's 2 messages at "
            f"network.latency_s and its bytes at network.bandwidth_bytes_per_s, at least {MIN_FIXED_S:g} s"),
        "network.per_all_to_all_s": (
            f"mean {COLLECTIVE_BYTES}-byte float32 gloo all_to_all_single (half to the other rank) between the "
            f"same two ranks ({all_to_all_s:.4g} s; the same calls and compute) minus its one message at "
            f"network.latency_s and network.bandwidth_bytes_per_s, at least {MIN_FIXED_S:g} s"),
    }
    return {k: f"measured by gnnplan probe --emulate on {date}: {v}" for ks, v in methods.items()
            for k in ks.split()}


def _module_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "gnnplan.executor.probe_emulated", *args]


def _machine_probe(cluster: EmulatedCluster, workers: int, quick: bool, tmp: Path, timeout_s: float
                   ) -> dict[str, Any]:
    """:func:`executor.probe.probe_machine` run inside machine 0 (its namespace, cores and cgroups)."""
    argv = _module_argv("machine", "--workers", str(workers), *(["--quick"] if quick else []))
    with open(tmp / "machine.out", "w+") as out, open(tmp / "machine.err", "w+") as err:
        proc = subprocess.Popen(cluster.command(0, argv), stdout=out, stderr=err, text=True)
        _wait([proc], [err], timeout_s, "the machine probe")
        return _json_line(out, "the machine probe")


def _ping_pong(cluster: EmulatedCluster, sizes: list[int], repeats: int, tmp: Path, timeout_s: float
               ) -> tuple[list[float], float, float, tuple[float, float, int]]:
    """One-way times per size between a rank on machine 0 and one on machine 1, the mean 1 KiB all-reduce and
    all-to-all between them (:func:`executor.probe_io.collective_means_s`) and their stragglers
    (:func:`executor.probe_io.straggler_jitter`: ``jitter_s``, mean wait s, calls); rank 0 prints them."""
    argv = _module_argv("pingpong", "--sizes", ",".join(map(str, sizes)), "--repeats", str(repeats))
    with open(tmp / "pp.out", "w+") as out, open(tmp / "pp0.err", "w+") as err0, \
            open(tmp / "pp1.err", "w+") as err1:
        # world of 2, one rank per machine: rank r runs on machine r (rank_environment's per_machine = 1)
        procs = [subprocess.Popen(cluster.command(0, argv), env=rank_environment(0, 2, 1), stdout=out, stderr=err0,
                                  text=True)]
        if not cluster.wait_listening(0, MASTER_PORT, timeout_s=min(timeout_s, 120.0)):
            _wait(procs, [err0], 0.0, "the network probe")
            raise WorkerError(f"probe --emulate: rank 0's rendezvous store did not listen on port {MASTER_PORT}")
        procs.append(subprocess.Popen(cluster.command(1, argv), env=rank_environment(1, 2, 1),
                                      stdout=subprocess.DEVNULL, stderr=err1, text=True))
        _wait(procs, [err0, err1], timeout_s, "the network probe")
        got = _json_line(out, "the network probe")
    times = got.get("one_way_s") if isinstance(got, dict) else None
    jitter = got.get("jitter") if isinstance(got, dict) else None
    if (not isinstance(times, list) or len(times) != len(sizes)
            or not all(isinstance(got.get(k), float) for k in ("all_reduce_s", "all_to_all_s"))
            or not isinstance(jitter, list) or len(jitter) != 3):
        raise WorkerError(f"probe --emulate: the network probe returned {got!r}")
    return ([float(t) for t in times], float(got["all_reduce_s"]), float(got["all_to_all_s"]),
            (float(jitter[0]), float(jitter[1]), int(jitter[2])))


def _wait(procs: list[subprocess.Popen[str]], errs: list[IO[str]], timeout_s: float, what: str) -> None:
    """Wait for every process to exit 0; on a failure or the timeout kill the rest and raise one line."""
    import time

    deadline = time.monotonic() + timeout_s
    try:
        while True:
            codes = [p.poll() for p in procs]
            for i, code in enumerate(codes):
                if code not in (None, 0):
                    raise WorkerError(f"probe --emulate: {what} (process {i}) exited with code {code}: "
                                      f"{_last_line(errs[i])}")
            if all(c == 0 for c in codes):
                return
            if time.monotonic() > deadline:
                raise WorkerError(f"probe --emulate: {what} did not finish within {timeout_s:g} s")
            time.sleep(0.1)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def _last_line(log: IO[str]) -> str:
    log.flush()
    log.seek(0)
    lines = [line.strip() for line in log.read().splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def _json_line(out: IO[str], what: str) -> Any:
    line = _last_line(out)
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        raise WorkerError(f"probe --emulate: {what} printed no result: {line}") from None


def _main_machine(ns: argparse.Namespace) -> None:
    from gnnplan.executor.probe import probe_machine

    sys.stdout.write(json.dumps(probe_machine(num_workers=ns.workers, quick=ns.quick)) + "\n")


def _main_pingpong(ns: argparse.Namespace) -> None:
    from gnnplan.executor import comm
    from gnnplan.executor.launch import torchrun_topology
    from gnnplan.executor.probe_io import collective_means_s, ping_pong_times, straggler_jitter

    topo = torchrun_topology()
    try:
        times = ping_pong_times(topo.rank, [int(s) for s in ns.sizes.split(",")], ns.repeats)
        reduce, exchange = collective_means_s()
        jitter = straggler_jitter()
    finally:
        comm.destroy()
    if topo.rank == 0:
        sys.stdout.write(json.dumps({"one_way_s": times, "all_reduce_s": reduce, "all_to_all_s": exchange,
                                     "jitter": list(jitter)}) + "\n")


def main(argv: list[str] | None = None) -> int:
    """Entry of the processes :func:`probe_emulated` starts inside the emulated machines:
    ``machine --workers W [--quick]`` (prints the machine probe as JSON) and ``pingpong --sizes S,... --repeats R``
    (a rank of the network ping-pong and collective from torchrun's environment; rank 0 prints the one-way times
    and the mean all-reduce and all-to-all as JSON)."""
    parser = argparse.ArgumentParser(prog="python -m gnnplan.executor.probe_emulated", description=main.__doc__)
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("machine")
    p.add_argument("--workers", type=int, required=True)
    p.add_argument("--quick", action="store_true")
    p = sub.add_parser("pingpong")
    p.add_argument("--sizes", required=True)
    p.add_argument("--repeats", type=int, required=True)
    ns = parser.parse_args(argv)
    {"machine": _main_machine, "pingpong": _main_pingpong}[ns.step](ns)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (SpecError, EmulationError, ValueError) as exc:
        sys.stderr.write(f"{exc}\n")
        sys.exit(2)
