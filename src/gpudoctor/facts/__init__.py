"""The facts snapshot: one frozen dataclass per domain, and the :class:`Facts` aggregate.

Collectors (``gpudoctor.collect``) fill domains; checks read them. A domain
that was not collected, or whose collector failed, is an :class:`Unavailable`
with the reason. ``Facts.to_json()`` is the ``gpudoctor facts`` snapshot
(schema: ``gpudoctor/schemas/facts.schema.json``) and ``Facts.from_json``
replays it (``gpudoctor check --facts FILE``).

Every module in this package that defines a domain is imported here, so the
registry (and the schema) always lists all of them: add a module, and it is in.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from dataclasses import field
from typing import Any, TypeVar

from gpudoctor.facts.base import (
    FactsDecodeError,
    Unavailable,
    domain,
    from_jsonable,
    schema_for,
    to_jsonable,
)
from gpudoctor.facts.base import (
    registered_domains as _registered_domains,
)
from gpudoctor.records import frozen_dataclass
from gpudoctor.redact import redact_value

__all__ = [
    "FACTS_SCHEMA_VERSION",
    "READABLE_FACTS_SCHEMA_VERSIONS",
    "Facts",
    "FactsDecodeError",
    "Unavailable",
    "domain",
    "facts_schema",
    "registered_domains",
]

#: Version of the snapshot format written now; bump on incompatible changes.
#: 2 (0.2.0): new domains and fields (CUDA libraries, platform, device health,
#: ...); every field added since 1 has a default, so version-1 snapshots load.
FACTS_SCHEMA_VERSION = 2
#: Snapshot versions this gpudoctor reads (``check --facts``): older ones
#: load with the newer facts absent (Unavailable) or at their defaults.
READABLE_FACTS_SCHEMA_VERSIONS = (1, 2)

D = TypeVar("D")

_ALL_IMPORTED = False


def _import_all_domains() -> None:
    """Import every domain module once, so the registry (and the schema) lists all of them.

    Done on first need (:func:`registered_domains`, :meth:`Facts.from_json`, the schema),
    not at import: the entrypoint gate imports only the domains it collects (issue 14)."""
    global _ALL_IMPORTED
    if _ALL_IMPORTED:
        return
    for _mod in pkgutil.iter_modules(__path__):
        if _mod.name != "base":
            importlib.import_module(f"{__name__}.{_mod.name}")
    _ALL_IMPORTED = True


def registered_domains() -> Mapping[str, type]:
    """Domain name -> dataclass, for every domain module in this package (imports them all)."""
    _import_all_domains()
    return _registered_domains()


@frozen_dataclass
class Facts:
    """A snapshot of everything gpudoctor learnt about one machine.

    Attributes:
        domains: domain name -> that domain's dataclass, or Unavailable.
        gpudoctor_version: version of the tool that collected it.
        collected_at: ISO 8601 UTC time of collection.
        root: the ``--root`` the files were read from (``/`` for the live system).
        durations_ms: domain name -> collection wall time in ms.
    """

    domains: Mapping[str, Any] = field(default_factory=dict)
    gpudoctor_version: str = ""
    collected_at: str = ""
    root: str = "/"
    durations_ms: Mapping[str, float] = field(default_factory=dict)

    def get(self, name: str) -> Any:
        """The facts of domain ``name``, or Unavailable("... not collected")."""
        value = self.domains.get(name)
        if value is None:
            return Unavailable(f"the {name} facts were not collected")
        return value

    def of(self, cls: type[D]) -> D | Unavailable:
        """Typed access by domain class: ``facts.of(NvidiaFacts)``."""
        value: D | Unavailable = self.get(cls.DOMAIN)  # type: ignore[attr-defined]
        return value

    def with_domains(self, **domains: Any) -> Facts:
        """Copy with some domains replaced (used by tests and fixtures)."""
        merged = dict(self.domains)
        merged.update(domains)
        return Facts(merged, self.gpudoctor_version, self.collected_at, self.root, self.durations_ms)

    def to_json(self, redact: bool = True) -> dict[str, Any]:
        """The snapshot document; secrets redacted unless ``redact=False``."""
        doc = {
            "schema_version": FACTS_SCHEMA_VERSION,
            "gpudoctor_version": self.gpudoctor_version,
            "collected_at": self.collected_at,
            "root": self.root,
            "durations_ms": {k: round(v, 3) for k, v in self.durations_ms.items()},
            "domains": {name: to_jsonable(value) for name, value in self.domains.items()},
        }
        return redact_value(doc) if redact else doc

    @classmethod
    def from_json(cls, doc: Any) -> Facts:
        """Build facts from a snapshot document.

        Domains absent from the document stay absent (checks see them as
        Unavailable and skip); unknown domains are ignored. Raises
        :class:`FactsDecodeError` with the JSON path of the first problem.
        """
        if not isinstance(doc, dict):
            raise FactsDecodeError("$: a facts snapshot is a JSON object")
        version = doc.get("schema_version")
        if version not in READABLE_FACTS_SCHEMA_VERSIONS or isinstance(version, bool):
            readable = ", ".join(str(v) for v in READABLE_FACTS_SCHEMA_VERSIONS)
            raise FactsDecodeError(
                f"$.schema_version: this gpudoctor reads facts schemas {readable}, "
                + ("the file has none" if version is None else f"the file has {version!r}")
            )
        raw = doc.get("domains", {})
        if not isinstance(raw, dict):
            raise FactsDecodeError("$.domains: expected an object")
        known = registered_domains()
        domains = {}
        for name, value in raw.items():
            tp = known.get(name)
            if tp is None:
                continue
            domains[name] = from_jsonable(tp | Unavailable, value, f"$.domains.{name}")
        durations = doc.get("durations_ms") or {}
        if not isinstance(durations, dict):
            raise FactsDecodeError("$.durations_ms: expected an object")
        return cls(
            domains=domains,
            gpudoctor_version=str(doc.get("gpudoctor_version", "")),
            collected_at=str(doc.get("collected_at", "")),
            root=str(doc.get("root", "/")),
            durations_ms={str(k): float(v) for k, v in durations.items() if isinstance(v, (int, float))},
        )


def facts_schema() -> dict[str, Any]:
    """The JSON Schema of the facts snapshot, generated from the domain dataclasses."""
    defs: dict[str, Any] = {}
    props = {
        name: {"anyOf": [schema_for(tp, defs), schema_for(Unavailable, defs)]}
        for name, tp in sorted(registered_domains().items())
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://gpudoctor.invalid/schemas/facts.schema.json",
        "title": "gpudoctor facts snapshot",
        "type": "object",
        "required": ["schema_version", "domains"],
        "properties": {
            "schema_version": {"enum": list(READABLE_FACTS_SCHEMA_VERSIONS)},
            "gpudoctor_version": {"type": "string"},
            "collected_at": {"type": "string"},
            "root": {"type": "string"},
            "durations_ms": {"type": "object", "additionalProperties": {"type": "number"}},
            "domains": {"type": "object", "properties": props},
        },
        "$defs": defs,
    }
