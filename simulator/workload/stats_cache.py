"""The on-disk cache of measured graph statistics: where an entry lives and how it is read back.

Layout under :func:`simulator.paths.cache_dir` ``/stats/<dataset_key>/`` (:func:`stats_dir`): one JSON file per
measurement, ``<kind>-<digest of all its parameters>.json`` (:func:`entry_path`), holding ``{"params": ...,
"stats": ...}`` (neutronstar's ``deps`` entries hold ``"workers"``); a reader checks the stored parameters against
its own (:func:`read_entry`) and measures again on any mismatch or damage. Used by :mod:`.graphstats` (``sample``,
the dataset summary, partitions), the evaluation's inference blocks (``inference``,
:func:`.inference.inference_stats`), hopgnn's micrographs (``micrograph``, the parameters of
:func:`.graphstats.sample_params` extended), gsplit's split statistics (``gsplit``) and neutronstar's dependency
counts (``deps``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from gnnplan.simulator.paths import cache_dir
from gnnplan.simulator.workload.datasets import dataset_key
from gnnplan.simulator.workload.spec import GeneratedSpec


def stats_dir(ref: str | GeneratedSpec) -> Path:
    """The cache folder of dataset ``ref`` (``workload.dataset``: name, card, folder or generated spec)."""
    return cache_dir() / "stats" / dataset_key(ref)


def digest(params: dict[str, Any]) -> str:
    """16 hex digits of the SHA-1 of ``params`` as sorted JSON: an entry's name for exactly these parameters."""
    return hashlib.sha1(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]


def entry_path(kind: str, params: dict[str, Any]) -> Path:
    """The file of measurement ``kind`` (``sample``, ``micrograph``) with ``params`` (their ``dataset`` key names
    the folder, as :func:`stats_dir` does)."""
    return cache_dir() / "stats" / params["dataset"] / f"{kind}-{digest(params)}.json"


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object at ``path``; None when it is missing, unreadable or not an object."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_entry(path: Path, params: dict[str, Any], key: str = "stats", kind: type = dict) -> Any:
    """The ``key`` member of the entry at ``path`` if it was measured with exactly ``params`` and is a ``kind``
    (``stats``: an object; neutronstar's ``workers``: a list), else None."""
    data = read_json(path)
    if data is None or data.get("params") != params or not isinstance(data.get(key), kind):
        return None
    return data[key]
