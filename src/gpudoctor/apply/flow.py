"""The apply flow: check permissions for every write first, then back up and write them as one
journal transaction (:func:`apply`); :func:`changed_since` and :func:`sudo_command` serve the CLI."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from gpudoctor.apply.fileops import FileOps, denied_error, sha256_hex
from gpudoctor.apply.journal import Journal, Transaction
from gpudoctor.apply.plan import PreparedWrite
from gpudoctor.system import Files

__all__ = ["apply", "changed_since", "sudo_command"]


# --------------------------------------------------------------------------- apply


def sudo_command(argv: Sequence[str]) -> str:
    """The command line to rerun as root: ``sudo`` + ``argv`` shell-quoted (``--yes`` kept as given)."""
    return "sudo " + shlex.join(list(argv))


def apply(
    writes: Sequence[PreparedWrite],
    files: Files,
    journal: Journal | None = None,
    ops: FileOps | None = None,
    rerun: str | None = None,
) -> Transaction | None:
    """Write ``writes`` (from :func:`prepare`) as one transaction; returns it (None when ``writes`` is empty).

    ``rerun`` is the command line to suggest with sudo when a file may not be
    written. Raises :class:`NeedsPrivilege` before anything is written when
    a file is not writable (:class:`CannotWrite` instead when its file system
    is read-only or we are root already: sudo would not help), :class:`StaleEdit` when a file changed since
    :func:`prepare`, :class:`WriteFailed` (or :class:`NeedsPrivilege`) when a
    write fails midway — after restoring the files already written.
    """
    if not writes:
        return None
    ops = ops or FileOps()
    journal = journal or Journal()
    for w in writes:
        if not ops.can_write(w.host_path):
            raise denied_error(w.target, w.host_path, ops, rerun)
    fixes: list[str] = []
    for w in writes:
        fixes.extend(f for f in w.fixes if f not in fixes)
    return journal.record_and_write(writes, files, fixes, ops, rerun)


def changed_since(txn: Transaction, ops: FileOps | None = None) -> list[str]:
    """Targets of ``txn`` whose current bytes differ from what the transaction wrote."""
    ops = ops or FileOps()
    files = Files(Path(txn.root))
    return [jf.target for jf in txn.files if sha256_hex(ops.read(files.host_path(jf.target))) != jf.sha256_after]
