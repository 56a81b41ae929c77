"""Benchmark: the executor's training throughput against a plain DGL training loop (goal: ratio >= 0.9).

Both train the same GraphSAGE model (``SAGEConv`` "mean" layers, ReLU, dropout, Adam) with the same
``NeighborSampler`` fanouts, batch size and features on one worker, in this process, alternating rounds so
machine noise hits both alike. Throughput = training seeds per second of an epoch (evaluation excluded); the
median over the measured epochs (every epoch of a round but its first, the warm-up). The baseline is written
here with DGL and PyTorch only (no gnnplan code): ``dgl.dataloading.DataLoader`` + model + Adam, features
indexed directly. It samples with DGL's default thread count; the executor samples on one thread (reproducible
sampling, see executor/sampling.py), so a second baseline variant with one sampling thread is printed too.

The executor starts its worker processes with ``OMP_WAIT_POLICY=PASSIVE`` (executor/threads.py, ``WAIT_POLICY``);
the one worker here runs in this process, so this process gets the same policy before it loads torch, for both
loops (unless the environment sets one: run with ``OMP_WAIT_POLICY=ACTIVE`` to see libgomp's spinning default).
With the default, on a machine shared with other jobs both loops' parallel regions stall on descheduled spinning
threads and the ratio measures that interference more than the executor: on the 2-core development machine under
the test suite's load it ranged 0.15-0.58 over 7 runs (executor median epoch 0.54-1.87 s, plain DGL 0.28-0.37 s).

Usage::

    python benchmarks/bench_executor_overhead.py [--workload rmat100k-sage] [--epochs 6] [--rounds 2]
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DGLBACKEND", "pytorch")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the executor's workers (module docstring); before torch loads

GOAL = 0.9


def baseline_epochs(workload, epochs: int, sampling_threads: int | None) -> list[float]:  # type: ignore[no-untyped-def]
    """Seconds per epoch of a plain DGL GraphSAGE training loop (no gnnplan code)."""
    import dgl
    import torch
    import torch.nn.functional as F
    from dgl.nn.pytorch import SAGEConv

    from gnnplan.simulator.workload.datasets import load_dataset  # the same graph; training below is plain DGL

    data = load_dataset(workload.dataset)
    g = dgl.graph((torch.from_numpy(data.src), torch.from_numpy(data.dst)), num_nodes=data.num_vertices)
    feats, labels = torch.from_numpy(data.features), torch.from_numpy(data.labels)
    train = torch.from_numpy(data.train_idx)
    m, t = workload.model, workload.training
    dims = [data.feature_dim] + [m.hidden_dim] * (m.num_layers - 1) + [data.num_classes]
    layers = torch.nn.ModuleList(SAGEConv(i, o, "mean") for i, o in itertools.pairwise(dims))
    dropout = torch.nn.Dropout(m.dropout)
    opt = torch.optim.Adam(layers.parameters(), lr=t.lr, weight_decay=t.weight_decay)
    sampler = dgl.dataloading.NeighborSampler(list(t.fanouts))
    loader = dgl.dataloading.DataLoader(g, train, sampler, batch_size=t.batch_size, shuffle=True, drop_last=False)
    previous = dgl.utils.get_num_threads()
    times = []
    for _ in range(epochs):
        start = time.perf_counter()
        for input_nodes, seeds, blocks in _timed_threads(loader, sampling_threads, previous):
            h = feats[input_nodes]
            for k, (layer, block) in enumerate(zip(layers, blocks)):
                h = layer(block, h)
                if k < len(layers) - 1:
                    h = dropout(F.relu(h))
            loss = F.cross_entropy(h, labels[seeds])
            opt.zero_grad()
            loss.backward()
            opt.step()
        times.append(time.perf_counter() - start)
    return times


def _timed_threads(loader, sampling_threads: int | None, previous: int):  # type: ignore[no-untyped-def]
    """Iterate the loader with DGL's thread count set to ``sampling_threads`` while it samples."""
    import dgl

    it = iter(loader)
    while True:
        if sampling_threads is not None:
            dgl.utils.set_num_threads(sampling_threads)
        try:
            batch = next(it)
        except StopIteration:
            return
        finally:
            dgl.utils.set_num_threads(previous)
        yield batch


def executor_epochs(workload, epochs: int, trace_dir: str) -> tuple[list[float], int]:  # type: ignore[no-untyped-def]
    """Seconds per epoch of ``gnnplan run`` on one worker (in this process) and seeds per epoch."""
    from gnnplan.executor.runner import run_plan
    from gnnplan.simulator.hardware.spec import load_cluster
    from gnnplan.simulator.plan import Plan

    cluster = load_cluster("4x-a100-10gbe").model_copy(update={"num_machines": 1})
    plan = Plan(strategy="dp", knobs={}, num_workers=1, cluster=cluster, workload=workload)
    res = run_plan(plan, nprocs=1, epochs=epochs, trace_dir=trace_dir, progress=False)
    return res["epoch_times_s"], res["epochs"][-1]["num_seeds"]


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="rmat100k-sage")
    parser.add_argument("--epochs", type=int, default=6, help="epochs per round (the first is warm-up)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    from gnnplan.simulator.workload.datasets import load_dataset
    from gnnplan.simulator.workload.spec import load_workload

    workload = load_workload(args.workload)
    if workload.model.arch != "sage":
        parser.error("--workload: the baseline loop is GraphSAGE; pick a workload with model.arch sage")
    data = load_dataset(workload.dataset)
    num_seeds = len(data.train_idx)
    times: dict[str, list[float]] = {"executor": [], "dgl": [], "dgl-1-sampling-thread": []}
    with tempfile.TemporaryDirectory(prefix="gnnplan-bench-traces-") as trace_dir:
        for _ in range(max(1, args.rounds)):
            ex, seeds = executor_epochs(workload, args.epochs, trace_dir)
            times["executor"] += ex[1:]
            times["dgl"] += baseline_epochs(workload, args.epochs, None)[1:]
            times["dgl-1-sampling-thread"] += baseline_epochs(workload, args.epochs, 1)[1:]
    assert seeds == num_seeds
    rate = {k: num_seeds / statistics.median(v) for k, v in times.items()}
    print(f"workload {args.workload}: {data.num_vertices} vertices, {data.num_edges} edges, {num_seeds} training "
          f"seeds, batch {workload.training.batch_size}, fanouts {workload.training.fanouts}; "
          f"{args.rounds} rounds x {args.epochs - 1} measured epochs; OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}, "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end")
    for k, r in rate.items():
        print(f"{k:>22}: median epoch {num_seeds / r:.3f} s, {r:,.0f} seeds/s")
    ratio = rate["executor"] / rate["dgl"]
    verdict = "met" if ratio >= GOAL else "missed"
    print(f"throughput ratio executor / plain DGL: {ratio:.3f} (goal >= {GOAL}: {verdict})")
    print(f"throughput ratio executor / plain DGL with one sampling thread: "
          f"{rate['executor'] / rate['dgl-1-sampling-thread']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
