"""Benchmark: probing 12 mirrors concurrently vs the slowest one alone vs one after another.

Starts 12 fake PyPI mirrors on 127.0.0.1 (never a real host) with injected
response delays spread over 50-800 ms, writes a catalogue FILE that replaces
the built-in one with them, and times, in this one process:

- concurrent: gpudoctor's probe of all 12 at once (what `gpudoctor mirrors` does);
- slowest single: the same probe of the slowest mirror alone (the floor);
- sequential: each mirror probed alone, one after another (the old way), summed.

Target (issue 5): concurrent <= 1.2 x slowest single + 100 ms.

Run: .venv/bin/python benchmarks/mirrors.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from gpudoctor.mirrors.catalogue import load
from gpudoctor.mirrors.gather import candidate_targets
from gpudoctor.mirrors.probe import probe_all
from gpudoctor.mirrors.testserver import FakeMirror

N = 12
DELAYS_MS = [round(50 + i * (800 - 50) / (N - 1)) for i in range(N)]
BUDGET_S = 10.0  # generous: the benchmark must not cut anything short
TIMEOUT_S = 5.0


def timed(targets) -> tuple:
    start = time.perf_counter()
    results = probe_all(targets, budget_s=BUDGET_S, timeout_s=TIMEOUT_S)
    return time.perf_counter() - start, results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="repeat and report the median (default 3)")
    args = ap.parse_args()
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        servers = [stack.enter_context(FakeMirror(delay_ms=d)) for d in DELAYS_MS]
        rows = [
            f'[[mirror]]\nname = "m{i:02d}-{d}ms"\npypi = "{s.url}/simple"\nsource = "benchmark"\n'
            for i, (d, s) in enumerate(zip(DELAYS_MS, servers))
        ]
        path = Path(tmp, "catalogue.toml")
        path.write_text("replace = true\n\n" + "\n".join(rows))
        cat = load(str(path))
        targets, _ = candidate_targets(cat, ["pip"])
        assert all(t.base_url.startswith("http://127.0.0.1:") for t in targets)
        slowest = targets[-1]
        timed(targets[:1])  # warm-up (imports, SSL context)
        conc, single, seq = [], [], []
        for _ in range(args.rounds):
            wall, results = timed(targets)
            bad = [r for r in results if r.status != "ok"]
            if bad:
                print(f"unexpected probe failure: {bad[0].name}: {bad[0].status} {bad[0].reason}", file=sys.stderr)
                return 2
            conc.append(wall)
            single.append(timed([slowest])[0])
            seq.append(sum(timed([t])[0] for t in targets))
    c, s, q = (statistics.median(x) for x in (conc, single, seq))
    limit = 1.2 * s + 0.100
    print(
        f"mirrors: {N} local servers, delays {DELAYS_MS[0]}-{DELAYS_MS[-1]} ms, 3 requests each, "
        f"median of {args.rounds} rounds"
    )
    print(f"concurrent (all {N}):     {c * 1000:8.0f} ms")
    print(f"slowest mirror alone:     {s * 1000:8.0f} ms   concurrent / slowest = {c / s:.2f}x")
    print(f"sequential (sum of {N}):  {q * 1000:8.0f} ms   sequential / concurrent = {q / c:.1f}x")
    print(f"target: concurrent <= 1.2 x slowest + 100 ms = {limit * 1000:.0f} ms -> {'PASS' if c <= limit else 'FAIL'}")
    return 0 if c <= limit else 1


if __name__ == "__main__":
    sys.exit(main())
