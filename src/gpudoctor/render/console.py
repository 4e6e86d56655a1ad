"""Console output: rich on a terminal, plain text when piped or NO_COLOR is set.

Layout (flutter-doctor style, shape from :mod:`gpudoctor.render.layout`): the
headline, one line per area with its mark and counts, details only where
something needs attention, ``ok``/``skip`` folded into their area (all of
it with ``-v``), a closing count and the numbered next steps. :class:`SpinnerProgress` shows the running collectors and
checks on a terminal only.
"""

from __future__ import annotations

import errno
import os
import sys
import threading
from collections.abc import Sequence
from typing import IO

from rich.console import Console
from rich.padding import Padding
from rich.text import Text

from gpudoctor.engine import Progress, Report
from gpudoctor.model import Finding, Status
from gpudoctor.redact import redact_text
from gpudoctor.render.layout import (
    CONSEQUENCE,
    Layout,
    area_size,
    consequence_of,
    diagnosis_lines,
    layout,
    root_cause_shown,
)
from gpudoctor.render.text import (
    COLOURS,
    GLYPHS,
    PLAIN_GLYPHS,
    command_lines,
    evidence_lines,
    verdict_word,
)
from gpudoctor.words import plural


class _Console(Console):
    """A Console that lets a broken pipe reach the CLI (rich would exit 1, our "a check failed")."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")


def make_console(stream: IO[str] | None = None) -> Console:
    """A rich Console that is plain (no colour, no markup) when not a terminal or NO_COLOR is set."""
    stream = stream or sys.stdout
    is_tty = hasattr(stream, "isatty") and stream.isatty()
    plain = not is_tty or "NO_COLOR" in os.environ
    return _Console(
        file=stream,
        no_color=plain,
        highlight=False,
        force_terminal=None if not plain else False,
        soft_wrap=plain,
        width=None if is_tty else 100,
    )


def is_plain(console: Console) -> bool:
    return not console.is_terminal or console.no_color


def _print_block(console: Console, body: str, plain: bool, indent: int = 4) -> None:
    """An explanation (Markdown) under a finding: as text when plain, rendered on a terminal."""
    body = redact_text(body)
    if plain:
        console.print(Text("\n".join(" " * indent + ln if ln else "" for ln in body.splitlines())))
    else:
        from rich.markdown import (
            Markdown,  # only a terminal renders Markdown; piped output skips the import
        )

        console.print(Padding(Markdown(body), (0, 0, 0, indent)))


def _finding_line(console: Console, f: Finding, title: str, plain: bool, indent: int) -> None:
    glyph = PLAIN_GLYPHS[f.status] if plain else GLYPHS[f.status]
    line = Text(" " * indent)
    line.append(f"{glyph} ", style=COLOURS[f.status] + " bold")
    line.append(f"{f.check}", style="bold")
    line.append(f"  {redact_text(title)}")
    console.print(line)


def _finding(
    console: Console,
    lay: Layout,
    f: Finding,
    plain: bool,
    verbose: bool,
    explain: bool,
    findings: Sequence[Finding] = (),
) -> None:
    _finding_line(console, f, lay.title_of(f), plain, 2)
    cause = None if verbose else root_cause_shown(f, findings)
    consequence = None if verbose else consequence_of(f, findings)
    if cause:
        console.print(Text(f"      root cause and remedy: see {cause} below", style="dim"))
        for line in diagnosis_lines(f):
            console.print(Text(f"      {redact_text(line)}", style="dim"), soft_wrap=True)
    elif consequence:
        console.print(Text(f"      {CONSEQUENCE.format(check=consequence)}", style="dim"))
    elif f.explanation and explain:
        _print_block(console, f.explanation, plain, 6)
    if f.fixes and f.status > Status.SKIP:
        console.print(Text(f"      fix: {lay.fix_command(f)}", style="cyan"))
    if verbose and f.commands:
        console.print(Text("\n".join("      " + ln for ln in command_lines(f)), style="cyan"))
    if verbose and f.evidence:
        console.print(Text("\n".join("      " + ln for ln in evidence_lines(f)), style="dim"))


def render_console(report: Report, console: Console, verbose: bool = False) -> None:
    """Write the report to ``console``, grouped by area (see :mod:`gpudoctor.render.layout`).

    Line 1 is the headline (overall verdict and the ``cuda.available``
    summary); then one header line per area with its worst status and
    counts, the findings that need attention with their explanation, the
    info findings' summaries; ``ok`` and ``skip`` findings are folded into
    their area (every finding, its explanation and evidence with
    ``verbose``); the last lines are the numbered next steps.
    """
    plain = is_plain(console)
    lay = layout(report)
    glyph = PLAIN_GLYPHS[lay.verdict] if plain else GLYPHS[lay.verdict]
    if plain and lay.verdict is Status.SKIP:
        glyph = "[n/a]"  # nothing was judged: not a skipped finding
    head = Text()
    head.append(f"{glyph} ", style=COLOURS[lay.verdict] + " bold")
    head.append(f"gpudoctor: {verdict_word(lay.verdict).upper()}", style=COLOURS[lay.verdict] + " bold")
    head.append(f" — {redact_text(lay.headline)}")
    console.print(head)
    if lay.targets:
        shown = "; ".join(f"[{label}] {path}" for label, path in lay.targets)
        console.print(Text(f"  {'target' if len(lay.targets) == 1 else 'targets'}: {redact_text(shown)}", style="dim"))
    for area in lay.areas:
        console.print()
        # an area where nothing applied reads "n/a", not like a skipped finding
        glyph = (
            ("[n/a]" if plain else GLYPHS[area.worst])
            if area.worst is Status.SKIP
            else (PLAIN_GLYPHS[area.worst] if plain else GLYPHS[area.worst])
        )
        line = Text()
        line.append(f"{glyph} ", style=COLOURS[area.worst] + " bold")
        line.append(area.title, style="bold")
        line.append(f" ({area_size(area)}): {area.counts_text}")
        console.print(line)
        if verbose:
            for f in area.findings:
                _finding(console, lay, f, plain, verbose, explain=bool(f.explanation))
            continue
        for f in area.attention:
            _finding(console, lay, f, plain, verbose, explain=True, findings=report.findings)
        for f in area.info:
            _finding(console, lay, f, plain, verbose, explain=False)
        if area.skipped:
            reasons = "; ".join(f"{redact_text(g.reason)} ({', '.join(g.checks)})" for g in area.skipped)
            console.print(Text(f"  {area.skip_count} not applicable: {reasons}", style="dim"))
    style = COLOURS[lay.verdict]
    console.print()
    console.print(
        Text(
            f"{plural(lay.total, 'finding')} in {plural(len(lay.areas), 'area')}: {lay.counts_text} "
            f"({report.duration_ms / 1000:.1f} s)",
            style=style + " bold",
        )
    )
    if lay.network is not None:
        console.print(Text(f"network: {redact_text(lay.network)}", style="dim"))
    if lay.next_steps:
        console.print(Text("Next steps:", style="bold"))
        for i, step in enumerate(lay.next_steps, 1):
            lines = redact_text(step.command).splitlines()
            # soft_wrap: a command to copy is never broken by rich (the terminal wraps it)
            tail = f"   # {step.check}" + (f" ({step.note})" if step.note else "")
            console.print(
                Text(f"  {i}. {lines[0]}" + ("" if len(lines) > 1 or not step.is_command else tail)),
                soft_wrap=True,
            )
            for cont in lines[1:]:
                console.print(Text(f"     {cont}"), soft_wrap=True)


class SpinnerProgress(Progress):
    """A rich status spinner listing what is running; silent when not a terminal."""

    def __init__(self, console: Console):
        self._console = console
        self._running: set[str] = set()
        self._lock = threading.Lock()
        self._status = None
        if console.is_terminal:
            self._status = console.status("starting", spinner="dots")

    def __enter__(self) -> SpinnerProgress:
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
