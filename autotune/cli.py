"""The ``gnnplan`` command line (DESIGN.md, "Contracts"): probe, simulate, tune, run, calibrate, loop, whatif.

Errors in user input are one line on stderr, exit code 2, and nothing is written.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from pydantic import ValidationError

from gnnplan.simulator.errors import RunError, SpecError, one_line
from gnnplan.simulator.limits import SEED_LIMIT

NO_DEFAULT = frozenset({"cluster", "workload", "strategy", "plan"})
"""Options that have no default even where argparse does not require them (simulate takes them or ``--plan``)."""


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error and exit code 2, and no empty values: ``--trace ''`` wrote no trace and
    ``--study ''`` fell back to the default study without a word (2026-12-01, a new user's pass)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        optional = action.nargs in ("?", "*", argparse.PARSER, argparse.REMAINDER)
        if not optional and any(not text.strip() for text in arg_strings):
            name = "/".join(action.option_strings) or str(action.metavar or action.dest).upper()
            leave = action.option_strings and not action.required and action.dest not in NO_DEFAULT
            self.error(f"argument {name}: an empty value{'; leave the option out for its default' if leave else ''}")
        return super()._get_values(action, arg_strings)  # type: ignore[misc]


def _common_sim(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--cluster", required=required, help="cluster preset name or YAML file")
    p.add_argument("--workload", required=required, help="workload preset name or YAML file")
    p.add_argument("--cluster-set", dest="cluster_sets", action="append", default=[], metavar="FIELD=VALUE",
                   help="change a cluster field by dotted path, unit-aware (network.bandwidth_bytes_per_s=10Gbit/s, "
                        "network.latency_s=5us, gpu.memory_bytes=40GiB); repeatable")


def _emulation_limits(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cpu-quota", type=float, metavar="CORES",
                   help="with --emulate: CPU time per machine, in cores (cgroup cpu.cfs_quota_us)")
    p.add_argument("--memory-limit", metavar="SIZE",
                   help="with --emulate: memory limit per machine, e.g. 512MB, 2GiB or bytes (cgroup "
                        "memory.limit_in_bytes); a rank the kernel kills for exceeding it is named as out of memory")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    from gnnplan.autotune import commands as c
    from gnnplan.autotune import commands_machine as mc
    from gnnplan.simulator import __version__

    parser = _Parser(prog="gnnplan", description="Predict, choose and run distributed GNN training.")
    parser.add_argument("--version", action="version", version=f"gnnplan {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("probe", help="measure this machine into a cluster file")
    p.add_argument("-o", "--output", help="cluster YAML to write, the cluster named after the file (default: <gnnplan "
                   "home>/presets/local.yaml, with --emulate emulated.yaml)")
    p.add_argument("--workers", type=int, default=None,
                   help="worker processes the machine is modelled for (default 2; with --emulate: per machine, "
                        "default 1)")
    p.add_argument("--quick", action="store_true", help="small sizes, few repeats (seconds, less accurate)")
    p.add_argument("--gpus-per-machine", type=int, default=None,
                   help="model the workers as machines of G workers each (cores, memory and bandwidths of G "
                        "workers' shares), the layout of gnnplan run --gpus-per-machine G (default 1)")
    p.add_argument("--emulate", action="store_true",
                   help="measure an emulated cluster instead (network namespaces, shaped NICs; needs root and "
                        "CAP_NET_ADMIN); writes the preset `emulated`")
    p.add_argument("--machines", type=int, default=None, help="with --emulate: emulated machines (default 2)")
    p.add_argument("--bandwidth", metavar="RATE",
                   help="with --emulate: NIC rate per machine and direction, e.g. 100Mbit/s (default: unshaped)")
    _emulation_limits(p)
    p.add_argument("--json", action="store_true",
                   help="the written cluster as one JSON object instead of text")
    p.set_defaults(func=mc.cmd_probe)

    p = sub.add_parser("simulate", help="predict one configuration's epoch time, traffic and memory")
    _common_sim(p, required=False)  # (required unless --plan gives them: commands.simulate_inputs)
    p.add_argument("--strategy", help="dp, gsplit, hopgnn, neutronstar, hongtu or ppgnn")
    p.add_argument("--set", dest="knobs", action="extend", nargs="+", default=[], metavar="KNOB=VALUE",
                   help="knobs of the strategy (cache_fraction=0.2, mode=hybrid, cache_budget_bytes=1GB; none "
                        "unsets an optional one): one or more after each --set, and --set repeatable; the last "
                        "value of a knob wins")
    p.add_argument("--plan", help="a plan YAML (gnnplan tune -o): its cluster, workload, strategy and knobs, "
                                  "instead of --cluster, --workload and --strategy; --set and --cluster-set "
                                  "change them")
    p.add_argument("--json", action="store_true",
                   help="the prediction (epoch_time_s, breakdown_s, bytes_per_epoch, peak_memory_bytes, feasible, "
                        "...) as one JSON object instead of the table")
    p.add_argument("--trace", help="write the predicted timeline as a Chrome trace")
    p.add_argument("--proxy-draws", type=int, default=1, metavar="R",
                   help="where the dataset is a card (card:<name>[@K]): also simulate on R - 1 more draws of its "
                        "proxy (K+1, ...) and print the epoch time over all R (default 1: the draw named). "
                        + POOLED_DRAWS_HELP)
    p.set_defaults(func=c.cmd_simulate)

    p = sub.add_parser("tune", help="search strategies and knobs with Optuna; write the best plan")
    _common_sim(p)
    p.add_argument("--strategies", help="comma-separated strategies (default: all that fit the workload)")
    p.add_argument("--trials", type=int, default=40, help="Optuna trials (default 40)")
    p.add_argument("--storage", help="Optuna storage URL (default: sqlite file in the gnnplan home)")
    p.add_argument("--study", help="study name (default: derived from cluster, workload and search space)")
    p.add_argument("--tune-batch-size", action="store_true", help="allow the tuner to change the batch size")
    p.add_argument("--allow-model-change", action="store_true",
                   help="also compare strategies that train a different model (SGC/SIGN vs message passing)")
    p.add_argument("--seed", type=seed_value, default=0, help="sampler seed, 0 to 2**32 - 1")
    p.add_argument("--proxy-draws", type=int, default=1, metavar="R",
                   help="where the dataset is a card (card:<name>[@K]): also simulate each strategy's best "
                        "configuration on R - 1 more draws of its proxy (K+1, ...) and say on how many the best "
                        "one stays the fastest (default 1: the draw named). " + POOLED_DRAWS_HELP)
    p.add_argument("--json", action="store_true",
                   help="the best plan, the ranked trials and the study as one JSON object instead of the table")
    p.add_argument("-o", "--output", help="plan YAML to write (default: plan.yaml)", default="plan.yaml")
    p.set_defaults(func=c.cmd_tune)

    p = sub.add_parser("run", help="train a plan for real with torch.distributed and record a trace")
    p.add_argument("plan")
    p.add_argument("--nprocs", type=int, help="worker processes (default: the plan's num_workers)")
    p.add_argument("--gpus-per-machine", type=int, default=None,
                   help="workers per machine: the nprocs local workers form nprocs / G machines of G workers, "
                        "which share their machine's graph and features (default: the plan's cluster's when it "
                        "divides nprocs, else 1)")
    p.add_argument("--epochs", type=int, help="epochs (default: the workload's num_epochs)")
    p.add_argument("--trace-dir", default="traces",
                   help="folder the run's Chrome trace is written to (default: traces)")
    p.add_argument("--emulate", action="store_true",
                   help="run each machine of the plan in its own network namespace with its NIC shaped to the "
                        "plan's network bandwidth (needs root and CAP_NET_ADMIN)")
    p.add_argument("--bandwidth", metavar="RATE",
                   help="with --emulate: NIC rate per machine and direction, e.g. 100Mbit/s (default: the plan's "
                        "network bandwidth)")
    _emulation_limits(p)
    p.add_argument("--collective-timeout", type=float, metavar="SECONDS",
                   help="end the run when a collective waits this long for a rank that died or hangs (default 60)")
    p.add_argument("--checkpoint-every", type=int, default=0, metavar="N",
                   help="save model, optimizer and RNG state every N epochs and after the last (0 = never)")
    p.add_argument("--checkpoint-dir", metavar="DIR", help="checkpoint folder (default: <trace-dir>/checkpoints)")
    p.add_argument("--resume", action="store_true",
                   help="continue from the newest complete checkpoint in --checkpoint-dir")
    p.add_argument("--json", action="store_true",
                   help="the run's results (epoch_time_s, epoch_times_s, loss, accuracies, bytes_per_epoch, "
                        "peak_memory_bytes, trace) as one JSON object instead of the epoch lines")
    p.set_defaults(func=mc.cmd_run)

    p = sub.add_parser("calibrate", help="fit a cluster's effective parameters to recorded traces")
    p.add_argument("traces", nargs="+", metavar="TRACE", help="traces written by gnnplan run, each once")
    p.add_argument("--cluster", required=True,
                   help="the cluster whose parameters are fitted (preset name or YAML): the one the runs were "
                        "planned on, e.g. local after gnnplan probe")
    p.add_argument("-o", "--output", help="calibrated cluster YAML (default: <home>/presets/<name>-calibrated.yaml)")
    p.add_argument("--json", action="store_true",
                   help="the calibrated parameters and the held-out errors as one JSON object instead of text")
    p.set_defaults(func=c.cmd_calibrate)

    p = sub.add_parser("trace", help="work with Chrome traces")
    trace_sub = p.add_subparsers(dest="trace_command", required=True, parser_class=_Parser)
    m = trace_sub.add_parser("merge", help="one Chrome trace with a predicted and a measured timeline side by side")
    m.add_argument("predicted", help="trace written by gnnplan simulate --trace")
    m.add_argument("measured", help="trace written by gnnplan run")
    m.add_argument("-o", "--output", required=True, help="merged trace to write (opens in Perfetto)")
    m.add_argument("--epoch", type=int, help="measured epoch to show (default: the median one)")
    m.add_argument("--json", action="store_true",
                   help="the merged trace's summary as one JSON object")
    m.set_defaults(func=c.cmd_trace_merge)

    p = sub.add_parser("loop", help="the main job: tune, run the best plan, calibrate, report prediction error")
    p.add_argument("--cluster", default="local", help="cluster preset or YAML (default local: gnnplan probe's)")
    p.add_argument("--workload", default="cora-sage", help="workload preset or YAML (default cora-sage)")
    p.add_argument("--trials", type=int, default=30, help="tuner trials (default 30)")
    p.add_argument("--nprocs", type=int, default=2,
                   help="worker processes of the real run; must equal the cluster's workers (default 2)")
    p.add_argument("--epochs", type=int, help="epochs to run (default: the workload's)")
    p.add_argument("--storage", help="Optuna storage URL (default: sqlite file in the gnnplan home)")
    p.add_argument("--out-dir", default="gnnplan-loop", help="folder for plan, trace, calibrated cluster, report")
    p.add_argument("--json", action="store_true",
                   help="the loop's report (plan, run, calibration, held-out errors) as one JSON object instead "
                        "of text")
    p.set_defaults(func=c.cmd_loop)

    p = sub.add_parser("whatif", help="sweep cluster or workload fields; tune every strategy at each point; "
                                      "CSV + HTML chart")
    _common_sim(p)
    p.add_argument("--vary", action="append", required=True, metavar="FIELD=V1,V2,...",
                   help="a field and its values: cluster=PRESET,..., workload=PRESET,..., a cluster field "
                        "(network.bandwidth_bytes_per_s=1Gbit/s,100Gbit/s) or workload.<field> "
                        "(workload.model.hidden_dim=16,256); a list value in brackets "
                        "(training.fanouts=[5,5],[25,10]); several --vary make a grid")
    p.add_argument("--strategies", help="comma-separated strategies (default: all that fit the workload)")
    p.add_argument("--trials", type=int, default=16,
                   help="Optuna trials per point and strategy (warm-started; default 16)")
    p.add_argument("--allow-model-change", action="store_true",
                   help="also compare strategies that train a different model (SGC/SIGN vs message passing)")
    p.add_argument("--seed", type=seed_value, default=0, help="sampler seed, 0 to 2**32 - 1")
    p.add_argument("--proxy-draws", type=int, default=1, metavar="R",
                   help="where the dataset is a card (card:<name>[@K]): also simulate every strategy's tuned "
                        "configuration on R - 1 more draws of the card's proxy (K+1, ...) and say on how many the "
                        "winner wins (default 1: the draw named). " + POOLED_DRAWS_HELP)
    p.add_argument("-o", "--output", default="gnnplan-whatif", help="folder for whatif.csv, .html and .json")
    p.add_argument("--json", action="store_true",
                   help="every point, its winner and the crossovers as one JSON object instead of the table")
    p.set_defaults(func=c.cmd_whatif)

    p = sub.add_parser("card", help="measure a graph you hold into a dataset card (statistics, no features), to "
                                    "share it or ask what-if questions of it where the graph is not")
    p.add_argument("dataset", metavar="DATASET", help="cora, citeseer or a folder in the OGB node-property raw layout")
    p.add_argument("--name", required=True, help="the card's name: its file <name>.yaml, workload.dataset card:<name>")
    p.add_argument("--structure", choices=CARD_STRUCTURES, default="blocks",
                   help="the community structure the card keeps (default blocks: components, the Louvain block "
                        "model, bridges, assortativity and clustering, as the bundled cards; louvain: the Louvain "
                        "communities' number and mixing; labels: the label classes'; cut: none, but the METIS "
                        "edge cut at 8 parts, which the proxy fits communities to (seconds where Louvain takes "
                        "hours); none)")
    p.add_argument("-o", "--output", help="cards folder to write into (default: $GNNPLAN_HOME/cards, where "
                                          "workload.dataset looks)")
    p.add_argument("--force", action="store_true", help="replace a card of that name in the folder, or write one "
                                                        "under a shipped card's name (it then replaces the shipped "
                                                        "one in every workload)")
    p.add_argument("--json", action="store_true",
                   help="the card written as one JSON object instead of text")
    p.set_defaults(func=c.cmd_card)

    p = sub.add_parser("report", help="one self-contained HTML page (plotly) of a loop folder, a study, a plan "
                                      "and traces; or redraw a whatif folder's chart")
    p.add_argument("folder", nargs="?", metavar="DIR", help="folder written by gnnplan loop (or gnnplan whatif)")
    p.add_argument("--study", help="Optuna study name (default: the loop's, else the one the plan names, as "
                   "gnnplan tune records it, else the storage's only study)")
    p.add_argument("--storage", help="Optuna storage URL (default: the loop's, else the gnnplan home's SQLite file)")
    p.add_argument("--plan", help="plan YAML (default: the loop's plan.yaml, else the first trace's plan)")
    p.add_argument("--trace", dest="traces", action="append", default=[], metavar="TRACE",
                   help="measured trace from gnnplan run (repeatable; calibrated here unless DIR has the loop's)")
    p.add_argument("--predicted-trace", help="predicted trace from gnnplan simulate --trace (default: the loop's "
                                             "predicted.json, else the plan simulated now)")
    p.add_argument("-o", "--output", help="HTML file to write (default: DIR/report.html, DIR/whatif.html for a "
                                          "whatif folder, else report.html)")
    p.add_argument("--json", action="store_true",
                   help="what the page holds (charts drawn, sections missing and why) as one JSON object")
    p.set_defaults(func=c.cmd_report)
    return parser


POOLED_DRAWS_HELP = ("A card smaller than one proxy's 10^5 vertices named without @K (card:cora) is pooled: its "
                     "estimate is the medoid of draws 0-14, and the R draws simulated are single draws 0 to R - 1, "
                     "whose range need not hold the pooled estimate")
"""What ``--proxy-draws`` does on a pooled card (simulator/workload/proxy_pool.py), in simulate's, tune's and
whatif's help."""
CARD_STRUCTURES = ("blocks", "louvain", "labels", "cut", "none")
"""``gnnplan card --structure`` (:func:`simulator.workload.card_measures.derived_card`'s ``communities``)."""
OUTPUTS = (("output", False), ("trace", False), ("trace_dir", True), ("out_dir", True), ("checkpoint_dir", True))
"""Arguments naming something a subcommand writes: (attribute, is a folder), checked before any work."""
FOLDER_OUTPUT = ("whatif", "card")
"""Subcommands whose ``-o/--output`` is a folder."""
DEBUG_ENV = "GNNPLAN_DEBUG"
"""Set to 1 to get the traceback of an unexpected error instead of its one-line summary."""


