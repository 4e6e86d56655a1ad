"""Turn ``--mirror fastest|NAME|URL`` into archive URLs, for the mirror fix planners.

Pure: reads the ``mirrors`` facts (ranking and catalogue rows collected with
them) and, when those are absent, the built-in catalogue table. Options
(strings, from ``gpudoctor fix``): ``mirror`` (default ``fastest``),
``allow-insecure`` (``true``/``1``/``yes`` allows ``http://``; ``allow_insecure`` is accepted too).
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

from gpudoctor.facts import Facts, Unavailable
from gpudoctor.facts.mirrors import CatalogueMirror, MirrorsFacts
from gpudoctor.model import FixRefused

APT_ARCHIVES = ("debian", "debian_security", "ubuntu", "ubuntu_ports")
_SEGMENT = {
    "debian_security": "debian-security",
    "debian": "debian",
    "ubuntu_ports": "ubuntu-ports",
    "ubuntu": "ubuntu",
}


def truthy(value: object) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def _catalogue(facts: Facts) -> tuple[CatalogueMirror, ...]:
    mirrors = facts.get("mirrors")
    if isinstance(mirrors, MirrorsFacts) and mirrors.catalogue:
        return mirrors.catalogue
    from gpudoctor.mirrors.catalogue import builtin

    return builtin().mirrors


def apt_layout(url: str) -> dict[str, str]:
    """Archive URLs on a mirror with the standard layout, from its root or one archive URL.

    ``https://m.example.org/debian`` -> debian, debian_security, ubuntu,
    ubuntu_ports under ``https://m.example.org``.
    """
    base = url.rstrip("/")
    path = urlsplit(base).path
    for key in ("debian_security", "ubuntu_ports", "debian", "ubuntu"):
        seg = "/" + _SEGMENT[key]
        if path.endswith(seg):
            base = base[: -len(seg)]
            break
    return {k: f"{base}/{seg}" for k, seg in _SEGMENT.items()}


def apt_as_given(url: str, options: Mapping[str, str]) -> dict[str, str]:
    """Archive URLs for ``--mirror URL`` on apt: the URL exactly as given, for the primary archive.

    A proxy path (``https://nexus.example.org/repository/apt-proxy``) is not a
    mirror root and is never turned into ``.../debian``; the URL serves the
    primary archive (``debian``, ``ubuntu`` or ``ubuntu-ports``: whichever the
    system uses) and Ubuntu's security pocket (``<codename>-security`` lives in
    the same archive). Debian's security archive is a separate archive: it
    moves only to ``options["security-mirror"]`` (``--set security-mirror=URL``),
    otherwise it stays on the official host (the fix's notes say so).
    A bare host with no path (``https://mirror.example.org/``) is a mirror
    root: the standard layout (``/debian``, ``/debian-security``, ``/ubuntu``,
    ``/ubuntu-ports``) is used under it.
    """
    base = url.rstrip("/")
    if not urlsplit(base).path:
        return apt_layout(base)
    urls = {"debian": base, "ubuntu": base, "ubuntu_ports": base}
    security = (options.get("security-mirror") or "").strip()
    if security:
        urls["debian_security"] = security.rstrip("/")
    return urls


def choose(
    facts: Facts, eco: str, options: Mapping[str, str], archives: tuple[str, ...], exclude: tuple[str, ...] = ()
) -> tuple[str, dict[str, str]]:
    """(mirror label, archive -> URL) for the user's ``--mirror`` choice.

    ``fastest`` takes the best healthy row of the ``eco`` ranking (skipping
    URLs in ``exclude``, i.e. what is configured now); ``NAME`` a catalogue
    row; ``URL`` a mirror root or archive URL (apt: standard layout assumed).
    Raises :class:`FixRefused` when there is no ranking, no such row, or an
    ``http://`` URL without ``allow_insecure``.
    """
    choice = (options.get("mirror") or "fastest").strip()
    urls: dict[str, str]
    if choice == "fastest":
        mirrors = facts.get("mirrors")
        ranking = mirrors.rankings.get(eco, ()) if isinstance(mirrors, MirrorsFacts) else ()
        if not ranking:
            why = " (--offline)" if isinstance(mirrors, MirrorsFacts) and mirrors.offline else ""
            raise FixRefused(
                f"no {eco} mirror ranking{why}: pass `--mirror fastest` without --offline (probes the "
                f"catalogue's mirrors), or name one with `--mirror NAME|URL`"
            )
        skip = {u.rstrip("/") for u in exclude}
        best = next((r for r in ranking if r.status == "ok" and r.base_url.rstrip("/") not in skip), None)
        if best is None:
            raise FixRefused(f"no healthy {eco} mirror in the ranking (every candidate failed or is the one in use)")
        row = next((m for m in _catalogue(facts) if m.name == best.name), None)
        urls = dict(row.urls) if row else {best.archive: best.base_url}
        label = best.name
    elif "://" in choice:
        label = choice
        urls = apt_as_given(choice, options) if eco == "apt" else {a: choice.rstrip("/") for a in archives}
        if eco == "conda":
            base = choice.rstrip("/")
            urls = {"conda_pkgs": f"{base}/pkgs", "conda_cloud": f"{base}/cloud"}
    else:
        row = next((m for m in _catalogue(facts) if m.name.lower() == choice.lower()), None)
        if row is None:
            names = ", ".join(m.name for m in _catalogue(facts) if any(a in m.urls for a in archives))
            raise FixRefused(f"no mirror named {choice!r} in the catalogue for {eco}; known: {names}")
        urls, label = dict(row.urls), row.name
    urls = {k: v for k, v in urls.items() if k in archives}
    if not urls:
        raise FixRefused(f"mirror {label} offers no {eco} archive ({', '.join(archives)})")
    insecure = sorted(u for u in urls.values() if u.startswith("http://"))
    if insecure and not (truthy(options.get("allow-insecure", "")) or truthy(options.get("allow_insecure", ""))):
        raise FixRefused(
            f"{insecure[0]} is plain http://; pass --allow-insecure to accept it, or choose an https mirror"
        )
    return label, urls


def unavailable(value: object) -> bool:
    return value is None or isinstance(value, Unavailable)


def first_url(urls: dict[str, str]) -> str | None:
    return next(iter(urls.values()), None)
