"""Run the probe script inside a target interpreter and parse what it prints.

The doctor never imports torch itself: :func:`probe_target` starts the target
interpreter once (argv ``[python, -c, LOADER, <_script.py>, --level, LEVEL]``, no shell) under a timeout,
with the target's environment, and turns its JSON into
:class:`~gpudoctor.facts.targets.ProbeFacts`. A missing interpreter, a
timeout (the process group is killed), a crash or unparsable output become an
:class:`~gpudoctor.facts.Unavailable` with the reason and stderr's last lines.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpudoctor.facts import FactsDecodeError, Unavailable
from gpudoctor.facts.base import from_jsonable
from gpudoctor.facts.targets import ProbeFacts
from gpudoctor.system import System, signal_name

__all__ = [
    "LEVELS",
    "LOADER",
    "MARKER",
    "MIN_PYTHON",
    "PROBE_SCRIPT",
    "VERSION_CODE",
    "ProbeError",
    "parse_probe_output",
    "probe_argv",
    "probe_target",
    "python_supported",
    "target_python_version",
    "timed_out",
    "unsupported_reason",
]

#: Path of the stdlib-only script the target interpreter runs, at either level: ``light``
#: (metadata, version files, the CUDA driver API; imports no framework) or ``full`` (imports torch).
PROBE_SCRIPT = Path(__file__).with_name("_script.py")
#: probe levels, cheapest first (the script's own ``LEVELS``)
LEVELS = ("light", "full")
MARKER = "@@gpudoctor-probe@@"
#: The oldest Python the probe (:mod:`gpudoctor.probe._script`, both levels) runs on: it is written
#: for 3.6+ (tests/test_probe_script.py parses it with the 3.6 grammar and rejects 3.7+ stdlib names).
#: Python 2 fails at ``sys.implementation`` (or earlier, on a non-ASCII source line).
MIN_PYTHON = (3, 6)
#: Prints ``major.minor`` on every Python from 2.6 on (no print function, no f-string).
VERSION_CODE = 'import sys; sys.stdout.write("%d.%d" % sys.version_info[:2])'
_VERSIONS: dict = {}
_VERSIONS_LOCK = threading.Lock()


def python_supported(version: str) -> bool:
    """Whether a ``major.minor[.micro]`` Python runs the probe (:data:`MIN_PYTHON` or newer)."""
    try:
        return tuple(int(x) for x in version.split(".")[:2]) >= MIN_PYTHON
    except ValueError:
        return True


def target_python_version(
    system: System, python: str, env: Mapping[str, str] | None = None, timeout_s: float = 10.0
) -> str:
    """``"2.7"``: the target's Python version from :data:`VERSION_CODE`, or "" when it cannot
    be run or printed something else. Asked once per (interpreter, environment)."""
    env_d = dict(system.env if env is None else env)
    key = (python, tuple(sorted(env_d.items())))
    with _VERSIONS_LOCK:
        if key in _VERSIONS:
            return _VERSIONS[key]
    try:
        result = system.runner.run([python, "-c", VERSION_CODE], timeout_s=timeout_s, env=env_d)
    except Exception:  # best effort: the probe's own failure reason stands without it
        return ""
    out = (result.stdout or "").strip()
    version = out if not result.error and re.fullmatch(r"\d+\.\d+", out) else ""
    with _VERSIONS_LOCK:
        _VERSIONS[key] = version
    return version


def unsupported_reason(python: str, version: str) -> str:
    """The one-line reason for a target whose Python the probe does not support."""
    floor = ".".join(map(str, MIN_PYTHON))
    return f"{python} is Python {version}, which gpudoctor's probe does not support (it needs Python {floor} or newer)"


class ProbeError(ValueError):
    """The probe's output could not be understood; the message says why."""


def parse_probe_output(stdout: str) -> ProbeFacts:
    """Extract and decode the marker-framed JSON document. Raises :class:`ProbeError`."""
    start = stdout.rfind(MARKER, 0, stdout.rfind(MARKER))
    end = stdout.rfind(MARKER)
    if start < 0 or end <= start:
        raise ProbeError("the probe printed no result document")
    from gpudoctor.inputs import InputError, loads_json

    try:
        doc: Any = loads_json(stdout[start + len(MARKER) : end], "the probe's result")
    except InputError as exc:
        raise ProbeError(f"the probe's result is not valid JSON: {exc}") from None
    try:
        return from_jsonable(ProbeFacts, doc)
    except FactsDecodeError as exc:
        raise ProbeError(f"the probe's result does not match this gpudoctor: {exc}") from None
    except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as exc:
        raise ProbeError(f"the probe's result does not match this gpudoctor ({type(exc).__name__}: {exc})") from None


