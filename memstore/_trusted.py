"""Trusted construction: models of data memstore validated when it stored it, built slot by slot.

This is the one place that knows pydantic's internals (`object.__new__`, the slots of
`BaseModel`, shared fields-sets). `tests/test_trusted.py` builds every model made here both ways
and compares them, so a pydantic release that changes those internals fails that test, naming
what differs, instead of making corrupt objects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar

from pydantic import BaseModel
from pydantic.fields import FieldInfo

__all__ = [
    "NO_EXTRA",
    "Layout",
    "build",
    "build_plain",
    "layout_of",
    "new_model",
    "private_state",
    "set_extra",
    "set_fields_set",
    "set_private",
    "set_values",
    "split_values",
]

_M = TypeVar("_M", bound=BaseModel)


class _WireModel(Protocol):
    """What a layout needs of a model class (`memstore._wire._Wire`), named here so that this
    module does not import the one that imports it."""

    __pydantic_fields__: ClassVar[dict[str, FieldInfo]]  # what `model_fields` returns

    @classmethod
    def _wire_names(cls) -> dict[str, str]: ...

    @classmethod
    def _always_present(cls) -> tuple[str, ...]: ...


_setattr = object.__setattr__  # sets a frozen model's slots, as pydantic itself does
_new_object = object.__new__


def _slot_setter(name: str) -> Callable[[object, Any], None]:
    """The setter of one of BaseModel's own slots: the quickest way to fill a new model."""
    setter: Callable[[object, Any], None] = BaseModel.__dict__[name].__set__
    return setter


_set_fields_set = _slot_setter("__pydantic_fields_set__")
_set_extra = _slot_setter("__pydantic_extra__")
_set_private = _slot_setter("__pydantic_private__")
# What `build` does, step by step, for a loop that builds a whole session's models inline
# (`Turn._from_stored_texts`: a call per model cost a tenth of a long load).
new_model = _new_object
set_values = _slot_setter("__dict__")
set_fields_set, set_extra, set_private = _set_fields_set, _set_extra, _set_private


def private_state(model: BaseModel) -> dict[str, Any]:
    """A model's private state, set directly in pydantic's per-instance dict.

    Declaring a PrivateAttr would cost an initialization hook on every object, which doubled the
    time to parse a turn.
    """
    private = model.__pydantic_private__
    if private is None:
        private = {}
        _setattr(model, "__pydantic_private__", private)
    return private


@dataclass(frozen=True)
class Layout:
    """How `build` makes one wire class from data with one tuple of keys."""

    same: bool  # the keys are exactly the fields' names: the data can be the model's dict
    no_extra: bool  # every key names a field (by its alias: `callId`)
    names: tuple[str | None, ...]  # per key of the data: its field, or None for an extra key
    defaults: dict[str, Any]
    fields_set: set[str]
    private: dict[str, Any]


_LAYOUTS: dict[tuple[type[Any], tuple[str, ...]], Layout] = {}
# Distinct (class, key tuple) pairs remembered; rarer shapes are worked out anew each time.
_MAX_LAYOUTS = 4096


def layout_of(cls: type[_WireModel], keys: tuple[str, ...]) -> Layout | None:
    """How to build `cls` from data with `keys` (None: a required key is missing), worked out
    once per class and key tuple. Keys are wire names, as validation reads a dict."""
    found = _LAYOUTS.get((cls, keys))
    if found is None:
        found = _work_out_layout(cls, keys)
        if found is not None and len(_LAYOUTS) < _MAX_LAYOUTS:
            _LAYOUTS[cls, keys] = found
    return found


def _work_out_layout(cls: type[_WireModel], keys: tuple[str, ...]) -> Layout | None:
    """Map each key to its field (or to the extras), and find what is missing."""
    by_key = {key: name for name, key in cls._wire_names().items()}
    names = tuple(by_key.get(key) for key in keys)
    given = {name for name in names if name is not None}
    fields = cls.__pydantic_fields__.items()
    if any(field.is_required() and name not in given for name, field in fields):
        return None
    implied = tuple(key for key in cls._always_present() if key not in keys)
    return Layout(
        same=names == keys and len(given) == len(cls.__pydantic_fields__),
        no_extra=None not in names,
        names=names,
        defaults={name: field.default for name, field in fields if name not in given},
        fields_set=given | {key for key, name in zip(keys, names, strict=True) if name is None},
        private={"key_order": (*implied, *keys)},
    )


NO_EXTRA: dict[str, Any] = {}
"""The extras of every model without any, shared: models are frozen, and pydantic copies a
model's extras before changing a copy's (a million tiny blocks spared a dict each)."""


def build(cls: type[_M], data: dict[str, Any], layout: Layout, private: dict[str, Any]) -> _M:
    """The model of `data`, whose keys `layout` describes, set up slot by slot.

    Objects of one layout share its fields-set, and its private state unless `private` is
    their own; neither is ever mutated in place. `data` is taken over, not copied.
    """
    model = _new_object(cls)
    if layout.same:
        _setattr(model, "__dict__", data)
        _set_extra(model, NO_EXTRA)
    else:
        values, extra = split_values(data, layout)
        _setattr(model, "__dict__", values)
        _set_extra(model, extra)
    _set_fields_set(model, layout.fields_set)
    _set_private(model, private)
    return model


def split_values(data: dict[str, Any], layout: Layout) -> tuple[dict[str, Any], dict[str, Any]]:
    """The fields' values (defaults for those missing) and the extras of `data`, whose keys
    `layout` describes and are not exactly the fields' names."""
    values = layout.defaults.copy()
    if layout.no_extra:  # the common case (a tool result's `callId`), without a Python loop
        names = zip(layout.names, data.values())  # noqa: B905 (same keys)
        values.update(names)  # type: ignore[arg-type]
        return values, NO_EXTRA
    extra = {}
    for (key, value), name in zip(data.items(), layout.names):  # noqa: B905 (same keys)
        if name is None:
            extra[key] = value
        else:
            values[name] = value
    return values, extra


def all_fields(cls: type[BaseModel]) -> set[str]:
    """A fields-set naming every field of `cls`, to share among objects (never mutated)."""
    return set(cls.model_fields)


def build_plain(cls: type[_M], values: dict[str, Any], fields_set: Iterable[str]) -> _M:
    """A model without extras or private state (`SessionNode`) from values already checked;
    `fields_set` is shared, as `all_fields` gives it."""
    model = _new_object(cls)
    _setattr(model, "__dict__", values)
    _set_fields_set(model, fields_set)
    _set_extra(model, None)
    _set_private(model, None)
    return model
