#!/usr/bin/env python3
"""Benchmark: the gate's cost in instructions, against the floor of any gate built like it.

Time on a shared machine moves with the load (a paired run on two busy cores varied by a
third); the number of instructions a process executes does not. This script counts them with
valgrind's cachegrind (``I refs``; ``--cache-sim=no``, so it runs at about 1/50 of native
speed), for:

- a bare interpreter (``python -I -c pass``): the unit every line is divided by;
- the light probe (``probe/_script.py --level light``) alone: what the gate's child costs in the
  job's interpreter;
- the standard-library floor: a process that only imports what any Python gate needs to start a
  probe and judge its answer (subprocess, json, dataclasses, re, threading, concurrent.futures,
  typing) and then runs the light probe, no gpudoctor code at all;
- the same plus the third-party libraries the gate imports (click, distro, platformdirs,
  packaging, tomllib) and the stdlib they need;
- ``gpudoctor gate``: the doctor process alone, and with its children (the probe, short commands).

Issue 23 asks for the gate at <= 8x a bare interpreter. The floor lines show how much of that any
gate that starts the light probe in the job's interpreter spends before gpudoctor's own code.

Usage:
    python benchmarks/gate_floor.py [--python PATH]

Needs ``valgrind`` on PATH (Debian: ``apt-get install valgrind``); without it, says so and exits 2.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _startup import compile_package, doctor_command

SCRIPT = Path(__file__).resolve().parent.parent / "src" / "gpudoctor" / "probe" / "_script.py"
STDLIB = "import subprocess, json, dataclasses, re, threading, concurrent.futures, typing"
THIRD_PARTY = "import click, distro, platformdirs, packaging.version, tomllib, socket, shlex, pathlib"
PROBE_CALL = "subprocess.run([sys.executable, '-I', sys.argv[1], '--level', 'light'], capture_output=True)"


def instructions(argv: list[str], env: dict, children: bool) -> int:
    """Instructions executed by ``argv`` (and its children when ``children``), from cachegrind."""
    with tempfile.TemporaryDirectory(prefix="gpudoctor-bench-") as tmp:
        cmd = [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=no",
            f"--cachegrind-out-file={tmp}/cg.%p",
            f"--trace-children={'yes' if children else 'no'}",
            f"--log-file={tmp}/log.%p",
            *argv,
        ]
        subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        total = 0
        for log in Path(tmp).glob("log.*"):
            m = re.search(r"I\s+refs:\s+([\d,]+)", log.read_text(errors="replace"))
            if m:
                total += int(m.group(1).replace(",", ""))
        return total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=sys.executable, help="interpreter of the venv to measure")
    args = ap.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("gate_floor: valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    env = dict(os.environ)
    print(f"doctor bytecode: {compile_package(args.python, env)}")
    py = args.python
    rows = [
        ("bare python (-I -c pass)", [py, "-I", "-c", "pass"], False),
        ("light probe alone", [py, "-I", str(SCRIPT), "--level", "light"], False),
        ("floor: stdlib + light probe", [py, "-I", "-c", f"import sys; {STDLIB}; {PROBE_CALL}", str(SCRIPT)], True),
        (
            "floor: + third-party + light probe",
            [py, "-I", "-c", f"import sys; {STDLIB}; {THIRD_PARTY}; {PROBE_CALL}", str(SCRIPT)],
            True,
        ),
        ("gpudoctor gate, doctor alone", [*doctor_command(py), "gate"], False),
        ("gpudoctor gate, with its children", [*doctor_command(py), "gate"], True),
    ]
    bare = 0
    print(f"{'':38} {'instructions':>14} {'x bare':>8}")
    for label, cmd, children in rows:
        n = instructions(cmd, env, children)
        bare = bare or n
        print(f"{label:38} {n / 1e6:12.1f} M {n / bare:8.1f}", flush=True)
    print("target (issue 23): gpudoctor gate <= 8x a bare interpreter")
    return 0


if __name__ == "__main__":
    sys.exit(main())
