"""Benchmark: what checking every address and redirect costs a probe (gpudoctor.mirrors.netguard).

One fake PyPI mirror on 127.0.0.1 (never a real host), reached directly and through one
302 to a second loopback server. Each probe (3 requests on one connection) runs, in this
one process, alternately:

- guarded: the prober as shipped (policy checks on the URL, each redirect and each address);
- baseline: the same prober with a plain ``httpx.HTTPTransport`` (no address check; the
  redirect checks of the prober still run, they are a few string operations).

Prints the median wall time per probe of each and the ratio guarded / baseline.

Run: .venv/bin/python benchmarks/netguard.py [--rounds 30]
"""

from __future__ import annotations

import argparse
import os
import ssl
import statistics
import time

import httpx

from gpudoctor.mirrors.netguard import NetPolicy
from gpudoctor.mirrors.probe import ProbeTarget, make_ssl_context, probe_one
from gpudoctor.mirrors.testserver import FakeMirror


def timed(target: ProbeTarget, policy: NetPolicy, ctx: ssl.SSLContext, plain: bool) -> float:
    start = time.perf_counter()  # the transport is made inside the timing, as the prober makes its own
    transport = httpx.HTTPTransport(verify=ctx, trust_env=False) if plain else None
    res = probe_one(target, time.monotonic() + 10.0, 5.0, 3, ctx, policy=policy, transport=transport)
    wall = (time.perf_counter() - start) * 1000.0
    if res.status != "ok":
        raise SystemExit(f"probe failed: {res.status} {res.reason}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()
    os.environ["GPUDOCTOR_LOOPBACK_ONLY"] = "1"
    policy = NetPolicy.from_env()
    ctx = make_ssl_context()  # one per run, as probe_all does
    with FakeMirror() as mirror, FakeMirror(redirect_to=None) as hop:
        hop.redirect_to = mirror.url + "{path}"
        cases = {
            "direct": ProbeTarget("m", "pip", "pypi", mirror.url + "/simple", "pypi"),
            "one redirect": ProbeTarget("r", "pip", "pypi", hop.url + "/simple", "pypi"),
        }
        print(f"netguard: 127.0.0.1 mirrors, 3 requests per probe, median of {args.rounds} probes each")
        for name, target in cases.items():
            guarded, plain = [], []
            for _ in range(args.rounds):
                guarded.append(timed(target, policy, ctx, plain=False))
                plain.append(timed(target, policy, ctx, plain=True))
            g, p = statistics.median(guarded), statistics.median(plain)
            print(f"{name:13s} guarded {g:7.2f} ms   baseline {p:7.2f} ms   guarded / baseline = {g / p:.2f}x")


if __name__ == "__main__":
    main()
