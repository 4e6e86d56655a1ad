"""The System bundle: the only door collectors have to the machine.

- :class:`Runner` runs argv lists (never a shell) with a timeout each; a
  missing executable or a timeout is an ordinary :class:`CommandResult`.
- :class:`Files` reads paths *inside* a root (``--root DIR``, default ``/``),
  so a container image's root filesystem can be inspected like a live one.
- ``env`` is the process environment to judge (a mapping), ``clock`` gives
  monotonic time and wall time.

Tests replace the runner with :class:`gpudoctor.testing.ScriptedRunner` and the
root with a temporary directory.
"""

from __future__ import annotations

import datetime as _dt
import errno
import os
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import field
from pathlib import Path, PurePosixPath
from typing import Protocol

from gpudoctor.records import frozen_dataclass

__all__ = [
    "CommandResult",
    "Runner",
    "SubprocessRunner",
    "Files",
    "JailIncident",
    "RootEscape",
    "SymlinkLoop",
    "MAX_SYMLINK_HOPS",
    "Clock",
    "System",
    "DEFAULT_COMMAND_TIMEOUT_S",
    "kill_running_commands",
    "track",
    "untrack",
]

#: Default per-command timeout, seconds.
DEFAULT_COMMAND_TIMEOUT_S = 10.0


@frozen_dataclass
class CommandResult:
    """Outcome of one command.

    Attributes:
        argv: the command as run.
        returncode: exit status, or None when it did not run to completion.
        stdout, stderr: decoded output (UTF-8, errors replaced).
        duration_ms: wall time in ms.
        error: None when the command ran; otherwise ``not-found``,
            ``timeout``, ``interrupted`` (not run: see :func:`stop_new_commands`) or
            ``os-error: <message>``.
    """

    argv: tuple
    returncode: int | None
    stdout: str = ""
    stderr: str = ""
    duration_ms: float = 0.0
    error: str | None = None

    @property
    def ok(self) -> bool:
        """It ran and exited 0."""
        return self.error is None and self.returncode == 0

    def describe_failure(self) -> str:
        """One line for an Unavailable reason: why this command gave no answer."""
        name = self.argv[0] if self.argv else "?"
        if self.error == "not-found":
            return f"{name} is not installed (not found on PATH)"
        if self.error == "timeout":
            return f"{name} did not answer within its timeout ({self.duration_ms / 1000:.1f} s) and was killed"
        if self.error == "interrupted":
            return f"{name} was not run: gpudoctor was interrupted"
        if self.error:
            return f"{name} could not be started: {self.error}"
        tail = (self.stderr or self.stdout).strip().splitlines()
        detail = tail[-1] if tail else "no output"
        if self.returncode is not None and self.returncode < 0:
            return f"{name} was killed by {signal_name(-self.returncode)}: {detail}"
        return f"{name} exited with status {self.returncode}: {detail}"


def signal_name(number: int) -> str:
    """``11`` -> ``SIGSEGV`` (``signal 99`` for unknown numbers)."""
    import signal

    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class Runner(Protocol):
    """Runs argv lists. Implementations must never raise for a failed command."""

    def run(
        self,
        argv: Sequence[str],
        timeout_s: float = DEFAULT_COMMAND_TIMEOUT_S,
        env: Mapping[str, str] | None = None,
        input_text: str | None = None,
    ) -> CommandResult: ...


_RUNNING: set[subprocess.Popen] = set()
_RUNNING_LOCK = threading.Lock()
#: set by :func:`stop_new_commands` on Ctrl-C/SIGTERM/SIGHUP: no command may start any more
_STOPPED = threading.Event()


def stop_new_commands(stopped: bool = True) -> None:
    """After an interrupt (``stopped=True``): every command started from now on is killed at once
    and reported as ``error="interrupted"``, so a worker thread still finishing (a probe whose
    process was just killed asks the interpreter its Python version, say) cannot start a process
    that nothing would kill; the CLI then calls :func:`kill_running_commands`. ``main()`` clears it
    (``stopped=False``) when it starts, for callers that run it more than once in a process."""
    with _RUNNING_LOCK:
        if stopped:
            _STOPPED.set()
        else:
            _STOPPED.clear()


def _register(proc: subprocess.Popen) -> bool:
    """Track ``proc`` for :func:`kill_running_commands`; False (and ``proc``'s group killed) after
    :func:`stop_new_commands`."""
    with _RUNNING_LOCK:
        if not _STOPPED.is_set():
            _RUNNING.add(proc)
            return True
    _kill_group(proc)
    return False


