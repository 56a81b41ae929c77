"""The subcommands that measure or use this machine's processes: ``gnnplan probe`` (its rates, or an emulated
cluster's) and ``gnnplan run`` (real training, locally or on emulated machines), with the emulation and fault
options they share; the planning commands are in :mod:`autotune.commands`."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from typing import Any

from gnnplan.autotune import report
from gnnplan.autotune.commands import emit_json, output_path, positive_flag
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.paths import user_home
from gnnplan.simulator.wording import counted


def cmd_probe(args: argparse.Namespace) -> int:
    """``gnnplan probe``: measure this machine (or, with ``--emulate``, the emulated cluster) into a cluster file."""
    from gnnplan.executor import probe_busy
    from gnnplan.executor.probe import probe_header, write_probe
    from gnnplan.executor.threads import cpu_count
    from gnnplan.simulator.file_names import check_file_name_part

    positive_flag("--workers", args.workers)
    if args.emulate:
        if args.gpus_per_machine is not None:
            raise SpecError("--gpus-per-machine: with --emulate, --workers sets the workers per machine")
        dest = output_path(args.output, user_home() / "presets" / "emulated.yaml")
        limits = _emulation_limits(args, None)
    else:
        if args.bandwidth is not None or args.cpu_quota is not None or args.memory_limit is not None:
            raise SpecError("--bandwidth/--cpu-quota/--memory-limit: only with --emulate")
        if args.machines is not None:
            raise SpecError("--machines: only with --emulate (this machine is one machine)")
        dest = output_path(args.output, user_home() / "presets" / "local.yaml")
        positive_flag("--gpus-per-machine", args.gpus_per_machine)
        limits = None
    try:  # the cluster is named after its file (below): a name no file name can hold fails before measuring
        check_file_name_part(dest.stem)
    except ValueError as exc:
        raise SpecError(f"-o: the cluster is named after the file, {dest.stem!r}, which {exc}") from None
    with probe_busy.adopted_orphans():  # what its tree leaves behind stays its own time, not other processes'
        data, header, load = _measured(args, limits)
    if load is not None:  # the figures go into the file's header; a busy machine is also warned about
        said = load.describe(cpu_count())
        header = f"{header or probe_header(data)}\nThis machine, {said} (/proc/stat)."
        if load.busy:
            print(f"gnnplan probe: warning: {said}; rates measured on a busy machine are low, and every prediction "
                  "from them: re-run the probe on an idle machine", file=sys.stderr)
    data["name"] = dest.stem  # two probes written to two files keep their names apart (reports, whatif points)
    if args.quick:  # said in the file, which outlives this console
        header = (f"{header or probe_header(data)}\nMeasured with --quick (small sizes, few repeats): rough rates "
                  "that move from one probe to the next; probe without --quick for the rates predictions rely on.")
    write_probe(dest, data, header)
    if args.json:
        emit_json({"output": str(dest), "cluster": data,
                   "background": None if load is None else {**asdict(load), "busy": load.busy}})
    else:
        from gnnplan.simulator.hardware.spec import preset_dirs

        name = dest.stem if dest.resolve().parent in {d.resolve() for d in preset_dirs()} else str(dest)
        report.console().print(f"wrote {dest} (use it as --cluster {name})")
    return 0


def _measured(args: argparse.Namespace, limits: Any) -> tuple[dict[str, Any], str | None, Any]:
    """``probe``'s measurement: (cluster mapping, file header or None, what other processes took meanwhile:
    :class:`executor.probe_busy.Background` or None)."""
    from gnnplan.executor import probe_busy
    from gnnplan.executor.probe import probe_machine
    from gnnplan.executor.threads import cpu_count

    before = probe_busy.snapshot()

    def background() -> probe_busy.Background | None:
        after = probe_busy.snapshot()
        return None if before is None or after is None else probe_busy.background(before, after)

    try:
        if args.emulate:
            from gnnplan.executor.probe_emulated import probe_emulated

            data = probe_emulated(2 if args.machines is None else args.machines, args.workers or 1, limits,
                                  quick=args.quick)
            header = (f"An emulated cluster of {data['num_machines']} machines (network namespaces on this box) x "
                      f"{counted(data['gpus_per_machine'], 'worker')}, measured by `gnnplan probe --emulate`; run "
                      "plans on it with `gnnplan run PLAN --emulate` and the same --bandwidth/--cpu-quota/"
                      "--memory-limit. Each number's date and method are in `sources`.")
        else:
            data, header = probe_machine(num_workers=args.workers or 2, quick=args.quick,
                                         gpus_per_machine=args.gpus_per_machine or 1), None
    except SpecError as exc:  # e.g. a rate out of its range: on a busy machine, say so
        load = background()
        if load is not None and load.busy:
            raise SpecError(f"{exc} ({load.describe(cpu_count())}: re-run the probe on an idle machine)") from None
        raise
    return data, header, background()


def cmd_run(args: argparse.Namespace) -> int:
    """``gnnplan run PLAN``: real training, traced."""
    from gnnplan.executor.run_notes import after_run_notes, emulation_note, layout_note
    from gnnplan.executor.runner import default_gpus_per_machine, run_plan
    from gnnplan.simulator.plan import load_plan
    from gnnplan.simulator.workload.datasets import resolve_dataset

    positive_flag("--nprocs", args.nprocs)
    positive_flag("--epochs", args.epochs)
    positive_flag("--gpus-per-machine", args.gpus_per_machine)
    plan = load_plan(args.plan)
    per_machine = args.gpus_per_machine or default_gpus_per_machine(plan, args.nprocs or plan.num_workers)
    resolve_dataset(plan.workload.dataset)  # a missing dataset fails here, not in every worker
    layout = None if args.emulate else layout_note(plan, args.nprocs or plan.num_workers, per_machine)
    if not args.emulate and (args.cpu_quota is not None or args.memory_limit is not None
                             or args.bandwidth is not None):
        raise SpecError("--bandwidth/--cpu-quota/--memory-limit: only with --emulate")
    limits = _emulation_limits(args, plan.cluster.network.bandwidth_bytes_per_s) if args.emulate else None
    emulation = emulation_note(plan, limits, args.bandwidth is not None)
    if not args.json and layout:
        report.console(stderr=True).print(f"note: {layout}")
    if limits is not None:
        res = _run_emulated(args, plan, limits)
    else:
        res = run_plan(plan, nprocs=args.nprocs, epochs=args.epochs, trace_dir=args.trace_dir,
                       progress=not args.json, gpus_per_machine=per_machine, **_fault_options(args))
    notes, predicted, why = after_run_notes(plan, args.nprocs or plan.num_workers, layout, emulation,
                                            report.background_note(res.get("background")))
    if args.json:
        emit_json({**res, "predicted_epoch_time_s": predicted, "prediction_note": why, "notes": notes})
    else:
        for note in notes:  # after the run (the layout's came before it): a bad flag's error stays one line
            if note != layout:
                report.console(stderr=True).print(f"note: {note}")
        report.console().print(
            f"epoch time {report.fmt_s(res['epoch_time_s'])} (median of "
            f"{report.epochs_phrase(res.get('measured_epochs') or [])}), loss {res['loss']:.4f}, "
            f"val acc {res['val_accuracy']:.4f}, test acc {res['test_accuracy']:.4f}; "
            f"{report.peak_memory_text(res.get('peak_memory_bytes') or {}, res.get('peak_memory_phases'))}; "
            f"trace {res['trace']}")
        report.console().print(
            f"the plan predicted {report.fmt_s(predicted)} per epoch on {plan.cluster.name} "
            f"({report.pct(predicted, res['epoch_time_s'])} against this run; not fitted to it)"
            if predicted is not None else f"no prediction to compare: {why}")
    return 0


def _run_emulated(args: argparse.Namespace, plan: Any, limits: Any) -> dict[str, Any]:
    """``gnnplan run PLAN --emulate``: the plan's machines as network namespaces (:mod:`executor.emulate`), each
    with ``limits`` (:func:`_emulation_limits`)."""
    from gnnplan.executor.emulated_run import run_emulated

    if args.nprocs is not None and args.nprocs != plan.cluster.num_gpus:
        raise SpecError(f"--nprocs: with --emulate the plan's cluster sets the ranks ({plan.cluster.num_gpus})")
    if args.gpus_per_machine is not None:
        raise SpecError("--gpus-per-machine: with --emulate the plan's cluster sets the workers per machine "
                        f"({plan.cluster.gpus_per_machine})")
    return run_emulated(plan, epochs=args.epochs, trace_dir=args.trace_dir, limits=limits, progress=not args.json,
                        **_fault_options(args))


def _fault_options(args: argparse.Namespace) -> dict[str, Any]:
    """``run``'s collective timeout and checkpoint flags as keyword arguments of ``run_plan`` / ``run_emulated``."""
    out: dict[str, Any] = {"checkpoint_every": args.checkpoint_every, "checkpoint_dir": args.checkpoint_dir,
                           "resume": args.resume}
    if args.collective_timeout is not None:
        out["collective_timeout_s"] = args.collective_timeout
    return out


