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
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import difflib
import errno
import fcntl
import hashlib
import json
import os
import secrets
import shlex
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from gpudoctor.model import FixPlan
from gpudoctor.redact import redact_text
from gpudoctor.system import Files

__all__ = [
    "ApplyError",
    "StaleEdit",
    "ConflictingEdits",
    "NeedsPrivilege",
    "CannotWrite",
    "WriteFailed",
    "UndoRefused",
    "JournalUnavailable",
    "NoSuchUndo",
    "PreparedWrite",
    "FileOps",
    "Transaction",
    "Journal",
    "prepare",
    "unified_diff",
    "apply",
    "atomic_write",
    "default_journal_dir",
    "sudo_command",
    "in_root",
    "MANIFEST_SCHEMA_VERSION",
]

#: Version of ``manifest.json`` in each journal transaction.
MANIFEST_SCHEMA_VERSION = 1


# --------------------------------------------------------------------------- errors


class ApplyError(Exception):
    """Base of every refusal or failure of the writer; ``str()`` is one line for the user."""


class StaleEdit(ApplyError):
    """A file changed between planning and writing (its text no longer equals ``old_text``)."""

    def __init__(self, path: str, detail: str = "it changed since gpudoctor read it"):
        self.path = path
        super().__init__(f"{path}: {detail}; nothing was written. Run `gpudoctor fix` again to plan on the "
                         f"current contents.")


class OutsideHome(ApplyError):
    """A file to create is a dangling symlink whose target lies outside the home directory
    the link belongs to (``~/.config/pip/pip.conf -> /elsewhere/x``): never created."""

    def __init__(self, path: str, target: str, home: str):
        self.path = path
        super().__init__(f"{path} is a dangling symlink to {target}, outside {home}; gpudoctor does not create "
                         f"files through it. Create {target} yourself, or remove the link (rm {path}) and run "
                         f"`gpudoctor fix` again; nothing was written.")


def _check_dangling(edit_path: str, target: str, host: Path, files: Files) -> None:
    """Refuse to create ``target`` through the dangling link ``edit_path`` when the link is in the
    user's home and its target is not (under ``--root`` the jail already keeps it in the root)."""
    if target == edit_path or host.exists() or not files.is_live:
        return
    home = os.path.realpath(os.path.expanduser("~"))
    inside = lambda p: p == home or p.startswith(home.rstrip("/") + "/")  # noqa: E731
    link_dir = os.path.realpath(os.path.dirname(edit_path))
    if inside(link_dir) and not inside(os.path.realpath(target)):
        raise OutsideHome(edit_path, target, home)


class ConflictingEdits(ApplyError):
    """Two plans edit the same file from different starting texts."""

    def __init__(self, path: str, fixes: Sequence[str]):
        self.path = path
        super().__init__(f"{path}: fixes {', '.join(fixes)} both edit this file; apply them one at a time "
                         f"(gpudoctor fix {fixes[0]}, then gpudoctor fix {fixes[-1]}).")


class NeedsPrivilege(ApplyError):
    """The user may not write a file; ``command`` is what to rerun (with sudo)."""

    def __init__(self, path: str, command: Optional[str] = None):
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
            why = ("the file system is read-only, so it cannot be written even as root; remount it read-write "
                   "(sudo mount -o remount,rw MOUNTPOINT) or change the image it comes from")
        else:
            why = ("permission denied even as root (an immutable file? see `lsattr`; a root-squashed network "
                   "mount?)")
        super().__init__(f"cannot write {path}: {why}. Nothing was changed.")


def _denied(target: str, host: Path, ops: "FileOps", rerun: Optional[str],
            exc: Optional[OSError] = None) -> ApplyError:
    """The error for a file we may not write: :class:`CannotWrite` on a read-only file system or when we
    are root already, else :class:`NeedsPrivilege` with the ``sudo`` command to rerun."""
    if (exc is not None and exc.errno == errno.EROFS) or ops.read_only(host):
        return CannotWrite(target, read_only=True)
    if ops.is_root():
        return CannotWrite(target, read_only=False)
    return NeedsPrivilege(target, rerun)


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
        super().__init__(f"cannot write the backup journal {directory}: {reason}; nothing was changed. "
                         f"Point it at a writable directory and rerun, e.g. XDG_STATE_HOME=/var/tmp/gpudoctor-state "
                         f"gpudoctor fix ...")


