"""Unit-aware values for the command line: ``10Gbit/s``, ``1.25GB/s``, ``100Gb/s``, ``5us``, ``2ms``, ``40GiB``.

Every value becomes SI base units, the units gnnplan computes in (DESIGN.md, "Units and names"): bytes per
second, seconds, bytes, FLOP per second. A plain number (``25e9``) is taken as already in those units. What a
field accepts follows from its name's unit suffix (:func:`kind_of`).

Sources: decimal prefixes k, M, G, T, P = 10^3 ... 10^15 (BIPM, "The International System of Units", 9th ed.,
2019, Table 7); binary prefixes Ki, Mi, Gi, Ti, Pi = 2^10 ... 2^50 (IEC 80000-13:2008); a bit is 1/8 byte, so
``b``, ``bit`` and ``bps`` count bits and ``B`` counts bytes (IEEE 1541-2002 symbols). A size in ``b`` alone
(``16Gb``) is refused: written for a memory it is nearly always meant as bytes, and read as bits it would give an
eighth of that without a word (2026-12-01, a new user's pass: ``gpu.memory_bytes=16Gb`` became 2 GB); a size in
bits spells the unit out (``16Gbit``). A bandwidth in ``Gb/s`` is the usual spelling and stays bits.
"""

from __future__ import annotations

import math
import re

from gnnplan.simulator.errors import SpecError

BITS_PER_BYTE = 8
PREFIXES = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
            "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}
"""Multipliers of the prefixes (``K`` is accepted for kilo, as in ``KB``)."""
TIME_UNITS_S = {"s": (1.0, 1.0), "ms": (1.0, 1e3), "us": (1.0, 1e6), "\u00b5s": (1.0, 1e6), "ns": (1.0, 1e9),
                "min": (60.0, 1.0), "h": (3600.0, 1.0)}
"""Seconds per time unit as (multiplier, divisor): dividing keeps ``5us`` exactly the float ``5e-6``."""
KINDS = {
    "bandwidth": ("a bandwidth", "10Gbit/s, 100Gb/s, 1.25GB/s, 12GiB/s or bytes/s as a number (1.25e9)"),
    "time": ("a time", "5us, 2ms, 0.1s or seconds as a number (2e-5)"),
    "bytes": ("a size", "40GiB, 16GB, 512MB or bytes as a number (4e10)"),
    "flops": ("a compute rate", "19.5TFLOP/s, 19.5TFLOPS or FLOP/s as a number (1.95e13)"),
    "number": ("a number", "0.5 or 25e9"),
}
"""What each kind is called in messages, and the forms it accepts."""

_NUMBER_UNIT = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(\S*)\s*$")
_PREFIX = r"(Ki|Mi|Gi|Ti|Pi|k|K|M|G|T|P|)"
_BYTES = re.compile(rf"^{_PREFIX}(B|b|bit|bits|byte|bytes)$")
_BANDWIDTH = re.compile(rf"^{_PREFIX}(B|b|bit|bits|byte|bytes)(?:/s|ps)$")
_FLOPS = re.compile(rf"^{_PREFIX}(?:FLOP/s|FLOPS|flop/s|flops)$")


def kind_of(field: str) -> str:
    """The kind of value a field holds, from its name: ``*_bytes_per_s`` bandwidth, ``*_flops_per_s`` compute
    rate, ``*_bytes`` size, ``*_s`` time, anything else a plain number."""
    name = field.rsplit(".", 1)[-1]
    for suffix, kind in (("_bytes_per_s", "bandwidth"), ("_flops_per_s", "flops"), ("_bytes", "bytes"),
                         ("_s", "time")):
        if name.endswith(suffix):
            return kind
    return "number"


def parse_quantity(text: str, kind: str, field: str) -> float:
    """Read ``text`` as a value of ``kind`` in SI base units.

    Args:
        text: e.g. ``"10Gbit/s"``, ``"1.25 GB/s"``, ``"5us"``, ``"40GiB"``, ``"25e9"``.
        kind: ``bandwidth``, ``time``, ``bytes``, ``flops`` or ``number`` (:data:`KINDS`).
        field: the field's name, for the message.

    Returns:
        The value in bytes/s, s, bytes, FLOP/s (or the number itself).

    Raises:
        SpecError: not a finite number with a unit of that kind (one line naming the field and the accepted
            forms).
    """
    if kind not in KINDS:
        raise ValueError(f"kind: unknown kind {kind!r}; allowed: {', '.join(KINDS)}")
    match = _NUMBER_UNIT.match(text)
    found = _BYTES.match(match.group(2)) if match and kind == "bytes" else None
    if found is not None and found.group(2) == "b":
        number, prefix = match.group(1), found.group(1)  # type: ignore[union-attr]
        raise SpecError(f"{field}: {text!r} is in bits (b); write a size in bytes as {number}{prefix}B, or spell "
                        f"bits out as {number}{prefix}bit")
    scale = _unit_scale(match.group(2), kind) if match else None
    value = float(match.group(1)) * scale[0] / scale[1] if match and scale is not None else math.nan
    if not math.isfinite(value):
        noun, forms = KINDS[kind]
        raise SpecError(f"{field}: cannot read {text!r} as {noun}; use e.g. {forms}")
    return value


def parse_field_value(field: str, text: str) -> float:
    """:func:`parse_quantity` with the kind the field's name implies (:func:`kind_of`)."""
    return parse_quantity(text, kind_of(field), field)


def _unit_scale(unit: str, kind: str) -> tuple[float, float] | None:
    """(multiplier, divisor) that turn a number in ``unit`` into SI base units of ``kind`` (None: not a unit of
    it)."""
    if not unit:
        return 1.0, 1.0
    if kind == "time":
        return TIME_UNITS_S.get(unit)
    pattern = {"bandwidth": _BANDWIDTH, "bytes": _BYTES, "flops": _FLOPS}.get(kind)
    found = pattern.match(unit) if pattern is not None else None
    if found is None:
        return None
    bits = kind != "flops" and found.group(2) in ("b", "bit", "bits")
    return PREFIXES[found.group(1)], float(BITS_PER_BYTE) if bits else 1.0
