"""`gpudoctor fix --root` on fake roots: apt mirror switches end to end, against golden after-trees.

Case 17, an Ubuntu 24.04 ubuntu.sources, a mixed one-line + deb822 system, and a
.sources file with several stanzas and `Enabled: no`; plus `--mirror fastest`
ranked on local servers (127.0.0.1 only) and undo. Runs with --offline except
where probing local servers is the point.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudoctor.cli import cli
from gpudoctor.mirrors.testserver import FakeMirror

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "fixtures" / "mirrors"
CASE17 = HERE / "fixtures" / "cases" / "17-debian12-sources-list-absent"


def tree(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_text() for p in sorted((root / "etc" / "apt").rglob("*")) if p.is_file()}


def security_kept(after: dict, before: dict) -> dict:
    """The golden ``after`` tree with the security archive's lines as ``before`` had them: without a
    probe that verified the mirror serves the security suite, apt.mirror leaves that archive alone."""
    out = {}
    for path, text in after.items():
        old = before.get(path)
        if old is None or len(old.splitlines()) != len(text.splitlines()):
            out[path] = text
            continue
        lines = [o if "security" in o and o != n else n for o, n in zip(old.splitlines(True), text.splitlines(True))]
        out[path] = "".join(lines)
    return out


def run(*args):
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.output


@pytest.fixture
def copy(tmp_path):
    def make(name: str) -> Path:
        root = tmp_path / name
        shutil.copytree(GOLDEN / name / "before", root)
        return root

    return make


def test_case17_diagnosed_then_fixed_through_the_deb822_file(copy):
    root = copy("case17")
    code, out = run(
        "check", "apt.sources", "--root", str(root), "--offline", "--dockerfile", str(CASE17 / "Dockerfile")
    )
    assert code == 1
    assert "mirror rewrite targets /etc/apt/sources.list, which does not exist" in out
    assert "fix: gpudoctor fix apt.mirror" in out
    before = tree(root)
    code, out = run(
        "fix",
        "apt.mirror",
        "--root",
        str(root),
        "--offline",
        "--mirror",
        "http://mirror.example.edu.cn/debian",
        "--allow-insecure",
        "--yes",
        "--set",
        "security-mirror=http://mirror.example.edu.cn/debian-security",
    )
    assert code == 0, out
    assert tree(root) == tree(GOLDEN / "case17" / "after") != before  # named by the user: moved
    assert "apt-get update" in out and "/var/lib/apt/lists" in out
    assert not (root / "etc/apt/sources.list").exists()


def test_ubuntu_2404_sources(copy):
    root = copy("ubuntu2404")
    code, out = run(
        "fix", "apt.mirror", "--root", str(root), "--offline", "--mirror", "https://mirror.example.org/ubuntu", "--yes"
    )
    assert code == 0, out
    assert tree(root) == tree(GOLDEN / "ubuntu2404" / "after")


def test_mixed_formats_by_catalogue_name(copy, tmp_path):
    root = copy("mixed")
    cat = tmp_path / "cat.toml"
    cat.write_text('[[mirror]]\nname = "example"\ndebian = "https://mirror.example.org/debian"\nsource = "test"\n')
    code, out = run(
        "fix", "apt.mirror", "--root", str(root), "--offline", "--catalogue", str(cat), "--mirror", "example", "--yes"
    )
    assert code == 0, out
    assert tree(root) == tree(GOLDEN / "mixed" / "after")
    assert "Kept on the official host" in out


def test_several_stanzas_http_needs_allow_insecure_then_undo(copy):
    root = copy("stanzas")
    before = tree(root)
    code, out = run(
        "fix", "apt.mirror", "--root", str(root), "--offline", "--mirror", "http://mirror.example.org/", "--yes"
    )
    assert code == 1 and "--allow-insecure" in out
    assert tree(root) == before
    code, out = run(
        "fix",
        "apt.mirror",
        "--root",
        str(root),
        "--offline",
        "--mirror",
        "http://mirror.example.org/",
        "--allow-insecure",
        "--yes",
        "--format",
        "json",
    )
    assert code == 0, out
    assert tree(root) == security_kept(tree(GOLDEN / "stanzas" / "after"), before) != before
    txn = json.loads(out[out.index("{\n") :])["transaction"]
    code, out = run("fix", "--undo", txn)
    assert code == 0, out
    assert tree(root) == before


@pytest.mark.slow
def test_mirror_fastest_ranks_local_servers_and_switches(tmp_path):
    with (
        FakeMirror(delay_ms=500) as slow,
        FakeMirror(prefix="/debian") as fast,
        FakeMirror(fault="stall", prefix="/debian") as stalled,
    ):
        root = tmp_path / "root"
        shutil.copytree(GOLDEN / "case17" / "before", root)
        src = root / "etc/apt/sources.list.d/debian.sources"
        src.write_text(src.read_text().replace("http://ftp.debian.org", slow.url))
        cat = tmp_path / "cat.toml"
        cat.write_text(
            "replace = true\n"
            + "".join(
                f'[[mirror]]\nname = "{n}"\ndebian = "{u}"\nofficial = {str(o).lower()}\n'
                for n, u, o in (
                    ("upstream", slow.url + "/debian", True),
                    ("quick", fast.url, False),
                    ("hung", stalled.url, False),
                )
            )
        )
        code, out = run(
            "fix",
            "apt.mirror",
            "--root",
            str(root),
            "--catalogue",
            str(cat),
            "--mirror",
            "fastest",
            "--allow-insecure",
            "--mirror-budget",
            "3",
            "--yes",
        )
        assert code == 0, out
        text = src.read_text()
        assert f"URIs: {fast.url}\n" in text
        assert f"URIs: {slow.url}/debian-security\n" in text  # quick has no security archive: kept
        assert "point apt at quick" in out


@pytest.mark.slow
def test_pip_mirror_ranked_then_pip_index_url_by_name(tmp_path, monkeypatch):
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX"):
        monkeypatch.delenv(var, raising=False)
    with FakeMirror(delay_ms=450) as slow, FakeMirror() as fast:
        root = tmp_path / "root"
        (root / "etc").mkdir(parents=True)
        (root / "etc/pip.conf").write_text(f"[global]\n# company index\nindex-url = {slow.url}/simple\n")
        cat = tmp_path / "cat.toml"
        cat.write_text(
            f'replace = true\n[[mirror]]\nname = "pypi"\nofficial = true\npypi = "{slow.url}/simple"\n'
            f'[[mirror]]\nname = "quick"\npypi = "{fast.url}/simple"\n'
        )
        code, out = run(
            "check", "pip.mirror", "--root", str(root), "--catalogue", str(cat), "--rank-mirrors", "--format", "json"
        )
        (finding,) = json.loads(out)["findings"]
        assert finding["status"] == "warn" and finding["summary"].startswith("quick answers in"), out
        assert finding["fixes"] == ["pip.index-url"]
        assert any(p["url"] == f"{slow.url}/simple" for p in finding["evidence"]["configured"])
        code, out = run(
            "fix",
            "pip.index-url",
            "--root",
            str(root),
            "--offline",
            "--catalogue",
            str(cat),
            "--mirror",
            "quick",
            "--allow-insecure",
            "--scope",
            "global",
            "--yes",
        )
        assert code == 0, out
        assert f"index-url = {fast.url}/simple" in (root / "etc/pip.conf").read_text()


def test_pip_unknown_mirror_name_is_a_usage_error(tmp_path):
    (tmp_path / "etc").mkdir()
    code, out = run("fix", "pip.index-url", "--root", str(tmp_path), "--offline", "--mirror", "nosuch", "--yes")
    assert code == 2 and "no PyPI mirror of that name" in out and "tuna" in out


def test_fix_ranks_only_when_asked_and_never_offline():
    from gpudoctor.mirrors.cli_options import fix_mirror_extra

    assert fix_mirror_extra(None, ("apt.mirror",), False)["rank_mirrors"] is True
    assert fix_mirror_extra(None, ("apt.mirror",), False)["rank_ecosystems"] == ("apt",)
    assert fix_mirror_extra(None, ("apt.mirror",), True)["rank_mirrors"] is False
    assert fix_mirror_extra("tuna", ("apt.mirror",), False)["rank_mirrors"] is False
    assert fix_mirror_extra(None, (), False)["rank_mirrors"] is False  # --all without --mirror
    assert fix_mirror_extra("fastest", (), False)["rank_mirrors"] is True
    assert fix_mirror_extra(None, ("pip.index-url",), False)["rank_mirrors"] is False
