"""Names that become parts of file names: a cluster's (``<name>-calibrated.yaml``) and a workload's (a trace's
``<workload>-<strategy>-<time>.json``).

A workload named ``../../esc/x`` wrote its run's trace outside ``--trace-dir``, and one of 300 characters trained
and then lost its trace to ``File name too long`` (2026-12-01, a new user's pass). :data:`FileNamePart` refuses both
when the spec is read: no path separator, no leading dot, no control character, at most :data:`MAX_NAME_BYTES`
bytes of UTF-8. Spaces and other characters stay allowed (a name is free text otherwise).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

MAX_NAME_BYTES = 100
"""Longest name in UTF-8 bytes: a file name may hold 255 bytes on Linux's file systems (ext4, xfs, tmpfs:
``NAME_MAX``, limits.h), and a trace's name adds the strategy, a time stamp and a counter to it."""


def check_file_name_part(name: str) -> str:
    """``name`` unchanged if it can be part of a file name (module docstring).

    Raises:
        ValueError: a path separator, a leading dot, a control character, or more than :data:`MAX_NAME_BYTES`
            bytes (pydantic reports it at the field).
    """
    if "/" in name or "\\" in name:
        raise ValueError("holds a path separator; a name becomes part of a file name (a trace's, a "
                         "calibrated cluster's): use letters, digits, '-', '_' or '.'")
    if name.startswith("."):
        raise ValueError("starts with a dot; a name becomes part of a file name and must not hide it")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise ValueError("holds a control character")
    size = len(name.encode())
    if size > MAX_NAME_BYTES:
        raise ValueError(f"is {size} bytes long; at most {MAX_NAME_BYTES} (it becomes part of a file name)")
    return name


FileNamePart = Annotated[str, AfterValidator(check_file_name_part)]
"""A ``str`` field checked by :func:`check_file_name_part`."""
