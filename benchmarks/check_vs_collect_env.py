#!/usr/bin/env python3
"""Benchmark: ``gpudoctor check`` against PyTorch's own ``python -m torch.utils.collect_env``.

Both run in the same venv (the interpreter running this script, or ``--python``),
alternately, ``--runs`` times each, with stdout discarded. Prints each run's
wall and CPU time (user + system from ``wait4``: the process and the children it
waited for, the probe included), the medians, and the ratios ``gpudoctor /
collect_env`` of both (issue 23 asks for at most 0.8), plus peak resident memory:

- the gpudoctor process itself (``ru_maxrss`` of RUSAGE_SELF, reported by a
  small wrapper at exit in one extra, untimed run), which is what the tool
  costs next to a training job;
- the gpudoctor process tree (``wait4`` rusage: the maximum over the doctor and
  the probe child that imports torch), and the same for collect_env.

Usage:
    python benchmarks/check_vs_collect_env.py [--runs N] [--python PATH] [-- extra gpudoctor check args]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from _startup import compile_package, cpu_seconds, doctor_command, ratio_line

_SELF_RSS = (
    "import atexit, resource, sys\n"
    "out = sys.argv.pop(1)\n"
    "atexit.register(lambda: open(out, 'w').write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)))\n"
    "sys.argv[0] = 'gpudoctor'\n"
    "from gpudoctor.cli import main\n"
    "main()\n"
)


def timed(argv: Sequence[str], env: dict) -> tuple[float, float, int, int]:
    """Run ``argv``; return (wall seconds, CPU seconds, exit status, peak RSS of the process tree in KiB)."""
    start = time.perf_counter()
    proc = subprocess.Popen(list(argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return elapsed, cpu_seconds(usage), proc.returncode, usage.ru_maxrss


def doctor_self_rss(python: str, extra: Sequence[str], env: dict) -> int:
    """Peak RSS (KiB) of the gpudoctor process alone, without its probe child."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rss"
        subprocess.run(
            [python, "-c", _SELF_RSS, str(out), "check", "--offline", *extra],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            check=False,
        )
        return int(out.read_text()) if out.exists() else -1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each command (default 5)")
    parser.add_argument("--python", default=sys.executable, help="the venv's interpreter (default: this one)")
    parser.add_argument("extra", nargs="*", help="extra arguments for `gpudoctor check` (after --)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    python = args.python
    doctor = doctor_command(python)
    # --offline: a benchmark sends no traffic beyond this machine (collect_env uses none either);
    # GPUDOCTOR_LOOPBACK_ONLY is the belt to those braces
    doctor += ["check", "--offline", *args.extra]
    collect_env = [python, "-m", "torch.utils.collect_env"]
    env = dict(os.environ, NO_COLOR="1", GPUDOCTOR_LOOPBACK_ONLY="1")
    print(f"doctor bytecode: {compile_package(python, env)}")  # as an installed wheel has it

    # one untimed warm-up of each so the first timed run does not pay for a cold page cache
    for cmd in (doctor, collect_env):
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)

    times: dict[str, list[float]] = {"gpudoctor check": [], "collect_env": []}
    cpu: dict[str, list[float]] = {"gpudoctor check": [], "collect_env": []}
    rss = {"gpudoctor check": [], "collect_env": []}
    codes: list[int] = []
    for i in range(args.runs):
        for name, cmd in (("gpudoctor check", doctor), ("collect_env", collect_env)):
            elapsed, used, code, maxrss = timed(cmd, env)
            times[name].append(elapsed)
            cpu[name].append(used)
            rss[name].append(maxrss)
            if name == "gpudoctor check":
                codes.append(code)
        print(
            f"run {i + 1}: gpudoctor check {times['gpudoctor check'][-1]:.3f} s ({cpu['gpudoctor check'][-1]:.3f} s CPU), "
            f"collect_env {times['collect_env'][-1]:.3f} s ({cpu['collect_env'][-1]:.3f} s CPU)"
        )

    med_doc = statistics.median(times["gpudoctor check"])
    med_env = statistics.median(times["collect_env"])
    self_rss = doctor_self_rss(python, args.extra, env)
    print()
    print(f"interpreter:                 {python}")
    print(
        f"runs:                        {args.runs} each, alternating (exit status of gpudoctor: {sorted(set(codes))})"
    )
    cpu_doc, cpu_env = statistics.median(cpu["gpudoctor check"]), statistics.median(cpu["collect_env"])
    print(f"median gpudoctor check:      {med_doc:.3f} s wall, {cpu_doc:.3f} s CPU")
    print(f"median collect_env:          {med_env:.3f} s wall, {cpu_env:.3f} s CPU")
    print(ratio_line("check / collect_env (wall)", med_doc, med_env, 0.8))
    print(ratio_line("check / collect_env (CPU)", cpu_doc, cpu_env, 0.8))
    print(f"peak RSS gpudoctor process:  {self_rss / 1024:.1f} MiB (the doctor alone, without its probe child)")
    print(f"peak RSS gpudoctor tree:     {max(rss['gpudoctor check']) / 1024:.1f} MiB (max of doctor and probe child)")
    print(f"peak RSS collect_env:        {max(rss['collect_env']) / 1024:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