def track_process(proc: subprocess.Popen, running: bool = True) -> None:
    """Add (or, with ``running=False``, remove) a child that :func:`kill_running_commands` must kill on
    Ctrl-C — e.g. a Jupyter kernel started for ``--deep`` (its own session, so SIGINT never reaches it)."""
    if running:
        _register(proc)
        return
    with _RUNNING_LOCK:
        _RUNNING.discard(proc)


def track(proc: subprocess.Popen) -> None:
    """Register a child started outside the runner (see :func:`track_process`)."""
    track_process(proc, True)


def untrack(proc: subprocess.Popen) -> None:
    """Forget a child registered with :func:`track`."""
    track_process(proc, False)


def kill_running_commands() -> int:
    """Kill the process group of every command still running (Ctrl-C, exit).

    Commands run in their own session (so a timeout can kill their whole
    group), which also means a Ctrl-C on the terminal does not reach them:
    the CLI calls this on interrupt. Returns how many were killed.
    """
    with _RUNNING_LOCK:
        procs = list(_RUNNING)
    for proc in procs:
        _kill_group(proc)
    for proc in procs:  # reap them, so no zombie is left to an init that may not reap
        try:
            proc.wait(timeout=1.0)
        except Exception:
            pass
    return len(procs)


class SubprocessRunner:
    """The real runner: ``subprocess.Popen`` with a timeout, no shell.

    Each command gets its own session; on timeout (or :func:`kill_running_commands`)
    the whole process group is killed, so a probe that spawned children
    (DataLoader workers, compilers) does not linger.
    """

    def run(
        self,
        argv: Sequence[str],
        timeout_s: float = DEFAULT_COMMAND_TIMEOUT_S,
        env: Mapping[str, str] | None = None,
        input_text: str | None = None,
    ) -> CommandResult:
        argv = tuple(str(a) for a in argv)
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=dict(env) if env is not None else None,
                start_new_session=True,
            )
        except FileNotFoundError:
            return CommandResult(argv, None, duration_ms=_ms(start), error="not-found")
        except OSError as exc:
            return CommandResult(argv, None, duration_ms=_ms(start), error=f"os-error: {exc.strerror or exc}")
        if not _register(proc):  # interrupted: nothing may start any more
            proc.wait()
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
            return CommandResult(argv, None, duration_ms=_ms(start), error="interrupted")
        try:
            return self._finish(proc, argv, input_text, timeout_s, start)
        except BaseException:
            _kill_group(proc)
            proc.wait()
            raise
        finally:
            with _RUNNING_LOCK:
                _RUNNING.discard(proc)

    @staticmethod
    def _finish(
        proc: subprocess.Popen, argv: tuple, input_text: str | None, timeout_s: float, start: float
    ) -> CommandResult:
        """Wait for the command itself (not for its pipes: a grandchild that keeps them open
        must not turn a finished command into a timeout), then collect the output; members
        of its process group still running after it exited are killed."""
        chunks: dict = {"out": [], "err": []}

        def pump(stream, key: str) -> None:
            try:
                while True:
                    data = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
                    if not data:
                        break
                    chunks[key].append(data)
            except (OSError, ValueError):
                pass

        readers = [
            threading.Thread(target=pump, args=(proc.stdout, "out"), daemon=True),
            threading.Thread(target=pump, args=(proc.stderr, "err"), daemon=True),
        ]
        for t in readers:
            t.start()
        if input_text is not None and proc.stdin is not None:

            def feed() -> None:
                try:
                    proc.stdin.write(input_text.encode())
                    proc.stdin.close()
                except (OSError, ValueError):
                    pass

            threading.Thread(target=feed, daemon=True).start()
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            proc.wait()
        for t in readers:  # the pipes drain once every writer is gone
            t.join(0.5)
        if any(t.is_alive() for t in readers):  # a grandchild holds them: it dies with the command
            _kill_group(proc)
            for t in readers:
                t.join(2.0)
        for stream, t in zip((proc.stdout, proc.stderr), readers):
            if not t.is_alive():
                stream.close()
        out, err = b"".join(chunks["out"]), b"".join(chunks["err"])
        if timed_out:
            return CommandResult(argv, None, _decode(out), _decode(err), _ms(start), error="timeout")
        return CommandResult(argv, proc.returncode, _decode(out), _decode(err), _ms(start))


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, 9)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except ProcessLookupError:
            pass


def _ms(start: float) -> float:
    return (time.monotonic() - start) * 1000.0


