"""Plug-in registry: checks and fixes found through entry points.

Groups: ``gpudoctor.checks`` and ``gpudoctor.fixes``. The entry-point name is
the id; the object it points at is a :class:`~gpudoctor.model.Check` (or
:class:`~gpudoctor.model.Fix`) with the same id. gpudoctor's own checks are
registered in its ``pyproject.toml`` exactly like a third party's.

A plug-in that fails to import, points at the wrong kind of object, or
claims an id already taken does not stop the others: it becomes an ``error``
finding (check id ``gpudoctor.plugins``) naming the distribution(s).
"""

from __future__ import annotations

import functools
import sys
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from gpudoctor import catalogue, entrypoints
from gpudoctor.model import CHECK_ID_RE, Check, Finding, Fix, Status

__all__ = ["CHECK_GROUP", "FIX_GROUP", "PLUGIN_CHECK_ID", "Registry", "load_registry"]

CHECK_GROUP = "gpudoctor.checks"
FIX_GROUP = "gpudoctor.fixes"
#: check id used for findings about broken or conflicting plug-ins
PLUGIN_CHECK_ID = "gpudoctor.plugins"
_SELF = "gpudoctor"


def sort_key(id_: str) -> tuple[int, int, str]:
    """Stable order for checks: the catalogue's ``order`` for built-ins, a plug-in after its family's
    built-ins (:func:`gpudoctor.catalogue.sort_key`)."""
    return catalogue.sort_key(id_)


def catalogued(check: Check) -> Check:
    """A built-in check with its catalogue row's area, ``gate`` tag, other tags and probe level
    (``data/checks.toml``); a check without a row as it is."""
    r = catalogue.row(check.id)
    if r is None:
        return check
    tags = tuple(dict.fromkeys((*check.tags, *r.tags, *(("gate",) if r.gate else ()))))
    return replace(check, area=check.area or r.area, tags=tags, probe_level=r.probe)


@dataclass
class Registry:
    """Loaded checks and fixes in a stable order (:func:`sort_key`), with their
    providers and any loading problems."""

    checks: dict[str, Check] = field(default_factory=dict)
    fixes: dict[str, Fix] = field(default_factory=dict)
    providers: dict[str, str] = field(default_factory=dict)
    problems: list[Finding] = field(default_factory=list)
    #: every registered check id, including those a ``check_filter`` left unloaded
    check_ids: list[str] = field(default_factory=list)

    def provider(self, id_: str, kind: str = "check") -> str:
        return self.providers.get(f"{kind}:{id_}", "?")

    def fixes_for(self, check_id: str) -> list[Fix]:
        return [f for f in self.fixes.values() if check_id in f.addresses]

    def unloaded(self) -> dict[str, str]:
        """Check ids that are registered but were not loaded (a broken or conflicting plug-in) ->
        the problem's summary, for a selection that names one."""
        return {
            str(p.evidence["id"]): p.summary
            for p in self.problems
            if p.evidence.get("id") and p.evidence["id"] not in self.checks
        }


_PROVIDERS: dict[str, str] = {}


