"""Where a mirror probe may connect: one policy for the first URL, every redirect target and every address.

The rules (issue 32, item 6), applied by :class:`NetPolicy`:

- only ``http`` and ``https`` URLs are requested (a redirect to ``file://``,
  ``ftp://``... is refused);
- never, in any mode: a link-local address (169.254.0.0/16, fe80::/10), a cloud
  metadata endpoint (169.254.169.254, fd00:ec2::254, ``metadata.google.internal``),
  or an unspecified address (0.0.0.0/8, ``::``), also when written as an
  IPv4-mapped, NAT64 or 6to4 IPv6 address;
- with ``GPUDOCTOR_LOOPBACK_ONLY=1`` (the test suite sets it): only loopback
  hosts (127.0.0.0/8, ``::1``, ``localhost``), redirects included;
- a host name is resolved once, by an injectable resolver, and refused when
  ANY address it resolves to is refused; the connection then goes to one of
  those checked addresses while the ``Host`` header and the TLS server name
  keep the name (no second lookup that DNS rebinding could answer differently);
- at most :data:`MAX_REDIRECTS` redirects and no loop (enforced by the prober,
  :func:`gpudoctor.mirrors.probe.probe_one`).

Behind a proxy (``HTTP(S)_PROXY``, ``ALL_PROXY``; ``NO_PROXY`` honoured) the
proxy resolves the target: the URL rules still apply to every hop, and the
address rules to the proxy's address.

A refusal is a :class:`Refused` exception whose text is the per-mirror reason
("redirect to a link-local address refused (http://169.254.169.254/latest/)");
the prober turns it into a failed probe with status ``refused``.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import socket
import threading
from collections.abc import Callable, Sequence
from typing import Any

from gpudoctor import urls
from gpudoctor.records import frozen_dataclass

__all__ = [
    "LOOPBACK_ONLY_ENV",
    "MAX_REDIRECTS",
    "METADATA_ADDRESSES",
    "METADATA_NAMES",
    "NetPolicy",
    "Refused",
    "Resolver",
    "address_kind",
    "guarded_transport",
    "is_loopback_host",
    "loopback_only",
    "system_resolver",
]

#: Set to 1 to let probes reach only loopback hosts (127.0.0.0/8, ::1, localhost); the test suite sets it so
#: that no test can reach a real mirror, even through a live `gpudoctor check`.
LOOPBACK_ONLY_ENV = "GPUDOCTOR_LOOPBACK_ONLY"

#: Redirects followed per request (pip and apt stop far later; a mirror needs one or two).
MAX_REDIRECTS = 5

#: Instance metadata endpoints (AWS IPv4/IPv6, GCP, Azure, most others use 169.254.169.254).
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254"))
METADATA_NAMES = frozenset({"metadata.google.internal"})

_THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

#: (host, port) -> the addresses to connect to; raises OSError (``socket.gaierror``) when the name does not resolve.
Resolver = Callable[[str, int], Sequence[str]]

_IP = ipaddress.IPv4Address | ipaddress.IPv6Address


def system_resolver(host: str, port: int) -> list[str]:
    """The system's answer for ``host`` (``getaddrinfo``, TCP), each address once, in its order."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def loopback_only() -> bool:
    """``GPUDOCTOR_LOOPBACK_ONLY=1`` is set (validated up front by the CLI)."""
    return os.environ.get(LOOPBACK_ONLY_ENV, "") not in ("", "0")


