"""A fix re-reads the configuration the way its tool resolves it (gpudoctor.model.Fix.verify).

Each scenario writes real files into a fake root (or a temp HOME and project
on the live file system), plans the fix through the CLI's own planning step
(:func:`gpudoctor.cli.fix.plan_fixes`), writes the plan through
:mod:`gpudoctor.apply`, collects the facts again and asks the CLI's verifier
(:func:`gpudoctor.cli.fix.verify_outcomes`) what the tool now resolves. A
layer of higher precedence that still overrides the edit makes the outcome
"not-fixed" with the file (or variable) that wins; the healthy twin is fixed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest
from tests._fixcycle import _run

from gpudoctor import apply as ap
from gpudoctor.cli import main
from gpudoctor.cli.fix import FixOutcome, plan_fixes, verify_outcomes
from gpudoctor.model import FixPlan
from gpudoctor.testing import fake_system, write_tree

MIRROR = "https://pypi.mirror.example.org/simple"
OLD = "https://old.example.org/simple"


def run_fix(
    root: Path,
    fix_id: str,
    checks: list[str],
    options: Mapping[str, str],
    env: Mapping[str, str] | None = None,
    home: str = "/home/user",
    live=None,
) -> list[FixOutcome]:
    """Plan ``fix_id`` on request (as ``gpudoctor fix ID`` does), write it, re-collect, verify."""
    env = dict(env or {})
    report, system, registry = _run(root, checks, env, home, True, {}, live)
    outcomes = plan_fixes([registry.fixes[fix_id]], report.findings, report.facts, dict(options), named=True)
    planned = [o for o in outcomes if o.status == "planned"]
    if planned:
        writes = ap.prepare([o.planned for o in planned], system.files)
        ap.apply(writes, system.files, ap.Journal(root.parent / "journal"))
        for o in planned:
            o.status = "applied"
        after, _, _ = _run(root, checks, env, home, True, {}, live)
        verify_outcomes(planned, registry, after.facts)
    return outcomes


def status(outcomes: list[FixOutcome]) -> list[tuple[str, str]]:
    return [(o.status, o.message) for o in outcomes]


# --------------------------------------------------------------------------- pip


def test_pip_user_scope_under_a_venv_file_is_not_fixed(tmp_path):
    venv = "[global]\nindex-url = https://old.example.org/simple\n"
    root = write_tree(tmp_path / "r", {"/venv/pip.conf": venv, "/venv/bin/python": ""})
    out = run_fix(
        root, "pip.index-url", ["pip.config"], {"index-url": MIRROR, "scope": "user"}, env={"VIRTUAL_ENV": "/venv"}
    )
    assert [o.status for o in out] == ["not-fixed"], status(out)
    assert "/venv/pip.conf still wins" in out[0].message and OLD in out[0].message
    # the user file was written as asked, and is what pip would read without the venv file
    assert f"index-url = {MIRROR}" in (root / "home/user/.config/pip/pip.conf").read_text()
    assert (root / "venv/pip.conf").read_text() == venv


def test_pip_index_url_variable_still_wins(tmp_path):
    root = write_tree(tmp_path / "r", {"/etc/pip.conf": f"[global]\nindex-url = {OLD}\n"})
    out = run_fix(root, "pip.index-url", ["pip.config"], {"index-url": MIRROR}, env={"PIP_INDEX_URL": OLD})
    assert [o.status for o in out] == ["not-fixed"], status(out)
    assert out[0].message.startswith("PIP_INDEX_URL still wins")


def test_pip_install_section_of_a_later_file_still_wins(tmp_path):
    # pip reads [install] over [global] for `pip install`; the global file's [global] edit loses to it
    root = write_tree(
        tmp_path / "r",
        {
            "/etc/pip.conf": f"[global]\nindex-url = {OLD}\n",
            "/home/user/.config/pip/pip.conf": f"[install]\nindex-url = {OLD}\n",
        },
    )
    out = run_fix(root, "pip.index-url", ["pip.config"], {"index-url": MIRROR, "scope": "global"})
    assert [o.status for o in out] == ["not-fixed"], status(out)
    assert out[0].message == f"~/.config/pip/pip.conf still wins (index-url = {OLD}, [install])"


def test_pip_file_that_sets_the_index_is_edited_and_fixed(tmp_path):
    root = write_tree(tmp_path / "r", {"/venv/pip.conf": f"[global]\nindex-url = {OLD}\n", "/venv/bin/python": ""})
    out = run_fix(root, "pip.index-url", ["pip.config"], {"index-url": MIRROR}, env={"VIRTUAL_ENV": "/venv"})
    assert status(out) == [("applied", "")]
    assert f"index-url = {MIRROR}" in (root / "venv/pip.conf").read_text()
    assert not (root / "home/user/.config/pip/pip.conf").exists()


# --------------------------------------------------------------------------- uv

UV_DEFAULT = '[[index]]\nurl = "https://old.example.org/simple"\ndefault = true\n'


def test_uv_broken_system_file_is_not_fixed_by_a_user_file(tmp_path):
    broken = b'[[index]]\nurl = "https://old.example.org/simple\ndefault = true\n'  # unterminated string
    root = write_tree(tmp_path / "r", {"/etc/uv/uv.toml": broken})
    out = run_fix(root, "uv.index-url", ["uv.mirror"], {"mirror": MIRROR, "scope": "user"})
    assert [o.status for o in out] == ["refused"], status(out)
    assert "/etc/uv/uv.toml" in out[0].message and "nothing was written" in out[0].message
    assert (root / "etc/uv/uv.toml").read_bytes() == broken
    assert not (root / "home/user/.config/uv").exists()


def test_uv_verify_names_a_broken_system_file_uv_still_stops_on(tmp_path):
    # the verifier itself, on facts read after a write: a user file with the mirror does not help
    from gpudoctor.fixes.uv_index_url import FIX

    root = write_tree(
        tmp_path / "r",
        {
            "/etc/uv/uv.toml": "[[index]\nurl = 1\n",
            "/home/user/.config/uv/uv.toml": f'[[index]]\nurl = "{MIRROR}"\ndefault = true\n',
        },
    )
    report, _, _ = _run(root, ["uv.mirror"], {}, "/home/user", True, {}, None)
    plan = FixPlan("uv.index-url", "", intent={"default-index": MIRROR})
    assert FIX.verify is not None
    problem = FIX.verify(report.facts, plan)
    assert problem is not None and problem.startswith("/etc/uv/uv.toml still fails: uv stops on it")


def test_uv_global_scope_under_a_user_default_is_not_fixed(tmp_path):
    root = write_tree(tmp_path / "r", {"/home/user/.config/uv/uv.toml": UV_DEFAULT})
    out = run_fix(root, "uv.index-url", ["uv.mirror"], {"mirror": MIRROR, "scope": "global"})
    assert [o.status for o in out] == ["not-fixed"], status(out)
    assert out[0].message == f"/home/user/.config/uv/uv.toml still wins (default index {OLD})"
    assert MIRROR in (root / "etc/uv/uv.toml").read_text()
    assert (root / "home/user/.config/uv/uv.toml").read_text() == UV_DEFAULT


def test_uv_default_index_variable_still_wins(tmp_path):
    from gpudoctor.fixes.uv_index_url import FIX

    root = write_tree(tmp_path / "r", {"/home/user/.config/uv/uv.toml": f'index-url = "{MIRROR}"\n'})
    report, _, _ = _run(root, ["uv.mirror"], {"UV_DEFAULT_INDEX": OLD}, "/home/user", True, {}, None)
    assert FIX.verify is not None
    problem = FIX.verify(report.facts, FixPlan("uv.index-url", "", intent={"default-index": MIRROR}))
    assert problem == f"UV_DEFAULT_INDEX still wins (default index {OLD})"


def test_uv_project_file_wins_over_the_user_file(tmp_path, monkeypatch):
    # live file system: the project layer is found from the working directory up
    proj = tmp_path / "proj"
    (proj / "src").mkdir(parents=True)
    (proj / "uv.toml").write_text(UV_DEFAULT)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.chdir(proj / "src")
    env = {"XDG_CONFIG_HOME": str(home / ".config"), "XDG_CONFIG_DIRS": str(tmp_path / "xdg"), "PATH": "/nonexistent"}

    def live():
        return fake_system("/", env=env, home=str(home))

    out = run_fix(tmp_path, "uv.index-url", ["uv.mirror"], {"mirror": MIRROR, "scope": "user"}, live=live)
    assert [o.status for o in out] == ["not-fixed"], status(out)
    assert out[0].message == f"{proj}/uv.toml still wins (default index {OLD})"
    assert MIRROR in (home / ".config/uv/uv.toml").read_text()
    assert (proj / "uv.toml").read_text() == UV_DEFAULT


def test_uv_user_file_is_fixed_when_nothing_outranks_it(tmp_path):
    root = write_tree(tmp_path / "r", {"/etc/uv/uv.toml": UV_DEFAULT})
    out = run_fix(root, "uv.index-url", ["uv.mirror"], {"mirror": MIRROR, "scope": "user"})
    assert status(out) == [("applied", "")]
    assert (root / "etc/uv/uv.toml").read_text() == UV_DEFAULT


# --------------------------------------------------------------------------- conda

TUNA = "https://mirrors.tuna.tsinghua.edu.cn/anaconda"


def test_conda_channels_variable_still_wins(tmp_path):
    root = write_tree(tmp_path / "r", {"/home/user/.condarc": "channels:\n  - defaults\n"})
    env = {"CONDA_CHANNELS": "https://conda.anaconda.org/conda-forge"}
    out = run_fix(root, "conda.channels", ["conda.mirror"], {"mirror": TUNA}, env=env)
    assert [o.status for o in out] == ["not-fixed"], status(out)
    assert out[0].message.startswith("CONDA_CHANNELS still wins")
    assert "https://conda.anaconda.org/conda-forge" in out[0].message


def test_conda_user_scope_under_a_final_system_list_is_not_fixed(tmp_path):
    system = "default_channels:  #!final\n  - https://repo.anaconda.com/pkgs/main\n"
    root = write_tree(
        tmp_path / "r", {"/etc/conda/.condarc": system, "/home/user/.condarc": "channels:\n  - defaults\n"}
    )
    out = run_fix(root, "conda.channels", ["conda.mirror"], {"mirror": TUNA, "scope": "user"})
    assert [o.status for o in out] == ["not-fixed"], status(out)
    assert out[0].message.startswith("/etc/conda/.condarc still wins")
    assert (root / "etc/conda/.condarc").read_text() == system
    assert f"{TUNA}/pkgs/main" in (root / "home/user/.condarc").read_text()


def test_conda_condarc_variable_file_still_adds_public_defaults(tmp_path):
    # $CONDARC is read last (highest precedence) and conda concatenates default_channels across files
    team = "default_channels:\n  - https://repo.anaconda.com/pkgs/main\n"
    root = write_tree(tmp_path / "r", {"/srv/team.condarc": team, "/home/user/.condarc": "channels:\n  - defaults\n"})
    env = {"CONDARC": "/srv/team.condarc"}
    out = run_fix(root, "conda.channels", ["conda.mirror"], {"mirror": TUNA, "scope": "user"}, env=env)
    assert [o.status for o in out] == ["not-fixed"], status(out)
    assert out[0].message.startswith("/srv/team.condarc still wins: `defaults` resolves to https://repo.anaconda.com")
    assert (root / "srv/team.condarc").read_text() == team


def test_conda_defaults_moved_in_every_file_are_fixed(tmp_path):
    system = "default_channels:\n  - https://repo.anaconda.com/pkgs/main\n"
    root = write_tree(
        tmp_path / "r", {"/etc/conda/.condarc": system, "/home/user/.condarc": "channels:\n  - defaults\n"}
    )
    out = run_fix(root, "conda.channels", ["conda.mirror"], {"mirror": TUNA})
    assert status(out) == [("applied", "")]


# --------------------------------------------------------------------------- apt

DEBIAN = 'ID=debian\nVERSION_ID="12"\nVERSION_CODENAME=bookworm\n'
SOURCES = "Types: deb\nURIs: http://ftp.debian.org/debian\nSuites: bookworm\nComponents: main\n"


def test_apt_entry_that_still_names_the_old_archive_is_not_fixed(tmp_path):
    from gpudoctor.fixes.apt_mirror import FIX

    files = {
        "/etc/os-release": DEBIAN,
        "/etc/apt/sources.list.d/debian.sources": SOURCES,
        "/etc/ssl/certs/ca-certificates.crt": "",
    }
    root = write_tree(tmp_path / "r", files)
    out = run_fix(root, "apt.mirror", ["apt.sources"], {"mirror": "https://mirror.example.org/debian"})
    assert status(out) == [("applied", "")]
    assert out[0].plan is not None and out[0].plan.intent == {
        "uri:http://ftp.debian.org/debian": "https://mirror.example.org/debian"
    }
    # a one-line file apt reads too, with the old archive (written after the plan): apt still fetches it
    (root / "etc/apt/sources.list").write_text("deb http://ftp.debian.org/debian bookworm main\n")
    report, _, _ = _run(root, ["apt.sources"], {}, "/home/user", True, {}, None)
    assert FIX.verify is not None
    assert FIX.verify(report.facts, out[0].plan) == (
        "/etc/apt/sources.list:1 still wins: apt still fetches http://ftp.debian.org/debian there"
    )


def test_apt_sources_file_apt_no_longer_reads_is_not_fixed(tmp_path):
    from gpudoctor.fixes.apt_mirror import FIX

    files = {
        "/etc/os-release": DEBIAN,
        "/etc/apt/sources.list.d/debian.sources": SOURCES,
        "/etc/ssl/certs/ca-certificates.crt": "",
    }
    root = write_tree(tmp_path / "r", files)
    out = run_fix(root, "apt.mirror", ["apt.sources"], {"mirror": "https://mirror.example.org/debian"})
    assert status(out) == [("applied", "")] and out[0].plan is not None
    # renamed to a name apt ignores (sources.list.d/*.sources.bak): the mirror is no longer fetched at all
    d = root / "etc/apt/sources.list.d"
    (d / "debian.sources").rename(d / "debian.sources.bak")
    report, _, _ = _run(root, ["apt.sources"], {}, "/home/user", True, {}, None)
    assert FIX.verify is not None
    problem = FIX.verify(report.facts, out[0].plan)
    assert problem is not None and problem.startswith(
        "apt reads no enabled entry with https://mirror.example.org/debian"
    )


# --------------------------------------------------------------------------- the command


def _cli(capsys, *args):
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out, err = capsys.readouterr()
    return info.value.code, out, err


def test_cli_reports_not_fixed_and_exits_1(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    root = write_tree(tmp_path / "r", {"/root/.config/uv/uv.toml": UV_DEFAULT})
    code, out, err = _cli(
        capsys,
        "fix",
        "uv.index-url",
        "--root",
        str(root),
        "--offline",
        "--mirror",
        MIRROR,
        "--scope",
        "global",
        "--yes",
    )
    assert code == 1, out + err
    assert "uv.index-url: not fixed: /root/.config/uv/uv.toml still wins" in out
    assert "uv.index-url: fixed" not in out
    assert MIRROR in (root / "etc/uv/uv.toml").read_text()


def test_cli_reports_fixed_and_exits_0(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    root = write_tree(tmp_path / "r", {"/root/.config/uv/uv.toml": UV_DEFAULT})
    code, out, err = _cli(capsys, "fix", "uv.index-url", "--root", str(root), "--offline", "--mirror", MIRROR, "--yes")
    assert code == 0, out + err
    assert "uv.index-url: fixed (re-read)" in out
    assert MIRROR in (root / "root/.config/uv/uv.toml").read_text()


def test_cli_json_says_not_fixed_with_what_wins(tmp_path, capsys, monkeypatch):
    import json

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    root = write_tree(tmp_path / "r", {"/root/.config/uv/uv.toml": UV_DEFAULT})
    code, out, _ = _cli(
        capsys,
        "fix",
        "uv.index-url",
        "--root",
        str(root),
        "--offline",
        "--mirror",
        MIRROR,
        "--scope",
        "global",
        "--yes",
        "--format",
        "json",
    )
    doc = json.loads(out)
    assert code == 1 and doc["status"] == "not-fixed" and doc["transaction"]
    (fx,) = doc["fixes"]
    assert fx["status"] == "not-fixed" and fx["message"].startswith("/root/.config/uv/uv.toml still wins")


def test_uv_reads_only_the_first_system_file_even_a_broken_one(tmp_path):
    from gpudoctor.fixes.uv_index_url import FIX

    root = write_tree(
        tmp_path / "r",
        {
            "/xdg/uv/uv.toml": "[[index]\n",
            "/etc/uv/uv.toml": f'[[index]]\nurl = "{MIRROR}"\ndefault = true\n',
        },
    )
    report, _, _ = _run(root, ["uv.mirror"], {"XDG_CONFIG_DIRS": "/xdg"}, "/home/user", True, {}, None)
    assert FIX.verify is not None
    problem = FIX.verify(report.facts, FixPlan("uv.index-url", "", intent={"default-index": MIRROR}))
    assert problem is not None and problem.startswith("/xdg/uv/uv.toml still fails: uv stops on it")
    uv = report.facts.get("uv")
    assert "/etc/uv/uv.toml" not in uv.files and uv.default_origin == "built-in"  # never read past the first
