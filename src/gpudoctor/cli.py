"""Command-line interface (click). Builds the System, calls engine/render, decides exit codes.

Exit codes (DESIGN.md): 0 nothing failed (warnings allowed), 1 something
failed (or warned, with ``--strict``), 2 usage error, 3 internal error (a bug
in gpudoctor; the traceback goes to a crash log), 130 interrupted.
"""

from __future__ import annotations

import errno
import json
import os
import sys
import tempfile
import traceback
from pathlib import Path
from typing import List, Optional, Sequence

import click

from gpudoctor import __version__
from gpudoctor.config import ConfiguredCommand as _ConfiguredCommand
from gpudoctor.mirrors.cli_options import mirror_check_options, mirror_extra

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
#: the reader of our output went away (``| head``): 128 + SIGPIPE, as a shell reports a tool killed by it
EXIT_BROKEN_PIPE = 141
#: errors writing our own output that are the environment's, not a bug
_OUTPUT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.EFBIG}

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


#: commands defined in their own modules, imported on first use (issue 14: `gpudoctor gate`
#: must not pay for importing `fix`, `probe` and `mirrors`), in `--help` order
_LAZY_COMMANDS = {"fix": "gpudoctor.cli_fix", "gate": "gpudoctor.cli_gate", "probe": "gpudoctor.cli_probe",
                  "mirrors": "gpudoctor.cli_mirrors", "report": "gpudoctor.cli_report"}


