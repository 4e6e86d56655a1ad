#!/usr/bin/env python3
"""Benchmark: gpudoctor's kernelspec lister against jupyter_client's ``KernelSpecManager``.

``gpudoctor check`` runs ``probe/_kernelspecs.py`` in the Jupyter server's
interpreter. Both commands list the same kernelspecs (a temporary HOME and
``JUPYTER_PATH`` holding ``--kernels`` specs, plus what the interpreter's prefix
has) in the interpreter running this script, or ``--python``, alternately,
``--runs`` times each: the lister (``jupyter_core.paths`` only) and a
``python -c`` that imports ``jupyter_client.kernelspec`` and calls
``find_kernel_specs()`` then ``get_kernel_spec(name).to_dict()`` per name, the
work the lister did before it stopped importing jupyter_client. Prints each
run's wall and CPU time (user + system, from ``wait4``), the medians and the
ratios lister / KernelSpecManager.

Usage:
    python benchmarks/kernelspecs.py [--runs N] [--kernels N] [--python PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from _startup import cpu_seconds, ratio_line

LISTER = Path(__file__).resolve().parent.parent / "src" / "gpudoctor" / "probe" / "_kernelspecs.py"
KERNEL_SPEC_MANAGER = (
    "from jupyter_client.kernelspec import KernelSpecManager\n"
    "m = KernelSpecManager()\n"
    "specs = {n: m.get_kernel_spec(n).to_dict() for n in m.find_kernel_specs()}\n"
)


def timed(argv: Sequence[str], env: dict) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, exit status) of one run of ``argv``, output discarded."""
    start = time.perf_counter()
    proc = subprocess.Popen(list(argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - start, cpu_seconds(usage), os.waitstatus_to_exitcode(status)


def kernel_tree(root: Path, count: int) -> dict:
    """``count`` kernelspecs under ``root`` and an environment (temporary HOME and XDG dirs) that finds them."""
    home, kernels = root / "home", root / "jupyter" / "kernels"
    for i in range(count):
        (kernels / f"env{i}").mkdir(parents=True)
        argv = [f"/opt/envs/env{i}/bin/python", "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        spec = {"argv": argv, "display_name": f"env {i}", "language": "python", "env": {"OMP_NUM_THREADS": "4"}}
        (kernels / f"env{i}" / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
    home.mkdir()
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "JUPYTER_PATH": str(kernels.parent),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="runs of each command (default 10)")
    parser.add_argument("--kernels", type=int, default=5, help="kernelspecs in the temporary JUPYTER_PATH (default 5)")
    parser.add_argument("--python", default=sys.executable, help="the Jupyter server's interpreter (default: this one)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.kernels < 0:
        parser.error("--runs must be at least 1 and --kernels at least 0")

    commands = {
        "lister": [args.python, str(LISTER)],
        "KernelSpecManager": [args.python, "-c", KERNEL_SPEC_MANAGER],
    }
    wall: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    with tempfile.TemporaryDirectory() as tmp:
        env = kernel_tree(Path(tmp), args.kernels)
        for name, cmd in commands.items():  # untimed warm-up (page cache, bytecode)
            if timed(cmd, env)[2] != 0:
                print(f"{name} failed in {args.python}: {' '.join(cmd[:2])}", file=sys.stderr)
                return 1
        for i in range(args.runs):
            line = []
            for name, cmd in commands.items():
                elapsed, used, _ = timed(cmd, env)
                wall[name].append(elapsed)
                cpu[name].append(used)
                line.append(f"{name} {elapsed:.3f} s ({used:.3f} s CPU)")
            print(f"run {i + 1}: " + ", ".join(line))

    med = {name: (statistics.median(wall[name]), statistics.median(cpu[name])) for name in commands}
    print()
    print(f"interpreter:                 {args.python}")
    print(f"runs:                        {args.runs} each, alternating; {args.kernels} kernelspecs + the prefix's")
    for name, (w, c) in med.items():
        print(f"median {name + ':':<21}{w:.3f} s wall, {c:.3f} s CPU")
    print(ratio_line("lister / KernelSpecManager (wall)", med["lister"][0], med["KernelSpecManager"][0]))
    print(ratio_line("lister / KernelSpecManager (CPU)", med["lister"][1], med["KernelSpecManager"][1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
