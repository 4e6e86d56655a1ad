"""How much the machine-level collectors cost: ``gpu_holders`` (a /proc scan) and ``kernel_log``
(parsing the bounded kernel log of two boots), on generated inputs of the sizes a busy GPU node has.

    python benchmarks/machine_collectors.py [--processes 3000] [--lines 200000]

Prints, for each, the time per unit and the ratio to the cheapest way to read the same input
(listing every /proc/<pid>/fd with os.scandir; splitting the log into lines), so the figures
compare across machines. No timing is asserted.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from gpudoctor.collect import CollectContext, CollectOptions
from gpudoctor.collect.gpu_holders import collect_gpu_holders
from gpudoctor.collect.kernel_log import parse_messages, parse_xid_lines
from gpudoctor.testing import fake_system


def _tree(root: Path, n: int) -> None:
    (root / "proc").mkdir(parents=True)
    (root / "proc/uptime").write_text("90000.0 1.0\n")
    for pid in range(1, n + 1):
        d = root / "proc" / str(pid)
        (d / "fd").mkdir(parents=True)
        (d / "comm").write_text("python\n")
        (d / "cmdline").write_text("python\0train.py\0")
        (d / "stat").write_text(f"{pid} (python) S 1 {pid} {pid} 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0\n")
        (d / "cgroup").write_text("0::/user.slice\n")
        for fd in range(8):
            target = "/dev/nvidia0" if pid % 50 == 0 and fd == 3 else f"/tmp/file{fd}"
            os.symlink(target, d / "fd" / str(fd))


def _best(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--processes", type=int, default=3000)
    ap.add_argument("--lines", type=int, default=200000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _tree(root, args.processes)
        ctx = CollectContext(fake_system(root), CollectOptions())
        facts = collect_gpu_holders(ctx)
        t_collect = _best(lambda: collect_gpu_holders(ctx))

        def scan() -> None:
            for pid in os.scandir(root / "proc"):
                if pid.name.isdigit():
                    for fd in os.scandir(Path(pid.path) / "fd"):
                        os.readlink(fd.path)

        t_scan = _best(scan)
        live = CollectContext(fake_system("/"), CollectOptions())
        n_live = collect_gpu_holders(live).scanned
        t_live = _best(lambda: collect_gpu_holders(live))
        print(f"gpu_holders on this machine's /proc: {n_live} processes: {t_live * 1000:.0f} ms")
        print(
            f"gpu_holders on a fake root (every path resolved inside the jail): {args.processes} processes, {len(facts.holders)} holders: {t_collect * 1000:.0f} ms "
            f"({t_collect / args.processes * 1e6:.0f} us/process), {t_collect / t_scan:.1f}x a bare scandir+readlink walk"
        )
    noise = "[ 1234.567890] usb 1-1: new high-speed USB device number 4 using xhci_hcd\n"
    xid = "[ 5031.112233] NVRM: Xid (PCI:0000:18:00): 13, pid=2271, name=python3, Graphics SM Warp Exception\n"
    aer = "[ 5032.000000] pcieport 0000:00:02.0: AER: Corrected error received: 0000:02:00.0\n"
    text = "".join(xid if i % 1000 == 0 else aer if i % 997 == 0 else noise for i in range(args.lines))
    t_parse = _best(lambda: (parse_xid_lines(text), parse_messages(text, 0)))
    t_split = _best(lambda: text.splitlines())
    print(
        f"kernel_log: {args.lines} lines ({len(text) / 1e6:.1f} MB): {t_parse * 1000:.0f} ms "
        f"({t_parse / args.lines * 1e6:.2f} us/line), {t_parse / t_split:.0f}x splitting the lines"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
