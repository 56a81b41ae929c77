"""An emulated multi-machine cluster on this box: one Linux network namespace per machine, a shaped NIC each.

``gnnplan run PLAN --emulate`` runs every machine of a multi-machine plan in its own network namespace
``gnnplan-m<i>``. Each has one interface ``eth0`` (address ``198.18.0.<i+1>/24``, from the benchmarking range
198.18.0.0/15 of RFC 2544) joined to a bridge in a hub namespace ``gnnplan-hub`` by a veth pair; nothing is
added to the host's own namespace. Each machine's NIC is shaped in both directions to the plan's
``network.bandwidth_bytes_per_s`` with a token-bucket filter that never sends faster than that rate (``tc qdisc ...
tbf`` with a peak rate, :func:`tbf_args`: on ``eth0`` for what it sends, on its hub-side peer for what it receives);
netem is not in this kernel, so no latency is added. A machine's ranks are pinned to its share of the cores
(``taskset``) with the largest CPU weight there (cgroup v1 ``cpu.shares``), and may get a compute quota
(``cpu.cfs_quota_us``) and a memory limit (cgroup v1 ``memory.limit_in_bytes``). The ranks start through the
torchrun entry point (:mod:`executor.launch`) with ``GLOO_SOCKET_IFNAME=eth0`` and rank 0 on machine 0.

Everything is removed on exit, on error and on Ctrl-C; a run killed before it could clean up leaves a state file
naming its process, and the next run removes that stale set when the process is gone.

Needs root with CAP_NET_ADMIN (namespaces, links, qdiscs) and the ``ip``, ``tc`` and ``taskset`` commands.
Sources: ip-netns(8), ip-link(8) (veth, bridge), tc-tbf(8) (rate, burst, latency, peakrate, mtu); Linux kernel
documentation scheduler/sched-bwc.rst (CFS bandwidth control: ``cpu.cfs_quota_us``, ``cpu.cfs_period_us``) and
admin-guide/cgroup-v1/memory.rst (``memory.limit_in_bytes``). :mod:`executor.emulated_run` runs a plan on it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gnnplan.executor import faults
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.wording import counted

PREFIX = "gnnplan-"
HUB = f"{PREFIX}hub"
BRIDGE = "gnpbr0"
SUBNET = "198.18.0"
"""Addresses of the emulated machines: 198.18.0.0/15 is reserved for benchmarking (RFC 2544, RFC 6890)."""
IFACE = "eth0"
STATE_FILE = Path("/run/gnnplan-emulate.json")
MASTER_PORT = 29500
CGROUP_ROOT = Path("/sys/fs/cgroup")
CFS_PERIOD_US = 100_000
"""CFS bandwidth period: the kernel default (sched-bwc.rst). A quota caps a machine's average CPU time per period;
it is not a uniformly slower core: a compute burst runs at full speed until the period's budget is spent. Measured
2026-11-28 (this machine, CONFIG_HZ=250; a busy loop of fixed work alternating with sleep, quota 0.5 core,
taskset to one core): 5 ms bursts with 5 ms sleeps took 1.14x their unthrottled time (a core at half speed: 2x),
and 20 ms bursts with 20 ms sleeps 1.04x. Shorter periods throttle inside a burst only once the burst is several
scheduler ticks long (20 ms bursts: 1.19x at a 20 ms period, 1.85x at 5 ms, 2.34x at 2 ms; 5 ms bursts: 0.85-1.42x
at 1-20 ms periods), so the default stays; a prediction that models the quota as a slower core overestimates a
step whose CPU use per period stays under the quota."""
CPU_SHARES = 262_144
"""An emulated machine's CPU weight: the largest cgroup v1 ``cpu.shares`` (the kernel's MAX_SHARES, 2^18; the
default is 1024), so on a shared box other processes run on its cores only when its ranks leave them idle."""
NETNS_ETC = Path("/etc/netns")
"""Per-namespace files ``ip netns exec`` bind-mounts over /etc (ip-netns(8))."""
TBF_LATENCY = "100ms"
"""Longest a packet may wait in the token bucket before it is dropped (tc-tbf(8))."""
PEAK_RATE_FACTOR = 1.02
"""The token bucket's peak rate over its rate (:func:`tbf_args`; tc-tbf(8) requires peakrate > rate)."""
PEAK_BUCKET_S = 0.0005
"""Traffic the peak-rate bucket holds, in seconds at the peak rate (:func:`tbf_args`)."""
GSO_PACKET_BYTES = 70_000
"""A whole GSO packet on a veth (64 KiB of payload plus headers) fits a peak bucket this large."""
SEGMENTING_MAX_BYTES = 20_000
"""Largest peak bucket for which tbf's splitting of GSO packets into segments kept the rate (measured)."""


