"""gnnplan's executor: real distributed GNN training of a plan, traced (DESIGN.md, "Layout").

Modules, one job each:

* :mod:`executor.comm` — the only caller of ``torch.distributed``; counts the bytes every collective moves.
* :mod:`executor.trace` — a low-overhead span recorder producing :class:`simulator.trace.Span`.
* :mod:`executor.data` — cluster position, graph preparation (self-loops, GCN weights, feature normalisation)
  and the seed schedule.
* :mod:`executor.features` — per-machine feature partitions, the device feature cache and remote fetch.
* :mod:`executor.assemble` — what one rank loads for training.
* :mod:`executor.sampling` — DGL neighbour sampling, inline or in persistent sampler processes.
* :mod:`executor.models` — the DGL models (GCN, GraphSAGE, GAT, GIN) the simulator's cost model describes.
* :mod:`executor.evaluate` — distributed full-neighbour layer-wise inference (validation / test accuracy).
* :mod:`executor.strategies` — one module per strategy, same ``NAME`` and ``Knobs`` as the simulator's plug-in.
* :mod:`executor.launch` — process start-up: local spawn on 127.0.0.1, and the ``torchrun`` entry point.
* :mod:`executor.runner` — :func:`~executor.runner.run_plan`, what ``gnnplan run PLAN`` calls.

Importing this package does not import torch or DGL.
"""

if __name__ != "gnnplan.executor":  # the folder executor/ installs as gnnplan.executor (pyproject.toml, package-dir)
    raise ImportError(f"{__name__}: this folder is the package gnnplan.executor; import gnnplan.executor "
                      "(after `pip install -e .`)")

