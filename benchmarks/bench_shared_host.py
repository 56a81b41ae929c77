"""Benchmark: PP-GNN's predicted 1 -> 4 GPU speedup with and without a shared host link (simulator only).

The PP-GNN testbed (preset ``4x-a6000-pcie4``: one server, 4 x RTX A6000 on PCIe 4.0, 2 x Xeon Gold 6248R) trains
SGC and SIGN (R = 3 hops, batch 8000, the brief's setting) on ogbn-papers100M's sizes with the hop matrices in
host memory (PP-GNN brief /work/shared/papers/ppgnn.md §1.4, §8 limitation 3: "adding GPUs does not add
host-to-GPU bandwidth"). Two topologies of the same machine, each measured against its own 1-GPU run:

* ``own ports``: every GPU on an x16 root port of its own (``pcie.gpus_per_uplink = 1``, the preset);
* ``one uplink``: the four GPUs behind one PCIe switch with one x16 uplink to the CPU (``gpus_per_uplink = 4``;
  Supermicro SYS-4029GP-TRT3's single-root layout).

Both share the host memory (``host.memory_bandwidth_bytes_per_s``). Printed per model and loader: epoch seconds on
1 and 4 GPUs and the speedup; then the one-off pre-propagation, sharded over 1 and 4 workers, of a
community-structured graph (DC-SBM, communities in id order) whose row shards' halos are measured.

Usage::

    python benchmarks/bench_shared_host.py [--vertices 200000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DGLBACKEND", "pytorch")

MODELS = {"sgc": {"arch": "sgc", "num_layers": 1, "hidden_dim": 1},
          "sign": {"arch": "sign", "num_layers": 3, "hidden_dim": 512, "dropout": 0.5}}
LOADERS = (("fused", "random"), ("double_buffer", "random"), ("double_buffer", "chunk"))


def topologies():  # type: ignore[no-untyped-def]
    """(label, 4-GPU cluster) pairs of the testbed."""
    from gnnplan.simulator.hardware.spec import load_cluster

    base = load_cluster("4x-a6000-pcie4")
    return [(label, base.model_copy(update={"pcie": base.pcie.model_copy(update={"gpus_per_uplink": k})}))
            for label, k in (("own ports", 1), ("one uplink", 4))]


def epoch_table() -> None:
    """Epoch time and 1 -> 4 speedup per model, loader and topology."""
    from gnnplan.simulator.strategies import ppgnn
    from gnnplan.simulator.strategies.base import SimContext
    from gnnplan.simulator.workload.graphstats import DatasetSummary
    from gnnplan.simulator.workload.spec import workload_from_dict

    papers = DatasetSummary("ogbn-papers100M", 111_059_956, 1_615_685_872, 128, 172, 1_207_179, 125_265, 214_338)
    print("epoch on ogbn-papers100M sizes, hop matrices in host memory (simulated seconds)")
    print(f"{'model':5} {'loader':14} {'reshuffle':9} | {'topology':10} {'1 GPU':>8} {'4 GPUs':>8} {'speedup':>8}")
    for name, model in MODELS.items():
        wl = workload_from_dict({"dataset": "cora", "model": model, "training": {"batch_size": 8000}})
        for loader, reshuffle in LOADERS:
            knobs = ppgnn.Knobs(hops=3, placement="host", loader=loader, reshuffle=reshuffle)
            for label, cluster in topologies():
                one = cluster.model_copy(update={"gpus_per_machine": 1})
                t1 = ppgnn.simulate(SimContext(one, wl, None, papers, 8000), knobs).epoch_time_s  # type: ignore[arg-type]
                t4 = ppgnn.simulate(SimContext(cluster, wl, None, papers, 8000), knobs).epoch_time_s  # type: ignore[arg-type]
                print(f"{name:5} {loader:14} {reshuffle:9} | {label:10} {t1:8.3f} {t4:8.3f} {t1 / t4:7.2f}x")


def preprocess_table(num_vertices: int) -> None:
    """Sharded pre-propagation (R = 3) of a DC-SBM graph on 1 and 4 GPUs of the testbed."""
    from gnnplan.simulator.strategies.base import SimContext
    from gnnplan.simulator.strategies.ppgnn.preprop import simulate_preprocess
    from gnnplan.simulator.workload.graphstats import dataset_summary
    from gnnplan.simulator.workload.spec import workload_from_dict

    dataset = {"generator": "sbm", "num_vertices": num_vertices, "num_communities": 64, "mu": 0.1,
               "mean_degree": 16.0, "feature_dim": 128, "train_fraction": 0.1}
    wl = workload_from_dict({"dataset": dataset, "model": MODELS["sgc"], "training": {"batch_size": 8000}})
    started = time.perf_counter()
    sm = dataset_summary(wl.dataset)
    print(f"\npre-propagation, R = 3, DC-SBM {sm.num_vertices} vertices, {sm.num_edges} edges (graph + shard "
          f"statistics measured or read from cache in {time.perf_counter() - started:.1f} s)")
    for label, cluster in topologies():
        one = cluster.model_copy(update={"gpus_per_machine": 1})
        r1 = simulate_preprocess(SimContext(one, wl, None, sm, 8000), 3)  # type: ignore[arg-type]
        r4 = simulate_preprocess(SimContext(cluster, wl, None, sm, 8000), 3)  # type: ignore[arg-type]
        print(f"{label:10}: 1 GPU {r1.seconds * 1e3:8.3f} ms, 4 GPUs {r4.seconds * 1e3:8.3f} ms "
              f"(speedup {r1.seconds / r4.seconds:.2f}x; halo exchanged per hop {r4.exchange_bytes_per_hop / 1e6:.1f} "
              f"MB, on {'GPU' if r4.on_gpu else 'host'})")


def main(argv: list[str] | None = None) -> int:
    """Print both tables; returns the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vertices", type=int, default=200_000, help="vertices of the pre-propagated graph")
    args = parser.parse_args(argv)
    epoch_table()
    preprocess_table(args.vertices)
    return 0


if __name__ == "__main__":
    sys.exit(main())
