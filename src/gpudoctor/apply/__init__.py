"""The only code in gpudoctor that writes files: plan -> diff -> backup -> atomic write -> undo.

Fix planners return :class:`~gpudoctor.model.FixPlan` values (pure data). This
module turns them into writes, carefully:

1. :func:`prepare` resolves every edit's path *inside* the root (a symlink is
   followed to its target, and the :class:`PreparedWrite` says so), reads the
   file as it is now and refuses the whole plan set with :class:`StaleEdit`
   when a plan's ``old_text`` no longer matches (the file changed since the
   facts were collected: never merge blindly). Edits that change nothing are
   dropped ("already fixed"). Two plans editing one file are chained when the
   second was made on top of the first, and refused otherwise.
2. :func:`unified_diff` is what the user is shown; it is computed from the
   same texts that are written, so the diff shown is the change written
   (credentials in URLs are redacted in the *display* only).
3. :func:`apply` checks write permission for every file first (a file the
   user may not write gives :class:`NeedsPrivilege`, naming the file and the
   ``sudo`` command, before anything is touched; :class:`CannotWrite`, with
   no ``sudo`` advice, on a read-only file system or when already root),
   copies every original into a new transaction of the backup
   :class:`Journal` (:class:`JournalUnavailable` when it cannot be written:
   nothing is written without a backup), then writes each file
   atomically (temp file in the same directory, fsync, ``os.replace``, fsync
   of the directory; mode and owner of an existing file preserved). If one
   write fails, the files already written in that transaction are restored
   from the backup (nothing is partially applied) and :class:`WriteFailed`
   is raised.
4. :meth:`Journal.undo` restores the last (or a named) transaction byte for
   byte, refusing files that changed again since unless ``force`` (which
   first saves their current contents as a new transaction).

The journal lives under ``platformdirs.user_state_dir("gpudoctor")`` (which
honours ``XDG_STATE_HOME``), one directory per transaction holding the
original bytes and a ``manifest.json`` (time, root, fixes, paths, SHA-256
before and after, status). Journal files are private (0600 / 0700): they are
copies of configuration that may hold credentials.

Errors raised here are subclasses of :class:`ApplyError`, each with a one-line
message meant for the user.

Layout (one job per module; everything public is re-exported here, so
``from gpudoctor import apply as ap`` gives the whole API):

- :mod:`gpudoctor.apply.errors` — :class:`ApplyError` and its subclasses;
- :mod:`gpudoctor.apply.fileops` — :class:`FileOps`, :func:`atomic_write`
  and the byte/text and SHA-256 helpers (atomic file operations);
- :mod:`gpudoctor.apply.plan` — :func:`prepare`, :class:`PreparedWrite`,
  :func:`unified_diff`, :func:`in_root` (planning and diffs);
- :mod:`gpudoctor.apply.journal` — :class:`Journal`, :class:`Transaction`,
  :class:`JournalFile` (backups, undo);
- :mod:`gpudoctor.apply.flow` — :func:`apply`, :func:`changed_since`,
  :func:`sudo_command` (the apply flow; the confirmation prompt itself is
  the CLI's, :mod:`gpudoctor.cli.fix`).

Each module imports only those listed before it.
"""

from __future__ import annotations

from gpudoctor.apply.errors import (
    ApplyError,
    CannotWrite,
    ConflictingEdits,
    JournalUnavailable,
    NeedsPrivilege,
    NoSuchUndo,
    StaleEdit,
    UndoRefused,
    WriteFailed,
)
from gpudoctor.apply.fileops import FileOps, atomic_write
from gpudoctor.apply.flow import apply, changed_since, sudo_command
from gpudoctor.apply.journal import (
    MANIFEST_SCHEMA_VERSION,
    Journal,
    JournalFile,
    Transaction,
    default_journal_dir,
)
from gpudoctor.apply.plan import PreparedWrite, in_root, prepare, unified_diff

__all__ = [
    "MANIFEST_SCHEMA_VERSION",
    "ApplyError",
    "CannotWrite",
    "ConflictingEdits",
    "FileOps",
    "Journal",
    "JournalFile",
    "JournalUnavailable",
    "NeedsPrivilege",
    "NoSuchUndo",
    "PreparedWrite",
    "StaleEdit",
    "Transaction",
    "UndoRefused",
    "WriteFailed",
    "apply",
    "atomic_write",
    "changed_since",
    "default_journal_dir",
    "in_root",
    "prepare",
    "sudo_command",
    "unified_diff",
]
