#!/usr/bin/env python3
"""Run a command while every CPU is kept busy, to prove a test suite is green on a loaded machine.

Usage (from the checkout):

    python scripts/cpu-burner.py -- python -m pytest -m robustness
    python scripts/cpu-burner.py --procs 4 -- COMMAND ...

Starts ``--procs`` busy-looping processes (default: one per CPU this process may use), runs
COMMAND, stops the burners (their own process group, so nothing outlives the run) and exits
with COMMAND's status. Prints one line with the burners' count and the command's wall time.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

BURN = "while True: pass"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--procs", type=int, default=len(os.sched_getaffinity(0)), help="burners to start")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (cpu-burner.py -- COMMAND ...)")
    if args.procs < 0:
        parser.error("--procs must be >= 0")
    burners = [
        subprocess.Popen([sys.executable, "-c", BURN], start_new_session=True, stdin=subprocess.DEVNULL)
        for _ in range(args.procs)
    ]
    start = time.monotonic()
    try:
        rc = subprocess.call(command)
    except KeyboardInterrupt:
        rc = 130
    finally:
        for proc in burners:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait()
    print(f"cpu-burner: {args.procs} burners, command exit {rc}, {time.monotonic() - start:.0f} s", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
