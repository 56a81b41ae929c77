"""Benchmark: the PP-GNN loading ladder on this machine, measured and predicted by the calibrated simulator.

Ladder (PP-GNN brief /work/shared/papers/ppgnn.md §1.4, §5 "Ablation"), for host-memory and file-backed ("ssd")
placement of the hop matrices: baseline (per-row DataLoader, 2 workers) -> fused (one index operation per
matrix into a preallocated buffer) -> double buffering (a producer thread loads batch i+1 during batch i) ->
chunk reshuffling (double buffering + SGD-CR with chunk = batch size: contiguous runs copied / read whole).
Every step trains SIGN (R hops) on a generated R-MAT graph with the real executor trainer
(:class:`executor.strategies.ppgnn.Trainer`, one worker in this process) and reports seconds per iteration
(the epoch's wall time / its iterations; steps whose epoch would take minutes run ``--slow-iterations``
iterations), the projected epoch time and the speed-up against the baseline of the same placement. The
file-backed placement reads with ``O_DIRECT`` (:mod:`executor.strategies.ppgnn.files`), so every read reaches the disk;
the files are read once beforehand (and before calibration) so that every measurement sees the disk in the
same state.

Prediction: the simulator (:mod:`simulator.strategies.ppgnn`) on a cluster calibrated from micro-measurements
of the primitives its cost model prices, taken on the same files, and from short runs of configurations that
are not on the ladder: the copy into the device buffer (``pcie``), the row gather (host / "GPU" memory
bandwidth), direct reads of runs and of single 4 KiB pages of a hop file, alone and from 4 threads
(``storage`` bandwidth, latency and the device's useful concurrency), forward / backward efficiency and the
per-iteration overhead of a run with the matrices resident ("gpu" placement); then, by bisection on the
simulator, the per-row cost of the baseline loader (``host.row_index_s``) fitted to an epoch of the host-memory
baseline with half the batch size, and the storage bandwidth fitted to file-backed chunk reshuffling with half
the batch size (the disk as seen while the trainer computes beside the reads).
The last column is (predicted - measured) / measured.

Usage::

    python benchmarks/bench_ppgnn_loading.py [--vertices 1000000] [--hops 3] [--hidden 8] [--epochs 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DGLBACKEND", "pytorch")

STEPS = (("baseline", {"loader": "baseline", "reshuffle": "random"}),
         ("fused", {"loader": "fused", "reshuffle": "random"}),
         ("double buffering", {"loader": "double_buffer", "reshuffle": "random"}),
         ("chunk reshuffling", {"loader": "double_buffer", "reshuffle": "chunk"}))


def make_plan(args: argparse.Namespace, knobs: dict[str, Any], batch_size: int | None = None):  # type: ignore[no-untyped-def]
    """A one-worker ppgnn plan for the benchmark graph."""
    from gnnplan.simulator.hardware.spec import load_cluster
    from gnnplan.simulator.plan import Plan
    from gnnplan.simulator.workload.spec import workload_from_dict

    wl = workload_from_dict({
        "name": "bench-ppgnn",
        "dataset": {"generator": "rmat", "num_vertices": args.vertices, "edge_factor": args.edge_factor,
                    "feature_dim": args.features, "num_classes": 16, "train_fraction": 0.6, "val_fraction": 0.1,
                    "test_fraction": 0.1, "seed": 0},
        "model": {"arch": "sign", "num_layers": 1, "hidden_dim": args.hidden, "dropout": 0.5},
        "training": {"batch_size": batch_size or args.batch_size, "lr": 0.01, "weight_decay": 0.0, "seed": 0}})
    cluster = load_cluster("4x-a100-10gbe").model_copy(update={"num_machines": 1})
    return Plan(strategy="ppgnn", knobs={"hops": args.hops, **knobs}, num_workers=1, cluster=cluster, workload=wl)


def trainer_for(plan):  # type: ignore[no-untyped-def]
    import torch

    from gnnplan.executor.data import Topology
    from gnnplan.executor.strategies.ppgnn import Trainer
    from gnnplan.executor.trace import Recorder

    return Trainer(Topology(0, 1, 1, torch.device("cpu")), plan, Recorder(0, 0.0))


def measure(plan, epochs: int, max_iterations: int | None) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Seconds per iteration of the plan (median over measured epochs after a short warm-up epoch)."""
    trainer = trainer_for(plan)
    try:
        trainer.train_epoch(0, max_iterations=3)
        per_it, iterations = [], 0
        for epoch in range(1, epochs + 1):
            trainer.source.drop_page_cache()
            stats = trainer.train_epoch(epoch, max_iterations)
            per_it.append(stats.epoch_s / stats.num_iterations)
            iterations = len(trainer.schedule(epoch)[1])
    finally:
        trainer.close()
    return {"iteration_s": statistics.median(per_it), "num_iterations": iterations}


