"""The emulated cluster (``gnnplan run PLAN --emulate``): namespaces per machine, shaped NICs, clean-up.

The unit tests run anywhere; the ones that build namespaces need root with CAP_NET_ADMIN and skip otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from emulation import needs_root

from gnnplan.executor import emulate
from gnnplan.executor.emulate import EmulatedCluster, EmulationError, MachineLimits
from gnnplan.simulator.hardware.spec import load_cluster
from gnnplan.simulator.plan import Plan
from gnnplan.simulator.workload.spec import load_workload


def test_token_bucket_arguments() -> None:
    assert emulate.tbf_args(12.5e6) == ["tbf", "rate", "100000000bit", "burst", "125000", "latency", "100ms",
                                        "peakrate", "102000000bit", "mtu", "6375"]
    assert emulate.tbf_args(1e5)[4] == str(32 * 1024)  # never below a few full-size segments
    assert emulate.tbf_args(1e5)[-1] == "3000"  # the peak bucket holds at least two segments
    assert emulate.tbf_args(125e6)[-1] == "70000"  # 64 kB at 1 Gbit/s: raised to a whole GSO packet
    assert emulate.tbf_args(375e6)[-1] == "191250"  # 0.5 ms at 3.06 Gbit/s


@needs_root
def test_message_after_idle_is_not_faster_than_the_line_rate() -> None:
    """The burst a plain token bucket lets through after an idle gap is gone: 256 kB at 300 Mbit/s, sent 60 ms
    after the previous message, takes at least 85% of its line-rate time (6.8 ms), as on a NIC."""
    server = ("import socket; s = socket.create_server(('0.0.0.0', 29601)); c, _ = s.accept()\n"
              "for _ in range(5):\n"
              "    n = 0\n"
              "    while n < 256000: n += len(c.recv(1 << 20))\n"
              "    c.sendall(b'k')")
    client = (f"import socket, time; c = socket.create_connection(('{emulate.machine_address(0)}', 29601), "
              "timeout=10); t = []\n"
              "for _ in range(5):\n"
              "    time.sleep(0.06); t0 = time.perf_counter(); c.sendall(b'x' * 256000); c.recv(1)\n"
              "    t.append(time.perf_counter() - t0)\n"
              "print(min(t))")
    rate = 37.5e6
    with EmulatedCluster(2, MachineLimits(rate)) as cluster:
        listener = subprocess.Popen(cluster.command(0, [sys.executable, "-c", server]))
        assert cluster.wait_listening(0, 29601, timeout_s=30)
        out = subprocess.run(cluster.command(1, [sys.executable, "-c", client]), capture_output=True, text=True,
                             timeout=60)
        listener.wait(timeout=30)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) >= 0.85 * 256000 / rate


def test_core_sets_split_the_cores() -> None:
    assert emulate.core_sets(2, [0, 1]) == [[0], [1]]
    assert emulate.core_sets(2, [0, 1, 2, 3, 4]) == [[0, 1], [2, 3]]
    assert emulate.core_sets(3, [0, 1]) == [[0], [1], [0]]


def test_rank_environment_puts_rank_zero_on_machine_zero() -> None:
    env = emulate.rank_environment(3, 4, 2)
    assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]) == ("3", "4", "1", "2")
    assert env["MASTER_ADDR"] == "198.18.0.1" and env["GLOO_SOCKET_IFNAME"] == "eth0"


def test_without_root_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(EmulationError, match="needs root with CAP_NET_ADMIN"):
        emulate.check_available()


@needs_root
def test_stale_set_of_a_dead_run_is_removed_and_a_live_one_refused() -> None:
    subprocess.run(["ip", "netns", "add", emulate.machine_ns(0)], check=True)
    emulate.STATE_FILE.write_text(json.dumps({"pid": 2**22 + 12345}))  # above pid_max: never alive
    emulate.clean_stale()
    assert not emulate._namespaces() and not emulate.STATE_FILE.exists()
    emulate.STATE_FILE.write_text(json.dumps({"pid": os.getppid()}))
    try:
        with pytest.raises(EmulationError, match=f"process {os.getppid()} is running"):
            emulate.clean_stale()
    finally:
        emulate.STATE_FILE.unlink()


@needs_root
def test_machines_reach_each_other_and_everything_is_removed() -> None:
    server = ("import socket; s = socket.create_server(('0.0.0.0', 29600)); c, _ = s.accept(); "
              "c.sendall(c.recv(5))")
    client = (f"import socket; c = socket.create_connection(('{emulate.machine_address(0)}', 29600), timeout=10); "
              "c.sendall(b'hello'); print(c.recv(5).decode())")
    with EmulatedCluster(2, MachineLimits(12.5e6)) as cluster:
        listener = subprocess.Popen(cluster.command(0, [sys.executable, "-c", server]))
        assert cluster.wait_listening(0, 29600, timeout_s=30)
        echo = subprocess.run(cluster.command(1, [sys.executable, "-c", client]), capture_output=True, text=True,
                              timeout=60)
        listener.wait(timeout=30)
        qdisc = subprocess.run(["ip", "netns", "exec", emulate.machine_ns(0), "tc", "qdisc", "show", "dev",
                                "eth0"], capture_output=True, text=True).stdout
    assert echo.stdout.strip() == "hello", echo.stderr
    assert "tbf" in qdisc and "100Mbit" in qdisc
    assert not emulate._namespaces() and not emulate.STATE_FILE.exists()


def test_log_tail_passes_complete_epoch_lines_once(tmp_path: Path) -> None:
    from gnnplan.executor.emulated_run import LogTail

    log, shown = tmp_path / "rank0.err", tmp_path / "shown"
    with open(log, "w") as writer, open(shown, "w") as out:
        tail = LogTail(log, out=out)
        writer.write("UserWarning: something\nepoch   0  time 0.1 s\nepoch   1  ti")
        writer.flush()
        tail.echo()
        writer.write("me 0.2 s\n")
        writer.flush()
        tail.echo()
        tail.echo()  # nothing new
    assert shown.read_text() == "epoch   0  time 0.1 s\nepoch   1  time 0.2 s\n"


@needs_root
def test_two_machine_run_is_shaped(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    from gnnplan.executor.emulated_run import run_emulated

    # 20 Mbit/s: each machine's 3.3 MB take >= 1.2 s, several times an unshaped epoch's 0.1-0.3 s (at 10 Mbit/s
    # the test took 20 s, 14.6 s at 40 Mbit/s; 2026-12-01)
    bandwidth = 2.5e6
    cluster = load_cluster("local")
    cluster = cluster.model_copy(update={"num_machines": 2, "gpus_per_machine": 1, "network": cluster.network.
                                         model_copy(update={"bandwidth_bytes_per_s": bandwidth})})
    workload = load_workload("cora-sage")
    workload = workload.model_copy(update={"training": workload.training.model_copy(update={"num_epochs": 1})})
    plan = Plan(strategy="dp", knobs={"cache_fraction": 0.0}, num_workers=2, cluster=cluster, workload=workload)
    res = run_emulated(plan, trace_dir=tmp_path, timeout_s=240, progress=True)
    assert [line.split()[:2] for line in capfd.readouterr().err.splitlines() if line.startswith("epoch")] == \
        [["epoch", str(res["epochs"][0]["epoch"])]]  # rank 0's line per epoch, echoed while the run goes
    sent_per_machine = res["bytes_per_epoch"]["network"] / 2
    assert sent_per_machine > 1e6  # remote features and gradients cross the emulated network
    # a machine cannot push its bytes faster than its NIC (tbf): the epoch takes at least that long
    assert res["epoch_time_s"] >= 0.9 * sent_per_machine / bandwidth
    assert Path(res["trace"]).is_file() and res["emulated"]["num_machines"] == 2
    # each emulated machine's rank measured its peak (a torchrun-entry process holding Cora's features)
    assert res["peak_memory_bytes"]["gpu"] is None and res["peak_memory_bytes"]["host"] > 2708 * 1433 * 4
    assert not emulate._namespaces()


@needs_root
def test_quota_and_memory_limit_apply_to_the_machines_processes() -> None:
    with EmulatedCluster(1, MachineLimits(None, cpu_quota_cores=0.5, memory_bytes=2e9)) as cluster:
        groups = subprocess.run(cluster.command(0, ["cat", "/proc/self/cgroup"]), capture_output=True,
                                text=True, check=True).stdout
        quota = (emulate.CGROUP_ROOT / "cpu" / emulate.machine_ns(0) / "cpu.cfs_quota_us").read_text().strip()
        qdisc = subprocess.run(["ip", "netns", "exec", emulate.machine_ns(0), "tc", "qdisc", "show", "dev",
                                "eth0"], capture_output=True, text=True).stdout
    lines = {line.split(":")[1]: line.split(":")[2] for line in groups.splitlines()}
    cpu_key = next(k for k in lines if "cpu" in k.split(","))
    assert lines[cpu_key].endswith("/gnnplan-m0") and lines["memory"].endswith("/gnnplan-m0")
    assert quota == str(emulate.CFS_PERIOD_US // 2) and "tbf" not in qdisc  # no bandwidth given: unshaped
    assert not emulate._cgroup_dirs()


@needs_root
def test_machines_get_the_largest_cpu_weight_without_a_quota() -> None:
    with EmulatedCluster(2, MachineLimits(None)) as cluster:
        groups = subprocess.run(cluster.command(1, ["cat", "/proc/self/cgroup"]), capture_output=True,
                                text=True, check=True).stdout
        folder = emulate.CGROUP_ROOT / "cpu" / emulate.machine_ns(1)
        shares, quota = (folder / "cpu.shares").read_text().strip(), (folder / "cpu.cfs_quota_us").read_text()
    cpu_line = next(line for line in groups.splitlines() if "cpu" in line.split(":")[1].split(","))
    assert cpu_line.endswith("/gnnplan-m1")
    assert shares == str(emulate.CPU_SHARES) and quota.strip() == "-1"  # weight only: no quota
    assert not emulate._cgroup_dirs()


@needs_root
def test_a_rank_killed_for_exceeding_the_memory_limit_is_named_out_of_memory(tmp_path: Path) -> None:
    """A process of machine 0 that touches 300 MB under a 64 MB limit is ended by the kernel's OOM killer; the
    verdict says so instead of a bare SIGKILL."""
    import functools

    from gnnplan.executor.emulated_run import _out_of_memory, _wait
    from gnnplan.executor.monitor import WorkerError

    with EmulatedCluster(1, MachineLimits(None, memory_bytes=64e6)) as cluster, \
            open(tmp_path / "rank0.err", "w+") as log:
        proc = subprocess.Popen(cluster.command(0, [sys.executable, "-c", "b = bytearray(b'x') * 300_000_000"]),
                                stderr=log, text=True)
        with pytest.raises(WorkerError) as info:
            _wait([proc], [log], 60, oom=functools.partial(_out_of_memory, cluster, 1))
        kills = cluster.oom_kills(0)
    assert kills >= 1
    assert str(info.value) == ("rank 0 died: killed by SIGKILL (out of memory: machine 0 reached its "
                               "--memory-limit of 64 MB)")
    assert not emulate._cgroup_dirs()


def test_a_sigkill_without_an_oom_kill_stays_a_sigkill(tmp_path: Path) -> None:
    from gnnplan.executor.emulated_run import _rank_failure

    with open(tmp_path / "rank1.err", "w+") as log:
        assert _rank_failure(1, -9, log, lambda rank: None).detail == "killed by SIGKILL"
        oom = _rank_failure(1, -9, log, lambda rank: f"out of memory: machine {rank}")
        assert (oom.kind, oom.detail) == ("signal", "killed by SIGKILL (out of memory: machine 1)")
        assert _rank_failure(1, 3, log, lambda rank: "out of memory").detail == "exited with code 3"


@pytest.mark.parametrize(("flag", "expected"), [("512MB", 512e6), ("2GiB", 2 * 2**30), ("4e9", 4e9)])
def test_memory_limit_reads_units(flag: str, expected: float) -> None:
    from gnnplan.autotune.cli import build_parser
    from gnnplan.autotune.commands_machine import _emulation_limits

    args = build_parser().parse_args(["run", "plan.yaml", "--emulate", "--memory-limit", flag])
    assert _emulation_limits(args, 1e9).memory_bytes == expected


@pytest.mark.parametrize(("flag", "message"), [
    ("lots", "--memory-limit: cannot read 'lots' as a size; use e.g. 40GiB, 16GB, 512MB or bytes as a number (4e10)"),
    ("0", "--memory-limit: must be a positive finite number (got 0)")])
def test_a_bad_memory_limit_is_one_line(flag: str, message: str, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    from fault_helpers import tiny_plan

    from gnnplan.autotune.cli import main
    from gnnplan.simulator.plan import save_plan

    plan = save_plan(tmp_path / "plan.yaml", tiny_plan())
    assert main(["run", str(plan), "--emulate", "--memory-limit", flag]) == 2
    assert capsys.readouterr().err.splitlines() == [f"gnnplan run: error: {message}"]


def test_limits_no_emulated_machine_can_have_are_one_line_before_any_namespace(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A rate tc cannot shape failed inside tc after the namespaces were made, and a quota above a machine's cores
    was taken silently (2026-12-01)."""
    from fault_helpers import tiny_plan

    from gnnplan.autotune.cli import main
    from gnnplan.simulator.plan import save_plan

    plan = save_plan(tmp_path / "plan.yaml", tiny_plan())
    assert main(["run", str(plan), "--emulate", "--bandwidth", "1e30bit/s"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "gnnplan run: error: --bandwidth: must be positive and at most 1 Tbit/s, the most tc's token bucket shapes "
        "(got '1e30bit/s')"]
    cores = len(os.sched_getaffinity(0))
    with pytest.raises(EmulationError, match=rf"^--cpu-quota: at most {max(1, cores // 2)} \(each of the 2 emulated"):
        EmulatedCluster(2, MachineLimits(None, cores + 1.0))
    EmulatedCluster(2, MachineLimits(None, 0.5))  # within a machine's share: accepted (nothing is built yet)


def test_a_run_whose_machines_are_not_its_plans_is_not_compared_with_its_prediction() -> None:
    """An emulated cluster's plan run with another --bandwidth or --cpu-quota than it was probed with, or run
    without --emulate, was compared with the plan's prediction, with no note (2026-12-01)."""
    from gnnplan.executor.run_notes import emulation_note, prediction_for_run
    from gnnplan.simulator.plan import with_prediction

    sources = {"num_machines gpus_per_machine": "2 emulated machines (network namespaces, CPU quota 0.5 cores) x 1 "
                                                "worker(s) each",
               "network.bandwidth_bytes_per_s network.latency_s": "gloo send/recv ping-pong ... (NICs shaped by tc "
                                                                  "tbf to 1.25e+07 B/s per direction), sizes ..."}
    cl = load_cluster("local").model_copy(update={"name": "emulated", "num_machines": 2, "gpus_per_machine": 1,
                                                  "sources": sources})
    plan = with_prediction(Plan(strategy="dp", knobs={}, num_workers=2, cluster=cl,
                                workload=load_workload("cora-sage")), {"epoch_time_s": 0.05, "feasible": True})
    own = cl.network.bandwidth_bytes_per_s
    assert emulation_note(plan, MachineLimits(1.25e7, 0.5), True) is None  # as probed
    assert emulation_note(plan, MachineLimits(own, 0.5), False) is None  # the plan's own rate
    slower = emulation_note(plan, MachineLimits(1.25e6, 0.5), True)
    assert slower is not None and slower.startswith("the emulated machines run with NICs shaped to 1e+07 bit/s, "
                                                    "which emulated was not probed with")
    assert "no CPU quota" in (emulation_note(plan, MachineLimits(own), False) or "")
    assert "a CPU quota of 0.25 cores" in (emulation_note(plan, MachineLimits(own, 0.25), False) or "")
    assert "run it with --emulate" in (emulation_note(plan, None, False) or "")
    assert prediction_for_run(plan, None, slower, None) == (None, "the run is not the configuration the plan "
                                                                  "predicts (its notes say how)")
    assert prediction_for_run(plan, None, None, None) == (0.05, None)
    local = plan.model_copy(update={"cluster": load_cluster("local")})
    assert emulation_note(local, None, False) is None and emulation_note(local, MachineLimits(own), False) is None
