"""Specs a caller built or edited in Python, validated before they are used.

pydantic's ``model_copy(update=...)`` does not validate (pydantic docs, "Model methods and properties":
``model_copy``), so ``cluster.model_copy(update={"gpus_per_machine": 0})`` or a bandwidth given as ``"10Gbit/s"``
reached the simulator as they were and failed inside it with a ZeroDivisionError or a TypeError, or priced an epoch
at 0 s (2026-12-01, a new user's pass); a misspelt key was kept aside and ignored. :func:`checked` validates such a
spec again, from every attribute it holds, nested specs and misspelt keys included, once per object: a spec this
module validated, or one the loaders built, passes at the cost of a dictionary look-up (a tuner asks for its
cluster at every trial).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

_VALID: weakref.WeakValueDictionary[int, BaseModel] = weakref.WeakValueDictionary()


def mark_valid(spec: M) -> M:
    """Record ``spec`` as validated (the loaders call it on what they build) and return it."""
    _VALID[id(spec)] = spec
    return spec


def raw_fields(model: BaseModel) -> dict[str, Any]:
    """Every attribute a model instance holds, nested models as mappings too: its fields, and keys a
    ``model_copy(update=...)`` added that are no field."""
    return {k: raw_fields(v) if isinstance(v, BaseModel) else v for k, v in vars(model).items()}


def checked(spec: M, validate: Callable[[dict[str, Any]], M]) -> M:
    """``spec`` when it is known valid (:func:`mark_valid`), else ``validate`` of its :func:`raw_fields` (a loader's
    ``*_from_dict``, which raises a one-line SpecError naming the field), recorded as valid."""
    if _VALID.get(id(spec)) is spec:
        return spec
    return mark_valid(validate(raw_fields(spec)))