def _decode(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")


#: Symlinks followed while resolving one path before it counts as a loop (Linux's
#: MAXSYMLINKS is 40, path_resolution(7)).
MAX_SYMLINK_HOPS = 40


class SymlinkLoop(OSError):
    """A path under ``--root`` resolves through more than :data:`MAX_SYMLINK_HOPS`
    symbolic links (a loop). ``errno`` is ``ELOOP``."""


class RootEscape(OSError):
    """A path under ``--root`` still resolves to a host file outside the root (a
    link swapped while it was read, a directory that resolves elsewhere): it is
    not followed."""


@frozen_dataclass
class JailIncident:
    """A symlink under ``--root`` the jail had to rein in, for the report.

    Attributes:
        path: the path that was read (inside the root).
        link: the symlink concerned (inside the root).
        target: the link's stored target.
        kind: ``climbs-above-root`` (a relative target whose ``..`` climbs above the
            root: resolved inside it, as chroot(2) does), ``escape`` (still resolves
            outside the root: not followed) or ``loop`` (too many links: not followed).
    """

    path: str
    link: str
    target: str
    kind: str


@frozen_dataclass
class Files:
    """Read-only file access through a root directory, which is a jail.

    Paths given to the methods are absolute paths *inside* the root
    (``/etc/pip.conf``); ``host_path`` maps them to the real path. Under a root
    other than ``/`` every symlink on the way is resolved *inside* the root, as
    chroot(2) would: an absolute target is re-rooted (``/etc/x -> /home/u/.ssh``
    reads ``ROOT/home/u/.ssh``) and ``..`` never climbs above the root. A path that
    still resolves outside the root raises :class:`RootEscape` and is not followed;
    more than :data:`MAX_SYMLINK_HOPS` links raises :class:`SymlinkLoop`. Both are
    ``OSError`` (``read_text_or_none`` gives None) and are recorded in
    ``incidents``, which the engine reports as the ``root.symlinks`` finding.
    """

    root: Path = Path("/")
    incidents: list[JailIncident] = field(default_factory=list, compare=False, repr=False)

    def __post_init__(self) -> None:
        real = os.path.realpath(self.root)
        object.__setattr__(self, "_real_root", real)
        object.__setattr__(self, "_live", real == "/")

    def _parts(self, path: str) -> list[str]:
        return [p for p in PurePosixPath("/", str(path)).parts[1:] if p not in ("", ".")]

    def _note(self, incident: JailIncident) -> None:
        if incident not in self.incidents and len(self.incidents) < 1000:
            self.incidents.append(incident)

    def _resolve(self, path: str, follow_last: bool = True) -> list[str]:
        """Parts of ``path`` with every symlink resolved inside the root (see the class)."""
        current: list[str] = []
        remaining = self._parts(path)
        hops = 0
        while remaining:
            part = remaining.pop(0)
            if part == "..":
                if current:
                    current.pop()
                continue
            candidate = current + [part]
            if not remaining and not follow_last:
                current = candidate
                break
            try:
                target = os.readlink(Path(self.root, *candidate))
            except OSError:  # not a link, or missing: taken literally
                current = candidate
                continue
            hops += 1
            link = "/" + "/".join(candidate)
            if hops > MAX_SYMLINK_HOPS:
                self._note(JailIncident(str(path), link, target, "loop"))
                raise SymlinkLoop(
                    errno.ELOOP,
                    f"too many levels of symbolic links under --root (a symlink loop through {link} -> {target})",
                    str(path),
                )
            tparts = [p for p in PurePosixPath(target).parts if p not in ("/", "", ".")]
            if not target.startswith("/"):
                depth = len(current)
                for p in tparts:
                    depth = depth - 1 if p == ".." else depth + 1
                    if depth < 0:
                        self._note(JailIncident(str(path), link, target, "climbs-above-root"))
                        break
            else:
                current = []
            remaining = tparts + remaining
        return current

    def host_path(self, path: str) -> Path:
        """The host path of ``path`` (an absolute path inside the root), symlinks resolved
        inside the root. Raises :class:`SymlinkLoop` or :class:`RootEscape` (``OSError``)."""
        if self.is_live:
            return Path("/", *self._lexical(path))
        parts = self._resolve(path)
        host = Path(self.root, *parts)
        real_root = self._real_root
        real = os.path.realpath(host)
        if real != real_root and not real.startswith(real_root.rstrip("/") + "/"):
            self._note(JailIncident(str(path), "/" + "/".join(parts), real, "escape"))
            raise RootEscape(
                errno.EXDEV, f"{path} resolves to {real}, outside --root {self.root}: not followed", str(path)
            )
        return host

    def _lexical(self, path: str) -> list[str]:
        parts: list[str] = []
        for part in self._parts(path):
            if part == "..":
                if parts:
                    parts.pop()
            else:
                parts.append(part)
        return parts

    def _safe(self, fn: Callable[[Path], bool], path: str) -> bool:
        try:
            return fn(self.host_path(path))
        except OSError:
            return False

    def exists(self, path: str) -> bool:
        """True when ``path`` exists inside the root (False for loops and escapes)."""
        return self._safe(Path.exists, path)

    def is_file(self, path: str) -> bool:
        """True when ``path`` is a regular file inside the root (links resolved in the root)."""
        return self._safe(Path.is_file, path)

    def is_dir(self, path: str) -> bool:
        """True when ``path`` is a directory inside the root (links resolved in the root)."""
        return self._safe(Path.is_dir, path)

    def read_bytes(self, path: str, tail: int | None = None, limit: int | None = None) -> bytes:
        """The file's bytes (only its last ``tail`` bytes when given: a log file; at most ``limit`` + 1
        bytes when given, so a caller can refuse a file over its limit without reading all of it).
        Raises ``OSError`` as open() does, and :class:`SymlinkLoop` /
        :class:`RootEscape`. Under a root the last component is opened with
        ``O_NOFOLLOW``, so a link swapped in after resolution is not followed."""
        host = self.host_path(path)
        flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
        if not self.is_live:
            flags |= getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(host, flags)  # O_NONBLOCK: a FIFO planted where a config file belongs cannot hang us
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                self._note(JailIncident(str(path), str(path), "(changed while read)", "escape"))
                raise RootEscape(
                    errno.EXDEV, f"{path} became a symlink while it was read: not followed", str(path)
                ) from None
            raise
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, "not a regular file (a pipe, socket or device)", str(path))
            os.set_blocking(fd, True)
            size = os.fstat(fd).st_size
            if tail is not None and size > tail:
                fh.seek(size - tail)
            return fh.read() if limit is None else fh.read(limit + 1)

    def read_text(self, path: str) -> str:
        """The file's text (UTF-8, errors replaced). Raises ``OSError`` as open() does."""
        return self.read_bytes(path).decode("utf-8", errors="replace")

    def read_text_or_none(self, path: str) -> str | None:
        """The file's text, or None when it does not exist or cannot be read."""
        try:
            return self.read_text(path)
        except OSError:
            return None

    def listdir(self, path: str) -> list[str]:
        """Sorted entry names. Raises ``OSError`` as ``os.listdir`` does."""
        return sorted(os.listdir(self.host_path(path)))

    def glob(self, path: str, pattern: str) -> Iterator[str]:
        """Paths inside the root matching ``pattern`` under directory ``path``, sorted
        (none when ``path`` loops or escapes)."""
        try:
            base = self.host_path(path)
        except OSError:
            return
        for p in sorted(base.glob(pattern)):
            yield str(PurePosixPath(path, p.relative_to(base)))

    def readlink(self, path: str) -> str | None:
        """Target of a symlink (as stored), or None if not a link."""
        try:
            if self.is_live:
                return os.readlink(Path("/", *self._lexical(path)))
            return os.readlink(Path(self.root, *self._resolve(path, follow_last=False)))
        except OSError:
            return None

    def realpath(self, path: str) -> str:
        """Resolve symlinks *inside* the root; returns a path inside the root.
        Raises :class:`SymlinkLoop` on a loop."""
        return "/" + "/".join(self._resolve(path))

    @property
    def is_live(self) -> bool:
        """True when the root is the real ``/`` (commands and probes may run)."""
        return self._live