def _provider_name(ep: entrypoints.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "unknown distribution"
    key = str(getattr(dist, "_path", "")) or None
    if key is None or key not in _PROVIDERS:
        name = f"{getattr(dist, 'name', None) or dist.metadata.get('Name')} {dist.version}"
        if key is None:
            return name
        _PROVIDERS[key] = name
    return _PROVIDERS[key]


def _entry_points(group: str) -> list[entrypoints.EntryPoint]:
    """The group's entry points, found once per process and import path (the headline's helper
    checks load the registry a second time in the gate: it must not scan every distribution again)."""
    return list(_scan(group, tuple(sys.path)))


@functools.lru_cache(maxsize=8)
def _scan(group: str, path: tuple[str, ...]) -> tuple[entrypoints.EntryPoint, ...]:
    eps = entrypoints.entry_points(group, path)
    seen = set()
    unique = []
    for ep in eps:  # an editable install can list the same entry point twice
        key = (ep.name, ep.value, _provider_name(ep))
        if key not in seen:
            seen.add(key)
            unique.append(ep)
    return tuple(unique)


class PluginTimeout(Exception):
    """A plug-in's import did not finish within the check budget."""


def _load_plugin(ep: Any) -> Any:
    """``ep.load()`` for another distribution's entry point: contained (:mod:`gpudoctor.plugin_guard`)
    and bounded by the check budget (``GPUDOCTOR_CHECK_TIMEOUT_S``, default 10 s)."""
    from gpudoctor.inputs import check_timeout_from_env
    from gpudoctor.plugin_guard import guarded, run_with_timeout

    try:
        budget = check_timeout_from_env()
    except ValueError:
        budget = 10.0
    with guarded():
        kind, value = run_with_timeout(ep.load, budget)
    if kind == "timeout":
        raise PluginTimeout(f"importing it did not finish within {budget:g} s; it was abandoned")
    if kind == "raised":
        raise value[0]
    return value


def load_registry(
    check_eps: Iterable | None = None,
    fix_eps: Iterable | None = None,
    load_fixes: bool = True,
    check_filter: Callable[[str, bool], bool] | None = None,
) -> Registry:
    """Load every check and fix plug-in.

    ``check_eps``/``fix_eps`` default to the installed entry points; tests pass
    their own objects with ``name``, ``value``, ``load()`` and ``dist``.
    ``load_fixes=False`` leaves the fixes out; ``check_filter(id, is_own)`` returning
    False leaves that check unimported (its id still lands in ``check_ids``): the
    entrypoint gate imports only the checks it may run.
    Never raises for a plug-in's fault; see :attr:`Registry.problems`.
    """
    reg = Registry()
    for kind, group, eps, expected, target in (
        ("check", CHECK_GROUP, check_eps, Check, reg.checks),
        ("fix", FIX_GROUP, fix_eps, Fix, reg.fixes),
    ):
        if kind == "fix" and not load_fixes:
            continue
        entries = list(eps) if eps is not None else _entry_points(group)
        own = [ep for ep in entries if _provider_name(ep).split(" ")[0] == _SELF]
        others = sorted((ep for ep in entries if ep not in own), key=lambda ep: ep.name)
        for ep in own + others:
            if kind == "check":
                if ep.name not in reg.check_ids:
                    reg.check_ids.append(ep.name)
                if check_filter is not None and not check_filter(ep.name, ep in own):
                    continue
            provider = _provider_name(ep)
            key = f"{kind}:{ep.name}"
            if ep.name in target:
                reg.problems.append(
                    Finding(
                        check=PLUGIN_CHECK_ID,
                        status=Status.ERROR,
                        summary=f"{kind} id {ep.name!r} is claimed twice: by {reg.providers[key]} and by {provider}; "
                        f"the second was refused",
                        explanation=(
                            f"Two installed distributions register the {kind} `{ep.name}` "
                            f"(entry-point group `{group}`). Uninstall or rename one of them: "
                            f"`{reg.providers[key]}` was kept, `{provider}` ({ep.value}) refused."
                        ),
                        evidence={"id": ep.name, "kept": reg.providers[key], "refused": provider, "value": ep.value},
                    )
                )
                continue
            try:
                obj = ep.load() if ep in own else _load_plugin(ep)
            except (Exception, SystemExit, KeyboardInterrupt) as exc:  # a broken plug-in must not break the doctor
                from gpudoctor import signals

                if isinstance(exc, KeyboardInterrupt) and signals.received() is not None:
                    raise  # a real Ctrl-C/SIGTERM while loading, not the plug-in's own doing
                reg.problems.append(
                    Finding(
                        check=PLUGIN_CHECK_ID,
                        status=Status.ERROR,
                        summary=f"plug-in {kind} {ep.name!r} from {provider} failed to load: {type(exc).__name__}: {exc}",
                        explanation=(
                            f"The entry point `{ep.name} = {ep.value}` (group `{group}`) raised while "
                            f"importing. Reinstall or upgrade `{provider.split(' ')[0]}`, or uninstall it; "
                            f"the other checks ran normally."
                        ),
                        evidence={
                            "id": ep.name,
                            "provider": provider,
                            "value": ep.value,
                            "traceback": traceback.format_exc(),
                        },
                    )
                )
                continue
            problem = None
            if not isinstance(obj, expected):
                problem = f"points at a {type(obj).__name__}, not a {expected.__name__}"
            elif obj.id != ep.name:
                problem = f"is registered as {ep.name!r} but its id is {obj.id!r}"
            elif not CHECK_ID_RE.match(obj.id):
                problem = f"has an invalid id {obj.id!r} (dotted lowercase, e.g. 'cuda.driver')"
            if problem:
                reg.problems.append(
                    Finding(
                        check=PLUGIN_CHECK_ID,
                        status=Status.ERROR,
                        summary=f"plug-in {kind} {ep.name!r} from {provider} {problem}",
                        explanation=f"Fix the entry point `{ep.name} = {ep.value}` in `{provider.split(' ')[0]}`.",
                        evidence={"id": ep.name, "provider": provider, "value": ep.value},
                    )
                )
                continue
            if kind == "check" and ep in own:
                obj = catalogued(obj)
            target[ep.name] = obj
            reg.providers[key] = provider
    reg.checks = dict(sorted(reg.checks.items(), key=lambda kv: sort_key(kv[0])))
    reg.fixes = dict(sorted(reg.fixes.items(), key=lambda kv: sort_key(kv[0])))
    return reg
