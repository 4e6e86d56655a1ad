"""pip/uv/conda/apt.mirror verdicts from facts, and the whole path through the CLI on local servers.

End-to-end tests run `gpudoctor check` / `gpudoctor mirrors` on fake roots whose
apt sources, uv.toml and .condarc point at FakeMirror servers on 127.0.0.1,
with a catalogue FILE (replace = true) of local servers only.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudoctor.checks import apt_mirror, conda_mirror, pip_mirror, uv_mirror
from gpudoctor.checks._mirrors import ranking_table
from gpudoctor.cli import cli
from gpudoctor.facts.mirrors import MirrorProbe, MirrorsFacts
from gpudoctor.fixes import apt_mirror as apt_fix
from gpudoctor.mirrors.testserver import FakeMirror
from gpudoctor.model import Status
from gpudoctor.testing import make_facts, write_tree

DEBIAN_OS = 'ID=debian\nVERSION_ID="12"\nVERSION_CODENAME=bookworm\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n'


def probe(name="m", eco="apt", status="ok", median=100.0, role="candidate", url=None, reason="", **kw):
    base = url or f"https://{name}.example.org/debian"
    return MirrorProbe(
        name=name,
        ecosystem=eco,
        archive="debian",
        base_url=base,
        probe_url=base + "/dists/x/InRelease",
        role=role,
        official=kw.pop("official", False),
        status=status,
        reason=reason,
        median_ms=median if status == "ok" else None,
        samples_ms=(median,) if status == "ok" else (),
        **kw,
    )


def mirrors(configured=(), rankings=None, offline=False):
    return make_facts(
        mirrors=MirrorsFacts(
            offline=offline,
            ranked=rankings is not None,
            budget_s=5.0,
            catalogue_origin="test",
            catalogue=(),
            configured=tuple(configured),
            rankings=rankings or {},
        )
    )


def test_failing_configured_index_fails_and_offers_the_fastest():
    conf = probe("configured", role="configured", status="http-error", reason="HTTP 500 Internal Server Error")
    facts = mirrors([conf], {"apt": (probe("fast", median=40.0), probe("slow", median=400.0))})
    (f,) = apt_mirror.evaluate(facts)
    assert f.status is Status.FAIL and "HTTP 500" in f.summary
    assert "--mirror fastest" in f.explanation and f.fixes == ("apt.mirror",)
    assert "| fast `fast.example.org` | 40 |" in f.explanation


def test_two_times_and_200_ms_faster_warns_else_ok():
    conf = probe("configured", role="configured", median=500.0)
    (f,) = apt_mirror.evaluate(mirrors([conf], {"apt": (probe("fast", median=250.0),)}))
    assert f.status is Status.WARN and f.summary.startswith("fast answers in 250 ms")
    (f,) = apt_mirror.evaluate(mirrors([conf], {"apt": (probe("near", median=310.0),)}))  # 190 ms faster only
    assert f.status is Status.OK
    conf = probe("configured", role="configured", median=150.0)
    (f,) = apt_mirror.evaluate(mirrors([conf], {"apt": (probe("fast", median=10.0),)}))  # 15x but 140 ms
    assert f.status is Status.OK


def test_unhealthy_candidates_never_win():
    conf = probe("configured", role="configured", median=900.0)
    ranking = (probe("stale", status="stale", reason="72 h older"), probe("ok", median=800.0))
    (f,) = apt_mirror.evaluate(mirrors([conf], {"apt": ranking}))
    assert f.status is Status.OK


def test_offline_and_no_network_skip_with_reason():
    from gpudoctor import engine

    findings = engine.evaluate([uv_mirror.CHECK], mirrors(offline=True))
    assert findings[0].status is Status.SKIP and findings[0].summary == uv_mirror.NOT_CONFIGURED
    down = probe("configured", eco="conda", role="configured", status="no-network", reason="name resolution failed")
    findings = engine.evaluate([conda_mirror.CHECK], mirrors([down]))
    assert findings[0].status is Status.SKIP and "no network" in findings[0].summary
    findings = engine.evaluate([pip_mirror.CHECK], mirrors())
    assert findings[0].status is Status.SKIP


def test_local_index_is_ok_without_probing():
    conf = MirrorProbe(
        "configured",
        "pip",
        "pypi",
        "file:///srv/simple",
        "file:///srv/simple/six/",
        "configured",
        False,
        "local",
        "local index",
    )
    (f,) = pip_mirror.evaluate(mirrors([conf]))
    assert f.status is Status.OK and "local" in f.summary


def test_ranking_table_columns():
    table = ranking_table(
        [
            probe("a", median=12.0, throughput_kib_s=2048.0, lag_hours=0.2),
            probe("b", status="tls-error", reason="TLS certificate verification failed"),
        ]
    )
    lines = table.splitlines()
    assert lines[0] == "| mirror | median ms | throughput | status | freshness | why skipped |"
    assert "| 12 | 2.0 MiB/s | ok | current |" in lines[2]
    assert "tls-error" in lines[3] and "TLS certificate" in lines[3]


# --------------------------------------------------------------------------- end to end, local servers only


def catalogue_file(tmp: Path, servers: dict, archive: str, suffix: str = "") -> Path:
    rows = ["replace = true", '[probe]\nconda_subdir = "noarch"']
    for name, (server, official) in servers.items():
        rows.append(
            f'[[mirror]]\nname = "{name}"\n{archive} = "{server.url}{suffix}"\n'
            f'official = {str(official).lower()}\nsource = "test"'
        )
    path = tmp / "catalogue.toml"
    path.write_text("\n\n".join(rows) + "\n")
    return path


def debian_root(tmp: Path, uri: str) -> Path:
    root = tmp / "root"
    write_tree(
        root,
        {
            "/etc/os-release": DEBIAN_OS,
            "/etc/ssl/certs/ca-certificates.crt": "",
            "/etc/apt/sources.list.d/debian.sources": f"Types: deb\nURIs: {uri}\nSuites: bookworm bookworm-updates\nComponents: main\n"
            "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n",
        },
    )
    return root


@pytest.mark.slow
def test_check_rank_mirrors_warns_and_fix_plans_the_fastest(tmp_path):
    with ExitStack() as stack:
        slow = stack.enter_context(FakeMirror(delay_ms=450, prefix="/debian"))
        fast = stack.enter_context(FakeMirror(prefix="/debian"))
        bad = stack.enter_context(FakeMirror(fault="500"))
        cat = catalogue_file(tmp_path, {"official": (slow, True), "fast": (fast, False), "bad": (bad, False)}, "debian")
        root = debian_root(tmp_path, slow.url)
        result = CliRunner().invoke(
            cli,
            ["check", "apt.mirror", "--root", str(root), "--catalogue", str(cat), "--rank-mirrors", "--format", "json"],
        )
        assert result.exit_code == 0, result.output
        doc = json.loads(result.stdout)
        (f,) = doc["findings"]
        assert f["status"] == "warn" and f["summary"].startswith("fast answers in")
        assert f["fixes"] == ["apt.mirror"]
        assert {r["name"]: r["status"] for r in f["evidence"]["ranking"]} == {
            "fast": "ok",
            "official": "ok",
            "bad": "http-error",
        }
        # the planner picks the fastest healthy mirror from the same facts
        from gpudoctor import engine
        from gpudoctor.collect import CollectOptions
        from gpudoctor.mirrors.catalogue import load
        from gpudoctor.system import System

        facts, _ = engine.collect_facts(
            ["os", "apt", "uv", "conda", "pip", "mirrors"],
            System.live(str(root)),
            CollectOptions(extra={"catalogue": load(str(cat)), "rank_mirrors": True, "rank_ecosystems": ("apt",)}),
        )
        plan = apt_fix.plan(facts, None, {"mirror": "fastest", "allow_insecure": "true"})
        (edit,) = plan.edits
        assert f"URIs: {fast.url}\n" in edit.new_text and "Signed-By: /usr/share/keyrings" in edit.new_text


@pytest.mark.slow
def test_check_configured_failing_fails_and_offline_sends_nothing(tmp_path):
    with FakeMirror(fault="404", prefix="/debian") as broken:
        root = debian_root(tmp_path, broken.url)
        offline = CliRunner().invoke(cli, ["check", "apt", "--root", str(root), "--offline"])
        assert broken.requests == []
        assert offline.exit_code == 0, offline.output
        assert "--offline" in offline.output
        result = CliRunner().invoke(cli, ["check", "apt.mirror", "--root", str(root)])
        assert result.exit_code == 1, result.output
        assert "is failing: http-error" in result.output
        assert broken.requests == ["/debian/dists/bookworm/InRelease"]


@pytest.mark.slow
def test_mirrors_command_ranks_with_a_local_catalogue(tmp_path):
    with ExitStack() as stack:
        a = stack.enter_context(FakeMirror(delay_ms=250))
        b = stack.enter_context(FakeMirror(json_pages=True))
        stall = stack.enter_context(FakeMirror(fault="stall"))
        cat = catalogue_file(
            tmp_path, {"slowish": (a, False), "quick": (b, True), "stalled": (stall, False)}, "pypi", "/simple"
        )
        (tmp_path / "empty").mkdir()
        result = CliRunner().invoke(
            cli,
            [
                "mirrors",
                "pip",
                "--root",
                str(tmp_path / "empty"),
                "--catalogue",
                str(cat),
                "--budget",
                "2",
                "--timeout",
                "1",
            ],
        )
        assert result.exit_code == 0, result.output
        lines = [ln for ln in result.output.splitlines() if ln.startswith("| ") and "`127.0.0.1" in ln]
        assert [ln.split()[1] for ln in lines] == ["quick", "slowish", "stalled"]
        assert "timeout" in lines[2]
        bad = CliRunner().invoke(cli, ["mirrors", "--catalogue", str(tmp_path / "nope.toml")])
        assert bad.exit_code == 2 and "nope.toml" in bad.output


def test_mirrors_facts_json_round_trip():
    from gpudoctor.facts import Facts

    conf = probe("configured", role="configured", median=321.5, throughput_kib_s=99.0, lag_hours=1.5)
    facts = mirrors([conf], {"apt": (probe("fast", median=4.0), probe("x", status="timeout", reason="stalled"))})
    again = Facts.from_json(json.loads(json.dumps(facts.to_json())))
    assert again.get("mirrors") == facts.get("mirrors")


def test_user_catalogue_file_from_the_environment(tmp_path, monkeypatch):
    path = tmp_path / "mine.toml"
    path.write_text('[[mirror]]\nname = "corp"\npypi = "https://pypi.corp.example.org/simple"\n')
    monkeypatch.setenv("GPUDOCTOR_CATALOGUE", str(path))
    from gpudoctor.mirrors.cli_options import mirror_extra

    cat = mirror_extra()["catalogue"]
    assert cat.by_name("corp") is not None and cat.origin == f"built-in + {path}"


def test_failing_third_party_apt_repo_fails_without_offering_the_mirror_switch():
    conf = probe(
        "configured",
        role="configured",
        status="http-error",
        reason="HTTP 404 Not Found",
        url="https://download.example.org/linux/debian",
    )
    conf = MirrorProbe(**{**conf.__dict__, "archive": "other"})
    (f,) = apt_mirror.evaluate(mirrors([conf]))
    assert f.status is Status.FAIL and f.fixes == () and "third-party" in f.explanation


def test_offline_names_the_configured_indexes():
    conf = probe("configured", role="configured", status="offline", reason="--offline: not probed")
    from gpudoctor import engine

    (f,) = engine.evaluate([apt_mirror.CHECK], mirrors([conf], offline=True))
    assert f.status is Status.SKIP and "https://configured.example.org/debian" in f.summary


def test_index_credentials_never_reach_the_report():
    from gpudoctor import engine
    from gpudoctor.render import render

    url = "https://alice:s3cret@pypi.corp.example.org/simple"
    conf = MirrorProbe(
        "configured",
        "pip",
        "pypi",
        url,
        url + "/six/",
        "configured",
        False,
        "http-error",
        f"HTTP 503 Service Unavailable for {url}/six/",
    )
    report = engine.Report(tuple(engine.evaluate([pip_mirror.CHECK], mirrors([conf]))), mirrors([conf]))
    assert report.findings[0].status is Status.FAIL
    for fmt in ("json", "markdown"):
        assert "s3cret" not in render(report, fmt, True)