def _ip(text: str) -> _IP | None:
    try:
        return ipaddress.ip_address(text.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def is_loopback_host(host: str) -> bool:
    """``localhost`` or a loopback address literal (no lookup)."""
    if host.lower().rstrip(".") == "localhost":
        return True
    ip = _ip(host)
    return ip is not None and ip.is_loopback


def _embedded_v4(ip: _IP) -> _IP:
    """The IPv4 address an IPv4-mapped, NAT64 (64:ff9b::/96) or 6to4 IPv6 address carries, else ``ip``."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip in _NAT64:
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if ip.sixtofour is not None:
            return ip.sixtofour
    return ip


def address_kind(ip: _IP, loopback_only: bool) -> str | None:
    """What makes ``ip`` refused (``link-local address``...), or None when it may be contacted."""
    for a in dict.fromkeys((ip, _embedded_v4(ip))):
        if a in METADATA_ADDRESSES:
            return "cloud metadata address"
        if a.is_link_local:
            return "link-local address"
        if a.is_unspecified or (isinstance(a, ipaddress.IPv4Address) and a in _THIS_NETWORK):
            return "unspecified address"
    if loopback_only and not ip.is_loopback:
        return "non-loopback address"
    return None


class Refused(Exception):
    """A URL or address :class:`NetPolicy` forbids. ``str()`` is the per-mirror reason; ``status`` the probe
    status; ``http_status`` the redirect that led to it (None: nothing was sent)."""

    def __init__(self, reason: str, status: str = "refused"):
        super().__init__(reason)
        self.status = status
        self.http_status: int | None = None


def _refusal(kind: str, detail: str, redirect: bool) -> str:
    if redirect:
        article = "an" if kind[0] in "aeiou" else "a"
        return f"redirect to {article} {kind} refused ({detail})"
    return f"{kind} refused ({detail})"


@frozen_dataclass
class NetPolicy:
    """Where probes may go (see the module docstring).

    Attributes:
        loopback_only: only loopback hosts (``GPUDOCTOR_LOOPBACK_ONLY=1``).
        resolver: host name -> addresses (tests pass a stub; no real lookup then).
        max_redirects: redirects followed per request.
    """

    loopback_only: bool = False
    resolver: Resolver = system_resolver
    max_redirects: int = MAX_REDIRECTS

    @classmethod
    def from_env(cls, resolver: Resolver | None = None) -> NetPolicy:
        """The policy of this process: loopback-only under ``GPUDOCTOR_LOOPBACK_ONLY=1``."""
        return cls(loopback_only=loopback_only(), resolver=resolver or system_resolver)

    def url_refused(self, url: str, redirect: bool = False) -> Refused | None:
        """Why ``url`` must not be requested (no lookup is made), or None."""
        u = urls.parse(url)
        shown = urls.display(url)
        if u.scheme not in ("http", "https"):
            kind = "non-http(s) URL"
            if not redirect:  # a configured index in another scheme: not an index the prober can read
                return Refused(
                    f"unsupported URL scheme {u.scheme or 'none'!r}: only http and https are probed", "invalid"
                )
            return Refused(_refusal(kind, shown, redirect))
        if not u.host:
            return Refused(_refusal("URL without a host", shown, redirect), "invalid" if not redirect else "refused")
        if u.host.rstrip(".") in METADATA_NAMES:
            return Refused(_refusal("cloud metadata address", shown, redirect))
        ip = _ip(u.host)
        if ip is not None:
            what = address_kind(ip, self.loopback_only)
            if what == "non-loopback address":
                what = "non-loopback host"
            if what:
                return Refused(_refusal(what, shown, redirect) + self._why_loopback(what))
        elif self.loopback_only and not is_loopback_host(u.host):
            return Refused(_refusal("non-loopback host", shown, redirect) + self._why_loopback("non-loopback host"))
        return None

    @staticmethod
    def _why_loopback(kind: str) -> str:
        return f": {LOOPBACK_ONLY_ENV}=1 allows only loopback hosts" if kind.startswith("non-loopback") else ""

    def addresses(self, host: str, port: int) -> list[str]:
        """Resolve ``host`` once and check every address; raises :class:`Refused` or the resolver's OSError."""
        ip = _ip(host)
        found = [str(ip)] if ip is not None else list(self.resolver(host, port))
        for a in found:
            addr = _ip(a)
            kind = "unparsable address" if addr is None else address_kind(addr, self.loopback_only)
            if kind:
                detail = a if ip is not None else f"{host} resolves to {a}"
                raise Refused(_refusal(kind, detail, False) + self._why_loopback(kind))
        if not found:
            raise socket.gaierror(socket.EAI_NONAME, f"{host} resolves to no address")
        return found

    def connect(self, host: str, port: int, timeout: float | None) -> socket.socket:
        """A TCP connection to a checked address of ``host`` (raises :class:`Refused` or OSError)."""
        last: OSError | None = None
        for a in self.addresses(host, port):
            try:
                return socket.create_connection((a, port), timeout)
            except OSError as exc:
                last = exc
        raise last or OSError(f"cannot connect to {host}")


# --------------------------------------------------------------------------- httpx transport


@functools.cache
def _transport_class() -> type:
    """The guarded transport class, built on first use (httpx is imported only when something is probed)."""
    import httpcore
    import httpx

    class GuardedBackend(httpcore.SyncBackend):
        """Connects only to addresses the policy checked; the request keeps the host name."""

        def __init__(self, policy: NetPolicy):
            self.policy = policy

        def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,
            local_address: str | None = None,
            socket_options: Any = None,
        ) -> httpcore.NetworkStream:
            try:
                found = self.policy.addresses(host, port)
            except OSError as exc:  # name resolution: classified like httpx's own (dns-error, no-network)
                raise httpcore.ConnectError(str(exc)) from exc
            last: Exception | None = None
            for a in found:
                try:
                    return super().connect_tcp(a, port, timeout, local_address, socket_options)
                except httpcore.ConnectError as exc:
                    last = exc
            raise last or httpcore.ConnectError(f"cannot connect to {host}")

    class GuardedTransport(httpx.BaseTransport):
        """httpx transports (one per proxy in use) whose every connection goes through :class:`GuardedBackend`."""

        def __init__(self, policy: NetPolicy, verify: Any, trust_env: bool):
            self._policy = policy
            self._verify = verify
            self._trust_env = trust_env
            self._by_proxy: dict[str | None, httpx.HTTPTransport] = {}
            self._lock = threading.Lock()

        def _for(self, url: httpx.URL) -> httpx.HTTPTransport:
            proxy = _proxy_for(url.scheme, url.host) if self._trust_env else None
            with self._lock:
                t = self._by_proxy.get(proxy)
                if t is None:
                    t = httpx.HTTPTransport(verify=self._verify, trust_env=self._trust_env, proxy=proxy)
                    pool = t._pool
                    if not hasattr(pool, "_network_backend"):  # an httpcore that moved it: probe nothing unchecked
                        raise RuntimeError("this httpcore version does not let gpudoctor check addresses")
                    pool._network_backend = GuardedBackend(self._policy)
                    self._by_proxy[proxy] = t
                return t

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            return self._for(request.url).handle_request(request)

        def close(self) -> None:
            with self._lock:
                for t in self._by_proxy.values():
                    t.close()
                self._by_proxy.clear()

    return GuardedTransport


