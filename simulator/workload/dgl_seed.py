"""Seeding DGL's random engines so that the same seed samples the same blocks in every process.

DGL keeps one random engine per thread and seeds it with ``seed + k``, where k numbers the threads in the order they
first drew from DGL (``GetThreadId`` in DGL's include/dgl/random.h, dmlc/dgl; ``dgl.seed`` seeds the engine of every
OpenMP thread in a ``parallel_for``). A process whose first draw is a ``dgl.seed`` on two or more OpenMP threads numbers
its main thread 0 or 1, whichever thread asked first: measured 2026-12-02 on this 2-core machine with DGL 1.1.3, a
Cora batch sampled on the main thread after such a first ``dgl.seed`` was the batch of a fresh process in 6 of 6
processes on an idle machine and another batch in 8 of 8 with two busy processes beside them. That broke gsplit, whose
ranks each sample the same batch (:func:`simulator.strategies.gsplit.stats.sample_batch`): a rank seeded on its thread
share (``executor.strategies.base.seeded_gnn``) could split another batch than its peers, and the suite's gsplit
equivalence test failed whenever the test process had first seeded DGL on two threads under load.

:func:`seed_dgl` draws once on the calling thread alone before it seeds every thread, so a process whose first DGL
draw is through it numbers its calling thread 0 (every seeding of DGL in gnnplan goes through it).
"""

from __future__ import annotations


def seed_dgl(seed: int) -> None:
    """``dgl.seed(seed)``, after seeding the calling thread's engine alone (module docstring): the first call in a
    process makes the calling thread DGL's thread 0, whatever the OpenMP thread count.

    Args:
        seed: 0 <= seed < 2**31 (``dgl.seed`` rejects larger values).
    """
    import dgl
    from dgl.utils import get_num_threads, set_num_threads

    threads = get_num_threads()
    set_num_threads(1)
    try:
        dgl.seed(seed)  # one thread: this one draws first, if no thread has
    finally:
        set_num_threads(threads)
    dgl.seed(seed)
