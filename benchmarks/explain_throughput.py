#!/usr/bin/env python3
"""Benchmark: how fast ``gpudoctor explain`` reads a long log, and what its pre-filter buys.

Builds a synthetic log of ``--lines`` lines (a healthy training log repeated, with one
known error at the end) and times, in the same process, ``--runs`` times each:

- ``baseline``: reading and splitting the same bytes into lines (the floor);
- ``explain``: :func:`gpudoctor.explain_run.explain_file` (needle pre-filter on);
- ``no-prefilter``: the same matcher with every signature's needles removed, i.e. every
  regex searched on every line.

Prints the median wall time of each, lines per second, and the ratios
``explain / baseline`` and ``no-prefilter / explain``, plus peak RSS growth while
explaining (the matcher keeps only its window, so it must not grow with the log).

Usage:
    python benchmarks/explain_throughput.py [--lines N] [--runs N]
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import statistics
import tempfile
import time
from pathlib import Path

from gpudoctor.explain import Matcher, load_signatures
from gpudoctor.explain_run import explain_file, explain_stream

HEALTHY = Path(__file__).resolve().parents[1] / "tests/fixtures/explain/training-ok.log"


def _time(fn, runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    block = HEALTHY.read_text()
    per = len(block.splitlines())
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "train.log"
        with log.open("w") as fh:
            for _ in range(max(1, args.lines // per)):
                fh.write(block)
            fh.write("RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error.\n")
        n = len(log.read_text().splitlines())

        def baseline() -> None:
            with log.open("rb") as fh:
                while True:
                    data = fh.read(64 * 1024)
                    if not data:
                        break
                    data.decode("utf-8", "replace").split("\n")

        def explain() -> None:
            result = explain_file(str(log))
            assert result.matches[0].signature.id == "dataloader.bus-error"

        bare = [dataclasses.replace(s, needles=(), any_needles=()) for s in load_signatures()]

        def no_prefilter() -> None:
            with log.open("rb") as fh:
                result = explain_stream(fh, Matcher(bare))
            assert result.matches[0].signature.id == "dataloader.bus-error"

        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t_base = _time(baseline, args.runs)
        t_explain = _time(explain, args.runs)
        rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t_bare = _time(no_prefilter, args.runs)
    print(f"log: {n} lines, {len(load_signatures())} signatures, median of {args.runs} runs")
    for name, t in (("baseline (read+split)", t_base), ("explain", t_explain), ("explain, no pre-filter", t_bare)):
        print(f"  {name:<24} {t * 1000:9.1f} ms  {n / t:12,.0f} lines/s")
    print(f"  explain / baseline      {t_explain / t_base:6.1f}x")
    print(f"  no-prefilter / explain  {t_bare / t_explain:6.1f}x (speed-up of the needle pre-filter)")
    print(f"  peak RSS growth while explaining: {(rss1 - rss0) / 1024:.1f} MiB")


if __name__ == "__main__":
    main()
