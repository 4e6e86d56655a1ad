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
import os
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from typing import Any

from gpudoctor.records import frozen_dataclass
from gpudoctor.system import System

__all__ = ["CollectContext", "CollectOptions", "Collector", "all_collectors", "collectors_for", "find_tool"]

#: ``PATH`` when the environment has none (a login shell's default on Debian/Ubuntu)
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@frozen_dataclass
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
        probe_level: how target interpreters are probed: ``full`` (imports torch) or
            ``light`` (metadata, version files, CUDA driver API; see
            :mod:`gpudoctor.probe`). :func:`gpudoctor.engine.run` lowers it to the
            cheapest level the selected checks accept unless ``probe_level_fixed``.
        probe_level_fixed: keep ``probe_level`` as given (``gate --deep``).
        extra: plug-in/feature options by name (e.g. ``catalogue``,
            ``rank_mirrors``), so new features need no new fields here.
    """

    pythons: tuple[str, ...] = ()
    offline: bool = False
    deep: bool = False
    probe_timeout_s: float = 60.0
    kernels: bool = True
    probe_level: str = "full"
    probe_level_fixed: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)


@frozen_dataclass
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


@frozen_dataclass
class Collector:
    """Gathers one facts domain.

    Attributes:
        domain: the domain name it fills (see ``gpudoctor.facts``).
        collect: ``(CollectContext) -> dataclass | Unavailable``.
        requires: domains that must be collected first (passed in ``ctx.facts``).
        timeout_s: the engine gives up on it after this many seconds and
            records the domain as Unavailable (the thread is abandoned; every
            command it runs has its own shorter timeout). Time spent waiting
            for a required domain does not count.
        runs_probes: it runs target probes, so its budget is at least
            ``--probe-timeout`` plus 30 s (see ``engine.collector_budget_s``).
    """

    domain: str
    collect: Callable[[CollectContext], Any]
    requires: tuple[str, ...] = ()
    timeout_s: float = 20.0
    runs_probes: bool = False


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


def _declared_domains(name: str) -> tuple[str, ...]:
    """Domain names a collector module's source mentions as ``domain="..."`` (read as text, not imported)."""
    import re

    try:
        with open(os.path.join(__path__[0], f"{name}.py"), encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError):
        return ()
    return tuple(re.findall(r"""domain\s*=\s*["']([A-Za-z0-9_]+)["']""", text))


def collectors_for(domains: Sequence[str], provided: Mapping[str, Collector] | None = None) -> dict[str, Collector]:
    """Domain -> collector for ``domains`` and what they require, importing only the modules that
    declare them (found by reading each module's source for ``domain="..."``), so a small
    selection (the entrypoint gate) does not import every collector and its libraries.
    ``provided`` collectors stand in for their domains: their modules are not imported for them
    (the gate's stand-ins for domains it leaves out). Falls back to :func:`all_collectors` (with
    ``provided`` on top) when a domain is not found that way (a collector built dynamically, or
    none). Raises ``RuntimeError`` like :func:`all_collectors`.
    """
    provided = dict(provided or {})
    modules = [m.name for m in pkgutil.iter_modules(__path__)]
    index: dict[str, list[str]] = {}
    for name in modules:
        for dom in _declared_domains(name):
            index.setdefault(dom, []).append(name)
    found: dict[str, Collector] = dict(provided)
    loaded = set()
    todo = list(domains)
    while todo:
        dom = todo.pop()
        if dom in found:
            continue
        if dom not in index:
            return {**all_collectors(), **provided}
        for name in index[dom]:
            if name in loaded:
                continue
            loaded.add(name)
            module = importlib.import_module(f"{__name__}.{name}")
            collectors = tuple(getattr(module, "COLLECTORS", ()))
            if getattr(module, "COLLECTOR", None) is not None:
                collectors += (module.COLLECTOR,)
            for collector in collectors:
                if collector.domain in provided:
                    continue
                if collector.domain in found:
                    raise RuntimeError(f"two collectors for domain {collector.domain!r}: {name}")
                found[collector.domain] = collector
        if dom not in found:
            return {**all_collectors(), **provided}
        todo.extend(r for r in found[dom].requires if r not in found)
    return found


def find_tool(files: Any, env: Mapping[str, str], name: str, extra_dirs: Sequence[str] = ()) -> str:
    """Path of the file ``name`` inside the root: the absolute ``$PATH`` entries (:data:`DEFAULT_PATH`
    when unset) first, then ``extra_dirs`` (where the tool's installer puts it); "" when none has it."""
    dirs = [d for d in (env.get("PATH") or DEFAULT_PATH).split(":") if d.startswith("/")]
    for d in dict.fromkeys([*dirs, *extra_dirs]):
        if files.is_file(f"{d}/{name}"):
            return f"{d}/{name}"
    return ""
