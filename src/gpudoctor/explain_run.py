"""The machine side of ``gpudoctor explain``: read logs, run a command, confirm on this machine.

:mod:`gpudoctor.explain` is pure (knowledge base + matcher). This module

- reads a log file or stdin as a stream (:func:`explain_file`, :func:`explain_stream`;
  gzip-compressed logs are read transparently);
- runs a command with an argv list, never a shell (:func:`run_command`): its stdout
  and stderr pass through unchanged, byte for byte, as they arrive, while a copy is
  matched line by line; SIGTERM/SIGHUP sent to gpudoctor are forwarded to it;
- runs the checks that confirm a diagnosis through the engine (:func:`confirm`), on
  the interpreter the failing command used when that can be told from its argv
  (:func:`target_python`).
"""

from __future__ import annotations

import codecs
import gzip
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import field
from typing import IO, Any, BinaryIO

from gpudoctor.explain import (
    MAX_LINE_CHARS,
    Explanation,
    Matcher,
    merge,
    resolve_checks,
)
from gpudoctor.records import frozen_dataclass

__all__ = [
    "EXPLAIN_SCHEMA_VERSION",
    "CommandOutcome",
    "Confirmation",
    "ExplainResult",
    "confirm",
    "exit_status",
    "explain_file",
    "explain_stream",
    "plan_confirmation",
    "run_command",
    "target_python",
]

#: Version of the ``--format json`` document (``schemas/explain.schema.json``).
EXPLAIN_SCHEMA_VERSION = 2
#: Read size for pipes and files, bytes.
CHUNK = 64 * 1024
_PYTHON_NAME = re.compile(r"^python(?:\d+(?:\.\d+)?)?$")


