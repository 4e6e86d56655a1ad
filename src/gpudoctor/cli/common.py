"""The ``gpudoctor`` click group, the helpers every command shares, and the console-script entry point.

Commands live one per module in this package (:mod:`gpudoctor.cli.check`,
:mod:`gpudoctor.cli.fix`, ...) and import what they share from here; they
are added to :data:`cli` in one place, :mod:`gpudoctor.cli` (the package
``__init__``). This module imports no command module.

Exit codes (DESIGN.md): 0 nothing failed (warnings allowed), 1 something
failed (or warned, with ``--strict``), 2 usage error, 3 internal error (a bug
in gpudoctor; the traceback goes to a crash log), 4 unknown (nothing was judged:
every check skipped), 130 interrupted.
"""

from __future__ import annotations

import errno
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import click

from gpudoctor import __version__
from gpudoctor.config import FiniteFloatRange


def _process_started() -> float:
    """``time.monotonic()`` of this process's start (Linux: ``/proc/self/stat`` start time vs
    ``/proc/uptime``, so interpreter start-up counts too); the import time of this module elsewhere."""
    now = time.monotonic()
    try:
        with open("/proc/self/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        start_ticks = int(fields[19])  # field 22 of proc(5): starttime, in clock ticks after boot
        with open("/proc/uptime", encoding="ascii") as fh:
            uptime = float(fh.read().split()[0])
        age = uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return now
    return now - age if 0.0 <= age < 60.0 else now


#: ``time.monotonic()`` when this process started, set by :func:`main` (None when the commands are
#: invoked in-process, e.g. by click's test runner).
_PROCESS_STARTED: float | None = None


def command_started() -> float:
    """When this gpudoctor command started (``time.monotonic()``): the process start when run as
    ``gpudoctor`` (interpreter start-up included), else now. Time budgets count from here."""
    return _PROCESS_STARTED if _PROCESS_STARTED is not None else time.monotonic()


EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
#: nothing was judged (every check skipped, an empty or foreign snapshot): "unknown", never OK
EXIT_UNKNOWN = 4
#: the reader of our output went away (``| head``): 128 + SIGPIPE, as a shell reports a tool killed by it
EXIT_BROKEN_PIPE = 141
#: errors writing our own output that are the environment's, not a bug
_OUTPUT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.EFBIG}

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class GpudoctorGroup(click.Group):
    """Lists commands in the order they were registered (check first), not alphabetically.

    Commands registered with :meth:`add_lazy` (name -> ``module:attribute``) are
    imported on first use, so ``gpudoctor gate`` does not pay for importing every
    other command (issue 14)."""

    lazy_commands: dict = {}

    def add_lazy(self, name: str, target: str) -> None:
        """Register command ``name``, defined at ``target`` (``package.module:attribute``)."""
        self.lazy_commands = {**self.lazy_commands, name: target}

    def _load(self, name: str) -> None:
        if name not in self.commands and name in self.lazy_commands:
            import importlib

            module, _sep, attr = self.lazy_commands[name].partition(":")
            self.add_command(getattr(importlib.import_module(module), attr), name)

    def get_command(self, ctx: click.Context, cmd_name: str):
        self._load(cmd_name)
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        for name in self.lazy_commands:
            self._load(name)
        order = list(self.lazy_commands)
        return order + [c for c in self.commands if c not in order]

    def invoke(self, ctx: click.Context):
        # click turns EPIPE into exit 1 ("a check failed" for us); handle it before click sees it
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            _broken_pipe()


@click.group(cls=GpudoctorGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, "-V", "--version", prog_name="gpudoctor")
def cli() -> None:
    """Diagnose GPU deep-learning machines, containers and notebooks.

    \b
    Examples:
      gpudoctor check                    # everything; also probes the package indexes already
                                         # configured (pip, uv, conda, apt): --offline for none
      gpudoctor check cuda dataloader    # only checks whose id starts with these
      gpudoctor check --format json      # for machines
      gpudoctor facts -o f.json          # snapshot; replay: gpudoctor check --facts f.json
      gpudoctor list                     # every check and fix, with its provider
    """


