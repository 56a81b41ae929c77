"""The subcommands behind :mod:`autotune.cli`; each returns an exit code and is the only place that prints."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gnnplan.autotune import api_args, report
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.spec import ClusterSpec, load_cluster
from gnnplan.simulator.paths import user_home
from gnnplan.simulator.wording import counted
from gnnplan.simulator.workload.spec import load_workload


def emit_json(obj: Any) -> None:
    """Print one JSON object on stdout."""
    print(json.dumps(obj, indent=1, default=str))


def output_path(arg: str | None, default: Path) -> Path:
    """The path to write: the user's ``-o`` or the default."""
    return Path(arg) if arg else default


def cluster_from_args(args: argparse.Namespace) -> ClusterSpec:
    """``--cluster`` with the ``--cluster-set FIELD=VALUE`` changes applied (:mod:`gnnplan.simulator.overrides`)."""
    from gnnplan.simulator.overrides import with_fields

    return with_fields(load_cluster(args.cluster), getattr(args, "cluster_sets", []), "--cluster-set")


def positive_flag(name: str, value: int | None) -> None:
    """An optional count flag: None (not given) or :func:`gnnplan.autotune.api_args.positive_count`."""
    if value is not None:
        api_args.positive_count(name, value)


def simulate_inputs(args: argparse.Namespace) -> tuple[ClusterSpec, Any, str, Any]:
    """(cluster, workload, strategy, knobs) of ``gnnplan simulate``: from ``--cluster``, ``--workload``,
    ``--strategy`` and ``--set``, or from ``--plan`` (its knobs updated by ``--set``); ``--cluster-set`` applies
    to either cluster.

    Raises:
        SpecError: ``--plan`` given with one of the three, or without it one of them missing; a bad plan, spec
            or knob.
    """
    from gnnplan.simulator.api import parse_knobs
    from gnnplan.simulator.overrides import with_fields
    from gnnplan.simulator.plan import load_plan

    given = [f"--{name}" for name in ("cluster", "workload", "strategy") if getattr(args, name) is not None]
    if args.plan is None:
        missing = [f"--{n}" for n in ("cluster", "workload", "strategy") if f"--{n}" not in given]
        if missing:
            raise SpecError(f"{', '.join(missing)}: required (or --plan PLAN for --cluster, --workload and --strategy)")
        knobs = parse_knobs(args.strategy, args.knobs)
        return cluster_from_args(args), load_workload(args.workload), args.strategy, knobs
    if given:
        raise SpecError(f"--plan: the plan names the cluster, workload and strategy; leave out {', '.join(given)} "
                        "(change the plan's with --cluster-set and --set)")
    plan = load_plan(args.plan)
    knobs = {**plan.knobs, **parse_knobs(plan.strategy, args.knobs)}  # simulate validates them together
    cluster = with_fields(plan.cluster, args.cluster_sets, "--cluster-set")
    return cluster, plan.workload, plan.strategy, knobs


def cmd_simulate(args: argparse.Namespace) -> int:
    """``gnnplan simulate``: one configuration."""
    from rich.progress import track

    from gnnplan.autotune.draws import draws_record
    from gnnplan.simulator.api import predicted_trace, simulate, simulate_on_draws, trace_metadata
    from gnnplan.simulator.workload.proxy_draws import redrawn, requested_draws

    cluster, workload, strategy, knobs = simulate_inputs(args)
    refs = requested_draws(workload.dataset, args.proxy_draws)
    res = simulate(cluster, workload, strategy, knobs)
    out = res.to_json_dict()
    if refs is not None:
        again = redrawn(workload.dataset, refs)  # a pooled card's prediction is none of its draws'
        others = [simulate_on_draws(cluster, workload, strategy, knobs, [ref])[0] for ref in track(
            again, description="simulating on the proxy draws (a draw's statistics are measured once, then cached)",
            console=report.console(stderr=True), transient=True, disable=args.json)]
        out["proxy_draws"] = draws_record(refs, others if len(again) == len(refs) else [res, *others])
    if args.trace:
        predicted_trace(res, args.trace, {**trace_metadata(cluster, workload, strategy, res),
                                          "cluster": cluster.to_yaml_dict(), "workload": workload.to_yaml_dict()})
    notes = res.notes  # simulate's: a batch larger than the training set
    if args.json:
        emit_json({**out, "notes": notes})
    else:
        con = report.console()
        con.print(report.simulation_table(out, on_cpu=cluster.gpu.is_host_cpu,
                                          where=f"{workload.name or workload.dataset_name} on {cluster.name}"))
        _print_peak_rates(con, cluster)
        for note in notes:
            con.print(f"note: {note}")
    return 0


