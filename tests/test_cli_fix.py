"""`gpudoctor fix` end to end with a small demo check and fix (registry injected), on a real temp root.

The demo check reads /etc/demo.conf under the root through a closure (test
scaffolding only; real checks read facts) and fails unless it says
``mode = fast``; the demo fix plans that edit.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from gpudoctor import apply as ap
from gpudoctor.cli import fix as cli_fix
from gpudoctor.cli import main
from gpudoctor.model import Check, FileEdit, Fix, FixPlan, FixRefused, Status
from gpudoctor.registry import Registry
from gpudoctor.system import Files

STATE: dict = {}


def _demo_text():
    p = Path(STATE["root"]) / "etc/demo.conf"
    return p.read_text() if p.exists() else None


def _evaluate(facts):
    text = _demo_text()
    if text is not None and "mode = fast" in text:
        return [CHECK.finding(Status.OK, "demo is fast")]
    return [CHECK.finding(Status.FAIL, "demo is slow", fixes=("demo.fast",))]


def _plan(facts, finding, options):
    if options.get("refuse"):
        raise FixRefused("edit /etc/demo.conf by hand: set mode = fast")
    old = _demo_text()
    if old is not None and "mode = fast" in old:
        return FixPlan("demo.fast", "set mode = fast", (FileEdit("/etc/demo.conf", old, old),), ("demo.check",))
    new = (
        (old or "").replace("mode = slow", "mode = fast")
        if old and "mode = slow" in old
        else (old or "") + "mode = fast\n"
    )
    return FixPlan(
        "demo.fast",
        "set mode = fast in /etc/demo.conf",
        (FileEdit("/etc/demo.conf", old, new),),
        ("demo.check",),
        notes=("systemctl restart demo",),
    )


CHECK = Check(id="demo.check", title="demo", needs=(), evaluate=_evaluate)
FIX = Fix(id="demo.fast", title="make demo fast", addresses=("demo.check",), plan=_plan)


@pytest.fixture
def root(tmp_path, monkeypatch):
    r = tmp_path / "root"
    (r / "etc").mkdir(parents=True)
    (r / "etc/demo.conf").write_text("# demo\nmode = slow\nother = 1\n")
    STATE["root"] = str(r)
    reg = Registry(
        checks={"demo.check": CHECK},
        fixes={"demo.fast": FIX},
        providers={"check:demo.check": "test", "fix:demo.fast": "test"},
    )
    monkeypatch.setattr(cli_fix, "load_registry", lambda: reg)
    return r


def run(capsys, *args):
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out, err = capsys.readouterr()
    return info.value.code, out, err


def test_lists_offered_fixes_without_ids(root, capsys):
    code, out, _ = run(capsys, "fix", "--root", str(root))
    assert code == 0
    assert "demo.fast  (demo.check: fail: demo is slow)" in out
    assert "gpudoctor fix demo.fast" in out


def test_no_tty_without_yes_shows_diff_writes_nothing(root, capsys):
    code, out, err = run(capsys, "fix", "demo.fast", "--root", str(root))
    assert code == 2
    assert "-mode = slow\n+mode = fast\n" in out
    assert "rerun with --yes" in err and len(err.strip().splitlines()) == 1
    assert (root / "etc/demo.conf").read_text() == "# demo\nmode = slow\nother = 1\n"
    assert ap.Journal().transactions() == []


def test_dry_run_writes_nothing(root, capsys):
    code, out, _ = run(capsys, "fix", "--all", "--dry-run", "--root", str(root))
    assert code == 0 and "dry run: nothing was written" in out and "+mode = fast" in out
    assert "mode = slow" in (root / "etc/demo.conf").read_text()


def test_confirm_on_terminal(root, capsys, monkeypatch):
    monkeypatch.setattr(cli_fix, "stdin_is_tty", lambda: True)
    monkeypatch.setattr("click.confirm", lambda *a, **k: False)
    code, out, _ = run(capsys, "fix", "demo.fast", "--root", str(root))
    assert code == 1 and "nothing was written" in out
    monkeypatch.setattr("click.confirm", lambda *a, **k: True)
    code, out, _ = run(capsys, "fix", "demo.fast", "--root", str(root))
    assert code == 0 and "mode = fast" in (root / "etc/demo.conf").read_text()


def test_all_twice_then_undo_and_history(root, capsys):
    code, out, _ = run(capsys, "fix", "--all", "--yes", "--root", str(root))
    assert code == 0, out
    assert (root / "etc/demo.conf").read_text() == "# demo\nmode = fast\nother = 1\n"
    assert "demo.check: fail -> ok" in out
    assert "systemctl restart demo" in out
    [txn] = ap.Journal().transactions()
    assert f"gpudoctor fix --undo {txn.id}" in out

    code, out, _ = run(capsys, "fix", "--all", "--yes", "--root", str(root))
    assert code == 0 and "nothing to fix" in out
    code, out, _ = run(capsys, "fix", "demo.fast", "--yes", "--root", str(root))
    assert code == 0 and "already fixed" in out
    assert len(ap.Journal().transactions()) == 1

    code, out, _ = run(capsys, "fix", "--history")
    assert code == 0 and txn.id in out and "applied" in out and "demo.fast" in out
    code, out, _ = run(capsys, "fix", "--undo")
    assert code == 0 and "restored /etc/demo.conf" in out
    assert (root / "etc/demo.conf").read_text() == "# demo\nmode = slow\nother = 1\n"
    code, _, err = run(capsys, "fix", "--undo")
    assert code == 2 and "nothing to undo" in err


def test_undo_refuses_changed_file_unless_force(root, capsys):
    assert run(capsys, "fix", "demo.fast", "--yes", "--root", str(root))[0] == 0
    (root / "etc/demo.conf").write_text("hand edit\n")
    code, _, err = run(capsys, "fix", "--undo")
    assert code == 1 and "/etc/demo.conf changed since" in err and "--force" in err
    assert (root / "etc/demo.conf").read_text() == "hand edit\n"
    code, history, _ = run(capsys, "fix", "--history")
    assert "changed since: /etc/demo.conf" in history
    assert run(capsys, "fix", "--undo", "--force")[0] == 0
    assert (root / "etc/demo.conf").read_text() == "# demo\nmode = slow\nother = 1\n"


def test_permission_denied_names_file_and_sudo_command(root, capsys, monkeypatch):
    monkeypatch.setattr(ap.FileOps, "can_write", lambda self, path: False)
    monkeypatch.setattr(ap.FileOps, "is_root", lambda self: False)  # an ordinary user
    code, _, err = run(capsys, "fix", "demo.fast", "--yes", "--root", str(root))
    assert code == 1
    assert err.strip() == (
        f"gpudoctor: error: cannot write /etc/demo.conf: permission denied; rerun as root: "
        f"sudo gpudoctor fix demo.fast --root {root} --yes. Nothing was changed."
    )
    assert "mode = slow" in (root / "etc/demo.conf").read_text()


def test_refused_fix_exits_1_with_message(root, capsys):
    code, out, _ = run(capsys, "fix", "demo.fast", "--set", "refuse=1", "--yes", "--root", str(root))
    assert code == 1 and "refused: edit /etc/demo.conf by hand" in out


def test_json_outcome(root, capsys):
    code, out, err = run(capsys, "fix", "demo.fast", "--yes", "--format", "json", "--root", str(root))
    assert code == 0
    doc = json.loads(out)
    assert (
        doc["status"] == "applied" and doc["before"] == {"demo.check": "fail"} and doc["after"] == {"demo.check": "ok"}
    )
    assert doc["fixes"][0]["id"] == "demo.fast" and doc["fixes"][0]["status"] == "applied"
    assert doc["transaction"] and "+mode = fast" in doc["diffs"][0]["diff"]


def test_usage_errors(root, capsys):
    code, _, err = run(capsys, "fix", "nope.fix", "--root", str(root))
    assert code == 2 and "no fix matches 'nope.fix'; known fixes: demo.fast" in err
    code, _, err = run(capsys, "fix", "demo.fast", "--set", "novalue", "--root", str(root))
    assert code == 2 and "KEY=VALUE" in err
    code, _, err = run(capsys, "fix", "--force")
    assert code == 2


def test_undo_then_undo_of_the_undo_through_the_cli(root, capsys):
    conf = root / "etc/demo.conf"
    before = conf.read_bytes()
    assert run(capsys, "fix", "demo.fast", "--yes", "--root", str(root))[0] == 0
    after = conf.read_bytes()
    code, out, _ = run(capsys, "fix", "--undo")
    assert code == 0 and conf.read_bytes() == before
    record = out.split("to undo this undo: gpudoctor fix --undo ")[1].split()[0]
    code, out, _ = run(capsys, "fix", "--undo", record)
    assert code == 0 and conf.read_bytes() == after
    assert "is applied again" in out
    code, out, _ = run(capsys, "fix", "--undo")
    assert code == 0 and conf.read_bytes() == before


# =========================================================================== defects found by testing `gpudoctor fix`
# (journal, read-only files, pip scope, exit codes, forced undo, ``--root`` in messages, a
# directory where pip.conf should be)


def plan(fix: str, *edits: FileEdit) -> FixPlan:
    return FixPlan(fix=fix, description=f"{fix} plan", edits=tuple(edits), addresses=("x.check",))


# --------------------------------------------------------------------------- 1. journal not writable


def test_journal_in_the_way_is_one_clear_line_and_nothing_written(root, capsys, isolated_home, monkeypatch):
    state = isolated_home / "state-file"
    state.write_text("a regular file where the state directory should be\n")
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    code, out, err = run(capsys, "fix", "--all", "--yes", "--root", str(root))
    assert code == 1
    [line] = err.strip().splitlines()
    assert line.startswith(f"gpudoctor: error: cannot write the backup journal {state}/gpudoctor/journal: ")
    assert "XDG_STATE_HOME=" in line and "nothing was changed" in line
    assert "internal error" not in err and "bug" not in err
    assert (root / "etc/demo.conf").read_text() == "# demo\nmode = slow\nother = 1\n"


def test_read_only_journal_raises_journal_unavailable(root, monkeypatch, tmp_path):
    (root / "etc/a.conf").write_text("a1\n")
    journal = ap.Journal(tmp_path / "ro-state" / "journal")

    def erofs(self):
        raise OSError(errno.EROFS, "Read-only file system", str(self.directory))

    monkeypatch.setattr(ap.Journal, "_ensure", erofs)
    writes = ap.prepare([plan("f.x", FileEdit("/etc/a.conf", "a1\n", "a2\n"))], Files(root))
    with pytest.raises(
        ap.JournalUnavailable,
        match=r"cannot write the backup journal .*ro-state/journal: "
        r"Read-only file system; nothing was changed",
    ):
        ap.apply(writes, Files(root), journal)
    assert (root / "etc/a.conf").read_text() == "a1\n"


def test_backup_copy_failure_is_a_journal_error_not_a_sudo_hint(root, monkeypatch, isolated_home):
    (root / "etc/a.conf").write_text("a1\n")
    journal = ap.Journal()

    def denied(self, directory, name, data):
        raise self._unavailable(PermissionError(errno.EACCES, "Permission denied"))

    monkeypatch.setattr(ap.Journal, "_save_backup", denied)
    writes = ap.prepare([plan("f.x", FileEdit("/etc/a.conf", "a1\n", "a2\n"))], Files(root))
    with pytest.raises(ap.JournalUnavailable, match="Permission denied"):
        ap.apply(writes, Files(root), journal, rerun="sudo gpudoctor fix f.x")
    assert (root / "etc/a.conf").read_text() == "a1\n"
    assert journal.transactions() == []


# --------------------------------------------------------------------------- 2. read-only file, already root


def test_root_refused_gets_no_sudo_advice(root, capsys, monkeypatch):
    monkeypatch.setattr(ap.FileOps, "can_write", lambda self, path: False)
    monkeypatch.setattr(ap.FileOps, "is_root", lambda self: True)
    monkeypatch.setattr(ap.FileOps, "read_only", lambda self, path: False)
    code, _, err = run(capsys, "fix", "demo.fast", "--yes", "--root", str(root))
    assert code == 1
    [line] = err.strip().splitlines()
    assert "cannot write /etc/demo.conf" in line and "even as root" in line
    assert "sudo gpudoctor" not in line and "rerun as root" not in line
    assert "mode = slow" in (root / "etc/demo.conf").read_text()


@pytest.mark.parametrize("as_root", [True, False])
def test_read_only_file_system_says_so_without_sudo(root, capsys, monkeypatch, as_root):
    monkeypatch.setattr(ap.FileOps, "can_write", lambda self, path: False)
    monkeypatch.setattr(ap.FileOps, "is_root", lambda self: as_root)
    monkeypatch.setattr(ap.FileOps, "read_only", lambda self, path: True)
    code, _, err = run(capsys, "fix", "demo.fast", "--yes", "--root", str(root))
    assert code == 1
    [line] = err.strip().splitlines()
    assert "cannot write /etc/demo.conf: the file system is read-only" in line
    assert "even as root" in line and "remount" in line and "sudo gpudoctor" not in line


def test_erofs_during_the_write_rolls_back_and_says_read_only(root, isolated_home):
    a, b = root / "etc/a.conf", root / "etc/b.conf"
    a.write_text("a1\n")
    b.write_text("b1\n")

    class Erofs(ap.FileOps):
        def write(self, path, data, mode, owner):
            if path == b and data == b"b2\n":
                raise OSError(errno.EROFS, "Read-only file system", str(path))
            super().write(path, data, mode, owner)

    writes = ap.prepare(
        [plan("f.x", FileEdit("/etc/a.conf", "a1\n", "a2\n"), FileEdit("/etc/b.conf", "b1\n", "b2\n"))], Files(root)
    )
    with pytest.raises(ap.CannotWrite, match="/etc/b.conf: the file system is read-only") as info:
        ap.apply(writes, Files(root), ap.Journal(), ops=Erofs(), rerun="sudo gpudoctor fix f.x")
    assert "sudo" not in str(info.value).replace("sudo mount", "")
    assert a.read_text() == "a1\n" and b.read_text() == "b1\n"


def test_read_only_reports_a_writable_tmp_as_writable(tmp_path):
    assert ap.FileOps().read_only(tmp_path / "missing" / "pip.conf") is False


# --------------------------------------------------------------------------- 3. every pip edit in the chosen scope


def test_scope_global_puts_trusted_host_in_the_global_file(tmp_path, capsys, monkeypatch):
    from gpudoctor.testing import write_tree
    from test_pip_fix import HOME, USER_CONF

    monkeypatch.setenv("HOME", HOME)
    monkeypatch.setenv("XDG_CONFIG_HOME", f"{HOME}/.config")
    for var in list(os.environ):
        if var.startswith("PIP_") or var in ("XDG_CONFIG_DIRS", "VIRTUAL_ENV", "CONDA_PREFIX"):
            monkeypatch.delenv(var, raising=False)
    user_text = "[global]\nindex-url = http://mirror.example.org/simple\n"
    root = write_tree(tmp_path / "root", {USER_CONF: user_text, "/etc/pip.conf": "[global]\ntimeout = 30\n"})
    code, out, _ = run(
        capsys, "fix", "--scope", "global", "--all", "--allow-insecure", "--dry-run", "--root", str(root)
    )
    assert code == 0, out
    assert "+++ /etc/pip.conf" in out and "+trusted-host = mirror.example.org" in out
    assert f"+++ {USER_CONF}" not in out and "trust mirror.example.org (trusted-host) in /etc/pip.conf" in out

    code, out, _ = run(capsys, "fix", "--scope", "global", "--all", "--allow-insecure", "--yes", "--root", str(root))
    assert code == 0, out
    assert (root / USER_CONF.lstrip("/")).read_text() == user_text
    assert (root / "etc/pip.conf").read_text() == "[global]\ntimeout = 30\ntrusted-host = mirror.example.org\n"


# --------------------------------------------------------------------------- 4. exit codes


def _hand_registry(monkeypatch, offers=()):
    """The demo registry plus a check that fails in a way no fix repairs (a hand edit)."""
    import test_cli_fix as demo
    from gpudoctor.cli import fix as cli_fix
    from gpudoctor.model import Check, Fix, Status
    from gpudoctor.registry import Registry

    hand = Check(
        id="demo.hand",
        title="hand",
        needs=(),
        evaluate=lambda facts: [hand.finding(Status.FAIL, "edit /etc/hand.conf by hand", fixes=offers)],
    )
    other = Fix(id="demo.other", title="unrelated", addresses=("demo.hand",), plan=lambda f, x, o: None)
    reg = Registry(
        checks={"demo.check": demo.CHECK, "demo.hand": hand},
        fixes={"demo.fast": demo.FIX, "demo.other": other},
        providers={"check:demo.check": "t", "check:demo.hand": "t", "fix:demo.fast": "t", "fix:demo.other": "t"},
    )
    monkeypatch.setattr(cli_fix, "load_registry", lambda: reg)


def test_all_names_failures_without_automatic_fix_and_exits_1(root, capsys, monkeypatch):
    _hand_registry(monkeypatch)
    code, out, _ = run(capsys, "fix", "--all", "--dry-run", "--root", str(root))
    assert code == 1
    assert "+mode = fast" in out
    assert "no automatic fix" in out and "demo.hand: edit /etc/hand.conf by hand" in out
    code, out, _ = run(capsys, "fix", "--all", "--yes", "--root", str(root))
    assert code == 1 and "demo.check: fail -> ok" in out and "demo.hand: edit /etc/hand.conf by hand" in out
    code, out, _ = run(capsys, "fix", "--all", "--yes", "--root", str(root))
    assert code == 1 and "nothing to fix" not in out and "demo.hand: edit /etc/hand.conf by hand" in out


@pytest.mark.parametrize("how", [("--all",), ("demo.other",)])
@pytest.mark.parametrize("dry", [("--dry-run",), ("--yes",)])
def test_offered_fix_that_plans_nothing_for_a_failure_is_exit_1_either_way(root, capsys, monkeypatch, how, dry):
    _hand_registry(monkeypatch, offers=("demo.other",))
    (root / "etc/demo.conf").write_text("mode = fast\n")
    code, out, _ = run(capsys, "fix", *how, *dry, "--root", str(root))
    assert code == 1, out
    assert "demo.other: no automatic change for demo.hand: edit /etc/hand.conf by hand" in out


@pytest.mark.parametrize("how", [("--all",), ("demo.fast",)])
@pytest.mark.parametrize("dry", [("--dry-run",), ("--yes",)])
def test_refused_plan_is_exit_1_named_or_all_dry_or_not(root, capsys, how, dry):
    code, out, _ = run(capsys, "fix", *how, *dry, "--set", "refuse=1", "--root", str(root))
    assert code == 1 and "refused: edit /etc/demo.conf by hand" in out


def test_undo_of_nothing_or_unknown_transaction_is_a_usage_error(root, capsys):
    code, _, err = run(capsys, "fix", "--undo")
    assert code == 2 and "nothing to undo" in err
    code, _, err = run(capsys, "fix", "--undo", "20990101T000000Z-beef")
    assert code == 2 and "no transaction '20990101T000000Z-beef'" in err
    assert run(capsys, "fix", "demo.fast", "--yes", "--root", str(root))[0] == 0
    (root / "etc/demo.conf").write_text("hand edit\n")
    code, _, err = run(capsys, "fix", "--undo")
    assert code == 1 and "changed since" in err  # a refusal about the files, not a usage error


def test_fix_help_states_exit_codes(capsys):
    code, out, _ = run(capsys, "fix", "--help")
    assert code == 0
    assert "Exit codes" in out and "2  usage error" in out and "no automatic fix" in out


# --------------------------------------------------------------------------- 5. undo --force keeps the later edit


def test_forced_undo_saves_the_later_edit_in_the_journal_first(root, capsys):
    conf = root / "etc/demo.conf"
    original = conf.read_bytes()
    assert run(capsys, "fix", "demo.fast", "--yes", "--root", str(root))[0] == 0
    [applied] = ap.Journal().transactions()
    conf.write_bytes(b"# a hand edit made later\nmode = turbo\n")
    code, out, _ = run(capsys, "fix", "--undo", "--force")
    assert code == 0, out
    assert conf.read_bytes() == original
    txns = {t.id: t for t in ap.Journal().transactions()}
    assert txns[applied.id].status == "undone" and txns[applied.id].saved_by
    saved = txns[txns[applied.id].saved_by]
    assert saved.status == "applied" and saved.fixes == (f"undo --force {applied.id}",)
    assert f"gpudoctor fix --undo {saved.id}" in out and "saved the current contents" in out
    # nothing was lost: undoing the saved transaction brings the later edit back, byte for byte
    code, out, _ = run(capsys, "fix", "--undo", saved.id)
    assert code == 0, out
    assert conf.read_bytes() == b"# a hand edit made later\nmode = turbo\n"


def test_forced_undo_of_a_created_file_keeps_its_later_content(root, capsys, tmp_path):
    from gpudoctor.system import Files as F

    (root / "etc/new.conf").unlink(missing_ok=True)
    writes = ap.prepare([plan("f.new", FileEdit("/etc/new.conf", None, "v1\n"))], F(root))
    txn = ap.apply(writes, F(root), ap.Journal())
    (root / "etc/new.conf").write_text("v2 by hand\n")
    done = ap.Journal().undo(txn.id, force=True)
    assert not (root / "etc/new.conf").exists() and done.saved_by
    ap.Journal().undo(done.saved_by)
    assert (root / "etc/new.conf").read_text() == "v2 by hand\n"


def test_unforced_undo_saves_only_its_undo_record(root, capsys):
    assert run(capsys, "fix", "demo.fast", "--yes", "--root", str(root))[0] == 0
    code, out, _ = run(capsys, "fix", "--undo")
    assert code == 0 and "saved the current contents" not in out
    fixed, record = ap.Journal().transactions()
    assert (fixed.status, record.status, record.undoes) == ("undone", "applied", fixed.id)
    assert record.fixes == (f"undo {fixed.id}",) and f"to undo this undo: gpudoctor fix --undo {record.id}" in out


# --------------------------------------------------------------------------- 6. --root shown in messages and diffs


def test_root_is_shown_in_describe_diff_and_undo(root, capsys):
    code, out, _ = run(capsys, "fix", "demo.fast", "--dry-run", "--root", str(root))
    assert code == 0
    assert f"edit /etc/demo.conf (in --root {root})" in out
    assert f"--- /etc/demo.conf\t(in --root {root})\n+++ /etc/demo.conf\t(in --root {root})\n" in out
    assert run(capsys, "fix", "demo.fast", "--yes", "--root", str(root))[0] == 0
    code, out, _ = run(capsys, "fix", "--undo")
    assert code == 0 and f"restored /etc/demo.conf (in --root {root})" in out


def test_plain_root_keeps_plain_paths(tmp_path):
    assert ap.in_root("/etc/pip.conf", "/") == "/etc/pip.conf"
    f = tmp_path / "x.conf"
    f.write_text("a\n")
    [w] = ap.prepare([plan("f.x", FileEdit(str(f), "a\n", "b\n"))], Files())
    assert w.describe() == f"edit {f}" and ap.unified_diff(w).startswith(f"--- {f}\n+++ {f}\n")


# --------------------------------------------------------------------------- 7. pip.conf that is a directory


def test_pip_conf_directory_is_called_a_directory(tmp_path, capsys, monkeypatch):
    from gpudoctor.testing import write_tree
    from test_pip_fix import HOME, MIRROR, USER_CONF

    monkeypatch.setenv("HOME", HOME)
    monkeypatch.setenv("XDG_CONFIG_HOME", f"{HOME}/.config")
    for var in list(os.environ):
        if var.startswith("PIP_") or var in ("XDG_CONFIG_DIRS", "VIRTUAL_ENV", "CONDA_PREFIX"):
            monkeypatch.delenv(var, raising=False)
    root = write_tree(tmp_path / "root", {USER_CONF + "/stray.txt": "oops\n"})
    code, out, _ = run(
        capsys, "fix", "pip.index-url", "--index-url", MIRROR, "--scope", "user", "--yes", "--root", str(root)
    )
    assert code == 1
    assert f"{USER_CONF} is a directory, not a file" in out and "permissions" not in out
    assert (root / USER_CONF.lstrip("/") / "stray.txt").read_text() == "oops\n"


def test_writer_calls_a_directory_target_a_directory(tmp_path):
    (tmp_path / "etc/pip.conf").mkdir(parents=True)
    with pytest.raises(ap.StaleEdit, match="it is a directory, not a regular file"):
        ap.prepare([plan("f.x", FileEdit("/etc/pip.conf", None, "x\n"))], Files(tmp_path))
