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


def unknown_name(kind: str, name: str, allowed: list[str], tail: str = "") -> str:
    """``unknown <kind> 'name' (did you mean 'x'?); allowed: a, b, c<tail>``: the nearest allowed name when one is
    close (:func:`difflib.get_close_matches`, its default similarity cutoff 0.6), then the whole list."""
    import difflib

    near = difflib.get_close_matches(name, allowed, n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return f"unknown {kind} {name!r}{hint}; allowed: {', '.join(allowed)}{tail}"
