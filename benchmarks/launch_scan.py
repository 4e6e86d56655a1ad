"""What the ``launch`` collector's ``/proc`` scan costs (it reads every process's command line to find
JupyterHub and its single-user servers), against the ``platform`` collector it runs beside.

A fake root holds N processes (``/proc/<pid>/cmdline``, ``environ``, ``cgroup``), a few of them
single-user servers and one the hub; both collectors run on it ``--repeat`` times. Prints the median
time of each and their ratio, per N, and the live machine's figures once. Run:

    python benchmarks/launch_scan.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from gpudoctor.collect import CollectContext, CollectOptions
from gpudoctor.collect.launch import collect_launch
from gpudoctor.collect.platform import collect_platform
from gpudoctor.system import System
from gpudoctor.testing import fake_system


def fake_proc(root: Path, n: int) -> None:
    for pid in range(100, 100 + n):
        d = root / "proc" / str(pid)
        d.mkdir(parents=True)
        if pid % 250 == 0:
            cmd = b"/opt/conda/bin/python3\0/opt/conda/bin/jupyterhub-singleuser\0--ip=0.0.0.0\0"
        elif pid == 101:
            cmd = b"/usr/bin/python3\0/usr/local/bin/jupyterhub\0-f\0/etc/jupyterhub/jupyterhub_config.py\0"
        else:
            cmd = b"/usr/sbin/some-daemon\0--flag\0"
        (d / "cmdline").write_bytes(cmd)
        (d / "environ").write_bytes(b"PATH=/usr/bin\0LD_LIBRARY_PATH=/usr/local/cuda/lib64\0JUPYTERHUB_USER=u\0")
        (d / "cgroup").write_text("0::/system.slice/x.service\n")
    (root / "proc/sys/kernel").mkdir(parents=True, exist_ok=True)
    (root / "proc/sys/kernel/osrelease").write_text("6.8.0\n")


def median_ms(fn, ctx: CollectContext, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn(ctx)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    print(f"{'processes':>10} {'launch ms':>10} {'platform ms':>12} {'ratio':>7}")
    for n in (100, 1000, 4000):
        with tempfile.TemporaryDirectory() as tmp:
            fake_proc(Path(tmp), n)
            ctx = CollectContext(fake_system(tmp), CollectOptions())
            a = median_ms(collect_launch, ctx, args.repeat)
            b = median_ms(collect_platform, ctx, args.repeat)
            print(f"{n:>10} {a:>10.1f} {b:>12.1f} {a / b:>7.1f}")
    live = CollectContext(System.live(), CollectOptions())
    a = median_ms(collect_launch, live, args.repeat)
    b = median_ms(collect_platform, live, args.repeat)
    print(f"{'live':>10} {a:>10.1f} {b:>12.1f} {a / b:>7.1f}")


if __name__ == "__main__":
    main()