# --------------------------------------------------------------------------- helpers


#: Where :class:`CommandAfterDashes` leaves the command after ``--`` (``ctx.meta``).
COMMAND_KEY = "gpudoctor.command"


class CommandAfterDashes(click.Command):
    """Takes everything after the first ``--`` as the command to run, before click parses
    (``explain -- CMD``, ``watch -- CMD``): ``ctx.meta[COMMAND_KEY]``, absent without ``--``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            i = args.index("--")
            ctx.meta[COMMAND_KEY] = list(args[i + 1 :])
            args = args[:i]
        return super().parse_args(ctx, args)


def usage(message: str) -> click.UsageError:
    """The error for bad input: one line, exit 2 (raise it)."""
    return click.UsageError(message)


def given(name: str) -> bool:
    """Whether the current command's parameter ``name`` was set by the user (command line or
    environment), not left at its default."""
    from click.core import ParameterSource

    ctx = click.get_current_context(silent=True)
    source = ctx.get_parameter_source(name) if ctx is not None else None
    return source in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)


def refuse_conflicts(*conflicts) -> None:
    """Usage error (exit 2) for the first pair of options given together that contradict each other.

    Each conflict is ``(option_a, option_b, both_given, why)``; the message names
    both options and why, e.g. ``--offline and --rank-mirrors contradict each
    other: ranking probes the catalogue's mirrors over the network``.
    """
    for a, b, both, why in conflicts:
        if both:
            raise usage(f"{a} and {b} contradict each other: {why}")


def load_registry():
    """Every installed check and fix (:func:`gpudoctor.registry.load_registry`)."""
    from gpudoctor.registry import load_registry

    return load_registry()


def build_system(root: str, dockerfile=None):
    """The :class:`~gpudoctor.system.System` rooted at ``--root``; usage error when it is not a directory.

    ``/`` is the live machine. An image root is the world of its own: its home
    and environment come from the image (``gpudoctor.imageenv``: the
    Dockerfile's ENV/USER given with ``--dockerfile``, its /etc/passwd, /root),
    never from the caller.
    """
    from gpudoctor.system import Files, System

    root_path = Path(root)
    if not root_path.is_dir():
        raise usage(f"--root {root}: not a directory")
    if root_path.resolve() == Path("/"):
        return System.live(str(root_path))
    if not any((root_path / p).exists() for p in ("etc/os-release", "usr/lib/os-release", "etc", "usr")):
        click.echo(f"gpudoctor: warning: --root {root} has no etc/ or usr/: is it a root filesystem?", err=True)
    from gpudoctor.imageenv import image_environment

    files = Files(root_path)
    env, home = image_environment(files, dockerfile)
    return System(files=files, env=env, home=home)


def check_pythons(pythons: Sequence[str]) -> None:
    """Usage error unless every ``--python`` names an executable file (or a command on PATH)."""
    import shutil

    for p in pythons:
        if os.sep in p:
            if not os.path.exists(p):
                raise usage(f"--python {p}: no such file")
            if os.path.isdir(p):
                raise usage(f"--python {p}: is a directory; give the interpreter, e.g. {p.rstrip('/')}/bin/python")
            if not os.access(p, os.X_OK):
                raise usage(f"--python {p}: not executable")
        elif shutil.which(p) is None:
            raise usage(f"--python {p}: not found on PATH")


def _other_gpudoctor_document(doc: object) -> str | None:
    """What another gpudoctor JSON document given to ``--facts`` is (a report,
    an explanation, a gate status, a fix outcome), by its keys; None otherwise.
    A report carries ``schema_version`` 1 like old snapshots, but no ``domains``,
    so without this it replayed as a snapshot with no facts: every check "not
    applicable" and exit 0."""
    if not isinstance(doc, dict) or "domains" in doc:
        return None
    if doc.get("kind") == "explain" or "diagnosis" in doc:
        return "a `gpudoctor explain --format json` document"
    if "findings" in doc and "counts" in doc:
        return "a `gpudoctor check --format json` report"
    if "healthy" in doc and "checks" in doc:
        return "a `gpudoctor gate` status document"
    if "fixes" in doc or "offered" in doc:
        return "a `gpudoctor fix --format json` document"
    return None


def read_facts(path: str):
    """The :class:`~gpudoctor.facts.Facts` snapshot in ``path`` (``-``: stdin); usage error when unreadable."""
    from gpudoctor.facts import Facts, FactsDecodeError
    from gpudoctor.inputs import InputError, loads_json, read_user_file

    try:
        doc = loads_json(read_user_file(path), path)
    except InputError as exc:
        raise usage(f"--facts {exc}") from None
    other = _other_gpudoctor_document(doc)
    if other:
        raise usage(f"--facts {path}: {other}, not a facts snapshot; write one with `gpudoctor facts -o FILE`")
    try:
        return Facts.from_json(doc)
    except FactsDecodeError as exc:
        raise usage(f"--facts {path}: not a gpudoctor facts snapshot: {exc}") from None
    except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as exc:
        raise usage(f"--facts {path}: not a gpudoctor facts snapshot ({type(exc).__name__}: {exc})") from None


def complete_check_ids(ctx, param, incomplete: str):
    """Shell completion for check ids and their family prefixes (``cuda``, ``cuda.driver``, ...)."""
    return _complete_ids(incomplete, fixes=False)


def complete_fix_ids(ctx, param, incomplete: str):
    """Shell completion for fix ids (``pip.index-url``, ...)."""
    return _complete_ids(incomplete, fixes=True)


def _complete_ids(incomplete: str, fixes: bool):
    from click.shell_completion import CompletionItem

    try:
        registry = load_registry()
    except Exception:  # completion must never print a traceback into the shell
        return []
    ids = list(registry.fixes if fixes else registry.checks)
    words = ids if fixes else [*sorted({i.split(".", 1)[0] for i in ids}), *ids]
    return [CompletionItem(w) for w in dict.fromkeys(words) if w.startswith(incomplete)]


def check_output_path(flag: str, path: str | None, atomic: bool = False, dash: str | None = "stdout") -> None:
    """Usage error now, before anything is collected or run, when ``path`` (an
    ``-o``/``--status-file`` value; empty or ``-``: stdout) cannot be written: it
    is a directory, its directory does not exist or is not one, or it (or,
    for a new file or an ``atomic`` write through a temporary file beside it,
    its directory) is not writable. Without this a bad path surfaced only at
    the end, after the collection (or the whole ``explain -- CMD`` run), and
    the result was lost. ``dash``: where ``FLAG -`` writes (the hint given for a path that is
    not a regular file), None when ``-`` means nothing special for this flag."""
    if not path or path == "-":
        return
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    from gpudoctor.output import refusal

    why = refusal(path)
    if why:
        hint = f"; `{flag} -` writes to {dash}" if dash and flag == "-o" else ""
        raise usage(f"{flag} {path}: {why}{hint}")
    if not parent.exists():
        raise usage(f"{flag} {path}: its directory {parent} does not exist")
    if not parent.is_dir():
        raise usage(f"{flag} {path}: {parent} is not a directory")
    if target.exists() and not os.access(target, os.W_OK):
        raise usage(f"{flag} {path}: not writable (permission denied)")
    if (atomic or not target.exists()) and not os.access(parent, os.W_OK | os.X_OK):
        raise usage(f"{flag} {path}: cannot create a file in {parent} (permission denied)")


def refuse_output_over_input(flag: str, output: str | None, *inputs: str | None) -> None:
    """Usage error when the output file ``output`` is one of the ``inputs`` (the same file,
    through any path or link): writing the result would destroy what was read."""
    if not output or output == "-" or not os.path.exists(output):
        return
    for path in inputs:
        if path and path != "-" and os.path.exists(path) and os.path.samefile(output, path):
            raise usage(f"{flag} {output}: is the input file {path}; writing there would replace it")


def write_output(text: str, out: str | None) -> None:
    """Write ``text`` to the file ``out`` (``-o``), or to stdout when ``out`` is empty or ``-``."""
    if out and out != "-":
        from gpudoctor.output import write_text

        try:
            write_text(out, text)
        except OSError as exc:
            raise usage(f"-o {out}: {exc.strerror or exc}") from None
    else:
        click.echo(text, nl=False)


#: check families whose checks read the probed targets (the early probe is worth starting for them)
TARGET_FAMILIES = ("cuda", "cudnn", "torch", "jupyter")


def may_need_targets(ids: Sequence[str]) -> bool:
    """Whether the selection probably probes target interpreters (all checks, or a torch-side family)."""
    return not ids or any(i.split(".", 1)[0] in TARGET_FAMILIES for i in ids)


def common_collect_options(fn):
    """Options shared by ``check``, ``facts`` and other commands that collect."""
    fn = click.option(
        "--root",
        default="/",
        show_default=True,
        metavar="DIR",
        help="Inspect the filesystem under DIR (a container image root or chroot).",
    )(fn)
    from gpudoctor.probe import MIN_PYTHON

    fn = click.option(
        "--python",
        "pythons",
        multiple=True,
        metavar="PATH",
        help=f"Probe this interpreter (Python {'.'.join(map(str, MIN_PYTHON))} or newer) instead of "
        "the current one (repeatable).",
    )(fn)
    fn = click.option(
        "--offline",
        is_flag=True,
        help="Never use the network (without it, the package indexes already configured are probed).",
    )(fn)
    fn = click.option(
        "--probe-timeout",
        default=60.0,
        show_default=True,
        metavar="SECONDS",
        type=FiniteFloatRange(min=1),
        help="Timeout for each target interpreter's probe.",
    )(fn)
    return fn


def make_collect_options(pythons, offline, probe_timeout, **extra):
    """:class:`~gpudoctor.collect.CollectOptions` from the :func:`common_collect_options` values."""
    from gpudoctor.collect import CollectOptions

    return CollectOptions(
        pythons=tuple(dict.fromkeys(pythons)), offline=offline, probe_timeout_s=probe_timeout, extra=extra
    )


# --------------------------------------------------------------------------- entry point


def _interrupted(exc: BaseException | None = None) -> None:
    """Ctrl-C, SIGTERM or SIGHUP: kill the commands we started (they run in their own
    sessions, so the terminal's signal does not reach them), so the threads waiting on
    them end too; exit 128 + the signal (130, 143, 129)."""
    import signal

    from gpudoctor import signals
    from gpudoctor.system import kill_running_commands, stop_new_commands

    previous = {s: signal.signal(s, signal.SIG_IGN) for s in signals.HANDLED}  # no second signal mid clean-up
    code = signals.exit_code(exc)
    try:
        stop_new_commands()  # a worker thread still finishing must not start another probe
        kill_running_commands()
        name = {130: "interrupted", 143: "terminated (SIGTERM)", 129: "hung up (SIGHUP)"}.get(code, "interrupted")
        try:
            click.echo(f"\ngpudoctor: {name}", err=True)
        except OSError:  # the terminal that hung up may be gone
            pass
    finally:
        # in-process callers get their own handlers back, the console script its own
        for s, h in (_RESTORE_SIGNALS or previous).items():
            signal.signal(s, h)
    sys.exit(code)


def _broken_pipe() -> None:
    """The reader of stdout went away: stop quietly with 141 (128 + SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush cannot fail again
    except OSError:
        pass
    sys.exit(EXIT_BROKEN_PIPE)


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point; maps outcomes to exit codes (never a traceback).

    Every byte written to stdout and stderr goes through the redaction function
    (:func:`gpudoctor.redact.guard_streams`); SIGTERM and SIGHUP end it like Ctrl-C.
    Called in-process (``argv`` given: tests, a program embedding gpudoctor), the
    caller's signal handlers are put back however it ends."""
    import signal

    from gpudoctor import signals

    global _RESTORE_SIGNALS
    if argv is None:
        _RESTORE_SIGNALS = None
        _main(argv)
        return
    _RESTORE_SIGNALS = {s: signal.getsignal(s) for s in signals.HANDLED}
    try:
        _main(argv)
    finally:
        from gpudoctor.system import stop_new_commands

        stop_new_commands(False)  # an interrupted run stops commands until it ends, not the caller's later ones
        for s, h in _RESTORE_SIGNALS.items():
            try:
                signal.signal(s, h)
            except (OSError, ValueError, TypeError):
                pass


def _main(argv: Sequence[str] | None) -> None:
    """The body of :func:`main`."""
    from gpudoctor import signals
    from gpudoctor.redact import guard_streams
    from gpudoctor.system import stop_new_commands

    guard_streams()
    signals.install()
    stop_new_commands(False)
    global _PROCESS_STARTED
    _PROCESS_STARTED = _process_started()
    try:
        _check_environment()
        rv = cli.main(args=list(argv) if argv is not None else None, prog_name="gpudoctor", standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt) as exc:
        _interrupted(exc)
    except click.exceptions.NoArgsIsHelpError as exc:  # pragma: no cover - click >= 8.2
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        sys.exit(EXIT_OK)
    except click.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
        click.echo(f"gpudoctor: error: {exc.format_message().rstrip('.')}{hint}", err=True)
        sys.exit(EXIT_USAGE)
    except click.ClickException as exc:
        click.echo(f"gpudoctor: error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code if exc.exit_code not in (0, 1) else EXIT_USAGE)
    except SystemExit:
        _finish_quietly()  # commands end with sys.exit(code): the same quiet end as a return
        raise
    except BrokenPipeError:
        _broken_pipe()
    except OSError as exc:
        if exc.errno not in _OUTPUT_ERRNOS:
            _internal_error(exc)
        where = f" {exc.filename}" if exc.filename else " the output"
        click.echo(f"gpudoctor: error: cannot write{where}: {exc.strerror}", err=True)
        sys.exit(EXIT_USAGE)
    except Exception as exc:  # a bug in gpudoctor: one line, traceback to a log
        _internal_error(exc)
    _finish_quietly()
    sys.exit(rv if isinstance(rv, int) else EXIT_OK)


#: handlers to put back when :func:`main` was called in-process (``argv`` given); None for
#: the console script's own process
_RESTORE_SIGNALS: dict | None = None


def _check_environment() -> None:
    """Usage error (exit 2) for a ``GPUDOCTOR_*`` variable gpudoctor reads directly (not through an
    option) whose value is not valid, before anything runs."""
    from gpudoctor.inputs import check_timeout_from_env, collect_timeout_scale_from_env

    try:
        check_timeout_from_env()
        collect_timeout_scale_from_env()
    except ValueError as exc:
        raise usage(str(exc)) from None
    loopback = os.environ.get("GPUDOCTOR_LOOPBACK_ONLY", "")
    if loopback not in ("", "0", "1"):
        raise usage(f"GPUDOCTOR_LOOPBACK_ONLY={loopback!r}: must be 1 (loopback hosts only) or 0")


def _finish_quietly() -> None:
    """The work is done and written: flush the output, then ignore SIGTERM/SIGHUP/SIGINT for the
    last moments of interpreter shutdown (Python resets its own handlers to the default there, so
    a late signal would otherwise kill a finished run with -15 instead of its exit code).

    When :func:`main` was called in-process, the caller's handlers are restored instead: an
    ignored SIGTERM would outlive the call and be inherited by every process it starts later."""
    import signal

    from gpudoctor import signals

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    for s in signals.HANDLED:
        try:
            if _RESTORE_SIGNALS is not None:
                signal.signal(s, _RESTORE_SIGNALS[s])
            else:
                signal.signal(s, signal.SIG_IGN)
        except (OSError, ValueError, KeyError, TypeError):
            pass


def _internal_error(exc: BaseException) -> None:
    import tempfile
    import traceback

    from gpudoctor.redact import redact_text

    fd, log = tempfile.mkstemp(prefix="gpudoctor-crash-", suffix=".log")
    with os.fdopen(fd, "w") as fh:
        fh.write(redact_text(traceback.format_exc()))  # a crash log is an exit too
    click.echo(f"gpudoctor: internal error: {type(exc).__name__}: {exc} (this is a bug; traceback in {log})", err=True)
    sys.exit(EXIT_INTERNAL)
