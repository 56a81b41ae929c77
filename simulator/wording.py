"""Counted nouns in messages: ``1 trace``, ``2 traces`` (not ``2 trace(s)``)."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1 (``plural``, default ``noun + "s"``)."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"
