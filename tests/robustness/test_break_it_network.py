"""The break-it matrix, issue 32 class "network" (item 6): hostile redirects from a mirror.

Servers on 127.0.0.1 (``FakeMirror`` with a redirect per path) send the prober to cloud metadata
endpoints, link-local and unspecified addresses, other schemes, other hosts, loops, endless
chains and unreadable ``Location`` headers. Every case runs the real CLI (`gpudoctor mirrors`,
`gpudoctor check pip.mirror`) under the harness of ``test_break_it.py`` (exit code, no
traceback, no secret, no changed file, no surviving child, within budget) and asserts the
per-mirror reason. Only 127.0.0.0/8 is contacted: every other target is refused before a
connection (the harness sets ``GPUDOCTOR_LOOPBACK_ONLY=1``; the metadata and link-local rules
hold without it, see tests/test_netguard.py).
"""

from __future__ import annotations

import json
import sys
from contextlib import ExitStack
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from hostile import URL_SECRET, Case, Ctx, Result, run_matrix

from gpudoctor.mirrors.testserver import FakeMirror

#: the break-it matrix's own CI step (`python -m pytest -m robustness`); its figures join the one
#: total in the terminal summary (hostile.FIGURES)
pytestmark = pytest.mark.robustness

#: path prefix on the hostile server -> Location ({path}: the request path)
ROUTES = {
    "/meta/": "http://169.254.169.254/latest/meta-data{path}",
    "/linklocal/": "http://169.254.7.7{path}",
    "/v6linklocal/": "http://[fe80::1]{path}",
    "/aws6/": "http://[fd00:ec2::254]/latest/",
    "/gce/": "http://metadata.google.internal/computeMetadata/v1/",
    "/gcedot/": "http://metadata.google.internal./computeMetadata/v1/",
    "/mapped/": "http://[::ffff:169.254.169.254]/latest/",
    "/nat64/": "http://[64:ff9b::a9fe:a9fe]/latest/",
    "/schemerel/": "//169.254.169.254/latest/",
    "/upper/": "HTTP://169.254.169.254/latest/",
    "/zero/": "http://0.0.0.0{path}",
    "/v6zero/": "http://[::]{path}",
    "/file/": "file:///etc/passwd",
    "/gopher/": "gopher://127.0.0.1:70/",
    "/ftp/": "ftp://127.0.0.1/pub/",
    "/ext/": "https://mirror.example.org{path}",
    "/decimal/": "http://2852039166/latest/",
    "/cred/": f"http://alice:{URL_SECRET}@169.254.169.254/latest/",
    "/query/": f"http://169.254.169.254/latest/?token={URL_SECRET}",
    "/longloc/": "http://169.254.169.254/" + "a" * 6000,
    "/loop/": "/loopback/six/",
    "/loopback/": "/loop/six/",
    "/self/": "{path}",
    "/empty/": "",
    "/chain/": "{path}x/",
    "/badport/": "http://[::1",
    "/script/": "javascript:alert(1)",
    "/escape/": "http://169.254.169.254/\x1b]0;pwned\x07",
    "/ok/": "/real{path}",
}
SERVERS: dict[str, str] = {}

META = "redirect to a cloud metadata address refused"
LINK = "redirect to a link-local address refused"
UNSPEC = "redirect to an unspecified address refused"
SCHEME = "redirect to a non-http(s) URL refused"
OTHER = "redirect to a non-loopback host refused"
UNREADABLE = "to an unreadable Location"

#: route -> (status, words of the reason) of the mirror served there
EXPECT = {
    "meta": ("refused", META),
    "linklocal": ("refused", LINK),
    "v6linklocal": ("refused", LINK),
    "aws6": ("refused", META),
    "gce": ("refused", META),
    "gcedot": ("refused", META),
    "mapped": ("refused", META),
    "nat64": ("refused", META),
    "schemerel": ("refused", META),
    "upper": ("refused", META),
    "zero": ("refused", UNSPEC),
    "v6zero": ("refused", UNSPEC),
    "file": ("refused", SCHEME),
    "gopher": ("refused", SCHEME),
    "ftp": ("refused", SCHEME),
    "ext": ("refused", OTHER),
    "decimal": ("refused", OTHER),
    "cred": ("refused", META),
    "query": ("refused", META),
    "longloc": ("refused", META),
    "loop": ("http-error", "redirect loop"),
    "self": ("http-error", "redirect loop"),
    "empty": ("http-error", "redirect loop"),
    "chain": ("http-error", "more than 5 redirects"),
    "badport": ("http-error", UNREADABLE),
    "script": ("http-error", UNREADABLE),
    "escape": ("http-error", UNREADABLE),
    "ok": ("ok", ""),  # healthy twin: a redirect inside the server
}
#: the redirect statuses other than 302, each with a few of the routes
CODES = {
    "301": ("meta", "file", "loop", "ok"),
    "303": ("meta", "ext"),
    "307": ("linklocal", "ok"),
    "308": ("gce", "ok"),
}


def _url(server: str, route: str) -> str:
    return f"{SERVERS[server]}/{route}/simple" if route != "twin" else f"{SERVERS['other-port']}/simple"


def mirrors(server: str, routes, fmt: str = "console"):
    """`gpudoctor mirrors pip` over a catalogue with one mirror per route (named after it)."""

    def setup(ctx: Ctx) -> None:
        ctx.write("root/etc/os-release", "ID=debian\nVERSION_CODENAME=bookworm\n")
        rows = [f'[[mirror]]\nname = "{r}"\npypi = "{_url(server, r)}"\nsource = "test"\n' for r in routes]
        cat = ctx.write("host/catalogue.toml", "replace = true\n\n" + "\n".join(rows))
        ctx.argv = [
            "mirrors",
            "pip",
            "--root",
            str(ctx.root),
            "--catalogue",
            str(cat),
            "--budget",
            "60",
            "--timeout",
            "20",
        ]
        if fmt == "json":
            ctx.argv += ["--format", "json"]

    return setup