# --------------------------------------------------------------------------- low-level file operations


def _sha256(data: Optional[bytes]) -> Optional[str]:
    return None if data is None else hashlib.sha256(data).hexdigest()


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, mode: int, owner: Optional[Tuple[int, int]] = None) -> None:
    """Replace ``path`` with ``data`` atomically.

    A temporary file is created in the same directory (so ``os.replace`` is a
    rename on one filesystem), written, given ``mode`` (and ``owner`` as
    ``(uid, gid)`` when given and different from ours), fsynced, renamed over
    ``path``; then the directory is fsynced. On any error the temporary file
    is removed and the error (``OSError``) propagates; ``path`` is untouched.
    """
    directory = path.parent
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".gpudoctor-tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), stat.S_IMODE(mode))
            if owner is not None:
                st = os.fstat(fh.fileno())
                if (st.st_uid, st.st_gid) != owner:
                    os.fchown(fh.fileno(), owner[0], owner[1])
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(directory)


class FileOps:
    """The writer's boundary with the filesystem; tests subclass it to inject failures.

    Every method works on host paths.
    """

    def read(self, path: Path) -> Optional[bytes]:
        """Current bytes of ``path``; None when it does not exist. Raises ``OSError`` otherwise."""
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None

    def can_write(self, path: Path) -> bool:
        """Whether the user may replace (or create) ``path``: its nearest existing directory must be
        writable, and an existing file must be writable too."""
        parent = path.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():  # not a permission question: let the write fail with the real error
            return True
        if not os.access(parent, os.W_OK | os.X_OK):
            return False
        return not path.exists() or os.access(path, os.W_OK)

    def is_root(self) -> bool:
        """Whether we run as root (effective uid 0): then ``sudo`` cannot help with a refused write."""
        return os.geteuid() == 0

    def read_only(self, path: Path) -> bool:
        """Whether ``path`` (or its nearest existing directory) lies on a file system mounted read-only."""
        p = path
        while not p.exists() and p != p.parent:
            p = p.parent
        try:
            return bool(os.statvfs(p).f_flag & os.ST_RDONLY)
        except OSError:
            return False

    def makedirs(self, path: Path) -> List[Path]:
        """Create missing directories down to ``path``; returns those created, outermost first.

        Each new directory takes the permission bits of the nearest existing
        one (``~`` at 0700 gives a private ``~/.config``, ``/etc`` gives 0755)
        and, when running as root, its owner (so ``sudo`` does not leave
        root-owned directories in a user's home).
        """
        missing: List[Path] = []
        p = path
        while not p.exists():
            missing.append(p)
            p = p.parent
        st = os.stat(p)
        created: List[Path] = []
        for d in reversed(missing):
            os.mkdir(d, 0o700)
            os.chmod(d, stat.S_IMODE(st.st_mode) & 0o777)
            if os.geteuid() == 0 and (st.st_uid, st.st_gid) != (0, 0):
                os.chown(d, st.st_uid, st.st_gid)
            created.append(d)
        return created

    def new_file_owner(self, path: Path) -> Optional[Tuple[int, int]]:
        """Owner for a file created at ``path``: its nearest existing directory's owner when we are
        root (a file created by ``sudo`` in a home stays the user's), else None (our own)."""
        if os.geteuid() != 0:
            return None
        p = path.parent
        while not p.exists() and p != p.parent:
            p = p.parent
        st = os.stat(p)
        return (st.st_uid, st.st_gid)

    def write(self, path: Path, data: bytes, mode: int, owner: Optional[Tuple[int, int]]) -> None:
        """Atomically replace ``path`` (see :func:`atomic_write`)."""
        atomic_write(path, data, mode, owner)

    def remove(self, path: Path) -> None:
        """Delete a file (used when undoing a file the transaction created)."""
        os.unlink(path)
        _fsync_dir(path.parent)

    def rmdir(self, path: Path) -> None:
        """Remove an empty directory the transaction created; a non-empty one is kept."""
        with contextlib.suppress(OSError):
            os.rmdir(path)


