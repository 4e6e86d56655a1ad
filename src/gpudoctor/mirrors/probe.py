"""Concurrent latency and health probes of package indexes.

Every target gets its own thread and its own ``httpx.Client``: all mirrors
are measured at once, so a run costs about as long as the slowest mirror,
not the sum. Per target: DNS + TCP connect + TLS handshake (``connect_ms``),
then ``samples`` requests on the same kept-alive connection, each timed from
sending the request headers to receiving the response headers (time to first
byte, ``samples_ms``; the median is what rankings sort by), and the largest
body read gives the throughput in KiB/s.

Limits: every request has a timeout (``timeout_s``, default 3 s) and the
whole run has a budget (``budget_s``, default 5 s); a target still running
at the deadline is reported as ``timeout`` and abandoned (daemon thread).

Why httpx (BSD-3-Clause): its ``trace`` request extension reports the
connect/TLS/response-header events of httpcore, which is exactly the phase
split we need, with per-phase timeouts and an ``ssl.SSLContext`` for
verification — without writing our own HTTP client on ``http.client``.

What each probe requests (mirrors.md §4):

- pip/uv: ``GET <index>/<project>/`` with the PEP 691 ``Accept`` header; the
  page must list files.
- apt: ``GET <base>/dists/<suite>/InRelease`` (first 4 KiB via ``Range``);
  its ``Suite:``/``Codename:`` must name the suite asked for, and its
  ``Date:`` may lag the official archive by at most ``apt_max_lag_hours``.
- conda: ``GET <channel>/<subdir>/repodata.json`` (first 64 KiB via ``Range``).

``file://`` URLs and plain paths are local indexes: recognised, never probed.
"""

from __future__ import annotations

import errno
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gpudoctor import __version__, urls
from gpudoctor.facts.mirrors import MirrorProbe
from gpudoctor.mirrors import netguard
from gpudoctor.mirrors.netguard import LOOPBACK_ONLY_ENV, NetPolicy, Refused
from gpudoctor.records import frozen_dataclass

if TYPE_CHECKING:
    import ssl

# ssl, statistics, email.utils and httpx are imported where a probe needs them: the collector also
# runs offline (``check --offline``), where nothing is probed and their import would be wasted

__all__ = [
    "DEFAULT_BUDGET_S",
    "DEFAULT_SAMPLES",
    "DEFAULT_TIMEOUT_S",
    "LOOPBACK_ONLY_ENV",
    "ProbeTarget",
    "apply_freshness",
    "probe_all",
    "rank",
]

from gpudoctor.mirrors import DEFAULT_BUDGET_S, DEFAULT_TIMEOUT_S

#: Requests per target (the median is ranked).
DEFAULT_SAMPLES = 3
#: Most targets probed at the same time.
MAX_PARALLEL = 48

PYPI_ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
USER_AGENT = f"gpudoctor/{__version__} (mirror latency probe)"

#: Bytes read from each response body, by kind.
MAX_BODY = {"pypi": 512 * 1024, "apt": 4096, "conda": 64 * 1024}


