"""``gpudoctor gate``: the container entrypoint / health-probe command."""

from __future__ import annotations

import os
import sys

import click

from gpudoctor.cli.common import CONTEXT_SETTINGS, EXIT_FAIL, build_system, load_registry, usage


@click.command(context_settings={**CONTEXT_SETTINGS, "ignore_unknown_options": False})
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="[-- COMMAND [ARGS]...]")
@click.option("--skip", multiple=True, metavar="ID", help="Leave out a gate check (id or prefix; repeatable).")
@click.option("--strict", is_flag=True, help="Warnings block the job too.")
@click.option("--require-gpu", is_flag=True, help="Block when no NVIDIA GPU/driver is found at all.")
@click.option("--probe-timeout", default=20.0, show_default=True, type=click.FloatRange(min=1), metavar="SECONDS",
              help="Timeout for the torch probe.")
@click.option("--root", default="/", show_default=True, metavar="DIR", hidden=True)
@click.option("-q", "--quiet", is_flag=True, help="Print nothing when healthy.")
def gate(command, skip, strict, require_gpu, probe_timeout, root, quiet):
    """Refuse to start a job on a broken node; otherwise exec it.

    Runs the checks tagged `gate` (driver, torch build, /dev/shm, ...) offline.
    On a failure it prints one line per problem and exits 1 without running
    COMMAND. When healthy it replaces itself with COMMAND (same PID, signals
    and exit status), or exits 0 when no COMMAND is given.

    \b
    Examples:
      ENTRYPOINT ["gpudoctor", "gate", "--require-gpu", "--"]
      CMD ["python", "train.py"]
      HEALTHCHECK CMD gpudoctor gate -q
      gpudoctor gate --skip dataloader.shm -- torchrun --nproc-per-node 8 train.py
    """
    from gpudoctor.engine import SelectionError
    from gpudoctor.gate import gate_checks, run_gate

    registry = load_registry()
    try:
        checks = gate_checks(registry.checks, skip)
    except SelectionError as exc:
        raise usage(str(exc)) from None
    result = run_gate(checks, build_system(root), probe_timeout, strict, require_gpu)
    if not result.healthy:
        for f in result.blocking:
            target = f" [{f.target}]" if f.target and f.target != "current" else ""
            click.echo(f"gpudoctor gate: {f.status.value}: {f.check}{target}: {f.summary}", err=True)
        click.echo("gpudoctor gate: node is not healthy; job not started (details: gpudoctor check)", err=True)
        sys.exit(EXIT_FAIL)
    if not quiet:
        counts = ", ".join(f"{n} {s}" for s, n in result.report.counts().items() if n)
        click.echo(f"gpudoctor gate: healthy ({counts})", err=True)
    if command:
        try:
            os.execvp(command[0], list(command))
        except OSError as exc:
            click.echo(f"gpudoctor gate: cannot start {command[0]}: {exc.strerror}", err=True)
            sys.exit(127 if isinstance(exc, FileNotFoundError) else 126)
    sys.exit(0)