def seed_value(text: str) -> int:
    """``--seed``: :func:`gnnplan.autotune.api_args.seed` of the integer ``text`` names.

    Raises:
        argparse.ArgumentTypeError: not an integer, or out of range (argparse prints it as the one-line usage
            error).
    """
    from gnnplan.autotune import api_args

    try:
        return api_args.seed("--seed", int(text))
    except (ValueError, SpecError):
        raise argparse.ArgumentTypeError(f"must be an integer from 0 to {SEED_LIMIT - 1} "
                                         f"(got {text!r})") from None


def check_outputs(args: argparse.Namespace) -> None:
    """Check every output path the arguments name (:data:`OUTPUTS`) with :func:`simulator.io.check_output`, so a
    parent that is a file, a name too long, or a read-only file, folder or file system fails before minutes of
    work.

    Raises:
        SpecError: naming the option and the path.
    """
    from gnnplan.simulator.io import check_output

    for attr, folder in OUTPUTS:
        value = getattr(args, attr, None)
        if isinstance(value, str) and value:
            is_folder = folder or (attr == "output" and args.command in FOLDER_OUTPUT)
            check_output(value, "--" + attr.replace("_", "-"), folder=is_folder)
    if args.command == "whatif":  # the files it will replace in its folder, before hours of tuning
        from gnnplan.autotune import whatif_report

        whatif_report.check_outputs(args.output, "--output")
    check_not_inputs(args)


