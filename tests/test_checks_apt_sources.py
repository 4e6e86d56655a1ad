"""apt.sources through the real CLI on fake roots: a Dockerfile in Latin-1 is read, a malformed
deb822 stanza fails the way apt does (the whole list is refused)."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner

from gpudoctor.cli import cli

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "fixtures" / "mirrors"
CASE17 = HERE / "fixtures" / "cases" / "17-debian12-sources-list-absent"


def run(*args):
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def test_a_dockerfile_in_latin1_is_read_not_a_crash(tmp_path):
    root = tmp_path / "root"
    shutil.copytree(GOLDEN / "case17" / "before", root)
    latin1 = tmp_path / "Dockerfile"
    latin1.write_bytes("# maintenu par Ren\xe9\n".encode("latin-1") + (CASE17 / "Dockerfile").read_bytes())
    code, out = run("check", "apt.sources", "--root", str(root), "--offline", "--dockerfile", str(latin1))
    assert code == 1
    assert "mirror rewrite targets /etc/apt/sources.list, which does not exist" in out


def test_a_malformed_deb822_stanza_fails_because_apt_refuses_the_whole_list(tmp_path):
    root = tmp_path / "root"
    shutil.copytree(GOLDEN / "case17" / "before", root)
    sources = root / "etc/apt/sources.list.d/debian.sources"
    sources.write_text(sources.read_text() + "\nTypes: deb\nURIs http://mirror.example.org/debian\n")
    code, out = run("check", "apt.sources", "--root", str(root), "--offline")
    assert code == 1
    assert "[FAIL] apt.sources  apt cannot read part of" in out
    assert "Malformed entry" in out
