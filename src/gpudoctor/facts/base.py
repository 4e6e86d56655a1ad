"""Facts plumbing: ``Unavailable``, the domain registry, JSON (de)serialisation
and JSON Schema generation from the domain dataclasses themselves.

A *domain* is one frozen dataclass decorated with :func:`domain`, e.g.
``@domain("nvidia") class NvidiaFacts``. Field types may be ``str``, ``int``,
``float``, ``bool``, ``None``, enums, nested frozen dataclasses,
``tuple[X, ...]``, ``dict[str, X]``, and unions of these with
:class:`Unavailable` or ``None``. Those rules are what makes both the JSON
round trip and the published schema exact.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, Union

from gpudoctor.records import frozen_dataclass

__all__ = [
    "FactsDecodeError",
    "Unavailable",
    "domain",
    "from_jsonable",
    "registered_domains",
    "schema_for",
    "to_jsonable",
]

T = TypeVar("T")


@frozen_dataclass
class Unavailable:
    """A fact that could not be gathered, with the reason in operator terms.

    Falsy, so ``if facts.nvidia.version:`` reads naturally; never ``None`` and
    never a placeholder string such as ``"N/A"``. JSON form:
    ``{"unavailable": "<reason>"}``.
    """

    reason: str

    def __bool__(self) -> bool:
        return False

    def __str__(self) -> str:
        return f"unavailable: {self.reason}"


class FactsDecodeError(ValueError):
    """A facts document does not match the schema; the message names the path."""


_DOMAINS: dict[str, type] = {}


def domain(name: str) -> Callable[[type[T]], type[T]]:
    """Class decorator: register a frozen dataclass as the facts of domain ``name``.

    Raises ``ValueError`` if two classes claim the same name.
    """

    def register(cls: type[T]) -> type[T]:
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"{cls.__name__} must be a dataclass")
        existing = _DOMAINS.get(name)
        if existing is not None and existing.__qualname__ != cls.__qualname__:
            raise ValueError(
                f"facts domain {name!r} claimed by {existing.__module__}.{existing.__qualname__} "
                f"and {cls.__module__}.{cls.__qualname__}"
            )
        _DOMAINS[name] = cls
        cls.DOMAIN = name  # type: ignore[attr-defined]
        return cls

    return register


def registered_domains() -> Mapping[str, type]:
    """Domain name -> dataclass, for every registered domain (import order)."""
    return dict(_DOMAINS)


# --------------------------------------------------------------------------- encode


def to_jsonable(value: Any) -> Any:
    """Convert facts values (dataclasses, tuples, enums, Unavailable) to JSON types."""
    if isinstance(value, Unavailable):
        return {"unavailable": value.reason}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"cannot serialise {type(value).__name__} in facts")


# --------------------------------------------------------------------------- decode

_hints_cache: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    hints = _hints_cache.get(cls)
    if hints is None:
        hints = typing.get_type_hints(cls)
        _hints_cache[cls] = hints
    return hints


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) is Union or isinstance(tp, types.UnionType)


def from_jsonable(tp: Any, data: Any, path: str = "$") -> Any:
    """Build a value of type ``tp`` from JSON ``data``.

    Unknown keys in objects are ignored (forward compatibility); missing keys
    take the field default, or raise. Raises :class:`FactsDecodeError` naming
    the JSON path of the first mismatch.
    """
    if tp is Any:
        return data
    if tp is type(None) or tp is None:
        if data is not None:
            raise FactsDecodeError(f"{path}: expected null")
        return None
    if _is_union(tp):
        args = typing.get_args(tp)
        if isinstance(data, dict) and set(data) == {"unavailable"} and Unavailable in args:
            return Unavailable(str(data["unavailable"]))
        if data is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg in (Unavailable, type(None)):
                continue
            try:
                return from_jsonable(arg, data, path)
            except FactsDecodeError as exc:
                errors.append(str(exc))
        raise FactsDecodeError(errors[0] if len(errors) == 1 else f"{path}: matches none of {args}")
    if tp is Unavailable:
        if isinstance(data, dict) and "unavailable" in data:
            return Unavailable(str(data["unavailable"]))
        raise FactsDecodeError(f'{path}: expected {{"unavailable": reason}}')
    origin = typing.get_origin(tp)
    if origin in (tuple, list):
        if not isinstance(data, list):
            raise FactsDecodeError(f"{path}: expected an array")
        args = typing.get_args(tp)
        item = args[0] if args else Any
        items = [from_jsonable(item, v, f"{path}[{i}]") for i, v in enumerate(data)]
        return tuple(items) if origin is tuple else items
    if origin in (dict, Mapping) or (origin is not None and origin is getattr(typing, "Mapping", None)):
        if not isinstance(data, dict):
            raise FactsDecodeError(f"{path}: expected an object")
        args = typing.get_args(tp)
        val_tp = args[1] if len(args) == 2 else Any
        return {str(k): from_jsonable(val_tp, v, f"{path}.{k}") for k, v in data.items()}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(data)
        except ValueError:
            raise FactsDecodeError(f"{path}: {data!r} is not one of {[m.value for m in tp]}") from None
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(data, dict):
            raise FactsDecodeError(f"{path}: expected an object for {tp.__name__}")
        hints = _hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if not f.init:
                continue
            if f.name in data:
                kwargs[f.name] = from_jsonable(hints[f.name], data[f.name], f"{path}.{f.name}")
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise FactsDecodeError(f"{path}: missing required key {f.name!r}")
        return tp(**kwargs)
    if tp is float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise FactsDecodeError(f"{path}: expected a number")
        return float(data)
    if tp is int:
        if isinstance(data, bool) or not isinstance(data, int):
            raise FactsDecodeError(f"{path}: expected an integer")
        return data
    if tp is bool:
        if not isinstance(data, bool):
            raise FactsDecodeError(f"{path}: expected true or false")
        return data
    if tp is str:
        if not isinstance(data, str):
            raise FactsDecodeError(f"{path}: expected a string")
        return data
    raise TypeError(f"unsupported facts type {tp!r} at {path}")


# --------------------------------------------------------------------------- schema

UNAVAILABLE_SCHEMA = {
    "type": "object",
    "description": "A fact that could not be gathered, with the reason.",
    "properties": {"unavailable": {"type": "string"}},
    "required": ["unavailable"],
    "additionalProperties": False,
}


def schema_for(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    """JSON Schema (draft 2020-12) for type ``tp``; dataclasses go into ``defs``."""
    if tp is Any:
        return {}
    if tp is type(None) or tp is None:
        return {"type": "null"}
    if tp is Unavailable:
        defs.setdefault("Unavailable", UNAVAILABLE_SCHEMA)
        return {"$ref": "#/$defs/Unavailable"}
    if _is_union(tp):
        return {"anyOf": [schema_for(a, defs) for a in typing.get_args(tp)]}
    origin = typing.get_origin(tp)
    if origin in (tuple, list):
        args = typing.get_args(tp)
        return {"type": "array", "items": schema_for(args[0] if args else Any, defs)}
    if origin in (dict, Mapping) or (origin is not None and origin is getattr(typing, "Mapping", None)):
        args = typing.get_args(tp)
        return {"type": "object", "additionalProperties": schema_for(args[1] if len(args) == 2 else Any, defs)}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [m.value for m in tp]}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        name = tp.__name__
        if name not in defs:
            defs[name] = {}  # placeholder against recursion
            hints = _hints(tp)
            props = {}
            required = []
            for f in dataclasses.fields(tp):
                props[f.name] = schema_for(hints[f.name], defs)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    required.append(f.name)
            doc = (tp.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
            defs[name] = {"type": "object", "description": doc, "properties": props, "required": required}
        return {"$ref": f"#/$defs/{name}"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is str:
        return {"type": "string"}
    raise TypeError(f"unsupported facts type {tp!r}")
