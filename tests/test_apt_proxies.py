"""apt through proxies and caches (gpudoctor.sources.apt): Acquire::http(s)::Proxy, *_proxy variables,
apt-cacher-ng's HTTPS/// form, https sources through a proxy that cannot tunnel them.

One-line and deb822 fixtures on fake roots, each with healthy twins; the
online cases ask a real proxy on 127.0.0.1 for a CONNECT tunnel.
"""

from __future__ import annotations

import socket
import threading

import pytest
from tests._fixcycle import _run, cycle

from gpudoctor.fixes import apt_mirror
from gpudoctor.model import Finding, FixRefused, Status
from gpudoctor.sources.apt import cache_https_form, parse_conf, proxy_for
from gpudoctor.testing import write_tree

DEBIAN = 'ID=debian\nVERSION_ID="12"\nVERSION_CODENAME=bookworm\n'
KEY = "/usr/share/keyrings/debian-archive-keyring.gpg"
ONE_LINE = (
    "deb https://ftp.debian.org/debian bookworm main\n"
    "deb https://ftp.debian.org/debian-security bookworm-security main\n"
)
DEB822 = (
    f"Types: deb\nURIs: https://ftp.debian.org/debian\nSuites: bookworm bookworm-updates\nComponents: main\n"
    f"Signed-By: {KEY}\n"
)
CACHE = 'Acquire::http::Proxy "http://cache.example.org:3142";\n'
DENIED = "HTTP/1.0 403 CONNECT denied (ask the admin to allow HTTPS tunnels)"


def root_with(tmp_path, sources: dict[str, str], conf: dict[str, str] | None = None):
    files = {"/etc/os-release": DEBIAN, "/etc/ssl/certs/ca-certificates.crt": "", **sources}
    files.update({f"/etc/apt/apt.conf.d/{k}": v for k, v in (conf or {}).items()})
    return write_tree(tmp_path, files)


def proxy_findings(findings):
    return [f for f in findings if f.check == "apt.sources" and "proxy" in f.summary]


# --------------------------------------------------------------------------- the model


def test_apt_conf_forms_and_which_proxy_a_uri_uses():
    conf_text = (
        '// cache for everything\nAcquire::http { Proxy "http://cache.example.org:3142"; };\n'
        'Acquire { https { Proxy::download.docker.com "DIRECT"; }; };\n'
        '/* Acquire::https::Proxy "http://old.example.org:8080"; */\n'
    )
    pairs = parse_conf(conf_text)
    assert pairs == [
        ("Acquire::http::Proxy", "http://cache.example.org:3142"),
        ("Acquire::https::Proxy::download.docker.com", "DIRECT"),
    ]
    conf = {k.lower(): (v, "/etc/apt/apt.conf.d/01proxy") for k, v in pairs}
    # an http proxy carries https too (Debian bug #557085) ...
    c = proxy_for("https://ftp.debian.org/debian", conf, {})
    assert c.proxy == "http://cache.example.org:3142" and c.cache and "Acquire::http::Proxy" in c.origin
    # ... unless a per-host DIRECT says otherwise
    assert proxy_for("https://download.docker.com/linux/debian", conf, {}).proxy == ""
    env = {"https_proxy": "http://proxy.example.org:8080", "no_proxy": "internal.example.org"}
    assert proxy_for("https://ftp.debian.org/debian", {}, env).proxy == "http://proxy.example.org:8080"
    assert proxy_for("https://apt.internal.example.org/x", {}, env).proxy == ""
    assert cache_https_form("https://ftp.debian.org/debian", "http://cache.example.org:3142") == (
        "http://cache.example.org:3142/HTTPS///ftp.debian.org/debian"
    )


# --------------------------------------------------------------------------- offline: apt-cacher-ng by its port


@pytest.mark.parametrize(
    "sources",
    [{"/etc/apt/sources.list": ONE_LINE}, {"/etc/apt/sources.list.d/debian.sources": DEB822}],
    ids=["one-line", "deb822"],
)
def test_https_sources_through_apt_cacher_ng_warn_with_the_remedies(tmp_path, sources):
    root = root_with(tmp_path, sources, {"01proxy": CACHE})
    c = cycle(root, ["apt.sources"], "apt.mirror")
    (f,) = proxy_findings(c.before)
    assert f.status is Status.WARN and "apt-cacher-ng" in f.summary and "/etc/apt/apt.conf.d/01proxy" in f.summary
    assert "http://cache.example.org:3142/HTTPS///ftp.debian.org/debian" in f.explanation
    assert 'Acquire::https::Proxy::ftp.debian.org "DIRECT";' in f.explanation
    assert "PassThroughPattern" in f.explanation


