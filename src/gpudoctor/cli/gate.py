"""``gpudoctor gate``: the container entrypoint / health-probe command."""

from __future__ import annotations

import os
import sys

import click

from gpudoctor.cli.common import CONTEXT_SETTINGS, EXIT_FAIL, build_system, check_output_path, complete_check_ids, usage
from gpudoctor.config import ConfiguredCommand, FiniteFloatRange
from gpudoctor.redact import redact_text


def _ids(text):
    """``--checks`` value: ids separated by commas and/or spaces (a list from a config file too)."""
    if not text:
        return ()
    if isinstance(text, (list, tuple)):
        text = " ".join(text)
    return tuple(i for i in text.replace(",", " ").split() if i)


@click.command(cls=ConfiguredCommand, context_settings={**CONTEXT_SETTINGS, "ignore_unknown_options": False})
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="[-- COMMAND [ARGS]...]")
@click.option(
    "--require-gpus",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="Block unless at least N GPUs are visible to the job (CUDA driver API in its interpreter). "
    "Not given: at least one; 0 declares a CPU node (no GPU is then healthy).",
)
@click.option("--require-gpu", is_flag=True, hidden=True, help="Same as --require-gpus 1.")
@click.option(
    "--min-gpu-memory-gib",
    type=FiniteFloatRange(min=0),
    default=0.0,
    metavar="GIB",
    help="Block unless every visible GPU has at least this much memory.",
)
@click.option(
    "--checks",
    "checks_",
    metavar="IDS",
    help="Run these checks (ids or prefixes, comma-separated) instead of the gate set.",
)
@click.option(
    "--skip",
    multiple=True,
    metavar="ID",
    shell_complete=complete_check_ids,
    help="Leave out a gate check (id or prefix; repeatable).",
)
@click.option(
    "--deep", is_flag=True, help="Full probe (imports torch: arch list, import errors, mapped libraries); slower."
)
@click.option("--strict", is_flag=True, help="Warnings block the job too.")
@click.option(
    "--timeout",
    "timeout",
    default=20.0,
    show_default=True,
    type=FiniteFloatRange(min=1),
    metavar="SECONDS",
    help="Timeout of the probe in the job's interpreter.",
)
@click.option("--probe-timeout", "probe_timeout", type=FiniteFloatRange(min=1), hidden=True)
@click.option(
    "--wait",
    "wait",
    default=0.0,
    show_default=True,
    type=FiniteFloatRange(min=0),
    metavar="SECONDS",
    help="Retry until healthy or this many seconds have passed (a node that is coming up).",
)
@click.option(
    "--interval",
    default=5.0,
    show_default=True,
    type=FiniteFloatRange(min=0.1),
    metavar="SECONDS",
    help="Pause between attempts with --wait.",
)
@click.option(
    "--status-file",
    metavar="PATH",
    help="Write the verdict as JSON (healthy, time, hostname, checks, failures), atomically.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "prometheus"]),
    default="text",
    show_default=True,
    help="text: lines on stderr; json: the status document; prometheus: node_exporter textfile metrics.",
)
@click.option(
    "-o",
    "--output",
    metavar="FILE",
    help="Write the json/prometheus output to FILE atomically (node_exporter textfile collector).",
)
@click.option("--root", default="/", show_default=True, metavar="DIR", hidden=True)
@click.option("-q", "--quiet", is_flag=True, help="Print nothing when healthy.")
def gate(
    command,
    require_gpus,
    require_gpu,
    min_gpu_memory_gib,
    checks_,
    skip,
    deep,
    strict,
    timeout,
    probe_timeout,
    wait,
    interval,
    status_file,
    fmt,
    output,
    root,
    quiet,
):
    """Refuse to start a job on a broken node; otherwise exec it.

    Runs the checks tagged `gate` (driver, torch build, libcuda, cuDNN, a CUDA
    context per GPU, /dev/shm, ...) offline, with the light probe: nothing is
    imported in the job's interpreter. On a blocking finding it prints one
    line per problem (reason, check, cause, remedy) on stderr and exits 1
    without running COMMAND. When healthy it replaces itself with COMMAND
    (same PID, signals and exit status), or exits 0 when no COMMAND is given.

    Options also come from GPUDOCTOR_<OPTION> variables and gpudoctor.toml
    ([gate] table; see docs/fleet.md).

    \b
    Examples:
      ENTRYPOINT ["gpudoctor", "gate", "--require-gpus", "1", "--"]
      CMD ["python", "train.py"]
      HEALTHCHECK CMD gpudoctor gate -q
      gpudoctor gate --wait 300 --interval 10 --status-file /run/gpudoctor.json
      gpudoctor gate --format prometheus -o /var/lib/node_exporter/gpudoctor.prom
      gpudoctor gate --skip dataloader.shm -- torchrun --nproc-per-node 8 train.py
    """
    from gpudoctor import gate as g
    from gpudoctor.engine import SelectionError

    if output and output != "-" and fmt == "text":
        import shlex

        again = shlex.join(
            ["gpudoctor", "gate", "--format", "json", "-o", output, *(["--", *command] if command else [])]
        )
        raise usage(
            f"-o {output}: only --format json or prometheus is written to a file (text goes to stderr); "
            f"add --format json ({again}), or use --status-file"
        )
    check_output_path("--status-file", status_file, atomic=True)
    check_output_path("-o", output, atomic=True)
    system = build_system(root)
    # start the probe in the job's interpreter now: it runs while the checks load
    from gpudoctor.collect.targets import start_early

    start_early(system, g.collect_options(g.GateOptions(timeout_s=probe_timeout or timeout, deep=deep)))
    registry = g.load_gate_registry(_ids(checks_), deep)
    try:
        checks, left_out = g.gate_checks(
            registry.checks, skip, _ids(checks_), deep, registry.check_ids, registry.unloaded()
        )
    except SelectionError as exc:
        from gpudoctor.system import kill_running_commands

        kill_running_commands()  # the early probe nobody will read
        raise usage(str(exc)) from None
    opts = g.GateOptions(
        require_gpus=1 if require_gpu and not require_gpus else require_gpus,
        min_gpu_memory_gib=min_gpu_memory_gib,
        strict=strict,
        timeout_s=probe_timeout or timeout,
        deep=deep,
        light_model=not _ids(checks_),
    )

    def attempt():
        return g.run_gate(checks, system, opts, left_out)

    def retrying(result, left):
        if not quiet:
            first = result.blocking[0][1] if result.blocking else None
            click.echo(
                f"gpudoctor gate: not healthy yet ({len(result.blocking)} blocking"
                + (f", first: {first.check}" if first else "")
                + f"); retrying for {left:.0f} s more",
                err=True,
            )

    result, attempts = g.gate_until_healthy(attempt, wait, interval, on_retry=retrying)
    doc = g.status_document(result, attempts)
    if status_file:
        try:
            g.write_status_file(status_file, doc)
        except OSError as exc:
            raise usage(f"--status-file {status_file}: {exc.strerror or exc}") from None
    if fmt != "text":
        if fmt == "json":
            import json

            text = json.dumps(doc, indent=2) + "\n"
        elif output and output != "-":
            from gpudoctor.render.prometheus import write_prometheus

            try:
                write_prometheus(output, result.report, gate=doc)
            except OSError as exc:
                raise usage(f"-o {output}: {exc.strerror or exc}") from None
            text = None
        else:
            from gpudoctor.render.prometheus import render_prometheus

            text = render_prometheus(result.report, gate=doc)
        if text is not None:
            _emit(text, output, to_stderr=bool(command))
    if not result.healthy:
        for reason, f in result.blocking:
            click.echo(redact_text(g.blocking_line(reason, f)), err=True)
        waited = f" after {attempts} attempts over {wait:g} s" if attempts > 1 or wait else ""
        click.echo(
            f"gpudoctor gate: node is not healthy{waited}; "
            + ("job not started" if command else "exit 1")
            + " (details: gpudoctor check)",
            err=True,
        )
        sys.exit(EXIT_FAIL)
    if not quiet and fmt == "text":
        counts = ", ".join(f"{n} {s}" for s, n in result.report.counts().items() if n)
        more = f"; not run without --deep: {', '.join(result.left_out)}" if result.left_out else ""
        gpus = next((f.summary for f in result.report.findings if f.check == "gate.gpus"), "")
        click.echo(redact_text(f"gpudoctor gate: healthy{': ' + gpus if gpus else ''} ({counts}){more}"), err=True)
    if command:
        sys.stdout.flush()
        sys.stderr.flush()
        _default_signals()
        try:
            os.execvp(command[0], list(command))
        except OSError as exc:
            click.echo(f"gpudoctor gate: cannot start {command[0]}: {exc.strerror}", err=True)
            sys.exit(127 if isinstance(exc, FileNotFoundError) else 126)
    sys.exit(0)


def _default_signals() -> None:
    """Give the job the signal dispositions a shell would: Python ignores SIGPIPE and SIGXFSZ,
    and an ignored signal stays ignored across exec, so `yes | head` in the job would print
    "Broken pipe" errors and a file-size limit would surface as EFBIG instead of ending it.
    SIGINT/SIGTERM/SIGHUP go back to the default too, except one that was ignored when gpudoctor
    started (``nohup``); nothing is blocked."""
    import signal

    for name in ("SIGPIPE", "SIGXFSZ"):
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, signal.SIG_DFL)
    from gpudoctor import signals

    for sig in signals.HANDLED:
        if signal.getsignal(sig) != signal.SIG_IGN:
            signal.signal(sig, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_SETMASK, [])


def _emit(text: str, output, to_stderr: bool) -> None:
    """Write machine output to ``output`` atomically, else stdout (stderr when a job will own stdout)."""
    if output and output != "-":
        from gpudoctor.gate import write_atomic

        try:
            write_atomic(output, text)
        except OSError as exc:
            raise usage(f"-o {output}: {exc.strerror or exc}") from None
        return
    click.echo(text, nl=False, err=to_stderr)