def _encoding(head: bytes) -> str:
    """The encoding of a log from its first bytes: a BOM (UTF-16 LE/BE, UTF-8), else UTF-16 when
    every other byte of ASCII text is NUL (Windows PowerShell's ``>`` writes UTF-16 LE), else UTF-8."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"  # the codec reads the BOM and drops it
    if head.startswith(b"\xef\xbb\xbf"):
        return "utf-8-sig"
    pairs = head[: len(head) // 2 * 2][:64]
    if len(pairs) >= 4:
        # the other bytes must be ASCII: binary junk (b"\x00\xff" * n) is not UTF-16 text
        if all(pairs[i] == 0 for i in range(1, len(pairs), 2)) and all(
            0 < pairs[i] < 0x80 for i in range(0, len(pairs), 2)
        ):
            return "utf-16-le"
        if all(pairs[i] == 0 for i in range(0, len(pairs), 2)) and all(
            0 < pairs[i] < 0x80 for i in range(1, len(pairs), 2)
        ):
            return "utf-16-be"
    return "utf-8"


class _LineSplitter:
    """Bytes in, text lines out (UTF-8, UTF-16 with or without BOM; invalid bytes replaced).

    Memory stays bounded without newlines: of a line longer than :data:`MAX_LINE_CHARS` the
    head and the tail are kept (the middle of a 10 MB line is dropped) and given to the matcher
    as one line, so an error printed at the end of a huge line (a progress bar that never
    wrote a newline) is still read."""

    def __init__(self) -> None:
        self._decoder: codecs.IncrementalDecoder | None = None
        self._pending = b""
        self._buf = ""
        self._head: str | None = None  # the start of an overlong line whose middle was dropped

    def _decode(self, data: bytes, final: bool) -> str:
        if self._decoder is None:
            self._pending += data
            if len(self._pending) < 64 and not final:
                return ""
            self._decoder = codecs.getincrementaldecoder(_encoding(self._pending))(errors="replace")
            data, self._pending = self._pending, b""
        return self._decoder.decode(data, final)

    def _line(self, text: str) -> list[str]:
        if self._head is not None:
            text, self._head = self._head + text, None
        # a line redrawn with carriage returns (progress bars) shows its last state
        text = text.rstrip("\r").rsplit("\r", 1)[-1]
        if len(text) <= MAX_LINE_CHARS:
            return [text]
        half = MAX_LINE_CHARS // 2 - 8
        return [f"{text[:half]} [...] {text[-half:]}"]  # one line still: the line numbers stay right

    def feed(self, data: bytes, final: bool = False) -> list[str]:
        self._buf += self._decode(data, final)
        *lines, self._buf = self._buf.split("\n")
        if len(self._buf) > 4 * MAX_LINE_CHARS:  # no newline yet: a progress bar redrawn with \r, or junk
            cut = self._buf.rfind("\r")
            if cut >= 0:
                self._buf, self._head = self._buf[cut + 1 :], None
            else:
                if self._head is None:
                    self._head = self._buf[: MAX_LINE_CHARS // 2]
                self._buf = self._buf[-MAX_LINE_CHARS:]
        out = [ln for line in lines for ln in self._line(line)]
        if final and (self._buf or self._head is not None):
            out += self._line(self._buf)
            self._buf = ""
        return out


def explain_stream(
    stream: BinaryIO, matcher: Matcher | None = None, on_chunk: Callable[[int], None] | None = None
) -> Explanation:
    """Match a binary stream chunk by chunk (memory: one chunk plus the matcher's window);
    ``on_chunk(n)`` is called with the size in bytes of each chunk read (progress)."""
    matcher = matcher or Matcher()
    splitter = _LineSplitter()
    while True:
        data = stream.read(CHUNK)
        if on_chunk is not None and data:
            on_chunk(len(data))
        for line in splitter.feed(data or b"", final=not data):
            matcher.feed(line)
        if not data:
            break
    return merge([matcher])


def explain_file(path: str, on_chunk: Callable[[int], None] | None = None) -> Explanation:
    """Match a log file (``.gz`` compressed or plain). Raises ``OSError`` when unreadable.
    ``on_chunk``: see :func:`explain_stream` (decompressed bytes for ``.gz``)."""
    with open(path, "rb") as fh:
        magic = fh.peek(2)[:2]  # peek, not read + seek: a pipe (`<(cmd)`, /dev/stdin) cannot seek
        if magic == b"\x1f\x8b":
            with gzip.open(fh) as gz:
                return explain_stream(gz, on_chunk=on_chunk)  # type: ignore[arg-type]
        return explain_stream(fh, on_chunk=on_chunk)


@frozen_dataclass
class CommandOutcome:
    """What running a command produced.

    Attributes:
        argv: the command.
        returncode: its exit status as a shell reports it (128 + N when killed by signal N).
        explanation: the matches in its stdout and stderr.
        signalled: the first of SIGINT/SIGTERM/SIGHUP gpudoctor received and forwarded to the
            command while it ran (None: none): the caller ends with the command's status then,
            without running anything more.
        killed_after_s: set when the command was still running :data:`KILL_GRACE_S` seconds
            after a forwarded signal and gpudoctor killed it (SIGKILL): ``returncode`` is then
            gpudoctor's own kill, not an exit of the command's choosing, and callers say so
            and end with 128 + ``signalled`` instead (None: the command ended by itself).
    """

    argv: tuple[str, ...]
    returncode: int
    explanation: Explanation
    signalled: int | None = None
    killed_after_s: float | None = None


def exit_status(returncode: int) -> int:
    """Popen returncode -> shell exit status (``-9`` -> 137)."""
    return 128 - returncode if returncode < 0 else returncode


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


#: seconds the output of a command that exited is still read (what it wrote just before exiting);
#: after that a background child still holding the pipes is not waited for
DRAIN_GRACE_S = 0.5


def _pump(src: IO[bytes], dst: int | None, matcher: Matcher, stop: threading.Event | None = None) -> None:
    """Copy ``src`` to the file descriptor ``dst`` as it arrives and feed the matcher, until
    end of file, or until ``stop`` is set and nothing more is waiting in the pipe (the command
    exited, but a background child of it still holds the pipe open).

    Written to the descriptor itself, below any Python stream wrapper: the command's
    output is its own and passes unchanged (gpudoctor's redaction applies to gpudoctor's
    output, the explanation)."""
    import select

    splitter = _LineSplitter()
    fd = src.fileno()
    broken = False
    while True:
        if stop is not None:
            try:
                ready, _, _ = select.select([fd], [], [], 0.05)
            except (OSError, ValueError):
                ready = [fd]
            if not ready:
                if stop.is_set():
                    for line in splitter.feed(b"", final=True):
                        matcher.feed(line)
                    break
                continue
        try:
            data = os.read(fd, CHUNK)
        except OSError:
            data = b""
        if data and dst is not None and not broken:
            try:
                _write_all(dst, data)
            except OSError:
                broken = True  # our reader went away: keep draining so the command is not blocked
        for line in splitter.feed(data, final=not data):
            matcher.feed(line)
        if not data:
            break


#: the signals forwarded to the command's process group
FORWARDED = tuple(s for s in (getattr(signal, n, None) for n in ("SIGINT", "SIGTERM", "SIGHUP")) if s is not None)


#: Seconds a command may take to end after a forwarded SIGINT/SIGTERM/SIGHUP before gpudoctor
#: kills its process group (SIGKILL).
KILL_GRACE_S = 10.0


def run_command(
    argv: Sequence[str],
    stdout: int | None = 1,
    stderr: int | None = 2,
    env: dict | None = None,
    *,
    inherit: bool = False,
    on_start: Callable[[subprocess.Popen], None] | None = None,
) -> CommandOutcome:
    """Run ``argv`` (no shell), copying its output to the file descriptors ``stdout`` and
    ``stderr`` (None: discard) unchanged as it arrives and matching it. Returns when the
    command exits: what it wrote until then (and for :data:`DRAIN_GRACE_S` after) is read,
    but background children it left holding the pipes are not waited for.

    ``inherit=True`` (``gpudoctor watch``): the command writes to gpudoctor's own stdout
    and stderr directly (a terminal stays a terminal for it), nothing is copied or
    matched. ``on_start(proc)`` is called once the command has started.

    The command inherits stdin and the environment. It runs in a process group of its own
    (on a terminal: the terminal's, so Ctrl-C and job control reach it directly); SIGINT,
    SIGTERM and SIGHUP that gpudoctor receives are forwarded to that group, and once the
    command has exited, the outcome says so (``signalled``) and the caller ends with the
    command's status. Raises ``OSError`` (e.g. ``FileNotFoundError``) when the command
    cannot be started.
    """
    own_group = not _stdin_is_a_terminal()
    # a group of its own (Python >= 3.11: process_group; before: setpgid in the child)
    group: dict[str, Any] = {}
    if own_group:
        group = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": lambda: os.setpgid(0, 0)}
    capture = None if inherit else subprocess.PIPE
    received: list[int] = []
    started: list[subprocess.Popen] = []

    def send(signum: int) -> None:
        try:
            if own_group:
                os.killpg(started[0].pid, signum)
            elif signum != signal.SIGINT:  # on a terminal Ctrl-C reached the command already
                started[0].send_signal(signum)
        except (ProcessLookupError, PermissionError):
            pass

    def forward(signum: int, _frame: object) -> None:
        received.append(signum)
        if started:  # before the command exists: sent to it as soon as it does
            send(signum)

    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in FORWARDED:
            try:
                previous[sig] = signal.signal(sig, forward)
            except (OSError, ValueError):  # pragma: no cover
                pass
    try:
        proc = subprocess.Popen(list(argv), stdout=capture, stderr=capture, env=env, **group)
    except BaseException:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        raise
    started.append(proc)
    for signum in received:
        send(signum)
    if on_start is not None:
        on_start(proc)
    matchers = (Matcher(stream="stdout"), Matcher(stream="stderr"))
    stop = threading.Event()
    threads = (
        []
        if inherit
        else [
            threading.Thread(target=_pump, args=(proc.stdout, stdout, matchers[0], stop), daemon=True),
            threading.Thread(target=_pump, args=(proc.stderr, stderr, matchers[1], stop), daemon=True),
        ]
    )
    for t in threads:
        t.start()
    killed = False
    deadline: float | None = None
    try:
        while True:
            try:
                # short waits: a signal handled while waiting must start the grace period
                proc.wait(timeout=0.25)
                break
            except subprocess.TimeoutExpired:
                if received and deadline is None:
                    deadline = time.monotonic() + KILL_GRACE_S
                if deadline is not None and time.monotonic() >= deadline and not killed:
                    killed = True  # forwarded, and still running KILL_GRACE_S later
                    try:
                        os.killpg(proc.pid, signal.SIGKILL) if own_group else proc.kill()
                    except (ProcessLookupError, PermissionError):
                        pass
            except KeyboardInterrupt:  # a handler that was not ours (no main thread forward)
                received.append(signal.SIGINT)
        for t in threads:
            t.join(DRAIN_GRACE_S)
        stop.set()
        for t in threads:
            t.join(1.0)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if all(not t.is_alive() for t in threads):
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
    return CommandOutcome(
        tuple(argv),
        exit_status(proc.returncode),
        merge(matchers),
        received[0] if received else None,
        KILL_GRACE_S if killed else None,
    )


def _stdin_is_a_terminal() -> bool:
    try:
        return os.isatty(0)
    except OSError:
        return False


def target_python(argv: Sequence[str]) -> str | None:
    """The Python interpreter a command runs under, when its argv tells.

    ``python3 train.py`` and ``/venv/bin/python -m x`` name it directly; console scripts
    (``torchrun``, ``accelerate``) name it in their ``#!`` line. Returns an absolute path,
    or None (not a Python command, or not found on PATH).
    """
    if not argv:
        return None
    exe = shutil.which(argv[0])
    if exe is None:
        return None
    if _PYTHON_NAME.match(os.path.basename(argv[0])):
        return os.path.abspath(exe)
    try:
        with open(exe, "rb") as fh:
            first = fh.readline(256)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    parts = first[2:].decode("utf-8", "replace").split()
    if not parts:
        return None
    if os.path.basename(parts[0]) == "env" and len(parts) > 1:
        parts = [p for p in parts[1:] if not p.startswith("-")]
        found = shutil.which(parts[0]) if parts else None
        return os.path.abspath(found) if found and _PYTHON_NAME.match(os.path.basename(found)) else None
    if _PYTHON_NAME.match(os.path.basename(parts[0])) and os.path.exists(parts[0]):
        return parts[0]
    return None


@frozen_dataclass
class Confirmation:
    """The confirming checks' result.

    Attributes:
        report: the engine's report (None when no check was run: ``--no-check``, or none installed).
        check_ids: the installed checks that confirm the diagnosis (run when ``report`` is set).
        unresolved: references in the knowledge base that name no installed check.
    """

    report: object | None
    check_ids: tuple[str, ...] = ()
    unresolved: tuple[str, ...] = field(default_factory=tuple)


def plan_confirmation(explanation: Explanation, registry) -> Confirmation:
    """The confirming checks that are installed, without running them (``--no-check``)."""
    ids, unresolved = resolve_checks(explanation.check_refs, registry.checks)
    return Confirmation(None, tuple(ids), tuple(unresolved))


def confirm(explanation: Explanation, registry, system, options, progress=None) -> Confirmation:
    """Run the checks the matched signatures name, on this machine, through the engine.

    ``registry`` is :func:`gpudoctor.registry.load_registry`'s result; ``system`` and
    ``options`` as for :func:`gpudoctor.engine.run`. References that name no installed
    check are dropped (listed in :attr:`Confirmation.unresolved`).
    """
    from gpudoctor import engine

    ids, unresolved = resolve_checks(explanation.check_refs, registry.checks)
    if not ids:
        return Confirmation(None, (), tuple(unresolved))
    if not any(cid.startswith("jupyter.") for cid in ids) and getattr(options, "kernels", False):
        from dataclasses import replace

        options = replace(options, kernels=False)  # the failing process is no notebook kernel
    order = {cid: i for i, cid in enumerate(ids)}
    selected = sorted((registry.checks[i] for i in ids), key=lambda c: order[c.id])
    report = engine.run(selected, system, options, progress=progress, extra_findings=registry.problems)
    return Confirmation(report, tuple(ids), tuple(unresolved))


@frozen_dataclass
class ExplainResult:
    """Everything ``gpudoctor explain`` reports.

    Attributes:
        source: what was read: a file path, ``stdin``, or the command line.
        explanation: ranked matches.
        confirmation: the confirming checks (None with ``--no-check`` or nothing to run).
        command: the argv when a command was run, else ().
        command_exit: the command's exit status (None when no command ran).
    """

    source: str
    explanation: Explanation
    confirmation: Confirmation | None = None
    command: tuple[str, ...] = ()
    command_exit: int | None = None

    @property
    def exit_code(self) -> int:
        """The command's status when one ran; else 1 when a diagnosis or a confirming check
        says ``fail``, 0 otherwise (nothing recognised, or only warnings)."""
        if self.command_exit is not None:
            return self.command_exit
        from gpudoctor.model import Status

        statuses = [f.status for f in self.explanation.findings]
        report = self.confirmation.report if self.confirmation else None
        if report is not None:
            statuses += [f.status for f in report.findings]  # type: ignore[attr-defined]
        return 1 if Status.FAIL in statuses else 0

    def to_json(self) -> dict:
        """The ``--format json`` document (secrets redacted), :data:`EXPLAIN_SCHEMA_VERSION`
        (``schemas/explain.schema.json``)."""
        from gpudoctor import __version__
        from gpudoctor.explain import match_finding
        from gpudoctor.redact import redact_value

        diagnosis = []
        for m in self.explanation.matches:
            doc = match_finding(m).to_json()
            doc.update(
                {
                    "signature": m.signature.id,
                    "values": dict(m.values),
                    "line": m.line,
                    "stream": m.stream or None,
                    "occurrences": m.count,
                    "source": m.signature.source,
                    "confirming_checks": list(m.signature.checks),
                }
            )
            diagnosis.append(doc)
        conf = self.confirmation
        report = conf.report if conf else None
        out = {
            "schema_version": EXPLAIN_SCHEMA_VERSION,
            "kind": "explain",
            "gpudoctor_version": __version__,
            "source": self.source,
            "command": list(self.command) or None,
            "command_exit_code": self.command_exit,
            "lines_read": self.explanation.lines_read,
            "matched": bool(self.explanation.matches),
            "diagnosis": diagnosis,
            "checks": report.to_json() if report is not None else None,  # type: ignore[attr-defined]
            "checks_run": list(conf.check_ids) if conf and report is not None else [],
            # whether a confirming check warns or fails here (null: none ran)
            "confirmed_here": (
                any(f.status.value in ("warn", "fail") for f in report.findings)  # type: ignore[attr-defined]
                if report is not None
                else None
            ),
            "confirm_with": list(conf.check_ids) if conf else [],
            "unresolved_checks": list(conf.unresolved) if conf else [],
            "suggestion": None if self.explanation.matches else "gpudoctor check",
        }
        return redact_value(out)
