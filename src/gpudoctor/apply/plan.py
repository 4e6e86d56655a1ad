"""Planning and diffs: :func:`prepare` turns fix plans into checked :class:`PreparedWrite` values, and
:func:`unified_diff` is what the user is shown (computed from the very texts that are written)."""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Sequence
from pathlib import Path

from gpudoctor.apply.errors import ConflictingEdits, OutsideHome, StaleEdit, WriteFailed
from gpudoctor.apply.fileops import FileOps, decode_text
from gpudoctor.model import FixPlan
from gpudoctor.records import frozen_dataclass
from gpudoctor.redact import redact_text
from gpudoctor.system import Files

__all__ = ["PreparedWrite", "prepare", "unified_diff", "in_root"]


# --------------------------------------------------------------------------- prepare and diff


def in_root(path: str, root: str | Path) -> str:
    """``path`` for messages: as is under ``/``, else ``/etc/pip.conf (in --root /mnt/img)``."""
    root = str(root)
    return path if root in ("/", "") else f"{path} (in --root {root})"


@frozen_dataclass
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
    old_text: str | None
    new_text: str
    mode: int
    fixes: tuple[str, ...]
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


def _check_dangling(edit_path: str, target: str, host: Path, files: Files) -> None:
    """Refuse to create ``target`` through the dangling link ``edit_path`` when the link is in the
    user's home and its target is not (under ``--root`` the jail already keeps it in the root)."""
    if target == edit_path or host.exists() or not files.is_live:
        return
    home = os.path.realpath(os.path.expanduser("~"))

    def inside(p: str) -> bool:
        return p == home or p.startswith(home.rstrip("/") + "/")

    if inside(os.path.realpath(os.path.dirname(edit_path))) and not inside(os.path.realpath(target)):
        raise OutsideHome(edit_path, target, home)


def prepare(plans: Sequence[FixPlan], files: Files, ops: FileOps | None = None) -> list[PreparedWrite]:
    """Resolve, verify and merge the edits of ``plans`` into the writes to make.

    Returns the writes that change something, in plan order (an empty list
    means everything is already fixed). Raises :class:`StaleEdit` when a file
    no longer holds the plan's ``old_text`` (or exists when it was to be
    created, or is not a regular file), :class:`ConflictingEdits` when two
    plans edit one file from different texts.
    """
    ops = ops or FileOps()
    by_target: dict[str, PreparedWrite] = {}
    order: list[str] = []
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
                    by_target[target] = PreparedWrite(
                        prev.path,
                        target,
                        host,
                        prev.old_text,
                        edit.new_text,
                        prev.mode,
                        prev.fixes + (plan.fix,),
                        prev.root,
                    )
                    continue
                raise ConflictingEdits(edit.path, prev.fixes + (plan.fix,))
            try:
                current = ops.read(host)
            except OSError as exc:
                raise WriteFailed(target, f"cannot read it: {exc.strerror or exc}", []) from None
            current_text = None if current is None else decode_text(current)
            if current_text != edit.old_text:
                if edit.old_text is None:
                    raise StaleEdit(edit.path, "it was to be created but now exists")
                if current_text is None:
                    raise StaleEdit(edit.path, "it was deleted since gpudoctor read it")
                raise StaleEdit(edit.path)
            by_target[target] = PreparedWrite(
                edit.path, target, host, edit.old_text, edit.new_text, edit.mode, (plan.fix,), str(files.root)
            )
            order.append(target)
    return [by_target[t] for t in order if by_target[t].old_text != by_target[t].new_text]


_HUNK = re.compile(r"([-+])(\d+)(?=[, ])")


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
    # only the changed middle (plus context) goes to difflib: a 50 MB file with one changed line
    # diffs in milliseconds, and the hunk headers are shifted back to the file's own line numbers
    n = min(len(old_lines), len(new_lines))
    head = 0
    while head < n and old_lines[head] == new_lines[head]:
        head += 1
    tail = 0
    while tail < n - head and old_lines[-1 - tail] == new_lines[-1 - tail]:
        tail += 1
    lo, cut = max(0, head - context), max(0, tail - context)
    a, b = old_lines[lo : len(old_lines) - cut], new_lines[lo : len(new_lines) - cut]
    lines = []
    for line in difflib.unified_diff(a, b, fromfile=fromfile, tofile=shown, n=context):
        if lo and line.startswith("@@ "):
            line = _HUNK.sub(lambda m: f"{m.group(1)}{int(m.group(2)) + lo}", line)
        if line.endswith("\n"):
            lines.append(line)
        else:
            lines.append(line + "\n\\ No newline at end of file\n")
    text = "".join(lines)
    return redact_text(text) if redact else text
