"""The prober's connection policy (gpudoctor.mirrors.netguard): every redirect target and every
resolved address is checked like the first URL (issue 32, item 6).

No traffic leaves 127.0.0.0/8: redirects to other hosts go through an ``httpx.MockTransport``
stub or are refused before any connection; host names are answered by a resolver stub, and
the ``no_lookups`` fixture makes any real name lookup (or a connection to a non-loopback
address) fail the test. Healthy twins run against real servers on 127.0.0.1.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time

import httpx
import pytest
from click.testing import CliRunner

from gpudoctor.cli import cli
from gpudoctor.collect.apt import connect_probe
from gpudoctor.mirrors.netguard import MAX_REDIRECTS, NetPolicy, _no_proxy, address_kind
from gpudoctor.mirrors.probe import ProbeTarget, probe_all, probe_one
from gpudoctor.mirrors.testserver import FakeMirror
from gpudoctor.testing import write_tree

PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture(autouse=True)
def no_lookups(monkeypatch):
    """Any lookup of a name, or of an address outside loopback, fails the test (and the probe)."""
    real = socket.getaddrinfo
    asked: list[str] = []

    def guarded(host, *args, **kw):
        name = host.decode() if isinstance(host, bytes) else str(host)
        asked.append(name)
        try:
            loopback = ipaddress.ip_address(name.split("%")[0]).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise AssertionError(f"real lookup of {name!r} in a test")
        return real(host, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", guarded)
    for var in PROXY_VARS:
        monkeypatch.delenv(var, raising=False)
        monkeypatch.delenv(var.upper(), raising=False)
    return asked


def stub_resolver(table: dict[str, list[str]], calls: list | None = None):
    def resolve(host: str, port: int) -> list[str]:
        if calls is not None:
            calls.append((host, port))
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return table[host]

    return resolve


def pypi(base: str, name: str = "m") -> ProbeTarget:
    return ProbeTarget(name, "pip", "pypi", base, "pypi")


SIMPLE = b'<!DOCTYPE html><html><body><a href="six-1.0.whl">six-1.0.whl</a></body></html>'


def stub(routes: dict[str, tuple[int, str]]) -> httpx.MockTransport:
    """A transport stub: URL -> (status, Location); any other URL answers a simple page."""
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        url = str(request.url)
        seen.append(url)
        if url in routes:
            code, location = routes[url]
            return httpx.Response(code, headers={"Location": location})
        return httpx.Response(200, content=SIMPLE, headers={"Content-Type": "text/html"})

    transport = httpx.MockTransport(handler)
    transport.seen = seen  # type: ignore[attr-defined]
    return transport


def one(target: ProbeTarget, policy: NetPolicy, transport=None, samples: int = 1):
    return probe_one(target, time.monotonic() + 5.0, 2.0, samples, policy=policy, transport=transport)


START = "http://127.0.0.1:8001/simple"
FIRST = START + "/six/"


# --------------------------------------------------------------------------- redirects (transport stub)


@pytest.mark.parametrize("loopback_only", [True, False])
@pytest.mark.parametrize(
    "location, kind",
    [
        ("http://169.254.169.254/latest/meta-data/", "cloud metadata address"),
        ("http://[fd00:ec2::254]/latest/", "cloud metadata address"),
        ("http://metadata.google.internal/computeMetadata/v1/", "cloud metadata address"),
        ("http://metadata.google.internal./computeMetadata/v1/", "cloud metadata address"),
        ("http://[::ffff:169.254.169.254]/latest/", "cloud metadata address"),
        ("http://[64:ff9b::a9fe:a9fe]/latest/", "cloud metadata address"),
        ("http://169.254.10.1/simple/six/", "link-local address"),
        ("http://[fe80::1]/simple/six/", "link-local address"),
        ("http://0.0.0.0:8001/simple/six/", "unspecified address"),
        ("http://[::]:8001/simple/six/", "unspecified address"),
        ("file:///etc/passwd", "non-http(s) URL"),
        ("gopher://127.0.0.1:70/", "non-http(s) URL"),
    ],
)
def test_redirect_to_a_forbidden_target_is_refused_in_every_mode(location, kind, loopback_only):
    transport = stub({FIRST: (302, location)})
    res = one(pypi(START), NetPolicy(loopback_only=loopback_only), transport)
    assert res.status == "refused" and not res.healthy
    article = "an" if kind[0] in "aeiou" else "a"
    assert res.reason.startswith(f"redirect to {article} {kind} refused ("), res.reason
    assert transport.seen == [FIRST] and res.http_status == 302  # the target itself was never requested


def test_redirect_to_another_host_is_refused_only_in_loopback_only_mode():
    target = "https://mirror.example.org/simple/six/"
    transport = stub({FIRST: (301, target)})
    res = one(pypi(START), NetPolicy(loopback_only=True), transport)
    assert res.status == "refused" and transport.seen == [FIRST]
    assert res.reason == (
        f"redirect to a non-loopback host refused ({target}): GPUDOCTOR_LOOPBACK_ONLY=1 allows only loopback hosts"
    )
    transport = stub({FIRST: (301, target)})
    res = one(pypi(START), NetPolicy(loopback_only=False), transport)
    assert res.status == "ok" and transport.seen == [FIRST, target]


def test_redirect_credentials_are_not_shown_in_the_reason():
    transport = stub({FIRST: (302, "http://alice:s3cret@169.254.169.254/latest/")})
    res = one(pypi(START), NetPolicy(), transport)
    assert res.status == "refused" and "s3cret" not in res.reason and "****@169.254.169.254" in res.reason


def test_relative_redirect_on_loopback_is_followed():
    transport = stub({FIRST: (307, "/other/six/")})
    res = one(pypi(START), NetPolicy(loopback_only=True), transport)
    assert res.status == "ok" and transport.seen == [FIRST, "http://127.0.0.1:8001/other/six/"]


@pytest.mark.parametrize("location", ["http://[::1", "javascript:alert(1)", "http://169.254.169.254/\x1b]0;x\x07"])
def test_unreadable_redirect_location_is_a_failed_probe(location):
    transport = stub({FIRST: (302, location)})
    res = one(pypi(START), NetPolicy(), transport)
    assert res.status == "http-error" and transport.seen == [FIRST]
    assert res.reason.startswith(f"a redirect from {FIRST} to an unreadable Location (") and "\x1b" not in res.reason


def test_redirect_loop_is_cut():
    other = "http://127.0.0.1:8002/simple/six/"
    transport = stub({FIRST: (302, other), other: (302, FIRST)})
    res = one(pypi(START), NetPolicy(loopback_only=True), transport)
    assert res.status == "http-error" and res.reason.startswith("redirect loop: HTTP 302 from " + other)
    assert transport.seen == [FIRST, other]


@pytest.mark.parametrize("hops, status", [(MAX_REDIRECTS, "ok"), (MAX_REDIRECTS + 1, "http-error")])
def test_redirect_chain_is_capped(hops, status):
    chain = [FIRST] + [f"http://127.0.0.1:8001/hop{i}/six/" for i in range(1, hops + 1)]
    transport = stub({chain[i]: (302, chain[i + 1]) for i in range(hops)})
    res = one(pypi(START), NetPolicy(loopback_only=True), transport)
    assert res.status == status, res.reason
    if status == "ok":
        assert transport.seen == chain
    else:
        assert res.reason.startswith(f"more than {MAX_REDIRECTS} redirects") and len(transport.seen) == hops


def test_first_url_is_checked_like_a_redirect_target():
    transport = stub({})
    policy = NetPolicy(loopback_only=False)
    res = one(pypi("http://169.254.169.254/simple"), policy, transport)
    assert (res.status, res.reason) == (
        "refused",
        "cloud metadata address refused (http://169.254.169.254/simple/six/)",
    )
    assert res.http_status is None  # nothing was sent
    res = one(pypi("ftp://127.0.0.1/simple"), policy, transport)
    assert res.status == "invalid" and "only http and https are probed" in res.reason
    assert transport.seen == []


# --------------------------------------------------------------------------- resolved addresses (resolver stub)


def test_a_name_resolving_to_link_local_is_refused_before_connecting(no_lookups):
    calls: list = []
    policy = NetPolicy(resolver=stub_resolver({"mirror.example.org": ["169.254.3.4"]}, calls))
    res = one(pypi("http://mirror.example.org/simple"), policy)
    assert res.status == "refused"
    assert res.reason == "link-local address refused (mirror.example.org resolves to 169.254.3.4)"
    assert calls == [("mirror.example.org", 80)] and no_lookups == [] and res.http_status is None


def test_a_name_with_one_metadata_address_among_others_is_refused():
    with FakeMirror() as server:
        port = server.url.rsplit(":", 1)[1]
        policy = NetPolicy(resolver=stub_resolver({"mirror.example.org": ["127.0.0.1", "169.254.169.254"]}))
        res = one(pypi(f"http://mirror.example.org:{port}/simple"), policy)
        assert res.status == "refused"
        assert res.reason == "cloud metadata address refused (mirror.example.org resolves to 169.254.169.254)"
        assert server.requests == []  # refused before the loopback address was tried


def test_a_name_is_resolved_once_and_the_checked_address_gets_the_request_with_its_host_header():
    calls: list = []
    with FakeMirror() as server:
        port = int(server.url.rsplit(":", 1)[1])
        policy = NetPolicy(resolver=stub_resolver({"mirror.example.org": ["127.0.0.1"]}, calls))
        res = one(pypi(f"http://mirror.example.org:{port}/simple"), policy, samples=3)
    assert res.status == "ok" and len(res.samples_ms) == 3
    assert calls == [("mirror.example.org", port)]  # one connection, kept alive: one lookup
    assert server.hosts == [f"mirror.example.org:{port}"] * 3


def test_tls_to_a_resolved_address_still_verifies_the_name():
    import ssl

    with FakeMirror(tls=True) as server:
        trust = ssl.create_default_context(cafile=server.cert_file)
        port = int(server.url.rsplit(":", 1)[1])
        policy = NetPolicy(resolver=stub_resolver({"mirror.example.org": ["127.0.0.1"]}))
        ok = probe_one(pypi(server.url + "/simple"), time.monotonic() + 5, 2.0, 1, trust, policy)
        named = probe_one(
            pypi(f"https://mirror.example.org:{port}/simple"), time.monotonic() + 5, 2.0, 1, trust, policy
        )
    assert ok.status == "ok", ok.reason  # the certificate is for 127.0.0.1
    assert named.status == "tls-error" and "mirror.example.org" in named.reason, named.reason  # SNI/check: the name
    assert server.requests == ["/simple/six/"]  # only the verified connection carried a request


def test_loopback_only_mode_refuses_a_loopback_name_that_resolves_elsewhere():
    res = one(pypi("http://localhost:9/simple"), NetPolicy(True, stub_resolver({"localhost": ["10.1.2.3"]})))
    assert res.status == "refused" and res.reason.startswith(
        "non-loopback address refused (localhost resolves to 10.1.2.3): GPUDOCTOR_LOOPBACK_ONLY=1"
    )


def test_unresolvable_name_is_a_dns_error_not_a_refusal():
    res = one(pypi("http://nowhere.example.org/simple"), NetPolicy(resolver=stub_resolver({})))
    assert res.status == "dns-error"


def test_redirect_to_a_name_resolving_to_metadata_is_refused():
    with FakeMirror(redirect_to="http://rebind.example.org/latest/meta-data/") as server:
        policy = NetPolicy(resolver=stub_resolver({"rebind.example.org": ["169.254.169.254"]}))
        res = one(pypi(server.url + "/simple"), policy)
        assert res.status == "refused"
        assert res.reason == "cloud metadata address refused (rebind.example.org resolves to 169.254.169.254)"
        assert server.requests == ["/simple/six/"] and res.http_status == 302


def test_proxy_from_the_environment_is_used_and_its_address_checked(monkeypatch, no_lookups):
    with FakeMirror() as proxy:  # answers the forwarded GET like the mirror would
        monkeypatch.setenv("http_proxy", proxy.url)
        res = one(pypi("http://mirror.example.org/simple"), NetPolicy(resolver=stub_resolver({})))
        assert res.status == "ok" and proxy.requests == ["http://mirror.example.org/simple/six/"]
        assert no_lookups == ["127.0.0.1"]  # the proxy resolved the mirror, not this machine
        monkeypatch.setenv("no_proxy", ".example.org")
        res = one(pypi("http://mirror.example.org/simple"), NetPolicy(resolver=stub_resolver({})))
        assert res.status == "dns-error" and len(proxy.requests) == 1
    monkeypatch.setenv("http_proxy", "http://169.254.169.254:3128")
    monkeypatch.delenv("no_proxy")
    res = one(pypi("http://mirror.example.org/simple"), NetPolicy(resolver=stub_resolver({})))
    assert (res.status, res.reason) == ("refused", "cloud metadata address refused (169.254.169.254)")


@pytest.mark.parametrize(
    "host, no_proxy, bypass",
    [
        ("mirror.example.org", "example.org", True),
        ("mirror.example.org", ".example.org", True),
        ("example.org", "*.example.org", True),
        ("badexample.org", "example.org", False),
        ("10.1.2.3", "10.0.0.0/8", True),
        ("10.1.2.3", "192.168.0.0/16,mirror", False),
        ("anything", " * ", True),
        ("[::1]", "::1", True),
    ],
)
def test_no_proxy_entries(host, no_proxy, bypass):
    assert _no_proxy(host, no_proxy) is bypass


@pytest.mark.parametrize(
    "address, loopback_only, kind",
    [
        ("127.0.0.9", True, None),
        ("::1", True, None),
        ("10.0.0.1", True, "non-loopback address"),
        ("10.0.0.1", False, None),
        ("169.254.0.1", False, "link-local address"),
        ("169.254.169.254", False, "cloud metadata address"),
        ("2002:a9fe:a9fe::1", False, "cloud metadata address"),
        ("fe80::abcd", False, "link-local address"),
        ("0.1.2.3", False, "unspecified address"),
        ("::", True, "unspecified address"),
    ],
)
def test_address_kinds(address, loopback_only, kind):
    assert address_kind(ipaddress.ip_address(address), loopback_only) == kind


# --------------------------------------------------------------------------- real servers on 127.0.0.1


def test_redirect_to_another_loopback_port_is_followed_and_measured():
    with FakeMirror() as b, FakeMirror(redirect_to=None) as a:
        a.redirect_to = b.url + "{path}"
        (res,) = probe_all([pypi(a.url + "/simple", "a")], budget_s=5.0, timeout_s=2.0)
    assert res.status == "ok", res.reason
    assert len(res.samples_ms) == 3 and res.median_ms is not None and res.connect_ms is not None
    assert a.requests == b.requests == ["/simple/six/"] * 3
    assert res.http_status == 200


def test_redirect_from_a_loopback_server_to_metadata_is_a_failed_probe_and_fails_the_check(tmp_path):
    with FakeMirror(redirect_to="http://169.254.169.254/latest/meta-data{path}") as server:
        root = tmp_path / "root"
        write_tree(
            root, {"/etc/os-release": "ID=debian\n", "/etc/pip.conf": f"[global]\nindex-url = {server.url}/simple\n"}
        )
        result = CliRunner().invoke(cli, ["check", "pip.mirror", "--root", str(root), "--format", "json"])
    assert result.exit_code == 1, result.output
    import json

    (finding,) = json.loads(result.stdout)["findings"]
    assert finding["status"] == "fail" and "redirect to a cloud metadata address refused" in finding["summary"]


def test_network_line_names_the_host_a_refused_redirect_came_from_and_not_a_refused_first_url(tmp_path, monkeypatch):
    def network(index: str, name: str) -> str:
        root = tmp_path / name
        write_tree(root, {"/etc/os-release": "ID=debian\n", "/etc/pip.conf": f"[global]\nindex-url = {index}\n"})
        result = CliRunner().invoke(cli, ["check", "pip.mirror", "--root", str(root)])
        assert result.exit_code == 1 and "cloud metadata address refused" in result.output, result.output
        return next(ln for ln in result.output.splitlines() if ln.startswith("network:"))

    with FakeMirror(redirect_to="http://169.254.169.254/latest/meta-data{path}") as server:
        assert network(server.url + "/simple", "redirect") == "network: contacted 1 host: 127.0.0.1"
    monkeypatch.setenv("GPUDOCTOR_LOOPBACK_ONLY", "0")  # refused on its address, before any connection
    assert network("http://169.254.169.254/simple", "first") == "network: none"


def test_mirrors_command_prints_a_refused_redirect_on_one_line(tmp_path):
    with FakeMirror(redirect_to="http://169.254.169.254/latest/meta-data{path}") as bad, FakeMirror() as good:
        cat = tmp_path / "catalogue.toml"
        cat.write_text(
            "replace = true\n\n"
            f'[[mirror]]\nname = "bad"\npypi = "{bad.url}/simple"\nsource = "test"\n\n'
            f'[[mirror]]\nname = "good"\npypi = "{good.url}/simple"\nsource = "test"\n'
        )
        root = tmp_path / "root"
        write_tree(root, {"/etc/os-release": "ID=debian\n"})
        result = CliRunner().invoke(cli, ["mirrors", "pip", "--root", str(root), "--catalogue", str(cat)])
    assert result.exit_code == 0, result.output  # a ranking, not a verdict: failing mirrors are rows (docs/mirrors.md)
    lines = [ln for ln in result.output.splitlines() if "refused" in ln]
    assert len(lines) == 1 and lines[0].startswith("| bad `127.0.0.1:") and "| refused |" in lines[0]
    assert lines[0].endswith(
        "| redirect to a cloud metadata address refused (http://169.254.169.254/latest/meta-data/simple/six/) |"
    )
    assert "Traceback" not in result.output
    good_row = next(ln for ln in result.output.splitlines() if ln.startswith("| good `127.0.0.1:"))
    assert "| ok |" in good_row


# --------------------------------------------------------------------------- the apt proxy probe


def test_apt_proxy_probe_refuses_a_metadata_proxy_and_reaches_a_loopback_one(monkeypatch):
    monkeypatch.setenv("GPUDOCTOR_LOOPBACK_ONLY", "0")
    assert connect_probe("http://169.254.169.254:3128", "deb.example.org", 443, 1.0) == (
        "error: cloud metadata address refused (169.254.169.254)"
    )
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    got: list[bytes] = []

    def answer() -> None:
        conn, _ = server.accept()
        with conn:
            got.append(conn.recv(512))
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")

    th = threading.Thread(target=answer, daemon=True)
    th.start()
    try:
        assert connect_probe(f"127.0.0.1:{server.getsockname()[1]}", "deb.example.org", 443, 2.0) == "ok"
    finally:
        th.join(5)
        server.close()
    assert got and got[0].startswith(b"CONNECT deb.example.org:443 HTTP/1.1")
