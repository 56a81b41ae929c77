"""gnnplan's simulator: hardware model, workload arithmetic, event engine, strategies' cost models.

This package never imports ``executor``, ``autotune`` or ``optuna`` and does not import torch at import time
(graph statistics import DGL and pymetis lazily when they measure a graph). See ../DESIGN.md.
"""

__version__ = "0.1.0"
