"""What ``bench_proxy.py`` compares: every statistic a strategy needs, measured on a graph by the product's own
code (a real graph, a card's proxy or a generated graph), with the card path's scaling rules applied to a proxy
given as a generated spec; and the partition each statistic is computed on (a relabeling of the graph moves the
statistics on a partition, not the others).

Not a benchmark itself: ``benchmarks/bench_proxy.py`` runs it and prints the comparison.
"""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("DGLBACKEND", "pytorch")

from gnnplan.simulator.api import load_context  # noqa: E402
from gnnplan.simulator.hardware.spec import load_cluster  # noqa: E402
from gnnplan.simulator.strategies import gsplit, hongtu, hopgnn, neutronstar  # noqa: E402
from gnnplan.simulator.strategies.gsplit import stats as gsplit_stats  # noqa: E402
from gnnplan.simulator.strategies.hongtu import dedup  # noqa: E402
from gnnplan.simulator.strategies.neutronstar import dependencies as deps  # noqa: E402
from gnnplan.simulator.workload import inference, owners  # noqa: E402
from gnnplan.simulator.workload.cards import Card  # noqa: E402
from gnnplan.simulator.workload.datasets import load_dataset  # noqa: E402
from gnnplan.simulator.workload.proxy import ProxyScale, scale_counts  # noqa: E402
from gnnplan.simulator.workload.proxy_batch import batch_reach_scale, scale_layers, scale_sample_stats  # noqa: E402
from gnnplan.simulator.workload.spec import workload_from_dict  # noqa: E402

CLUSTER = "2x4-a100-nvlink3-200gbib"
"""The cluster every statistic is measured for: 2 machines x 4 GPUs (a 2-part machine partition, 8 workers)."""
PARTITION_OF = {"sample[metis]": "metis", "sample[random]": "random", "neutronstar": "chunk", "hopgnn": "metis",
                "hongtu": "metis", "gsplit": "metis", "inference[metis]": "metis", "inference[random]": "random"}
"""The partition of the graph each statistic is computed on, by name prefix (module docstring). Every statistic
of :func:`statistics` has one: dp's batches (all ``sample[...]`` rows, input vertices and cache hits included) are
drawn from each machine's own training vertices; neutronstar here uses ``chunk`` (contiguous id ranges); hopgnn,
hongtu (level 1 and its chunks) and gsplit partition with METIS; the evaluation's inference blocks are measured on
both machine partitions."""


def _workloads(dataset: Any, batch: int) -> tuple[Any, Any]:
    mini = workload_from_dict({"dataset": dataset, "model": {"arch": "sage", "num_layers": 2, "hidden_dim": 64},
                               "training": {"mode": "mini-batch", "batch_size": batch, "fanouts": [10, 10]}})
    full = workload_from_dict({"dataset": dataset, "model": {"arch": "gcn", "num_layers": 2, "hidden_dim": 64},
                               "training": {"mode": "full-graph"}})
    return mini, full