def normalize_project(name: str) -> str:
    """PEP 503 normalised project name (``Foo_Bar`` -> ``foo-bar``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@frozen_dataclass
class ProbeTarget:
    """One index to probe.

    Attributes:
        name: catalogue name or ``configured``.
        ecosystem: ``pip``, ``uv``, ``conda`` or ``apt``.
        archive: catalogue archive key (``pypi``, ``debian``, ``conda_pkgs``...).
        base_url: index / archive / channel base URL.
        kind: request shape: ``pypi``, ``apt`` or ``conda``.
        suite: apt suite to fetch InRelease for (``bookworm``).
        project: pip/uv project whose simple page is fetched.
        subdir: conda subdir (``noarch``, ``linux-64``).
        role: ``configured`` or ``candidate``.
        official: upstream archive (the apt freshness reference).
    """

    name: str
    ecosystem: str
    archive: str
    base_url: str
    kind: str
    suite: str = ""
    project: str = "six"
    subdir: str = "noarch"
    role: str = "candidate"
    official: bool = False

    @property
    def probe_url(self) -> str:
        base = urls.parse(self.base_url).base
        if self.kind == "pypi":
            return f"{base}/{normalize_project(self.project)}/"
        if self.kind == "apt":
            return f"{base}/dists/{self.suite}/InRelease"
        return f"{base}/{self.subdir}/repodata.json"

    def result(self, status: str, reason: str = "", **kw) -> MirrorProbe:
        """A :class:`MirrorProbe` for this target."""
        return MirrorProbe(
            name=self.name,
            ecosystem=self.ecosystem,
            archive=self.archive,
            base_url=self.base_url,
            probe_url=self.probe_url,
            role=self.role,
            official=self.official,
            status=status,
            reason=reason,
            **kw,
        )


def is_local(url: str) -> bool:
    """True for ``file://`` URLs and plain filesystem paths (never probed)."""
    return urls.is_local(url)


def blocked(url: str, loopback_only: bool | None = None) -> str | None:
    """Why ``url`` must not be contacted (``GPUDOCTOR_LOOPBACK_ONLY``, or ``loopback_only`` when given), or None.
    No DNS lookup is made."""
    if not (netguard.loopback_only() if loopback_only is None else loopback_only) or is_local(url):
        return None
    if netguard.is_loopback_host(urls.host_of(url)):
        return None
    return f"not probed: {LOOPBACK_ONLY_ENV}=1 allows only loopback hosts"


def make_ssl_context() -> ssl.SSLContext:
    """The system trust store (what apt, pip with ``cert`` and curl use), not a bundled one."""
    import ssl

    return ssl.create_default_context()


# --------------------------------------------------------------------------- errors


def _chain(exc: BaseException) -> list[BaseException]:
    out = []
    seen = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        out.append(cur)
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return out


def classify_error(exc: BaseException, timeout_s: float, ctx: ssl.SSLContext | None) -> tuple[str, str]:
    import ssl

    """(status, reason) for a failed request, in operator terms."""
    import httpx  # imported on first use: keeps `gpudoctor` start-up fast when nothing is probed

    chain = _chain(exc)
    text = " ".join(str(e) for e in chain)
    if isinstance(exc, httpx.ConnectTimeout):
        return "timeout", f"connecting took longer than {round(timeout_s, 1):g} s (host down, firewalled, or very far)"
    if isinstance(exc, (httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout)):
        return "timeout", f"the connection stalled: no response within {round(timeout_s, 1):g} s"
    if any(isinstance(e, ssl.SSLCertVerificationError) for e in chain) or "CERTIFICATE_VERIFY_FAILED" in text:
        detail = next(
            (getattr(e, "verify_message", "") for e in chain if isinstance(e, ssl.SSLCertVerificationError)), ""
        )
        reason = f"TLS certificate verification failed ({detail or 'certificate verify failed'})"
        if (
            ctx is not None
            and ctx.cert_store_stats().get("x509_ca", 0) == 0
            and not ssl.get_default_verify_paths().cafile
        ):
            reason += (
                "; this system has no CA certificates at all: install them (`apt-get install -y "
                "ca-certificates`) — slim images leave them out"
            )
        else:
            reason += (
                "; the server's certificate is self-signed, expired, or from a private CA not in the "
                "system store (add the CA to /usr/local/share/ca-certificates and run update-ca-certificates)"
            )
        return "tls-error", reason
    if any(isinstance(e, ssl.SSLError) for e in chain):
        return "tls-error", f"TLS handshake failed: {next(e for e in chain if isinstance(e, ssl.SSLError))}"
    for e in chain:
        if isinstance(e, socket.gaierror):
            if e.errno in (socket.EAI_AGAIN,) or "Temporary failure" in str(e):
                return "no-network", "name resolution failed (no DNS server reachable: offline or no network)"
            return "dns-error", f"the host name does not resolve ({e.strerror or e})"
        if isinstance(e, ConnectionRefusedError):
            return "connect-error", "connection refused (nothing listens on that port)"
        if isinstance(e, OSError) and e.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
            return "no-network", f"network unreachable ({e.strerror})"
    if "Name or service not known" in text or "nodename nor servname" in text:
        return "dns-error", "the host name does not resolve"
    if "Temporary failure in name resolution" in text:
        return "no-network", "name resolution failed (no DNS server reachable: offline or no network)"
    if "Connection refused" in text or "[Errno 111]" in text:
        return "connect-error", "connection refused (nothing listens on that port)"
    if "Network is unreachable" in text or "[Errno 101]" in text:
        return "no-network", "network unreachable"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "connect-error", f"the server broke the connection: {exc}"
    if isinstance(exc, httpx.UnsupportedProtocol):
        return "invalid", f"unsupported URL scheme: {exc}"
    return "connect-error", f"{type(exc).__name__}: {exc}"


