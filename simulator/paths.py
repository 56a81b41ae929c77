"""Where gnnplan keeps per-user state: presets written by ``gnnplan probe`` and the graph-statistics cache."""

from __future__ import annotations

import os
from pathlib import Path


def user_home() -> Path:
    """``$GNNPLAN_HOME`` if set, else ``~/.gnnplan`` (not created here)."""
    return Path(os.environ.get("GNNPLAN_HOME", Path.home() / ".gnnplan"))


def cache_dir() -> Path:
    """Folder of cached graph statistics and generated graphs: ``$GNNPLAN_CACHE`` or ``<home>/cache``."""
    return Path(os.environ.get("GNNPLAN_CACHE", user_home() / "cache"))
