"""Termination signals: SIGINT, SIGTERM and SIGHUP end the doctor the same way.

:func:`install` makes each of them raise :class:`Terminated` (a ``KeyboardInterrupt``)
in the main thread; the CLI catches it, kills every probe/worker process group
(:func:`gpudoctor.system.kill_running_commands`) and exits ``128 + signal`` (130 for
SIGINT, 143 for SIGTERM, 129 for SIGHUP), as a shell reports a process killed by it.
:func:`received` tells a real signal from a ``KeyboardInterrupt`` that a plug-in
raised in its own code (which is only a broken plug-in).
"""

from __future__ import annotations

import signal
import threading

__all__ = ["Terminated", "install", "received", "exit_code", "HANDLED"]

#: the signals handled like Ctrl-C
HANDLED = tuple(s for s in (getattr(signal, n, None) for n in ("SIGINT", "SIGTERM", "SIGHUP")) if s is not None)

_received: int | None = None


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when a handled signal arrives; ``signum`` names it."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _handler(signum, frame) -> None:
    global _received
    if _received is not None:  # a second signal while cleaning up: ignored
        return
    _received = signum
    raise Terminated(signum)


def install() -> None:
    """Handle SIGINT, SIGTERM and SIGHUP (main thread only; elsewhere a no-op). A
    signal that was ignored when we started (``nohup``) stays ignored."""
    global _received
    _received = None
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in HANDLED:
        try:
            if sig != signal.SIGINT and signal.getsignal(sig) == signal.SIG_IGN:
                continue
            signal.signal(sig, _handler)
        except (OSError, ValueError):  # pragma: no cover - exotic platforms
            pass


def received() -> int | None:
    """The handled signal that arrived (a number), or None."""
    return _received


def exit_code(exc: BaseException | None = None) -> int:
    """``128 + signal`` for the signal that arrived (130 for a plain Ctrl-C)."""
    signum = getattr(exc, "signum", None) or _received or signal.SIGINT
    return 128 + int(signum)