# --------------------------------------------------------------------------- one target


_APT_FIELD = re.compile(r"^(Suite|Codename|Date):\s*(.+?)\s*$", re.MULTILINE)


def _validate(target: ProbeTarget, body: bytes, content_type: str) -> tuple[str, str, str]:
    """(status, reason, release_date ISO) for a 2xx body."""
    if target.kind == "pypi":
        lowered = body.lower()
        if b'"filename"' in lowered or b"<a " in lowered:
            return "ok", "", ""
        return (
            "invalid",
            (
                f"the simple page of {target.project!r} lists no files ({content_type or 'no content type'}): "
                f"not a working PEP 503/691 index"
            ),
            "",
        )
    if target.kind == "conda":
        if body.lstrip()[:1] == b"{":
            return "ok", "", ""
        return "invalid", "repodata.json is not JSON: not a conda channel", ""
    text = body.decode("utf-8", errors="replace")
    fields: dict[str, str] = {}
    for m in _APT_FIELD.finditer(text):
        fields.setdefault(m.group(1), m.group(2))
    if not fields:
        return "invalid", "InRelease has no Suite/Codename/Date fields: not an apt archive", ""
    names = {fields.get("Suite", ""), fields.get("Codename", "")}
    if target.suite not in names:
        return (
            "invalid",
            (f"InRelease is for {fields.get('Codename') or fields.get('Suite')!r}, not for suite {target.suite!r}"),
            "",
        )
    date = ""
    if "Date" in fields:
        try:
            import email.utils

            date = email.utils.parsedate_to_datetime(fields["Date"]).isoformat()
        except (TypeError, ValueError):
            date = ""
    return "ok", "", date


class _RedirectError(Exception):
    """A redirect chain the prober does not follow further (too long, a loop, a bad Location)."""

    status = "http-error"


#: Status codes whose ``Location`` a client follows (RFC 9110 section 15.4).
REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})


@contextmanager
def _follow(client: Any, policy: NetPolicy, url: str, headers: dict, per: float, trace: Callable):
    """GET ``url`` with ``client`` (no automatic redirects) and follow at most ``policy.max_redirects``
    redirects, each target checked by ``policy`` before it is requested; yields the final streamed
    response. Raises :class:`Refused` or :class:`_RedirectError`."""
    import httpx

    seen = {url}
    last: int | None = None  # status of the redirect that led here (a refusal after it: the server was reached)
    for hop in range(policy.max_redirects + 1):
        request = client.build_request(
            "GET", url, headers=headers, timeout=httpx.Timeout(per), extensions={"trace": trace}
        )
        try:
            resp = client.send(request, stream=True)
        except Refused as exc:  # an address of this hop's host (the guarded transport)
            exc.http_status = last
            raise
        except (httpx.InvalidURL, httpx.RemoteProtocolError) as exc:
            # httpx reads the Location of every redirect, even one it is not asked to follow
            if isinstance(exc, httpx.RemoteProtocolError) and "location header" not in str(exc):
                raise
            raise _RedirectError(f"a redirect from {urls.display(url)} to an unreadable Location ({exc})") from None
        location = resp.headers.get("location") if resp.status_code in REDIRECT_CODES else None
        if location is None:
            try:
                yield resp
            finally:
                resp.close()
            return
        resp.close()
        code = last = resp.status_code
        try:
            nxt = str(resp.url.join(location))
        except (httpx.InvalidURL, ValueError):
            raise _RedirectError(
                f"a redirect from {urls.display(url)} to an unreadable Location {urls.display(location)!r}"
            ) from None
        refused = policy.url_refused(nxt, redirect=True)
        if refused is not None:
            refused.http_status = code
            raise refused
        if nxt in seen:
            raise _RedirectError(f"redirect loop: HTTP {code} from {urls.display(url)} back to {urls.display(nxt)}")
        if hop == policy.max_redirects:
            raise _RedirectError(f"more than {policy.max_redirects} redirects (the last to {urls.display(nxt)})")
        seen.add(nxt)
        url = nxt