@frozen_dataclass
class Clock:
    """Monotonic time in seconds and wall time as an aware UTC datetime."""

    monotonic: Callable[[], float] = time.monotonic
    now: Callable[[], _dt.datetime] = lambda: _dt.datetime.now(_dt.timezone.utc)


@frozen_dataclass
class System:
    """Everything a collector may use to look at the machine.

    Attributes:
        runner: command runner (argv only, timeouts).
        files: file reader rooted at ``--root``.
        env: the environment being diagnosed (normally ``os.environ``).
        clock: time source.
        home: the user's home directory inside the root (``~`` expansion).
        host_commands: whether ``runner`` speaks for the machine whose files these are (its
            kernel log, ``nvidia-smi``, ``lspci``): None means "when the root is ``/``"; a
            replay of a recorded machine (a fake root with scripted commands) sets True.
    """

    runner: Runner = field(default_factory=SubprocessRunner)
    files: Files = field(default_factory=Files)
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    clock: Clock = field(default_factory=Clock)
    home: str = field(default_factory=lambda: os.path.expanduser("~"))
    host_commands: bool | None = None

    @property
    def commands_live(self) -> bool:
        """True when host commands (journalctl, nvidia-smi, lspci) describe the machine under the root."""
        return self.files.is_live if self.host_commands is None else self.host_commands

    @classmethod
    def live(cls, root: str = "/") -> System:
        """The real machine (or an image root at ``root``)."""
        return cls(files=Files(Path(root)))
