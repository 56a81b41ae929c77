"""The base of every spec model (cluster, workload, card, plan, knobs): a boolean is no number.

pydantic's lax mode reads ``true`` as 1 in an integer field (pydantic docs, "Conversion Table": bool -> int in
Python and JSON lax mode), so ``num_machines: true`` in a cluster file, ``batch_size: true`` in a workload or
``--cluster-set num_machines=true`` simulated one machine or a batch of one without a word (2026-12-01, a new
user's pass); a float field's reading of the spec files refused it already
(:func:`simulator.overrides.file_values`). :class:`SpecModel` refuses a boolean, alone or inside a list, tuple or
mapping, in every number field whose type does not admit one (``bool`` or ``Any`` somewhere in it).
"""

from __future__ import annotations

import functools
from collections.abc import Hashable
from typing import Any, Literal, cast, get_args, get_origin

from pydantic import BaseModel, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError


class SpecModel(BaseModel):
    """A pydantic model whose number fields refuse booleans (module docstring)."""

    @model_validator(mode="before")
    @classmethod
    def _no_boolean_number(cls, data: Any) -> Any:
        """Refuse the first field of ``data`` (a mapping being validated) that holds a boolean its type does not
        admit, located at the field (a model-level validator: pydantic allows no field validator on the
        discriminator fields some specs have)."""
        if not isinstance(data, dict):
            return data
        for key, value in data.items():
            field = cls.model_fields.get(key) if isinstance(key, str) else None
            annotation = cast(Hashable, field.annotation) if field is not None else None
            if _holds_bool(value) and takes_numbers(annotation) and not admits_bool(annotation):
                raise ValidationError.from_exception_data(cls.__name__, [InitErrorDetails(
                    type=PydanticCustomError("bool_number", _message(value)),
                    loc=(key,), input=value)])
        return data


@functools.cache
def admits_bool(annotation: Any) -> bool:
    """Whether a field of ``annotation`` may hold a boolean: ``bool`` or ``Any`` in it, or a boolean literal, at
    any depth; or a nested model (its fields are its own validator's)."""
    if annotation is bool or annotation is Any or (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return True
    if get_origin(annotation) is Literal:
        return any(isinstance(a, bool) for a in get_args(annotation))
    return any(admits_bool(a) for a in get_args(annotation) if a is not Ellipsis)


@functools.cache
def takes_numbers(annotation: Any) -> bool:
    """Whether ``int`` or ``float`` is in ``annotation`` at any depth (not inside a nested model)."""
    if annotation is int or annotation is float:
        return True
    return any(takes_numbers(a) for a in get_args(annotation) if a is not Ellipsis)


def _holds_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return True
    if isinstance(value, (list, tuple)):
        return any(isinstance(v, bool) for v in value)
    if isinstance(value, dict):
        return any(isinstance(v, bool) for v in value.values())
    return False


def _message(value: Any) -> str:
    if isinstance(value, bool):
        return "a number, not a boolean"
    return f"numbers, not booleans ({_yaml_text(value)} holds one)"


def _yaml_text(value: Any) -> str:
    """``value`` as written in YAML (``[true, 10]``)."""
    return str(value).replace("True", "true").replace("False", "false")
