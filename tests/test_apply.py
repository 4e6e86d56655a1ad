"""The writer (gpudoctor.apply) on real files in temporary roots."""

from __future__ import annotations

import os
import re
import stat

import pytest

from gpudoctor import apply as ap
from gpudoctor.model import FileEdit, FixPlan
from gpudoctor.system import Files


def plan(fix: str, *edits: FileEdit) -> FixPlan:
    return FixPlan(fix=fix, description=f"{fix} plan", edits=tuple(edits), addresses=("x.check",))


def patch(old: str, diff: str) -> str:
    """Apply a unified diff (as produced by apply.unified_diff) to ``old``: a tiny independent patcher."""
    src = old.splitlines(keepends=True)
    out: list = []
    pos = 0
    lines = diff.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        m = re.match(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", lines[i])
        if not m:
            i += 1
            continue
        start = int(m.group(1)) - (0 if m.group(2) == "0" else 1)
        out.extend(src[pos:start])
        pos = start
        i += 1
        while i < len(lines) and not lines[i].startswith("@@"):
            line = lines[i]
            nxt_no_nl = i + 1 < len(lines) and lines[i + 1].startswith("\\ No newline")
            body = line[1:-1] if nxt_no_nl else line[1:]
            if line[0] == " ":
                out.append(body)
                pos += 1
            elif line[0] == "-":
                pos += 1
            elif line[0] == "+":
                out.append(body)
            i += 2 if nxt_no_nl else 1
    out.extend(src[pos:])
    return "".join(out)


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "root"
    (r / "etc").mkdir(parents=True)
    return r


@pytest.fixture
def journal(isolated_home):
    return ap.Journal()


def test_journal_lives_under_xdg_state_home(isolated_home):
    assert ap.Journal().directory == isolated_home / ".local/state/gpudoctor/journal"


def test_diff_shown_equals_change_written_and_undo_restores_bytes(root, journal):
    old = "# my pip config\n[global]\nindex-url = https://a.example.org/simple\ntimeout = 60\n"
    new = "# my pip config\n[global]\nindex-url = https://b.example.org/simple\ntimeout = 60\n"
    conf = root / "etc/pip.conf"
    conf.write_text(old)
    os.chmod(conf, 0o640)
    os.chown(conf, 1234, 2345)
    files = Files(root)
    writes = ap.prepare([plan("pip.index-url", FileEdit("/etc/pip.conf", old, new))], files)
    diff = ap.unified_diff(writes[0])
    assert diff.startswith(f"--- /etc/pip.conf\t(in --root {root})\n+++ /etc/pip.conf\t(in --root {root})\n")
    assert "-index-url = https://a.example.org/simple\n+index-url = https://b.example.org/simple\n" in diff
    txn = ap.apply(writes, files, journal)
    written = conf.read_text()
    assert written == new
    assert patch(old, diff) == written
    st = conf.stat()
    assert stat.S_IMODE(st.st_mode) == 0o640 and (st.st_uid, st.st_gid) == (1234, 2345)
    assert not [p for p in conf.parent.iterdir() if "gpudoctor-tmp" in p.name]
    # journal: manifest and private backup
    [t] = journal.transactions()
    assert t.id == txn.id and t.status == "applied" and t.fixes == ("pip.index-url",)
    assert stat.S_IMODE((t.directory / t.files[0].backup).stat().st_mode) == 0o600
    assert (t.directory / t.files[0].backup).read_bytes() == old.encode()
    undone = journal.undo()
    assert undone.status == "undone" and conf.read_bytes() == old.encode()
    st = conf.stat()
    assert stat.S_IMODE(st.st_mode) == 0o640 and (st.st_uid, st.st_gid) == (1234, 2345)
    with pytest.raises(ap.UndoRefused, match="nothing to undo"):
        journal.undo()


def test_no_final_newline_diff_round_trips(root, journal):
    old, new = "[global]\nindex-url = x", "[global]\nindex-url = y"
    (root / "etc/pip.conf").write_text(old)
    writes = ap.prepare([plan("f.x", FileEdit("/etc/pip.conf", old, new))], Files(root))
    diff = ap.unified_diff(writes[0])
    assert "\\ No newline at end of file" in diff
    ap.apply(writes, Files(root), journal)
    assert patch(old, diff) == (root / "etc/pip.conf").read_text() == new


def test_credentials_redacted_in_diff_but_written(root, journal):
    new = "[global]\nindex-url = https://alice:s3cret@mirror.example.org/simple\n"
    writes = ap.prepare([plan("f.x", FileEdit("/etc/pip.conf", None, new))], Files(root))
    diff = ap.unified_diff(writes[0])
    assert "s3cret" not in diff and "https://****@mirror.example.org/simple" in diff
    assert diff.startswith("--- /dev/null\n")
    ap.apply(writes, Files(root), journal)
    assert (root / "etc/pip.conf").read_text() == new


def test_concurrent_change_between_plan_and_write_is_refused(root, journal):
    conf = root / "etc/pip.conf"
    conf.write_text("[global]\ntimeout = 1\n")
    writes = ap.prepare(
        [plan("f.x", FileEdit("/etc/pip.conf", "[global]\ntimeout = 1\n", "[global]\ntimeout = 60\n"))], Files(root)
    )
    conf.write_text("[global]\ntimeout = 5\n")  # someone else edits it meanwhile
    with pytest.raises(ap.StaleEdit, match="/etc/pip.conf: it changed since"):
        ap.apply(writes, Files(root), journal)
    assert conf.read_text() == "[global]\ntimeout = 5\n"
    assert journal.transactions() == []


def test_stale_plan_refused_at_prepare(root):
    (root / "etc/pip.conf").write_text("now\n")
    with pytest.raises(ap.StaleEdit):
        ap.prepare([plan("f.x", FileEdit("/etc/pip.conf", "then\n", "new\n"))], Files(root))
    with pytest.raises(ap.StaleEdit, match="to be created but now exists"):
        ap.prepare([plan("f.x", FileEdit("/etc/pip.conf", None, "new\n"))], Files(root))


def test_change_after_backup_rolls_back_earlier_files(root, journal):
    a, b = root / "etc/a.conf", root / "etc/b.conf"
    a.write_text("a1\n")
    b.write_text("b1\n")

    class Meddler(ap.FileOps):
        """Changes b.conf right after it was backed up (between backup and replace)."""

        reads = 0

        def read(self, path):
            data = super().read(path)
            if path == b:
                self.reads += 1
                if self.reads == 1:  # the backup read; the next one is the last look
                    b.write_text("b-other\n")
            return data

    writes = ap.prepare(
        [plan("f.x", FileEdit("/etc/a.conf", "a1\n", "a2\n"), FileEdit("/etc/b.conf", "b1\n", "b2\n"))], Files(root)
    )
    with pytest.raises(ap.StaleEdit):
        ap.apply(writes, Files(root), journal, ops=Meddler())
    assert a.read_text() == "a1\n" and b.read_text() == "b-other\n"
    assert [t.status for t in journal.transactions()] == ["rolled-back"]


def test_failure_in_second_file_rolls_back_the_first(root, journal):
    """A real OS failure: the second file's directory is replaced by a plain file just before its write."""
    (root / "etc/pip").mkdir()
    a, b = root / "etc/a.conf", root / "etc/pip/pip.conf"
    a.write_text("a1\n")
    b.write_text("b1\n")
    os.chmod(a, 0o600)

    class Swapper(ap.FileOps):
        def write(self, path, data, mode, owner):
            if path == b:
                b.unlink()
                (root / "etc/pip").rmdir()
                (root / "etc/pip").write_text("not a directory\n")
            super().write(path, data, mode, owner)

    writes = ap.prepare(
        [
            plan("f.one", FileEdit("/etc/a.conf", "a1\n", "a2\n")),
            plan("f.two", FileEdit("/etc/pip/pip.conf", "b1\n", "[global]\n")),
        ],
        Files(root),
    )
    with pytest.raises(ap.WriteFailed) as info:
        ap.apply(writes, Files(root), journal, ops=Swapper())
    assert "writing /etc/pip/pip.conf failed: Not a directory; restored /etc/a.conf" in str(info.value)
    assert a.read_bytes() == b"a1\n" and stat.S_IMODE(a.stat().st_mode) == 0o600
    assert (root / "etc/pip").read_text() == "not a directory\n"
    [t] = journal.transactions()
    assert t.status == "rolled-back"
    with pytest.raises(ap.UndoRefused):
        journal.undo()


def test_unreadable_parent_fails_before_writing(root, journal):
    (root / "etc/a.conf").write_text("a1\n")
    (root / "etc/pip").write_text("a file where a directory should be\n")
    with pytest.raises(ap.WriteFailed, match="cannot read it: Not a directory"):
        ap.prepare([plan("f.one", FileEdit("/etc/pip/pip.conf", "x\n", "y\n"))], Files(root))


def test_permission_error_on_second_write_gives_sudo_message_and_rolls_back(root, journal):
    a, b = root / "etc/a.conf", root / "etc/pip.conf"
    a.write_text("a1\n")
    b.write_text("b1\n")

    class Denied(ap.FileOps):
        def is_root(self):  # an ordinary user: sudo would help
            return False

        def write(self, path, data, mode, owner):
            if path == b and data == b"b2\n":
                raise PermissionError(13, "Permission denied", str(path))
            super().write(path, data, mode, owner)

    writes = ap.prepare(
        [plan("f.x", FileEdit("/etc/a.conf", "a1\n", "a2\n"), FileEdit("/etc/pip.conf", "b1\n", "b2\n"))], Files(root)
    )
    with pytest.raises(ap.NeedsPrivilege) as info:
        ap.apply(writes, Files(root), journal, ops=Denied(), rerun="sudo gpudoctor fix f.x --yes")
    msg = str(info.value)
    assert msg == (
        "cannot write /etc/pip.conf: permission denied; rerun as root: sudo gpudoctor fix f.x --yes. "
        "Nothing was changed."
    )
    assert a.read_text() == "a1\n" and b.read_text() == "b1\n"


def test_unwritable_target_refused_before_anything_is_touched(root, journal):
    a, b = root / "etc/a.conf", root / "etc/pip.conf"
    a.write_text("a1\n")
    b.write_text("b1\n")

    class ReadOnly(ap.FileOps):
        def can_write(self, path):
            return path != b

        def is_root(self):  # an ordinary user: sudo would help
            return False

        def write(self, path, data, mode, owner):  # pragma: no cover - must not be reached
            raise AssertionError("nothing may be written")

    writes = ap.prepare(
        [plan("f.x", FileEdit("/etc/a.conf", "a1\n", "a2\n"), FileEdit("/etc/pip.conf", "b1\n", "b2\n"))], Files(root)
    )
    with pytest.raises(
        ap.NeedsPrivilege,
        match=r"cannot write /etc/pip.conf: permission denied; rerun as root: "
        r"sudo gpudoctor fix",
    ):
        ap.apply(writes, Files(root), journal, ops=ReadOnly(), rerun="sudo gpudoctor fix f.x")
    assert a.read_text() == "a1\n" and b.read_text() == "b1\n"
    assert journal.transactions() == []


def test_can_write_reports_real_permissions(tmp_path):
    ops = ap.FileOps()
    assert ops.can_write(tmp_path / "new" / "deeper" / "file.conf")
    (tmp_path / "f").write_text("x")
    assert ops.can_write(tmp_path / "f")


@pytest.mark.parametrize("absolute", [True, False])
def test_symlink_edits_target_inside_root(root, journal, absolute):
    (root / "home/u/dotfiles").mkdir(parents=True)
    (root / "home/u/.config/pip").mkdir(parents=True)
    real = root / "home/u/dotfiles/pip.conf"
    real.write_text("[global]\ntimeout = 1\n")
    link = root / "home/u/.config/pip/pip.conf"
    link.symlink_to("/home/u/dotfiles/pip.conf" if absolute else "../../dotfiles/pip.conf")
    files = Files(root)
    writes = ap.prepare(
        [plan("f.x", FileEdit("/home/u/.config/pip/pip.conf", "[global]\ntimeout = 1\n", "[global]\ntimeout = 60\n"))],
        files,
    )
    [w] = writes
    assert w.via_symlink and w.target == "/home/u/dotfiles/pip.conf"
    assert "symlink /home/u/.config/pip/pip.conf" in w.describe()
    assert w.host_path == real
    ap.apply(writes, files, journal)
    assert link.is_symlink() and real.read_text() == "[global]\ntimeout = 60\n"
    journal.undo()
    assert link.is_symlink() and real.read_text() == "[global]\ntimeout = 1\n"


def test_created_file_and_directories_removed_by_undo(root, journal):
    (root / "home/u").mkdir(parents=True)
    os.chmod(root / "home/u", 0o750)
    if os.geteuid() == 0:
        os.chown(root / "home/u", 1234, 2345)
    files = Files(root)
    writes = ap.prepare([plan("f.x", FileEdit("/home/u/.config/pip/pip.conf", None, "[global]\n", 0o600))], files)
    ap.apply(writes, files, journal)
    created = root / "home/u/.config/pip/pip.conf"
    assert created.read_text() == "[global]\n" and stat.S_IMODE(created.stat().st_mode) == 0o600
    # new directories copy the nearest existing one's mode (and, as root, its owner: sudo in a home)
    assert stat.S_IMODE((root / "home/u/.config").stat().st_mode) == 0o750
    if os.geteuid() == 0:
        assert (created.stat().st_uid, created.stat().st_gid) == (1234, 2345)
        assert (root / "home/u/.config/pip").stat().st_uid == 1234
    journal.undo()
    assert not (root / "home/u/.config").exists() and (root / "home/u").is_dir()


def test_undo_refuses_files_changed_since_unless_forced(root, journal):
    conf = root / "etc/pip.conf"
    conf.write_text("one\n")
    files = Files(root)
    txn = ap.apply(ap.prepare([plan("f.x", FileEdit("/etc/pip.conf", "one\n", "two\n"))], files), files, journal)
    conf.write_text("three\n")
    assert ap.changed_since(txn) == ["/etc/pip.conf"]
    with pytest.raises(ap.UndoRefused, match="/etc/pip.conf changed since transaction"):
        journal.undo(txn.id)
    assert conf.read_text() == "three\n"
    journal.undo(txn.id[:12] if len({t.id[:12] for t in journal.transactions()}) == 1 else txn.id, force=True)
    assert conf.read_text() == "one\n"
    with pytest.raises(ap.UndoRefused, match="is undone"):
        journal.undo(txn.id)
    with pytest.raises(ap.UndoRefused, match="no transaction"):
        journal.undo("19990101")


def test_noop_plan_writes_nothing(root, journal):
    (root / "etc/pip.conf").write_text("same\n")
    writes = ap.prepare([plan("f.x", FileEdit("/etc/pip.conf", "same\n", "same\n"))], Files(root))
    assert writes == []
    assert ap.apply(writes, Files(root), journal) is None
    assert journal.transactions() == []


def test_two_plans_on_one_file_chain_or_conflict(root):
    (root / "etc/pip.conf").write_text("a\n")
    files = Files(root)
    chained = ap.prepare(
        [
            plan("f.one", FileEdit("/etc/pip.conf", "a\n", "b\n")),
            plan("f.two", FileEdit("/etc/pip.conf", "b\n", "c\n")),
        ],
        files,
    )
    assert [(w.old_text, w.new_text, w.fixes) for w in chained] == [("a\n", "c\n", ("f.one", "f.two"))]
    with pytest.raises(ap.ConflictingEdits, match="f.one, f.two both edit"):
        ap.prepare(
            [
                plan("f.one", FileEdit("/etc/pip.conf", "a\n", "b\n")),
                plan("f.two", FileEdit("/etc/pip.conf", "a\n", "c\n")),
            ],
            files,
        )


def test_directory_target_refused(root):
    (root / "etc/pip.conf").mkdir()
    with pytest.raises(ap.StaleEdit, match="not a regular file"):
        ap.prepare([plan("f.x", FileEdit("/etc/pip.conf", None, "x\n"))], Files(root))


def test_atomic_write_failure_leaves_file_and_no_temp(tmp_path, monkeypatch):
    target = tmp_path / "f.conf"
    target.write_text("orig\n")

    def failing_replace(src, dst):
        raise OSError(28, "No space left on device")

    from gpudoctor.apply import fileops

    monkeypatch.setattr(fileops.os, "replace", failing_replace)
    with pytest.raises(OSError, match="No space left"):
        ap.atomic_write(target, b"new\n", 0o644)
    assert target.read_text() == "orig\n"
    assert [p.name for p in tmp_path.iterdir()] == ["f.conf"]


def test_sudo_command_quotes():
    assert (
        ap.sudo_command(["gpudoctor", "fix", "--index-url", "https://x.example.org/a b"])
        == "sudo gpudoctor fix --index-url 'https://x.example.org/a b'"
    )


def test_diff_of_a_huge_file_shows_only_its_hunks_with_true_line_numbers(tmp_path):
    import difflib
    import random

    rng = random.Random(7)
    lines = [f"# line {i} {'x' * 50}\n" for i in range(1_000_000)]  # ~60 MB
    old = "[global]\nindex-url = https://old.example.org/simple\n" + "".join(lines)
    new_lines = old.splitlines(keepends=True)
    for i in (1, 500_000, 999_990):
        new_lines[i] = f"changed {i}\n"
    new = "".join(new_lines)
    w = ap.PreparedWrite("/etc/pip.conf", "/etc/pip.conf", tmp_path / "pip.conf", old, new, 0o644, ("f",))
    diff = ap.unified_diff(w, redact=False)
    assert diff.count("\n@@ ") + diff.startswith("@@ ") == 3 and len(diff.splitlines()) < 40
    assert "@@ -499998,7 +499998,7 @@" in diff and "@@ -999988,7 +999988,7 @@" in diff
    assert patch(old, diff) == new
    # on a smaller file, the same as difflib over the whole text
    small_old = "".join(f"l{i}\n" for i in range(200))
    small = small_old.splitlines(keepends=True)
    for i in rng.sample(range(200), 5):
        small[i] = f"c{i}\n"
    w = ap.PreparedWrite("/x", "/x", tmp_path / "x", small_old, "".join(small), 0o644, ("f",))
    want = "".join(difflib.unified_diff(small_old.splitlines(True), small, fromfile="/x", tofile="/x"))
    assert ap.unified_diff(w, redact=False) == want


# --------------------------------------------------------------------------- the undo of an undo


def test_undo_of_an_undo_restores_the_exact_bytes_each_time(root, journal):
    conf = root / "etc/pip.conf"
    before = b"\xef\xbb\xbf[global]\r\ntimeout = 5\r\n"  # BOM and CRLF: bytes, not text, are compared
    conf.write_bytes(before)
    os.chmod(conf, 0o640)
    files = Files(root)
    old = before.decode()
    txn = ap.apply(
        ap.prepare([plan("f.x", FileEdit("/etc/pip.conf", old, old + "retries = 9\r\n"))], files), files, journal
    )
    after = conf.read_bytes()
    assert after == before + b"retries = 9\r\n"
    undone = journal.undo()
    assert conf.read_bytes() == before and undone.saved_by
    record = journal.load(undone.saved_by)
    assert (record.status, record.undoes, record.fixes) == ("applied", txn.id, (f"undo {txn.id}",))
    journal.undo(record.id)  # the undo of the undo
    assert conf.read_bytes() == after and stat.S_IMODE(conf.stat().st_mode) == 0o640
    assert journal.load(txn.id).status == "applied"  # the fix is in place again, so a bare undo takes it
    again = journal.undo()
    assert again.id == txn.id and conf.read_bytes() == before
    journal.undo(again.saved_by)
    assert conf.read_bytes() == after
    # a bare undo never picks an undo record: with the fix undone, there is nothing left to undo
    journal.undo()
    assert conf.read_bytes() == before
    with pytest.raises(ap.UndoRefused, match="nothing to undo"):
        journal.undo()


def test_undo_of_the_undo_of_a_created_file_creates_it_again(root, journal):
    (root / "home/u").mkdir(parents=True)
    files = Files(root)
    path = "/home/u/.config/uv/uv.toml"
    text = 'index-url = "https://mirror.example.org/simple"\n'
    ap.apply(ap.prepare([plan("f.x", FileEdit(path, None, text, 0o600))], files), files, journal)
    undone = journal.undo()
    assert not (root / "home/u/.config").exists()
    journal.undo(undone.saved_by)
    created = root / path.lstrip("/")
    assert created.read_bytes() == text.encode() and stat.S_IMODE(created.stat().st_mode) == 0o600
    journal.undo()
    assert not created.exists() and not (root / "home/u/.config").exists()


def test_undo_record_refuses_when_the_file_changed_after_the_undo(root, journal):
    conf = root / "etc/pip.conf"
    conf.write_text("one\n")
    files = Files(root)
    ap.apply(ap.prepare([plan("f.x", FileEdit("/etc/pip.conf", "one\n", "two\n"))], files), files, journal)
    undone = journal.undo()
    conf.write_text("three\n")
    with pytest.raises(ap.UndoRefused, match="changed since"):
        journal.undo(undone.saved_by)
    assert conf.read_text() == "three\n"


def test_a_bare_undo_after_an_undo_names_the_record_that_would_write_it_again(root, journal):
    conf = root / "etc/pip.conf"
    conf.write_text("[global]\n")
    files = Files(root)
    edit = FileEdit("/etc/pip.conf", "[global]\n", "[global]\nretries = 9\n")
    txn = ap.apply(ap.prepare([plan("f.x", edit)], files), files, journal)
    record = journal.undo().saved_by
    # the journal holds an applied transaction (the undo record): "holds no applied transaction" was false
    with pytest.raises(ap.UndoRefused) as refused:
        journal.undo()
    assert str(refused.value) == (
        f"nothing to undo: transaction {txn.id} is undone already; to write it again, "
        f"undo the undo: gpudoctor fix --undo {record}"
    )
    assert conf.read_text() == "[global]\n"
