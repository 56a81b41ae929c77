"""Benchmark of ``hopgnn`` against ``dp`` on this machine: remote feature bytes (measured vs predicted),
micrograph locality, and the merge controller.

Sections (each prints values measured in the same run and their ratios to the ``dp`` baseline):

* ``bytes``: remote feature bytes per epoch counted by the executor (sum over ranks of the feature rows pulled
  from other machines, mean over the measured epochs) for ``dp`` (no cache) and ``hopgnn`` (S = M, pre-gather;
  ``hop/rnd`` = with the paper's globally random mini-batches, ``seed_split=random``; ``hop/rnd-nopg`` = the same
  without pre-gathering, fetching per step) on Cora and on a generated R-MAT graph, beside the simulator's prediction
  of both (same partition; the
  prediction uses the graph statistics' batches and sampler, the executor its own draw).
* ``locality``: R_micro (paper §4), the share of micrograph-group input vertices owned by the machine training
  them (1 - m_mg) and ``dp``'s remote fraction (m_dgl), on Cora, the R-MAT graph and a DC-SBM graph with
  communities (the same size) for 2 and 4 METIS partitions
  (and random partitions for reference).
* ``merge``: ``hopgnn`` with the merge controller for several epochs; the step count it settles on, then the
  median epoch time of fixed-S runs at that count and at S = M (no merging).

Usage::

    python benchmarks/bench_hopgnn.py [--sections bytes,locality,merge] [--epochs 6] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DGLBACKEND", "pytorch")

RMAT = {"generator": "rmat", "num_vertices": 20000, "edge_factor": 8, "feature_dim": 256, "num_classes": 8,
        "train_fraction": 0.2, "seed": 0}
"""The generated graph: 20k vertices, ~300k directed edges, 256-dim features, 4000 training vertices."""
SBM = {"generator": "sbm", "num_vertices": 20000, "num_communities": 16, "mu": 0.2, "mean_degree": 16.0,
       "feature_dim": 256, "num_classes": 8, "train_fraction": 0.2, "seed": 0}
"""A graph of the same size with community structure (DC-SBM, communities in id order): locality to find."""


CORA_EPOCHS = 16
"""Epochs of the Cora byte count: Cora's 140 training vertices are unevenly owned, so how many seeds a worker
takes from another machine varies from epoch to epoch; the graph statistics average the shuffles of epochs 0-15
(32 batches of 32 seeds per worker), so the executor is run over the same epochs. Cora is run at two batch sizes:
with 64 each worker's 70 seeds per epoch end in a partial batch of 6, which the graph statistics do not measure,
and the seed split puts the seeds a worker takes from another machine's share last, i.e. into that batch; with 70
every batch is full."""


def workload(dataset: Any, batch_size: int, fanouts: list[int], epochs: int) -> Any:
    """A GraphSAGE (2 layers, hidden 64) mini-batch workload on ``dataset``."""
    from gnnplan.simulator.workload.spec import workload_from_dict

    return workload_from_dict({"dataset": dataset, "model": {"arch": "sage", "num_layers": 2, "hidden_dim": 64},
                               "training": {"mode": "mini-batch", "batch_size": batch_size, "fanouts": fanouts,
                                            "num_epochs": epochs, "lr": 0.01}})


def run(strategy: str, wl: Any, workers: int, knobs: dict[str, Any], trace_dir: str) -> dict[str, Any]:
    """Train with the executor on ``workers`` local processes; returns ``run --json``'s result."""
    from gnnplan.executor.runner import run_plan
    from gnnplan.simulator.hardware.spec import load_cluster
    from gnnplan.simulator.plan import Plan

    cluster = load_cluster("4x-a100-10gbe").model_copy(update={"num_machines": workers})
    plan = Plan(strategy=strategy, knobs=knobs, num_workers=workers, cluster=cluster, workload=wl)
    return run_plan(plan, trace_dir=trace_dir, progress=False)


def measured_remote_bytes(result: dict[str, Any]) -> float:
    """Mean over the measured epochs of the remote feature bytes (all ranks)."""
    return statistics.fmean(r["bytes"]["remote"] for r in result["epochs"] if r["epoch"] in result["measured_epochs"])


def predicted_remote_bytes(strategy: str, wl: Any, workers: int, knobs: dict[str, Any]) -> float:
    """The simulator's remote feature bytes per epoch (all workers) for the executor's shape."""
    from gnnplan.simulator.api import load_context
    from gnnplan.simulator.hardware.spec import load_cluster
    from gnnplan.simulator.strategies import dp, hopgnn
    from gnnplan.simulator.strategies.window import iteration_plan

    cluster = load_cluster("4x-a100-10gbe").model_copy(update={"num_machines": workers})
    module, kn, ctx = load_context(cluster, wl, strategy, knobs)
    plan = iteration_plan(ctx.summary.num_train, ctx.batch_size, ctx.num_workers)
    if module is dp:
        per = [dp.iteration_work(ctx, kn, f)[0].remote_bytes * ctx.num_workers for f in (1.0, plan.last_fraction)]
    else:
        mg = hopgnn.micrograph_stats(ctx, kn)
        full, last = hopgnn.iteration_works(ctx, kn, mg, plan, kn.num_steps or workers)
        per = [sum(w.pregather_remote_rows * w.row_bytes if kn.pregather else sum(s.remote_bytes for s in w.steps)
                   for w in works) for works in (full, last)]
    return per[0] * (plan.num_iterations - 1) + per[1]


