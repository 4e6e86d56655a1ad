"""``gpudoctor watch -- CMD``: measure the data stall inside a real training run, no code change.

The command runs unchanged through :func:`gpudoctor.explain_run.run_command` (same argv,
stdin, stdout and stderr inherited, exit status and signals passed through). Its Python
processes load the recorder through a ``sitecustomize`` put first on their
``PYTHONPATH`` (:mod:`gpudoctor._watch_site`), which writes the DataLoader records to a
run directory of ours; meanwhile :class:`gpudoctor.stall_sampler.MachineSampler` samples
the machine. The verdict (:func:`gpudoctor.stall.analyse`) goes to stderr after the
command's own output (or to ``-o FILE``), every ``--live`` seconds and on Ctrl-C too.
gpudoctor exits with the command's status.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import click

from gpudoctor.cli.common import (
    COMMAND_KEY,
    CONTEXT_SETTINGS,
    CommandAfterDashes,
    check_output_path,
    usage,
)

#: The directory put first on the command's PYTHONPATH (its sitecustomize loads the recorder).
SITE_DIR = Path(__file__).resolve().parent.parent / "_watch_site"


def child_env(run_dir: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """The command's environment: ``base`` (default ours) with :data:`SITE_DIR` first on
    PYTHONPATH and the run directory in ``GPUDOCTOR_WATCH_DIR``."""
    env = dict(os.environ if base is None else base)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(SITE_DIR)]
    env["PYTHONPATH"] = os.pathsep.join([str(SITE_DIR), *paths])
    env["GPUDOCTOR_WATCH_DIR"] = run_dir
    return env


@click.command("watch", cls=CommandAfterDashes, context_settings=CONTEXT_SETTINGS)
@click.argument("command_hint", required=False, metavar="-- COMMAND [ARGS]...")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["console", "json"]),
    default="console",
    show_default=True,
    help="Verdict format (json: every measurement, the machine samples summarised).",
)
@click.option("-o", "--output", metavar="FILE", help="Write the verdict to FILE instead of stderr.")
@click.option(
    "--live",
    metavar="SECONDS",
    type=click.FloatRange(min=1),
    help="Also give the verdict so far every SECONDS while the command runs.",
)
@click.option(
    "--interval",
    default=1.0,
    show_default=True,
    metavar="SECONDS",
    type=click.FloatRange(min=0.2),
    help="Seconds between two samples of the machine (CPU, I/O, memory, /dev/shm, GPU).",
)
@click.option("--no-gpu", is_flag=True, help="Do not start the NVML worker (no GPU utilisation samples).")
@click.pass_context
def watch(ctx, command_hint, fmt, output, live, interval, no_gpu):
    """Run COMMAND unchanged and say how long its training loop waits for data, and why.

    The command's Python processes (torchrun ranks and DataLoader workers
    included) record, for each torch DataLoader, the wait for each batch and
    the time between batches, with the loader's settings; alongside, the
    machine is sampled (CPU per core and of the job's processes, I/O
    pressure, disk reads, memory, /dev/shm, GPU utilisation through NVML).
    At the end (every --live seconds, and on Ctrl-C) the verdict: the share
    of step time spent waiting for data, GPU busy %, what limits the loader,
    and the DataLoader settings to use with the stall they are expected to
    leave. The command's output is its own; the verdict goes to stderr after
    it (or to -o FILE), and gpudoctor exits with the command's status.

    \b
    Examples:
      gpudoctor watch -- python train.py --epochs 1
      gpudoctor watch --live 30 -- torchrun --nproc-per-node 8 train.py
      gpudoctor watch --format json -o watch.json -- python train.py
    """
    from gpudoctor import explain_run, stall
    from gpudoctor.probe._dataloader_measure import cpu_info
    from gpudoctor.stall_sampler import MachineSampler, nvml_may_answer

    command: list[str] | None = ctx.meta.get(COMMAND_KEY)
    if command_hint is not None or command is None:
        raise usage("give the command to watch after `--`, e.g. gpudoctor watch -- python train.py")
    if not command:
        raise usage("nothing to run after `--`")
    check_output_path("-o", output, dash="stderr")
    run_dir = tempfile.mkdtemp(prefix="gpudoctor-watch-")
    reader = stall.RecordReader(run_dir)
    sampler = MachineSampler(interval, nvml=not no_gpu and nvml_may_answer())
    cpus = cpu_info()
    started = time.monotonic()
    state: dict[str, Any] = {"proc": None}

    def verdict(final: bool, exit_code: int | None) -> dict[str, Any]:
        reader.read()
        return stall.analyse(
            reader.records, sampler.summary(), cpus, command, exit_code, time.monotonic() - started, final
        )

    def on_start(proc) -> None:
        state["proc"] = proc
        sampler.watch_pid(proc.pid)

    stop_live = threading.Event()
    if live:

        def live_loop() -> None:
            while not stop_live.wait(live):
                _emit(verdict(False, None), fmt, output)

        threading.Thread(target=live_loop, name="gpudoctor-watch-live", daemon=True).start()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    sampler.start()
    interrupted = False
    killed_after: float | None = None
    try:
        try:
            outcome = explain_run.run_command(command, env=child_env(run_dir), inherit=True, on_start=on_start)
            code = outcome.returncode
            # Ctrl-C (or SIGTERM/SIGHUP) forwarded to the command, which has ended: the verdict says so
            interrupted = outcome.signalled is not None
            if outcome.killed_after_s is not None and outcome.signalled is not None:
                # our own SIGKILL is not the command's exit: end as the signal we received says
                killed_after = outcome.killed_after_s
                code = 128 + outcome.signalled
        except KeyboardInterrupt:
            interrupted = True
            proc = state["proc"]
            rc = None
            if proc is not None:  # the terminal's Ctrl-C reached the command too: let it end its own way
                try:
                    rc = proc.wait(timeout=explain_run.KILL_GRACE_S)
                except (subprocess.TimeoutExpired, KeyboardInterrupt):
                    proc.kill()
                    proc.wait()
                    killed_after = explain_run.KILL_GRACE_S
            code = explain_run.exit_status(rc) if rc is not None else 130
        except OSError as exc:
            stop_live.set()
            sampler.stop()
            why = "is a directory" if os.path.isdir(command[0]) else exc.strerror or exc
            click.echo(f"gpudoctor watch: cannot start {command[0]}: {why}", err=True)
            sys.exit(127 if isinstance(exc, FileNotFoundError) else 126)
        stop_live.set()
        sampler.stop()
        doc = verdict(True, code)
        if interrupted:
            doc["interrupted"] = True
        if killed_after is not None:  # the command did not end by itself: it has no exit status of its own
            doc["exit_code"] = None
            doc["killed_after_s"] = killed_after
        _emit(doc, fmt, output)
    finally:
        stop_live.set()
        shutil.rmtree(run_dir, ignore_errors=True)
    sys.exit(code)


_emit_lock = threading.Lock()


def _emit(doc: dict[str, Any], fmt: str, output: str | None) -> None:
    """Write one verdict: JSON or text, to ``output`` (replaced each time) or stderr."""
    from gpudoctor import stall
    from gpudoctor.redact import redact_text, redact_value

    if fmt == "json":
        import json

        text = json.dumps(redact_value(doc), indent=2) + "\n"
    else:
        text = redact_text(stall.render_text(doc))
    with _emit_lock:
        if output and output != "-":
            from gpudoctor.output import write_text

            try:
                write_text(output, text)  # the one output writer: atomic, regular files only
            except OSError as exc:
                click.echo(f"gpudoctor watch: cannot write {output}: {exc.strerror or exc}", err=True)
            return
        sys.stderr.write(text)
        sys.stderr.flush()
