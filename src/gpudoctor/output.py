"""The one writer of gpudoctor's own output files (issue 32).

Every file the tool writes for the user — ``-o`` reports, the gate's ``--status-file``, the
Prometheus textfile, ``facts`` snapshots, saved measurements — goes through
:func:`write_text`: the text is redacted (:func:`gpudoctor.redact.redact_file_text`: the secret rules every
stream gets, escape sequences removed, no line cut), written to a
temporary file beside the target, fsynced and renamed over it, so a reader sees the old or the
new file, never a part. Only a regular file is ever replaced: a device node, FIFO, socket or
directory is refused (run as root, ``--status-file /dev/null`` must never turn the machine's
``/dev/null`` into a file). A symbolic link is followed to the file it names, which is
replaced in place; the link itself stays. stdout is ``-`` or no ``-o`` at all.

(User configuration files are not written here: :mod:`gpudoctor.apply` edits them, with a
backup and a journal.)
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from gpudoctor.redact import redact_file_text

__all__ = ["OutputRefused", "refusal", "write_text"]

_KINDS = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


class OutputRefused(OSError):
    """The output path names something that is not a regular file; ``strerror`` says what."""


def refusal(path: str) -> str | None:
    """Why ``path`` cannot be written as an output file (it, or the file a link names, is a
    device node, FIFO, socket or directory), or None when it is a regular file or absent."""
    try:
        mode = os.stat(path).st_mode  # follows links: what would be replaced is the target
    except OSError:
        return None
    for test, kind in _KINDS:
        if test(mode):
            return f"is {kind}, not a regular file (gpudoctor writes only regular files)"
    return None


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current


def write_text(path: str, text: str, mode: int | None = None) -> None:
    """Write ``text`` (redacted) to ``path`` atomically.

    ``mode`` is the permission of a new file (default ``0o666`` less the umask); an existing
    file keeps its own. Raises :class:`OutputRefused` for a path that is not a regular file and
    OSError for the rest (the temporary file is removed)."""
    why = refusal(path)
    if why:
        raise OutputRefused(0, why, path)
    target = Path(os.path.realpath(path))
    try:
        keep: int | None = stat.S_IMODE(target.stat().st_mode)
    except OSError:
        keep = None
    fd, tmp = tempfile.mkstemp(prefix=".gpudoctor-", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(redact_file_text(text))
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, keep if keep is not None else (mode if mode is not None else 0o666 & ~_umask()))
        why = refusal(str(target))  # swapped for a device between the check and now: still refuse
        if why:
            raise OutputRefused(0, why, path)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