INPUTS = ("workload", "cluster", "plan", "traces", "predicted", "measured", "predicted_trace")
"""Arguments naming files a subcommand reads (a preset name is no file and is skipped)."""
REPORT_WRITES = ("report.html", "whatif.html")
"""The files ``gnnplan report DIR`` may replace inside DIR (its default outputs); the rest of DIR it reads."""


def check_not_inputs(args: argparse.Namespace) -> None:
    """Refuse an output file that is also one of the command's inputs (``calibrate T -o T``, ``simulate --workload
    w.yaml --trace w.yaml``), or a file inside the folder ``report DIR`` reads other than the page it writes
    (``report DIR -o DIR/whatif.json`` would replace the record it redraws).

    Raises:
        SpecError: naming the output option, the path and the input it is.
    """
    outputs = []
    for attr, folder in OUTPUTS:
        value = getattr(args, attr, None)
        if not folder and isinstance(value, str) and value and not (attr == "output" and args.command in FOLDER_OUTPUT):
            outputs.append((f"--{attr.replace('_', '-')}", value))
    if args.command == "whatif":
        from gnnplan.autotune.whatif_report import OUTPUT_FILES

        outputs += [("--output", str(Path(args.output) / name)) for name in OUTPUT_FILES]
    inputs: dict[Path, str] = {}
    for attr in INPUTS:
        value = getattr(args, attr, None)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and Path(item).is_file():
                inputs.setdefault(Path(item).resolve(), attr.replace("_", "-"))
    read_dir = getattr(args, "folder", None) if args.command == "report" else None
    for option, value in outputs:
        target = Path(value).resolve()
        if target in inputs:
            raise SpecError(f"{option}: {value!r} is also an input of this command ({inputs[target]}); write the "
                            "output elsewhere")
        if read_dir and target.parent == Path(read_dir).resolve() and target.exists() and \
                target.name not in REPORT_WRITES:
            raise SpecError(f"{option}: {value!r} is a file of the folder the report reads; write the page "
                            f"elsewhere (default: {Path(read_dir) / 'report.html'})")