def bytes_section(epochs: int, workers: int, trace_dir: str) -> None:
    """Remote feature bytes per epoch: executor-counted vs predicted, dp vs hopgnn."""
    print(f"== remote feature bytes per epoch ({workers} workers, METIS; cora {max(epochs, CORA_EPOCHS)} epochs, "
          f"rmat20k {epochs}; mean of the measured epochs)")
    print(f"{'graph':<9} {'strategy':<12} {'measured_MB':>12} {'predicted_MB':>13} {'pred/meas':>10} {'vs dp':>8}")
    for name, dataset, batch, num_epochs in (("cora-b64", "cora", 64, max(epochs, CORA_EPOCHS)),
                                             ("cora-b70", "cora", 70, max(epochs, CORA_EPOCHS)),
                                             ("rmat20k", RMAT, 512, epochs)):
        wl = workload(dataset, batch, [10, 10], num_epochs)
        base = None
        for label, strategy, knobs in (("dp", "dp", {}), ("hopgnn", "hopgnn", {"num_steps": workers}),
                                       ("hop/rnd", "hopgnn", {"num_steps": workers, "seed_split": "random"}),
                                       ("hop/rnd-nopg", "hopgnn", {"num_steps": workers, "seed_split": "random",
                                                                   "pregather": False})):
            meas = measured_remote_bytes(run(strategy, wl, workers, knobs, trace_dir))
            pred = predicted_remote_bytes(strategy, wl, workers, knobs)
            base = base or meas
            print(f"{name:<9} {label:<12} {meas / 1e6:>12.3f} {pred / 1e6:>13.3f} {pred / meas:>10.3f} "
                  f"{meas / base:>8.3f}", flush=True)


def locality_section() -> None:
    """R_micro, group locality and the model-centric remote fraction for 2 and 4 partitions, for both seed splits
    (owner = dp's DistDGL split, random = the paper's globally random mini-batches)."""
    from gnnplan.simulator.strategies.hopgnn.micrographs import micrograph_stats
    from gnnplan.simulator.workload.spec import RmatSpec, SbmSpec

    print("== micrograph locality (fanouts [10, 10]; per-worker batch 32 on cora, 128 on rmat20k and sbm20k; S = M)")
    print("   R_micro: paper §4; mg_local: share of micrograph-group input vertices on the training machine;")
    print("   dp_remote: share of a model-centric worker's input vertices owned elsewhere (m_dgl)")
    print(f"{'graph':<8} {'parts':>5} {'partitioner':<11} {'split':<7} {'R_micro':>8} {'mg_local':>9} "
          f"{'dp_remote':>10} {'mg_remote/dp_remote':>20}")
    for name, dataset, batch in (("cora", "cora", 32), ("rmat20k", RmatSpec(**RMAT), 128),
                                 ("sbm20k", SbmSpec(**SBM), 128)):
        for parts in (2, 4):
            for partitioner in ("metis", "random"):
                for split in ("owner", "random"):
                    st = micrograph_stats(dataset, [10, 10], batch, parts, 1, partitioner, seed_split=split)
                    mg_remote = 1 - st.group_local_fraction
                    print(f"{name:<8} {parts:>5} {partitioner:<11} {split:<7} {st.micrograph_local_fraction:>8.3f} "
                          f"{st.group_local_fraction:>9.3f} {st.dp_remote_fraction:>10.3f} "
                          f"{mg_remote / max(st.dp_remote_fraction, 1e-12):>20.3f}", flush=True)


def merge_section(epochs: int, workers: int, trace_dir: str) -> None:
    """The merge controller's step count and the epoch time there vs without merging."""
    wl = workload(RMAT, 512, [10, 10], epochs)
    auto = run("hopgnn", wl, workers, {}, trace_dir)
    steps = [r for r in auto["epochs"]]
    from gnnplan.simulator.trace import read_trace

    spans, _ = read_trace(auto["trace"])
    per_epoch = {s.epoch: s.args.get("num_steps") for s in spans if s.phase == "epoch" and s.rank == 0}
    history = [(e, per_epoch.get(e), round(r["epoch_time_s"], 4)) for e, r in enumerate(steps)]
    chosen = per_epoch[max(per_epoch)]
    print(f"== merge controller (rmat20k, {workers} workers, {epochs} epochs): (epoch, S, epoch_time_s) = {history}")
    print(f"converged to S = {chosen} (no merging: S = {workers})")
    times = {}
    for s in sorted({chosen, workers}):
        times[s] = run("hopgnn", wl, workers, {"num_steps": s}, trace_dir)["epoch_time_s"]
        print(f"fixed S = {s}: median epoch time {times[s]:.4f} s", flush=True)
    print(f"epoch time at S = {chosen} / at S = {workers}: {times[chosen] / times[workers]:.3f} "
          f"({'no worse' if times[chosen] <= times[workers] else 'WORSE'} than without merging)")


def main(argv: list[str] | None = None) -> int:
    """Run the selected sections; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", default="bytes,locality,merge")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--keep-home", action="store_true", help="use the current GNNPLAN_HOME (warm cache)")
    args = parser.parse_args(argv)
    sections = args.sections.split(",")
    with tempfile.TemporaryDirectory(prefix="gnnplan-bench-") as tmp:
        if not args.keep_home:
            os.environ["GNNPLAN_HOME"] = tmp
        if "locality" in sections:
            locality_section()
        if "bytes" in sections:
            bytes_section(args.epochs, args.workers, tmp)
        if "merge" in sections:
            merge_section(args.epochs, args.workers, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
