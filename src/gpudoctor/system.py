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
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Protocol

__all__ = [
    "DEFAULT_COMMAND_TIMEOUT_S",
    "Clock",
    "CommandResult",
    "Files",
    "Runner",
    "SubprocessRunner",
    "System",
    "kill_running_commands",
]

#: Default per-command timeout, seconds.
DEFAULT_COMMAND_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class CommandResult:
    """Outcome of one command.

    Attributes:
        argv: the command as run.
        returncode: exit status, or None when it did not run to completion.
        stdout, stderr: decoded output (UTF-8, errors replaced).
        duration_ms: wall time in ms.
        error: None when the command ran; otherwise ``not-found``,
            ``timeout`` or ``os-error: <message>``.
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

    def run(self, argv: Sequence[str], timeout_s: float = DEFAULT_COMMAND_TIMEOUT_S,
            env: Mapping[str, str] | None = None, input_text: str | None = None) -> CommandResult:
        ...


_RUNNING: set[subprocess.Popen] = set()
_RUNNING_LOCK = threading.Lock()


def track_process(proc: subprocess.Popen, running: bool = True) -> None:
    """Add (or, with ``running=False``, remove) a child that :func:`kill_running_commands` must kill on
    Ctrl-C — e.g. a Jupyter kernel started for ``--deep`` (its own session, so SIGINT never reaches it)."""
    with _RUNNING_LOCK:
        if running:
            _RUNNING.add(proc)
        else:
            _RUNNING.discard(proc)


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

    def run(self, argv: Sequence[str], timeout_s: float = DEFAULT_COMMAND_TIMEOUT_S,
            env: Mapping[str, str] | None = None, input_text: str | None = None) -> CommandResult:
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
        with _RUNNING_LOCK:
            _RUNNING.add(proc)
        try:
            out, err = proc.communicate(input=input_text.encode() if input_text is not None else None,
                                        timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            return CommandResult(argv, None, _decode(out), _decode(err), _ms(start), error="timeout")
        except BaseException:
            _kill_group(proc)
            proc.wait()
            raise
        finally:
            with _RUNNING_LOCK:
                _RUNNING.discard(proc)
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


@dataclass(frozen=True)
class Files:
    """Read-only file access through a root directory.

    Paths given to the methods are absolute paths *inside* the root
    (``/etc/pip.conf``); ``host_path`` maps them to the real path. ``..`` cannot
    climb above the root. Symlinks are followed on the host, so an absolute
    link inside an image root points at the host: acceptable for reading
    facts, and the writer (:mod:`gpudoctor.apply`) resolves links inside the root itself.
    """

    root: Path = Path("/")

    def host_path(self, path: str) -> Path:
        """The host path of ``path`` (an absolute path inside the root)."""
        parts: list[str] = []
        for part in PurePosixPath("/", path).parts[1:]:
            if part == "..":
                if parts:
                    parts.pop()
            elif part not in ("", "."):
                parts.append(part)
        return Path(self.root, *parts)

    def exists(self, path: str) -> bool:
        return self.host_path(path).exists()

    def is_file(self, path: str) -> bool:
        return self.host_path(path).is_file()

    def is_dir(self, path: str) -> bool:
        return self.host_path(path).is_dir()

    def read_text(self, path: str) -> str:
        """The file's text (UTF-8, errors replaced). Raises ``OSError`` as open() does."""
        return self.host_path(path).read_bytes().decode("utf-8", errors="replace")

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
        """Paths inside the root matching ``pattern`` under directory ``path``, sorted."""
        base = self.host_path(path)
        for p in sorted(base.glob(pattern)):
            yield str(PurePosixPath(path, p.relative_to(base)))

    def readlink(self, path: str) -> str | None:
        """Target of a symlink (as stored), or None if not a link."""
        try:
            return os.readlink(self.host_path(path))
        except OSError:
            return None

    def realpath(self, path: str) -> str:
        """Resolve symlinks *inside* the root; returns a path inside the root."""
        current = PurePosixPath("/")
        remaining = list(PurePosixPath("/", path).parts[1:])
        hops = 0
        while remaining:
            part = remaining.pop(0)
            if part in ("", "."):
                continue
            if part == "..":
                current = current.parent
                continue
            candidate = current / part
            target = self.readlink(str(candidate))
            if target is None:
                current = candidate
                continue
            hops += 1
            if hops > 40:
                raise OSError(f"too many levels of symbolic links: {path}")
            target_path = PurePosixPath(target)
            if target_path.is_absolute():
                current = PurePosixPath("/")
            remaining = list(target_path.parts[1:] if target_path.is_absolute() else target_path.parts) + remaining
        return str(current)

    @property
    def is_live(self) -> bool:
        """True when the root is the real ``/`` (commands and probes may run)."""
        return Path(self.root).resolve() == Path("/")


@dataclass(frozen=True)
class Clock:
    """Monotonic time in seconds and wall time as an aware UTC datetime."""

    monotonic: Callable[[], float] = time.monotonic
    now: Callable[[], _dt.datetime] = lambda: _dt.datetime.now(_dt.timezone.utc)


@dataclass(frozen=True)
class System:
    """Everything a collector may use to look at the machine.

    Attributes:
        runner: command runner (argv only, timeouts).
        files: file reader rooted at ``--root``.
        env: the environment being diagnosed (normally ``os.environ``).
        clock: time source.
        home: the user's home directory inside the root (``~`` expansion).
    """

    runner: Runner = field(default_factory=SubprocessRunner)
    files: Files = field(default_factory=Files)
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    clock: Clock = field(default_factory=Clock)
    home: str = field(default_factory=lambda: os.path.expanduser("~"))

    @classmethod
    def live(cls, root: str = "/") -> System:
        """The real machine (or an image root at ``root``)."""
        return cls(files=Files(Path(root)))
