#!/usr/bin/env python3
"""Benchmark: ``gpudoctor gate`` against ``python -m torch.utils.collect_env``, a bare
``python -I -c pass`` and ``python -c "import torch"``, plus ``gpudoctor check --offline``
against collect_env.

All run with the same interpreter (the venv running this script, or ``--python``),
in paired, alternating rounds (gate, collect_env, bare python, import torch, check),
``--runs`` rounds, stdout/stderr discarded, after one untimed warm-up of each. Each
run is measured twice: wall time, and CPU time (user + system from ``wait4``: the
process and the children it waited for, such as the probe). Prints each round, the
medians and the ratios of both against the targets (issue 23: gate <= 0.06x
collect_env and <= 8x a bare interpreter; check <= 0.8x collect_env), and the
gate's peak resident memory:

- tree sum of PSS: the doctor plus its live children (the probe, short
  commands), sampled from ``/proc/<pid>/smaps_rollup`` every 2 ms and summed
  per sample, the maximum over the run (what the node pays at one moment:
  pages shared between processes counted once);
- tree sum of VmRSS, the same way (an overestimate: a child forked by the
  doctor counts the doctor's pages again until it execs);
- ``wait4`` ru_maxrss: the largest single process of the tree (a floor);
- the issue's target: <= 60 MiB for doctor plus children.

Before the rounds the doctor's package is byte-compiled in place (``_startup.py``),
as pip does when it installs a wheel and as torch's files already are: an
editable install under ``PYTHONDONTWRITEBYTECODE=1`` would otherwise charge the
gate for compiling its own source on every start (about 0.1 s here), a cost no
installed copy pays.

Usage:
    python benchmarks/gate.py [--runs N] [--python PATH] [--no-check]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

from _startup import compile_package, cpu_seconds, doctor_command, ratio_line


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _pss_kib(pid: int) -> int:
    """Proportional set size: each shared page divided among the processes mapping it.

    A child forked by the doctor shares every page with it until it execs
    (copy on write); VmRSS counts those pages in both, PSS once."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                out.extend(int(c) for c in fh.read().split())
    except OSError:
        pass
    return out


def _tree(pid: int) -> tuple[int, int]:
    """(VmRSS sum, PSS sum) of ``pid`` and its live descendants, KiB."""
    rss = pss = 0
    stack, seen = [pid], set()
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        rss += _rss_kib(p)
        pss += _pss_kib(p)
        stack.extend(_children(p))
    return rss, pss


def timed(argv: Sequence[str], env: dict, sample: bool = False) -> tuple[float, float, int, int, int, int]:
    """Run ``argv``: (wall s, CPU s, exit status, max single-process RSS KiB from wait4, max tree-sum
    RSS KiB, max tree-sum PSS KiB)."""
    peak = [0, 0]
    start = time.perf_counter()
    proc = subprocess.Popen(list(argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    done = threading.Event()

    def sampler() -> None:
        while not done.is_set():
            rss, pss = _tree(proc.pid)
            peak[0], peak[1] = max(peak[0], rss), max(peak[1], pss)
            time.sleep(0.002)

    thread = threading.Thread(target=sampler, daemon=True) if sample else None
    if thread:
        thread.start()
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    done.set()
    if thread:
        thread.join()
    return elapsed, cpu_seconds(usage), os.waitstatus_to_exitcode(status), usage.ru_maxrss, peak[0], peak[1]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="alternating rounds (default 7)")
    parser.add_argument("--python", default=sys.executable, help="the venv's interpreter (default: this one)")
    parser.add_argument("--no-check", action="store_true", help="leave `gpudoctor check` out of the rounds")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    python = args.python
    doctor = doctor_command(python)
    commands: dict[str, list[str]] = {
        # --require-gpus 0: no GPU requirement, so the measured path is the same on a CPU machine (where an
        # undeclared gate stops at "no GPU is visible") and on a GPU one
        "gpudoctor gate": doctor + ["gate", "-q", "--require-gpus", "0"],
        "collect_env": [python, "-m", "torch.utils.collect_env"],
        "bare python": [python, "-I", "-c", "pass"],
        "import torch": [python, "-c", "import torch"],
    }
    if not args.no_check:
        commands["gpudoctor check"] = doctor + ["check", "--offline"]
    # no config file of this machine, no traffic beyond loopback
    env = dict(os.environ, NO_COLOR="1", GPUDOCTOR_LOOPBACK_ONLY="1", GPUDOCTOR_CONFIG="")
    compiled = compile_package(python, env)
    for cmd in commands.values():  # warm the page cache
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)

    times: dict[str, list[float]] = {k: [] for k in commands}
    cpu: dict[str, list[float]] = {k: [] for k in commands}
    floor: list[int] = []
    tree: list[int] = []
    tree_pss: list[int] = []
    codes = set()
    for i in range(args.runs):
        for name, cmd in commands.items():
            elapsed, used, code, maxrss, peak, peak_pss = timed(cmd, env, sample=name == "gpudoctor gate")
            times[name].append(elapsed)
            cpu[name].append(used)
            if name == "gpudoctor gate":
                floor.append(maxrss)
                tree.append(peak)
                tree_pss.append(peak_pss)
                codes.add(code)
        print(
            f"round {i + 1}: " + ", ".join(f"{k} {v[-1]:.3f} s ({cpu[k][-1]:.3f} s CPU)" for k, v in times.items()),
            flush=True,
        )

    med = {k: statistics.median(v) for k, v in times.items()}
    med_cpu = {k: statistics.median(v) for k, v in cpu.items()}
    print()
    print(f"interpreter:                    {python}")
    print(f"doctor bytecode:                {compiled}")
    print(f"rounds:                         {args.runs}, alternating (gate exit status: {sorted(codes)})")
    for k in med:
        print(f"median {k + ':':<24}{med[k]:.3f} s wall, {med_cpu[k]:.3f} s CPU")
    for kind, m in (("wall", med), ("CPU", med_cpu)):
        print(ratio_line(f"gate / collect_env ({kind})", m["gpudoctor gate"], m["collect_env"], 0.06))
        print(ratio_line(f"gate / bare python ({kind})", m["gpudoctor gate"], m["bare python"], 8))
        print(ratio_line(f"gate / import torch ({kind})", m["gpudoctor gate"], m["import torch"]))
        if "gpudoctor check" in m:
            print(ratio_line(f"check / collect_env ({kind})", m["gpudoctor check"], m["collect_env"], 0.8))
    print(
        f"gate peak PSS, doctor+children: {max(tree_pss) / 1024:.1f} MiB (sampled tree sum of PSS: shared pages "
        f"counted once; target <= 60 MiB)"
    )
    print(
        f"gate peak RSS, doctor+children: {max(tree) / 1024:.1f} MiB (sampled tree sum of VmRSS: counts a "
        f"forked child's copy-on-write pages twice)"
    )
    print(f"gate peak RSS, largest process: {max(floor) / 1024:.1f} MiB (wait4 ru_maxrss)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
