"""Console output: rich on a terminal, plain text when piped or NO_COLOR is set.

Layout (flutter-doctor style): one line per finding with a status glyph and
the summary; under anything not ``ok`` the explanation; evidence with ``-v``;
a closing count. :class:`SpinnerProgress` shows the running collectors and
checks on a terminal only.
"""

from __future__ import annotations

import errno
import os
import sys
import threading
from typing import IO, Optional, Set

from rich.console import Console
from rich.padding import Padding
from rich.text import Text

from gpudoctor.engine import Progress, Report
from gpudoctor.model import Status
from gpudoctor.redact import redact_text
from gpudoctor.render.text import COLOURS, GLYPHS, PLAIN_GLYPHS, evidence_lines, finding_title


class _Console(Console):
    """A Console that lets a broken pipe reach the CLI (rich would exit 1, our "a check failed")."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")


def make_console(stream: Optional[IO[str]] = None) -> Console:
    """A rich Console that is plain (no colour, no markup) when not a terminal or NO_COLOR is set."""
    stream = stream or sys.stdout
    is_tty = hasattr(stream, "isatty") and stream.isatty()
    plain = not is_tty or "NO_COLOR" in os.environ
    return _Console(file=stream, no_color=plain, highlight=False, force_terminal=None if not plain else False,
                   soft_wrap=plain, width=None if is_tty else 100)


def is_plain(console: Console) -> bool:
    return not console.is_terminal or console.no_color


def render_console(report: Report, console: Console, verbose: bool = False) -> None:
    """Write the report to ``console``."""
    plain = is_plain(console)
    for f in report.findings:
        glyph = PLAIN_GLYPHS[f.status] if plain else GLYPHS[f.status]
        line = Text()
        line.append(f"{glyph} ", style=COLOURS[f.status] + " bold")
        line.append(f"{f.check}", style="bold")
        line.append(f"  {redact_text(finding_title(f))}")
        console.print(line)
        show_expl = f.explanation and (f.status not in (Status.OK, Status.SKIP) or verbose)
        if show_expl:
            body = redact_text(f.explanation)
            if plain:
                console.print(Text("\n".join("    " + ln if ln else "" for ln in body.splitlines())))
            else:
                from rich.markdown import Markdown  # only a terminal renders Markdown; piped output skips the import
                console.print(Padding(Markdown(body), (0, 0, 0, 4)))
        if f.fixes and f.status > Status.SKIP:
            console.print(Text(f"    fix: gpudoctor fix {' '.join(f.fixes)}", style="cyan"))
        if verbose and f.evidence:
            console.print(Text("\n".join("    " + ln for ln in evidence_lines(f)), style="dim"))
    counts = report.counts()
    parts = [f"{n} {s}" for s, n in counts.items() if n]
    style = COLOURS[report.verdict]
    n = len(report.findings)
    console.print()
    console.print(Text(f"{n} finding{'' if n == 1 else 's'}: {', '.join(parts) or 'none'} "
                       f"({report.duration_ms / 1000:.1f} s)", style=style + " bold"))


class SpinnerProgress(Progress):
    """A rich status spinner listing what is running; silent when not a terminal."""

    def __init__(self, console: Console):
        self._console = console
        self._running: Set[str] = set()
        self._lock = threading.Lock()
        self._status = None
        if console.is_terminal:
            self._status = console.status("starting", spinner="dots")

    def __enter__(self) -> "SpinnerProgress":
        if self._status is not None:
            self._status.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.stop()

    def _update(self) -> None:
        if self._status is not None:
            names = ", ".join(sorted(self._running)) or "..."
            self._status.update(f"checking: {names}")

    def started(self, name: str) -> None:
        with self._lock:
            self._running.add(name)
            self._update()

    def finished(self, name: str) -> None:
        with self._lock:
            self._running.discard(name)
            self._update()
