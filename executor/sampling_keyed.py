"""A deterministic neighbour sampler: which neighbours a vertex gets depends only on (seed, epoch, iteration,
layer, vertex), so any machine sampling any set of seeds draws the same neighbours for the same vertex.

DGL's ``NeighborSampler`` draws from one RNG stream per process: two machines sampling overlapping seed sets (a
``dp`` worker its mini-batch, a ``hopgnn`` home machine its micrograph groups of the same mini-batch) get different
samples, so their gradients agree only in expectation. Here every dst vertex v of layer l (blocks input side
first, sampled from the output side) takes, of its d in-edges in the graph's CSC order, the ``fanout`` with the
smallest hash ``h(k_v, j)`` (j = the edge's position among v's in-edges), k_v = splitmix64 chain of
(seed, epoch, iteration, layer, v); all d when d <= fanout or fanout = -1. Ranking i.i.d. uniform keys is uniform
sampling without replacement, as DGL's (``replace=False``). Consequences:

* the blocks of a seed set are the union of the blocks of any split of it (a vertex reached from several
  seeds has ONE neighbour sample, as in DGL's MFGs), so a micrograph group sampled at its home machine is
  exactly the part of ``dp``'s mini-batch sample that reaches its seeds: the same forward values and, summed
  over groups, the same gradient;
* the root's own neighbour sample is keyed by (seed, epoch, iteration, root id); keying deeper layers by the
  reached vertex rather than by the root keeps the union property above, which per-root keys would break (a
  vertex shared by two roots of one batch would need two samples, i.e. no longer one MFG per batch).

It is vectorised numpy over the candidate edges of a layer (all in-edges of its low-degree dst vertices, about
2 x fanout hashed positions per high-degree one: :data:`DENSE_FACTOR`), then DGL builds the blocks
(``dgl.create_block`` in ``dgl.to_block``'s layout: :func:`make_block`). Several times slower than DGL's C++
sampler (numpy passes per layer); the simulator prices both alike.

Source: splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014;
constants of Vigna's public-domain splitmix64.c); random-key sampling without replacement (a uniform random
permutation's first k items).
"""

from __future__ import annotations

from typing import Any, Literal

import dgl
import numpy as np
import torch

from gnnplan.executor.sampling import TimedSampler
from gnnplan.executor.trace import now