def probe_one(
    target: ProbeTarget,
    deadline: float,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    samples: int = DEFAULT_SAMPLES,
    ctx: ssl.SSLContext | None = None,
    policy: NetPolicy | None = None,
    transport: Any = None,
) -> MirrorProbe:
    """Probe ``target`` until done or ``deadline`` (``time.monotonic()`` seconds). Never raises.

    ``policy`` (default: :meth:`NetPolicy.from_env`) is checked for the first URL, every redirect
    target and every address connected to; ``transport`` replaces the guarded httpx transport (tests).
    """
    if is_local(target.base_url):
        return target.result("local", "local index (file:// or a path): read from disk, not probed")
    policy = policy or NetPolicy.from_env()
    why = blocked(target.base_url, policy.loopback_only)
    if why:
        return target.result("offline", why)
    refused = policy.url_refused(target.probe_url)
    if refused is not None:
        return target.result(refused.status, str(refused))
    import statistics

    import httpx  # only now: a local or offline run never pays for importing it

    marks: dict[str, float] = {}

    def trace(event: str, info: dict) -> None:
        marks[event] = time.monotonic()

    headers = {"User-Agent": USER_AGENT}
    if target.kind == "pypi":
        headers["Accept"] = PYPI_ACCEPT
    else:
        headers["Range"] = f"bytes=0-{MAX_BODY[target.kind] - 1}"
    limit = MAX_BODY[target.kind]
    ttfbs: list[float] = []
    connect_ms: float | None = None
    best_rate: float | None = None
    status_code: int | None = None
    verdict: tuple[str, str, str] = ("ok", "", "")
    per = timeout_s
    try:
        verify: Any = ctx if ctx is not None else True
        with httpx.Client(
            verify=verify,
            follow_redirects=False,  # followed by _follow, which checks every target against the policy
            http2=False,
            trust_env=False,  # the guarded transport reads the proxy variables itself, per hop
            transport=transport if transport is not None else netguard.guarded_transport(policy, verify),
        ) as client:
            for i in range(max(1, samples)):
                remaining = deadline - time.monotonic()
                if remaining <= 0.05:
                    if not ttfbs:
                        return target.result(
                            "timeout", "the overall probe budget ran out before it could start", connect_ms=connect_ms
                        )
                    break
                per = min(timeout_s, remaining)
                marks.clear()
                start = time.monotonic()
                with _follow(client, policy, target.probe_url, headers, per, trace) as resp:
                    got_headers = time.monotonic()
                    sent = marks.get("http11.send_request_headers.started", start)
                    head_done = marks.get("http11.receive_response_headers.complete", got_headers)
                    if "connection.connect_tcp.started" in marks:
                        end = marks.get("connection.start_tls.complete", marks.get("connection.connect_tcp.complete"))
                        if end is not None:
                            connect_ms = (end - marks["connection.connect_tcp.started"]) * 1000.0
                    ttfbs.append(max(0.0, head_done - sent) * 1000.0)
                    status_code = resp.status_code
                    if resp.status_code >= 400:
                        return target.result(
                            "http-error",
                            f"HTTP {resp.status_code} {resp.reason_phrase} for {urls.display(target.probe_url)}"
                            + (" (the mirror does not carry it)" if resp.status_code == 404 else ""),
                            http_status=status_code,
                            connect_ms=connect_ms,
                            samples_ms=tuple(ttfbs),
                            median_ms=statistics.median(ttfbs),
                        )
                    body = bytearray()
                    body_start = time.monotonic()
                    expected = resp.headers.get("content-length", "")
                    cut = False
                    try:
                        for chunk in resp.iter_bytes():
                            body += chunk
                            if len(body) >= limit:
                                break
                            if time.monotonic() > deadline:
                                cut = True
                                break
                    except (httpx.ReadTimeout, httpx.RemoteProtocolError):
                        cut = True  # headers came, the body stalled
                    elapsed = max(time.monotonic() - body_start, 1e-6)
                    if len(body) >= 1024:
                        rate = len(body) / 1024.0 / elapsed
                        best_rate = rate if best_rate is None else max(best_rate, rate)
                    if cut and len(body) < limit and (not expected.isdigit() or len(body) < int(expected)):
                        rate = len(body) / 1024.0 / elapsed
                        return target.result(
                            "slow",
                            f"answers, but the body came too slowly to check: {len(body) / 1024:.1f} KiB in "
                            f"{elapsed:.1f} s ({rate:.1f} KiB/s)",
                            http_status=status_code,
                            connect_ms=connect_ms,
                            samples_ms=tuple(ttfbs),
                            median_ms=statistics.median(ttfbs),
                            throughput_kib_s=rate,
                        )
                    if i == 0:
                        verdict = _validate(target, bytes(body[:limit]), resp.headers.get("content-type", ""))
                        if verdict[0] != "ok":
                            break
    except (Refused, _RedirectError) as exc:
        return target.result(
            exc.status,
            str(exc),
            http_status=getattr(exc, "http_status", None) or status_code,
            connect_ms=connect_ms,
            samples_ms=tuple(ttfbs),
            median_ms=statistics.median(ttfbs) if ttfbs else None,
        )
    except Exception as exc:
        status, reason = classify_error(exc, per, ctx)
        if status == "timeout" and per < timeout_s - 0.05:
            reason = f"no answer before the overall probe budget ran out ({per:.1f} s were left for this request)"
        return target.result(
            status,
            reason,
            http_status=status_code,
            connect_ms=connect_ms,
            samples_ms=tuple(ttfbs),
            median_ms=statistics.median(ttfbs) if ttfbs else None,
        )
    status, reason, date = verdict
    return target.result(
        status,
        reason,
        http_status=status_code,
        connect_ms=connect_ms,
        samples_ms=tuple(ttfbs),
        median_ms=statistics.median(ttfbs) if ttfbs else None,
        throughput_kib_s=best_rate,
        release_date=date,
    )