def _guard(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a subcommand; every failure ends in ONE line on stderr: exit 2 for bad input and failures to read or
    write, 1 for a run that failed (:class:`RunError`), 130 when interrupted."""
    try:
        check_outputs(args)
        return func(args)
    except SpecError as exc:
        msg = str(exc)
    except ValidationError as exc:
        msg = one_line(exc, args.command)
    except ValueError as exc:
        msg = str(exc) or type(exc).__name__
    except OSError as exc:
        msg = _os_error(exc)
    except MemoryError:
        msg = "out of memory (MemoryError): use a smaller input or a machine with more memory"
    except RecursionError:
        msg = "input nested too deeply (RecursionError)"
    except RunError as exc:
        print(f"gnnplan {_command(args)}: failed: {_first_line(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"gnnplan {_command(args)}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # the last resort: one line, not a traceback (GNNPLAN_DEBUG=1 shows it)
        if os.environ.get(DEBUG_ENV) == "1":
            raise
        msg = f"internal error: {type(exc).__name__}: {_first_line(str(exc))} (set {DEBUG_ENV}=1 for details)"
    print(f"gnnplan {_command(args)}: error: {_first_line(msg) if msg.strip() else 'invalid input'}", file=sys.stderr)
    return 2


def _command(args: argparse.Namespace) -> str:
    """The subcommand as typed, with its own subcommand if it has one (``trace merge``)."""
    sub = getattr(args, "trace_command", None)
    return f"{args.command} {sub}" if sub else args.command


def _os_error(exc: OSError) -> str:
    """``<file>: <reason>`` of an OSError (permission denied, name too long, read-only file system, ...)."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    name = exc.filename if exc.filename is not None else ""
    return f"{name}: {reason}" if name else reason


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
