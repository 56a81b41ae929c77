"""Words for people in messages: counted nouns (``1 trace``, ``2 traces``, not ``2 trace(s)``) and byte amounts
(``2.32 MB``, not ``0.00232 GB``)."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1 (``plural``, default ``noun + "s"``)."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


def bytes_text(x: float) -> str:
    """Bytes in decimal units with two decimals: ``3.00 GB``, ``2.32 MB``, ``512 B``."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if x >= scale:
            return f"{x / scale:.2f} {unit}"
    return f"{x:.0f} B"
