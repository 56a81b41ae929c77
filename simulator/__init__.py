"""gnnplan's simulator: hardware model, workload arithmetic, event engine, strategies' cost models.

This package never imports ``executor``, ``autotune`` or ``optuna`` and does not import torch at import time
(graph statistics import DGL and pymetis lazily when they measure a graph). See ../DESIGN.md.
"""

if __name__ != "gnnplan.simulator":  # the folder simulator/ installs as gnnplan.simulator (pyproject.toml, package-dir)
    raise ImportError(f"{__name__}: this folder is the package gnnplan.simulator; import gnnplan.simulator "
                      "(after `pip install -e .`)")


__version__ = "0.1.0"