# --------------------------------------------------------------------------- prepare and diff


def in_root(path: str, root: "str | Path") -> str:
    """``path`` for messages: as is under ``/``, else ``/etc/pip.conf (in --root /mnt/img)``."""
    root = str(root)
    return path if root in ("/", "") else f"{path} (in --root {root})"


@dataclass(frozen=True)
class PreparedWrite:
    """One file write of a transaction, checked against the disk.

    Attributes:
        path: the path as the plan named it (inside the root).
        target: the path actually written, inside the root (differs from
            ``path`` when ``path`` is a symlink).
        host_path: ``target`` on the host (under ``--root``).
        old_text: the file's text now, None when it will be created.
        new_text: the text to write.
        mode: mode to give a created file (an existing file keeps its own).
        fixes: ids of the fixes whose plans produced this write.
        root: host path of the root (``/`` normally); shown in messages and diff headers otherwise.
    """

    path: str
    target: str
    host_path: Path
    old_text: Optional[str]
    new_text: str
    mode: int
    fixes: Tuple[str, ...]
    root: str = "/"

    @property
    def via_symlink(self) -> bool:
        """True when the plan named a symlink and its target is what gets written."""
        return self.target != self.path

    def describe(self) -> str:
        """One line: which file is written (and through which link)."""
        verb = "create" if self.old_text is None else "edit"
        if self.via_symlink:
            where = "" if self.root in ("/", "") else f"; in --root {self.root}"
            return f"{verb} {self.target} (the target of the symlink {self.path}{where})"
        return f"{verb} {in_root(self.path, self.root)}"


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="surrogateescape")


def _encode(text: str) -> bytes:
    return text.encode("utf-8", errors="surrogateescape")


def prepare(plans: Sequence[FixPlan], files: Files, ops: Optional[FileOps] = None) -> List[PreparedWrite]:
    """Resolve, verify and merge the edits of ``plans`` into the writes to make.

    Returns the writes that change something, in plan order (an empty list
    means everything is already fixed). Raises :class:`StaleEdit` when a file
    no longer holds the plan's ``old_text`` (or exists when it was to be
    created, or is not a regular file), :class:`ConflictingEdits` when two
    plans edit one file from different texts.
    """
    ops = ops or FileOps()
    by_target: Dict[str, PreparedWrite] = {}
    order: List[str] = []
    for plan in plans:
        for edit in plan.edits:
            target = files.realpath(edit.path)
            host = files.host_path(target)
            if edit.old_text is None:
                _check_dangling(edit.path, target, host, files)
            if host.is_dir():
                raise StaleEdit(edit.path, "it is a directory, not a regular file")
            if host.exists() and not host.is_file():
                raise StaleEdit(edit.path, "it is not a regular file (a device, socket or pipe?)")
            if target in by_target:
                prev = by_target[target]
                if edit.old_text == prev.new_text or edit.new_text == prev.new_text:
                    by_target[target] = PreparedWrite(prev.path, target, host, prev.old_text,
                                                      edit.new_text, prev.mode, prev.fixes + (plan.fix,), prev.root)
                    continue
                raise ConflictingEdits(edit.path, prev.fixes + (plan.fix,))
            try:
                current = ops.read(host)
            except OSError as exc:
                raise WriteFailed(target, f"cannot read it: {exc.strerror or exc}", []) from None
            current_text = None if current is None else _decode(current)
            if current_text != edit.old_text:
                if edit.old_text is None:
                    raise StaleEdit(edit.path, "it was to be created but now exists")
                if current_text is None:
                    raise StaleEdit(edit.path, "it was deleted since gpudoctor read it")
                raise StaleEdit(edit.path)
            by_target[target] = PreparedWrite(edit.path, target, host, edit.old_text, edit.new_text,
                                              edit.mode, (plan.fix,), str(files.root))
            order.append(target)
    return [by_target[t] for t in order if by_target[t].old_text != by_target[t].new_text]


