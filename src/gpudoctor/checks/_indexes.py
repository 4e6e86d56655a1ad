"""The shape of a package index URL (pip's ``index-url``, uv's default index): what pip cannot use
as a simple index, and the URL it should be. Shared by ``pip.config`` and ``index.consistency``;
a private domain helper, not a check.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from gpudoctor.data import load_table

__all__ = ["PYPI_HOSTS", "index_url_problem"]


#: Hosts of PyPI itself: its simple index is ``/simple``; ``https://pypi.org`` or ``/project/...`` are web pages.
PYPI_HOSTS = ("pypi.org", "pypi.python.org", "www.pypi.org")


def _catalogue_indexes() -> list[str]:
    """The PEP 503 simple-index URL of every catalogue row (``data/mirrors.toml``, field ``pypi``)."""
    return [str(r["pypi"]) for r in load_table("mirrors").get("mirror", []) if r.get("pypi")]


def index_url_problem(url: str) -> tuple[str, str] | None:
    """Why pip cannot use ``url`` as a simple index, and the URL it should be; None when nothing is known wrong.

    Returns ``(problem, suggested_url)``; ``suggested_url`` is "" when there is
    no single right value. Only shapes that fail for certain are reported: a
    quoted value, a host name without a scheme, and a URL on a catalogue
    mirror's host (or PyPI's) that lacks the simple-index path the catalogue
    gives. An index on an unknown host may serve its simple API anywhere
    (``download.pytorch.org/whl/cu121``, devpi ``/+simple/``), so it is never guessed at.
    """
    v = url.strip()
    if v[:1] in "\"'" and (v[-1:] == v[0] or "://" in v):
        inner = v.strip("\"'").strip()
        return "the URL is in quotes: pip.conf is INI, not TOML, so the quotes become part of the URL", inner
    parts = urlsplit(v)
    if not parts.scheme and re.match(r"^[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+(:\d+)?(/|$)", v):
        return "no `https://`: pip takes a value without a scheme for a local directory", "https://" + v
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    host, path = parts.hostname.lower(), parts.path.rstrip("/")
    if host in PYPI_HOSTS and not path.startswith("/simple"):
        return (
            "PyPI's web pages, not its simple index: pip asks `<index>/<project>/` and gets 404 for every project",
            "https://pypi.org/simple",
        )
    for known in _catalogue_indexes():
        k = urlsplit(known)
        kpath = k.path.rstrip("/")
        if (k.hostname or "").lower() == host and path != kpath and kpath.startswith(path + "/" if path else ""):
            return (
                f"missing `{kpath[len(path) :]}`: the mirror serves its simple index at {known}, so pip asks "
                f"`<index>/<project>/` there and gets 404 for every project",
                known,
            )
    return None
