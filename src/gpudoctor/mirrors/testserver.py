"""Fake package mirrors on 127.0.0.1 for tests and benchmarks (never a real host).

:class:`FakeMirror` serves, on an ephemeral loopback port, whatever the
prober asks for: a PEP 503 simple page (``/<anything>/<project>/``), an apt
``InRelease`` (``.../dists/<suite>/InRelease``) and a conda
``repodata.json``. Faults are injected per server: a delay before the
response headers (ms), ``404``/``500`` answers, a stalled connection (accepts,
never answers), an empty simple page, an ``InRelease`` for another suite or
with an old ``Date:``, and TLS with a self-signed certificate (made with the
``openssl`` command).
"""

from __future__ import annotations

import datetime as dt
import json
import ssl
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

__all__ = ["FakeMirror", "self_signed_cert"]


def self_signed_cert(directory: str) -> tuple:
    """(certfile, keyfile) of a fresh self-signed certificate for 127.0.0.1 (needs ``openssl``)."""
    cert, key = str(Path(directory, "cert.pem")), str(Path(directory, "key.pem"))
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            key,
            "-out",
            cert,
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up mid-response (a prober at its budget) is normal here:
    no traceback on stderr, where it would mix into the output under test."""

    def handle_error(self, request, client_address) -> None:
        pass


class FakeMirror:
    """One fake mirror server. Use as a context manager; ``url`` is its base URL.

    Args:
        delay_ms: sleep before sending the response headers, ms.
        fault: None, ``404``, ``500``, ``stall``, ``empty`` (simple page without
            files), ``wrong-suite`` (InRelease for another suite).
        release_age_hours: InRelease ``Date:`` this many hours before now.
        tls: serve https with a self-signed certificate.
        prefix: path prefix of the archive (``/debian``, ``/pypi/simple``);
            requests outside it get 404.
        body_delay_ms: send the body in 256-byte pieces, pausing this long before each.
        redirect_to: answer every request with ``redirect_status`` and this ``Location``
            (``{path}`` in it becomes the request path).
        redirect_status: the status of those redirects (302).
        redirects: path prefix -> ``Location`` (``{path}`` as above): a request whose path starts
            with a prefix (the longest) is redirected, the others are answered as usual.

    ``requests`` lists the paths asked for, ``hosts`` the ``Host`` header of each request.
    """

    def __init__(
        self,
        delay_ms: float = 0.0,
        fault: str | None = None,
        release_age_hours: float = 1.0,
        tls: bool = False,
        prefix: str = "",
        json_pages: bool = False,
        body_delay_ms: float = 0.0,
        redirect_to: str | None = None,
        redirect_status: int = 302,
        redirects: dict[str, str] | None = None,
    ):
        self.delay_ms = delay_ms
        self.fault = fault
        self.release_age_hours = release_age_hours
        self.tls = tls
        self.prefix = prefix.rstrip("/")
        self.json_pages = json_pages
        self.body_delay_ms = body_delay_ms
        self.redirect_to = redirect_to
        self.redirect_status = redirect_status
        self.redirects = dict(redirects or {})
        self.requests: list[str] = []
        self.hosts: list[str] = []
        self._closing = threading.Event()
        self._tmp: tempfile.TemporaryDirectory | None = None
        mirror = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def do_HEAD(self) -> None:
                self.do_GET(head=True)

            def do_GET(self, head: bool = False) -> None:
                mirror.requests.append(self.path)
                mirror.hosts.append(self.headers.get("Host", ""))
                location = mirror._location(self.path)
                if location is not None:
                    self.send_response(mirror.redirect_status)
                    self.send_header("Location", location)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if mirror.fault == "stall":
                    mirror._closing.wait(60)
                    self.close_connection = True
                    return
                if mirror.delay_ms:
                    time.sleep(mirror.delay_ms / 1000.0)
                status, ctype, body = mirror._answer(self.path)
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head and mirror.body_delay_ms:
                    # a slow body: headers at once, then 256-byte pieces with a pause before each
                    for k in range(0, len(body), 256):
                        if mirror._closing.wait(mirror.body_delay_ms / 1000.0):
                            return
                        try:
                            self.wfile.write(body[k : k + 256])
                            self.wfile.flush()
                        except OSError:
                            return
                elif not head:
                    self.wfile.write(body)

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        if tls:
            self._tmp = tempfile.TemporaryDirectory(prefix="gpudoctor-tls-")
            cert, key = self_signed_cert(self._tmp.name)
            sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            sctx.load_cert_chain(cert, key)
            self._server.socket = sctx.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """Base URL including the prefix, e.g. ``http://127.0.0.1:40123/debian``."""
        host, port = self._server.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host  # AF_UNIX only; ours is AF_INET
        return f"{'https' if self.tls else 'http'}://{host}:{port}{self.prefix}"

    @property
    def cert_file(self) -> str | None:
        """The self-signed certificate (PEM) of a ``tls`` server, for a client to trust; None without TLS."""
        return str(Path(self._tmp.name, "cert.pem")) if self._tmp is not None else None

    def _location(self, path: str) -> str | None:
        """Where ``path`` is redirected to, or None."""
        if self.redirect_to is not None:
            return self.redirect_to.replace("{path}", path)
        prefix = max((p for p in self.redirects if path.startswith(p)), key=len, default=None)
        return None if prefix is None else self.redirects[prefix].replace("{path}", path)

    def _answer(self, path: str) -> tuple:
        if self.fault in ("404", "500"):
            code = int(self.fault)
            return code, "text/plain", f"{code}\n".encode()
        if self.prefix and not path.startswith(self.prefix + "/"):
            return 404, "text/plain", b"not here\n"
        if "/dists/" in path and path.endswith("/InRelease"):
            suite = path.split("/dists/", 1)[1].rsplit("/", 1)[0]
            if self.fault == "wrong-suite":
                suite = "buster"
            date = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=self.release_age_hours)
            text = (
                f"-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\nOrigin: Fake\nLabel: Fake\n"
                f"Suite: {suite}\nCodename: {suite.split('-')[0] if '-' not in suite else suite}\n"
                f"Date: {date.strftime('%a, %d %b %Y %H:%M:%S UTC')}\nArchitectures: amd64 arm64\n"
                f"Components: main\nDescription: fake archive\nSHA256:\n" + " 0 0 main/binary-amd64/Packages\n" * 200
            )
            return 200, "text/plain", text.encode()
        if path.endswith("/repodata.json"):
            body = json.dumps(
                {"info": {"subdir": "noarch"}, "packages": {f"pkg-{i}.tar.bz2": {"version": "1"} for i in range(2000)}}
            )
            return 200, "application/json", body.encode()
        if path.endswith("/"):
            project = path.rstrip("/").rsplit("/", 1)[-1]
            if self.fault == "empty":
                return 200, "text/html", b"<!DOCTYPE html><html><body></body></html>\n"
            if self.json_pages:
                doc = {
                    "meta": {"api-version": "1.0"},
                    "name": project,
                    "files": [
                        {"filename": f"{project}-1.{i}.0-py3-none-any.whl", "url": f"f{i}.whl", "hashes": {}}
                        for i in range(40)
                    ],
                }
                return 200, "application/vnd.pypi.simple.v1+json", json.dumps(doc).encode()
            links = "".join(
                f'<a href="../../files/{project}-1.{i}.0-py3-none-any.whl">{project}-1.{i}.0-py3-none-any.whl</a><br/>\n'
                for i in range(40)
            )
            return 200, "text/html", f"<!DOCTYPE html><html><body>\n{links}</body></html>\n".encode()
        return 404, "text/plain", b"not found\n"

    def __enter__(self) -> FakeMirror:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving, release stalled handlers, remove the certificate."""
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
        if self._tmp is not None:
            self._tmp.cleanup()