SAMPLERS = ("dgl", "keyed")
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's output function on every element (uint64, wrapping arithmetic).

    Source: Vigna, splitmix64.c (module docstring).
    """
    with np.errstate(over="ignore"):
        z = np.asarray(x, dtype=np.uint64) + _GOLDEN
        z = (z ^ (z >> _S30)) * _M1
        z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


def vertex_keys(seed: int, epoch: int, iteration: int, layer: int, vertices: np.ndarray) -> np.ndarray:
    """(k,) uint64 key k_v of every vertex at one layer: splitmix64 chained over (seed, epoch, iteration, layer, v)."""
    base = np.zeros(1, dtype=np.uint64)
    for part in (seed, epoch, iteration, layer):
        base = splitmix64(base ^ np.uint64(part % 2 ** 64))
    return splitmix64(base ^ np.asarray(vertices, dtype=np.int64).astype(np.uint64))


DENSE_FACTOR = 4
"""A vertex with in-degree <= DENSE_FACTOR x fanout ranks all its in-edges by hash; a higher-degree one draws
``DRAWS_FACTOR`` x fanout hashed positions and keeps the first ``fanout`` distinct ones (both are uniform
sampling without replacement; the second costs O(fanout) instead of O(degree) on hubs)."""
DRAWS_FACTOR = 2


def choose_in_edges(indptr: np.ndarray, dst: np.ndarray, keys: np.ndarray,
                    fanout: int) -> tuple[np.ndarray, np.ndarray]:
    """Pick each dst vertex's in-edges: all if its in-degree <= fanout (or fanout = -1), else ``fanout`` of them
    chosen by hashes of (key, position) (:data:`DENSE_FACTOR`).

    Shapes:
        indptr: (n + 1,) CSC offsets; dst, keys: (k,).

    Returns:
        (CSC positions of the chosen edges, (e,) int64; index into ``dst`` of each one's destination, (e,) int64),
        grouped by destination in ``dst`` order.
    """
    start, deg = indptr[dst], indptr[dst + 1] - indptr[dst]
    big = deg > DENSE_FACTOR * fanout if fanout >= 0 else np.zeros(len(dst), dtype=bool)
    owner, offset = _rank_by_hash(deg, keys, fanout, ~big)
    if big.any():
        b_owner, b_offset, short = _first_distinct(deg, keys, fanout, big)
        f_owner, f_offset = _rank_by_hash(deg, keys, fanout, short)
        owner = np.concatenate([owner, b_owner, f_owner])
        offset = np.concatenate([offset, b_offset, f_offset])
        order = np.argsort(owner, kind="stable")
        owner, offset = owner[order], offset[order]
    return start[owner] + offset, owner


def _rank_by_hash(deg: np.ndarray, keys: np.ndarray, fanout: int, which: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(dst index, position) of the chosen in-edges of the dst vertices ``which``: all of them when the degree is
    at most ``fanout`` (or fanout = -1), else the ``fanout`` positions with the smallest hash."""
    d = np.where(which, deg, 0)
    owner = np.repeat(np.arange(len(deg)), d)
    offset = np.arange(len(owner)) - np.repeat(np.cumsum(d) - d, d)
    if fanout < 0 or not len(owner):
        return owner, offset
    with np.errstate(over="ignore"):
        h = splitmix64(keys[owner] ^ (offset.astype(np.uint64) * _GOLDEN))
    order = np.lexsort((h, owner))
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = offset  # groups keep their places when sorted by owner: the k-th smallest hash gets rank k
    keep = rank < fanout
    return owner[keep], offset[keep]


def _first_distinct(deg: np.ndarray, keys: np.ndarray, fanout: int,
                    which: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the high-degree dst vertices ``which``: ``DRAWS_FACTOR x fanout`` hashed positions each, the first
    ``fanout`` distinct ones kept. Returns (dst index, position) of the kept ones and the mask of vertices that
    drew fewer than ``fanout`` distinct positions (left to :func:`_rank_by_hash`)."""
    ids = np.flatnonzero(which)
    draws = DRAWS_FACTOR * fanout
    owner = np.repeat(ids, draws)
    t = np.tile(np.arange(draws, dtype=np.int64), len(ids))
    with np.errstate(over="ignore"):
        h = splitmix64(keys[owner] ^ ((t + 1).astype(np.uint64) * _M1))
    pos = (h % deg[owner].astype(np.uint64)).astype(np.int64)
    order = np.lexsort((t, pos, owner))
    owner, pos, t = owner[order], pos[order], t[order]
    first = np.concatenate([[True], (owner[1:] != owner[:-1]) | (pos[1:] != pos[:-1])])
    owner, pos, t = owner[first], pos[first], t[first]
    order = np.lexsort((t, owner))
    owner, pos = owner[order], pos[order]
    counts = np.bincount(owner, minlength=len(deg))
    rank = np.arange(len(owner)) - np.repeat(np.cumsum(counts) - counts, counts)[: len(owner)]
    short = which & (counts < fanout)
    keep = (rank < fanout) & ~short[owner]
    return owner[keep], pos[keep], short


class KeyedSampler(TimedSampler):
    """Blocks for seeds with the keyed neighbour choice (module docstring), timed like :class:`TimedSampler`.

    Args:
        fanouts: per layer, input side first; -1 = all in-neighbours.
        seed: ``training.seed`` (part of every key).
    """

    def __init__(self, fanouts: list[int], seed: int) -> None:
        super().__init__(fanouts)
        self.fanouts, self.seed = list(fanouts), seed
        self._csc: tuple[int, np.ndarray, np.ndarray, np.ndarray] | None = None

    def _adjacency(self, g: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The graph's CSC (offsets, in-neighbours, edge ids), computed once per graph object."""
        if self._csc is None or self._csc[0] != id(g):
            indptr, indices, eids = g.adj_tensors("csc")
            self._csc = (id(g), indptr.numpy(), indices.numpy(), eids.numpy())
        return self._csc[1], self._csc[2], self._csc[3]

    def sample(self, g: Any, seeds: torch.Tensor,
               key: tuple[int, int] | None = None) -> tuple[torch.Tensor, torch.Tensor, list[Any], torch.Tensor]:
        """Sample blocks for ``seeds`` at ``key`` = (epoch, iteration) (default (0, 0)); returns (input nodes,
        seeds, blocks, [start_s, end_s] float64) like :meth:`TimedSampler.sample`."""
        start = now()
        epoch, iteration = key or (0, 0)
        indptr, indices, eids = self._adjacency(g)
        dst = seeds.to(torch.int64)
        blocks: list[Any] = []
        for layer in reversed(range(len(self.fanouts))):
            nodes = dst.numpy()
            keys = vertex_keys(self.seed, epoch, iteration, layer, nodes)
            pos, owner = choose_in_edges(indptr, nodes, keys, self.fanouts[layer])
            block = make_block(nodes, indices[pos], owner, eids[pos])
            dst = block.srcdata[dgl.NID]
            blocks.insert(0, block)
        return dst, seeds, blocks, torch.tensor([start, now()], dtype=torch.float64)


def make_block(dst: np.ndarray, src: np.ndarray, dst_index: np.ndarray, eids: np.ndarray) -> Any:
    """A DGL block (message flow graph) of chosen edges, laid out as ``dgl.to_block`` lays it out: the dst
    vertices first among the src vertices, then the other sources in order of first appearance; ``dgl.NID`` and
    ``dgl.EID`` set (built with ``dgl.create_block``: ``to_block`` of a frontier graph over all n vertices costs
    O(n) per call).

    Shapes:
        dst: (k,) distinct vertex ids; src, dst_index, eids: (e,) source vertex, index into ``dst``, edge id.
    """
    cand = np.concatenate([dst, src])
    uniq, first = np.unique(cand, return_index=True)
    keep = np.sort(first)
    local = np.empty(len(uniq), dtype=np.int64)
    local[np.argsort(first, kind="stable")] = np.arange(len(uniq))
    src_local = local[np.searchsorted(uniq, src)]
    block = dgl.create_block((torch.from_numpy(src_local), torch.from_numpy(dst_index.astype(np.int64))),
                             num_src_nodes=len(keep), num_dst_nodes=len(dst))
    block.srcdata[dgl.NID] = torch.from_numpy(cand[keep])
    block.dstdata[dgl.NID] = torch.from_numpy(np.asarray(dst, dtype=np.int64))
    block.edata[dgl.EID] = torch.from_numpy(np.asarray(eids, dtype=np.int64))
    return block


def make_sampler(kind: Literal["dgl", "keyed"], fanouts: list[int], seed: int) -> TimedSampler:
    """The sampler a ``sampler`` knob names: ``dgl`` = DGL's ``NeighborSampler``, ``keyed`` = :class:`KeyedSampler`.

    Raises:
        ValueError: another name.
    """
    if kind == "dgl":
        return TimedSampler(fanouts)
    if kind == "keyed":
        return KeyedSampler(fanouts, seed)
    raise ValueError(f"sampler: must be one of {', '.join(SAMPLERS)}, got {kind!r}")