class GpudoctorGroup(click.Group):
    """Lists commands in the order they were added (check first), not alphabetically;
    the commands in :data:`_LAZY_COMMANDS` register themselves when first asked for."""

    def list_commands(self, ctx: click.Context) -> List[str]:
        import importlib
        for module in _LAZY_COMMANDS.values():
            importlib.import_module(module)
        return list(self.commands)

    def get_command(self, ctx: click.Context, cmd_name: str):
        if cmd_name not in self.commands and cmd_name in _LAZY_COMMANDS:
            import importlib
            importlib.import_module(_LAZY_COMMANDS[cmd_name])
        return super().get_command(ctx, cmd_name)

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
      gpudoctor check                    # everything, offline-safe defaults
      gpudoctor check cuda dataloader    # only checks whose id starts with these
      gpudoctor check --format json      # for machines
      gpudoctor facts -o f.json          # snapshot; replay: gpudoctor check --facts f.json
      gpudoctor list                     # every check and fix, with its provider
    """


# --------------------------------------------------------------------------- helpers

def _usage(message: str) -> click.UsageError:
    return click.UsageError(message)


def _load_registry():
    from gpudoctor.registry import load_registry
    return load_registry()


def _build_system(root: str):
    from gpudoctor.system import System
    root_path = Path(root)
    if not root_path.is_dir():
        raise _usage(f"--root {root}: not a directory")
    if root_path.resolve() != Path("/") and not any(
            (root_path / p).exists() for p in ("etc/os-release", "usr/lib/os-release", "etc", "usr")):
        click.echo(f"gpudoctor: warning: --root {root} has no etc/ or usr/: is it a root filesystem?", err=True)
    return System.live(str(root_path))


def _check_pythons(pythons: Sequence[str]) -> None:
    import shutil
    for p in pythons:
        if os.sep in p:
            if not os.path.exists(p):
                raise _usage(f"--python {p}: no such file")
            if os.path.isdir(p):
                raise _usage(f"--python {p}: is a directory; give the interpreter, e.g. {p.rstrip('/')}/bin/python")
            if not os.access(p, os.X_OK):
                raise _usage(f"--python {p}: not executable")
        elif shutil.which(p) is None:
            raise _usage(f"--python {p}: not found on PATH")


def _read_facts(path: str):
    from gpudoctor.facts import Facts, FactsDecodeError
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise _usage(f"--facts {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise _usage(f"--facts {path}: not UTF-8 text (a compressed or binary file?)") from None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise _usage(f"--facts {path}: not JSON ({exc})") from None
    try:
        return Facts.from_json(doc)
    except FactsDecodeError as exc:
        raise _usage(f"--facts {path}: not a gpudoctor facts snapshot: {exc}") from None


def _output(text: str, out: Optional[str]) -> None:
    if out and out != "-":
        try:
            Path(out).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise _usage(f"-o {out}: {exc.strerror or exc}") from None
    else:
        click.echo(text, nl=False)


#: check families whose checks read the probed targets (the early probe is worth starting for them)
_TARGET_FAMILIES = ("cuda", "cudnn", "torch", "jupyter")


def _may_need_targets(ids: Sequence[str]) -> bool:
    """Whether the selection probably probes target interpreters (all checks, or a torch-side family)."""
    return not ids or any(i.split(".", 1)[0] in _TARGET_FAMILIES for i in ids)


def common_collect_options(fn):
    """Options shared by ``check``, ``facts`` and other commands that collect."""
    fn = click.option("--root", default="/", show_default=True, metavar="DIR",
                      help="Inspect the filesystem under DIR (a container image root or chroot).")(fn)
    fn = click.option("--python", "pythons", multiple=True, metavar="PATH",
                      help="Probe this interpreter instead of the current one (repeatable).")(fn)
    fn = click.option("--offline", is_flag=True, help="Never use the network.")(fn)
    fn = click.option("--probe-timeout", default=60.0, show_default=True, metavar="SECONDS",
                      type=click.FloatRange(min=1), help="Timeout for each target interpreter's probe.")(fn)
    return fn


def _options(pythons, offline, probe_timeout, **extra):
    from gpudoctor.collect import CollectOptions
    return CollectOptions(pythons=tuple(dict.fromkeys(pythons)), offline=offline, probe_timeout_s=probe_timeout, extra=extra)


# --------------------------------------------------------------------------- check

@cli.command(cls=_ConfiguredCommand, context_settings=CONTEXT_SETTINGS)  # issue 14: GPUDOCTOR_* and gpudoctor.toml
@click.argument("ids", nargs=-1, metavar="[IDS]...")
@click.option("--skip", multiple=True, metavar="ID", help="Leave out checks with this id or id prefix (repeatable).")
@common_collect_options
@click.option("--facts", "facts_file", metavar="FILE",
              help="Evaluate the checks on a snapshot from `gpudoctor facts` instead of this machine ('-': stdin).")
@click.option("--format", "fmt", type=click.Choice(["console", "json", "markdown", "prometheus"]), default="console",
              show_default=True, help="Output format (prometheus: node_exporter textfile metrics).")
@click.option("-o", "--output", metavar="FILE",
              help="Write the report to FILE instead of stdout (json/markdown; prometheus: atomically).")
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too.")
@click.option("-v", "--verbose", is_flag=True, help="Show evidence and explanations for every finding.")
@click.option("--deep", is_flag=True, help="Start each Jupyter kernel for real and probe it from inside.")
@mirror_check_options
def check(ids, skip, root, pythons, offline, probe_timeout, facts_file, fmt, output, strict, verbose, deep=False,
          **mirror_opts):
    """Run checks and explain what is wrong.

    IDS select checks by id or id prefix (`cuda` selects `cuda.driver`,
    `cuda.arch`, ...); none selects all.

    \b
    Examples:
      gpudoctor check
      gpudoctor check torch.install dataloader --format json
      gpudoctor check --python ~/venvs/train/bin/python
      gpudoctor check --root /mnt/image-rootfs --skip torch
      gpudoctor check --facts snapshot.json -v
    """
    from gpudoctor import engine
    from gpudoctor.render.console import SpinnerProgress, make_console, render_console
    from gpudoctor.system import kill_running_commands

    _check_pythons(pythons)
    if facts_file and (pythons or root != "/"):
        raise _usage("--facts replays a snapshot; --python and --root only apply when collecting "
                     "(use them with `gpudoctor facts`)")
    facts = _read_facts(facts_file) if facts_file else None
    system = _build_system(root)
    options = _options(pythons, offline, probe_timeout, **mirror_extra(**mirror_opts))
    if deep:
        from dataclasses import replace
        options = replace(options, deep=True)
    try:
        if facts is None and _may_need_targets(ids):
            # the torch probe is the slowest part of a check: start it before loading the plug-ins
            from gpudoctor.collect.targets import start_early
            start_early(system, options)
        registry = _load_registry()
        try:
            selected = engine.select_checks(registry.checks, ids, skip)
        except engine.SelectionError as exc:
            raise _usage(str(exc)) from None
        with SpinnerProgress(make_console(sys.stderr)) as progress:
            report = engine.run(selected, system, options, progress=progress, facts=facts,
                                extra_findings=registry.problems)
    finally:
        kill_running_commands()  # an early probe nothing asked for (the selection did not need it)
    console = make_console(sys.stderr if fmt != "console" else sys.stdout)
    if fmt == "console":
        if output:
            try:
                fh = open(output, "w", encoding="utf-8")
            except OSError as exc:
                raise _usage(f"-o {output}: {exc.strerror or exc}") from None
            with fh:
                render_console(report, make_console(fh), verbose)
        else:
            render_console(report, console, verbose)
    elif fmt == "prometheus" and output and output != "-":
        from gpudoctor.render.prometheus import write_prometheus
        try:
            write_prometheus(output, report)
        except OSError as exc:
            raise _usage(f"-o {output}: {exc.strerror or exc}") from None
    else:
        from gpudoctor.render import render
        _output(render(report, fmt, verbose), output)
    sys.exit(report.exit_code(strict))


# --------------------------------------------------------------------------- facts

@cli.command(context_settings=CONTEXT_SETTINGS)
@click.argument("ids", nargs=-1, metavar="[IDS]...")
@common_collect_options
@click.option("-o", "--output", metavar="FILE", help="Write the snapshot to FILE instead of stdout.")
def facts(ids, root, pythons, offline, probe_timeout, output):
    """Collect the facts snapshot (JSON, secrets redacted).

    IDS limit collection to what those checks need. Replay the snapshot
    anywhere with `gpudoctor check --facts FILE`.

    \b
    Examples:
      gpudoctor facts -o facts.json
      gpudoctor facts cuda > cuda-facts.json
    """
    from gpudoctor import engine
    from gpudoctor.collect import all_collectors
    from gpudoctor.render.console import SpinnerProgress, make_console

    registry = _load_registry()
    try:
        selected = engine.select_checks(registry.checks, ids)
    except engine.SelectionError as exc:
        raise _usage(str(exc)) from None
    _check_pythons(pythons)
    system = _build_system(root)
    collectors = all_collectors()
    domains = engine.needed_domains(selected, collectors)
    with SpinnerProgress(make_console(sys.stderr)) as progress:
        snapshot, errors = engine.collect_facts(domains, system, _options(pythons, offline, probe_timeout),
                                                collectors, progress)
    for err in errors:
        click.echo(f"gpudoctor: warning: {err.summary}", err=True)
    _output(json.dumps(snapshot.to_json(), indent=2) + "\n", output)


# --------------------------------------------------------------------------- list

@cli.command("list", context_settings=CONTEXT_SETTINGS)
@click.option("--format", "fmt", type=click.Choice(["console", "json"]), default="console", show_default=True)
def list_(fmt):
    """List every check and fix, with its description and provider.

    \b
    Example:
      gpudoctor list
    """
    registry = _load_registry()
    rows = [{"kind": "check", "id": c.id, "title": c.title, "provider": registry.provider(c.id, "check"),
             "needs": list(c.needs), "tags": list(c.tags)} for c in registry.checks.values()]
    rows += [{"kind": "fix", "id": f.id, "title": f.title, "provider": registry.provider(f.id, "fix"),
              "addresses": list(f.addresses)} for f in registry.fixes.values()]
    if fmt == "json":
        click.echo(json.dumps({"items": rows, "problems": [p.to_json() for p in registry.problems]}, indent=2))
        return
    from rich.table import Table
    from gpudoctor.render.console import make_console
    console = make_console()
    if not console.is_terminal:  # plain, one line per item, no wrapping or padding: easy to grep
        w_id = max((len(r["id"]) for r in rows), default=0)
        for r in rows:
            click.echo(f"{r['kind']:<5}  {r['id']:<{w_id}}  {r['title']}  ({r['provider']})")
        for p in registry.problems:
            click.echo(f"[ERROR] {p.summary}")
        return
    table = Table(box=None, show_edge=False, pad_edge=False, expand=False)
    for col in ("kind", "id", "description", "provider"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["kind"], r["id"], r["title"], r["provider"])
    console.print(table)
    for p in registry.problems:
        console.print(f"[ERROR] {p.summary}")


# --------------------------------------------------------------------------- entry point

def _interrupted() -> None:
    """Ctrl-C: kill the commands we started (they run in their own sessions, so the
    terminal's SIGINT does not reach them), so the threads waiting on them end too."""
    import signal

    from gpudoctor.system import kill_running_commands
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not interrupt the clean-up
    try:
        kill_running_commands()
        click.echo("\ngpudoctor: interrupted", err=True)
    finally:
        signal.signal(signal.SIGINT, previous)
    sys.exit(EXIT_INTERRUPTED)


def _broken_pipe() -> None:
    """The reader of stdout went away: stop quietly with 141 (128 + SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush cannot fail again
    except OSError:
        pass
    sys.exit(EXIT_BROKEN_PIPE)


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Console-script entry point; maps outcomes to exit codes (never a traceback)."""
    try:
        rv = cli.main(args=list(argv) if argv is not None else None, prog_name="gpudoctor",
                      standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt):
        _interrupted()
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
    sys.exit(rv if isinstance(rv, int) else EXIT_OK)


def _internal_error(exc: BaseException) -> None:
    fd, log = tempfile.mkstemp(prefix="gpudoctor-crash-", suffix=".log")
    with os.fdopen(fd, "w") as fh:
        fh.write(traceback.format_exc())
    click.echo(f"gpudoctor: internal error: {type(exc).__name__}: {exc} (this is a bug; traceback in {log})",
               err=True)
    sys.exit(EXIT_INTERNAL)


# Commands defined in their own modules register themselves on ``cli`` when first used (_LAZY_COMMANDS).
