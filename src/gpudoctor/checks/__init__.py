"""Built-in checks, one module each, registered as ``gpudoctor.checks`` entry points.

Helpers for check authors (built-in or third-party):

- :func:`require` returns a facts domain or raises :class:`SkipCheck` with the
  reason it is unavailable; the engine turns that into a ``skip`` finding.
"""

from __future__ import annotations

from typing import TypeVar

from gpudoctor.facts import Facts, Unavailable

__all__ = ["SkipCheck", "require"]

D = TypeVar("D")


class SkipCheck(Exception):
    """Raised by a check's ``evaluate`` when it does not apply; the message is the reason."""


def require(facts: Facts, cls: type[D]) -> D:
    """The domain ``cls`` from ``facts``, or raise :class:`SkipCheck` if Unavailable."""
    value = facts.of(cls)
    if isinstance(value, Unavailable):
        raise SkipCheck(value.reason)
    return value
