"""The mirror catalogue: built-in rows from ``data/mirrors.toml`` plus a user file.

A catalogue file has the built-in file's format (``[[mirror]]`` rows with
``name``, ``operator``, ``region``, ``official``, archive URL fields and
``source``; an optional ``[probe]`` table). Rows whose ``name`` matches a
built-in row replace it; others are added. ``replace = true`` at the top
drops the built-in rows altogether (what tests and benchmarks use, so that
no probe ever reaches a real mirror).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from gpudoctor.data import load_table
from gpudoctor.facts.mirrors import CatalogueMirror
from gpudoctor.records import frozen_dataclass
from gpudoctor.words import noun

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["ARCHIVES", "ECOSYSTEM_ARCHIVES", "Catalogue", "CatalogueError", "builtin", "load", "parse"]

#: Archive keys a row may carry.
ARCHIVES = ("pypi", "conda_pkgs", "conda_cloud", "debian", "debian_security", "ubuntu", "ubuntu_ports")

#: Ecosystem -> archives its ranking looks at.
ECOSYSTEM_ARCHIVES = {
    "pip": ("pypi",),
    "uv": ("pypi",),
    "conda": ("conda_pkgs", "conda_cloud"),
    "apt": ("debian", "debian_security", "ubuntu", "ubuntu_ports"),
}


class CatalogueError(ValueError):
    """A catalogue file is malformed; the message names the file and the row."""


@frozen_dataclass
class Catalogue:
    """Catalogue rows plus probe settings.

    Attributes:
        mirrors: rows, official ones first within the file order.
        pypi_project: project whose simple page is fetched for pip/uv (``six``).
        conda_subdir: subdir whose repodata.json head is fetched (``noarch``).
        apt_max_lag_hours: an apt mirror whose InRelease ``Date:`` is older than
            the official one by more than this is ``stale`` (hours).
        origin: ``built-in``, ``FILE`` (replace) or ``built-in + FILE``.
    """

    mirrors: tuple[CatalogueMirror, ...]
    pypi_project: str = "six"
    conda_subdir: str = "noarch"
    apt_max_lag_hours: float = 24.0
    origin: str = "built-in"

    def for_archive(self, archive: str) -> list[CatalogueMirror]:
        """Rows that offer ``archive``, in catalogue order."""
        return [m for m in self.mirrors if archive in m.urls]

    def by_name(self, name: str) -> CatalogueMirror | None:
        """The row called ``name`` (case-insensitive), or None."""
        for m in self.mirrors:
            if m.name.lower() == name.lower():
                return m
        return None


def _row(raw: Any, where: str) -> CatalogueMirror:
    if not isinstance(raw, dict):
        raise CatalogueError(f"{where}: a [[mirror]] row must be a table")
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise CatalogueError(f"{where}: missing 'name'")
    urls: dict[str, str] = {}
    for key in ARCHIVES:
        value = raw.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise CatalogueError(f"{where} ({name}): {key} must be a URL string")
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https", "file") or (parts.scheme != "file" and not parts.netloc):
            raise CatalogueError(f"{where} ({name}): {key} = {value!r} is not an http(s) or file URL")
        urls[key] = value.rstrip("/")
    unknown = set(raw) - set(ARCHIVES) - {"name", "operator", "region", "official", "source", "conda_missing"}
    if unknown:
        raise CatalogueError(
            f"{where} ({name}): unknown {noun(len(unknown), 'field')} {', '.join(sorted(unknown))}; "
            f"archives are {', '.join(ARCHIVES)}"
        )
    if not urls:
        raise CatalogueError(f"{where} ({name}): no archive URL (one of {', '.join(ARCHIVES)})")
    return CatalogueMirror(
        name=name.strip(),
        operator=str(raw.get("operator", "")),
        region=str(raw.get("region", "")),
        official=bool(raw.get("official", False)),
        urls=urls,
        source=str(raw.get("source", "")),
        conda_missing=_names(raw.get("conda_missing", []), where, name),
    )


def _names(value: Any, where: str, name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CatalogueError(f"{where} ({name}): conda_missing must be a list of channel names")
    return tuple(value)


def parse(doc: Mapping[str, Any], where: str) -> tuple[list[CatalogueMirror], dict[str, Any], bool]:
    """Rows, probe settings and the ``replace`` flag of a parsed catalogue document.

    Raises :class:`CatalogueError` naming ``where`` and the row.
    """
    rows = doc.get("mirror", [])
    if not isinstance(rows, list):
        raise CatalogueError(f"{where}: 'mirror' must be an array of tables ([[mirror]])")
    mirrors = [_row(r, f"{where}: mirror #{i + 1}") for i, r in enumerate(rows)]
    names = [m.name.lower() for m in mirrors]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise CatalogueError(f"{where}: duplicate mirror {noun(len(dup), 'name')} {', '.join(dup)}")
    probe = doc.get("probe", {})
    if not isinstance(probe, dict):
        raise CatalogueError(f"{where}: [probe] must be a table")
    replace = doc.get("replace", False)
    if not isinstance(replace, bool):
        raise CatalogueError(f"{where}: replace must be true or false (TOML booleans, unquoted), not {replace!r}")
    return mirrors, dict(probe), replace


def _settings(probe: Mapping[str, Any], base: Catalogue | None = None) -> dict[str, Any]:
    out = {
        "pypi_project": base.pypi_project if base else "six",
        "conda_subdir": base.conda_subdir if base else "noarch",
        "apt_max_lag_hours": base.apt_max_lag_hours if base else 24.0,
    }
    if "pypi_project" in probe:
        out["pypi_project"] = str(probe["pypi_project"])
    if "conda_subdir" in probe:
        out["conda_subdir"] = str(probe["conda_subdir"])
    if "apt_max_lag_hours" in probe:
        out["apt_max_lag_hours"] = float(probe["apt_max_lag_hours"])
    return out


def builtin() -> Catalogue:
    """The shipped catalogue (``data/mirrors.toml``)."""
    mirrors, probe, _ = parse(load_table("mirrors"), "data/mirrors.toml")
    return Catalogue(tuple(mirrors), origin="built-in", **_settings(probe))


def from_text(text: str, where: str, base: Catalogue | None = None) -> Catalogue:
    """Merge the catalogue document ``text`` onto ``base`` (built-in by default)."""
    base = base or builtin()
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogueError(f"{where}: not valid TOML ({exc})") from None
    mirrors, probe, replace = parse(doc, where)
    if replace:
        return Catalogue(tuple(mirrors), origin=where, **_settings(probe))
    mine = {m.name.lower() for m in mirrors}
    merged = [m for m in base.mirrors if m.name.lower() not in mine] + mirrors
    return Catalogue(tuple(merged), origin=f"built-in + {where}", **_settings(probe, base))


def load(path: str | None) -> Catalogue:
    """The built-in catalogue, merged with the file at ``path`` when given.

    Raises :class:`CatalogueError` when the file cannot be read or is malformed.
    """
    if not path:
        return builtin()
    from gpudoctor.inputs import InputError, read_user_file

    try:
        text = read_user_file(path)
    except InputError as exc:
        raise CatalogueError(str(exc)) from None
    return from_text(text, path)
