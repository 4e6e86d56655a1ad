"""The concurrent prober and the catalogue, against real HTTP(S) servers on 127.0.0.1 only.

Servers (gpudoctor.mirrors.testserver.FakeMirror) inject delays, 404/500
answers, stalled connections, an empty simple page, a self-signed TLS
certificate, an InRelease for the wrong suite and a stale InRelease. No
request leaves 127.0.0.0/8; the built-in catalogue is parsed, never probed.
"""

from __future__ import annotations

import socket
from contextlib import ExitStack

import httpx
import pytest

from gpudoctor.mirrors import catalogue
from gpudoctor.mirrors.catalogue import CatalogueError, from_text
from gpudoctor.mirrors.probe import (
    ProbeTarget,
    classify_error,
    network_absent,
    probe_all,
    rank,
)
from gpudoctor.mirrors.testserver import FakeMirror


def pypi(name, server, **kw):
    return ProbeTarget(name, "pip", "pypi", server.url + "/simple", "pypi", **kw)


def apt(name, server, suite="bookworm", **kw):
    return ProbeTarget(name, "apt", "debian", server.url, "apt", suite=suite, **kw)


@pytest.mark.slow
def test_pypi_statuses_and_ranking():
    specs = {
        "fast": dict(),
        "slow": dict(delay_ms=300),
        "json": dict(json_pages=True, delay_ms=20),
        "missing": dict(fault="404"),
        "broken": dict(fault="500"),
        "stalled": dict(fault="stall"),
        "empty": dict(fault="empty"),
        "selfsigned": dict(tls=True),
    }
    with ExitStack() as stack:
        servers = {n: stack.enter_context(FakeMirror(**kw)) for n, kw in specs.items()}
        targets = [pypi(n, s) for n, s in servers.items()]
        results = {r.name: r for r in probe_all(targets, budget_s=4.0, timeout_s=1.5)}
        assert servers["fast"].requests == ["/simple/six/"] * 3
    assert {n: r.status for n, r in results.items()} == {
        "fast": "ok",
        "slow": "ok",
        "json": "ok",
        "missing": "http-error",
        "broken": "http-error",
        "stalled": "timeout",
        "empty": "invalid",
        "selfsigned": "tls-error",
    }
    assert results["missing"].http_status == 404 and "does not carry" in results["missing"].reason
    assert results["broken"].http_status == 500
    assert "stalled" in results["stalled"].reason
    assert "self-signed" in results["selfsigned"].reason
    assert "lists no files" in results["empty"].reason
    fast = results["fast"]
    assert len(fast.samples_ms) == 3 and fast.connect_ms is not None and fast.throughput_kib_s > 0
    assert results["slow"].median_ms >= 300
    order = [r.name for r in rank(results.values())]
    assert order[:3] == ["fast", "json", "slow"]
    assert set(order[3:]) == {"missing", "broken", "stalled", "empty", "selfsigned"}


@pytest.mark.slow
def test_apt_suite_and_freshness():
    with ExitStack() as stack:
        official = stack.enter_context(FakeMirror(prefix="/debian", release_age_hours=1))
        fresh = stack.enter_context(FakeMirror(prefix="/debian", release_age_hours=3))
        stale = stack.enter_context(FakeMirror(prefix="/debian", release_age_hours=80))
        wrong = stack.enter_context(FakeMirror(prefix="/debian", fault="wrong-suite"))
        elsewhere = stack.enter_context(FakeMirror(prefix="/debian"))
        targets = [
            apt("official", official, official=True),
            apt("fresh", fresh),
            apt("stale", stale),
            apt("wrong", wrong),
            ProbeTarget(
                "nolayout", "apt", "debian", elsewhere.url[: -len("/debian")] + "/deb", "apt", suite="bookworm"
            ),
        ]
        results = {r.name: r for r in probe_all(targets, budget_s=4.0, timeout_s=2.0, max_lag_hours=24)}
    assert {n: r.status for n, r in results.items()} == {
        "official": "ok",
        "fresh": "ok",
        "stale": "stale",
        "wrong": "invalid",
        "nolayout": "http-error",
    }
    assert results["official"].probe_url.endswith("/debian/dists/bookworm/InRelease")
    assert 1.5 < results["fresh"].lag_hours < 2.5
    assert "older than the official" in results["stale"].reason
    assert "'buster'" in results["wrong"].reason
    assert results["official"].release_date.startswith("20")


def test_budget_ends_stalled_probes():
    with FakeMirror(fault="stall") as a, FakeMirror(fault="stall") as b:
        results = probe_all([pypi("a", a), pypi("b", b)], budget_s=0.5, timeout_s=3.0)
    assert [r.status for r in results] == ["timeout", "timeout"]
    assert all("budget" in r.reason for r in results)


def test_offline_and_local_indexes_send_nothing():
    with FakeMirror() as server:
        results = probe_all(
            [
                pypi("net", server),
                ProbeTarget("disk", "pip", "pypi", "file:///srv/wheelhouse/simple", "pypi"),
                ProbeTarget("path", "pip", "pypi", "/srv/simple", "pypi"),
            ],
            offline=True,
        )
        assert server.requests == []
    assert [r.status for r in results] == ["offline", "local", "local"]


