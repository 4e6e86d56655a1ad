"""One reading of an index / mirror / archive URL: scheme, host, port, path, credentials.

The apt source parser (:mod:`gpudoctor.sources.aptsources`), the mirror prober
(:mod:`gpudoctor.mirrors.probe`) and its connection policy
(:mod:`gpudoctor.mirrors.netguard`) read URLs through :func:`parse`, so they
agree on what the host of a URL is (lower case, without IPv6 brackets) and on
which URLs are local indexes. Never raises: a URL
``urllib.parse`` cannot read gives empty fields, a bad port gives ``None``.
Credentials are shown only through :func:`display`, which is the redaction
module's URL rule (``https://****@host/``).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from gpudoctor.records import frozen_dataclass

__all__ = ["DEFAULT_PORTS", "ParsedURL", "display", "host_of", "is_local", "parse", "same_base"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")

#: Port a scheme implies when the URL names none.
DEFAULT_PORTS = {"http": 80, "https": 443, "ftp": 21}


@frozen_dataclass
class ParsedURL:
    """``url`` split once.

    Attributes:
        raw: the URL as given.
        scheme: lower case, "" for a plain path.
        host: lower case, without IPv6 brackets; "" when none.
        port: the port the URL names (None when none, or not a valid port).
        path: the path without trailing slashes ("" for ``https://host/``).
        credentials: the URL carries ``user[:password]@``.
    """

    raw: str
    scheme: str
    host: str
    port: int | None
    path: str
    credentials: bool

    @property
    def base(self) -> str:
        """The URL without trailing slashes (how two spellings of one index compare)."""
        return self.raw.rstrip("/")

    @property
    def local(self) -> bool:
        """A ``file://`` URL or a plain filesystem path: a local index, never requested."""
        return self.scheme in ("file", "") or self.raw.startswith("/")

    @property
    def effective_port(self) -> int | None:
        """The port connected to: the URL's, else the scheme's default (None for other schemes)."""
        return self.port if self.port is not None else DEFAULT_PORTS.get(self.scheme)

    @property
    def hostport(self) -> str:
        """``host[:port]`` as shown in reports (the port only when the URL names one; never credentials)."""
        return f"{self.host}:{self.port}" if self.host and self.port else self.host


def parse(url: str) -> ParsedURL:
    """``url`` split into its parts (see :class:`ParsedURL`)."""
    try:
        parts = urlsplit(url)
        hostname = parts.hostname or ""
    except ValueError:  # an unbalanced "[" in the authority: the scheme still counts, the host is unknown
        m = _SCHEME.match(url)
        return ParsedURL(url, m.group(1).lower() if m else "", "", None, "", False)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return ParsedURL(
        raw=url,
        scheme=scheme,
        host=hostname,
        port=port,
        path=parts.path.rstrip("/"),
        credentials="@" in parts.netloc,
    )


def host_of(url: str) -> str:
    """The host of ``url`` (lower case, no brackets), "" when it has none."""
    return parse(url).host


def is_local(url: str) -> bool:
    """True for ``file://`` URLs and plain filesystem paths (local indexes)."""
    return parse(url).local


def same_base(a: str, b: str) -> bool:
    """``a`` and ``b`` name the same index, trailing slashes aside."""
    return a.rstrip("/") == b.rstrip("/")


def display(url: str) -> str:
    """``url`` fit to print: credentials and secret query values become ``****`` (the redaction module's rule)."""
    from gpudoctor.redact import redact_text

    return redact_text(url)
