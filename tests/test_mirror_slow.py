"""Slow versus failing indexes, against real servers on 127.0.0.1 (issue 13, item 2).

An index that answers, but after more than SLOW_TTFB_MS, or whose body trickles in, is `warn`
("usable but slow", with the measured figures and the faster mirror); one that never answers is `fail`.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudoctor.checks._mirrors import SLOW_TTFB_MS
from gpudoctor.cli import cli
from gpudoctor.mirrors.probe import ProbeTarget, probe_all
from gpudoctor.mirrors.testserver import FakeMirror
from gpudoctor.testing import write_tree


def pip_root(tmp: Path, index: str) -> Path:
    root = tmp / "root"
    write_tree(root, {"/etc/os-release": "ID=debian\n", "/etc/pip.conf": f"[global]\nindex-url = {index}\n"})
    return root


def check(root: Path, *extra: str) -> dict:
    result = CliRunner().invoke(cli, ["check", "pip.mirror", "--root", str(root), "--format", "json", *extra])
    assert result.exit_code in (0, 1), result.output
    (finding,) = json.loads(result.stdout)["findings"]
    return finding


def catalogue(tmp: Path, **servers: FakeMirror) -> Path:
    rows = ["replace = true"] + [
        f'[[mirror]]\nname = "{n}"\npypi = "{s.url}/simple"\nsource = "test"' for n, s in servers.items()
    ]
    path = tmp / "catalogue.toml"
    path.write_text("\n\n".join(rows) + "\n")
    return path


@pytest.mark.slow
def test_slow_index_is_usable_but_slow_with_figures_and_the_faster_mirror(tmp_path):
    assert SLOW_TTFB_MS == 1000.0
    with ExitStack() as stack:
        slow = stack.enter_context(FakeMirror(delay_ms=1300))
        fast = stack.enter_context(FakeMirror())
        root = pip_root(tmp_path, f"{slow.url}/simple")
        f = check(root)
        assert f["status"] == "warn", f
        assert "is usable but slow: median time to first byte" in f["summary"]
        median = f["evidence"]["configured"][0]["median_ms"]
        assert 1300 <= median < 3000 and f"{median:.0f} ms" in f["summary"]
        assert "--set timeout=60 --set retries=10" in f["explanation"]
        f = check(root, "--rank-mirrors", "--catalogue", str(catalogue(tmp_path, quick=fast)))
        assert f["status"] == "warn" and "; quick answers in" in f["summary"]
        assert "gpudoctor fix pip.index-url --mirror quick" in f["explanation"] and f["fixes"] == ["pip.index-url"]


@pytest.mark.slow
def test_fast_index_is_ok_and_stalled_or_refused_index_fails(tmp_path):
    with FakeMirror(delay_ms=50) as ok:
        f = check(pip_root(tmp_path / "a", f"{ok.url}/simple"))
        assert f["status"] == "ok", f
    with FakeMirror(fault="stall") as stall:
        f = check(pip_root(tmp_path / "b", f"{stall.url}/simple"), "--mirror-budget", "2")
        assert f["status"] == "fail" and "stalls: no answer within" in f["summary"]  # issue 29: what pip does
    with FakeMirror() as gone:
        url = gone.url
    f = check(pip_root(tmp_path / "c", f"{url}/simple"))
    assert f["status"] == "fail" and "connect-error" in f["summary"]


@pytest.mark.slow
def test_slow_body_is_slow_not_an_index_that_lists_no_files(tmp_path):
    with FakeMirror(body_delay_ms=200) as trickle:
        (res,) = probe_all([ProbeTarget("t", "pip", "pypi", f"{trickle.url}/simple", "pypi")], budget_s=1.5)
        assert res.status == "slow" and "came too slowly to check" in res.reason and "KiB/s" in res.reason
        f = check(pip_root(tmp_path, f"{trickle.url}/simple"), "--mirror-budget", "1.5")
        assert f["status"] == "warn" and "usable but slow: its body came too slowly to check" in f["summary"]
        assert "lists no files" not in json.dumps(f)


@pytest.mark.slow
def test_check_probes_only_the_indexes_of_selected_checks(tmp_path):
    with FakeMirror() as pip_index, FakeMirror(prefix="/debian") as apt_archive:
        root = pip_root(tmp_path, f"{pip_index.url}/simple")
        write_tree(
            root,
            {
                "/etc/os-release": "ID=debian\nVERSION_CODENAME=bookworm\n",
                "/etc/apt/sources.list": f"deb {apt_archive.url} bookworm main\n",
            },
        )
        result = CliRunner().invoke(cli, ["check", "apt.mirror", "--root", str(root), "--format", "json"])
        assert json.loads(result.stdout)["findings"][0]["status"] == "ok", result.output
        assert pip_index.requests == [] and apt_archive.requests
        result = CliRunner().invoke(cli, ["check", "pip.mirror", "--root", str(root), "--format", "json"])
        assert json.loads(result.stdout)["findings"][0]["status"] == "ok", result.output
        assert pip_index.requests and len(apt_archive.requests) == 3
