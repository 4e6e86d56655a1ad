#!/usr/bin/env python3
"""Benchmark: what redaction costs on long lines, and what its pre-filters buy.

Times, in the same process, ``--runs`` times each, on texts of ``--mb`` megabytes (a pip.conf
with one huge index-url line, prose, binary junk, a JSON string, and prose that does hold secret
names so every rule runs):

- ``baseline``: ``text.lower()`` (one pass over the text: the floor);
- ``redact``: :func:`gpudoctor.redact.redact_file_text` (rules skipped on text that cannot
  match them, URL credentials tried only at ``://``);
- ``every-rule``: the same rules run unconditionally, as before the pre-filters.

Prints the median of each and the ratios ``redact / baseline`` and ``every-rule / redact``.

Usage:
    python benchmarks/redact.py [--mb N] [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import time

from gpudoctor import redact as r


def every_rule(text: str) -> str:
    """The secret rules and the escape rule with no pre-filter, in redact's order."""
    text = r._BARE_TOKEN.sub(r.REDACTED, text)
    text = r._URL_USERINFO.sub(r._userinfo, text)
    text = r._QUERY_PARAM.sub(r._query, text)
    text = r._CONDA_TOKEN.sub(lambda m: f"{m.group('pre')}{r.REDACTED}", text)
    text = r._AUTH_SCHEME.sub(lambda m: f"{m.group('scheme')} {r.REDACTED}", text)
    text = r._QUOTED_PAIR.sub(r._pair, text)
    text = r._INI_LINE.sub(r._ini, text)
    text = r._YAML_LINE.sub(r._ini, text)
    text = r._NETRC.sub(lambda m: f"{m.group('lead')}{m.group('kw')} {r.REDACTED}", text)
    text = r._FLAG_VALUE.sub(r._flag, text)
    return r._ESCAPES.sub("", r._INLINE_ASSIGN.sub(r._assign, text))


def _median(fn, text: str, runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn(text)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    n = int(args.mb * 1_000_000)
    texts = {
        "pip.conf, one huge line": "[global]\nindex-url = https://m.example.org/" + "a" * n + "\n",
        "prose": ("lorem ipsum dolor sit amet, x=1 --foo bar " * (n // 42 + 1))[:n],
        "binary junk": ("\x00\x01\xff\xfe" * (n // 4 + 1))[:n],
        "a JSON string": '{"a": "' + "b" * n + '"}',
        "prose with secret names": ("see key=1 --token-file f https://x.org/?a=b lorem " * (n // 50 + 1))[:n],
    }
    print(f"{'text':26} {'baseline':>9} {'redact':>9} {'every-rule':>11} {'redact/base':>12} {'every/redact':>13}")
    for name, text in texts.items():
        base = _median(str.lower, text, args.runs)
        fast = _median(r.redact_file_text, text, args.runs)
        slow = _median(every_rule, text, args.runs)
        print(f"{name:26} {base:9.3f} {fast:9.3f} {slow:11.3f} {fast / base:12.1f} {slow / fast:13.1f}")


if __name__ == "__main__":
    main()
