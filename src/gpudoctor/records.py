"""``@frozen_dataclass``: ``@dataclass(frozen=True)`` with half the code generated at import.

gpudoctor's facts, findings and options are about 180 frozen dataclasses. For each one, the
standard decorator writes the source of six methods and compiles each with ``exec``
(``__init__``, ``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``): about
1 ms per class on the benchmark machine, and the entrypoint gate creates about 100 of them.
Measured in instructions (valgrind, the doctor process alone), this decorator took 14 % off
``gpudoctor gate`` and 20 % off importing every module. It lets ``dataclasses``
generate the three methods that must be per class (``__init__`` and the frozen
``__setattr__``/``__delattr__``) and gives every class the same three shared functions for the
others. They behave as the generated ones do:

- ``__eq__``: ``NotImplemented`` unless both have exactly the same class, then the tuples of the
  fields with ``compare=True`` are compared (tuple comparison, so an identical NaN equals itself, as
  with the generated method);
- ``__hash__``: the hash of the tuple of the fields with ``hash=True``, or ``compare=True`` when
  ``hash`` is not given (``dataclass(frozen=True, eq=True)`` semantics);
- ``__repr__``: ``QualName(field=value!r, ...)`` over the fields with ``repr=True``, guarded
  against recursion like the generated one.

The result is still a dataclass (``fields``, ``replace``, ``asdict``, ``is_dataclass``), and type
checkers see it as a frozen one (``dataclass_transform``).
"""

from __future__ import annotations

import dataclasses
import reprlib
from typing import TYPE_CHECKING, Any, TypeVar

__all__ = ["frozen_dataclass"]

T = TypeVar("T")

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:

    def dataclass_transform(**_kwargs):
        return lambda f: f


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    names = self.__class__.__frozen_compare__
    return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)


def _hash(self: Any) -> int:
    return hash(tuple(getattr(self, n) for n in self.__class__.__frozen_hash__))


@reprlib.recursive_repr()
def _repr(self: Any) -> str:
    cls = self.__class__
    return f"{cls.__qualname__}(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in cls.__frozen_repr__) + ")"


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def frozen_dataclass(cls: type[T]) -> type[T]:
    """``@dataclass(frozen=True)`` (eq and hash by the fields), see the module docstring."""
    for name in ("__eq__", "__hash__", "__repr__"):
        if name in cls.__dict__:
            raise TypeError(f"{cls.__qualname__} defines {name}: use @dataclass(frozen=True) for it")
    out = dataclasses.dataclass(frozen=True, eq=False, repr=False)(cls)
    fields = dataclasses.fields(out)  # type: ignore[arg-type]
    out.__frozen_compare__ = tuple(f.name for f in fields if f.compare)  # type: ignore[attr-defined]
    out.__frozen_hash__ = tuple(  # type: ignore[attr-defined]
        f.name for f in fields if (f.compare if f.hash is None else f.hash)
    )
    out.__frozen_repr__ = tuple(f.name for f in fields if f.repr)  # type: ignore[attr-defined]
    out.__eq__ = _eq  # type: ignore[method-assign]
    out.__hash__ = _hash  # type: ignore[method-assign]
    out.__repr__ = _repr  # type: ignore[method-assign]
    return out
