"""``--format markdown``: a report to paste into a bug tracker (secrets redacted).

Same grouping as the console (:mod:`gpudoctor.render.layout`): the headline,
then a collapsible ``<details>`` block per area (open when something in it
needs attention) with its findings, and the numbered next steps.
"""

from __future__ import annotations

from gpudoctor import __version__
from gpudoctor.engine import Report
from gpudoctor.model import Finding, Status
from gpudoctor.redact import redact_text
from gpudoctor.render.layout import (
    ATTENTION,
    CONSEQUENCE,
    Layout,
    area_size,
    consequence_of,
    diagnosis_lines,
    layout,
    root_cause_shown,
)
from gpudoctor.render.text import GLYPHS, command_lines, evidence_lines, verdict_word
from gpudoctor.words import plural


def _md(text: str) -> str:
    return redact_text(text)


def _finding(lay: Layout, f: Finding, report: Report, verbose: bool, explain: bool) -> list[str]:
    lines = [f"- {GLYPHS[f.status]} **{f.status.value}** `{f.check}` — {_md(lay.title_of(f))}"]
    body: list[str] = []
    cause = None if verbose else root_cause_shown(f, report.findings)
    consequence = None if verbose else consequence_of(f, report.findings)
    if cause:
        body.append(f"Root cause and remedy: see `{cause}`.")
        body.extend(_md(line) for line in diagnosis_lines(f))
    elif consequence:
        line = CONSEQUENCE.format(check=f"`{consequence}`")
        body.append(line[0].upper() + line[1:] + ".")
    elif explain and f.explanation:
        body.append(redact_text(f.explanation))
    if f.fixes and f.status > Status.SKIP:
        body.append(f"Fix: `{lay.fix_command(f)}`")
    if verbose and f.commands:
        body.append("\n".join(["```", *command_lines(f), "```"]))
    if verbose and f.evidence:
        body.append(
            "\n".join(["<details><summary>evidence</summary>", "", "```", *evidence_lines(f), "```", "", "</details>"])
        )
    for chunk in body:
        lines += [""] + ["  " + ln if ln else "" for ln in chunk.splitlines()]
    return lines


def render_markdown(report: Report, verbose: bool = False) -> str:
    """The report as Markdown: headline, a ``<details>`` per area, next steps."""
    lay = layout(report)
    lines = [
        f"## gpudoctor {__version__} report",
        "",
        f"{GLYPHS[lay.verdict]} **{verdict_word(lay.verdict)}** — {_md(lay.headline)}",
        "",
    ]
    if lay.targets:
        lines += ["Targets: " + "; ".join(f"`[{label}]` `{redact_text(path)}`" for label, path in lay.targets), ""]
    for area in lay.areas:
        opened = " open" if area.worst in ATTENTION else ""
        lines += [
            f"<details{opened}><summary>{GLYPHS[area.worst]} <b>{area.title}</b> "
            f"({area_size(area)}): {area.counts_text}</summary>",
            "",
        ]
        shown = area.findings if verbose else area.attention + area.info
        for f in shown:
            lines += _finding(lay, f, report, verbose, explain=verbose or f.status in ATTENTION)
        if not verbose:
            if area.ok:
                lines.append(f"- {plural(len(area.ok), 'check')} ok: " + ", ".join(f"`{f.check}`" for f in area.ok))
            for g in area.skipped:
                lines.append(f"- not applicable: {_md(g.reason)} (" + ", ".join(f"`{c}`" for c in g.checks) + ")")
        lines += ["", "</details>", ""]
    lines.append(f"{plural(lay.total, 'finding')}: {lay.counts_text}")
    if lay.network is not None:
        lines += ["", f"Network: {_md(lay.network)}"]
    if lay.next_steps:
        lines += ["", "### Next steps", ""]
        for i, step in enumerate(lay.next_steps, 1):
            cmd = redact_text(step.command)
            where = f"{step.check}; {step.note}" if step.note else step.check
            if not step.is_command:
                lines.append(f"{i}. {cmd}")
            elif "\n" in cmd:
                lines += [f"{i}. ({where})", "", "   ```", *("   " + ln for ln in cmd.splitlines()), "   ```"]
            else:
                lines.append(f"{i}. `{cmd}` ({where})")
    return "\n".join(lines).rstrip() + "\n"
