"""The base classes of the contract's models: immutable, camelCase on the wire, key order kept."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, TypeAlias

from pydantic import (
    BaseModel,
    ConfigDict,
    ModelWrapValidatorHandler,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel

from memstore import jsjson
from memstore._trusted import private_state

JsonDict: TypeAlias = dict[str, Any]


class _Contract(BaseModel):
    """Immutable, camelCase on the wire, snake_case in Python."""

    model_config = ConfigDict(
        frozen=True,
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


class _Wire(_Contract):
    """A wire object that keeps unknown keys and the key order it was parsed with.

    A dict is read by its JSON names only (`callId`; a `call_id` key is an unknown key, kept),
    as a file is; Python names are for keyword construction (`ToolResultBlock(call_id=...)`).
    """

    model_config = ConfigDict(extra="allow", validate_by_name=False)

    @model_validator(mode="wrap")
    @classmethod
    def _remember_key_order(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        model = handler(data)
        if (type(data) is dict or isinstance(data, Mapping)) and isinstance(model, _Wire):
            implied = tuple(key for key in cls._always_present() if key not in data)
            private_state(model)["key_order"] = (*implied, *data) if implied else tuple(data)
        return model

    def __init__(self, /, **data: Any) -> None:
        self.__pydantic_validator__.validate_python(data, self_instance=self, by_name=True)
        private_state(self).pop("key_order", None)  # built in Python: declaration order

    # Validation from a dict must not run this __init__ as well: pydantic calls a model's own
    # __init__ from inside validation unless it is marked as a base one.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    def _key_order(self) -> tuple[str, ...] | None:
        private = self.__pydantic_private__
        return private.get("key_order") if private else None

    def _wire_text(self) -> str:
        return jsjson.dumps(self.model_dump())

    def __eq__(self, other: object) -> bool:
        """Equal when of the same type with the same JSON text (so key order counts)."""
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, _Wire)
        return self._wire_text() == other._wire_text()

    def __hash__(self) -> int:
        return hash(self._wire_text())

    @model_serializer(mode="wrap")
    def _serialize_in_key_order(self, handler: SerializerFunctionWrapHandler) -> JsonDict:
        dumped: JsonDict = handler(self)
        order = self._key_order()
        if order is not None:
            # Parsed from a dict: exactly its keys.
            ordered = {key: dumped[key] for key in order if key in dumped}
            if len(ordered) == len(order):
                return ordered
        return self._present_in_order(dumped, order or tuple(dumped))

    def _present_in_order(self, dumped: JsonDict, order: tuple[str, ...]) -> JsonDict:
        """The keys that were set (or are always emitted), in `order`, then any others."""
        wire_names = self._wire_names()
        present = {wire_names.get(name, name) for name in self.model_fields_set}
        present.update(self.__pydantic_extra__ or ())
        present.update(self._always_present())
        ordered = {key: dumped[key] for key in order if key in present and key in dumped}
        for key, value in dumped.items():
            if key in present and key not in ordered:
                ordered[key] = value
        return ordered

    @classmethod
    @functools.cache
    def _wire_names(cls) -> dict[str, str]:
        """Python field name -> JSON key."""
        return {name: field.alias or name for name, field in cls.model_fields.items()}

    @classmethod
    def _always_present(cls) -> tuple[str, ...]:
        """Keys emitted even when they were not set explicitly (defaults such as `kind`)."""
        return ()
