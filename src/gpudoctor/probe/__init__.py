"""Run the probe script inside a target interpreter and parse what it prints.

The doctor never imports torch itself: :func:`probe_target` starts the target
interpreter once (argv ``[python, <_script.py>]``, no shell) under a timeout,
with the target's environment, and turns its JSON into
:class:`~gpudoctor.facts.targets.ProbeFacts`. A missing interpreter, a
timeout (the process group is killed), a crash or unparsable output become an
:class:`~gpudoctor.facts.Unavailable` with the reason and stderr's last lines.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping, Optional, Union

from gpudoctor.facts import FactsDecodeError, Unavailable
from gpudoctor.facts.base import from_jsonable
from gpudoctor.facts.targets import ProbeFacts
from gpudoctor.system import System, signal_name

__all__ = ["PROBE_SCRIPT", "MARKER", "ProbeError", "parse_probe_output", "probe_target", "probe_argv"]

#: Path of the stdlib-only script the target interpreter runs.
PROBE_SCRIPT = Path(__file__).with_name("_script.py")
MARKER = "@@gpudoctor-probe@@"


class ProbeError(ValueError):
    """The probe's output could not be understood; the message says why."""


def parse_probe_output(stdout: str) -> ProbeFacts:
    """Extract and decode the marker-framed JSON document. Raises :class:`ProbeError`."""
    start = stdout.rfind(MARKER, 0, stdout.rfind(MARKER))
    end = stdout.rfind(MARKER)
    if start < 0 or end <= start:
        raise ProbeError("the probe printed no result document")
    try:
        doc: Any = json.loads(stdout[start + len(MARKER):end])
    except ValueError as exc:
        raise ProbeError(f"the probe's result is not valid JSON: {exc}") from None
    try:
        return from_jsonable(ProbeFacts, doc)
    except FactsDecodeError as exc:
        raise ProbeError(f"the probe's result does not match this gpudoctor: {exc}") from None


def probe_argv(python: str, deep: bool = False) -> list:
    """The argv that probes ``python`` (``--deep`` adds the GPU smoke test, ``probe/_smoke.py``)."""
    return [python, str(PROBE_SCRIPT)] + (["--deep"] if deep else [])


def probe_target(system: System, python: str, env: Optional[Mapping[str, str]] = None,
                 timeout_s: float = 60.0, deep: bool = False) -> Union[ProbeFacts, Unavailable]:
    """Probe one interpreter. ``env`` defaults to the system's environment; ``deep``
    runs the GPU smoke test too.

    Returns ProbeFacts, or Unavailable naming the interpreter and the cause.
    """
    if os.sep in python and not os.path.exists(python):
        return Unavailable(f"the interpreter {python} does not exist")
    result = system.runner.run(probe_argv(python, deep), timeout_s=timeout_s,
                               env=dict(system.env if env is None else env))
    if result.error == "not-found":
        return Unavailable(f"the interpreter {python} was not found")
    if result.error == "timeout":
        return Unavailable(f"the probe in {python} did not finish within {timeout_s:g} s and was killed "
                           f"(a hung import or CUDA initialisation)")
    if result.error:
        return Unavailable(f"the probe could not start {python}: {result.error}")
    try:
        return parse_probe_output(result.stdout)
    except ProbeError as exc:
        tail = " | ".join(result.stderr.strip().splitlines()[-3:])
        if result.returncode is not None and result.returncode < 0:
            sig = signal_name(-result.returncode)
            hint = " (a crash in native code, typically while importing torch or initialising CUDA)" \
                if sig in ("SIGSEGV", "SIGBUS", "SIGILL", "SIGABRT") else ""
            return Unavailable(f"the probe in {python} crashed with {sig}{hint}" + (f"; stderr: {tail}" if tail else ""))
        status = f"exit status {result.returncode}" if result.returncode is not None else "no exit status"
        return Unavailable(f"the probe in {python} failed ({status}): {exc}" + (f"; stderr: {tail}" if tail else ""))
