"""Safe YAML/JSON reading and atomic writing (temp file + rename), shared by every package.

Nothing half-written is ever left at the destination (DESIGN.md, "Errors and data safety").
"""

from __future__ import annotations

import copy
import errno
import json
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

import yaml

from gnnplan.simulator.errors import SpecError

MAX_SPEC_BYTES = 16 * 2**20
"""Largest spec, plan or JSON object file read (16 MiB): a plan with its prediction is a few kB."""
MAX_YAML_BYTES = 2**20
"""Largest YAML file read (1 MiB, 90 times the largest shipped YAML): PyYAML's pure-Python safe loader, the only one
that can refuse aliases while composing, parses ~0.1-1 MB/s (measured on the 2-core development machine)."""
MAX_YAML_DEPTH = 64
"""Deepest nesting of YAML collections accepted (specs nest 3 levels; deeper input is malformed or hostile)."""
MAX_YAML_NODES = 10_000
"""Most YAML nodes (scalars and collections) in one file: the largest shipped YAML (a catalogue) has ~410 and a
plan ~220; a flow list of 500,000 items took 58 s to parse on the development machine."""
MAX_TRACE_BYTES = 512 * 2**20
"""Largest Chrome trace read (512 MiB, ~2.5 million spans; ``json.loads`` holds several times the file)."""


