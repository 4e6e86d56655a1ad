"""The errors of :mod:`gpudoctor.apply`: each an :class:`ApplyError` with a one-line message meant for the user."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "ApplyError",
    "StaleEdit",
    "OutsideHome",
    "ConflictingEdits",
    "NeedsPrivilege",
    "CannotWrite",
    "WriteFailed",
    "UndoRefused",
    "NoSuchUndo",
    "JournalUnavailable",
]


# --------------------------------------------------------------------------- errors


class ApplyError(Exception):
    """Base of every refusal or failure of the writer; ``str()`` is one line for the user."""


class StaleEdit(ApplyError):
    """A file changed between planning and writing (its text no longer equals ``old_text``)."""

    def __init__(self, path: str, detail: str = "it changed since gpudoctor read it"):
        self.path = path
        super().__init__(
            f"{path}: {detail}; nothing was written. Run `gpudoctor fix` again to plan on the current contents."
        )


class OutsideHome(ApplyError):
    """A file to create is a dangling symlink whose target lies outside the home directory
    the link belongs to (``~/.config/pip/pip.conf -> /elsewhere/x``): never created."""

    def __init__(self, path: str, target: str, home: str):
        self.path = path
        super().__init__(
            f"{path} is a dangling symlink to {target}, outside {home}; gpudoctor does not create "
            f"files through it. Create {target} yourself, or remove the link (rm {path}) and run "
            f"`gpudoctor fix` again; nothing was written."
        )


class ConflictingEdits(ApplyError):
    """Two plans edit the same file from different starting texts."""

    def __init__(self, path: str, fixes: Sequence[str]):
        self.path = path
        super().__init__(
            f"{path}: fixes {', '.join(fixes)} both edit this file; apply them one at a time "
            f"(gpudoctor fix {fixes[0]}, then gpudoctor fix {fixes[-1]})."
        )


class NeedsPrivilege(ApplyError):
    """The user may not write a file; ``command`` is what to rerun (with sudo)."""

    def __init__(self, path: str, command: str | None = None):
        self.path = path
        self.command = command
        rerun = f"; rerun as root: {command}" if command else "; rerun the same command with sudo"
        super().__init__(f"cannot write {path}: permission denied{rerun}. Nothing was changed.")


class CannotWrite(ApplyError):
    """A file cannot be written even as root: its file system is read-only (``EROFS``), or root itself was
    refused (an immutable file, a root-squashed network mount). No ``sudo`` advice: it would not help."""

    def __init__(self, path: str, read_only: bool):
        self.path = path
        self.read_only = read_only
        if read_only:
            why = (
                "the file system is read-only, so it cannot be written even as root; remount it read-write "
                "(sudo mount -o remount,rw MOUNTPOINT) or change the image it comes from"
            )
        else:
            why = "permission denied even as root (an immutable file? see `lsattr`; a root-squashed network mount?)"
        super().__init__(f"cannot write {path}: {why}. Nothing was changed.")


class WriteFailed(ApplyError):
    """A write failed mid-transaction; the files already written were restored."""

    def __init__(self, path: str, reason: str, rolled_back: Sequence[str]):
        self.path = path
        self.rolled_back = tuple(rolled_back)
        restored = f"; restored {', '.join(rolled_back)}" if rolled_back else ""
        super().__init__(f"writing {path} failed: {reason}{restored}. Nothing was changed.")


class UndoRefused(ApplyError):
    """An undo would overwrite changes made after the transaction (or the transaction is unknown)."""


class NoSuchUndo(UndoRefused):
    """The undo names no transaction that can be undone (unknown or ambiguous id, already undone, or an
    empty journal): a usage error, nothing was touched."""


class JournalUnavailable(ApplyError):
    """The backup journal directory cannot be created or written (read-only ``~/.local/state``, a file
    in its place...); nothing was written, since nothing is written without a backup."""

    def __init__(self, directory: Path, reason: str):
        self.directory = directory
        super().__init__(
            f"cannot write the backup journal {directory}: {reason}; nothing was changed. "
            f"Point it at a writable directory and rerun, e.g. XDG_STATE_HOME=/var/tmp/gpudoctor-state "
            f"gpudoctor fix ..."
        )
