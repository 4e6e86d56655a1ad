"""The journal is ordered by a monotonic sequence number: `--undo` without an id always takes
back the latest transaction, even when ids (wall-clock stamps) sort the other way."""

from __future__ import annotations

import json
import shutil

from gpudoctor import apply as ap
from gpudoctor.model import FileEdit, FixPlan
from gpudoctor.system import Files


def _apply(journal, root, path, old, new):
    plan = FixPlan(fix="x.fix", description="x", edits=(FileEdit(path, old, new),), addresses=("x.check",))
    return ap.apply(ap.prepare([plan], Files(root)), Files(root), journal)


def test_sequence_numbers_are_monotonic_and_undo_takes_the_latest(tmp_path, isolated_home):
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    journal = ap.Journal()
    a, b = root / "etc/a.conf", root / "etc/b.conf"
    a.write_text("a0\n")
    b.write_text("b0\n")
    t1 = _apply(journal, root, "/etc/a.conf", "a0\n", "a1\n")
    t2 = _apply(journal, root, "/etc/b.conf", "b0\n", "b1\n")
    t3 = _apply(journal, root, "/etc/a.conf", "a1\n", "a2\n")
    assert (t1.seq, t2.seq, t3.seq) == (1, 2, 3)
    # make the wall-clock ids sort backwards (two fixes in one second, a clock set back)
    for txn, fake in ((t1, "29991231T235959Z-ffff"), (t3, "19700101T000000Z-0000")):
        manifest = txn.directory / "manifest.json"
        doc = json.loads(manifest.read_text())
        doc["id"] = fake
        manifest.write_text(json.dumps(doc))
        shutil.move(txn.directory, journal.directory / fake)
    assert [t.seq for t in journal.transactions()] == [1, 2, 3]
    undone = journal.undo()
    assert undone.seq == 3 and a.read_text() == "a1\n" and b.read_text() == "b1\n"
    assert journal.undo().seq == 2 and b.read_text() == "b0\n"
    assert journal.undo().seq == 1 and a.read_text() == "a0\n"


def test_sequence_numbers_are_never_reused(tmp_path, isolated_home):
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc/a.conf").write_text("0\n")
    journal = ap.Journal()
    t1 = _apply(journal, root, "/etc/a.conf", "0\n", "1\n")
    shutil.rmtree(t1.directory)  # a pruned journal
    t2 = _apply(journal, root, "/etc/a.conf", "1\n", "2\n")
    assert t2.seq == 2


def test_manifests_without_seq_still_load_and_sort_first(tmp_path, isolated_home):
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc/a.conf").write_text("0\n")
    journal = ap.Journal()
    old = _apply(journal, root, "/etc/a.conf", "0\n", "1\n")
    manifest = old.directory / "manifest.json"
    doc = json.loads(manifest.read_text())
    del doc["seq"]
    manifest.write_text(json.dumps(doc))
    new = _apply(journal, root, "/etc/a.conf", "1\n", "2\n")
    assert [t.id for t in journal.transactions()] == [old.id, new.id]
    assert journal.undo().id == new.id