def _emulation_limits(args: argparse.Namespace, default_bandwidth: float | None) -> Any:
    """The emulated machines' limits from ``--bandwidth`` (unit-aware; default ``default_bandwidth``),
    ``--cpu-quota`` (cores) and ``--memory-limit`` (unit-aware size), positive and finite."""
    import math

    from gnnplan.executor.emulate import MAX_SHAPED_BYTES_PER_S, MachineLimits
    from gnnplan.simulator.units_parse import parse_quantity

    memory = None if args.memory_limit is None else parse_quantity(str(args.memory_limit), "bytes", "--memory-limit")
    for name, value in (("--cpu-quota", args.cpu_quota), ("--memory-limit", memory)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise SpecError(f"{name}: must be a positive finite number (got {value:g})")
    bandwidth = default_bandwidth
    if args.bandwidth is not None:
        bandwidth = parse_quantity(args.bandwidth, "bandwidth", "--bandwidth")
        if not 0 < bandwidth <= MAX_SHAPED_BYTES_PER_S:
            raise SpecError(f"--bandwidth: must be positive and at most {MAX_SHAPED_BYTES_PER_S * 8 / 1e12:g} Tbit/s, "
                            f"the most tc's token bucket shapes (got {args.bandwidth!r})")
    return MachineLimits(bandwidth, args.cpu_quota, memory)