@pytest.mark.parametrize(
    "sources, conf",
    [
        # the cache's own form: no tunnel
        (
            {
                "/etc/apt/sources.list": "deb http://cache.example.org:3142/HTTPS///ftp.debian.org/debian bookworm main\n"
            },
            {"01proxy": CACHE},
        ),
        # https direct
        ({"/etc/apt/sources.list.d/debian.sources": DEB822}, {"01proxy": CACHE + 'Acquire::https::Proxy "DIRECT";\n'}),
        # http sources through the cache: what apt-cacher-ng is for
        ({"/etc/apt/sources.list": ONE_LINE.replace("https://", "http://")}, {"01proxy": CACHE}),
        # a backup file apt does not read
        ({"/etc/apt/sources.list": ONE_LINE}, {"01proxy.disabled": CACHE}),
    ],
    ids=["https-form", "https-direct", "http-sources", "disabled-file"],
)
def test_twins_without_a_tunnel_problem(tmp_path, sources, conf):
    root = root_with(tmp_path, sources, conf)
    c = cycle(root, ["apt.sources"], "apt.mirror")
    assert proxy_findings(c.before) == []


# --------------------------------------------------------------------------- online: ask the proxy for a tunnel


class ConnectProxy:
    """A proxy on 127.0.0.1 that answers every CONNECT with ``status_line``."""

    def __init__(self, status_line: str):
        self.status_line = status_line
        self.requests: list[str] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = conn.recv(4096).decode("latin-1")
                self.requests.append(data.split("\r\n", 1)[0])
                conn.sendall(f"{self.status_line}\r\nContent-Length: 0\r\n\r\n".encode())

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.sock.close()


def test_proxy_that_refuses_the_tunnel_fails_deb822_and_env(tmp_path):
    with ConnectProxy(DENIED) as proxy:
        root = root_with(tmp_path, {"/etc/apt/sources.list.d/debian.sources": DEB822})
        c = cycle(root, ["apt.sources"], "apt.mirror", env={"https_proxy": proxy.url}, offline=False)
        assert set(proxy.requests) == {"CONNECT ftp.debian.org:443 HTTP/1.1"}  # one per run
    (f,) = proxy_findings(c.before)
    assert f.status is Status.FAIL and "refuses to tunnel" in f.summary and "403 CONNECT denied" in f.summary
    assert "https_proxy in the environment" in f.explanation


def test_proxy_that_tunnels_is_fine_one_line(tmp_path):
    with ConnectProxy("HTTP/1.1 200 Connection established") as proxy:
        root = root_with(
            tmp_path, {"/etc/apt/sources.list": ONE_LINE}, {"01proxy": f'Acquire::https::Proxy "{proxy.url}";\n'}
        )
        c = cycle(root, ["apt.sources"], "apt.mirror", offline=False)
        assert proxy.requests
    assert proxy_findings(c.before) == []


# --------------------------------------------------------------------------- the mirror fix does not break apt


def test_mirror_fix_to_https_through_the_cache_refuses_and_http_twin_writes(tmp_path):
    # planned on request (`gpudoctor fix apt.mirror --mirror URL`): a fix that cannot leave apt working says so
    root = root_with(tmp_path, {"/etc/apt/sources.list": ONE_LINE.replace("https://", "http://")}, {"01proxy": CACHE})
    report, _, _ = _run(root, ["apt.sources"], {}, "/home/user", True, {}, None)
    request = Finding(check="apt.mirror", status=Status.OK, summary="on request")
    with pytest.raises(FixRefused, match="apt-cacher-ng.*nothing was written"):
        apt_mirror.plan(report.facts, request, {"mirror": "https://mirror.example.org/debian"})
    plan = apt_mirror.plan(report.facts, request, {"mirror": "http://mirror.example.org/debian", "allow-insecure": "1"})
    assert plan is not None and plan.changes_anything
