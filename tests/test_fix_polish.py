"""Defects found by testing `gpudoctor fix`: journal, read-only files, pip scope, exit codes, forced undo,
``--root`` in messages, a directory where pip.conf should be."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from gpudoctor import apply as ap
from gpudoctor.model import FileEdit, FixPlan
from gpudoctor.system import Files

from test_cli_fix import root, run  # noqa: F401  (the demo check/fix registry and the CLI runner)


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
    with pytest.raises(ap.JournalUnavailable, match=r"cannot write the backup journal .*ro-state/journal: "
                                                    r"Read-only file system; nothing was changed"):
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