def guarded_transport(policy: NetPolicy, verify: Any = True, trust_env: bool = True) -> Any:
    """An ``httpx.BaseTransport`` that connects only where ``policy`` allows (proxies from the environment
    when ``trust_env``, never for loopback hosts)."""
    return _transport_class()(policy, verify, trust_env)


def _proxy_for(scheme: str, host: str) -> str | None:
    """The proxy httpx would use for ``scheme://host`` from the environment (``NO_PROXY`` honoured), or None."""
    if is_loopback_host(host):
        return None
    from urllib.request import getproxies

    proxies = getproxies()
    proxy = proxies.get(scheme) or proxies.get("all")
    if not proxy or _no_proxy(host, proxies.get("no", "")):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def _no_proxy(host: str, no_proxy: str) -> bool:
    """``host`` matches a ``NO_PROXY`` entry: ``*``, a name (its subdomains too), an address or a CIDR network."""
    host = host.lower().strip("[]").rstrip(".")
    ip = _ip(host)
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if not entry:
            continue
        if entry == "*":
            return True
        if "://" in entry:
            entry = urls.host_of(entry)
        if ip is not None:
            try:
                if ip in ipaddress.ip_network(entry.strip("[]"), strict=False):
                    return True
            except ValueError:
                pass
            continue
        name = entry.lstrip("*").lstrip(".")
        if name and (host == name or host.endswith("." + name)):
            return True
    return False