class EmulationError(SpecError):
    """The emulated cluster cannot be set up here (one line: what is missing and what to do)."""


@dataclass(frozen=True)
class MachineLimits:
    """What each emulated machine gets.

    Attributes:
        bandwidth_bytes_per_s: NIC rate in each direction (None = unshaped).
        cpu_quota_cores: cores of CPU time per wall second for the machine's processes (None = no quota).
        memory_bytes: memory limit of the machine's processes (None = no limit).
    """

    bandwidth_bytes_per_s: float | None
    cpu_quota_cores: float | None = None
    memory_bytes: float | None = None


def machine_ns(i: int) -> str:
    """The network namespace of machine ``i``."""
    return f"{PREFIX}m{i}"


def machine_address(i: int) -> str:
    """Machine ``i``'s address."""
    return f"{SUBNET}.{i + 1}"


def _run(cmd: list[str]) -> str:
    """Run a set-up command; its failure is one :class:`EmulationError` line naming it."""
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        why = (proc.stderr or proc.stdout).strip().splitlines()
        raise EmulationError(f"emulate: `{' '.join(cmd)}` failed: {why[-1] if why else proc.returncode}")
    return proc.stdout


def check_available() -> None:
    """Raise :class:`EmulationError` unless this process can build namespaces (root, CAP_NET_ADMIN, tools)."""
    missing = [t for t in ("ip", "tc", "ss", "taskset") if shutil.which(t) is None]
    if missing:
        raise EmulationError(f"--emulate: needs the commands {', '.join(missing)} (Debian: iproute2, util-linux)")
    if os.geteuid() != 0 or not _has_net_admin():
        raise EmulationError("--emulate: needs root with CAP_NET_ADMIN (network namespaces, veth pairs, tc)")


def _has_net_admin() -> bool:
    cap_net_admin = 12  # linux/capability.h
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> cap_net_admin & 1)
    return False


SHAPED_SOURCE = "NICs shaped by tc tbf to {:.4g} B/s"
"""How a cluster measured on emulated machines (``probe --emulate``) names their NIC shaping in its ``sources``; read
back by :func:`executor.run_notes.emulation_note`."""
QUOTA_SOURCE = "CPU quota {:g} cores"
"""How it names their CPU quota, likewise."""
MAX_SHAPED_BYTES_PER_S = 1e12 / 8
"""Fastest NIC rate :func:`tbf_args` shapes: 1 Tbit/s. Its rate bucket holds 10 ms of traffic, and tc-tbf(8) takes the
burst as a 32-bit byte count (at most 4 GiB: 3.4 Tbit/s); a faster rate failed inside ``tc`` with "illegal value for
burst" (2026-12-01), after the namespaces were made."""


