"""apt's proxy settings, modelled the way apt's http(s) method picks a proxy for a URI.

Configuration (apt.conf(5)): ``/etc/apt/apt.conf`` then the files of
``/etc/apt/apt.conf.d/`` in name order (names of letters, digits, ``_``,
``-``, ``.`` only; later settings win). Both the flat form
``Acquire::http::Proxy "http://cache:3142";`` and the nested form
``Acquire { http { Proxy "..."; }; };`` are read; ``//`` and ``#`` comments
and ``/* */`` blocks are skipped.

Which proxy a URI uses (apt ``methods/http.cc``; Debian bug #557085):

1. ``Acquire::<scheme>::Proxy::<host>`` — ``DIRECT`` means none;
2. ``Acquire::<scheme>::Proxy``;
3. for ``https`` with neither set, ``Acquire::http::Proxy`` (the http proxy
   carries https too, as a ``CONNECT`` tunnel);
4. the ``<scheme>_proxy`` environment variable (``http_proxy`` for http,
   ``https_proxy`` for https), unless ``no_proxy`` names the host.

apt-cacher-ng (port 3142 by default) refuses ``CONNECT`` unless its
``PassThroughPattern`` allows it: ``apt-get update`` then fails with
``403 CONNECT denied (ask the admin to allow HTTPS tunnels)``. Its own form
``http://cache:3142/HTTPS///host/path`` fetches an https archive through the
cache without a tunnel.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from gpudoctor.records import frozen_dataclass

APT_CONF = "/etc/apt/apt.conf"
APT_CONF_D = "/etc/apt/apt.conf.d"
_VALID_PART = re.compile(r"^[A-Za-z0-9_.\-]+$")
#: apt-cacher-ng's default port: a proxy there is taken for the cache
CACHE_PORT = 3142
_TOKEN = re.compile(r'\s*(?:(?P<str>"[^"]*")|(?P<brace>[{}])|(?P<semi>;)|(?P<word>[^\s{};"]+))')


def conf_part_read(name: str) -> bool:
    """apt reads an ``apt.conf.d`` file only when its name is letters, digits, ``_``, ``-``, ``.``
    and it is no backup (``~``, ``.disabled``, ``.dpkg-*``, ``.bak``)."""
    if not _VALID_PART.match(name):
        return False
    return not name.endswith((".disabled", ".bak", ".dpkg-old", ".dpkg-dist", ".dpkg-new", ".save", ".orig"))


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    out = []
    for line in text.splitlines():
        s = line.lstrip()
        if s.startswith("#") and not s.startswith(("#include", "#clear")):
            continue
        # `//` starts a comment outside a quoted string
        quoted = False
        for i, ch in enumerate(line):
            if ch == '"':
                quoted = not quoted
            elif ch == "/" and not quoted and line[i : i + 2] == "//":
                line = line[:i]
                break
        out.append(line)
    return "\n".join(out)


def parse_conf(text: str) -> list[tuple[str, str]]:
    """``(Key::Path, value)`` for every assignment in an apt.conf text, in order (keys as written)."""
    body = _strip_comments(text)
    stack: list[list[str]] = []  # one group of name parts per open block
    pending: list[str] = []
    out: list[tuple[str, str]] = []
    for m in _TOKEN.finditer(body):
        prefix = [p for group in stack for p in group]
        if m.group("word") is not None:
            pending.append(m.group("word"))
        elif m.group("str") is not None:
            value = m.group("str")[1:-1]
            if pending:
                out.append(("::".join([*prefix, *pending[0].split("::")]), value))
            pending = []
        elif m.group("brace") == "{":
            stack.append(pending[0].split("::") if pending else [])
            pending = []
        elif m.group("brace") == "}":
            if stack:
                stack.pop()
            pending = []
        else:
            pending = []
    return out


def merge_conf(texts: Sequence[tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """Lower-cased key -> (value, file) over ``(path, text)`` in apt's reading order (later wins)."""
    out: dict[str, tuple[str, str]] = {}
    for path, text in texts:
        for key, value in parse_conf(text):
            out[key.lower()] = (value, path)
    return out


@frozen_dataclass
class ProxyChoice:
    """The proxy apt uses for one URI: its URL ("" for a direct connection) and where it was set."""

    proxy: str
    origin: str

    @property
    def cache(self) -> bool:
        """The proxy listens on apt-cacher-ng's port (refuses https tunnels by default)."""
        return bool(self.proxy) and _port(self.proxy) == CACHE_PORT


def _port(url: str) -> int | None:
    try:
        return urlsplit(url if "://" in url else f"http://{url}").port
    except ValueError:
        return None


def proxy_for(uri: str, conf: Mapping[str, tuple[str, str]], env: Mapping[str, str]) -> ProxyChoice:
    parts = urlsplit(uri)
    scheme = (parts.scheme or "").lower()
    host = (parts.hostname or "").lower()
    if scheme not in ("http", "https"):
        return ProxyChoice("", "")
    keys = [f"acquire::{scheme}::proxy::{host}", f"acquire::{scheme}::proxy"]
    if scheme == "https":
        keys.append("acquire::http::proxy")
    for k in keys:
        if k in conf:
            value, path = conf[k]
            name = k.replace("acquire::", "Acquire::").replace("::proxy", "::Proxy")
            if value.strip().upper() == "DIRECT" or not value.strip():
                return ProxyChoice("", f"{name} (DIRECT) in {path}")
            return ProxyChoice(value.strip(), f"{name} in {path}")
    var = f"{scheme}_proxy"
    for name in (var, var.upper()):
        value = env.get(name, "").strip()
        if value:
            skip = [h.strip().lower().lstrip(".") for h in env.get("no_proxy", env.get("NO_PROXY", "")).split(",")]
            if any(h and (host == h or host.endswith("." + h)) for h in skip) or "*" in skip:
                return ProxyChoice("", f"no_proxy ({host})")
            return ProxyChoice(value, f"{name} in the environment")
    return ProxyChoice("", "")


def cache_https_form(uri: str, proxy: str) -> str:
    """The apt-cacher-ng form of an https URI through ``proxy``: ``http://cache:3142/HTTPS///host/path``."""
    p = urlsplit(uri)
    cache = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    return f"http://{cache.netloc}/HTTPS///{p.netloc}{p.path}"