# ------------------------------------------------------------------------------------------------ calibration

def fit(sizes: list[float], times: list[float]) -> tuple[float, float]:
    """(latency_s, bandwidth) of ``time = latency + size / bandwidth`` (gnnplan probe's fit)."""
    from gnnplan.executor.probe_io import fit_latency_bandwidth

    return fit_latency_bandwidth(sizes, times)


def timed(fn, repeats: int = 5) -> float:  # type: ignore[no-untyped-def]
    """Median seconds of ``fn()`` after one warm-up call (:func:`gnnplan.executor.probe_host.median_time_s`)."""
    from gnnplan.executor.probe_host import median_time_s

    return median_time_s(fn, repeats)


def calibrate_transfers(files, hops: list[int], batch: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """On the real host hop matrices: the copy of contiguous runs into the device buffer (``pcie``: what the
    chunk loaders and the staging-to-device copy do) and the random-row gather into the staging buffer."""
    import numpy as np
    import torch

    host = [torch.from_numpy(files.load(r)) for r in hops]
    rows = [batch // 16, batch // 4, batch]
    stage = torch.empty((len(hops), batch, files.feature_dim))
    dev = torch.empty_like(stage)
    rng = np.random.default_rng(7)
    copy_t, gather_t = [], []
    for b in rows:
        firsts = iter(rng.integers(0, files.num_rows - b, 7).tolist())

        def copy(b=b, firsts=firsts) -> None:  # type: ignore[no-untyped-def]
            first = next(firsts)
            for m, t in enumerate(host):
                dev[m, :b].copy_(t[first:first + b])

        idx = iter([torch.from_numpy(rng.choice(files.num_train, b, replace=False)) for _ in range(7)])

        def gather(b=b, idx=idx) -> None:  # type: ignore[no-untyped-def]
            i = next(idx)
            for m, t in enumerate(host):
                torch.index_select(t, 0, i, out=stage[m, :b])

        copy_t.append(timed(copy))
        gather_t.append(timed(gather))
    nbytes = [b * len(hops) * files.feature_dim * 4 for b in rows]
    copy_lat, copy_bw = fit(nbytes, copy_t)
    _, gather_bw = fit(nbytes, gather_t)
    return {"copy_latency_s": copy_lat / len(hops), "copy_bytes_per_s": copy_bw, "gather_bytes_per_s": gather_bw}


def warm_device(files, hops: list[int]) -> None:  # type: ignore[no-untyped-def]
    """Read every hop file once with direct reads, so that calibration and the file-backed steps see the
    storage device in the same state (a virtual disk may cache on the host side)."""
    import numpy as np

    from gnnplan.executor.strategies.ppgnn.files import DirectReader

    buf = np.empty(64 * 2**20, np.uint8)
    for r in hops:
        reader = DirectReader(files.path(r))
        try:
            size = os.fstat(reader.fd).st_size
            for offset in range(0, size - len(buf), len(buf)):
                reader.read(offset, memoryview(buf))
        finally:
            reader.close()


def calibrate_storage(files, batch: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Direct (``O_DIRECT``) reads of hop file 0 as the loaders issue them: runs of ``batch / 8`` and ``batch``
    rows (bandwidth: slope of the latency + bandwidth fit), single aligned 4 KiB pages (latency: median time
    minus 4 KiB / bandwidth), and pages read from 4 threads at once (the device's useful concurrency)."""
    import numpy as np

    from gnnplan.executor.strategies.ppgnn.files import ALIGN, DirectReader
    from gnnplan.executor.strategies.ppgnn.loaders import IO_THREADS

    reader = DirectReader(files.path(0))
    rng = np.random.default_rng(3)
    row = files.feature_dim * 4
    try:
        sizes, times = [], []
        for rows in (batch // 8, batch):
            out = np.empty(rows * row, np.uint8)
            firsts = rng.choice(files.num_rows - rows, 6, replace=False)
            times.append(timed(lambda f=firsts, o=out: reader.read(int(f[rng.integers(6)]) * row, memoryview(o)), 5))
            sizes.append(rows * row)
        _, bandwidth = fit(sizes, times)
        page = np.empty(ALIGN, np.uint8)
        pages = rng.choice(files.num_rows * row // ALIGN - 1, 4000, replace=False)
        it = iter(pages[:1000])
        small = timed(lambda: reader.read(int(next(it)) * ALIGN, memoryview(page)), 800)
        concurrent = parallel_page_reads(reader, pages[1000:], IO_THREADS)
    finally:
        reader.close()
    return {"storage_bytes_per_s": bandwidth, "storage_latency_s": max(0.0, small - ALIGN / bandwidth),
            "storage_concurrency": max(1.0, min(float(IO_THREADS), small / concurrent)),
            "direct_reads": float(reader.direct)}


def parallel_page_reads(reader, pages, threads: int) -> float:  # type: ignore[no-untyped-def]
    """Seconds per 4 KiB page when ``threads`` threads read pages concurrently (as the fused loaders do)."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    from gnnplan.executor.strategies.ppgnn.files import ALIGN

    def work(part) -> None:  # type: ignore[no-untyped-def]
        page = np.empty(ALIGN, np.uint8)
        for p in part:
            reader.read(int(p) * ALIGN, memoryview(page))

    with ThreadPoolExecutor(threads) as pool:
        start = time.perf_counter()
        list(pool.map(work, np.array_split(pages, threads)))
        return (time.perf_counter() - start) / len(pages)


def fit_to_run(cluster, plan, measured_s: float, set_value, lo: float, hi: float):  # type: ignore[no-untyped-def]
    """Bisection (log scale) of one parameter so that the simulator predicts ``measured_s`` per iteration for
    ``plan``; ``set_value(x)`` installs x and returns the cluster to simulate (the prediction must grow as x
    does). Returns the fitted x."""
    for _ in range(30):
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if predict(set_value(mid), plan) < measured_s else (lo, mid)
    x = (lo * hi) ** 0.5
    set_value(x)
    return x


def calibrate_rows(args: argparse.Namespace, cluster) -> float:  # type: ignore[no-untyped-def]
    """``host.row_index_s`` fitted to one epoch of the host-memory baseline with HALF the batch size: the DataLoader
    workers' per-row cost as it is while the trainer computes beside them."""
    plan = make_plan(args, {"placement": "host", "loader": "baseline", "reshuffle": "random"},
                     batch_size=args.batch_size // 2)
    measured = measure(plan, 1, None)["iteration_s"]

    def install(x: float):  # type: ignore[no-untyped-def]
        return cluster.model_copy(update={"host": cluster.host.model_copy(update={"row_index_s": x})})

    return fit_to_run(cluster, plan, measured, install, 1e-7, 1e-4)


def calibrate_run_reads(args: argparse.Namespace, cluster):  # type: ignore[no-untyped-def]
    """Storage bandwidth fitted to 40 iterations of file-backed chunk reshuffling (double buffering) with HALF
    the batch size: the disk as the loader's threads see it while the trainer computes."""
    plan = make_plan(args, {"placement": "ssd", "loader": "double_buffer", "reshuffle": "chunk"},
                     batch_size=args.batch_size // 2)
    measured = measure(plan, 1, 40)["iteration_s"]
    box = {"cluster": cluster}

    def install(bw: float):  # type: ignore[no-untyped-def]
        box["cluster"] = cluster.model_copy(update={"storage": cluster.storage.model_copy(
            update={"bandwidth_bytes_per_s": bw})})
        return box["cluster"]

    fit_to_run(cluster, plan, measured, lambda bw: install(1e12 / bw), 1e12 / 1e11, 1e12 / 1e7)
    return box["cluster"]


def calibrate_compute(args: argparse.Namespace, cluster) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Forward / backward efficiency and per-iteration overhead from a short run with resident matrices."""
    from gnnplan.simulator.hardware.formulas import compute_time_s
    from gnnplan.simulator.strategies.ppgnn.cost import model_cost

    plan = make_plan(args, {"placement": "gpu", "loader": "fused"})
    trainer = trainer_for(plan)
    try:
        trainer.train_epoch(0, max_iterations=4)
        trainer.train_epoch(1, max_iterations=20)
        spans = [s for s in trainer.rec.spans() if s.epoch == 1]
    finally:
        trainer.close()
    by = {p: [s for s in spans if s.phase == p] for p in ("load", "forward", "backward", "optimizer", "iteration")}
    rows = plan.workload.training.batch_size
    cost = model_cost(plan.workload.model, trainer.files.feature_dim, trainer.files.num_classes, args.hops, rows)
    fwd = statistics.median(s.dur_s for s in by["forward"])
    bwd = statistics.median(s.dur_s for s in by["backward"])
    optimizer = compute_time_s(cost.optimizer, cluster.gpu, 1.0)
    overhead = [it.dur_s - sum(by[p][k].dur_s for p in ("load", "forward", "backward")) - optimizer
                for k, it in enumerate(by["iteration"])]
    return {"forward_fraction": compute_time_s(cost.forward, cluster.gpu, 1.0) / fwd,
            "backward_fraction": compute_time_s(cost.backward, cluster.gpu, 1.0) / bwd,
            "iteration_overhead_s": max(0.0, statistics.median(overhead))}


def calibrated_cluster(args: argparse.Namespace, files, hops: list[int]):  # type: ignore[no-untyped-def]
    """This machine as a one-worker cluster with the calibrated parameters (module docstring)."""
    import torch

    from gnnplan.executor.probe_host import cpu_model, dense_flops_per_s, host_memory_bytes
    from gnnplan.simulator.hardware.formulas import GATHER_TRAFFIC
    from gnnplan.simulator.hardware.spec import cluster_from_dict

    threads = torch.get_num_threads()
    warm_device(files, hops)
    tr = calibrate_transfers(files, hops, args.batch_size)
    st = calibrate_storage(files, args.batch_size)
    memory = host_memory_bytes()
    base = cluster_from_dict({
        "name": "local-ppgnn", "num_machines": 1, "gpus_per_machine": 1,
        "gpu": {"model": cpu_model(), "peak_flops_per_s": dense_flops_per_s(threads, 1024, 5), "memory_bytes": memory,
                "memory_bandwidth_bytes_per_s": tr["gather_bytes_per_s"], "is_host_cpu": True},
        "host": {"num_cores": threads, "memory_bytes": memory,
                 "memory_bandwidth_bytes_per_s": tr["gather_bytes_per_s"]},
        "pcie": {"bandwidth_bytes_per_s": tr["copy_bytes_per_s"], "latency_s": tr["copy_latency_s"]},
        "network": {"bandwidth_bytes_per_s": 1e9, "latency_s": 1e-5},
        "storage": {"bandwidth_bytes_per_s": st["storage_bytes_per_s"], "latency_s": st["storage_latency_s"],
                    "gpudirect": False, "concurrency": st["storage_concurrency"]}})
    comp = calibrate_compute(args, base)
    eff = {"forward_fraction": min(10.0, comp["forward_fraction"]),
           "backward_fraction": min(10.0, comp["backward_fraction"]),
           # the memory bandwidth above is the measured gather rate in gathered bytes; a gather's traffic is
           # GATHER_TRAFFIC bytes per gathered byte (read and written), so that rate is reached at this fraction
           "gather_fraction": GATHER_TRAFFIC}
    cluster = base.model_copy(update={"efficiency": base.efficiency.model_copy(update=eff),
                                      "iteration_overhead_s": comp["iteration_overhead_s"]})
    row_index_s = calibrate_rows(args, cluster)
    cluster = cluster.model_copy(update={"host": cluster.host.model_copy(update={"row_index_s": row_index_s})})
    cluster = calibrate_run_reads(args, cluster)
    return cluster, {**tr, **st, **comp, "row_index_s": row_index_s,
                     "storage_bytes_per_s (fitted)": cluster.storage.bandwidth_bytes_per_s}


def predict(cluster, plan) -> float:  # type: ignore[no-untyped-def]
    """Predicted seconds per iteration."""
    from gnnplan.simulator.strategies import ppgnn
    from gnnplan.simulator.strategies.base import SimContext
    from gnnplan.simulator.workload.graphstats import dataset_summary

    wl = plan.workload
    ctx = SimContext(cluster, wl, None, dataset_summary(wl.dataset), wl.training.batch_size)  # type: ignore[arg-type]
    res = ppgnn.simulate(ctx, ppgnn.Knobs.model_validate(plan.knobs))
    return res.iteration_time_s


# ------------------------------------------------------------------------------------------------------ main

def main(argv: list[str] | None = None) -> int:
    """Run the ladder and print measured and predicted times."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vertices", type=int, default=1_000_000)
    parser.add_argument("--edge-factor", type=int, default=8)
    parser.add_argument("--features", type=int, default=128)
    parser.add_argument("--hops", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=8000)
    parser.add_argument("--epochs", type=int, default=2, help="measured epochs per step (after a warm-up)")
    parser.add_argument("--slow-iterations", type=int, default=8,
                        help="iterations measured for the file-backed random-access steps")
    parser.add_argument("--placements", default="host,ssd")
    parser.add_argument("--no-predict", action="store_true")
    args = parser.parse_args(argv)

    from gnnplan.executor.strategies.ppgnn.models import loaded_hops
    from gnnplan.executor.strategies.ppgnn.preprop import prepropagated

    plan0 = make_plan(args, {})
    started = time.perf_counter()
    files = prepropagated(plan0.workload.dataset, args.hops)
    hops = loaded_hops("sign", args.hops)
    print(f"graph {plan0.workload.dataset_name}: {files.num_train} training rows x {len(hops)} matrices x "
          f"{files.feature_dim} features = {files.num_train * len(hops) * files.feature_dim * 4 / 1e9:.2f} GB per "
          f"epoch (pre-propagation ready in {time.perf_counter() - started:.1f} s)")
    cluster = None
    if not args.no_predict:
        cluster, params = calibrated_cluster(args, files, hops)
        print("calibration: " + ", ".join(f"{k} {v:.4g}" for k, v in params.items()))
    print(f"{'placement':<9} {'step':<18} {'s/iteration':>11} {'epoch s':>8} {'speed-up':>8} {'predicted':>9} "
          f"{'error':>7}")
    for placement in args.placements.split(","):
        if placement == "ssd":
            warm_device(files, hops)
        base = None
        for name, knobs in STEPS:
            plan = make_plan(args, {"placement": placement, **knobs})
            slow = placement == "ssd" and knobs["reshuffle"] == "random"
            got = measure(plan, args.epochs, args.slow_iterations if slow else None)
            base = base or got["iteration_s"]
            line = (f"{placement:<9} {name:<18} {got['iteration_s']:>11.4f} "
                    f"{got['iteration_s'] * got['num_iterations']:>8.2f} {base / got['iteration_s']:>7.2f}x")
            if cluster is not None:
                pred = predict(cluster, plan)
                line += f" {pred:>9.4f} {100 * (pred - got['iteration_s']) / got['iteration_s']:>+6.1f}%"
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