def tbf_args(bandwidth_bytes_per_s: float) -> list[str]:
    """``tc`` arguments of a token bucket that never sends faster than ``bandwidth_bytes_per_s``, as a NIC.

    A plain token bucket (rate, burst) lets a message up to its burst through at the veth's own speed after an
    idle gap, and a training step's messages arrive after idle gaps (its compute): with a burst of 10 ms of
    traffic, a 737 kB all-reduce shaped to 1 Gbit/s took 4.0 ms, as long as unshaped (2026-11-23, this machine),
    instead of >= 5.9 ms. A NIC never exceeds its line rate, so the bucket also gets a peak rate
    (tc-tbf(8) ``peakrate``, 2% above the rate: it must exceed it) with a small second bucket (``mtu``, the
    minburst). The second bucket holds :data:`PEAK_BUCKET_S` of traffic, at least 3000 bytes (two segments);
    between 20 kB and one whole GSO packet (:data:`GSO_PACKET_BYTES`) it is raised to a whole packet, because
    below that tbf splits every GSO packet into segments and at >= 400 Mbit/s that packet rate throttled the
    link here (1 Gbit/s with a 64 KiB bucket moved 65 MB/s). Measured with 1 kB - 4 MB messages after 60 ms
    idle: 100 Mbit/s 12.0-13.0 MB/s, 300 Mbit/s 36-46 MB/s, 1 Gbit/s 87-136 MB/s (64 kB: one packet, 0.18 ms).
    The rate bucket keeps a burst of 10 ms of traffic (at least 32 KiB; tc-tbf(8): at least rate / HZ), which
    now drains at the peak rate, and :data:`TBF_LATENCY`."""
    burst = max(int(bandwidth_bytes_per_s * 0.01), 32 * 1024)
    peak = bandwidth_bytes_per_s * PEAK_RATE_FACTOR
    minburst = max(3000, int(peak * PEAK_BUCKET_S))
    if SEGMENTING_MAX_BYTES < minburst < GSO_PACKET_BYTES:
        minburst = GSO_PACKET_BYTES
    return ["tbf", "rate", f"{int(bandwidth_bytes_per_s * 8)}bit", "burst", str(burst), "latency", TBF_LATENCY,
            "peakrate", f"{int(peak * 8)}bit", "mtu", str(minburst)]


def core_sets(num_machines: int, cores: list[int]) -> list[list[int]]:
    """The cores each machine's ranks are pinned to: equal contiguous shares, or one core each round-robin
    when there are more machines than cores."""
    if num_machines > len(cores):
        return [[cores[i % len(cores)]] for i in range(num_machines)]
    k = len(cores) // num_machines
    return [cores[i * k:(i + 1) * k] for i in range(num_machines)]


