#!/usr/bin/env python3
"""Replay the field corpus and print right/wrong per area and per kind.

Usage (from the checkout, with gpudoctor installed in the interpreter that runs it):

    python scripts/field_summary.py            # cases, and the explain logs when present
    python scripts/field_summary.py --wrong    # also list every wrong case with the reason
    python scripts/field_summary.py --format json

The cases are tests/field/cases/<area>/<name>/ (see tests/field/README.md); the same judge
runs in tests/field/test_cases.py. Exit status 0 whatever the score (it is a report).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

FIELD = Path(__file__).resolve().parents[1] / "tests" / "field"
sys.path.insert(0, str(FIELD))

from field_replay import Result, judge_all  # noqa: E402


def _logs() -> list[Result]:
    """The explain log corpus, when tests/field/logs_replay.py exists."""
    if not (FIELD / "logs_replay.py").exists():
        return []
    import logs_replay

    return list(logs_replay.judge_all())


def _table(title: str, results: list, key) -> list[str]:
    groups: dict[str, list] = defaultdict(list)
    for r in results:
        groups[key(r)].append(r)
    width = max([len(k) for k in groups] + [len(title)])
    lines = [f"{title:<{width}}  right / total"]
    for name in sorted(groups):
        rs = groups[name]
        right = sum(r.right for r in rs)
        lines.append(f"{name:<{width}}  {right:>5} / {len(rs):<5} {100 * right / len(rs):5.1f} %")
    right = sum(r.right for r in results)
    if results:
        lines.append(f"{'all':<{width}}  {right:>5} / {len(results):<5} {100 * right / len(results):5.1f} %")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wrong", action="store_true", help="list every wrong case with the reason")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    args = parser.parse_args(argv)
    cases = judge_all()
    logs = _logs()
    if args.format == "json":
        doc = {
            "cases": [r.__dict__ for r in cases],
            "logs": [{k: getattr(r, k) for k in ("area", "kind", "name", "right", "why")} for r in logs],
        }
        print(json.dumps(doc, indent=2))
        return 0
    print(f"field cases: {len(cases)}")
    print("\n".join(_table("area", cases, lambda r: r.area)))
    print()
    print("\n".join(_table("kind", cases, lambda r: r.kind)))
    if logs:
        print(f"\nexplain logs: {len(logs)}")
        print("\n".join(_table("area", logs, lambda r: r.area)))
    if args.wrong:
        print()
        for r in cases + logs:
            if not r.right:
                print(f"WRONG {r.area}/{r.name}{' (xfail)' if getattr(r, 'xfail', False) else ''}: {r.why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