def check(route: str):
    """`gpudoctor check pip.mirror` with the root's pip.conf pointing at the route."""

    def setup(ctx: Ctx) -> None:
        ctx.write("root/etc/os-release", "ID=debian\nVERSION_CODENAME=bookworm\n")
        ctx.write("root/etc/pip.conf", f"[global]\nindex-url = {_url('302', route)}\n")
        ctx.argv = ["check", "pip.mirror", "--root", str(ctx.root), "--mirror-budget", "8"]

    return setup


def _expected(route: str) -> tuple[str, str]:
    return ("ok", "") if route == "twin" else EXPECT[route]


def rows(routes):
    """Each route's mirror is one table row with its status and reason; no escape reaches the output."""

    def verify(r: Result, ctx: Ctx) -> None:
        assert "\x1b" not in r.text and "\x07" not in r.text
        for route in routes:
            status, why = _expected(route)
            lines = [ln for ln in r.out.splitlines() if ln.startswith(f"| {route} `127.0.0.1:")]
            assert len(lines) == 1, (route, r.out[-3000:])
            assert f"| {status} |" in lines[0] and why in lines[0], (route, lines[0][:500])

    return verify


def json_rows(routes):
    def verify(r: Result, ctx: Ctx) -> None:
        probes = {p["name"]: p for p in json.loads(r.out)["mirrors"]["rankings"]["pip"]}
        for route in routes:
            status, why = _expected(route)
            assert probes[route]["status"] == status and why in probes[route]["reason"], probes[route]
        assert "****@169.254.169.254" in probes["cred"]["reason"]

    return verify


ALL = (*EXPECT, "twin")  # twin: a redirect to another loopback port
NETWORK = [
    Case("mirrors-hostile-redirects-302", mirrors("302", ALL), (0,), budget_s=120, extra=rows(ALL)),
    Case("mirrors-hostile-redirects-json", mirrors("302", ALL, "json"), (0,), budget_s=120, extra=json_rows(ALL)),
    *(
        Case(f"mirrors-hostile-redirects-{code}", mirrors(code, routes), (0,), budget_s=120, extra=rows(routes))
        for code, routes in CODES.items()
    ),
    Case("check-redirect-to-metadata", check("meta"), (1,), budget_s=120, must_contain=("fail", META)),
    Case("check-redirect-to-file", check("file"), (1,), budget_s=120, must_contain=("fail", SCHEME)),
    Case("check-redirect-loop", check("loop"), (1,), budget_s=120, must_contain=("fail", "redirect loop")),
    Case(
        "check-redirect-healthy",
        check("ok"),
        (0,),
        budget_s=120,
        must_contain=("OK", "network: contacted 1 host: 127.0.0.1"),
    ),
]
#: hostile redirects tried (one mirror row or one check each)
INPUTS = 2 * len(ALL) + sum(len(r) for r in CODES.values()) + 4


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    with ExitStack() as stack:
        target = stack.enter_context(FakeMirror())
        SERVERS["302"] = stack.enter_context(FakeMirror(redirects=ROUTES)).url
        for code in (301, 303, 307, 308):
            SERVERS[str(code)] = stack.enter_context(FakeMirror(redirects=ROUTES, redirect_status=code)).url
        SERVERS["other-port"] = stack.enter_context(FakeMirror(redirect_to=target.url + "{path}")).url
        yield run_matrix(NETWORK, tmp_path_factory.mktemp("break-it-network"))


@pytest.mark.parametrize("case", NETWORK, ids=[c.id for c in NETWORK])
def test_case(matrix, case):
    r = matrix[case.id]
    assert r.rc in case.codes, f"exit {r.rc} not in {case.codes}\nstdout: {r.out[-2000:]}\nstderr: {r.err[-2000:]}"
    assert r.tracebacks == 0, r.text[-3000:]
    assert r.leaked == [], (r.leaked, r.text[-2000:])
    assert not r.hung, f"ran {r.wall_s:.1f} s, budget {case.budget_s} s"
    assert r.survivors == [], f"child processes survived: {r.survivors}"
    assert r.changed == [], f"files changed: {r.changed}"
    for word in case.must_contain:
        assert word in r.text, (word, r.text[-2000:])
    if case.extra:
        case.extra(r, r.ctx)


def test_matrix_figures(matrix, capsys):
    results = list(matrix.values())
    figures = {
        "runs": len(results),
        "inputs_tried": INPUTS,
        "tracebacks": sum(r.tracebacks for r in results),
        "hangs_past_budget": sum(r.hung for r in results),
        "leaks": sum(len(r.leaked) + len(r.survivors) for r in results),
        "files_corrupted": sum(1 for r in results if r.changed),
        "wrong_exit_codes": sum(1 for r in results if r.rc not in r.case.codes),
    }
    with capsys.disabled():
        print(f"\nbreak-it matrix (issue 32, network): {json.dumps(figures)}")
    assert figures["inputs_tried"] >= 60
    assert {k: v for k, v in figures.items() if k not in ("runs", "inputs_tried")} == dict.fromkeys(
        ["tracebacks", "hangs_past_budget", "leaks", "files_corrupted", "wrong_exit_codes"], 0
    )
