"""One error type for bad user input, and a one-line rendering of pydantic validation errors.

The CLI turns :class:`SpecError` (and ``ValueError`` in general) into a one-line message on stderr with exit
code 2 (DESIGN.md, "Errors and data safety"), and :class:`RunError` into one line with exit code 1.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError


class SpecError(ValueError):
    """Bad user input: the message names the field and what is allowed, on one line."""


class RunError(RuntimeError):
    """A run that started failed (a worker died, a timeout): the message says which and why, on one line;
    the CLI prints it and exits with code 1."""


def one_line(err: ValidationError, where: str) -> str:
    """Render the first error of a pydantic ``ValidationError`` as ``where.field: message (got value)``.

    Args:
        err: the validation error.
        where: what was being read, e.g. ``"cluster 4x-a100-10gbe"`` or ``"workload w.yaml"``.

    Returns:
        One line without newlines.
    """
    first: dict[str, Any] = dict(err.errors()[0])
    loc = ".".join(str(p) for p in first.get("loc", ()) if not str(p).startswith(("function-", "tagged-union[")))
    msg = str(first.get("msg", "invalid")).replace("Value error, ", "")
    got = first.get("input")
    shown = "" if isinstance(got, (dict, list)) or got is None else f" (got {got!r})"
    field = f"{where}: {loc}" if loc else where
    return f"{field}: {msg}{shown}".replace("\n", " ")