class _SpecLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` without aliases (an alias bomb grows memory without bound), with bounded nesting
    (deep nesting ends in RecursionError), a bounded number of nodes (parse time) and no key given twice in a
    mapping (PyYAML keeps the last one silently, so a value edited in one place is ignored)."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
                if key is not None and key in seen:
                    raise yaml.YAMLError(f"key {key!r} given twice in one mapping, at line "
                                         f"{key_node.start_mark.line + 1}")
                seen.add(key)
        return super().construct_mapping(node, deep)

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.YAMLError(f"aliases (*{event.anchor}) are not allowed, at line {event.start_mark.line + 1}")
        self._nodes = getattr(self, "_nodes", 0) + 1
        if self._nodes > MAX_YAML_NODES:
            raise yaml.YAMLError(f"more than {MAX_YAML_NODES} values")
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise yaml.YAMLError(f"nested deeper than {MAX_YAML_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def read_yaml(path: str | Path, what: str) -> dict[str, Any]:
    """Read a YAML mapping safely: ``yaml.SafeLoader`` without aliases, at most :data:`MAX_YAML_DEPTH` levels
    deep, :data:`MAX_YAML_NODES` values and :data:`MAX_YAML_BYTES` (and :data:`MAX_SPEC_BYTES`) long.

    Args:
        path: file to read.
        what: name used in error messages, e.g. ``"cluster"``.

    Returns:
        The mapping.

    Raises:
        SpecError: the file is missing, too large, unreadable, not valid YAML (aliases, deep nesting and too many
            values included), or not a mapping.
    """
    text = read_text(path, what, min(MAX_YAML_BYTES, MAX_SPEC_BYTES))
    p = Path(path)
    if text in _PARSED:
        return copy.deepcopy(_PARSED[text])
    try:
        data = yaml.load(text, Loader=_SpecLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc) or "malformed YAML"
        raise SpecError(f"{what}: {p} is not valid YAML{at}: {problem}") from None
    except ValueError as exc:  # a scalar its constructor cannot build: a date like 2024-13-45, a 5,000-digit int
        raise SpecError(f"{what}: {p} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{what}: {p} must hold a YAML mapping, got {type(data).__name__}")
    if len(_PARSED) >= MAX_PARSED_TEXTS:
        _PARSED.clear()
    _PARSED[text] = copy.deepcopy(data)
    return data


MAX_PARSED_TEXTS = 256
"""YAML texts whose parsed mapping :func:`read_yaml` keeps, keyed by the text itself (so an edited file is parsed
again, however soon): a study or a test session reads the same presets hundreds of times, and ``load_cluster`` of
a preset with its sources took 7.7 ms parsed every time against 1.1 ms with the text kept (a deep copy of the
mapping; benchmarks/bench_fit_speed.py on the 2-core development machine, 2026-12-01)."""
_PARSED: dict[str, dict[str, Any]] = {}


NAME_MAX_BYTES = 255
"""Longest file name (one path component) Linux's file systems hold (``NAME_MAX``, limits.h); a longer one makes
every ``stat`` raise ``OSError: File name too long``."""


def check_path_text(ref: str | Path, what: str, expected: str = "a file") -> None:
    """Refuse a reference no file can have before any file-system call: an empty one (``Path("")`` is the current
    folder) or one with a component over :data:`NAME_MAX_BYTES` bytes (a raw ``OSError`` reached the API's caller,
    2026-12-01).

    Raises:
        SpecError: one line naming ``what`` (and, for an empty one, ``expected``).
    """
    text = str(ref)
    if not text.strip():
        raise SpecError(f"{what}: an empty name; give {expected}")
    longest = max((len(os.fsencode(part)) for part in Path(text).parts), default=0)
    if longest > NAME_MAX_BYTES:
        raise SpecError(f"{what}: {text[:40]!r}... holds a name of {longest} bytes; a file name has at most "
                        f"{NAME_MAX_BYTES}")


def not_a_file(path: str | Path, what: str) -> SpecError:
    """The error for a path that is no regular file: ``what: 'P' is a folder, not a file`` or ``what: file 'P'
    does not exist``."""
    p = Path(path)
    if p.is_dir():
        return SpecError(f"{what}: {str(p)!r} is a folder, not a file")
    return SpecError(f"{what}: file {str(p)!r} does not exist")


def read_text(path: str | Path, what: str, max_bytes: int) -> str:
    """The UTF-8 text of a file of at most ``max_bytes``.

    Raises:
        SpecError: the file is missing or a folder, larger than ``max_bytes``, unreadable (permissions, I/O), or
            not UTF-8 (one line naming ``what`` and the file).
    """
    check_path_text(path, what)
    p = Path(path)
    if not p.is_file():
        raise not_a_file(p, what)
    try:
        if p.stat().st_size > max_bytes:
            raise SpecError(f"{what}: {p} is larger than {_size(max_bytes)}")
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SpecError(f"{what}: {p} is not UTF-8 text") from None
    except OSError as exc:
        raise SpecError(f"{what}: cannot read {p}: {exc.strerror or type(exc).__name__}") from None


def _size(nbytes: int) -> str:
    return f"{nbytes // 2**20} MiB" if nbytes >= 2**20 else f"{nbytes} bytes"


def read_json(path: str | Path, what: str, max_bytes: int = MAX_SPEC_BYTES, kind: str = "valid JSON") -> Any:
    """Parse a JSON file of at most ``max_bytes`` (``NaN`` and ``Infinity`` parse as floats: schemas reject them).

    Args:
        path: the file.
        what: name used in messages, e.g. ``"trace"``.
        max_bytes: largest file accepted.
        kind: what the file should be, for messages (``"is not <kind>"``).

    Raises:
        SpecError: see :func:`read_text`, malformed JSON (with line and column) or nesting too deep for the parser.
    """
    text = read_text(path, what, max_bytes)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(f"{what}: {path} is not {kind} (line {exc.lineno}, column {exc.colno}: {exc.msg})") \
            from None
    except RecursionError:
        raise SpecError(f"{what}: {path} is not {kind} (nested too deeply)") from None


def check_output(path: str | Path, what: str, folder: bool = False) -> Path:
    """Check, before any work, that ``path`` can be written: its deepest existing ancestor is a writable folder
    (a temp file is created and removed there, so a read-only file system or folder is caught even for root), every
    missing part of the path is a legal name, an existing ``path`` is of the right kind (a folder when ``folder``,
    else a file) and not a read-only file (mode without write bits: :func:`atomic_write` would replace it).

    Args:
        path: the file (or, with ``folder``, the folder) to be written.
        what: the option naming it in messages, e.g. ``"-o"``.
        folder: whether ``path`` is a folder that will receive files.

    Returns:
        ``Path(path)``.

    Raises:
        SpecError: one line naming ``what``, the path and the reason.
    """
    dest = Path(path)
    if not folder and str(path).endswith(("/", os.sep)):  # Path() drops the slash: a file would get that name
        raise SpecError(f"{what}: {str(path)!r} ends in '/', a folder; name the file to write")
    try:
        existing = _check_existing(dest.absolute(), str(dest), what, folder)
        for part in dest.absolute().relative_to(existing).parts:
            if len(os.fsencode(part)) > _name_max(existing):
                raise SpecError(f"{what}: {str(dest)!r}: file name too long ({len(os.fsencode(part))} bytes, "
                                f"at most {_name_max(existing)})")
        fd, tmp = tempfile.mkstemp(prefix=".gnnplan-check.", dir=existing)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise SpecError(f"{what}: cannot write {str(dest)!r}: {exc.strerror or type(exc).__name__}") from None
    return dest


def _check_existing(dest: Path, shown: str, what: str, folder: bool) -> Path:
    """The deepest existing folder on the way to the absolute ``dest`` (``dest`` itself when it is an existing
    folder to write into), checked to be a folder; ``shown`` is the path as the user gave it."""
    if dest.exists():
        if dest.is_dir() and not folder:
            raise SpecError(f"{what}: {shown!r} is a folder, not a file")
        if folder and not dest.is_dir():
            raise SpecError(f"{what}: {shown!r} is a file, not a folder")
        if not folder and (not dest.stat().st_mode & 0o222 or not os.access(dest, os.W_OK)):  # or immutable
            raise SpecError(f"{what}: {shown!r} is read-only")
        return dest if folder else dest.parent
    probe = dest.parent
    while not probe.exists() and not probe.is_symlink():
        probe = probe.parent
    if not probe.is_dir():
        raise SpecError(f"{what}: {shown!r}: {str(probe)!r} is a file, not a folder")
    return probe


def _name_max(folder: Path) -> int:
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return 255


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
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name[:64]}.", dir=dest.parent)  # a long name stays legal
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


def atomic_write_files(texts: Mapping[str | Path, str]) -> list[Path]:
    """Write several text files (UTF-8) as one: every file goes to a temp file beside its destination (fsynced)
    first, and only when all are written are they renamed into place, so a failure while writing (a full disk, a
    destination that is a folder or cannot be replaced) leaves every destination as it was (DESIGN.md, "Errors and
    data safety"). Each existing destination is checked before the renames (a regular file this process may
    replace); a rename can then fail only on an error of the file system itself.

    Args:
        texts: destination -> text; parent folders are created.

    Returns:
        The destination paths, in the order given.

    Raises:
        OSError: naming the destination (not the temp file) that could not be written or replaced.
    """
    temps: list[tuple[str, Path]] = []
    try:
        for path, text in texts.items():
            dest = Path(path)
            try:
                dest.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(prefix=f".{dest.name[:64]}.", dir=dest.parent)
                temps.append((tmp, dest))
                with os.fdopen(fd, "wb") as fh:
                    fh.write(text.encode())
                    fh.flush()
                    os.fsync(fh.fileno())
                os.chmod(tmp, 0o666 & ~_umask())
                if dest.is_dir():
                    raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
                if dest.exists() and not os.access(dest, os.W_OK):  # read-only, or immutable (chattr +i)
                    raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
            except OSError as exc:
                raise type(exc)(exc.errno, exc.strerror, str(dest)) from None
        for tmp, dest in temps:
            try:
                os.replace(tmp, dest)
            except OSError as exc:
                raise type(exc)(exc.errno, exc.strerror, str(dest)) from None
    except BaseException:
        for tmp, _ in temps:
            if os.path.exists(tmp):
                os.unlink(tmp)
        raise
    return [Path(p) for p in texts]


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


def atomic_write_json(path: str | Path, data: Any, indent: int | None = 1) -> Path:
    """Write JSON atomically; ``indent=None`` writes one line with the C encoder (Python's ``json`` encodes in
    Python when indenting: 12 of 108 s of measuring hopgnn's micrographs at 256 GPUs, 2026-12-01)."""
    return atomic_write_text(path, json.dumps(data, indent=indent))