def statistics(dataset: Any, batch: int, scale: ProxyScale | None, card: Card | None = None) -> dict[str, float]:
    """Every statistic of the module docstring on ``dataset``; ``scale`` applies the card path's scaling rules
    to a proxy given as a generated spec (None: a real graph, or a card whose hooks scale already), and with
    ``card`` the per-batch rule too (:func:`simulator.workload.proxy_batch.scale_sample_stats` and
    :func:`~simulator.workload.proxy_batch.batch_reach_scale`: the card's degree histogram at both sizes)."""
    mini, full = _workloads(dataset, batch)
    out: dict[str, float] = {}
    graph = load_dataset(dataset) if card is not None else None
    cut = {}

    def scaled(obj: Any, vertex: tuple[str, ...], edge: tuple[str, ...] = ()) -> Any:
        return obj if scale is None else scale_counts(obj, scale, vertex, edge)

    for part in ("metis", "random"):
        _, _, ctx = load_context(CLUSTER, mini, "dp", {"partitioner": part})
        st = ctx.sample
        cut[part] = st.edge_cut_fraction
        if card is not None:
            st = scale_sample_stats(st, card, graph)
        tag = f"sample[{part}]"
        for layer in range(len(st.fanouts)):
            out[f"{tag} input vertices L{layer}"] = st.num_src_vertices[layer]
            out[f"{tag} sampled edges L{layer}"] = st.num_edges[layer]
        for fraction in (0.05, 0.2):
            out[f"{tag} hit fraction @{fraction:g}"] = st.access(fraction)[0]
        out[f"{tag} remote fraction"] = st.remote_miss_fraction[0]
        out[f"{tag} edge cut"] = st.edge_cut_fraction
        out[f"{tag} busiest NIC ratio"] = st.busiest_ratio(0.0)
        out[f"{tag} slowest worker ratio"] = st.slowest_input_ratio
    for mode in ("depcomm", "depcache"):
        kn = neutronstar.Knobs(mode=mode, partitioner="chunk")
        _, _, ctx = load_context(CLUSTER, full, "neutronstar", kn)
        counts = [scaled(c, deps.CARD_VERTEX_FIELDS, deps.CARD_EDGE_FIELDS)
                  for c in neutronstar.dependency_counts(ctx, kn)]
        if mode == "depcomm":
            out["neutronstar remote dependencies"] = sum(c.num_remote for c in counts)
            out["neutronstar rows received L1"] = sum(sum(c.received[0]) for c in counts)
        else:
            out["neutronstar replicated L0"] = sum(c.num_replicated[0] for c in counts)
            out["neutronstar replica edges L1"] = sum(c.replica_edges[0] for c in counts)
    kn_hop = hopgnn.Knobs()
    _, _, ctx = load_context(CLUSTER, mini, "hopgnn", kn_hop)
    mg = hopgnn.micrograph_stats(ctx, kn_hop)
    out["hopgnn micrograph locality"] = mg.micrograph_local_fraction
    out["hopgnn group locality"] = mg.group_local_fraction
    out["hopgnn dp remote fraction"] = mg.dp_remote_fraction
    if card is not None:  # the same batches as dp's: the remote share re-weighted like sample[metis]'s
        reach = batch_reach_scale(card, graph, mg.fanouts, mg.batch_size_per_worker, 2, cut["metis"])
        out["hopgnn dp remote fraction"] *= reach.remote_ratio
    kn_ht = hongtu.Knobs(num_chunks=4)
    _, _, ctx = load_context(CLUSTER, full, "hongtu", kn_ht)
    rows = hongtu.batch_counts(ctx, kn_ht)
    rows = [[scaled(c, dedup.CARD_VERTEX_FIELDS, dedup.CARD_EDGE_FIELDS) for c in row] for row in rows]
    out["hongtu chunk neighbour sets"] = sum(c.num_src for row in rows for c in row)
    out["hongtu host rows loaded"] = sum(c.load_rows for row in rows for c in row)
    out["hongtu peer rows pulled"] = sum(sum(c.pull_rows) for row in rows for c in row)
    kn_gs = gsplit.Knobs()
    _, _, ctx = load_context(CLUSTER, mini, "gsplit", kn_gs)
    sp = scaled(gsplit.stats_of(ctx, kn_gs), gsplit_stats.CARD_VERTEX_FIELDS)
    split_src = sp.split_src
    if card is not None:  # one batch of B seeds over all GPUs: a uniform sample of the training vertices
        reach = batch_reach_scale(card, graph, mini.training.fanouts, batch)
        split_src = scale_layers(split_src, reach.src_ratio, axis=1)
    out["gsplit split input vertices"] = float(split_src[:, 0, :].mean())
    out["gsplit local-edge fraction"] = float(sp.local_edge_fraction().mean())
    out["gsplit largest partition"] = float(sp.partition_sizes.max())
    return out | inference_statistics(dataset, card, graph)


def inference_statistics(dataset: Any, card: Card | None = None, graph: Any | None = None) -> dict[str, float]:
    """The evaluation's inference block (dp's, hopgnn's and gsplit's memory models price it), METIS and random
    machine partitions: the busiest rank's sources and edges per chunk, the shares of those sources other machines
    and other ranks hold (the evaluation's pulls), and the busiest machine's share of the in-edges (a partitioned
    structure's memory; :mod:`simulator.workload.inference`); a proxy given as a generated spec with its ``card``
    is measured at the card's chunk fraction and scaled, as the card path does
    (:func:`simulator.workload.inference.inference_at_size`; ``graph``: the proxy, when the caller loaded it)."""
    cl = load_cluster(CLUSTER)
    if card is not None and graph is None:
        graph = load_dataset(dataset)
    out: dict[str, float] = {}
    for part in ("metis", "random"):
        if card is None:
            inf = inference.inference_stats(dataset, cl.num_machines, cl.gpus_per_machine, part)
        else:
            owner = owners.partition_owners(dataset, cl.num_machines, part, 0, graph=graph)
            inf = inference.inference_at_size(graph.src, graph.dst, owner, cl.num_machines, cl.gpus_per_machine,
                                    card.num_vertices.value)
        out[f"inference[{part}] sources per chunk"] = inf.src_vertices
        out[f"inference[{part}] edges per chunk"] = inf.edges
        out[f"inference[{part}] busiest machine's edges"] = inf.machine_edge_fraction
        out[f"inference[{part}] remote sources"] = inf.remote_fraction
        out[f"inference[{part}] other ranks' sources"] = inf.other_rank_fraction
    return out


def partition_of(key: str) -> str | None:
    """The partition statistic ``key`` is computed on (:data:`PARTITION_OF`), None when it uses none."""
    return next((part for prefix, part in PARTITION_OF.items() if key.startswith(prefix)), None)
