"""Proxy-estimated vs measured graph statistics: every statistic a strategy needs, estimated from a dataset card
through its degree-matched synthetic proxy (simulator/workload/proxy.py) and measured on the real graph, with the
relative error of each (goal: within 15%).

Graphs: every real graph gnnplan bundles (Cora and CiteSeer, through their shipped cards ``card:cora`` and
``card:citeseer``: the whole card path, proxy at the card's size) and an R-MAT graph of 2M vertices (Graph500
quadrants, edge factor 8, no features materialised), whose card is derived from the graph itself
(:func:`simulator.workload.card_measures.derived_card`: sizes, largest in-degree, moment exponent, the log-binned
in-degree histogram the proxy draws its degrees from, and its Louvain communities' effective number and mixing, 37
and mu 0.781, which the proxy plants: :func:`rmat_card`) and whose proxy has 10^5
vertices, scaled by the proxy's rules (the same field lists the card path uses) and by the per-batch rule
(:func:`simulator.workload.proxy_batch.scale_sample_stats`,
:func:`~simulator.workload.proxy_batch.batch_reach_scale`: block sizes, the cache-hit / local / remote split of a
batch's inputs, hopgnn's dp remote share and gsplit's split sizes times the ratio of the occupancy model
:func:`simulator.workload.reach.batch_reach` at 2M and at 10^5 vertices; at the cards' own size, Cora and CiteSeer,
that ratio is ~1 and the card path's hooks do not apply it).
Nothing is fitted to the statistics compared: the cards hold only sizes, degree histograms, connected-component
sizes, the Louvain communities' block model, the training vertices in each and the share of vertices with an edge
to another community, the degree assortativity and the average clustering (no cut, no cache or batch figure).

Statistics, on the 2 x 4-GPU preset ``2x4-a100-nvlink3-200gbib`` (8 workers on 2 machines):

* mini-batch sampling (``dp``, graphstats.sample_stats), METIS and random partitions: input vertices and sampled
  edges per layer, cache hit fraction at 5% and 20% cached, remote input fraction, edge cut, the busiest NIC's
  fetch load over the average machine's (no cache) and the slowest worker's input vertices over the mean one's;
* ``neutronstar`` (chunk partition, DepComm and DepCache): remote dependencies, rows received at layer 1,
  replicated layer-0 closure and its in-edges, summed over workers;
* ``hopgnn`` (METIS): micrograph and group locality, ``dp``'s remote input fraction;
* ``hongtu`` (METIS, 4 chunks, reuse): chunk neighbour sets sum |N_ij|, rows loaded from hosts and pulled from
  peers, summed over GPUs and batches;
* ``gsplit`` (METIS split): mean split input vertices, local-edge fraction, largest partition;
* the evaluation's layer-wise inference (``dp``, ``hopgnn`` and ``gsplit`` price its memory), METIS and random
  partitions: the sources and in-edges of a chunk of the rank with the most in-edges (inference.inference_stats;
  on R-MAT's proxy at the card's chunk fraction, scaled by the vertex factor), the shares of those sources other
  machines and other ranks hold (what the evaluation pulls), and the busiest machine's share of the in-edges (what
  dp's partitioned structure keeps there).

Measured values on the real graphs are numbering-invariant: every statistic above is computed on a partition of
the graph (dp's batches take their seeds from each machine's own training vertices, DistDGL ``node_split``;
neutronstar's chunk partition is contiguous vertex-id ranges, the others use METIS or a random partition), and a
partition depends on the vertex numbering (METIS's result does, for a given seed; a chunk partition is the
numbering). The shipped numbering of Cora and CiteSeer is Planetoid's (training vertices are ids 0-139 / 0-119),
so each real graph is measured on :data:`RELABELINGS` seeded random relabelings of itself (:func:`relabelled`:
the same graph, vertices renumbered with features, labels and split carried), and the table compares the proxy's
estimate with the median, printing the min-max range and the value at the shipped numbering beside it
(:data:`proxy_statistics.PARTITION_OF` names the partition of each statistic; one that used none would be
measured once). The statistics themselves are :func:`proxy_statistics.statistics`.
The R-MAT graph is measured once, as generated: its generator already numbers vertices by a random permutation
(:func:`simulator.workload.rmat.rmat_edges`) and draws the split uniformly, so its numbering is one random
relabeling; K more would cost K times the ~30 min of its measurement. Its split is one uniform draw as well, and
the METIS remote input fraction depends on it (the seeds DistDGL's split moves off the partition holding too many
are remote with their whole neighbourhood, and R-MAT's METIS parts are its core and its isolated vertices): over 16
uniform redraws of the split on the same graph and partition it ranged 0.0045-0.0105 on 32 batches (median
0.0071; hopgnn's dp share on 16 iterations 0.0044-0.0116, median 0.0070) against 0.0054 (0.0056) as generated,
where the surplus seeds sit on the isolated side (2026-11-28). Those two rows compare with one draw of a spread of
2x: a redraw's value is within 15% of the redraws' median in 6 (remote fraction) and 3 (hopgnn's share) of the 16.

Column ``self`` of a real graph's table: in how many relabelings the graph's own value is within 15% of the median
over all of them, the noise floor of any one-draw estimate (2026-11-28: the real graph as its own estimate passes
39-43 of 43 per relabeling on Cora, median 42, and 38-43 on CiteSeer, median 40; CiteSeer's METIS remote input
fraction 8 of 32 relabelings, its hopgnn dp share 9).

The product's estimate, compared in the tables, is R-MAT's one 10^5-vertex proxy (draw 0) and, for the cards of Cora and
CiteSeer, smaller than that, the medoid of proxy draws 0-14 (``card:<name>``, simulator/workload/proxy_pool.py, its
summary scalars the draws' medians; 2026-12-02: 129 of 129 within 15%, 43 on each graph, since the proxies' largest
component is closed to its own clustering, simulator/workload/structure.py; 128 before, CiteSeer's hongtu peer rows
-21.7%; 126, CiteSeer 40, with the medoid draw's summaries, 2026-11-30). ``--proxy-draws R`` (default
:data:`PROXY_DRAWS`) also estimates every statistic on the single draws 0..R-1 (``card:<name>@K``; R-MAT's proxy at seed
K) and prints, per graph, each statistic's estimate on draw 0, its min / mean / max over the draws and in how many draws
it is within 15%, then each draw's count within 15% over all graphs (16 draws, 2026-11-30, the cards giving their
training vertices' share near the communities' boundaries, ``communities.train_near_bridge_fraction``: 118-125 of 129,
median 123; draw 0, the product's estimate before the small cards were pooled, 123), and whether the draws' range holds
the measured value: the range ``--proxy-draws`` of simulate, tune and whatif reports is the draws' noise, and it held
the measured value for 86 of the 129 statistics (Cora 33, CiteSeer 36, R-MAT 17 of 43); the others are biased beyond
that noise. Without that share (earlier on 2026-11-30): 118-126, median 123, draw 0 124, 88 in range (Cora 33, CiteSeer
38); the share redraws the proxies' training vertices, so the draws' noise moves (Cora's draw 0 gsplit split inputs 80.7
-> 85.4 against 73.6 measured, now its one miss), and the bias it removes shows only over many draws and METIS seeds
(benchmarks/bench_proxy_bias.py, the mean of 16 draws x 4 METIS seeds against the real graph's mean over its
relabelings: CiteSeer's METIS remote input fraction -16.5% before, hopgnn's dp share -11.8%, both with METIS seed 0's
partition counted twice; with it, over seeds 0, 2, 3 and 4, -11.0% and -4.4%, Cora's -1.6% and -3.8%). Until the R-MAT
card gave its Louvain communities (2026-11-30) R-MAT's default draw missed two of 43 (hopgnn's dp remote share +17%, the
evaluation's remote sources +22%) and the 16 draws gave 119-127 (median 122, draw 0 122, 89 in range). Before the cards
gave ``communities.bridge_fraction`` (2026-11-28): 117-125 per draw, median 122.5, draw 0 124, the range holding 77
(Cora 26, CiteSeer 33): the proxies' communities met at more vertices than the real ones, and their METIS cuts were
biased (Cora's edge cut +17% on every draw, CiteSeer's remote input fraction -25% on average). The median of each
statistic over the draws averages their noise out (what ``--proxy-draws R`` gives as its median): over 16 draws it is
within 15% for 128 of the 129 (2026-11-30); the one miss, R-MAT's evaluation remote sources (0.00222 against 0.00178,
+25%; without the communities 0.00227), is the proxy's bias. Over draws with METIS seed 0 only, that median is itself
noisy on the 2-part METIS statistics: over 16 draws x 4 METIS seeds CiteSeer's remote input fraction has its median
23.5% low (95% interval [0.035, 0.047], the measured 0.051) and its mean 11.0% low (bench_proxy_bias.py). The default
draw's six misses are CiteSeer's five 2-part METIS statistics, a draw at the top of their spread (edge cut 0.0114
against 0.0068), and Cora's gsplit split inputs (+16.0%). With the largest component closed to its own clustering
(2026-12-02, 16 draws): 118-128 per draw, median 123, draw 0 122; the range holding 81 (Cora 32, CiteSeer 32, R-MAT 17);
the median over the draws within 15% for 128 of the 129 (the same R-MAT miss).

Run: ``python benchmarks/bench_proxy.py [--skip-rmat] [--proxy-draws R]``. Statistics are cached under
``$GNNPLAN_CACHE``; the first run generates the 2M-vertex graph (~4 min, ~3 GB peak) and partitions it with METIS.
Timings are not reported (this is an accuracy benchmark).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import yaml

os.environ.setdefault("DGLBACKEND", "pytorch")

from proxy_statistics import inference_statistics, partition_of, statistics  # noqa: E402

from gnnplan.simulator.io import atomic_write_json  # noqa: E402
from gnnplan.simulator.paths import cache_dir  # noqa: E402
from gnnplan.simulator.workload.card_measures import derived_card  # noqa: E402
from gnnplan.simulator.workload.cards import Card, card_from_dict, write_card  # noqa: E402
from gnnplan.simulator.workload.datasets import GraphData, dataset_key, load_dataset  # noqa: E402
from gnnplan.simulator.workload.inference import INFERENCE_FORMAT  # noqa: E402
from gnnplan.simulator.workload.proxy import max_relative_error, proxy_scale, proxy_spec  # noqa: E402
from gnnplan.simulator.workload.proxy_pool import pooled_refs  # noqa: E402
from gnnplan.simulator.workload.spec import RmatSpec  # noqa: E402

TOLERANCE = 0.15
RMAT = RmatSpec(generator="rmat", num_vertices=2_000_000, edge_factor=8, seed=0)
RMAT_PROXY_VERTICES = 100_000
KEPT_RMAT_CARD = Path(__file__).parent / "cards" / "rmat2m.yaml"
"""The R-MAT card as measured by :func:`rmat_card`, kept with the benchmark so a fresh cache does not spend an hour
on Louvain again (a derived card: sizes, degree histogram, Louvain communities' number and mixing; no features)."""
BENCH_FORMAT = 3
"""Version of :func:`statistics` (2: the busiest NIC and slowest worker ratios; 3: each worker's seeds in random
order, :func:`simulator.workload.batches.epoch_seeds`); part of the name of the kept measurements of the
2M-vertex graph."""
RELABELINGS = 32
"""Random relabelings of each real graph its statistics are measured on (:func:`relabelled`, seeds 0..K-1). A METIS
statistic of a small graph moves a lot with the numbering (CiteSeer's remote input fraction: 0.012-0.110 over 32
relabelings), so its median needs many: with 8 it was 0.042, with 32 0.051 (2026-11-23). ~2 s each, cached."""
RELABEL_SEED = 20261123
"""Root seed of the relabelings' permutations (relabeling k draws from ``default_rng((RELABEL_SEED, k))``)."""
PROXY_DRAWS = 16
"""Single proxy draws every estimate is repeated on (``--proxy-draws``): the table compares the product's estimate,
and the spread over the draws says how typical one draw's count is (16 draws: ~20 s on the real graphs and ~2 min on
R-MAT's 10^5-vertex proxy the first time, cached after)."""
CI_RESAMPLES = 2000
"""Bootstrap resamples of the 95% interval printed beside each measured median (:func:`median_interval`)."""
def compare(name: str, measured: dict[str, float], estimated: dict[str, float]) -> list[float]:
    """Print one table; returns the relative errors."""
    print(f"\n== {name}")
    print(f"{'statistic':44s} {'measured':>14s} {'estimated':>14s} {'error':>8s}")
    errors = []
    for key, m in measured.items():
        e = estimated[key]
        err = max_relative_error(e, m)
        errors.append(err)
        flag = "" if err <= TOLERANCE else "  > 15%"
        print(f"{key:44s} {m:14.6g} {e:14.6g} {100 * err:7.1f}%{flag}")
    within = sum(err <= TOLERANCE for err in errors)
    print(f"-- {within}/{len(errors)} within {TOLERANCE:.0%}; median error {100 * float(np.median(errors)):.1f}%, "
          f"max {100 * max(errors):.1f}%")
    return errors


def relabelled(name: str, k: int) -> str:
    """Real graph ``name`` with its vertices renumbered by the seeded uniform random permutation ``perm`` of
    relabeling ``k`` (vertex v becomes ``perm[v]``), as an OGB npz-layout folder under the cache, written once
    (:func:`write_numbered`): the same graph, numbered otherwise."""
    folder = cache_dir() / "bench_proxy" / "relabelled" / dataset_key(name) / f"{name}-relabel{k}"
    if not (folder / "split" / "relabelled" / "test.csv.gz").is_file():
        g = load_dataset(name)
        perm = np.random.default_rng((RELABEL_SEED, k)).permutation(g.num_vertices).astype(np.int64)
        write_numbered(folder, g, g.src, g.dst, perm)
    return str(folder)


def write_numbered(folder: Path, g: GraphData, src: np.ndarray, dst: np.ndarray, perm: np.ndarray) -> None:
    """Write the graph of edges ``src -> dst`` on the vertices of ``g`` (a loaded dataset), vertex v numbered
    ``perm[v]``, as an OGB npz-layout folder (split ``relabelled``), atomically: the folder appears whole or not at
    all. Edges are listed sorted by their new (src, dst); ``g``'s feature rows, labels and train/validation/test ids
    (sorted) move with their vertices."""
    old_of = np.argsort(perm)  # new id -> old id
    src, dst = perm[src], perm[dst]
    order = np.lexsort((dst, src))
    labels = g.labels[old_of].astype(np.float64)
    labels[labels < 0] = np.nan
    tmp = folder.with_name(f"{folder.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "raw").mkdir(parents=True)
    (tmp / "split" / "relabelled").mkdir(parents=True)
    np.savez_compressed(tmp / "raw" / "data.npz", edge_index=np.stack([src[order], dst[order]]),
                        num_nodes_list=np.array([g.num_vertices]), num_edges_list=np.array([len(src)]),
                        node_feat=np.ascontiguousarray(np.asarray(g.features)[old_of], dtype=np.float32))
    np.savez(tmp / "raw" / "node-label.npz", node_label=labels[:, None])
    for part, ids in (("train", g.train_idx), ("valid", g.val_idx), ("test", g.test_idx)):
        with gzip.open(tmp / "split" / "relabelled" / f"{part}.csv.gz", "wt") as fh:
            fh.write("".join(f"{v}\n" for v in np.sort(perm[ids]).tolist()))
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)


def measure_relabelled(name: str, batch: int) -> tuple[dict[str, float], dict[str, list[float]]]:
    """:func:`statistics` of real graph ``name`` at its shipped numbering and on each of its :data:`RELABELINGS`
    relabelings (:func:`relabelled`): (shipped values, every statistic's values over the relabelings)."""
    shipped = run(f"{name} measured (shipped numbering)", lambda: statistics(name, batch, None))
    over: dict[str, list[float]] = {key: [] for key in shipped}
    started = time.perf_counter()
    for k in range(RELABELINGS):
        out = statistics(relabelled(name, k), batch, None)
        for key in over:
            over[key].append(out[key])
    print(f"[{name} measured on {RELABELINGS} relabelings: {time.perf_counter() - started:.0f} s]", file=sys.stderr)
    return shipped, over


def median_interval(values: list[float]) -> tuple[float, float]:
    """The 95% bootstrap percentile interval of the median of ``values`` (``scipy.stats.bootstrap``,
    :data:`CI_RESAMPLES` resamples seeded with :data:`RELABEL_SEED`; Efron and Tibshirani, *An Introduction to the
    Bootstrap*, 1993, §13.3): how closely the relabelings pin the measured value itself. An estimate more than 15%
    off but inside it misses by no more than the reference's own uncertainty."""
    import scipy.stats

    res = scipy.stats.bootstrap((np.asarray(values, dtype=np.float64),), np.median, confidence_level=0.95,
                                method="percentile", n_resamples=CI_RESAMPLES,
                                random_state=np.random.default_rng(RELABEL_SEED))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def compare_relabelled(name: str, shipped: dict[str, float], over: dict[str, list[float]],
                       estimated: dict[str, float]) -> list[float]:
    """Print one real graph's table: a statistic on a partition (:func:`partition_of`) is measured as the median
    over the relabelings (min-max beside it) with its shipped-numbering value for reference; one without is
    measured once. Column ``self``: in how many relabelings the graph's own value is within :data:`TOLERANCE` of
    that median, i.e. how often the real graph, numbered at random once, would pass as its own estimate (the
    noise floor of a one-draw estimate); the last line sums it per relabeling. Returns the relative errors
    against the measured value (the median)."""
    print(f"\n== {name}")
    print(f"measured = median over {RELABELINGS} random relabelings of the real graph (vertices renumbered; features, "
          "labels and split carried)\nfor every statistic computed on a partition (column 'on'); min/max: their "
          "range; 95% CI: the median's bootstrap interval (median_interval);\nshipped: the value at the shipped "
          "vertex numbering (reference only; not compared). error = |estimated - measured| / measured.")
    print(f"{'statistic':36s} {'on':>6s} {'shipped':>10s} {'measured':>10s} {'min':>10s} {'max':>10s} "
          f"{'95% CI of median':>21s} {'estimated':>10s} {'error':>7s} {'self':>6s}")
    errors, shipped_errors, beyond = [], [], 0
    self_within = np.zeros(RELABELINGS, dtype=np.int64)
    reference = reference_values(shipped, over)
    for key, at_shipped in shipped.items():
        part = partition_of(key)
        values = over[key] if part is not None else [at_shipped]
        m, e = reference[key], estimated[key]
        own = [max_relative_error(v, m) <= TOLERANCE for v in (over[key] if part is not None else [m] * RELABELINGS)]
        self_within += own
        err = max_relative_error(e, m)
        errors.append(err)
        shipped_errors.append(max_relative_error(e, at_shipped))
        lo, hi = median_interval(values) if part is not None else (m, m)
        flag = ""
        if err > TOLERANCE:
            inside = lo <= e <= hi
            beyond += not inside
            flag = f"  > 15%, {'inside' if inside else 'outside'} the CI"
        spread = f"{min(values):10.4g} {max(values):10.4g}" if part is not None else f"{'(once)':>10s} {'':10s}"
        ci = f"[{lo:.4g}, {hi:.4g}]" if part is not None else ""
        print(f"{key:36s} {part or '-':>6s} {at_shipped:10.4g} {m:10.4g} {spread} {ci:>21s} {e:10.4g} "
              f"{100 * err:6.1f}% {sum(own):>2d}/{len(own):<3d}{flag}")
    within = sum(err <= TOLERANCE for err in errors)
    print(f"-- {within}/{len(errors)} within {TOLERANCE:.0%} of the measured value (median over relabelings); "
          f"median error {100 * float(np.median(errors)):.1f}%, max {100 * max(errors):.1f}%; misses outside the "
          f"median's 95% CI: {beyond}; against the shipped-numbering values: "
          f"{sum(err <= TOLERANCE for err in shipped_errors)}/{len(errors)}")
    print(f"-- the real graph as its own estimate (each relabeling against the median of all {RELABELINGS}): "
          f"{self_within.min()}-{self_within.max()} within {TOLERANCE:.0%} per relabeling, median "
          f"{float(np.median(self_within)):g} of {len(errors)}")
    return errors


def reference_values(shipped: dict[str, float], over: dict[str, list[float]]) -> dict[str, float]:
    """What a real graph's estimates are compared with (:func:`compare_relabelled`): the median over the
    relabelings for a statistic on a partition, the shipped-numbering value for one without."""
    return {key: float(np.median(over[key])) if partition_of(key) is not None else value
            for key, value in shipped.items()}


def estimate_of(card: str) -> str:
    """What the product's estimate of card ``card`` is: proxy draw 0, or the medoid of several
    (simulator/workload/proxy_pool.py)."""
    pool = pooled_refs(f"card:{card}")
    return f"the medoid of proxy draws 0-{len(pool) - 1}" if pool else "proxy draw 0"


def draw_spread(name: str, reference: dict[str, float], draws: list[dict[str, float]]
                ) -> tuple[list[int], int, list[str]]:
    """Print how the estimates move over proxy draws (``draws[k]``: every statistic estimated on draw k of the
    proxy alone, the generator's seed k; the table above compares the product's estimate): per statistic its
    reference, the estimate of draw 0, min / median / mean / max over the draws, in how many draws it is within
    :data:`TOLERANCE`, and whether the draws' range holds the reference (``--proxy-draws`` of simulate, tune and
    whatif report that range: it is the draws' noise, and holds the truth only where the proxy has no bias). The
    median over the draws is the estimate with the draws' noise averaged out: where it misses, the proxy is biased.

    Returns:
        (each draw's count of statistics within the tolerance, the statistics whose reference the range holds,
        the statistics whose median over the draws misses the tolerance).
    """
    print(f"\n-- {name}: the estimates over {len(draws)} proxy draws, one proxy each (seeds 0..{len(draws) - 1}; "
          "the table above compares the product's estimate: draw 0 for a card of 10^5 vertices or more, the medoid "
          "of draws 0-14 for a smaller one)")
    print(f"{'statistic':36s} {'reference':>10s} {'draw 0':>10s} {'min':>10s} {'median':>10s} {'mean':>10s} "
          f"{'max':>10s} {'within':>8s} {'in range':>9s}")
    per_draw, covered, biased = [0] * len(draws), 0, []
    for key, ref in reference.items():
        values = [d[key] for d in draws]
        ok = [max_relative_error(v, ref) <= TOLERANCE for v in values]
        per_draw = [n + hit for n, hit in zip(per_draw, ok, strict=True)]
        held = min(values) <= ref <= max(values)
        covered += held
        median = float(np.median(values))
        if max_relative_error(median, ref) > TOLERANCE:
            biased.append(f"{name} {key} ({median:.4g} against {ref:.4g})")
        print(f"{key:36s} {ref:10.4g} {values[0]:10.4g} {min(values):10.4g} {median:10.4g} "
              f"{float(np.mean(values)):10.4g} {max(values):10.4g} {sum(ok):>4d}/{len(ok):<3d} "
              f"{'yes' if held else 'no':>9s}")
    print(f"-- statistics within {TOLERANCE:.0%} per draw: {per_draw} (of {len(reference)}; draw 0: {per_draw[0]}); "
          f"the reference inside the {len(draws)} draws' range: {covered} of {len(reference)}; the median over the "
          f"draws within {TOLERANCE:.0%}: {len(reference) - len(biased)} of {len(reference)}")
    return per_draw, covered, biased


def run(label: str, work: Callable[[], dict[str, float]], keep: str | None = None) -> dict[str, float]:
    """``work()``, timed on stderr; with ``keep`` (a file name) the result is kept in the cache folder and read
    back on later runs (the measurements on the 2M-vertex graph take half an hour on a busy 2-core machine)."""
    path = cache_dir() / "bench_proxy" / f"{keep}.json" if keep else None
    if path is not None and path.is_file():
        print(f"[{label}: read from {path}]", file=sys.stderr)
        return json.loads(path.read_text())
    started = time.perf_counter()
    out = work()
    print(f"[{label}: {time.perf_counter() - started:.0f} s]", file=sys.stderr)
    if path is not None:
        atomic_write_json(path, out)
    return out


def rmat_card() -> Card:
    """The card of :data:`RMAT`, measured on the graph (:func:`derived_card` with its Louvain communities'
    effective number and mixing, ``gnnplan card --structure louvain``): :data:`KEPT_RMAT_CARD` when there, else
    measured and kept in the cache's ``bench_proxy/cards/rmat2m.yaml`` (networkx's Louvain took 65 min and 12 GB on
    the 2M-vertex graph here, 2026-11-30; copy the file over the kept one after changing how a card is measured)."""
    folder = cache_dir() / "bench_proxy" / "cards"
    path = folder / "rmat2m.yaml"
    for kept in (KEPT_RMAT_CARD, path):
        if kept.is_file():
            return card_from_dict(yaml.safe_load(kept.read_text()), where=str(kept))
    graph = load_dataset(RMAT)
    card = derived_card("rmat2m", graph.num_vertices, graph.src, graph.dst, graph.feature_dim, graph.num_classes,
                        (len(graph.train_idx), len(graph.val_idx), len(graph.test_idx)),
                        how="measured on the 2M-vertex R-MAT graph", communities="louvain")
    write_card(card, folder)
    return card


def count_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type`` for a count: an integer >= ``minimum``, else the usage error naming the option
    (``argument --proxy-draws: must be an integer >= 1 (got '0')``)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum} (got {text!r})")
        return value

    return parse


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-rmat", action="store_true", help="only the bundled real graphs")
    parser.add_argument("--relabelings", type=count_at_least(1), default=RELABELINGS,
                        help=f"relabelings each real graph is measured on (default {RELABELINGS})")
    parser.add_argument("--proxy-draws", type=count_at_least(1), default=PROXY_DRAWS,
                        help="estimate on this many draws of each proxy (seeds 0..R-1; card:<name>@<K>) and print "
                             f"how the estimates and the count within 15%% move over them (default {PROXY_DRAWS}; "
                             "1: the product's estimate only)")
    args = parser.parse_args()
    globals()["RELABELINGS"] = args.relabelings
    errors: list[float] = []
    per_draw = np.zeros(args.proxy_draws, dtype=np.int64)
    covered, biased = 0, []
    for name, batch in (("cora", 64), ("citeseer", 64)):
        shipped, over = measure_relabelled(name, batch)
        estimated = run(f"card:{name} estimated", lambda: statistics(f"card:{name}", batch, None))
        errors += compare_relabelled(f"{name}: measured on the real graph vs estimated from card:{name} "
                                     f"({estimate_of(name)}; "
                                     f"draw 0 {proxy_spec(name).name})", shipped, over, estimated)
        if args.proxy_draws > 1:
            draws = [run(f"card:{name}@{k} estimated", lambda k=k: statistics(f"card:{name}@{k}", batch, None))
                     for k in range(args.proxy_draws)]
            counts, held, off = draw_spread(name, reference_values(shipped, over), draws)
            per_draw += counts
            covered += held
            biased += off
    if not args.skip_rmat:
        card = rmat_card()
        spec = proxy_spec(card, RMAT_PROXY_VERTICES)
        scale = proxy_scale(card, spec)
        measured = run("rmat2m measured", lambda: statistics(RMAT, 1024, None),
                       keep=f"measured-{dataset_key(RMAT)}-v{BENCH_FORMAT}")
        # the kept measurement above may predate the inference rows: they are kept apart, by their own format
        measured |= run("rmat2m inference measured", lambda: inference_statistics(RMAT),
                        keep=f"measured-inference-{dataset_key(RMAT)}-v{INFERENCE_FORMAT}")
        estimated = run("rmat2m proxy estimated", lambda: statistics(spec, 1024, scale, card))
        errors += compare(f"R-MAT 2M ({RMAT.name}) vs its proxy {spec.name} (x{scale.vertex_factor:.0f} vertices)",
                          measured, estimated)
        if args.proxy_draws > 1:
            def on_draw(k: int) -> dict[str, float]:
                drawn = proxy_spec(card, RMAT_PROXY_VERTICES, seed=k)
                return statistics(drawn, 1024, proxy_scale(card, drawn), card)

            draws = [estimated] + [run(f"rmat2m proxy draw {k} estimated", lambda k=k: on_draw(k))
                                   for k in range(1, args.proxy_draws)]
            counts, held, off = draw_spread("R-MAT 2M", measured, draws)
            per_draw += counts
            covered += held
            biased += off
    within = sum(err <= TOLERANCE for err in errors)
    print(f"\nall graphs: {within}/{len(errors)} statistics within {TOLERANCE:.0%} (real graphs: against the median "
          f"over {RELABELINGS} relabelings; R-MAT: as generated)")
    if args.proxy_draws > 1:
        print(f"over {args.proxy_draws} proxy draws, statistics within {TOLERANCE:.0%} per draw (all graphs): "
              f"{per_draw.tolist()}; min {per_draw.min()}, median {float(np.median(per_draw)):g}, max "
              f"{per_draw.max()} of {len(errors)}; draw 0: {per_draw[0]} (the product's estimate, above: {within}; "
              "a small card's is the medoid of its draws, simulator/workload/proxy_pool.py)")
        print(f"the measured value inside the range of the {args.proxy_draws} draws' estimates: {covered} of "
              f"{len(errors)} (the range --proxy-draws reports is the draws' noise; the rest is the proxy's bias)")
        print(f"the median over the {args.proxy_draws} draws' estimates within {TOLERANCE:.0%}: "
              f"{len(errors) - len(biased)} of {len(errors)} (the draws' noise averaged out; what misses is the "
              f"proxy's bias): {'; '.join(biased) or 'none misses'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
