""" "Did you mean": the keys a strict policy model accepts where a validation error found an unknown one.

A policy model forbids extra keys (``extra="forbid"``), so a typo such as ``identifer_args`` is an
error.  :func:`did_you_mean` walks the model along the error's location (through optional values,
unions, lists/tuples and ``dict[str, Model]`` mappings) to the model that owns the unknown key and
returns the close matches among its field names (:func:`difflib.get_close_matches`).
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel


def _models(annotation: Any) -> list[Any]:
    """The types an annotation may hold (``X | None`` and unions unpacked)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return [t for arg in typing.get_args(annotation) for t in _models(arg)]
    if origin is typing.Annotated:
        return _models(typing.get_args(annotation)[0])
    return [annotation]


def _step(annotation: Any, key: str) -> list[Any]:
    """What ``annotation`` holds under ``key``: a model's field, a mapping's value or a sequence's item."""
    out: list[Any] = []
    for kind in _models(annotation):
        origin = typing.get_origin(kind)
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            fields = dict(kind.model_fields)
            fields.update({f.alias: f for f in kind.model_fields.values() if f.alias})
            if key in fields:
                out.append(fields[key].annotation)
        elif origin in (dict, Mapping):
            out.append(typing.get_args(kind)[-1])
        elif origin in (list, tuple, Sequence) and key.isdigit():
            args = [a for a in typing.get_args(kind) if a is not Ellipsis]
            out.extend(args[:1])
    return out


def accepted_keys(model: type[BaseModel], loc: Sequence[str]) -> list[str]:
    """The keys accepted next to the last key of ``loc`` (the model that owns it), or [] when unknown."""
    current: list[Any] = [model]
    for key in loc[:-1]:
        current = [t for annotation in current for t in _step(annotation, key)]
    keys: list[str] = []
    for annotation in current:
        for kind in _models(annotation):
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                keys += [f.alias or name for name, f in kind.model_fields.items()]
    return sorted(set(keys))


def did_you_mean(model: type[BaseModel], loc: Sequence[str]) -> str:
    """``"; did you mean 'x'?"`` for an unknown key at ``loc`` with a close accepted key, else ``""``."""
    if not loc:
        return ""
    close = difflib.get_close_matches(str(loc[-1]), accepted_keys(model, loc), n=2, cutoff=0.6)
    return "; did you mean " + " or ".join(repr(c) for c in close) + "?" if close else ""


__all__ = ["accepted_keys", "did_you_mean"]