def _print_peak_rates(con: Any, cluster: ClusterSpec) -> None:
    """A line when ``cluster`` prices compute at datasheet peaks (simulator/hardware/peak_rates.py)."""
    from gnnplan.simulator.hardware.peak_rates import peak_rates_caveat

    line = peak_rates_caveat(cluster)
    if line:
        con.print(line)


def cmd_tune(args: argparse.Namespace) -> int:
    """``gnnplan tune``: Optuna search, ranked table, best plan written as YAML."""
    from gnnplan.autotune.planning import tune_to_plan
    from gnnplan.simulator.strategies.base import oversized_batch_note
    from gnnplan.simulator.workload.proxy_estimated import community_caveat

    positive_flag("--trials", args.trials)
    cluster, workload = cluster_from_args(args), load_workload(args.workload)
    names = api_args.names("--strategies", args.strategies)
    out = tune_to_plan(cluster, workload, names, args.trials, args.storage, args.study, args.tune_batch_size,
                       args.seed, Path(args.output), progress=not args.json and sys.stderr.isatty(),
                       allow_model_change=args.allow_model_change, proxy_draws=args.proxy_draws)
    batch = oversized_batch_note(workload, cluster.num_gpus, out["best"]["knobs"])
    if args.json:
        emit_json({**out, "notes": [batch] if batch else []})
    else:
        con = report.console()
        con.print(report.ranked_table(out["ranked"], on_cpu=cluster.gpu.is_host_cpu))
        if out["best"].get("estimated"):  # a dataset card: say what its statistics are
            con.print(f"statistics: {report.estimated_text(out['best']['estimated'])}")
        if "proxy_draws" in out:
            con.print(report.draws_line(out["proxy_draws"]))
        caveat = community_caveat(workload.dataset)
        if caveat:  # a card whose proxy has no block model: its partition-dependent statistics are biased
            con.print(f"{workload.dataset}: the proxy's communities: {caveat}")
        _print_peak_rates(con, cluster)
        total = out['num_trials_total']
        con.print(f"study {out['study']} ({total} trial{'' if total == 1 else 's'} in {out['storage']}); "
                  f"best plan written to {out['plan']}")
        if out.get("note"):
            con.print(out["note"])
        if batch:
            con.print(f"note: the best plan's {batch}")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    """``gnnplan calibrate TRACE... --cluster C``: fit, write the calibrated cluster, report errors."""
    from gnnplan.autotune.planning import calibrate_traces
    from gnnplan.simulator.calibrate import calibrated_name

    cluster = load_cluster(args.cluster)
    default = user_home() / "presets" / f"{calibrated_name(cluster.name)}.yaml"
    out = calibrate_traces(args.traces, cluster, output_path(args.output, default))
    if args.json:
        emit_json(out)
        return 0
    con = report.console()
    con.print(report.parameter_table(out["parameters"]))
    _print_held_out(con, out["held_out"])
    _print_memory(con, out.get("memory"))
    for name, r in out["traces"].items():
        con.print(f"fit (in-sample, not a prediction): {name} measured {report.fmt_s(r['measured_epoch_time_s'])}, "
                  f"fit {report.fmt_s(r['fit_epoch_time_s'])} "
                  f"({report.pct(r['fit_epoch_time_s'], r['measured_epoch_time_s'])})")
    for name, load in out.get("busy", {}).items():
        con.print(f"note: {name}: {report.background_note(load)}")
    for name, where in out.get("other_machines", {}).items():
        con.print(f"note: {name} ran on {where}, not on {cluster.name}'s {cluster.gpu.model}: the fit moves "
                  f"{cluster.name}'s parameters toward that machine's")
    con.print(f"calibrated cluster written to {out['output']} (use it as --cluster {out['output']})")
    return 0


def _print_memory(con: Any, memory: dict[str, Any] | None) -> None:
    """The memory part of a calibration report: held-out peaks, or why there are none."""
    if not memory:
        return
    if memory["held_out"]["rows"]:
        con.print(report.memory_table(memory))
    elif memory["after"] is not None:
        con.print(f"peak host memory: {memory['parameter']} {report.fmt_bytes(memory['before'])} -> "
                  f"{report.fmt_bytes(memory['after'])} (fit); held out: {memory['held_out']['reason']}")
    else:
        con.print(f"peak host memory: {memory['held_out']['reason']}; {memory['parameter']} left as it was")


