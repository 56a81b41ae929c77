"""The ``gnnplan`` command line (DESIGN.md, "Contracts"): probe, simulate, tune, run, calibrate, loop, whatif.

Errors in user input are one line on stderr, exit code 2, and nothing is written.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from pydantic import ValidationError

from gnnplan.simulator.errors import RunError, SpecError, one_line


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _common_sim(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cluster", required=True, help="cluster preset name or YAML file")
    p.add_argument("--workload", required=True, help="workload preset name or YAML file")
    p.add_argument("--cluster-set", dest="cluster_sets", action="append", default=[], metavar="FIELD=VALUE",
                   help="change a cluster field by dotted path, unit-aware (network.bandwidth_bytes_per_s=10Gbit/s, "
                        "network.latency_s=5us, gpu.memory_bytes=40GiB); repeatable")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    from gnnplan.autotune import commands as c
    from gnnplan.simulator import __version__

    parser = _Parser(prog="gnnplan", description="Predict, choose and run distributed GNN training.")
    parser.add_argument("--version", action="version", version=f"gnnplan {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("probe", help="measure this machine into a cluster file")
    p.add_argument("-o", "--output", help="cluster YAML to write (default: <gnnplan home>/presets/local.yaml)")
    p.add_argument("--workers", type=int, default=2, help="worker processes the machine is modelled for")
    p.add_argument("--quick", action="store_true", help="small sizes, few repeats (seconds, less accurate)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=c.cmd_probe)

    p = sub.add_parser("simulate", help="predict one configuration's epoch time, traffic and memory")
    _common_sim(p)
    p.add_argument("--strategy", required=True)
    p.add_argument("--set", dest="knobs", action="append", default=[], metavar="KNOB=VALUE")
    p.add_argument("--json", action="store_true")
    p.add_argument("--trace", help="write the predicted timeline as a Chrome trace")
    p.set_defaults(func=c.cmd_simulate)

    p = sub.add_parser("tune", help="search strategies and knobs with Optuna; write the best plan")
    _common_sim(p)
    p.add_argument("--strategies", help="comma-separated strategies (default: all that fit the workload)")
    p.add_argument("--trials", type=int, default=40)
    p.add_argument("--storage", help="Optuna storage URL (default: sqlite file in the gnnplan home)")
    p.add_argument("--study", help="study name (default: derived from cluster, workload and search space)")
    p.add_argument("--tune-batch-size", action="store_true", help="allow the tuner to change the batch size")
    p.add_argument("--allow-model-change", action="store_true",
                   help="also compare strategies that train a different model (SGC/SIGN vs message passing)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    p.add_argument("-o", "--output", help="plan YAML to write (default: plan.yaml)", default="plan.yaml")
    p.set_defaults(func=c.cmd_tune)

    p = sub.add_parser("run", help="train a plan for real with torch.distributed and record a trace")
    p.add_argument("plan")
    p.add_argument("--nprocs", type=int, help="worker processes (default: the plan's num_workers)")
    p.add_argument("--epochs", type=int, help="epochs (default: the workload's num_epochs)")
    p.add_argument("--trace-dir", default="traces")
    p.add_argument("--emulate", action="store_true",
                   help="run each machine of the plan in its own network namespace with its NIC shaped to the "
                        "plan's network bandwidth (needs root and CAP_NET_ADMIN)")
    p.add_argument("--cpu-quota", type=float, metavar="CORES",
                   help="with --emulate: CPU time per machine, in cores (cgroup cpu.cfs_quota_us)")
    p.add_argument("--memory-limit", type=float, metavar="BYTES",
                   help="with --emulate: memory limit per machine in bytes (cgroup memory.limit_in_bytes)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=c.cmd_run)

    p = sub.add_parser("calibrate", help="fit a cluster's effective parameters to recorded traces")
    p.add_argument("traces", nargs="+", metavar="TRACE")
    p.add_argument("--cluster", required=True)
    p.add_argument("-o", "--output", help="calibrated cluster YAML (default: <home>/presets/<name>-calibrated.yaml)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=c.cmd_calibrate)

    p = sub.add_parser("trace", help="work with Chrome traces")
    trace_sub = p.add_subparsers(dest="trace_command", required=True, parser_class=_Parser)
    m = trace_sub.add_parser("merge", help="one Chrome trace with a predicted and a measured timeline side by side")
    m.add_argument("predicted", help="trace written by gnnplan simulate --trace")
    m.add_argument("measured", help="trace written by gnnplan run")
    m.add_argument("-o", "--output", required=True, help="merged trace to write (opens in Perfetto)")
    m.add_argument("--epoch", type=int, help="measured epoch to show (default: the median one)")
    m.add_argument("--json", action="store_true")
    m.set_defaults(func=c.cmd_trace_merge)

    p = sub.add_parser("loop", help="the main job: tune, run the best plan, calibrate, report prediction error")
    p.add_argument("--cluster", default="local")
    p.add_argument("--workload", default="cora-sage")
    p.add_argument("--trials", type=int, default=30)
    p.add_argument("--nprocs", type=int, default=2)
    p.add_argument("--epochs", type=int, help="epochs to run (default: the workload's)")
    p.add_argument("--storage", help="Optuna storage URL (default: sqlite file in the gnnplan home)")
    p.add_argument("--out-dir", default="gnnplan-loop", help="folder for plan, trace, calibrated cluster, report")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=c.cmd_loop)

    p = sub.add_parser("whatif", help="sweep cluster or workload fields; tune every strategy at each point; "
                                      "CSV + HTML chart")
    _common_sim(p)
    p.add_argument("--vary", action="append", required=True, metavar="FIELD=V1,V2,...",
                   help="a field and its values: cluster=PRESET,..., workload=PRESET,..., a cluster field "
                        "(network.bandwidth_bytes_per_s=1Gbit/s,100Gbit/s) or workload.<field> "
                        "(workload.model.hidden_dim=16,256); several --vary make a grid")
    p.add_argument("--strategies", help="comma-separated strategies (default: all that fit the workload)")
    p.add_argument("--trials", type=int, default=16, help="Optuna trials per point and strategy (warm-started)")
    p.add_argument("--allow-model-change", action="store_true",
                   help="also compare strategies that train a different model (SGC/SIGN vs message passing)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--output", default="gnnplan-whatif", help="folder for whatif.csv, .html and .json")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=c.cmd_whatif)
    return parser


def _guard(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    try:
        return func(args)
    except SpecError as exc:
        msg = str(exc)
    except ValidationError as exc:
        msg = one_line(exc, args.command)
    except (ValueError, FileNotFoundError, PermissionError, IsADirectoryError) as exc:
        msg = str(exc) or type(exc).__name__
    except RunError as exc:
        print(f"gnnplan {args.command}: failed: {_first_line(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"gnnplan {args.command}: interrupted", file=sys.stderr)
        return 130
    print(f"gnnplan {args.command}: error: {msg.splitlines()[0] if msg else 'invalid input'}", file=sys.stderr)
    return 2


def _first_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[0] if lines else "unknown error"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gnnplan`` console script.

    Returns:
        0 on success, 2 on bad input (one line on stderr), 130 when interrupted.
    """
    args = build_parser().parse_args(argv)
    return _guard(args.func, args)


if __name__ == "__main__":
    sys.exit(main())
