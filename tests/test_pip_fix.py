"""The pip.index-url fix end to end: planner, `gpudoctor fix` on real files under --root, and real pip."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CASES
from gpudoctor import apply as ap
from gpudoctor.cli import main
from gpudoctor.collect import CollectContext, CollectOptions
from gpudoctor.collect.pip import collect
from gpudoctor.fixes.pip_index_url import FIX, plan
from gpudoctor.model import Finding, FixRefused, Status
from gpudoctor.testing import fake_system, make_facts, write_tree
from test_apply import patch

HOME = "/root"  # under --root, user files are the image user's (root: /root), not the caller's
USER_CONF = f"{HOME}/.config/pip/pip.conf"
MIRROR = "https://mirror.example.org/simple"
CASE20 = CASES / "20-pip-conf-no-section-header" / "pip.conf"


@pytest.fixture
def env(monkeypatch):
    """The diagnosed environment for --root runs: HOME inside the root, no pip variables."""
    monkeypatch.setenv("HOME", HOME)
    monkeypatch.setenv("XDG_CONFIG_HOME", f"{HOME}/.config")
    for var in list(os.environ):
        if var.startswith("PIP_") or var in ("XDG_CONFIG_DIRS", "VIRTUAL_ENV", "CONDA_PREFIX"):
            monkeypatch.delenv(var, raising=False)


def run(capsys, *args):
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out, err = capsys.readouterr()
    return info.value.code, out, err


def facts_for(root, env=None):
    return make_facts(pip=collect(CollectContext(fake_system(root, env=env or {}, home=HOME), CollectOptions())))


OK = Finding(check="pip.config", status=Status.OK, summary="fine")


# --------------------------------------------------------------------------- planner


def test_plan_edits_exact_file_text_and_keeps_comments(tmp_path):
    text = (
        "# lab mirror\n[global]\n; old index below\nindex-url = https://old.example.org/simple\ntimeout = 60\n\n"
        "[install]\nno-cache-dir = true\n"
    )
    root = write_tree(tmp_path, {"/etc/pip.conf": text})
    p = plan(facts_for(root), OK, {"index-url": MIRROR})
    [edit] = p.edits
    assert edit.path == "/etc/pip.conf" and edit.old_text == text
    assert edit.new_text == text.replace("https://old.example.org/simple", MIRROR)
    assert p.addresses == ("pip.config", "index.consistency") and "set index-url" in p.description


def test_plan_refusals(tmp_path):
    root = write_tree(tmp_path, {"/etc/pip.conf": "[global]\nindex-url = https://a.example.org/simple\njunk\n"})
    bad = Finding(check="pip.config", status=Status.FAIL, summary="x")
    with pytest.raises(FixRefused, match=r"/etc/pip.conf line 3 \('junk'\) is neither"):
        plan(facts_for(root), bad, {})
    root2 = write_tree(tmp_path / "r2", {})
    with pytest.raises(FixRefused, match="not an http"):
        plan(facts_for(root2), OK, {"index-url": "ftp://x"})
    with pytest.raises(FixRefused, match="PIP_CONFIG_FILE=/dev/null"):
        plan(facts_for(root2, {"PIP_CONFIG_FILE": "/dev/null"}), OK, {"index-url": MIRROR})
    with pytest.raises(FixRefused, match="--index-url https://mirror.example.org/simple"):
        plan(facts_for(root2), OK, {})
    with pytest.raises(FixRefused, match="plain http"):
        plan(facts_for(root2), OK, {"index-url": "http://mirror.example.org/simple"})


def test_plan_when_pip_config_file_is_set_targets_that_file(tmp_path):
    root = write_tree(tmp_path, {"/srv/pip.conf": "[global]\ntimeout = 1\n"})
    p = plan(facts_for(root, {"PIP_CONFIG_FILE": "/srv/pip.conf"}), OK, {"index-url": MIRROR})
    assert [e.path for e in p.edits] == ["/srv/pip.conf"]


def test_fix_is_registered():
    from gpudoctor.registry import load_registry

    reg = load_registry()
    assert reg.fixes["pip.index-url"] is FIX and "pip.config" in reg.checks


# --------------------------------------------------------------------------- CLI on a --root


def test_case_20_fix_all_repairs_with_backup_then_noop_then_undo(tmp_path, env, capsys):
    original = CASE20.read_bytes()
    root = write_tree(tmp_path / "root", {USER_CONF: original})
    conf = root / USER_CONF.lstrip("/")
    code, out, err = run(capsys, "check", "pip", "--root", str(root))
    assert code == 1 and "pip configuration cannot be parsed (~/.config/pip/pip.conf, line 1: no section header)" in out

    code, out, err = run(capsys, "fix", "--all", "--yes", "--root", str(root))
    assert code == 0, out + err
    assert conf.read_bytes() == b"[global]\n" + original.split(b"\n", 1)[1]
    assert "-tall]\n+[global]\n" in out and "pip.config: fail -> ok" in out
    [txn] = ap.Journal().transactions()
    assert (txn.directory / txn.files[0].backup).read_bytes() == original
    assert txn.files[0].target == USER_CONF and txn.fixes == ("pip.index-url",)

    code, out, _ = run(capsys, "fix", "--all", "--yes", "--root", str(root))
    assert code == 0 and "nothing to fix" in out
    assert len(ap.Journal().transactions()) == 1

    code, out, _ = run(capsys, "fix", "--undo")
    assert code == 0 and conf.read_bytes() == original


def test_set_index_url_creates_user_file_then_already_fixed(tmp_path, env, capsys):
    root = tmp_path / "root"
    root.mkdir()
    code, out, err = run(capsys, "fix", "pip.index-url", "--index-url", MIRROR, "--yes", "--root", str(root))
    assert code == 0, out + err
    conf = root / USER_CONF.lstrip("/")
    assert conf.read_text() == f"[global]\nindex-url = {MIRROR}\n"
    assert "pip.config: ok -> ok" in out
    code, out, _ = run(capsys, "fix", "pip.index-url", "--index-url", MIRROR, "--yes", "--root", str(root))
    assert code == 0 and "already fixed" in out
    assert len(ap.Journal().transactions()) == 1
    run(capsys, "fix", "--undo")
    assert not conf.exists() and not (root / "home").exists()


def test_diff_shown_equals_change_written_for_pip_conf(tmp_path, env, capsys):
    text = (
        "# ours\n[global]\ntimeout = 60\nindex-url = https://old.example.org/simple\n  https://continued\n"
        "# trailing comment\n[install]\nretries = 2"
    )
    root = write_tree(tmp_path / "root", {"/etc/pip.conf": text})
    code, out, _ = run(capsys, "fix", "pip.index-url", "--index-url", MIRROR, "--dry-run", "--root", str(root))
    assert code == 0 and (root / "etc/pip.conf").read_text() == text
    diff = out[out.index("--- /etc/pip.conf") : out.index("dry run")].rstrip("\n") + "\n"
    code, out2, _ = run(capsys, "fix", "pip.index-url", "--index-url", MIRROR, "--yes", "--root", str(root))
    assert code == 0
    written = (root / "etc/pip.conf").read_text()
    assert patch(text, diff) == written
    assert (
        written
        == "# ours\n[global]\ntimeout = 60\nindex-url = " + MIRROR + "\n# trailing comment\n[install]\nretries = 2"
    )


def test_scope_choice_and_precedence_notes(tmp_path, env, capsys, monkeypatch):
    root = write_tree(
        tmp_path / "root",
        {
            USER_CONF: "[global]\nindex-url = https://user.example.org/simple\n",
            "/etc/pip.conf": "[global]\ntimeout = 30\n",
        },
    )
    code, out, _ = run(
        capsys, "fix", "pip.index-url", "--index-url", MIRROR, "--scope", "global", "--yes", "--root", str(root)
    )
    assert (root / "etc/pip.conf").read_text() == f"[global]\ntimeout = 30\nindex-url = {MIRROR}\n"
    assert (
        f"index-url in ~/.config/pip/pip.conf ([global]) still wins: gpudoctor fix pip.index-url --index-url "
        f"{MIRROR} --scope user" in out
    )
    monkeypatch.setenv("PIP_INDEX_URL", "https://caller.example.org/simple")  # the caller's: not the image's
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM debian:12\nENV PIP_INDEX_URL=https://env.example.org/simple\n")
    code, out, _ = run(
        capsys,
        "fix",
        "pip.index-url",
        "--index-url",
        MIRROR,
        "--yes",
        "--root",
        str(root),
        "--dockerfile",
        str(dockerfile),
    )
    assert "PIP_INDEX_URL is set in the environment and still overrides pip.conf: unset PIP_INDEX_URL" in out
    # default scope: the file that set the effective index-url (the user file), not /etc
    assert (root / USER_CONF.lstrip("/")).read_text() == f"[global]\nindex-url = {MIRROR}\n"


def test_site_scope_uses_virtual_env(tmp_path, env, capsys, monkeypatch):
    root = write_tree(tmp_path / "root", {"/venvs/app/bin/.keep": ""})
    monkeypatch.setenv("VIRTUAL_ENV", "/elsewhere/caller-venv")  # the caller's: not the image's
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(
        "FROM python:3.12\nRUN python -m venv /venvs/app\nENV VIRTUAL_ENV=/venvs/app \\\n"
        "    PATH=/venvs/app/bin:$PATH\n"
    )
    code, out, _ = run(
        capsys,
        "fix",
        "pip.index-url",
        "--index-url",
        MIRROR,
        "--scope",
        "site",
        "--yes",
        "--root",
        str(root),
        "--dockerfile",
        str(dockerfile),
    )
    assert code == 0 and (root / "venvs/app/pip.conf").read_text() == f"[global]\nindex-url = {MIRROR}\n"


def test_symlinked_pip_conf_edits_the_target(tmp_path, env, capsys):
    root = write_tree(tmp_path / "root", {"/home/user/dotfiles/pip.conf": "[global]\n# keep me\ntimeout = 9\n"})
    link = root / USER_CONF.lstrip("/")
    link.parent.mkdir(parents=True)
    link.symlink_to("/home/user/dotfiles/pip.conf")
    code, out, _ = run(capsys, "fix", "pip.index-url", "--index-url", MIRROR, "--yes", "--root", str(root))
    assert code == 0
    assert link.is_symlink() and os.readlink(link) == "/home/user/dotfiles/pip.conf"
    assert (
        root / "home/user/dotfiles/pip.conf"
    ).read_text() == f"[global]\n# keep me\ntimeout = 9\nindex-url = {MIRROR}\n"
    assert (f"edit /home/user/dotfiles/pip.conf (the target of the symlink {USER_CONF}; in --root {root})") in out
    assert "is a symlink; its target /home/user/dotfiles/pip.conf was edited" in out


def test_plain_http_needs_allow_insecure(tmp_path, env, capsys):
    root = tmp_path / "root"
    root.mkdir()
    http = "http://mirror.example.org:8080/simple"
    code, out, _ = run(capsys, "fix", "pip.index-url", "--index-url", http, "--yes", "--root", str(root))
    assert code == 1 and "refused" in out and "--allow-insecure" in out
    assert not (root / "home").exists()
    code, out, _ = run(
        capsys, "fix", "pip.index-url", "--index-url", http, "--allow-insecure", "--yes", "--root", str(root)
    )
    assert code == 0
    assert (
        root / USER_CONF.lstrip("/")
    ).read_text() == f"[global]\nindex-url = {http}\ntrusted-host = mirror.example.org:8080\n"
    assert "pip.config: ok -> warn" in out


def test_allow_insecure_alone_trusts_the_ignored_http_index(tmp_path, env, capsys):
    text = "[global]\nindex-url = http://mirror.example.org/simple\n"
    root = write_tree(tmp_path / "root", {"/etc/pip.conf": text})
    code, out, _ = run(capsys, "fix", "--all", "--yes", "--root", str(root))
    assert code == 1 and "refused" in out and (root / "etc/pip.conf").read_text() == text
    code, out, _ = run(capsys, "fix", "--all", "--allow-insecure", "--yes", "--root", str(root))
    assert code == 0 and "pip.config: fail -> warn" in out
    assert (root / "etc/pip.conf").read_text() == text + "trusted-host = mirror.example.org\n"


def test_unwritable_global_file_names_file_and_sudo_command(tmp_path, env, capsys, monkeypatch):
    text = "[global]\nindex-url = https://old.example.org/simple\n"
    root = write_tree(tmp_path / "root", {"/etc/pip.conf": text})
    real_can_write = ap.FileOps.can_write
    monkeypatch.setattr(
        ap.FileOps,
        "can_write",
        lambda self, path: (
            False if path.name == "pip.conf" and path.parent.name == "etc" else real_can_write(self, path)
        ),
    )
    monkeypatch.setattr(ap.FileOps, "is_root", lambda self: False)  # an ordinary user: sudo helps
    code, _, err = run(
        capsys, "fix", "pip.index-url", "--index-url", MIRROR, "--scope", "global", "--yes", "--root", str(root)
    )
    assert code == 1
    assert err.strip() == (
        f"gpudoctor: error: cannot write /etc/pip.conf: permission denied; rerun as root: "
        f"sudo gpudoctor fix pip.index-url --root {root} --scope global --index-url {MIRROR} "
        f"--yes. Nothing was changed."
    )
    assert (root / "etc/pip.conf").read_text() == text and ap.Journal().transactions() == []


def test_credentials_never_printed(tmp_path, env, capsys):
    root = tmp_path / "root"
    root.mkdir()
    url = "https://alice:hunter2@mirror.example.org/simple"
    code, out, err = run(capsys, "fix", "pip.index-url", "--index-url", url, "--yes", "--root", str(root))
    assert "hunter2" not in out + err and "https://****@mirror.example.org/simple" in out
    assert (root / USER_CONF.lstrip("/")).read_text() == f"[global]\nindex-url = {url}\n"
    code, out, err = run(capsys, "fix", "--history", "--format", "json")
    assert "hunter2" not in out


# --------------------------------------------------------------------------- real pip agrees


def _pip_config_list(home: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), PIP_DISABLE_PIP_VERSION_CHECK="1")
    return subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], env=env, capture_output=True, text=True, timeout=60
    )


def test_real_pip_reads_the_repaired_and_updated_file(isolated_home, capsys, monkeypatch):
    for var in list(os.environ):
        if var.startswith("PIP_") or var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
            monkeypatch.delenv(var, raising=False)
    etc_before = {p: Path(p).read_bytes() for p in ("/etc/pip.conf", "/etc/xdg/pip/pip.conf") if Path(p).is_file()}
    conf = isolated_home / ".config/pip/pip.conf"
    conf.parent.mkdir(parents=True)
    conf.write_bytes(CASE20.read_bytes())
    broken = _pip_config_list(isolated_home)
    assert broken.returncode != 0 and "could not be loaded" in broken.stderr
    code, out, err = run(capsys, "fix", "pip.index-url", "--index-url", MIRROR, "--scope", "user", "--yes")
    assert code in (0, 1), err  # 1 only if this machine's own global pip.conf fails the check
    [txn] = ap.Journal().transactions()
    assert [f.target for f in txn.files] == [str(conf)]
    fixed = _pip_config_list(isolated_home)
    assert fixed.returncode == 0, fixed.stderr
    assert f"global.index-url='{MIRROR}'" in fixed.stdout
    assert "global.timeout='60'" in fixed.stdout
    assert {p: Path(p).read_bytes() for p in etc_before} == etc_before


def test_really_unwritable_file_as_an_unprivileged_user(tmp_path):
    """No fake: the fix runs as an ordinary user (nobody when the tests run as root, else with the
    target directory made read-only) and must name the file and the sudo command, changing nothing."""
    import shutil
    import stat as _stat
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="gpudoctor-priv-"))
    try:
        os.chmod(base, 0o755)
        root = write_tree(base / "root", {"/etc/pip.conf": "[global]\ntimeout = 5\n"})
        state = base / "state"
        state.mkdir()
        os.chmod(state, 0o777)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "XDG_"))}
        env.update(HOME="/home/user", XDG_CONFIG_HOME="/home/user/.config", XDG_STATE_HOME=str(state))
        prefix = []
        if os.geteuid() == 0:
            # drop to nobody with util-linux setpriv (subprocess's user= cannot exec an interpreter that lives
            # under root's 0700 home, as in this development container)
            if not shutil.which("setpriv"):  # pragma: no cover
                pytest.skip("running as root without setpriv: cannot drop privileges")
            prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        else:  # pragma: no cover - CI runs unprivileged
            os.chmod(root / "etc", _stat.S_IRUSR | _stat.S_IXUSR)
            os.chmod(root / "etc/pip.conf", 0o444)
        proc = subprocess.run(
            prefix
            + [
                sys.executable,
                "-m",
                "gpudoctor",
                "fix",
                "pip.index-url",
                "--index-url",
                MIRROR,
                "--scope",
                "global",
                "--yes",
                "--root",
                str(root),
            ],
            env=env,
            cwd="/",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.strip().splitlines()[-1] == (
            f"gpudoctor: error: cannot write /etc/pip.conf: permission denied; rerun as root: sudo gpudoctor fix "
            f"pip.index-url --root {root} --scope global --index-url {MIRROR} --yes. Nothing was changed."
        )
        assert (root / "etc/pip.conf").read_text() == "[global]\ntimeout = 5\n"
        assert not list(state.rglob("manifest.json"))
    finally:
        os.chmod(base / "root" / "etc", 0o755)
        shutil.rmtree(base)