def _print_held_out(con: Any, held: dict[str, Any]) -> None:
    """The held-out errors of a calibration report: epochs, then configurations (or why there are none)."""
    epochs = held["epochs"]
    if epochs["rows"]:
        con.print(report.held_out_table(epochs["rows"]))
    for name, reason in epochs["not_held_out"].items():
        con.print(f"held-out epochs: {name}: {reason}")
    for line in report.transient_lines(epochs):
        con.print(line)
    configurations = held["configurations"]
    if configurations["rows"]:
        con.print(report.configuration_table(configurations["rows"]))
    else:
        con.print(f"held-out configurations: {configurations['reason']}")


def cmd_trace_merge(args: argparse.Namespace) -> int:
    """``gnnplan trace merge PRED MEASURED -o FILE``: both timelines in one Chrome trace."""
    from gnnplan.simulator.trace_merge import merge_files

    meta = merge_files(args.predicted, args.measured, args.output, args.epoch)
    if args.json:
        emit_json({"output": args.output, **meta})
    else:
        times = meta["epoch_time_s"]
        report.console().print(f"wrote {args.output}: predicted epoch {report.fmt_s(times['predicted'])}, "
                               f"measured epoch {report.fmt_s(times['measured'])} (open in https://ui.perfetto.dev)")
    return 0


def cmd_loop(args: argparse.Namespace) -> int:
    """``gnnplan loop``: the main job (tune, run, calibrate, report)."""
    from gnnplan.autotune.loop import main_job

    for name in ("trials", "nprocs", "epochs"):
        positive_flag(f"--{name}", getattr(args, name))
    con = report.console()
    out = main_job(args.cluster, args.workload, trials=args.trials, nprocs=args.nprocs, epochs=args.epochs,
                   storage=args.storage, out_dir=Path(args.out_dir),
                   say=None if args.json else con.print)
    if args.json:
        emit_json(out)
        return 0
    held = out["held_out"]
    if held["rows"]:
        con.print(report.held_out_table(held["rows"]))
    else:
        advice = "" if "held-out error" in (held["reason"] or "") else " (run more epochs, e.g. --epochs 4, for a " \
                                                                      "held-out error)"
        con.print(f"held-out epochs: {held['reason']}{advice}")
    con.print(f"report: {out['report_html']} (open it in a browser); predicted vs measured timeline: "
              f"gnnplan trace merge {out['predicted_trace']} {out['trace']} -o merged.json")
    return 0


def cmd_whatif(args: argparse.Namespace) -> int:
    """``gnnplan whatif``: sweep fields, tune every strategy per point, write CSV, JSON and an HTML chart."""
    from gnnplan.autotune import whatif_report as wr
    from gnnplan.autotune.whatif import WhatifRequest, parse_axes, run_whatif

    positive_flag("--trials", args.trials)
    axes = parse_axes(args.vary)
    names = api_args.names("--strategies", args.strategies)
    req = WhatifRequest(args.cluster, args.workload, axes, names, args.trials, args.seed, args.allow_model_change,
                        list(args.cluster_sets), args.proxy_draws)
    err = report.console(stderr=True)
    res = run_whatif(req, say=None if args.json else err.print)
    out = Path(args.output)
    paths = wr.write_outputs(res, out, wr.title(res, args.cluster, args.workload))
    if args.json:
        emit_json({"summary": res.summary, "crossovers": res.crossovers, "card_communities": res.card_communities,
                   "card_statistics": res.card_statistics, "peak_rates": res.peak_rates, "notes": res.notes,
                   **{k: str(p) for k, p in paths.items()}})
        return 0
    con = report.console()
    con.print(wr.summary_table(res))
    for line in wr.crossover_lines(res):
        con.print(line)
    for dataset, est in res.card_statistics.items():
        con.print(f"{dataset}: statistics {report.estimated_text(est, 'card_statistics')}")
    for dataset, caveat in res.card_communities.items():
        con.print(f"{dataset}: the proxy's communities: {caveat}")
    for line in res.peak_rates:
        con.print(line)
    for note in res.notes:
        con.print(f"note: {note}")
    con.print(f"wrote {paths['csv']}, {paths['json']} and {paths['html']}")
    return 0


