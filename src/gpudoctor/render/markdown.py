"""``--format markdown``: a report to paste into a bug tracker (secrets redacted)."""

from __future__ import annotations

from gpudoctor import __version__
from gpudoctor.engine import Report
from gpudoctor.redact import redact_text
from gpudoctor.render.text import GLYPHS, evidence_lines, finding_title


def render_markdown(report: Report, verbose: bool = False) -> str:
    """The report as Markdown: a summary table, then details for anything not ok."""
    lines = [f"## gpudoctor {__version__} report", ""]
    counts = ", ".join(f"{n} {s}" for s, n in report.counts().items() if n)
    lines += [f"Overall: **{report.verdict.value}** ({counts})", "", "| status | check | summary |", "|---|---|---|"]
    for f in report.findings:
        summary = redact_text(finding_title(f)).replace("|", "\\|")
        lines.append(f"| {GLYPHS[f.status]} {f.status.value} | `{f.check}` | {summary} |")
    details = [f for f in report.findings if f.status.value not in ("ok",) and (f.explanation or verbose)]
    if details:
        lines += ["", "### Details"]
    for f in details:
        lines += ["", f"#### {f.status.value}: `{f.check}` — {redact_text(finding_title(f))}", ""]
        if f.explanation:
            lines += [redact_text(f.explanation), ""]
        if f.fixes:
            lines += [f"Fix: `gpudoctor fix {' '.join(f.fixes)}`", ""]
        if verbose and f.evidence:
            lines += ["<details><summary>evidence</summary>", "", "```"]
            lines += evidence_lines(f)
            lines += ["```", "", "</details>"]
    return "\n".join(lines).rstrip() + "\n"
