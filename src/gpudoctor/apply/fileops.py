"""Atomic file operations: the writer's only boundary with the filesystem (:class:`FileOps`, :func:`atomic_write`).

Also the byte/text conversions every writer step shares (UTF-8 with
``surrogateescape``, so undecodable bytes survive a round trip), the SHA-256
recorded in the journal, and :func:`denied_error`, which names the right
error for a file we may not write.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
import tempfile
from pathlib import Path

from gpudoctor.apply.errors import ApplyError, CannotWrite, NeedsPrivilege

__all__ = ["FileOps", "atomic_write", "decode_text", "denied_error", "encode_text", "fsync_dir", "sha256_hex"]


# --------------------------------------------------------------------------- low-level file operations


def sha256_hex(data: bytes | None) -> str | None:
    """Hex SHA-256 of ``data`` (None for a file that does not exist), as recorded in ``manifest.json``."""
    return None if data is None else hashlib.sha256(data).hexdigest()


def fsync_dir(path: Path) -> None:
    """fsync the directory ``path`` (so a rename in it is durable); errors are ignored."""
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


def atomic_write(path: Path, data: bytes, mode: int, owner: tuple[int, int] | None = None) -> None:
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
    fsync_dir(directory)


class FileOps:
    """The writer's boundary with the filesystem; tests subclass it to inject failures.

    Every method works on host paths.
    """

    def read(self, path: Path) -> bytes | None:
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

    def makedirs(self, path: Path) -> list[Path]:
        """Create missing directories down to ``path``; returns those created, outermost first.

        Each new directory takes the permission bits of the nearest existing
        one (``~`` at 0700 gives a private ``~/.config``, ``/etc`` gives 0755)
        and, when running as root, its owner (so ``sudo`` does not leave
        root-owned directories in a user's home).
        """
        missing: list[Path] = []
        p = path
        while not p.exists():
            missing.append(p)
            p = p.parent
        st = os.stat(p)
        created: list[Path] = []
        for d in reversed(missing):
            os.mkdir(d, 0o700)
            os.chmod(d, stat.S_IMODE(st.st_mode) & 0o777)
            if os.geteuid() == 0 and (st.st_uid, st.st_gid) != (0, 0):
                os.chown(d, st.st_uid, st.st_gid)
            created.append(d)
        return created

    def new_file_owner(self, path: Path) -> tuple[int, int] | None:
        """Owner for a file created at ``path``: its nearest existing directory's owner when we are
        root (a file created by ``sudo`` in a home stays the user's), else None (our own)."""
        if os.geteuid() != 0:
            return None
        p = path.parent
        while not p.exists() and p != p.parent:
            p = p.parent
        st = os.stat(p)
        return (st.st_uid, st.st_gid)

    def write(self, path: Path, data: bytes, mode: int, owner: tuple[int, int] | None) -> None:
        """Atomically replace ``path`` (see :func:`atomic_write`)."""
        atomic_write(path, data, mode, owner)

    def remove(self, path: Path) -> None:
        """Delete a file (used when undoing a file the transaction created)."""
        os.unlink(path)
        fsync_dir(path.parent)

    def rmdir(self, path: Path) -> None:
        """Remove an empty directory the transaction created; a non-empty one is kept."""
        with contextlib.suppress(OSError):
            os.rmdir(path)


def decode_text(data: bytes) -> str:
    """A file's bytes as text (UTF-8, undecodable bytes kept through ``surrogateescape``)."""
    return data.decode("utf-8", errors="surrogateescape")


def encode_text(text: str) -> bytes:
    """The inverse of :func:`decode_text`: byte for byte what was read."""
    return text.encode("utf-8", errors="surrogateescape")


def denied_error(target: str, host: Path, ops: FileOps, rerun: str | None, exc: OSError | None = None) -> ApplyError:
    """The error for a file we may not write: :class:`CannotWrite` on a read-only file system or when we
    are root already, else :class:`NeedsPrivilege` with the ``sudo`` command to rerun."""
    if (exc is not None and exc.errno == errno.EROFS) or ops.read_only(host):
        return CannotWrite(target, read_only=True)
    if ops.is_root():
        return CannotWrite(target, read_only=False)
    return NeedsPrivilege(target, rerun)