# --------------------------------------------------------------------------- many targets


def probe_all(
    targets: Sequence[ProbeTarget],
    budget_s: float = DEFAULT_BUDGET_S,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    samples: int = DEFAULT_SAMPLES,
    offline: bool = False,
    on_start: Callable[[ProbeTarget], None] | None = None,
    on_result: Callable[[MirrorProbe], None] | None = None,
    ctx: ssl.SSLContext | None = None,
    max_lag_hours: float = 24.0,
    policy: NetPolicy | None = None,
    transport: Any = None,
) -> list[MirrorProbe]:
    """Probe all ``targets`` concurrently; results in the order of ``targets``.

    ``offline`` makes every network target an ``offline`` result at once.
    Returns within ``budget_s`` plus a small grace (0.3 s) whatever the
    servers do. apt freshness is judged afterwards (:func:`apply_freshness`).
    ``policy`` and ``transport``: see :func:`probe_one` (a ``transport`` given here is
    shared by every target and closed with each one's client: a stub's job).
    """
    policy = policy or NetPolicy.from_env()
    if not offline and any(not is_local(t.base_url) for t in targets):
        import httpx  # noqa: F401 - load it before the clock starts, not inside the first probe

        ctx = ctx or make_ssl_context()  # offline or all local: nothing connects, no context needed
    start = time.monotonic()
    deadline = start + budget_s
    results: dict[int, MirrorProbe] = {}
    gate = threading.Semaphore(MAX_PARALLEL)
    threads: list[threading.Thread] = []

    def work(i: int, t: ProbeTarget) -> None:
        with gate:
            if on_start:
                on_start(t)
            res = probe_one(t, deadline, timeout_s, samples, ctx, policy, transport)
            results[i] = res
            if on_result:
                on_result(res)

    for i, t in enumerate(targets):
        if offline and not is_local(t.base_url):
            results[i] = t.result("offline", "--offline: not probed")
            continue
        why = blocked(t.base_url, policy.loopback_only)
        if why:
            results[i] = t.result("offline", why)
            continue
        th = threading.Thread(target=work, args=(i, t), daemon=True, name=f"probe-{t.name}")
        threads.append(th)
        th.start()
    for th in threads:
        th.join(max(0.0, deadline + 0.3 - time.monotonic()))
    out = []
    for i, t in enumerate(targets):
        res = results.get(i)
        if res is None:
            res = t.result("timeout", f"still unanswered when the overall budget of {budget_s:g} s ran out")
        out.append(res)
    return apply_freshness(out, max_lag_hours)