def cmd_card(args: argparse.Namespace) -> int:
    """``gnnplan card``: measure a graph into a dataset card (:func:`simulator.workload.card_measures.derived_card`
    with ``--structure`` as its communities) and write it into the cards folder, refusing to replace a card there
    without ``--force``."""
    import time

    from gnnplan.simulator.workload.card_measures import derived_card
    from gnnplan.simulator.workload.cards import card_dirs, card_name, check_card_name, write_card
    from gnnplan.simulator.workload.datasets import PRESETS, load_dataset

    check_card_name(args.name)
    if card_name(args.dataset) is not None:
        raise SpecError(f"DATASET: {args.dataset!r} is a dataset card already; give a graph (cora, citeseer or an "
                        "OGB folder)")
    folder = output_path(args.output, card_dirs()[0])
    target = folder / f"{args.name}.yaml"
    if target.exists() and not args.force:
        raise SpecError(f"--name: {target} exists; --force replaces it")
    shipped = card_dirs()[-1] / f"{args.name}.yaml"
    if folder == card_dirs()[0] and shipped.is_file() and not args.force:
        raise SpecError(f"--name: {args.name!r} is a card shipped with gnnplan, and a card of that name in {folder} "
                        f"replaces it in every workload naming card:{args.name}; choose another name, or --force")
    started = time.perf_counter()
    try:
        g = load_dataset(args.dataset)
    except SpecError as exc:  # the dataset is this command's argument, not a workload's field
        message = str(exc).replace("workload.dataset:", "DATASET:", 1).replace(
            "use a dataset card (card:<name>) for statistics without the graph, or a machine with more memory",
            "measure it on a machine with more memory, or write its card from published figures (the shipped "
            "cards' layout, simulator/workload/cards/)")  # a card is what this command makes
        if " is neither a preset " in message:  # a card is no graph to measure: do not offer the cards
            message = (f"DATASET: {args.dataset!r} is neither a bundled graph ({', '.join(PRESETS)}) nor an existing "
                       "folder in the OGB raw layout (CSV or npz)")
        raise SpecError(message) from None
    card = derived_card(args.name, g.num_vertices, g.src, g.dst, g.feature_dim, g.num_classes,
                        (len(g.train_idx), len(g.val_idx), len(g.test_idx)), labels=g.labels,
                        how=f"measured on {args.dataset} by gnnplan card",
                        communities=None if args.structure == "none" else args.structure, train_idx=g.train_idx)
    path = write_card(card, folder)
    seconds = time.perf_counter() - started
    comm = card.communities
    record = {"card": str(path), "name": card.name, "structure": args.structure,
              "num_vertices": card.num_vertices.value, "num_edges": card.num_edges.value,
              "num_communities": comm.num_communities.value if comm else None, "mu": comm.mu.value if comm else None,
              "metis_edge_cut": card.metis_edge_cut.value if card.metis_edge_cut else None, "seconds": seconds}
    if args.json:
        emit_json(record)
        return 0
    planted = f"{record['num_communities']} communities, mu {record['mu']:g}" if comm else "no communities"
    if comm is not None and comm.block_sizes is not None:  # the number is an effective one; the model has them all
        planted = (f"{record['num_communities']} effective communities (inverse Simpson index; "
                   f"{len(comm.block_sizes.value)} in its block model), mu {record['mu']:g}")
    if card.metis_edge_cut is not None:
        planted += ", METIS edge cut " + ", ".join(f"{f:g} at {p} parts" for p, f in card.metis_edge_cut.value)
    use = (f"workload.dataset: card:{card.name}" if folder == card_dirs()[0] else
           f"copy it into {card_dirs()[0]} to use it as workload.dataset: card:{card.name}")
    report.console().print(f"wrote {path}: {record['num_vertices']:,} vertices, {record['num_edges']:,} edges, "
                           f"{planted} ({args.structure}; measured in {seconds:.1f} s); {use}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """``gnnplan report [DIR]``: the HTML page of a loop folder (or of a study, plan and traces named one by one),
    or a whatif folder's chart redrawn (:mod:`autotune.report_page`)."""
    from gnnplan.autotune import report_page as rp

    explicit = args.study or args.storage or args.plan or args.traces or args.predicted_trace
    if args.folder is not None:
        rp.check_folder(args.folder)
    if args.folder is not None and rp.whatif_folder(args.folder):
        if explicit:
            raise SpecError(f"DIR: {args.folder} is a whatif folder; --study, --storage, --plan, --trace and "
                            "--predicted-trace are for loop folders")
        dest = output_path(args.output, Path(args.folder) / "whatif.html")
        rp.check_output(dest)
        charts, missing = ["whatif"], {}
        rp.write_whatif(args.folder, dest)
    else:
        dest = output_path(args.output, Path(args.folder or ".") / rp.REPORT_HTML)
        rp.check_output(dest)
        inputs = rp.gather(args.folder, args.study, args.storage, args.plan, args.traces, args.predicted_trace)
        page = rp.write_report(inputs, dest)
        charts, missing = page.charts, {k: v for k, v in page.notes.items() if k not in page.charts}
    if args.json:
        emit_json({"output": str(dest), "charts": charts, "missing": missing})
        return 0
    con = report.console()
    for cid, why in missing.items():
        con.print(f"{cid}: not drawn: {why}")
    con.print(f"wrote {dest} ({counted(len(charts), 'chart')}; self-contained, open it in a browser)")
    return 0
