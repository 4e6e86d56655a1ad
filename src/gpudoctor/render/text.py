"""Pieces shared by the console and markdown renderers."""

from __future__ import annotations

import json

from gpudoctor.model import Finding, Status
from gpudoctor.redact import redact_text, redact_value

#: one glyph per status, ASCII-safe fallbacks in PLAIN_GLYPHS
GLYPHS = {Status.OK: "✓", Status.INFO: "i", Status.SKIP: "-", Status.WARN: "!", Status.FAIL: "✗", Status.ERROR: "‼"}
PLAIN_GLYPHS = {
    Status.OK: "[ok]",
    Status.INFO: "[info]",
    Status.SKIP: "[skip]",
    Status.WARN: "[warn]",
    Status.FAIL: "[FAIL]",
    Status.ERROR: "[ERROR]",
}
COLOURS = {
    Status.OK: "green",
    Status.INFO: "blue",
    Status.SKIP: "dim",
    Status.WARN: "yellow",
    Status.FAIL: "red",
    Status.ERROR: "magenta",
}


def verdict_word(verdict: Status) -> str:
    """A report's overall verdict in words: ``unknown`` for ``skip`` (nothing was judged)."""
    return "unknown" if verdict is Status.SKIP else verdict.value


def finding_title(f: Finding) -> str:
    """The one-line summary, prefixed with the target when there is one."""
    if f.target and f.target != "current":
        return f"[{f.target}] {f.summary}"
    return f.summary


def evidence_lines(f: Finding) -> list[str]:
    """Evidence as ``key: value`` lines (multi-line values indented), redacted."""
    out: list[str] = []
    for key, value in redact_value(dict(f.evidence)).items():
        if isinstance(value, str) and "\n" in value:
            out.append(f"{key}:")
            out.extend("    " + line for line in value.rstrip().splitlines())
        elif isinstance(value, (list, dict)):
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                out.append(f"{key}:")
                out.extend(f"    {v}" for v in value) if value else out.append("    (none)")
            else:
                out.append(f"{key}: {json.dumps(value)}")
        elif value is None:
            out.append(f"{key}: (unknown)")
        elif value == "":
            out.append(f"{key}: (empty)")
        else:
            out.append(f"{key}: {value}")
    return out


def command_lines(f: Finding) -> list[str]:
    """The finding's :attr:`~Finding.commands` as ``$ text   # purpose (needs root)`` lines
    (continuation lines indented), redacted; empty when it carries none."""
    out: list[str] = []
    for c in f.commands:
        first, *rest = redact_text(c.text).splitlines() or [""]
        why = "; ".join(x for x in (c.purpose, c.note) if x)
        out.append(f"$ {first}" + (f"   # {why}" if why else ""))
        out.extend(f"  {ln}" for ln in rest)
    return out