#: What the target runs: ``_script.py`` as ``python SCRIPT`` would (its directory first on sys.path,
#: so ``_smoke`` imports and the working directory shadows nothing), but loaded as a module, so the
#: byte-code pip compiled at install time is used instead of compiling the script on every run (a
#: script run as ``__main__`` is never cached: 20-50 ms a probe). Nothing is written in the target.
#: Python 3.6 syntax, like the script.
LOADER = (
    "import sys\n"
    "from importlib.util import module_from_spec, spec_from_file_location\n"
    "sys.path[0] = sys.argv[1].rpartition('/')[0]\n"
    "spec = spec_from_file_location('gpudoctor_probe', sys.argv[1])\n"
    "probe = module_from_spec(spec)\n"
    "written, sys.dont_write_bytecode = sys.dont_write_bytecode, True\n"
    "spec.loader.exec_module(probe)\n"
    "sys.dont_write_bytecode = written\n"
    "probe.main(sys.argv[2:])\n"
)


def probe_argv(python: str, level: str = "full", deep: bool = False) -> list:
    """The argv that probes ``python`` at ``level`` (``light`` or ``full``; ``deep`` adds the full
    probe's GPU smoke test, ``probe/_smoke.py``). Raises ValueError for another level."""
    if level not in LEVELS:
        raise ValueError(f"unknown probe level {level!r}; known: {', '.join(LEVELS)}")
    return [python, "-c", LOADER, str(PROBE_SCRIPT), "--level", level] + (
        ["--deep"] if deep and level == "full" else []
    )


#: the words of :func:`probe_target`'s reason for a probe killed at its timeout (see :func:`timed_out`)
_TIMED_OUT = " did not finish within "


def timed_out(probe: object) -> bool:
    """Whether ``probe`` (a :func:`probe_target` result) is the Unavailable of a probe that was killed at
    its timeout: the interpreter hangs, so nothing else should be asked of it (another run would hang too)."""
    return isinstance(probe, Unavailable) and _TIMED_OUT in probe.reason


def probe_target(
    system: System,
    python: str,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 60.0,
    level: str = "full",
    deep: bool = False,
) -> ProbeFacts | Unavailable:
    """Probe one interpreter at ``level``. ``env`` defaults to the system's environment; ``deep``
    runs the GPU smoke test too (full level only).

    Returns ProbeFacts, or Unavailable naming the interpreter and the cause.
    """
    if os.sep in python and not os.path.exists(python):
        return Unavailable(f"the interpreter {python} does not exist")
    result = system.runner.run(
        probe_argv(python, level, deep), timeout_s=timeout_s, env=dict(system.env if env is None else env)
    )
    if result.error == "not-found":
        return Unavailable(f"the interpreter {python} was not found")
    if result.error == "timeout":
        return Unavailable(
            f"the probe in {python}{_TIMED_OUT}{timeout_s:g} s and was killed (a hung import or CUDA initialisation)"
        )
    if result.error:
        return Unavailable(f"the probe could not start {python}: {result.error}")
    try:
        return parse_probe_output(result.stdout)
    except ProbeError as exc:
        version = target_python_version(system, python, env)
        if version and not python_supported(version):
            return Unavailable(unsupported_reason(python, version))
        tail = " | ".join(result.stderr.strip().splitlines()[-3:])
        if result.returncode is not None and result.returncode < 0:
            sig = signal_name(-result.returncode)
            hint = (
                " (a crash in native code, typically while importing torch or initialising CUDA)"
                if sig in ("SIGSEGV", "SIGBUS", "SIGILL", "SIGABRT")
                else ""
            )
            return Unavailable(
                f"the probe in {python} crashed with {sig}{hint}" + (f"; stderr: {tail}" if tail else "")
            )
        status = f"exit status {result.returncode}" if result.returncode is not None else "no exit status"
        return Unavailable(f"the probe in {python} failed ({status}): {exc}" + (f"; stderr: {tail}" if tail else ""))
