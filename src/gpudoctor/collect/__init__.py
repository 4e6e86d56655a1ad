"""Collectors: the only code that looks at the machine, one module per domain.

Each module here defines ``COLLECTOR = Collector(domain=..., collect=...)``
(or ``COLLECTORS = (...)`` for several related domains);
:func:`all_collectors` discovers them, so adding a module is all it takes
(no second list to keep in step). A collector returns the domain's frozen
dataclass (or an :class:`~gpudoctor.facts.Unavailable`); an exception is
caught by the engine, which records an ``error`` finding and makes the domain
Unavailable.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpudoctor.system import System

__all__ = ["Collector", "CollectOptions", "CollectContext", "all_collectors"]


@dataclass(frozen=True)
class CollectOptions:
    """User choices that shape collection.

    Attributes:
        pythons: extra target interpreters (``--python PATH``, repeatable).
            When given, they replace the current interpreter as targets.
        offline: no network at all (``--offline``).
        deep: launch Jupyter kernels for real (``--deep``).
        probe_timeout_s: per-target probe timeout, seconds.
        kernels: also find and probe Jupyter kernels (the entrypoint gate
            turns this off: a training container's health does not depend on them).
        extra: plug-in/feature options by name (e.g. ``catalogue``,
            ``rank_mirrors``), so new features need no new fields here.
    """

    pythons: tuple[str, ...] = ()
    offline: bool = False
    deep: bool = False
    probe_timeout_s: float = 60.0
    kernels: bool = True
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CollectContext:
    """What a collector receives.

    Attributes:
        system: the machine (runner, rooted files, env, clock).
        options: the user's choices.
        facts: the domains this collector declared in ``requires`` (name ->
            dataclass or Unavailable). Collectors start together; reading a
            domain here waits until it is collected, so do independent work
            (start a probe, say) before the first read.
    """

    system: System
    options: CollectOptions
    facts: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Collector:
    """Gathers one facts domain.

    Attributes:
        domain: the domain name it fills (see ``gpudoctor.facts``).
        collect: ``(CollectContext) -> dataclass | Unavailable``.
        requires: domains that must be collected first (passed in ``ctx.facts``).
        timeout_s: the engine gives up on it after this many seconds and
            records the domain as Unavailable (the thread is abandoned; every
            command it runs has its own shorter timeout).
    """

    domain: str
    collect: Callable[[CollectContext], Any]
    requires: tuple[str, ...] = ()
    timeout_s: float = 20.0


def all_collectors() -> dict[str, Collector]:
    """Domain -> collector for every module in this package defining ``COLLECTOR(S)``.

    Raises ``RuntimeError`` if two modules collect the same domain.
    """
    found: dict[str, Collector] = {}
    for mod in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{mod.name}")
        collectors = tuple(getattr(module, "COLLECTORS", ()))
        if getattr(module, "COLLECTOR", None) is not None:
            collectors += (module.COLLECTOR,)
        for collector in collectors:
            if collector.domain in found:
                raise RuntimeError(f"two collectors for domain {collector.domain!r}: {mod.name}")
            found[collector.domain] = collector
    return found
