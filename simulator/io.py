"""Safe YAML/JSON reading and atomic writing (temp file + rename), shared by every package.

Nothing half-written is ever left at the destination (DESIGN.md, "Errors and data safety").
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import yaml

from gnnplan.simulator.errors import SpecError


def read_yaml(path: str | Path, what: str) -> dict[str, Any]:
    """Read a YAML mapping with ``yaml.safe_load``.

    Args:
        path: file to read.
        what: name used in error messages, e.g. ``"cluster"``.

    Returns:
        The mapping.

    Raises:
        SpecError: the file is missing, is not valid YAML, or is not a mapping.
    """
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"{what}: file {str(p)!r} does not exist")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "malformed YAML"
        raise SpecError(f"{what}: {p} is not valid YAML{at}: {problem}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{what}: {p} must hold a YAML mapping, got {type(data).__name__}")
    return data


def atomic_write(path: str | Path, write: Callable[[IO[bytes]], object]) -> Path:
    """Write ``path`` atomically: ``write(fh)`` into a temp file in the same folder, fsync, then rename; on any
    error the temp file is removed and ``path`` is untouched (DESIGN.md, "Errors and data safety"). The file
    gets the permissions ``open()`` would give it (0666 less the umask), not ``mkstemp``'s private 0600.

    Args:
        path: destination; its parent folders are created.
        write: fills the binary file handle it is given.

    Returns:
        The destination path.
    """
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, dest)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return dest


def _umask() -> int:
    """The process's umask (read by setting it and restoring it at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`atomic_write`)."""
    return atomic_write(path, lambda fh: fh.write(text.encode()))


def atomic_save_npy(path: str | Path, array: Any) -> Path:
    """``numpy.save`` an array to ``path`` atomically (:func:`atomic_write`), without pickling."""
    import numpy as np

    return atomic_write(path, lambda fh: np.save(fh, np.ascontiguousarray(array), allow_pickle=False))


def atomic_write_yaml(path: str | Path, data: dict[str, Any]) -> Path:
    """Write a mapping as YAML atomically (floats in exponent form keep a signed exponent, YAML 1.1-safe)."""
    return atomic_write_text(path, yaml.safe_dump(data, sort_keys=False))


def atomic_write_json(path: str | Path, data: Any) -> Path:
    """Write JSON atomically."""
    return atomic_write_text(path, json.dumps(data, indent=1))