def test_connection_refused_is_a_connect_error():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    target = ProbeTarget("gone", "pip", "pypi", f"http://127.0.0.1:{port}/simple", "pypi")
    (result,) = probe_all([target], budget_s=2.0, timeout_s=1.0)
    assert result.status == "connect-error" and "refused" in result.reason
    assert not network_absent([result])


@pytest.mark.parametrize(
    "err, status",
    [
        (socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution"), "no-network"),
        (socket.gaierror(socket.EAI_NONAME, "Name or service not known"), "dns-error"),
        (OSError(101, "Network is unreachable"), "no-network"),
    ],
)
def test_network_failures_are_classified(err, status):
    exc = httpx.ConnectError(str(err))
    exc.__cause__ = err
    assert classify_error(exc, 3.0, None)[0] == status


def test_network_absent_means_every_probe_failed_before_a_server():
    t = ProbeTarget("x", "pip", "pypi", "https://mirror.example.org/simple", "pypi")
    down = [t.result("no-network", "offline"), t.result("dns-error", "nx")]
    assert network_absent(down)
    assert not network_absent(down + [t.result("http-error", "HTTP 500")])
    assert not network_absent([t.result("local", "disk")])


# --------------------------------------------------------------------------- catalogue


def test_builtin_catalogue_rows_have_sources_and_official_references():
    cat = catalogue.builtin()
    assert all(m.source for m in cat.mirrors)
    for archive in catalogue.ARCHIVES:
        rows = cat.for_archive(archive)
        assert rows, archive
        assert any(m.official for m in rows), f"no official {archive} row"
    assert all(m.urls[a].startswith("https://") for m in cat.mirrors if not m.official for a in m.urls)
    names = [m.name for m in cat.mirrors]
    assert len(names) == len(set(names))


def test_catalogue_file_merges_or_replaces():
    add = from_text(
        '[[mirror]]\nname = "corp"\npypi = "https://pypi.corp.example.org/simple/"\nsource = "ours"\n', "c.toml"
    )
    assert add.by_name("corp").urls == {"pypi": "https://pypi.corp.example.org/simple"}
    assert add.by_name("tuna") is not None and add.origin == "built-in + c.toml"
    override = from_text('[[mirror]]\nname = "TUNA"\npypi = "https://t.example.org/simple"\n', "c.toml")
    assert override.by_name("tuna").urls == {"pypi": "https://t.example.org/simple"}
    only = from_text(
        'replace = true\n[probe]\npypi_project = "idna"\n[[mirror]]\nname = "x"\n'
        'debian = "http://127.0.0.1:1/debian"\n',
        "c.toml",
    )
    assert [m.name for m in only.mirrors] == ["x"] and only.pypi_project == "idna"


@pytest.mark.parametrize(
    "text, message",
    [
        ("[[mirror]]\npypi = 'https://x.example.org'\n", "missing 'name'"),
        ("[[mirror]]\nname = 'a'\npypi = 'ftp://x.example.org'\n", r"not an http\(s\) or file URL"),
        ("[[mirror]]\nname = 'a'\npipy = 'https://x.example.org'\n", "unknown field"),
        ("[[mirror]]\nname = 'a'\n", "no archive URL"),
        (
            "[[mirror]]\nname = 'a'\npypi = 'https://x.example.org'\n[[mirror]]\nname = 'A'\npypi = 'https://y.example.org'\n",
            "duplicate",
        ),
        ("mirror = [", "not valid TOML"),
    ],
)
def test_malformed_catalogue_is_refused_with_the_row(text, message):
    with pytest.raises(CatalogueError, match=message):
        from_text(text, "bad.toml")


def test_tls_failure_on_a_system_without_ca_certificates_says_so(monkeypatch):
    import ssl

    empty = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # no CA loaded, like a slim image
    paths = ssl.get_default_verify_paths()
    monkeypatch.setattr(ssl, "get_default_verify_paths", lambda: paths._replace(cafile=None))
    with FakeMirror(tls=True) as server:
        (result,) = probe_all([pypi("slim", server)], budget_s=3.0, timeout_s=2.0, ctx=empty)
    assert result.status == "tls-error" and "ca-certificates" in result.reason


def test_loopback_only_guard_blocks_real_hosts_without_any_lookup(monkeypatch):
    monkeypatch.setenv("GPUDOCTOR_LOOPBACK_ONLY", "1")
    with FakeMirror() as server:
        results = probe_all(
            [
                ProbeTarget("real", "pip", "pypi", "https://mirror.example.org/simple", "pypi"),
                ProbeTarget("v6", "pip", "pypi", "http://[::2]/simple", "pypi"),
                pypi("local", server),
            ],
            budget_s=2.0,
            timeout_s=1.0,
        )
    assert [r.status for r in results] == ["offline", "offline", "ok"]
    assert "GPUDOCTOR_LOOPBACK_ONLY" in results[0].reason