class EmulatedCluster:
    """The namespaces, links, qdiscs and cgroups of an emulated cluster (a context manager; module docstring).

    Args:
        num_machines: machines to emulate (>= 1).
        limits: per-machine NIC rate, CPU quota and memory limit.
    """

    def __init__(self, num_machines: int, limits: MachineLimits) -> None:
        if num_machines < 1:
            raise EmulationError(f"num_machines: must be >= 1, got {num_machines}")
        self.num_machines, self.limits = num_machines, limits
        self.cores = core_sets(num_machines, sorted(os.sched_getaffinity(0)))
        fewest, quota = min(len(c) for c in self.cores), limits.cpu_quota_cores
        if quota is not None and quota > fewest:  # a machine's processes are pinned to its cores: more is no quota
            raise EmulationError(f"--cpu-quota: at most {fewest} (each of the {num_machines} emulated machines has "
                                 f"{counted(fewest, 'core')} of this machine's {len(os.sched_getaffinity(0))}; got "
                                 f"{quota:g})")

    def __enter__(self) -> EmulatedCluster:
        check_available()
        clean_stale()
        self._previous_sigterm = signal.signal(signal.SIGTERM, _exit_on_sigterm)
        STATE_FILE.write_text(json.dumps({"pid": os.getpid(), "num_machines": self.num_machines}))
        try:
            self._build()
        except BaseException:
            teardown()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        teardown()
        signal.signal(signal.SIGTERM, self._previous_sigterm)

    _previous_sigterm: Any = signal.SIG_DFL

    def _build(self) -> None:
        _run(["ip", "netns", "add", HUB])
        _run(["ip", "-n", HUB, "link", "add", BRIDGE, "type", "bridge"])
        _run(["ip", "-n", HUB, "link", "set", BRIDGE, "up"])
        for i in range(self.num_machines):
            ns, peer = machine_ns(i), f"gnp-m{i}"
            _run(["ip", "netns", "add", ns])
            _run(["ip", "-n", HUB, "link", "add", peer, "type", "veth", "peer", "name", IFACE, "netns", ns])
            _run(["ip", "-n", HUB, "link", "set", peer, "master", BRIDGE, "up"])
            _run(["ip", "-n", ns, "addr", "add", f"{machine_address(i)}/24", "dev", IFACE])
            _run(["ip", "-n", ns, "link", "set", IFACE, "up"])
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
            self._name_files(ns)
            if self.limits.bandwidth_bytes_per_s:
                shape = tbf_args(self.limits.bandwidth_bytes_per_s)
                _run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", IFACE, "root", *shape])
                _run(["ip", "netns", "exec", HUB, "tc", "qdisc", "add", "dev", peer, "root", *shape])
            self._cgroups(i)

    def _name_files(self, ns: str) -> None:
        """``/etc/netns/<ns>/hosts`` naming every emulated machine and an empty ``resolv.conf``, which
        ``ip netns exec`` bind-mounts over /etc (ip-netns(8)): c10d's peer-name look-ups answer from the file
        instead of waiting for a DNS server the namespace cannot reach."""
        folder = NETNS_ETC / ns
        folder.mkdir(parents=True, exist_ok=True)
        names = "".join(f"{machine_address(i)} {machine_ns(i)}\n" for i in range(self.num_machines))
        (folder / "hosts").write_text(f"127.0.0.1 localhost\n{names}")
        (folder / "resolv.conf").write_text("")

    def _cgroups(self, i: int) -> None:
        """Machine ``i``'s cgroups: a cpu group with the largest weight, so processes outside the emulation yield
        its cores to it as another machine's would not exist (cgroup v1 ``cpu.shares``, :data:`CPU_SHARES`),
        with the compute quota if one is set; a memory group with the limit if one is set."""
        if (CGROUP_ROOT / "cpu").is_dir():
            group = CGROUP_ROOT / "cpu" / machine_ns(i)
            group.mkdir(exist_ok=True)
            (group / "cpu.shares").write_text(str(CPU_SHARES))
            if self.limits.cpu_quota_cores is not None:
                (group / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_US))
                (group / "cpu.cfs_quota_us").write_text(str(int(self.limits.cpu_quota_cores * CFS_PERIOD_US)))
        if self.limits.memory_bytes is not None:
            group = CGROUP_ROOT / "memory" / machine_ns(i)
            group.mkdir(exist_ok=True)
            (group / "memory.limit_in_bytes").write_text(str(int(self.limits.memory_bytes)))

    def oom_kills(self, machine: int) -> int:
        """Processes the kernel's OOM killer ended in ``machine``'s memory group for exceeding its limit (cgroup
        v1 ``memory.oom_control``'s ``oom_kill`` count, Linux 4.13 and later); 0 without a limit or that count."""
        if self.limits.memory_bytes is None:
            return 0
        control = CGROUP_ROOT / "memory" / machine_ns(machine) / "memory.oom_control"
        return faults.kernel_counter(control, "oom_kill") or 0

    def wait_listening(self, machine: int, port: int, timeout_s: float = 120.0) -> bool:
        """Wait until a process on ``machine`` listens on TCP ``port`` (``ss -ltn`` in its namespace): the
        other ranks start once rank 0's rendezvous store is up, since c10d's client aborts the process when
        its first connection is refused inside a namespace. Returns whether it did within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            out = subprocess.run(["ip", "netns", "exec", machine_ns(machine), "ss", "-Hltn", f"sport = :{port}"],
                                 check=False, capture_output=True, text=True).stdout
            if out.strip():
                return True
            time.sleep(0.1)
        return False

    def command(self, machine: int, argv: list[str]) -> list[str]:
        """``argv`` run on ``machine``: in its namespace, pinned to its cores, inside its cgroups."""
        groups = [CGROUP_ROOT / kind / machine_ns(machine) / "cgroup.procs" for kind in ("cpu", "memory")]
        joins = "".join(f'echo $$ > "{g}" && ' for g in groups if g.parent.is_dir())
        cores = ",".join(map(str, self.cores[machine]))
        # join the cgroups before entering the namespace: ``ip netns exec`` mounts a fresh /sys without them
        return ["sh", "-c", f'{joins}exec "$@"', "sh",
                "ip", "netns", "exec", machine_ns(machine), "taskset", "-c", cores, *argv]


def _exit_on_sigterm(signum: int, _frame: Any) -> None:
    """SIGTERM ends the run like Ctrl-C does: the exception unwinds through the clean-up."""
    raise SystemExit(128 + signum)


def _namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], check=False, capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(PREFIX)]


def clean_stale() -> None:
    """Remove a set left by a run that was killed; refuse while another live run owns it.

    Raises:
        EmulationError: the set belongs to a process that is still running.
    """
    if STATE_FILE.exists():
        try:
            owner = int(json.loads(STATE_FILE.read_text())["pid"])
        except (ValueError, KeyError, TypeError):
            owner = -1
        if owner > 0 and owner != os.getpid() and _alive(owner):
            raise EmulationError(f"--emulate: an emulated cluster of process {owner} is running; wait for it or "
                                 "stop it")
    if STATE_FILE.exists() or _namespaces() or _cgroup_dirs():
        teardown()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _cgroup_dirs() -> list[Path]:
    return [d for kind in ("cpu", "memory") if (CGROUP_ROOT / kind).is_dir()
            for d in (CGROUP_ROOT / kind).glob(f"{PREFIX}m*") if d.is_dir()]


def teardown() -> None:
    """Delete every ``gnnplan-*`` namespace (their links and qdiscs go with them), the machines' cgroups (after
    killing what is left in them) and the state file."""
    for ns in _namespaces():
        pids = subprocess.run(["ip", "netns", "pids", ns], check=False, capture_output=True, text=True).stdout
        for pid in pids.split():
            _kill(int(pid))
        subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True)
        shutil.rmtree(NETNS_ETC / ns, ignore_errors=True)
    for group in _cgroup_dirs():
        for pid in (group / "cgroup.procs").read_text().split():
            _kill(int(pid))
        for _ in range(50):
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)
    with contextlib.suppress(OSError):  # the folder _name_files created, once empty
        NETNS_ETC.rmdir()
    STATE_FILE.unlink(missing_ok=True)


def _kill(pid: int) -> None:
    """SIGKILL ``pid``; one that already exited (or is not ours) is left alone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def rank_environment(rank: int, world: int, per_machine: int) -> dict[str, str]:
    """The torchrun variables of ``rank`` (machine ``rank // per_machine``), rank 0 on machine 0, and gloo's
    interface."""
    return {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank % per_machine),
            "LOCAL_WORLD_SIZE": str(per_machine), "MASTER_ADDR": machine_address(0),
            "MASTER_PORT": str(MASTER_PORT), "GLOO_SOCKET_IFNAME": IFACE, "PYTHONUNBUFFERED": "1"}


def launch_argv(plan_path: str | Path, epochs: int | None, trace_dir: str | Path) -> list[str]:
    """The torchrun entry point's command line for every rank."""
    argv = [sys.executable, "-m", "gnnplan.executor.launch", str(plan_path), "--trace-dir", str(trace_dir),
            "--no-progress"]
    return argv + (["--epochs", str(epochs)] if epochs is not None else [])
