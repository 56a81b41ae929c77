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

MAX_SPEC_BYTES = 16 * 2**20
"""Largest YAML file read as a spec or plan (16 MiB): a plan with its prediction is a few kB."""
MAX_YAML_DEPTH = 64
"""Deepest nesting of YAML collections accepted (specs nest 3 levels; deeper input is malformed or hostile)."""


class _SpecLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` without aliases (an alias bomb grows memory without bound) and with bounded nesting
    (deep nesting ends in RecursionError)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.YAMLError(f"aliases (*{event.anchor}) are not allowed, at line {event.start_mark.line + 1}")
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise yaml.YAMLError(f"nested deeper than {MAX_YAML_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def read_yaml(path: str | Path, what: str) -> dict[str, Any]:
    """Read a YAML mapping safely: ``yaml.SafeLoader`` without aliases, at most :data:`MAX_YAML_DEPTH` levels
    deep and :data:`MAX_SPEC_BYTES` long.

    Args:
        path: file to read.
        what: name used in error messages, e.g. ``"cluster"``.

    Returns:
        The mapping.

    Raises:
        SpecError: the file is missing, too large, unreadable, not valid YAML (aliases and deep nesting
            included), or not a mapping.
    """
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"{what}: file {str(p)!r} does not exist")
    if p.stat().st_size > MAX_SPEC_BYTES:
        raise SpecError(f"{what}: {p} is larger than {MAX_SPEC_BYTES // 2**20} MiB")
    try:
        data = yaml.load(p.read_text(), Loader=_SpecLoader)  # noqa: S506 (a SafeLoader subclass)
    except UnicodeDecodeError:
        raise SpecError(f"{what}: {p} is not UTF-8 text") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc) or "malformed YAML"
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