def unified_diff(write: PreparedWrite, redact: bool = True, context: int = 3) -> str:
    """The unified diff of one write (``--- path`` / ``+++ path``), credentials redacted for display.

    Under a root other than ``/`` the headers read ``--- /etc/pip.conf<TAB>(in --root /mnt/img)``
    (after a tab, as ``diff`` puts a time stamp, so patch tools still read the path).

    A created file diffs against ``/dev/null``. Ends with a newline (empty
    string when nothing changes); a missing final newline is marked as
    ``diff`` does (``\\ No newline at end of file``).
    """
    old = write.old_text
    old_lines = [] if old is None else old.splitlines(keepends=True)
    new_lines = write.new_text.splitlines(keepends=True)
    shown = in_root(write.target, write.root).replace(" (", "\t(", 1)  # a tab: the path stays parseable
    fromfile = "/dev/null" if old is None else shown
    lines = []
    for line in difflib.unified_diff(old_lines, new_lines, fromfile=fromfile, tofile=shown, n=context):
        if line.endswith("\n"):
            lines.append(line)
        else:
            lines.append(line + "\n\\ No newline at end of file\n")
    text = "".join(lines)
    return redact_text(text) if redact else text


# --------------------------------------------------------------------------- journal


def default_journal_dir() -> Path:
    """``<user state dir>/gpudoctor/journal`` (platformdirs; honours ``XDG_STATE_HOME``)."""
    import platformdirs

    return Path(platformdirs.user_state_dir("gpudoctor", appauthor=False)) / "journal"


@dataclass(frozen=True)
class JournalFile:
    """One file recorded in a transaction (see ``manifest.json``).

    Attributes:
        path: path the plan named (inside the root).
        target: path written (inside the root; the symlink's target if any).
        existed: False when the transaction created the file.
        mode, uid, gid: the original file's mode and owner (of the created file when it did not exist).
        sha256_before: hash of the original bytes (None when created).
        sha256_after: hash of the bytes written.
        backup: file name of the original bytes inside the transaction directory (None when created).
        created_dirs: directories the transaction created for it (inside the root), outermost first.
    """

    path: str
    target: str
    existed: bool
    mode: int
    uid: int
    gid: int
    sha256_before: Optional[str]
    sha256_after: Optional[str]
    backup: Optional[str]
    created_dirs: Tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {"path": self.path, "target": self.target, "existed": self.existed, "mode": oct(self.mode),
                "uid": self.uid, "gid": self.gid, "sha256_before": self.sha256_before,
                "sha256_after": self.sha256_after, "backup": self.backup, "created_dirs": list(self.created_dirs)}

    @classmethod
    def from_json(cls, d: Mapping) -> "JournalFile":
        return cls(d["path"], d["target"], bool(d["existed"]), int(str(d["mode"]), 0), int(d["uid"]),
                   int(d["gid"]), d.get("sha256_before"), d["sha256_after"], d.get("backup"),
                   tuple(d.get("created_dirs") or ()))


