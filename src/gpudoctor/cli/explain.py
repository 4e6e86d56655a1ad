"""``gpudoctor explain``: from an error message to its cause, confirmed on this machine.

Thin: the knowledge base and matcher live in :mod:`gpudoctor.explain`, reading logs,
running the command and the confirming checks in :mod:`gpudoctor.explain_run`, output
in :mod:`gpudoctor.render.explain`.
"""

from __future__ import annotations

import shlex
import signal
import sys
from typing import Any

import click

from gpudoctor.cli.common import (
    COMMAND_KEY,
    CONTEXT_SETTINGS,
    CommandAfterDashes,
    build_system,
    check_output_path,
    check_pythons,
    load_registry,
    make_collect_options,
    refuse_output_over_input,
    usage,
    write_output,
)
from gpudoctor.config import FiniteFloatRange


@click.command("explain", cls=CommandAfterDashes, context_settings=CONTEXT_SETTINGS)
@click.argument("file", required=False, metavar="[FILE | - | -- COMMAND [ARGS]...]")
@click.option("--list", "list_", is_flag=True, help="List every known error signature and exit.")
@click.option("--no-check", is_flag=True, help="Only explain; do not run the confirming checks on this machine.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["console", "json", "markdown"]),
    default="console",
    show_default=True,
    help="Output format.",
)
@click.option("-o", "--output", metavar="FILE", help="Write the explanation to FILE instead of the terminal.")
@click.option("-v", "--verbose", is_flag=True, help="Show extracted values and all check details.")
@click.option(
    "--root",
    default="/",
    show_default=True,
    metavar="DIR",
    help="Run the confirming checks on the filesystem under DIR.",
)
@click.option(
    "--python",
    "pythons",
    multiple=True,
    metavar="PATH",
    help="Confirm with this interpreter (default: the one COMMAND runs, else the current one).",
)
@click.option("--offline", is_flag=True, help="The confirming checks never use the network.")
@click.option(
    "--probe-timeout",
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    type=FiniteFloatRange(min=1),
    help="Timeout for each target interpreter's probe.",
)
@click.pass_context
def explain(ctx, file, list_, no_check, fmt, output, verbose, root, pythons, offline, probe_timeout):
    """Explain an error message: its cause, the fix, and checks that confirm it here.

    Reads FILE (plain or .gz), stdin (`-`, or a pipe), or runs COMMAND after `--`:
    its output passes through unchanged and, when it exits non-zero, the
    output is explained; gpudoctor then exits with COMMAND's exit status.

    \b
    Examples:
      gpudoctor explain train.log
      python train.py 2>&1 | gpudoctor explain
      gpudoctor explain -- python train.py --epochs 3
      gpudoctor explain --no-check --format json build.log
      gpudoctor explain --list
    """
    from gpudoctor import explain_run
    from gpudoctor.explain import SignatureError, load_signatures

    command: list[str] | None = ctx.meta.get(COMMAND_KEY)
    try:
        signatures = load_signatures()
    except SignatureError as exc:  # a broken plug-in data file is ours to report, in one line
        raise click.ClickException(str(exc)) from None
    if list_:
        if file or command is not None:
            raise usage("--list takes no FILE or COMMAND")
        check_output_path("-o", output)
        _list(signatures, fmt, output)
        return
    check_pythons(pythons)
    check_output_path("-o", output)
    refuse_output_over_input("-o", output, file)
    if command is not None:
        if file:
            raise usage("give either FILE or `-- COMMAND`, not both")
        if not command:
            raise usage("nothing to run after `--`")
        result = _run(command, output, fmt)
        if result is None:  # the command succeeded: nothing to explain
            sys.exit(0)
    else:
        if file is None and sys.stdin.isatty():
            raise usage("give a FILE to explain, `-` for stdin, or `-- COMMAND` to run")
        try:
            if file in (None, "-"):
                with _ReadProgress("stdin") as progress:
                    explanation = explain_run.explain_stream(sys.stdin.buffer, on_chunk=progress)
                source = "stdin"
            else:
                _refuse_device(file)
                with _ReadProgress(file) as progress:
                    explanation = explain_run.explain_file(file, on_chunk=progress)
                source = file
        except IsADirectoryError:
            raise usage(f"{file}: is a directory") from None
        except OSError as exc:
            raise usage(f"{file}: {exc.strerror or exc}") from None
        except EOFError:
            raise usage(f"{file}: truncated compressed file") from None
        result = explain_run.ExplainResult(source, explanation)
    if result.explanation.matches:
        if no_check:
            from dataclasses import replace

            result = replace(result, confirmation=explain_run.plan_confirmation(result.explanation, load_registry()))
        else:
            result = _confirm(result, root, pythons, offline, probe_timeout)
    _render(result, fmt, output, verbose, to_stderr=command is not None)
    sys.exit(result.exit_code)


