"""Output of ``gpudoctor explain``: console, Markdown and JSON (secrets redacted in all)."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.padding import Padding
from rich.text import Text

from gpudoctor.explain import Match, match_finding
from gpudoctor.explain_run import ExplainResult
from gpudoctor.redact import redact_text
from gpudoctor.render.console import is_plain, render_console
from gpudoctor.render.text import COLOURS, GLYPHS, PLAIN_GLYPHS, command_lines

__all__ = ["NO_MATCH_HINT", "render_explain_console", "render_explain_json", "render_explain_markdown"]

NO_MATCH_HINT = "Run `gpudoctor check` to examine this machine anyway."
NOT_HERE_HINT = (
    "The confirming checks find nothing wrong on this machine: if the log comes from another machine, "
    "container or environment, run `gpudoctor explain` there (or `--python PATH` for another interpreter)."
)


def _nothing_found_here(report: Any) -> bool:  # ExplainResult.confirmation.report: object (a Report)
    from gpudoctor.model import Status

    return not any(f.status >= Status.WARN for f in report.findings)


def _where(m: Match) -> str:
    where = f"line {m.line}" + (f" of {m.stream}" if m.stream else "")
    return where + (f", seen {m.count} times" if m.count > 1 else "")


def _headline(result: ExplainResult) -> str:
    n = len(result.explanation.matches)
    read = f"{result.explanation.lines_read} line{'' if result.explanation.lines_read == 1 else 's'} read"
    if not n:
        return f"gpudoctor explain: no known error found in {result.source} ({read})."
    return (
        f"gpudoctor explain: {result.source}: {n} known error{'' if n == 1 else 's'} recognised ({read}), "
        f"most specific first"
    )


def render_explain_console(result: ExplainResult, console: Console, verbose: bool = False) -> None:
    """Write the diagnosis, then the confirming checks' findings, to ``console``."""
    plain = is_plain(console)
    console.print(Text(redact_text(_headline(result)), style="bold"))
    if not result.explanation.matches:
        console.print(NO_MATCH_HINT)
        return
    for m in result.explanation.matches:
        f = match_finding(m)
        console.print()
        line = Text()
        line.append(f"{PLAIN_GLYPHS[f.status] if plain else GLYPHS[f.status]} ", style=COLOURS[f.status] + " bold")
        line.append(m.signature.id, style="bold")
        line.append(f"  {f.summary}")
        console.print(line)
        console.print(Text(f"    {_where(m)}: {redact_text(m.text.strip())[:300]}", style="dim"))
        if plain:
            console.print(Text("\n".join("    " + ln if ln else "" for ln in f.explanation.splitlines())))
        else:
            from rich.markdown import Markdown

            console.print(Padding(Markdown(f.explanation), (0, 0, 0, 4)))
        if f.commands:
            console.print(Text("\n".join("    " + ln for ln in command_lines(f)), style="cyan"))
        if verbose and m.values:
            console.print(Text("\n".join(f"    {k}: {redact_text(v)}" for k, v in m.values.items()), style="dim"))
    conf = result.confirmation
    console.print()
    if conf is None:
        return
    if conf.report is None:
        if conf.check_ids:
            console.print(Text(f"To confirm on this machine: gpudoctor check {' '.join(conf.check_ids)}", style="bold"))
        else:
            console.print("No installed check can confirm this on this machine.")
        return
    console.print(Text(f"Confirming on this machine: gpudoctor check {' '.join(conf.check_ids)}", style="bold"))
    render_console(conf.report, console, verbose)  # type: ignore[arg-type]
    if _nothing_found_here(conf.report):
        console.print(NOT_HERE_HINT)
    if verbose and conf.unresolved:
        console.print(Text(f"(also named, not installed here: {', '.join(conf.unresolved)})", style="dim"))


def render_explain_markdown(result: ExplainResult, verbose: bool = False) -> str:
    """The result as Markdown (paste-ready for an issue)."""

    lines: list[str] = ["## gpudoctor explain", "", _headline(result)]
    if not result.explanation.matches:
        lines += ["", NO_MATCH_HINT]
    for m in result.explanation.matches:
        f = match_finding(m)
        lines += [
            "",
            f"### {GLYPHS[f.status]} {f.status.value}: `{m.signature.id}` — {f.summary}",
            "",
            f"Matched at {_where(m)}:",
            "",
            "```text",
            redact_text(m.text.strip()),
            "```",
            "",
            f.explanation,
        ]
        if f.commands:
            lines += ["", "Commands:", "", "```", *command_lines(f), "```"]
        if verbose and m.values:
            lines += [""] + [f"- `{k}`: `{redact_text(v)}`" for k, v in m.values.items()]
    conf = result.confirmation
    if conf is not None and result.explanation.matches:
        lines += ["", "## Confirming checks", ""]
        if conf.report is None:
            lines.append(
                f"To confirm: `gpudoctor check {' '.join(conf.check_ids)}`"
                if conf.check_ids
                else "No installed check can confirm this on this machine."
            )
        else:
            lines += [
                f"`gpudoctor check {' '.join(conf.check_ids)}`",
                "",
                _nested_markdown(conf.report, verbose),
            ]
            if _nothing_found_here(conf.report):
                lines += ["", NOT_HERE_HINT]
    return "\n".join(lines).rstrip() + "\n"


def render_explain_json(result: ExplainResult) -> str:
    """The result as indented JSON (see :meth:`ExplainResult.to_json`)."""
    return json.dumps(result.to_json(), indent=2) + "\n"


def _nested_markdown(report: object, verbose: bool) -> str:
    """The confirming checks' report as Markdown one heading level down."""
    from gpudoctor.render.markdown import render_markdown

    text: str = render_markdown(report, verbose)  # type: ignore[arg-type]
    return text.replace("## gpudoctor", "### gpudoctor", 1).rstrip("\n")
