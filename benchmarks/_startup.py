"""Shared by the start-up benchmarks: how the doctor is started (:func:`doctor_command`), and its
package byte-compiled the way pip does when it installs a wheel (:func:`compile_package`).

An editable install run with ``PYTHONDONTWRITEBYTECODE=1`` in the environment
never caches its bytecode, so every timed start would compile gpudoctor's
source (about 0.1 s on the reference machine) while torch, installed from a
wheel, loads precompiled files. Compiling in place first measures what an
installed copy costs.
"""

from __future__ import annotations

import subprocess
from pathlib import Path


def doctor_command(python: str) -> list[str]:
    """argv prefix that runs gpudoctor in ``python``'s venv: its console script, else ``python -m gpudoctor``."""
    script = Path(python).with_name("gpudoctor")
    return [str(script)] if script.exists() else [python, "-m", "gpudoctor"]


def compile_package(python: str, env: dict) -> str:
    """Byte-compile the ``gpudoctor`` package ``python`` imports (``compileall``, in place); returns
    a line for the benchmark's report. Never raises for a failed compile: the line says so."""
    where = subprocess.run(
        [python, "-c", "import gpudoctor, os; print(os.path.dirname(gpudoctor.__file__))"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    ).stdout.strip()
    if not where:
        return "package not found (not compiled)"
    done = subprocess.run([python, "-m", "compileall", "-q", where], env=env, check=False, capture_output=True)
    return f"compiled in place ({where})" if done.returncode == 0 else "compileall failed (source compiled per run)"


def cpu_seconds(usage) -> float:
    """User plus system CPU seconds of a ``wait4`` rusage: the process and every child it waited for
    (the doctor's probe and short commands; collect_env's own children)."""
    return usage.ru_utime + usage.ru_stime


def ratio_line(label: str, num: float, den: float, target: float | None = None) -> str:
    """``label: 0.123  (target <= 0.8: met)``: one ratio, the way every benchmark prints it."""
    value = num / den if den else float("inf")
    verdict = "" if target is None else f"  (target <= {target:g}: {'met' if value <= target else 'MISSED'})"
    return f"{label + ':':<40}{value:8.3f}{verdict}"