def apply_freshness(results: Sequence[MirrorProbe], max_lag_hours: float = 24.0) -> list[MirrorProbe]:
    """apt: mark mirrors whose InRelease ``Date:`` lags the official one by more than ``max_lag_hours`` as ``stale``.

    The reference is the newest official release date seen for the same
    archive path tail and suite (e.g. ``debian`` + ``bookworm``); without an
    official answer, lag stays unknown (None).
    """
    import datetime as dt

    def key(r: MirrorProbe) -> tuple[str, str]:
        return r.archive, r.probe_url.rsplit("/dists/", 1)[-1]

    refs: dict[tuple[str, str], dt.datetime] = {}
    for r in results:
        if r.ecosystem == "apt" and r.official and r.status == "ok" and r.release_date:
            d = dt.datetime.fromisoformat(r.release_date)
            if key(r) not in refs or d > refs[key(r)]:
                refs[key(r)] = d
    out = []
    for r in results:
        if r.ecosystem == "apt" and r.status == "ok" and r.release_date and key(r) in refs:
            lag = max(0.0, (refs[key(r)] - dt.datetime.fromisoformat(r.release_date)).total_seconds() / 3600.0)
            r = replace(r, lag_hours=round(lag, 2))
            if lag > max_lag_hours:
                r = replace(
                    r,
                    status="stale",
                    reason=(
                        f"InRelease is {lag:.0f} h older than the official archive's (limit {max_lag_hours:g} h): "
                        f"the mirror stopped syncing"
                    ),
                )
        out.append(r)
    return out


def rank(results: Iterable[MirrorProbe]) -> tuple[MirrorProbe, ...]:
    """Healthy first, fastest median first; then the unhealthy ones by name."""
    res = list(results)
    good = sorted((r for r in res if r.status == "ok" and r.median_ms is not None), key=lambda r: r.median_ms or 0.0)
    rest = sorted(
        (r for r in res if not (r.status == "ok" and r.median_ms is not None)),
        key=lambda r: (r.status != "local", r.name),
    )
    return tuple(good + rest)


NETWORK_DOWN = ("no-network", "dns-error")


def network_absent(results: Sequence[MirrorProbe]) -> bool:
    """True when every network probe failed before reaching a server (no DNS, no route)."""
    net = [r for r in results if r.status not in ("local", "offline")]
    return bool(net) and all(r.status in NETWORK_DOWN for r in net)
