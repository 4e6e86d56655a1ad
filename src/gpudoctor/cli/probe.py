"""``gpudoctor probe dataloader``: measure the data stall in the TARGET interpreter and tune the loader.

The doctor never imports torch: this module starts the target interpreter
(``--python``, default the current one) on ``gpudoctor/probe/_dataloader.py``
with a JSON configuration (argv, no shell), shows its progress lines on a
terminal, kills its process group when it overruns the budget, and renders
the JSON result (rich table, the ``DataLoader(...)`` call, what still limits
it) or prints it (``--format json``).

Exit codes: 0 measured (a recommendation was made), 1 the dataset, a worker or
the step failed (a finding is printed), 2 usage error (bad option, a factory
that does not exist, no torch in the target).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from gpudoctor.cli.common import (
    CONTEXT_SETTINGS,
    EXIT_FAIL,
    EXIT_OK,
    GpudoctorGroup,
    check_pythons,
    command_started,
    usage,
)
from gpudoctor.config import FiniteFloatRange

#: The script the target interpreter runs (imports torch; never imported here).
DATALOADER_SCRIPT = Path(__file__).resolve().parent.parent / "probe" / "_dataloader.py"
MARKER = "@@gpudoctor-dataloader@@"
PROGRESS = "@@gpudoctor-progress@@"
#: Seconds allowed beyond --budget-s for a probe that overruns (a hung worker) before it is killed.
GRACE_S = 20.0
#: The oldest Python the DataLoader probe runs on: the synthetic dataset burns CPU with
#: ``time.thread_time`` (3.7); the rest needs 3.3 like the check probe (gpudoctor.probe.MIN_PYTHON).
DATALOADER_MIN_PYTHON = (3, 7)


#: Seconds of --budget-s kept back from the target for reading and printing its result and for
#: the target's own exit (its DataLoader workers shut down after the last measurement).
REPORT_RESERVE_S = 0.7
#: Seconds the target may take to exit after printing its result before its process group is killed.
EXIT_WAIT_S = 0.3
#: The least the target is given (its budget counts its own start-up), seconds.
MIN_PROBE_BUDGET_S = 0.5
#: The least the target measures for after its start-up, seconds: one configuration (the
#: probe's own floor, ``_dataloader.MIN_SEARCH_S``), so an overloaded machine still gets a result.
MIN_SEARCH_S = 1.0
#: What --budget-s bounds, said once for --help, the docs and the tests.
BUDGET_HELP = (
    f"Wall-clock budget of the whole command, seconds: from gpudoctor's start to the printed "
    f"result (starting the target, importing torch and the final report included). The target "
    f"gets what is left minus {REPORT_RESERVE_S:g} s for reporting and stops measuring in time, "
    f"unless its start-up (importing torch) alone leaves less than {MIN_SEARCH_S:g} s, the least "
    f"it measures for; a probe still running {GRACE_S:g} s past the budget is killed."
)
_SPEC = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def saved_result_path(home: str | None = None) -> Path:
    """Where the last probe result is saved for ``dataloader.shm``: ``dataloader-probe.json`` in
    platformdirs' user cache directory (``$XDG_CACHE_HOME/gpudoctor``, else ``~/.cache/gpudoctor``),
    or under ``home/.cache/gpudoctor`` when ``home`` is given."""
    if home:
        return Path(home) / ".cache" / "gpudoctor" / "dataloader-probe.json"
    import platformdirs

    return Path(platformdirs.user_cache_dir("gpudoctor", appauthor=False)) / "dataloader-probe.json"


class ProbeRunError(click.ClickException):
    """The probe gave no result (crash, timeout, no torch): a one-line error, exit 2."""

    exit_code = 2


class ProbeHung(ProbeRunError):
    """The probe overran its budget (a dataset item or worker hung) and was killed: exit 1,
    a verdict on the dataset, not a usage error."""

    exit_code = 1


def run_probe(python: str, config: dict[str, Any], timeout_s: float, on_progress=None) -> dict[str, Any]:
    """Run the dataloader script in ``python`` and return its result document.

    ``on_progress(dict)`` receives each progress line. Once the result
    document is printed the target gets :data:`EXIT_WAIT_S` to exit, then its
    process group is killed (its teardown is not part of the measurement). Raises
    :class:`ProbeRunError` when the interpreter cannot start, overruns
    ``timeout_s`` (its process group is killed) or prints no result.
    """
    argv = [python, str(DATALOADER_SCRIPT), json.dumps(config)]
    try:
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True
        )
    except OSError as exc:
        raise ProbeRunError(f"--python {python}: cannot start it: {exc.strerror or exc}") from None
    from gpudoctor.system import track, untrack

    track(proc)  # SIGTERM/SIGHUP/Ctrl-C of the doctor kill its group too
    try:
        return _wait_probe(proc, python, timeout_s, on_progress)
    finally:
        _kill_group(proc)  # workers or a hung dataset item left behind die with it
        untrack(proc)


def _wait_probe(
    proc: subprocess.Popen, python: str, timeout_s: float, on_progress: Callable[[dict[str, Any]], None] | None
) -> dict[str, Any]:
    tail: list[str] = []
    out_chunks: list[str] = []

    def read_err() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.startswith(PROGRESS):
                if on_progress:
                    try:
                        on_progress(json.loads(line[len(PROGRESS) :]))
                    except ValueError:
                        pass
            elif line.strip():
                tail.append(line.rstrip())
                del tail[:-20]

    have_result = threading.Event()

    def read_out() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            out_chunks.append(line)
            if line.count(MARKER) >= 2:
                have_result.set()

    threads = [threading.Thread(target=read_err, daemon=True), threading.Thread(target=read_out, daemon=True)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout_s
    try:
        while proc.poll() is None:
            if have_result.is_set():
                # the result is in: the target's own exit (DataLoader workers, torch teardown) is
                # not worth waiting for beyond EXIT_WAIT_S
                try:
                    proc.wait(timeout=EXIT_WAIT_S)
                except subprocess.TimeoutExpired:
                    _kill_group(proc)
                break
            if time.monotonic() >= deadline:
                _kill_group(proc)
                last = f"; last stderr: {tail[-1]}" if tail else ""
                raise ProbeHung(
                    f"the probe in {python} did not finish within {timeout_s:g} s (its budget plus "
                    f"{GRACE_S:g} s) and was killed with its workers: a dataset item, collate_fn or "
                    f"worker hung{last}"
                )
            have_result.wait(0.05)
    except KeyboardInterrupt:
        _kill_group(proc)
        raise
    for t in threads:
        t.join(0.5)
    if any(t.is_alive() for t in threads):  # a worker still holds the pipes: it goes with the probe
        _kill_group(proc)
        for t in threads:
            t.join(2)
    stdout = "".join(out_chunks)
    end = stdout.rfind(MARKER)
    start = stdout.rfind(MARKER, 0, end) if end > 0 else -1
    if start < 0:
        why = (
            f"exit status {proc.returncode}"
            if proc.returncode is not None and proc.returncode >= 0
            else f"killed by signal {-proc.returncode}"
        )
        last = tail[-1] if tail else "no output"
        raise ProbeRunError(f"the probe in {python} gave no result ({why}): {last}")
    try:
        return json.loads(stdout[start + len(MARKER) : end])
    except ValueError as exc:
        raise ProbeRunError(f"the probe in {python} printed an unreadable result: {exc}") from None


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.wait()


# --------------------------------------------------------------------------- rendering


def _fmt(v: Any, spec: str = "", none: str = "-") -> str:
    return none if v is None else format(v, spec)


def _cfg_text(cfg: dict[str, Any]) -> list[str]:
    w = cfg["num_workers"]
    return [
        str(w),
        _fmt(cfg.get("prefetch_factor")),
        "yes" if cfg.get("persistent_workers") else "no",
        "yes" if cfg.get("pin_memory") else "no",
    ]


ERROR_TEXT = {
    "dataset": (
        "the dataset raised while loading a sample",
        "Your dataset's `__getitem__` (or its collate_fn) raised an exception, so no configuration "
        "can be measured. Fix the error below and run the probe again; reproduce it alone with "
        "`dataset[i]` in a Python shell.",
    ),
    "worker-killed": (
        "worker died",
        "A worker process died without raising a Python error. `Bus error` (SIGBUS) means "
        "/dev/shm is too small (`gpudoctor check dataloader.shm`; Docker `--shm-size=8g` or "
        "`--ipc=host`); `Killed` (SIGKILL) is usually the kernel OOM killer (`dmesg | grep -i "
        "oom`): fewer workers, a smaller prefetch_factor, or more memory; "
        "`Segmentation fault` points at a native library in the dataset.",
    ),
    "step": ("the training step raised", "The `--model` step failed on a batch from your dataset."),
    "internal": ("the probe itself failed", "This is a bug in gpudoctor's probe; please report it."),
    "interrupted": ("interrupted", ""),
}


def render_console(doc: dict[str, Any], console) -> None:
    """The rich table of configurations, the recommendation, the call and the limits."""
    from rich.table import Table

    results = doc.get("results") or []
    rec = doc.get("recommended")
    if results:
        about = [
            doc.get("mode") or "",
            f"batch_size={doc['batch_size']}" if doc.get("batch_size") else "",
            doc.get("step") or "",
        ]
        title = "DataLoader configurations" + (f" ({', '.join(a for a in about if a)})" if any(about) else "")
        table = Table(title=title, box=None, header_style="bold")
        for col in (
            "",
            "workers",
            "prefetch",
            "persist",
            "pin",
            "samples/s",
            "stall%",
            "1st s",
            "restart",
            "RSS MiB",
            "shm MiB",
            "GPU%",
        ):
            table.add_column(col, justify="right" if col not in ("", "persist", "pin") else "left")
        for i, r in enumerate(results):
            stall = r.get("stall_fraction")
            table.add_row(
                "→" if i == rec else "",
                *_cfg_text(r["config"]),
                _fmt(r.get("samples_per_s"), ".1f"),
                _fmt(None if stall is None else 100 * stall, ".0f"),
                _fmt(r.get("time_to_first_batch_s"), ".2f"),
                _fmt(r.get("restart_s"), ".2f"),
                _fmt(r.get("worker_peak_rss_mib"), ".0f"),
                _fmt(r.get("shm_peak_mib"), ".0f"),
                _fmt(r.get("gpu_util_percent"), ".0f"),
            )
        console.print(table)
    err = doc.get("error")
    if err:
        title, text = ERROR_TEXT.get(err["kind"], ("the probe failed", ""))
        from rich.markup import escape

        console.print(f"\n[bold red]FAIL[/] {title}: {escape(str(err['message']))}", markup=True, highlight=False)
        if err.get("where"):
            console.print(f"  at {err['where']}", markup=False)
        cfg = err.get("config")
        if cfg:
            console.print(f"  while measuring num_workers={cfg['num_workers']}", markup=False)
        if text:
            console.print(f"\n{text}", markup=False)
        return
    if rec is None:
        startup = doc.get("startup_s")
        console.print(
            "No configuration could be measured within the budget"
            + (f" (starting the target and importing torch took {startup:.1f} s)" if startup else "")
            + "; raise --budget-s.",
            markup=False,
        )
        return
    r = results[rec]
    base = results[0] if results and results[0]["config"]["num_workers"] == 0 else None
    cpus = doc.get("cpus", {})
    console.print(
        f"\nUsable CPUs: {cpus.get('usable')} (os.cpu_count() {cpus.get('logical')}, affinity "
        f"{cpus.get('affinity')}, cgroup quota "
        f"{'none' if cpus.get('quota_cpus') is None else format(cpus['quota_cpus'], 'g')})",
        markup=False,
    )
    line = f"Recommended: {r['samples_per_s']:.1f} samples/s, data stall {100 * r['stall_fraction']:.0f} %"
    if base is not None and base is not r:
        line += f" (num_workers=0: {base['samples_per_s']:.1f} samples/s, stall {100 * base['stall_fraction']:.0f} %)"
    console.print(line, markup=False)
    console.print("\nPaste this (keep your other arguments such as shuffle, sampler, collate_fn):", markup=False)
    console.print(f"    {doc['call']}", markup=False)
    for lim in doc.get("limits") or []:
        console.print(f"\nStill limiting: {lim['summary']}\n  {lim['detail']}", markup=False)


# --------------------------------------------------------------------------- command


@click.group(cls=GpudoctorGroup, context_settings=CONTEXT_SETTINGS)
def probe() -> None:
    """Measure things in a target interpreter (runs torch there, never in gpudoctor)."""


@probe.command(context_settings=CONTEXT_SETTINGS)
@click.option(
    "--python",
    "python",
    default=None,
    metavar="PATH",
    help=f"Target interpreter (Python {'.'.join(map(str, DATALOADER_MIN_PYTHON))} or newer, with torch) to "
    "measure in; default: the current one.",
)
@click.option(
    "--dataset",
    metavar="MODULE:CALLABLE",
    help="A factory returning your Dataset, or a DataLoader whose dataset and collate_fn are reused. "
    "MODULE is imported from the current directory or PYTHONPATH.",
)
@click.option("--synthetic", type=click.Choice(["image"]), help="Use decoded-image-like synthetic samples.")
@click.option(
    "--cost-ms",
    default=5.0,
    show_default=True,
    type=FiniteFloatRange(min=0),
    help="CPU time per synthetic sample (decode + augmentation stand-in), ms.",
)
@click.option(
    "--image-size",
    default=64,
    show_default=True,
    type=click.IntRange(min=1),
    help="Synthetic images are 3 x SIZE x SIZE.",
)
@click.option(
    "--batch-size", type=click.IntRange(min=1), default=None, help="Batch size (default: the DataLoader's, else 32)."
)
@click.option(
    "--step-ms",
    type=FiniteFloatRange(min=0),
    default=None,
    help="Simulated training step time in ms (default 20 when no --model).",
)
@click.option(
    "--model",
    metavar="MODULE:CALLABLE",
    help="A factory returning a torch.nn.Module; each step runs "
    "forward+backward on the batch's first tensor (on the GPU when there is one).",
)
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--budget-s", default=30.0, show_default=True, type=FiniteFloatRange(min=2), help=BUDGET_HELP)
@click.option("--exhaustive", is_flag=True, help="Measure the full grid instead of the adaptive search.")
@click.option(
    "--config-s",
    type=FiniteFloatRange(min=0.1),
    default=None,
    help="Seconds per configuration (default: the budget split over the planned ones).",
)
@click.option(
    "--max-workers",
    type=click.IntRange(min=0),
    default=None,
    help="Never try more workers than this (default: the usable CPUs).",
)
@click.option("--format", "fmt", type=click.Choice(["console", "json"]), default="console", show_default=True)
@click.option("--no-save", is_flag=True, help="Do not save the result for `gpudoctor check dataloader.shm`.")
def dataloader(
    python,
    dataset,
    synthetic,
    cost_ms,
    image_size,
    batch_size,
    step_ms,
    model,
    device,
    budget_s,
    exhaustive,
    config_s,
    max_workers,
    fmt,
    no_save,
):
    """Measure the data stall of a DataLoader and find settings that remove it.

    Runs in the target interpreter: samples/s, data-stall fraction (time
    waiting in next() / total), time to first batch, worker RSS, /dev/shm use
    and GPU utilisation per configuration; recommends the cheapest one within
    5 % of the best throughput and says what still limits it.

    \b
    Examples:
      gpudoctor probe dataloader --synthetic image --cost-ms 8 --step-ms 30
      gpudoctor probe dataloader --dataset mytrain.data:make_dataset --batch-size 64
      gpudoctor probe dataloader --dataset mytrain.data:make_loader --model mytrain.net:build
      gpudoctor probe dataloader --python ~/venvs/train/bin/python --synthetic image --format json
    """
    from gpudoctor.render.console import make_console

    if bool(dataset) == bool(synthetic):
        raise usage("give exactly one of --dataset MODULE:CALLABLE or --synthetic image")
    for name, spec in (("--dataset", dataset), ("--model", model)):
        if spec and not _SPEC.match(spec):
            raise usage(f"{name} {spec}: expected MODULE:CALLABLE, e.g. mytrain.data:make_dataset")
    if model and step_ms is not None:
        raise usage("give --step-ms or --model, not both")
    python = python or sys.executable
    check_pythons([python])
    deadline = command_started() + budget_s
    probe_budget = max(MIN_PROBE_BUDGET_S, deadline - time.monotonic() - REPORT_RESERVE_S)
    config = {
        "dataset": dataset,
        "synthetic": synthetic,
        "cost_ms": cost_ms,
        "image_size": image_size,
        "batch_size": batch_size,
        "step_ms": 20.0 if step_ms is None else step_ms,
        "model": model,
        "device": device,
        "budget_s": round(probe_budget, 3),
        "exhaustive": exhaustive,
        "config_s": config_s,
        "max_workers": max_workers,
        "progress": True,
    }
    err_console = make_console(sys.stderr)
    status = None
    if err_console.is_terminal:
        status = err_console.status(f"measuring DataLoader configurations (budget {budget_s:g} s)...")
        status.start()

    def on_progress(p: dict[str, Any]) -> None:
        if status is not None:
            cfg = p["config"]
            status.update(
                f"[{p['done']}/~{p['planned']}] num_workers={cfg['num_workers']}: "
                f"{p['samples_per_s']:.0f} samples/s, stall {100 * p['stall_fraction']:.0f} %"
            )

    started = time.monotonic()
    try:
        doc = run_probe(python, config, max(0.0, deadline - started) + GRACE_S, on_progress)
    except ProbeHung as exc:  # a verdict on the dataset (exit 1), not a usage error
        if status is not None:
            status.stop()
        from gpudoctor.redact import redact_text

        click.echo(f"gpudoctor: error: {redact_text(exc.format_message())}", err=True)
        sys.exit(EXIT_FAIL)
    except ProbeRunError:
        _refuse_unsupported_python(python)
        raise
    finally:
        if status is not None:
            status.stop()
    doc["wall_s"] = round(time.monotonic() - started, 3)  # the target process alone
    doc["probe_budget_s"] = config["budget_s"]  # what the target was given
    doc["budget_s"] = budget_s  # what --budget-s bounds: the whole command
    doc["command_elapsed_s"] = round(time.monotonic() - (deadline - budget_s), 3)  # start-up to now
    from gpudoctor.redact import redact_value

    doc = redact_value(doc)  # the dataset's own messages and reprs are probed strings: redacted, cleaned
    err = doc.get("error")
    if err and err["kind"] in ("factory", "usage"):
        raise ProbeRunError(err["message"])
    # a synthetic dataset says nothing about the user's batches: only real datasets are kept for dataloader.shm
    if not err and not no_save and not synthetic and doc.get("recommended") is not None:
        _save(doc, python)
    if fmt == "json":
        click.echo(json.dumps(doc, indent=2))
    else:
        render_console(doc, make_console(sys.stdout))
    sys.exit(EXIT_FAIL if err else EXIT_OK)


def _refuse_unsupported_python(python: str) -> None:
    """After a probe that gave no result: raise a clear :class:`ProbeRunError` when ``python`` is
    older than :data:`DATALOADER_MIN_PYTHON` (asked with a one-liner that runs on Python 2 and 3)."""
    from gpudoctor.checks._common import newest_torch_for_python
    from gpudoctor.probe import VERSION_CODE

    try:
        out = subprocess.run([python, "-c", VERSION_CODE], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return
    m = re.fullmatch(r"(\d+)\.(\d+)", out.strip())
    if not m or (int(m.group(1)), int(m.group(2))) >= DATALOADER_MIN_PYTHON:
        return
    version = out.strip()
    last = newest_torch_for_python(version)
    floor = ".".join(map(str, DATALOADER_MIN_PYTHON))
    raise ProbeRunError(
        f"--python {python} is Python {version}; the DataLoader probe runs on Python {floor} or "
        f"newer"
        + (f" (and the newest torch Python {version} can install is {last})" if last else "")
        + "; point --python at an environment with Python 3.10 or newer"
    ) from None


def _save(doc: dict[str, Any], python: str) -> None:
    """Keep the measured batch size and recommendation for ``dataloader.shm`` (best effort)."""
    r = doc["results"][doc["recommended"]]
    record = {
        "python": python,
        "batch_bytes": r.get("batch_bytes"),
        "batch_size": doc.get("batch_size"),
        "num_workers": r["config"]["num_workers"],
        "prefetch_factor": r["config"].get("prefetch_factor") or 0,
        "samples_per_s": r.get("samples_per_s"),
        "shm_peak_mib": r.get("shm_peak_mib"),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    path = saved_result_path()
    try:
        from gpudoctor.output import write_text

        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(str(path), json.dumps(record, indent=2) + "\n")
    except OSError as exc:
        click.echo(f"gpudoctor: warning: could not save the result to {path}: {exc.strerror or exc}", err=True)
