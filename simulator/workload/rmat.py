"""R-MAT power-law graph generator, by default with the Graph500 parameters (vectorised numpy).

Source: Chakrabarti, Zhan and Faloutsos, "R-MAT: A Recursive Model for Graph Mining", SDM 2004; the default
quadrant probabilities a=0.57, b=0.19, c=0.19 (d=0.05) and the vertex relabelling follow the Graph500
specification (Kronecker generator); other a, b, c come from ``RmatSpec``. The random relabelling means vertex ids
carry no locality, and R-MAT has no community structure: for graphs with communities see :mod:`.sbm`. Graph500
generates 2**scale vertices; to give any vertex count n we draw at
scale = ceil(log2 n) and keep the edges whose endpoints both fall below n, drawing more until the target count.
"""

from __future__ import annotations

import numpy as np

GRAPH500_ABC = (0.57, 0.19, 0.19)


def rmat_edges(num_vertices: int, num_edges: int, seed: int = 0,
               abc: tuple[float, float, float] = GRAPH500_ABC) -> tuple[np.ndarray, np.ndarray]:
    """Draw a simple, symmetric R-MAT graph.

    Args:
        num_vertices: n >= 2.
        num_edges: undirected edges to draw before removing self-loops and duplicates.
        seed: RNG seed (the result is a pure function of the arguments).
        abc: quadrant probabilities a, b, c (d = 1 - a - b - c).

    Returns:
        (src, dst), int64 arrays of equal length listing both directions of every undirected edge, sorted by
        (src, dst), without self-loops or duplicates.

    Raises:
        ValueError: n < 2 or num_edges < 1.
    """
    if num_vertices < 2 or num_edges < 1:
        raise ValueError("rmat: num_vertices must be >= 2 and num_edges >= 1")
    rng = np.random.default_rng(seed)
    scale = int(np.ceil(np.log2(num_vertices)))
    a, b, c = abc
    perm = rng.permutation(num_vertices)
    srcs, dsts, have = [], [], 0
    while have < num_edges:
        m = int((num_edges - have) * (2 ** scale / num_vertices) ** 2 * 1.05) + 16
        u = np.zeros(m, dtype=np.int64)
        v = np.zeros(m, dtype=np.int64)
        for _ in range(scale):
            r = rng.random(m)
            right = (r >= a) & (r < a + b) | (r >= a + b + c)   # quadrant b or d: dst bit set
            down = r >= a + b                                    # quadrant c or d: src bit set
            u = (u << 1) | down
            v = (v << 1) | right
        keep = (u < num_vertices) & (v < num_vertices)
        srcs.append(u[keep])
        dsts.append(v[keep])
        have += int(keep.sum())
    u = perm[np.concatenate(srcs)[:num_edges]]
    v = perm[np.concatenate(dsts)[:num_edges]]
    both_u, both_v = np.concatenate([u, v]), np.concatenate([v, u])
    keep = both_u != both_v
    key = np.unique(both_u[keep] * num_vertices + both_v[keep])
    return key // num_vertices, key % num_vertices