@dataclass(frozen=True)
class Transaction:
    """One applied set of writes, as recorded in the journal.

    Attributes:
        id: sortable id, ``YYYYmmddTHHMMSSZ-xxxx``.
        created_at: ISO 8601 UTC time of the write.
        root: host path of the root the files live under (``/`` normally).
        fixes: ids of the fixes applied.
        files: the files written.
        status: ``applied``, ``undone`` or ``rolled-back`` (a failed write was reverted).
        undone_at: ISO time of the undo, if any.
        saved_by: for a transaction undone with ``force``: the id of the
            transaction that saved the files' later contents first (undo it
            to bring them back).
        directory: the transaction's directory in the journal.
    """

    id: str
    created_at: str
    root: str
    fixes: Tuple[str, ...]
    files: Tuple[JournalFile, ...]
    status: str
    directory: Path
    undone_at: Optional[str] = None
    saved_by: Optional[str] = None

    def to_json(self) -> dict:
        return {"schema_version": MANIFEST_SCHEMA_VERSION, "id": self.id, "created_at": self.created_at,
                "root": self.root, "fixes": list(self.fixes), "status": self.status,
                "undone_at": self.undone_at, "saved_by": self.saved_by,
                "files": [f.to_json() for f in self.files]}


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class Journal:
    """The backup journal: one directory per transaction under ``directory``.

    Methods that change the journal hold an exclusive ``flock`` on
    ``directory/.lock``, so two gpudoctor processes cannot interleave.
    """

    def __init__(self, directory: Optional[Path] = None):
        self.directory = Path(directory) if directory is not None else default_journal_dir()

    # -- storage helpers

    def _ensure(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        with contextlib.suppress(OSError):
            os.chmod(self.directory, 0o700)

    def _unavailable(self, exc: OSError) -> JournalUnavailable:
        reason = exc.strerror or str(exc)
        if isinstance(exc, (FileExistsError, NotADirectoryError)):
            reason = f"a file is in the way of the directory ({reason})"
        return JournalUnavailable(self.directory, reason)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the journal's exclusive lock.

        Raises :class:`JournalUnavailable` when the journal directory cannot
        be created or its lock file opened (read-only file system, a regular
        file where a directory should be, no permission).
        """
        try:
            self._ensure()
            fd = os.open(self.directory / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise self._unavailable(exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _write_manifest(self, txn: Transaction) -> None:
        data = (json.dumps(txn.to_json(), indent=2) + "\n").encode()
        atomic_write(txn.directory / "manifest.json", data, 0o600)

    def load(self, txn_id: str) -> Transaction:
        """The transaction ``txn_id`` (a unique prefix is enough). Raises :class:`NoSuchUndo` if unknown."""
        matches = [t for t in self.transactions() if t.id == txn_id] or \
                  [t for t in self.transactions() if t.id.startswith(txn_id)]
        if not matches:
            raise NoSuchUndo(f"no transaction {txn_id!r} in the journal {self.directory} "
                              f"(see `gpudoctor fix --history`)")
        if len(matches) > 1:
            raise NoSuchUndo(f"{txn_id!r} matches several transactions: {', '.join(t.id for t in matches)}")
        return matches[0]

    def transactions(self) -> List[Transaction]:
        """Every readable transaction, oldest first (unreadable manifests are skipped)."""
        if not self.directory.is_dir():
            return []
        out = []
        for d in sorted(self.directory.iterdir()):
            manifest = d / "manifest.json"
            if not manifest.is_file():
                continue
            try:
                doc = json.loads(manifest.read_text(encoding="utf-8"))
                out.append(Transaction(doc["id"], doc["created_at"], doc["root"], tuple(doc["fixes"]),
                                       tuple(JournalFile.from_json(f) for f in doc["files"]), doc["status"],
                                       d, doc.get("undone_at"), doc.get("saved_by")))
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return out

    def _new_directory(self) -> Tuple[str, Path]:
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        while True:
            txn_id = f"{stamp}-{secrets.token_hex(2)}"
            d = self.directory / txn_id
            try:
                d.mkdir(mode=0o700)
                return txn_id, d
            except FileExistsError:  # pragma: no cover - 1 in 65536 within one second
                continue
            except OSError as exc:
                raise self._unavailable(exc) from None

    def _save_backup(self, directory: Path, name: str, data: bytes) -> None:
        """Write ``data`` as ``directory/name`` (0600, fsynced); :class:`JournalUnavailable` on failure."""
        try:
            bfd = os.open(directory / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(bfd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            raise self._unavailable(exc) from None

    # -- undo

    def undo(self, txn_id: Optional[str] = None, force: bool = False,
             ops: Optional[FileOps] = None) -> Transaction:
        """Restore the files of ``txn_id`` (default: the last applied transaction) byte for byte.

        Files the transaction created are removed (and the directories it
        created, when empty). Refuses with :class:`UndoRefused` — changing
        nothing — when any file was changed again since, unless ``force``;
        with ``force`` the files' current contents are first saved as a new
        transaction (its id in the result's ``saved_by``; undoing it brings
        the later edits back), so nothing is lost. Returns the transaction,
        now marked ``undone``.
        """
        ops = ops or FileOps()
        with self.locked():
            if txn_id:
                txn = self.load(txn_id)
                if txn.status != "applied":
                    raise NoSuchUndo(f"transaction {txn.id} is {txn.status}; nothing to undo")
            else:
                applied = [t for t in self.transactions() if t.status == "applied"]
                if not applied:
                    raise NoSuchUndo("nothing to undo: the journal holds no applied transaction "
                                      "(see `gpudoctor fix --history`)")
                txn = applied[-1]
            files = Files(Path(txn.root))
            changed = []
            for jf in txn.files:
                host = files.host_path(jf.target)
                now = ops.read(host)
                if _sha256(now) != jf.sha256_after:
                    changed.append(jf.target)
            if changed and not force:
                raise UndoRefused(f"{', '.join(changed)} changed since transaction {txn.id}; undo refused, "
                                  f"nothing restored. Rerun with --force to restore the backup anyway.")
            saved = self._save_current(txn, files, ops) if changed else None
            for jf in txn.files:
                host = files.host_path(jf.target)
                if jf.existed and jf.backup:
                    data = (txn.directory / jf.backup).read_bytes()
                    try:
                        ops.write(host, data, jf.mode, (jf.uid, jf.gid))
                    except OSError as exc:
                        if isinstance(exc, PermissionError) or exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                            raise _denied(jf.target, host, ops, f"sudo gpudoctor fix --undo {txn.id}", exc) from None
                        raise WriteFailed(jf.target, exc.strerror or str(exc), []) from None
                else:
                    with contextlib.suppress(FileNotFoundError):
                        ops.remove(host)
                    for d in reversed(jf.created_dirs):
                        ops.rmdir(files.host_path(d))
            done = Transaction(txn.id, txn.created_at, txn.root, txn.fixes, txn.files, "undone",
                               txn.directory, _now(), saved.id if saved else None)
            self._write_manifest(done)
            return done

    def _save_current(self, txn: Transaction, files: Files, ops: FileOps) -> Transaction:
        """Before a forced undo: record the current bytes of ``txn``'s files as a new applied transaction
        whose own undo puts them back, so that forcing never loses an edit made after ``txn``."""
        txn_id, directory = self._new_directory()
        entries: List[JournalFile] = []
        for i, jf in enumerate(txn.files):
            host = files.host_path(jf.target)
            try:
                data = ops.read(host)
                st = os.stat(host) if data is not None else None
            except OSError as exc:
                _remove_tree(directory)
                raise WriteFailed(jf.target, f"cannot read it: {exc.strerror or exc}", []) from None
            backup = None
            if data is not None:
                backup = f"{i}.orig"
                try:
                    self._save_backup(directory, backup, data)
                except JournalUnavailable:
                    _remove_tree(directory)
                    raise
            restored = (txn.directory / jf.backup).read_bytes() if jf.existed and jf.backup else None
            mode, uid, gid = (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) if st else (jf.mode, jf.uid, jf.gid)
            entries.append(JournalFile(jf.path, jf.target, data is not None, mode, uid, gid, _sha256(data),
                                       _sha256(restored), backup))
        saved = Transaction(txn_id, _now(), txn.root, (f"undo --force {txn.id}",), tuple(entries), "applied",
                            directory)
        try:
            self._write_manifest(saved)
        except OSError as exc:
            _remove_tree(directory)
            raise self._unavailable(exc) from None
        return saved

    # -- apply

    def record_and_write(self, writes: Sequence[PreparedWrite], files: Files, fixes: Sequence[str],
                         ops: FileOps, rerun: Optional[str]) -> Transaction:
        """Back up, then write, every file; see :func:`apply`."""
        with self.locked():
            txn_id, directory = self._new_directory()
            entries: List[JournalFile] = []
            originals: List[Optional[bytes]] = []
            for i, w in enumerate(writes):
                try:
                    data = ops.read(w.host_path)
                    if (None if data is None else _decode(data)) != w.old_text:
                        raise StaleEdit(w.path)
                    backup = None
                    if data is not None:
                        backup = f"{i}.orig"
                        self._save_backup(directory, backup, data)
                        st = os.stat(w.host_path)
                        mode, uid, gid = stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid
                    else:
                        owner = ops.new_file_owner(w.host_path) or (os.geteuid(), os.getegid())
                        mode, uid, gid = w.mode, owner[0], owner[1]
                except (OSError, ApplyError) as exc:
                    _remove_tree(directory)
                    if isinstance(exc, ApplyError):
                        raise
                    if isinstance(exc, PermissionError):
                        raise _denied(w.target, w.host_path, ops, rerun, exc) from None
                    raise WriteFailed(w.target, f"cannot read it: {exc.strerror or exc}", []) from None
                originals.append(data)
                entries.append(JournalFile(w.path, w.target, data is not None, mode, uid, gid, _sha256(data),
                                           _sha256(_encode(w.new_text)) or "", backup))
            txn = Transaction(txn_id, _now(), str(files.root), tuple(fixes), tuple(entries), "pending", directory)
            try:
                self._write_manifest(txn)
            except OSError as exc:
                _remove_tree(directory)
                raise self._unavailable(exc) from None
            _fsync_dir(directory)

            done: List[int] = []
            for i, (w, jf) in enumerate(zip(writes, entries)):
                try:
                    created = ops.makedirs(w.host_path.parent)
                    if created:
                        rel = tuple("/" + str(p.relative_to(files.host_path("/"))) for p in created)
                        entries[i] = jf = JournalFile(jf.path, jf.target, jf.existed, jf.mode, jf.uid, jf.gid,
                                                      jf.sha256_before, jf.sha256_after, jf.backup, rel)
                    # last look before replacing: refuse a change made after the backup
                    current = ops.read(w.host_path)
                    if _sha256(current) != jf.sha256_before:
                        raise StaleEdit(w.path)
                    owner = (jf.uid, jf.gid) if jf.existed or os.geteuid() == 0 else None
                    ops.write(w.host_path, _encode(w.new_text), jf.mode, owner)
                    done.append(i)
                except (OSError, ApplyError) as exc:
                    restored = self._roll_back(writes, entries, originals, done, files, ops, skip_dirs_of=i)
                    failed = Transaction(txn_id, txn.created_at, txn.root, txn.fixes, tuple(entries),
                                         "rolled-back", directory)
                    self._write_manifest(failed)
                    if isinstance(exc, ApplyError):
                        raise
                    if isinstance(exc, PermissionError) or exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                        raise _denied(w.target, w.host_path, ops, rerun, exc) from None
                    raise WriteFailed(w.target, exc.strerror or str(exc), restored) from None
            txn = Transaction(txn_id, txn.created_at, txn.root, txn.fixes, tuple(entries), "applied", directory)
            self._write_manifest(txn)
            return txn

    @staticmethod
    def _roll_back(writes: Sequence[PreparedWrite], entries: Sequence[JournalFile],
                   originals: Sequence[Optional[bytes]], done: Sequence[int], files: Files, ops: FileOps,
                   skip_dirs_of: int) -> List[str]:
        restored = []
        for i in list(reversed(done)) + [skip_dirs_of]:
            w, jf, data = writes[i], entries[i], originals[i]
            if i in done:
                if data is not None:
                    ops.write(w.host_path, data, jf.mode, (jf.uid, jf.gid))
                else:
                    with contextlib.suppress(FileNotFoundError):
                        ops.remove(w.host_path)
                restored.append(w.target)
            for d in reversed(jf.created_dirs):
                ops.rmdir(files.host_path(d))
        return restored


def _remove_tree(directory: Path) -> None:
    for p in directory.iterdir():
        with contextlib.suppress(OSError):
            p.unlink()
    with contextlib.suppress(OSError):
        directory.rmdir()


# --------------------------------------------------------------------------- apply


def sudo_command(argv: Sequence[str]) -> str:
    """The command line to rerun as root: ``sudo`` + ``argv`` shell-quoted (``--yes`` kept as given)."""
    return "sudo " + shlex.join(list(argv))


def apply(writes: Sequence[PreparedWrite], files: Files, journal: Optional[Journal] = None,
          ops: Optional[FileOps] = None, rerun: Optional[str] = None) -> Optional[Transaction]:
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
            raise _denied(w.target, w.host_path, ops, rerun)
    fixes: List[str] = []
    for w in writes:
        fixes.extend(f for f in w.fixes if f not in fixes)
    return journal.record_and_write(writes, files, fixes, ops, rerun)


def changed_since(txn: Transaction, ops: Optional[FileOps] = None) -> List[str]:
    """Targets of ``txn`` whose current bytes differ from what the transaction wrote."""
    ops = ops or FileOps()
    files = Files(Path(txn.root))
    return [jf.target for jf in txn.files if _sha256(ops.read(files.host_path(jf.target))) != jf.sha256_after]


