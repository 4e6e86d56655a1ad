"""Files the user names on the command line (``--facts``, ``--catalogue``, ``--dockerfile``):
read with limits, so a bad one is one clear line and exit 2, never a traceback or a hang.

:func:`read_user_file` refuses directories, FIFOs and devices (which could block), symlink
loops, unreadable files, files over :data:`MAX_INPUT_BYTES`, binary data (NUL bytes) and,
unless ``lenient``, text that is not UTF-8. :func:`loads_json` refuses documents nested
deeper than :data:`MAX_JSON_DEPTH`.
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
import sys
from collections.abc import Mapping
from typing import Any

__all__ = [
    "CHECK_TIMEOUT_ENV",
    "check_timeout_from_env",
    "COLLECT_TIMEOUT_SCALE_ENV",
    "collect_timeout_scale_from_env",
    "InputError",
    "read_user_file",
    "loads_json",
    "MAX_INPUT_BYTES",
    "MAX_JSON_DEPTH",
]

#: largest input file read, bytes (a facts snapshot is a few hundred KiB)
MAX_INPUT_BYTES = 64 * 1024 * 1024
#: deepest JSON nesting accepted (facts snapshots nest fewer than 12 levels)
MAX_JSON_DEPTH = 64


class InputError(ValueError):
    """A named input file cannot be used; the message is one line naming it."""


def read_user_file(path: str, lenient: bool = False, max_bytes: int = MAX_INPUT_BYTES) -> str:
    """The text of ``path`` (``-`` reads stdin). Raises :class:`InputError` (see the module)."""
    if path == "-":
        data = (
            sys.stdin.buffer.read(max_bytes + 1)
            if hasattr(sys.stdin, "buffer")
            else sys.stdin.read(max_bytes + 1).encode("utf-8", "surrogateescape")
        )
    else:
        try:
            st = os.stat(path)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise InputError(f"{path}: a symlink loop (too many levels of symbolic links)") from None
            raise InputError(f"{path}: {exc.strerror or exc}") from None
        if stat.S_ISDIR(st.st_mode):
            raise InputError(f"{path}: is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{path}: not a regular file (a pipe, socket or device)")
        if st.st_size > max_bytes:
            raise InputError(
                f"{path}: too large ({st.st_size / 1048576:.0f} MiB; the limit is {max_bytes / 1048576:.0f} MiB)"
            )
        try:
            with open(path, "rb") as fh:
                data = fh.read(max_bytes + 1)
        except OSError as exc:
            raise InputError(f"{path}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise InputError(f"{path}: too large (the limit is {max_bytes / 1048576:.0f} MiB)")
    if b"\x00" in data:
        raise InputError(f"{path}: a binary file (it holds NUL bytes), not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        if lenient:
            return data.decode("utf-8", errors="replace")
        raise InputError(f"{path}: not UTF-8 text (a compressed or binary file?)") from None


def _depth_ok(text: str, limit: int) -> bool:
    depth = 0
    in_str = esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return False
        elif ch in "]}":
            depth -= 1
    return True


def loads_json(text: str, what: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` that refuses nesting deeper than ``max_depth`` (:class:`InputError`)."""
    if not _depth_ok(text, max_depth):
        raise InputError(f"{what}: JSON nested deeper than {max_depth} levels")
    try:
        return json.loads(text)
    except RecursionError:  # pragma: no cover - the depth check comes first
        raise InputError(f"{what}: JSON nested too deeply") from None
    except ValueError as exc:
        raise InputError(f"{what}: not JSON ({exc})") from None


CHECK_TIMEOUT_ENV = "GPUDOCTOR_CHECK_TIMEOUT_S"


def check_timeout_from_env(env: Mapping[str, str] | None = None, default: float = 10.0) -> float:
    """The per-check evaluation budget from ``GPUDOCTOR_CHECK_TIMEOUT_S`` (seconds), else ``default``.
    Raises ValueError naming the variable for a value that is not a finite positive number (the CLI
    turns it into a usage error before anything runs)."""
    raw = (os.environ if env is None else env).get(CHECK_TIMEOUT_ENV, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{CHECK_TIMEOUT_ENV}={raw!r}: not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{CHECK_TIMEOUT_ENV}={raw!r}: must be a finite number of seconds above 0")
    return value


COLLECT_TIMEOUT_SCALE_ENV = "GPUDOCTOR_COLLECT_TIMEOUT_SCALE"


def collect_timeout_scale_from_env(env: Mapping[str, str] | None = None) -> float:
    """The factor every collector's timeout is multiplied by, from ``GPUDOCTOR_COLLECT_TIMEOUT_SCALE``
    (default 1): a loaded or slow machine (a CI runner sharing its CPUs) raises it instead of
    turning slow collectors into errors. Raises ValueError naming the variable for a value that
    is not a finite number of at least 1."""
    raw = (os.environ if env is None else env).get(COLLECT_TIMEOUT_SCALE_ENV, "").strip()
    if not raw:
        return 1.0
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{COLLECT_TIMEOUT_SCALE_ENV}={raw!r}: not a number") from None
    if not math.isfinite(value) or value < 1:
        raise ValueError(f"{COLLECT_TIMEOUT_SCALE_ENV}={raw!r}: must be a finite number of at least 1")
    return value
