"""The backup journal: one directory per transaction with the original bytes and a ``manifest.json``.

:meth:`Journal.record_and_write` backs up, writes and rolls back on failure;
:meth:`Journal.undo` restores a transaction byte for byte. The journal lives
under ``platformdirs.user_state_dir("gpudoctor")`` (which honours
``XDG_STATE_HOME``); its files are private (0600 / 0700): they are copies of
configuration that may hold credentials.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import fcntl
import json
import os
import secrets
import stat
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from gpudoctor.apply.errors import ApplyError, JournalUnavailable, NoSuchUndo, StaleEdit, UndoRefused, WriteFailed
from gpudoctor.apply.fileops import FileOps, atomic_write, decode_text, denied_error, encode_text, fsync_dir, sha256_hex
from gpudoctor.apply.plan import PreparedWrite
from gpudoctor.records import frozen_dataclass
from gpudoctor.system import Files

__all__ = ["MANIFEST_SCHEMA_VERSION", "JournalFile", "Transaction", "Journal", "default_journal_dir"]

#: Version of ``manifest.json`` in each journal transaction.
MANIFEST_SCHEMA_VERSION = 1


# --------------------------------------------------------------------------- journal


def default_journal_dir() -> Path:
    """``<user state dir>/gpudoctor/journal`` (platformdirs; honours ``XDG_STATE_HOME``)."""
    import platformdirs

    return Path(platformdirs.user_state_dir("gpudoctor", appauthor=False)) / "journal"


@frozen_dataclass
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
    sha256_before: str | None
    sha256_after: str | None
    backup: str | None
    created_dirs: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "target": self.target,
            "existed": self.existed,
            "mode": oct(self.mode),
            "uid": self.uid,
            "gid": self.gid,
            "sha256_before": self.sha256_before,
            "sha256_after": self.sha256_after,
            "backup": self.backup,
            "created_dirs": list(self.created_dirs),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> JournalFile:
        return cls(
            d["path"],
            d["target"],
            bool(d["existed"]),
            int(str(d["mode"]), 0),
            int(d["uid"]),
            int(d["gid"]),
            d.get("sha256_before"),
            d["sha256_after"],
            d.get("backup"),
            tuple(d.get("created_dirs") or ()),
        )


@frozen_dataclass
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
        seq: the journal's monotonic sequence number (1, 2, ...), allocated under
            the journal lock and never reused; it orders the journal (wall-clock ids
            do not: two fixes in one second, or a clock set back). 0 for manifests
            written before sequence numbers existed (ordered by id, before all others).
        undoes: for an undo record (the bytes an undo replaced, saved first): the id of
            the transaction that undo undid. Undoing the record brings those bytes back
            and marks that transaction applied again (the undo of an undo). A bare
            ``--undo`` never picks an undo record.
    """

    id: str
    created_at: str
    root: str
    fixes: tuple[str, ...]
    files: tuple[JournalFile, ...]
    status: str
    directory: Path
    undone_at: str | None = None
    saved_by: str | None = None
    seq: int = 0
    undoes: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": MANIFEST_SCHEMA_VERSION,
            "id": self.id,
            "seq": self.seq,
            "created_at": self.created_at,
            "root": self.root,
            "fixes": list(self.fixes),
            "status": self.status,
            "undone_at": self.undone_at,
            "saved_by": self.saved_by,
            "undoes": self.undoes,
            "files": [f.to_json() for f in self.files],
        }


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class Journal:
    """The backup journal: one directory per transaction under ``directory``.

    Methods that change the journal hold an exclusive ``flock`` on
    ``directory/.lock``, so two gpudoctor processes cannot interleave.
    """

    def __init__(self, directory: Path | None = None):
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
        matches = [t for t in self.transactions() if t.id == txn_id] or [
            t for t in self.transactions() if t.id.startswith(txn_id)
        ]
        if not matches:
            raise NoSuchUndo(
                f"no transaction {txn_id!r} in the journal {self.directory} (see `gpudoctor fix --history`)"
            )
        if len(matches) > 1:
            raise NoSuchUndo(f"{txn_id!r} matches several transactions: {', '.join(t.id for t in matches)}")
        return matches[0]

    def transactions(self) -> list[Transaction]:
        """Every readable transaction in sequence order, oldest first (unreadable manifests are skipped)."""
        if not self.directory.is_dir():
            return []
        out = []
        for d in sorted(self.directory.iterdir()):
            manifest = d / "manifest.json"
            if not manifest.is_file():
                continue
            try:
                doc = json.loads(manifest.read_text(encoding="utf-8"))
                seq = doc.get("seq", 0)
                out.append(
                    Transaction(
                        doc["id"],
                        doc["created_at"],
                        doc["root"],
                        tuple(doc["fixes"]),
                        tuple(JournalFile.from_json(f) for f in doc["files"]),
                        doc["status"],
                        d,
                        doc.get("undone_at"),
                        doc.get("saved_by"),
                        seq if isinstance(seq, int) and not isinstance(seq, bool) else 0,
                        doc.get("undoes") if isinstance(doc.get("undoes"), str) else None,
                    )
                )
            except (OSError, ValueError, KeyError, TypeError):
                continue
        out.sort(key=lambda t: (t.seq, t.id))
        return out

    def _next_seq(self) -> int:
        """The next sequence number (call with the lock held): one more than the highest ever
        handed out, kept in ``.seq`` so that numbers are never reused even after a
        transaction directory is deleted."""
        counter = self.directory / ".seq"
        try:
            last = int(counter.read_text().strip() or 0)
        except (OSError, ValueError):
            last = 0
        last = max([last] + [t.seq for t in self.transactions()])
        try:
            atomic_write(counter, f"{last + 1}\n".encode(), 0o600)
        except OSError as exc:
            raise self._unavailable(exc) from None
        return last + 1

    def _new_directory(self) -> tuple[str, Path]:
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

    def undo(self, txn_id: str | None = None, force: bool = False, ops: FileOps | None = None) -> Transaction:
        """Restore the files of ``txn_id`` (default: the last applied transaction that is not an
        undo record) byte for byte.

        Files the transaction created are removed (and the directories it
        created, when empty). Refuses with :class:`UndoRefused` — changing
        nothing — when any file was changed again since, unless ``force``.
        Before restoring, the files' current bytes are saved as an undo record
        (a new applied transaction, its id in the result's ``saved_by``, its
        ``undoes`` naming ``txn``): undoing that record brings them back byte
        for byte — the undo of an undo — and marks ``txn`` applied again, so
        nothing is lost, with or without ``force``. Returns the transaction,
        now marked ``undone``.
        """
        ops = ops or FileOps()
        with self.locked():
            if txn_id:
                txn = self.load(txn_id)
                if txn.status != "applied":
                    raise NoSuchUndo(f"transaction {txn.id} is {txn.status}; nothing to undo")
            else:
                every = [t for t in self.transactions() if t.status == "applied"]
                applied = [t for t in every if not t.undoes]
                if not applied and every:  # only undo records are left: a bare --undo never redoes
                    last = every[-1]
                    raise NoSuchUndo(
                        f"nothing to undo: transaction {last.undoes} is undone already; to write it again, "
                        f"undo the undo: gpudoctor fix --undo {last.id}"
                    )
                if not applied:
                    raise NoSuchUndo(
                        "nothing to undo: the journal holds no applied transaction (see `gpudoctor fix --history`)"
                    )
                txn = applied[-1]
            files = Files(Path(txn.root))
            changed = []
            for jf in txn.files:
                host = files.host_path(jf.target)
                now = ops.read(host)
                if sha256_hex(now) != jf.sha256_after:
                    changed.append(jf.target)
            if changed and not force:
                raise UndoRefused(
                    f"{', '.join(changed)} changed since transaction {txn.id}; undo refused, "
                    f"nothing restored. Rerun with --force to restore the backup anyway."
                )
            saved = self._save_current(txn, files, ops, forced=bool(changed))
            for jf in txn.files:
                host = files.host_path(jf.target)
                if jf.existed and jf.backup:
                    data = (txn.directory / jf.backup).read_bytes()
                    try:
                        ops.makedirs(host.parent)  # an undo of an undo: the first undo removed them
                        ops.write(host, data, jf.mode, (jf.uid, jf.gid))
                    except OSError as exc:
                        if isinstance(exc, PermissionError) or exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                            raise denied_error(
                                jf.target, host, ops, f"sudo gpudoctor fix --undo {txn.id}", exc
                            ) from None
                        raise WriteFailed(jf.target, exc.strerror or str(exc), []) from None
                else:
                    with contextlib.suppress(FileNotFoundError):
                        ops.remove(host)
                    for d in reversed(jf.created_dirs):
                        ops.rmdir(files.host_path(d))
            done = Transaction(
                txn.id,
                txn.created_at,
                txn.root,
                txn.fixes,
                txn.files,
                "undone",
                txn.directory,
                _now(),
                saved.id,
                seq=txn.seq,
                undoes=txn.undoes,
            )
            self._write_manifest(done)
            if txn.undoes:  # the undo of an undo: the transaction that undo undid is in place again
                with contextlib.suppress(NoSuchUndo):
                    first = self.load(txn.undoes)
                    if first.status == "undone":
                        self._write_manifest(
                            Transaction(
                                first.id,
                                first.created_at,
                                first.root,
                                first.fixes,
                                first.files,
                                "applied",
                                first.directory,
                                seq=first.seq,
                                undoes=first.undoes,
                            )
                        )
            return done

    def _save_current(self, txn: Transaction, files: Files, ops: FileOps, forced: bool = False) -> Transaction:
        """Before an undo: record the current bytes of ``txn``'s files as a new applied transaction (an
        undo record, ``undoes`` = ``txn.id``) whose own undo puts them back, so that an undo — forced
        over later edits or not — never loses bytes and can itself be undone."""
        txn_id, directory = self._new_directory()
        entries: list[JournalFile] = []
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
            entries.append(
                JournalFile(
                    jf.path,
                    jf.target,
                    data is not None,
                    mode,
                    uid,
                    gid,
                    sha256_hex(data),
                    sha256_hex(restored),
                    backup,
                    jf.created_dirs if not jf.existed else (),  # removed by the undo, made again by its undo
                )
            )
        saved = Transaction(
            txn_id,
            _now(),
            txn.root,
            (f"undo --force {txn.id}" if forced else f"undo {txn.id}",),
            tuple(entries),
            "applied",
            directory,
            seq=self._next_seq(),
            undoes=txn.id,
        )
        try:
            self._write_manifest(saved)
        except OSError as exc:
            _remove_tree(directory)
            raise self._unavailable(exc) from None
        return saved

    # -- apply

    def record_and_write(
        self, writes: Sequence[PreparedWrite], files: Files, fixes: Sequence[str], ops: FileOps, rerun: str | None
    ) -> Transaction:
        """Back up, then write, every file; see :func:`apply`."""
        with self.locked():
            txn_id, directory = self._new_directory()
            entries: list[JournalFile] = []
            originals: list[bytes | None] = []
            for i, w in enumerate(writes):
                try:
                    data = ops.read(w.host_path)
                    if (None if data is None else decode_text(data)) != w.old_text:
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
                        raise denied_error(w.target, w.host_path, ops, rerun, exc) from None
                    raise WriteFailed(w.target, f"cannot read it: {exc.strerror or exc}", []) from None
                originals.append(data)
                entries.append(
                    JournalFile(
                        w.path,
                        w.target,
                        data is not None,
                        mode,
                        uid,
                        gid,
                        sha256_hex(data),
                        sha256_hex(encode_text(w.new_text)) or "",
                        backup,
                    )
                )
            txn = Transaction(
                txn_id,
                _now(),
                str(files.root),
                tuple(fixes),
                tuple(entries),
                "pending",
                directory,
                seq=self._next_seq(),
            )
            try:
                self._write_manifest(txn)
            except OSError as exc:
                _remove_tree(directory)
                raise self._unavailable(exc) from None
            fsync_dir(directory)

            done: list[int] = []
            for i, (w, jf) in enumerate(zip(writes, entries)):
                try:
                    created = ops.makedirs(w.host_path.parent)
                    if created:
                        rel = tuple("/" + str(p.relative_to(files.host_path("/"))) for p in created)
                        entries[i] = jf = JournalFile(
                            jf.path,
                            jf.target,
                            jf.existed,
                            jf.mode,
                            jf.uid,
                            jf.gid,
                            jf.sha256_before,
                            jf.sha256_after,
                            jf.backup,
                            rel,
                        )
                    # last look before replacing: refuse a change made after the backup
                    current = ops.read(w.host_path)
                    if sha256_hex(current) != jf.sha256_before:
                        raise StaleEdit(w.path)
                    keep: tuple[int, int] | None = (jf.uid, jf.gid) if jf.existed or os.geteuid() == 0 else None
                    ops.write(w.host_path, encode_text(w.new_text), jf.mode, keep)
                    done.append(i)
                except (OSError, ApplyError) as exc:
                    restored = self._roll_back(writes, entries, originals, done, files, ops, skip_dirs_of=i)
                    failed = Transaction(
                        txn_id,
                        txn.created_at,
                        txn.root,
                        txn.fixes,
                        tuple(entries),
                        "rolled-back",
                        directory,
                        seq=txn.seq,
                    )
                    self._write_manifest(failed)
                    if isinstance(exc, ApplyError):
                        raise
                    if isinstance(exc, PermissionError) or exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                        raise denied_error(w.target, w.host_path, ops, rerun, exc) from None
                    raise WriteFailed(w.target, exc.strerror or str(exc), restored) from None
            txn = Transaction(
                txn_id, txn.created_at, txn.root, txn.fixes, tuple(entries), "applied", directory, seq=txn.seq
            )
            self._write_manifest(txn)
            return txn

    @staticmethod
    def _roll_back(
        writes: Sequence[PreparedWrite],
        entries: Sequence[JournalFile],
        originals: Sequence[bytes | None],
        done: Sequence[int],
        files: Files,
        ops: FileOps,
        skip_dirs_of: int,
    ) -> list[str]:
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
