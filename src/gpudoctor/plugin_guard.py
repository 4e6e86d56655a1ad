"""Containment of plug-in code (issue 32 item 5).

A plug-in's import and its ``evaluate`` run inside :func:`guarded`:

- ``os._exit(code)`` raises :class:`PluginExit` instead of ending gpudoctor (a failing gate
  must not turn into exit 0); a child the plug-in forked may still exit, and one that returns
  into gpudoctor's code leaves at once (it must not print a second report);
- what it writes to file descriptor 1 (``os.write(1, ...)``, C extensions) is kept out of
  gpudoctor's stdout (a ``--format json`` report stays JSON) and goes to stderr afterwards,
  through the same redaction as everything else;

and :func:`run_with_timeout` bounds it (an import that hangs is abandoned after the budget).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any, NoReturn


class PluginExit(Exception):
    """Plug-in code called ``os._exit(code)`` while gpudoctor ran it."""

    def __init__(self, code: int) -> None:
        super().__init__(f"the plug-in called os._exit({code})")
        self.code = code


_real_exit = os._exit
_lock = threading.Lock()
_state: dict[str, Any] = {"depth": 0, "saved_fd": None, "capture": None, "pid": None}


def _guarded_exit(status: int) -> NoReturn:
    if os.getpid() != _state["pid"]:  # a child the plug-in forked: it may end
        _real_exit(status)
    raise PluginExit(status)


@contextlib.contextmanager
def guarded() -> Iterator[None]:
    """Run plug-in code with ``os._exit`` turned into :class:`PluginExit` and descriptor 1
    captured (re-entrant; what was captured goes to stderr, redacted, when the last guard ends)."""
    pid = os.getpid()
    with _lock:
        if _state["depth"] == 0:
            _state["pid"] = pid
            try:
                sys.stdout.flush()
                capture = tempfile.TemporaryFile()
                _state["saved_fd"] = os.dup(1)
                os.dup2(capture.fileno(), 1)
                _state["capture"] = capture
            except (OSError, ValueError):  # no descriptor 1 (a closed stdout): nothing to protect
                _state["saved_fd"] = _state["capture"] = None
            os._exit = _guarded_exit
        _state["depth"] += 1
    try:
        yield
    finally:
        if os.getpid() != pid:  # a forked child came back into gpudoctor's code: leave silently
            _real_exit(0)
        _release()


def _release() -> None:
    captured = b""
    with _lock:
        _state["depth"] -= 1
        if _state["depth"] > 0:
            return
        os._exit = _real_exit
        saved, capture = _state["saved_fd"], _state["capture"]
        _state["saved_fd"] = _state["capture"] = None
        if saved is not None and capture is not None:
            with contextlib.suppress(OSError, ValueError):
                sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
            capture.seek(0)
            captured = capture.read(1 << 20)
            capture.close()
    if captured:
        from gpudoctor.redact import redact_text

        text = captured.decode("utf-8", "replace")
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(redact_text(text if text.endswith("\n") else text + "\n"))
            sys.stderr.flush()


def run_with_timeout(
    fn: Callable[[], Any], timeout_s: float, paused_s: Callable[[], float] = lambda: 0.0
) -> tuple[str, Any]:
    """Run ``fn`` in a daemon thread. Returns ("ok", value), ("raised", (exception, tb text))
    or ("timeout", None). Anything ``fn`` raises is caught, ``BaseException`` included
    (``sys.exit``, a ``KeyboardInterrupt`` raised by its own code): the caller's main
    thread only waits, so a real signal still reaches it. ``paused_s()`` is time the
    thread spent waiting for others (a required domain): it does not count against
    ``timeout_s``."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = (exc, traceback.format_exc())

    thread = threading.Thread(target=target, daemon=True)
    start = time.monotonic()
    thread.start()
    while True:
        left = timeout_s + paused_s() - (time.monotonic() - start)
        if left <= 0:
            break
        thread.join(min(left, 0.5))
        if not thread.is_alive():
            break
    if thread.is_alive():
        return "timeout", None
    if "error" in box:
        return "raised", box["error"]
    return "ok", box.get("value")