class _ReadProgress:
    """A status line on stderr while a long log is read: "reading FILE: 40 of 176 MiB" (a
    terminal only, from the first half second on; piped stderr stays silent). Called with
    each chunk's size in bytes (:func:`gpudoctor.explain_run.explain_stream`)."""

    DELAY_S = 0.5

    def __init__(self, name: str):
        import os
        import time

        from gpudoctor.render.console import make_console

        self._name = name
        self._console = make_console(sys.stderr)
        self._clock = time.monotonic
        self._start = self._clock()
        self._done = 0
        self._shown = 0.0
        self._status: Any = None  # a rich Status once shown
        try:
            self._total = os.path.getsize(name) if name != "stdin" and not name.endswith(".gz") else 0
        except OSError:
            self._total = 0

    def __enter__(self) -> _ReadProgress:
        return self

    def __call__(self, n: int) -> None:
        self._done += n
        now = self._clock()
        if not self._console.is_terminal or now - self._start < self.DELAY_S or now - self._shown < 0.1:
            return
        self._shown = now
        mib = self._done / 1048576
        text = f"reading {self._name}: {mib:.0f}" + (f" of {self._total / 1048576:.0f} MiB" if self._total else " MiB")
        if self._status is None:
            self._status = self._console.status(text, spinner="dots")
            self._status.start()
        else:
            self._status.update(text)

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.stop()


def _refuse_device(path: str) -> None:
    """Usage error for a device or socket given as FILE: ``/dev/zero`` or a disk would be
    read forever. A FIFO (``<(cmd)``, ``/dev/stdin`` on a pipe) and a terminal are read."""
    import os
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # open() reports it
    if stat.S_ISBLK(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and not _is_tty(path)):
        raise usage(f"{path}: a device, not a log file (give a file, `-` for stdin, or `-- COMMAND`)")


def _is_tty(path: str) -> bool:
    import os

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return False
    try:
        return os.isatty(fd)
    finally:
        os.close(fd)


def _list(signatures, fmt: str, output: str | None = None) -> None:
    """Every signature: JSON, a Markdown table, or aligned text; to ``-o`` FILE when given."""
    if fmt == "json":
        import json

        text = (
            json.dumps(
                [
                    {
                        "id": s.id,
                        "matches": s.describe(),
                        "regex": s.regex,
                        "groups": dict(s.groups),
                        "checks": list(s.checks),
                        "source": s.source,
                    }
                    for s in signatures
                ],
                indent=2,
            )
            + "\n"
        )
    elif fmt == "markdown":
        bar = "\\|"  # a literal | inside a table cell; <placeholder> would read as an HTML tag
        rows = [f"| `{s.id}` | {s.describe().replace('|', bar).replace('<', '&lt;')} |" for s in signatures]
        text = "\n".join(["| signature | matches |", "|---|---|", *rows]) + "\n"
    else:
        width = max(len(s.id) for s in signatures)
        text = "".join(f"{s.id:<{width}}  {s.describe()}\n" for s in signatures)
    write_output(text, output)


def _run(command: list[str], output: str | None, fmt: str):
    from gpudoctor import explain_run

    for stream in (sys.stdout, sys.stderr):  # what we printed so far comes before the command's output
        stream.flush()
    try:
        outcome = explain_run.run_command(command, _fd(sys.stdout, 1), _fd(sys.stderr, 2))
    except OSError as exc:
        click.echo(f"gpudoctor explain: cannot start {command[0]}: {exc.strerror or exc}", err=True)
        sys.exit(127 if isinstance(exc, FileNotFoundError) else 126)
    if outcome.signalled is not None:  # forwarded to the command, which has ended: so do we
        if outcome.killed_after_s is not None:  # our own SIGKILL is not the command's exit status
            name = signal.Signals(outcome.signalled).name
            click.echo(
                f"gpudoctor explain: {command[0]} was still running {outcome.killed_after_s:g} s after {name}:"
                " killed it",
                err=True,
            )
            sys.exit(128 + outcome.signalled)
        sys.exit(outcome.returncode)
    if outcome.returncode == 0:
        return None
    return explain_run.ExplainResult(shlex.join(command), outcome.explanation, None, tuple(command), outcome.returncode)


def _fd(stream, default: int) -> int:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):  # a replaced stream without a descriptor
        return default


def _confirm(result, root, pythons, offline, probe_timeout):
    from dataclasses import replace

    from gpudoctor import explain_run
    from gpudoctor.render.console import SpinnerProgress, make_console
    from gpudoctor.system import kill_running_commands

    if not pythons and result.command:
        found = explain_run.target_python(result.command)
        pythons = (found,) if found else ()
    system = build_system(root)
    options = make_collect_options(pythons, offline, probe_timeout)
    try:
        with SpinnerProgress(make_console(sys.stderr)) as progress:
            confirmation = explain_run.confirm(result.explanation, load_registry(), system, options, progress)
    finally:
        kill_running_commands()
    return replace(result, confirmation=confirmation)


def _render(result, fmt: str, output: str | None, verbose: bool, to_stderr: bool) -> None:
    from gpudoctor.render.console import make_console
    from gpudoctor.render.explain import (
        render_explain_console,
        render_explain_json,
        render_explain_markdown,
    )

    if fmt == "console":
        if output and output != "-":
            import io

            buffer = io.StringIO()
            render_explain_console(result, make_console(buffer), verbose)
            write_output(buffer.getvalue(), output)
            return
        # after a command, its stdout stays its own: the explanation goes to stderr
        render_explain_console(result, make_console(sys.stderr if to_stderr else sys.stdout), verbose)
        return
    text = render_explain_json(result) if fmt == "json" else render_explain_markdown(result, verbose)
    if output and output != "-":
        write_output(text, output)
    else:
        click.echo(text, nl=False, err=to_stderr)
